package daemon

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// decisionKinds returns "kind job" of every decision the daemon recorded,
// in order.
func decisionKinds(t *testing.T, td *testDaemon) []string {
	t.Helper()
	ds, err := td.db.Decisions(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range ds {
		out = append(out, d.Kind+" "+d.Job)
	}
	slices.Sort(out)
	return out
}

// The queued job an admission is for is re-read by id before another
// user's job is shrunk: one that no longer waits as the snapshot read it
// (cancelled, started, held, its request or placement changed) shrinks
// nobody.
func TestShrinkToAdmitReReadsTheQueuedJobBeforeAnyDonor(t *testing.T) {
	shrunk := []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}
	tests := []struct {
		name string
		// change runs, with the fake's lock held, when the daemon re-reads a
		// job by id (after its snapshot).
		change func(q *fakeJob)
		// want lists the scontrol updates; nil: none, and an admit-skip of
		// job 20 is recorded.
		want []string
	}{
		{name: "unchanged: the donor is shrunk", change: func(q *fakeJob) {}, want: shrunk},
		{name: "cancelled", change: func(q *fakeJob) { q.state = "CANCELLED" }},
		{name: "now excludes the node the shrink frees", change: func(q *fakeJob) { q.excNodes = "n2" }},
		{name: "now asks node features", change: func(q *fakeJob) { q.features = "ib" }},
		{name: "now must run in an advance reservation (helper 109's)", change: func(q *fakeJob) { q.reservation = "R1" }},
		{name: "now asks for contiguous nodes", change: func(q *fakeJob) { q.contiguous = true }},
		{name: "started elsewhere", change: func(q *fakeJob) { q.state, q.nodeList, q.reason = "RUNNING", "n3", "" }},
		{name: "held (Reason JobHeldUser)", change: func(q *fakeJob) { q.reason = "JobHeldUser" }},
		{name: "waits for its turn now (Reason Priority): still one to admit", change: func(q *fakeJob) { q.reason = "Priority" }, want: shrunk},
		{name: "waits for a dependency now", change: func(q *fakeJob) { q.reason = "Dependency" }},
		{name: "its time limit changed", change: func(q *fakeJob) { q.timeLimit = 2 * time.Hour }},
		{name: "its GPU count changed", change: func(q *fakeJob) { q.gpusPerNode = 2 }},
		{name: "now names its nodes (--nodelist)", change: func(q *fakeJob) { q.reqNode = "n3" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td := admitCluster(t, "", elasticComment)
			q := td.fake.job("20")
			td.fake.onJobs = func() { tt.change(q) }
			r := td.cycle(t)
			if got := td.fake.commands("scontrol update"); !slices.Equal(got, tt.want) {
				t.Fatalf("scontrol updates %q, want %q", got, tt.want)
			}
			kinds := decisionKinds(t, td)
			if tt.want != nil {
				if !slices.Equal(r.Admitted, []string{"20"}) || !slices.Equal(kinds, []string{"admit-shrink 10"}) {
					t.Fatalf("admitted %v, decisions %q; want 20 by one admit-shrink of 10", r.Admitted, kinds)
				}
				return
			}
			if len(r.Admitted)+len(r.AdmitShrunk) != 0 || !slices.Equal(kinds, []string{"admit-skip 20"}) {
				t.Fatalf("admitted %v shrunk %v, decisions %q; want nothing applied and one admit-skip of 20", r.Admitted, r.AdmitShrunk, kinds)
			}
			if recs, err := td.db.AdmitShrinks(context.Background()); err != nil || len(recs) != 0 {
				t.Fatalf("store records %+v (%v), want none", recs, err)
			}
		})
	}
}

