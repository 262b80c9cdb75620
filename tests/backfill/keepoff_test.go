package backfill

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/internal/slurmlab"
)

// rawExcluded returns what `squeue -h -j ID -o %x` prints for the job (its
// excluded nodes, "(null)" for none), read without the package's parser.
func rawExcluded(t *testing.T, l *slurmlab.Lab, id string) string {
	t.Helper()
	out, err := l.CLI.Output(context.Background(), "squeue", "-h", "-j", id, "-o", "%x")
	if err != nil {
		t.Fatalf("excluded nodes of job %s: %v", id, err)
	}
	return strings.TrimSpace(string(out))
}

// TestAnElasticJobIsKeptOffTheV100sAWaitingPinnedJobNeeds is keep_off_pinned
// on the lab (issue 17: a d2 job is kept off a type a waiting pinned job
// needs when another serves it nearly as well). Rigid jobs hold every GPU;
// nobody's job pinned to both v100 nodes (-N 2 --gres=gpu:v100:4) and two
// d2 elastic jobs of one node (--gres=gpu:4, any type; the first excludes
// n4 itself; 5 min limits, past the pinned job's planned start when the
// v100 blockers' 3 min end) and, ahead of them, a third with a 1 min limit wait. With T4 at 0.8 of a V100 the daemon adds n1 and n2 to
// both elastic jobs' excluded nodes (`scontrol update ExcNodeList=`),
// keeping n4 where the owner put it, and leaves the third alone: it would
// end before the pinned job could start. When n1 (v100) and n3 (t4) free up at
// once, Slurm starts the first elastic job on n3, not on the faster n1 the
// pinned job needs. When the pinned job is cancelled, the daemon puts the
// second job's excluded nodes back to none.
func TestAnElasticJobIsKeptOffTheV100sAWaitingPinnedJobNeeds(t *testing.T) {
	l := slurmlab.Require(t)
	if err := slurmlab.Build(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The t4 blockers' limit is a minute longer than the v100 ones': Slurm
	// plans every job queued behind the pinned one to start after it
	// (planner.QueueOrder: planned start first), even when a blocker
	// starts seconds after the others (its node still ending the test
	// before's job: a t4 blocker that ended 10 s before a v100 one let
	// Slurm plan the last elastic job ahead of the pinned job, which then
	// kept nothing off it).
	blockers := map[string]string{}
	for n, limit := range map[string]string{"n1": "3", "n2": "3", "n3": "4", "n4": "4"} {
		blockers[n] = l.Submit(t, "#!/bin/sh\nsleep 170\n", "-w", n, "--gres=gpu:4", "-t", limit)
	}
	for n, id := range blockers {
		if _, err := l.WaitState(ctx, id, 60*time.Second, "RUNNING"); err != nil {
			t.Fatalf("blocker on %s: %v", n, err)
		}
	}
	pinned := submitAs(t, l, unprivileged, "#!/bin/sh\nsleep 30\n", "-N", "2", "--gres=gpu:v100:4", "-t", "2")
	// The job with a 1 min limit is submitted first: it is ahead in queue
	// order, so the daemon has decided on it in the cycle that keeps the
	// other two off.
	var elastic []string
	for _, extra := range [][]string{{"-t", "1"}, {"--exclude=n4", "-t", "5"}, {"-t", "5"}} {
		args := append([]string{"--parsable", "--elastic=1-1", "--determinism=d2", "-N", "1", "--gres=gpu:4",
			"-o", "/dev/null"}, extra...)
		out, err := l.Command(ctx, filepath.Join(l.Root, "bin", "easyscale-sbatch"), append(args, "--wrap", "sleep 60")...).CombinedOutput()
		if err != nil {
			t.Fatalf("easyscale-sbatch: %v\n%s", err, out)
		}
		id := strings.TrimSpace(string(out))
		elastic = append(elastic, id)
		t.Cleanup(func() { l.CLI.Output(context.Background(), "scancel", id) })
	}
	short, elastic := elastic[0], elastic[1:]
	s := settings{dir: t.TempDir(), nodes: []string{"n1", "n2", "n3", "n4"}, extra: "speeds = { v100 = 1.0, t4 = 0.8 }\n"}
	d := startDaemon(t, l, s, "backfilld")
	t.Cleanup(func() { // the tail startDaemon logs may miss the first cycles: show every keep_off line
		if t.Failed() {
			for _, line := range logLines(t, d.log) {
				if m, _ := line["@module"].(string); strings.HasSuffix(m, "keep_off") {
					t.Logf("keep_off: %v", line)
				}
			}
		}
	})

	wants := map[string][]string{elastic[0]: {"n1", "n2", "n4"}, elastic[1]: {"n1", "n2"}}
	for id, want := range wants {
		waitFor(t, 30*time.Second, "job "+id+" excluding "+strings.Join(want, ","), func() bool {
			return sameNodes(t, rawExcluded(t, l, id), want)
		})
	}
	if got := rawState(t, l, pinned); got != "PENDING" {
		t.Fatalf("pinned job %s is %s, want PENDING", pinned, got)
	}
	// The third elastic job's 1 min limit ends before the blockers' 3 min
	// (the pinned job's planned start): it takes nothing from the pinned
	// job, and the cycles that kept the others off left it alone.
	if got := rawState(t, l, short); got != "PENDING" {
		t.Fatalf("elastic job %s with a 1 min limit is %s, want PENDING (what it excludes is checked while it waits)", short, got)
	}
	if got := rawExcluded(t, l, short); !sameNodes(t, nullAsEmpty(got), nil) {
		t.Errorf("elastic job %s with a 1 min limit excludes %q, want nothing: it ends before the pinned job could start", short, got)
	}
	if _, err := l.CLI.Output(ctx, "scancel", short); err != nil {
		t.Fatal(err)
	}
	if _, err := l.CLI.Output(ctx, "scancel", blockers["n1"], blockers["n3"]); err != nil {
		t.Fatal(err)
	}
	j, err := l.WaitState(ctx, elastic[0], 60*time.Second, "RUNNING")
	if err != nil {
		t.Fatal(err)
	}
	if j.NodeList != "n3" {
		t.Errorf("elastic job %s started on %q, want n3: the v100 node n1 was free too, but the pinned job %s needs it", elastic[0], j.NodeList, pinned)
	}
	if _, err := l.CLI.Output(ctx, "scancel", pinned); err != nil {
		t.Fatal(err)
	}
	// n1 is the only free node it may use once n1 and n2 are no longer
	// excluded: it runs there only if the daemon put them back.
	j, err = l.WaitState(ctx, elastic[1], 60*time.Second, "RUNNING")
	if err != nil {
		t.Fatal(err)
	}
	if j.NodeList != "n1" {
		t.Errorf("elastic job %s started on %q after the pinned job left, want n1 (no longer excluded)", elastic[1], j.NodeList)
	}
	if n := countLog(t, d.log, "changed excluded nodes"); n < 3 {
		t.Errorf("the daemon logged %d changes of excluded nodes, want at least 3 (two kept off, one put back)", n)
	}
}

// sameNodes reports whether hostlist text (as squeue prints it, e.g.
// "n[1-2,4]") names exactly want.
func sameNodes(t *testing.T, text string, want []string) bool {
	t.Helper()
	got, err := slurmcli.ExpandHostlist(text)
	if err != nil {
		t.Fatalf("excluded nodes %q: %v", text, err)
	}
	if len(got) != len(want) {
		return false
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			return false
		}
	}
	return true
}

// nullAsEmpty is squeue's excluded-nodes text with its "(null)" (no node
// excluded) as the empty hostlist.
func nullAsEmpty(text string) string {
	if text == "(null)" {
		return ""
	}
	return text
}
