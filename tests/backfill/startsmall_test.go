package backfill

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/internal/slurmlab"
)

// TestAnElasticJobStartsSmallOnTheIdleNodeInsteadOfWaiting: a rigid job
// holds all four t4 GPUs of n4 for 3 minutes; an elastic job submitted with
// easyscale-sbatch --elastic=1-2 -N 2 (one t4 GPU per node, 1 min) waits
// for both t4 nodes, its reservation at the rigid job's end. With
// [start_small] rule = "before-reservation" the daemon lowers it to the
// one idle node n3, raising its time limit to the run time there (scontrol
// update on a pending job), and Slurm starts it at once, long before its
// reservation; the rigid job is untouched.
func TestAnElasticJobStartsSmallOnTheIdleNodeInsteadOfWaiting(t *testing.T) {
	l := slurmlab.Require(t)
	if err := slurmlab.Build(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	blocker := l.Submit(t, "#!/bin/sh\nsleep 170\n", "-w", "n4", "--gres=gpu:t4:4", "-t", "3")
	b, err := l.WaitState(ctx, blocker, 60*time.Second, "RUNNING")
	if err != nil {
		t.Fatal(err)
	}
	blockerEnd, err := time.ParseInLocation(slurmcli.TimeLayout, b.EndTime, time.Local)
	if err != nil {
		t.Fatalf("rigid job %s end time %q: %v", blocker, b.EndTime, err)
	}

	s := settings{dir: t.TempDir(), nodes: []string{"n3", "n4"},
		extra: "[start_small]\nrule = \"before-reservation\"\n[admit]\nenabled = false\n"}
	// The daemon starts only once the elastic job waits, so the job is
	// seen pending with Slurm's reservation before anything changes it.
	out, err := l.Command(ctx, filepath.Join(l.Root, "bin", "easyscale-sbatch"), "--parsable", "--elastic=1-2", "--logical-workers=2",
		"-N", "2", "--gres=gpu:t4:1", "-t", "1", "-o", "/dev/null", "--wrap", "sleep 20").CombinedOutput()
	if err != nil {
		t.Fatalf("easyscale-sbatch: %v\n%s", err, out)
	}
	id := strings.TrimSpace(string(out))
	t.Cleanup(func() { l.CLI.Output(context.Background(), "scancel", id, blocker) })
	var pending slurmcli.Job
	waitFor(t, 30*time.Second, "job "+id+" pending for resources with a planned start", func() bool {
		pending, err = l.CLI.Job(ctx, id)
		st, ok, _ := pending.Start(time.Local)
		return err == nil && pending.State == "PENDING" && pending.Reason == "Resources" && ok && !st.IsZero()
	})
	if pending.Nodes != 2 {
		t.Fatalf("job %s pending for %d nodes, want the 2 it asked for (-N 2 in --elastic=1-2)", id, pending.Nodes)
	}
	reserved, _, _ := pending.Start(time.Local)
	d := startDaemon(t, l, s, "backfilld")

	var j slurmcli.Job
	waitFor(t, 40*time.Second, "job "+id+" starting", func() bool {
		j, err = l.CLI.Job(ctx, id)
		return err == nil && j.State != "PENDING"
	})
	started, _, _ := j.Start(time.Local)
	t.Logf("elastic job %s: reserved at %s on 2 nodes; started %s on %s (%d nodes), time limit %s -> %s; rigid job ends %s",
		id, reserved.Format(time.TimeOnly), started.Format(time.TimeOnly), j.NodeList, j.Nodes, pending.TimeLimit, j.TimeLimit,
		blockerEnd.Format(time.TimeOnly))
	if j.NodeList != "n3" || j.Nodes != 1 {
		t.Errorf("job %s started on %q (%d nodes), want the idle node n3 alone", id, j.NodeList, j.Nodes)
	}
	if !started.Before(reserved.Add(-time.Minute)) {
		t.Errorf("job %s started %s, not well before its reservation at %s", id, started, reserved)
	}
	if j.TimeLimit == pending.TimeLimit {
		t.Errorf("job %s kept its time limit %s on one node; want it raised to the run time there", id, j.TimeLimit)
	}
	if r, err := l.CLI.Job(ctx, blocker); err != nil || r.State != "RUNNING" || r.NodeList != "n4" {
		t.Errorf("rigid job %s: %+v, %v; want it still running on n4", blocker, r, err)
	}
	log, _ := os.ReadFile(d.log)
	if !strings.Contains(string(log), "started small") {
		t.Errorf("the daemon's log has no \"started small\":\n%s", tail(string(log), 30))
	}
}