// A dry run re-reads as a real run does: it records the shrink it would
// make only when the re-read holds (a tester saw a dry run log "would
// shrink" for an admission the real run refused), and changes nothing.
func TestADryRunReReadsBeforeItSaysItWouldShrink(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(q *fakeJob)
		kinds  []string
	}{
		{"unchanged", func(*fakeJob) {}, []string{"admit-shrink 10"}},
		{"cancelled before the re-read", func(q *fakeJob) { q.state = "CANCELLED" }, []string{"admit-skip 20"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := admitCluster(t, "dry_run = true\n", elasticComment)
			q := td.fake.job("20")
			td.fake.onJobs = func() { tc.change(q) }
			r := td.cycle(t)
			if got := td.fake.commands("scontrol update"); len(got) != 0 || len(r.Admitted)+len(r.AdmitShrunk) != 0 {
				t.Fatalf("a dry run changed jobs: %q, admitted %v shrunk %v", got, r.Admitted, r.AdmitShrunk)
			}
			if kinds := decisionKinds(t, td); !slices.Equal(kinds, tc.kinds) {
				t.Fatalf("decisions %q, want %q", kinds, tc.kinds)
			}
		})
	}
}

// twoDonorCluster: elastic jobs 10 (carol, n1,n2) and 11 (bob, n3,n4), 4
// GPUs per node, 60 min limits; bob's job 20 queued for 2 whole nodes of
// any type for 30 min, waiting for resources: it needs a node of each.
// Neither donor releases the node its 4 logical workers leave idle
// (shed_slow_nodes = false): the tests are about the admission.
func twoDonorCluster(t *testing.T) *testDaemon {
	t.Helper()
	td := newTestDaemon(t, "shed_slow_nodes = false\n")
	c := td.fake.running("10", "es-req min=1 max=3 lw=4 d2", "n1,n2", 4, time.Hour, rendezvous(t, "10"))
	b := td.fake.running("11", "es-req min=1 max=3 lw=4 d2", "n3,n4", 4, time.Hour, rendezvous(t, "11"))
	q := td.fake.pending("20", "n1,n3", 4, td.now.Add(time.Hour))
	td.fake.set(func() {
		c.user, b.user = "carol", "bob"
		q.reason, q.timeLimit = "Resources", 30*time.Minute
	})
	td.fake.shareFilesWith("carol", "bob")
	return td
}

