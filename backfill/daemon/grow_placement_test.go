package daemon

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// An elastic job's extra jobs go only where its owner let it run: never
// onto a node its --exclude names (a tester's finding on the lab: a d2 job
// submitted with -x n1,n2 was lent GPUs of n1 and n2), and, when it asks
// node features (--constraint), which the daemon does not evaluate, only
// onto its own nodes; when its placement cannot be read it is not grown.
// The fake's nodes: n1, n2 v100; n3, n4 t4; 4 GPUs each.
func TestExtraJobsGoOnlyWhereTheJobsOwnerLetItRun(t *testing.T) {
	tests := []struct {
		name  string
		place func(td *testDaemon, j *fakeJob)
		want  []string // nodes extra jobs are submitted onto
	}{
		{name: "no --exclude: the fastest idle GPUs, n2's v100s", place: func(*testDaemon, *fakeJob) {}, want: []string{"n2"}},
		{name: "--exclude of a node it would not be grown onto changes nothing",
			place: func(_ *testDaemon, j *fakeJob) { j.excNodes = "n4" }, want: []string{"n2"}},
		{name: "--exclude=n2: the t4s of n3 and n4 instead",
			place: func(_ *testDaemon, j *fakeJob) { j.excNodes = "n2" }, want: []string{"n3", "n4"}},
		{name: "--exclude=n[2-4]: nowhere",
			place: func(_ *testDaemon, j *fakeJob) { j.excNodes = "n[2-4]" }, want: nil},
		{name: "--constraint: only its own nodes, which are full",
			place: func(_ *testDaemon, j *fakeJob) { j.features = "v100" }, want: nil},
		{name: "--constraint with idle GPUs on its own node: grown there",
			place: func(td *testDaemon, j *fakeJob) { j.features, j.gpusPerNode = "v100", 2 }, want: []string{"n1"}},
		{name: "moved to n1 by this daemon, which excluded n3 and n4 (its owner n2): grown onto n3 and n4, not n2",
			place: func(td *testDaemon, j *fakeJob) {
				j.excNodes = "n[2-4]"
				td.put(t, backfillstore.Moved{Job: "10", From: []string{"n3", "n4"}, Owner: []string{"n2"},
					Set: []string{"n2", "n3", "n4"}, Since: td.now, State: backfillstore.MoveRan})
			}, want: []string{"n3", "n4"}},
		{name: "a list other than the one this daemon set is its owner's, all of it",
			place: func(td *testDaemon, j *fakeJob) {
				j.excNodes = "n[2-4]"
				td.put(t, backfillstore.Moved{Job: "10", From: []string{"n3", "n4"}, Set: []string{"n3", "n4"},
					Since: td.now, State: backfillstore.MoveRan})
			}, want: nil},
		{name: "started while kept off n2 (keep_off_pinned): grown onto n2",
			place: func(td *testDaemon, j *fakeJob) {
				j.excNodes = "n2"
				td.put(t, backfillstore.KeptOff{Job: "10", Nodes: []string{"n2"}, Set: []string{"n2"}, Types: []string{"v100"}, Since: td.now})
			}, want: []string{"n2"}},
		{name: "kept off n2, but its owner then set the list: n2 is the owner's",
			place: func(td *testDaemon, j *fakeJob) {
				j.excNodes = "n2"
				td.put(t, backfillstore.KeptOff{Job: "10", Set: []string{"n2"}, Since: td.now, Released: true})
			}, want: []string{"n3", "n4"}},
		{name: "its placement unreadable (squeue fails): not grown",
			place: func(td *testDaemon, _ *fakeJob) { td.fake.placementsFail = "slurm_load_jobs error: Socket timed out" }, want: nil},
		{name: "its excluded nodes do not read as a host list: not grown",
			place: func(_ *testDaemon, j *fakeJob) { j.excNodes = "n[2-" }, want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, "")
			// d2: it may grow onto any type, the fastest first.
			j := td.fake.running("10", "es-req min=1 max=4 lw=16 d2", "n1", 4, 2*time.Hour, rendezvous(t, "10"))
			td.fake.set(func() { tc.place(td, j) })
			td.cycle(t)
			td.wantExtrasOn(t, tc.want)
		})
	}
}

// put stores a move or keep-off record (t fails on a database error).
func (td *testDaemon) put(t *testing.T, rec any) {
	t.Helper()
	var err error
	switch r := rec.(type) {
	case backfillstore.Moved:
		err = td.db.PutMoved(context.Background(), r)
	case backfillstore.KeptOff:
		err = td.db.PutKeptOff(context.Background(), r)
	default:
		t.Fatalf("put: %T is not a record", rec)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// wantExtrasOn fails t unless the extra jobs submitted so far went onto
// exactly the nodes want (sorted; nil: none).
func (td *testDaemon) wantExtrasOn(t *testing.T, want []string) {
	t.Helper()
	var got []string
	for _, c := range td.fake.commands("sbatch") {
		got = append(got, argValue(c, "nodelist"))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("extra jobs submitted onto %q, want %q (%q)", got, want, td.fake.commands("sbatch"))
	}
}

// squeue failing for the running jobs' placements is warned about once
// while it fails (not every cycle: a helper counted 12 warnings in 12 s at
// a 1 s poll), said once when it reads again, and warned about again when
// it fails again.
func TestUnreadableRunningPlacementsAreWarnedAboutOnce(t *testing.T) {
	td := newTestDaemon(t, "")
	var logs bytes.Buffer
	td.Daemon.log = hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true})
	td.fake.running("10", "es-req min=1 max=4 lw=16 d2", "n1", 4, 2*time.Hour, rendezvous(t, "10"))
	const failed, again = "the running jobs' excluded nodes and features cannot be read", "the running jobs' excluded nodes and features read again"
	td.fake.set(func() { td.fake.placementsFail = "slurm_load_jobs error: Socket timed out" })
	for range 3 {
		td.cycle(t)
		td.advance(time.Second)
	}
	if n := countLogs(t, &logs, failed, ""); n != 1 {
		t.Fatalf("%d warnings over three cycles, want 1:\n%s", n, logs.String())
	}
	td.wantExtrasOn(t, nil)
	td.fake.set(func() { td.fake.placementsFail = "" })
	td.cycle(t)
	td.advance(time.Second)
	td.cycle(t)
	if n := countLogs(t, &logs, again, ""); n != 1 {
		t.Errorf("%d notes that they read again over two cycles, want 1:\n%s", n, logs.String())
	}
	td.fake.set(func() { td.fake.placementsFail = "slurm_load_jobs error: Socket timed out" })
	td.cycle(t)
	if n := countLogs(t, &logs, failed, ""); n != 2 {
		t.Errorf("%d warnings, want a second one once they fail again after reading:\n%s", n, logs.String())
	}
}

// A running elastic job that is a job array's task or a heterogeneous
// job's component (squeue's %i prints it otherwise than its id) is never
// grown: its running placement is not read as its own (slurmcli.WholeJobs).
// The same job standing alone grows onto the idle node.
func TestAnArrayTaskIsNeverGrown(t *testing.T) {
	for _, tc := range []struct {
		printed string
		want    []string
	}{{"", []string{"n2"}}, {"9_1", nil}, {"9+1", nil}} {
		t.Run("printed as "+tc.printed, func(t *testing.T) {
			td := newTestDaemon(t, "")
			j := td.fake.running("10", "es-req min=1 max=4 lw=16 d2", "n1", 4, 2*time.Hour, rendezvous(t, "10"))
			td.fake.set(func() { j.printedID = tc.printed })
			td.cycle(t)
			td.wantExtrasOn(t, tc.want)
		})
	}
}