// An admission with two donors changes neither when either fails its
// re-read, and one Slurm refuses part of leaves its shrunk donor recorded
// (admit-undo) and admits nothing.
func TestShrinkToAdmitWithTwoDonorsIsAllOrNothing(t *testing.T) {
	both := []string{
		"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1",
		"scontrol update JobId=11 TimeLimit=132", "scontrol update JobId=11 NumNodes=1"}
	tests := []struct {
		name  string
		setup func(td *testDaemon)
		// want: the scontrol updates; kinds: the decisions, sorted; admitted
		// and shrunk: the report; done: the donors the store has done.
		want, kinds, admitted, shrunk, done []string
	}{
		{name: "both re-read as the snapshot: both shrunk", setup: func(td *testDaemon) {},
			want: both, kinds: []string{"admit-shrink 10", "admit-shrink 11"},
			admitted: []string{"20"}, shrunk: []string{"10", "11"}, done: []string{"10", "11"}},
		{name: "the second donor's request changes before its re-read: neither is shrunk",
			setup: func(td *testDaemon) {
				a := td.fake.job("11")
				td.fake.onJobs = func() { a.comment = "es-req min=1 max=4 lw=4 d2" }
			},
			kinds: []string{"admit-skip 11"}},
		{name: "the first donor ended before its re-read: neither is shrunk",
			setup: func(td *testDaemon) {
				a := td.fake.job("10")
				td.fake.onJobs = func() { a.state = "COMPLETED" }
			},
			kinds: []string{"admit-skip 10"}},
		{name: "Slurm refuses the second donor's shrink: its limit is put back, the first stays shrunk and is recorded",
			setup: func(td *testDaemon) {
				td.fake.set(func() {
					td.fake.refuse = map[string]string{"scontrol update JobId=11 NumNodes=1": "slurm_update error: Requested operation is presently disabled"}
				})
			},
			want:   append(slices.Clone(both), "scontrol update JobId=11 TimeLimit=60"),
			kinds:  []string{"admit-shrink 10", "admit-shrink 11", "admit-undo 10"},
			shrunk: []string{"10"}, done: []string{"10"}},
		{name: "Slurm refuses the second donor's time limit: the first stays shrunk and is recorded",
			setup: func(td *testDaemon) {
				td.fake.set(func() {
					td.fake.refuse = map[string]string{"scontrol update JobId=11 TimeLimit=132": "slurm_update error: Access/permission denied"}
				})
			},
			want:   both[:3],
			kinds:  []string{"admit-shrink 10", "admit-shrink 11", "admit-undo 10"},
			shrunk: []string{"10"}, done: []string{"10"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td := twoDonorCluster(t)
			tt.setup(td)
			r := td.cycle(t)
			if got := td.fake.commands("scontrol update"); !slices.Equal(got, tt.want) {
				t.Fatalf("scontrol updates %q, want %q", got, tt.want)
			}
			if kinds := decisionKinds(t, td); !slices.Equal(kinds, tt.kinds) {
				t.Errorf("decisions %q, want %q", kinds, tt.kinds)
			}
			if !slices.Equal(r.Admitted, tt.admitted) || !slices.Equal(r.AdmitShrunk, tt.shrunk) {
				t.Errorf("report admitted %v by shrinking %v, want %v by %v", r.Admitted, r.AdmitShrunk, tt.admitted, tt.shrunk)
			}
			recs, err := td.db.AdmitShrinks(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var done []string
			for _, rec := range recs {
				if rec.State == backfillstore.AdmitDone {
					done = append(done, rec.Job)
				}
				if rec.State == backfillstore.AdmitIntent {
					t.Errorf("record %+v left as an intent", rec)
				}
			}
			slices.Sort(done)
			if !slices.Equal(done, tt.done) {
				t.Errorf("store has %v done (%+v), want %v", done, recs, tt.done)
			}
		})
	}
}

// A running elastic job whose id squeue also lists another record under
// (the last task of a job array has the array's id, so `scontrol update
// JobId=ID` changes every task, one its owner never marked elastic too; a
// tester saw the daemon raise and put back the limits of every task each
// second) is refused as a donor at its re-read, and from the next cycle on
// is planned as an ordinary job: no further re-read, skip or update.
func TestADonorSharingItsIdWithAnArraysTasksIsLeftAsAnOrdinaryJob(t *testing.T) {
	td := admitCluster(t, "[admit]\nenabled = true\n", elasticComment)
	task := td.fake.running("11", "", "n3", 1, time.Hour, t.TempDir()) // 10_1, split off; 10 is 10_2
	td.fake.set(func() { task.arrayOf = "10" })
	for i := range 3 {
		td.cycle(t)
		if got := td.fake.commands("scontrol update"); len(got) != 0 {
			t.Fatalf("cycle %d: scontrol updates %q, want none", i, got)
		}
		if kinds := decisionKinds(t, td); !slices.Equal(kinds, []string{"admit-skip 10"}) {
			t.Fatalf("cycle %d: decisions %q, want one admit-skip of 10 in all", i, kinds)
		}
		td.advance(time.Minute)
	}
	// The other task ends; 10 is still listed, so it stays remembered
	// (Slurm cannot resize an array's task anyway).
	td.fake.set(func() { td.fake.jobs = slices.DeleteFunc(td.fake.jobs, func(j *fakeJob) bool { return j == task }) })
	td.cycle(t)
	if got := td.fake.commands("scontrol update"); len(got) != 0 {
		t.Fatalf("after the other task left: scontrol updates %q, want none (the id stays remembered while listed)", got)
	}
}
