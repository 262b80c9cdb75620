package backfill

import (
	"context"
	"encoding/json"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/daemon"
	"github.com/easyscale/easyscale-slurm/internal/slurmlab"
)

// TestQueuedJobsSlurmWillNotRunAddNoWorkToTheDrainBound is a tester's
// attack on drain_horizon, on the lab: jobs Slurm will not run now (held,
// waiting a year for their begin time, waiting for a dependency, asking
// more nodes than the partition has) cost their owner nothing, and each
// once loosened the bound that keeps shrink-to-admit from lengthening
// another user's running job. Every node is busy and root's job waits;
// nobody queues those four, a day long on two nodes each, and one job that
// may start as soon as resources allow (one node of 4 GPUs, 60 min). One
// `easyscale-backfilld --once --record` cycle's shrink-to-admit question
// must count nobody's work as that last job's alone: 4 GPUs × 3,600 s at
// the slowest managed type's speed (t4, 0.5 here), 7,200 GPU-s.
func TestQueuedJobsSlurmWillNotRunAddNoWorkToTheDrainBound(t *testing.T) {
	l := slurmlab.Require(t)
	if err := slurmlab.Build(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		id := l.Submit(t, "#!/bin/sh\nsleep 300\n", "-w", n, "--gres=gpu:4", "-t", "10", "-o", "/dev/null")
		if _, err := l.WaitState(ctx, id, 60*time.Second, "RUNNING"); err != nil {
			t.Fatalf("blocker on %s: %v", n, err)
		}
	}
	queued := l.Submit(t, "#!/bin/sh\nsleep 30\n", "-N", "1", "--gres=gpu:4", "-t", "5", "-o", "/dev/null")
	day := []string{"-N", "2", "--gres=gpu:4", "-t", "1-00:00:00"}
	want := map[string]string{ // job id -> the squeue reason it must show
		submitAs(t, l, unprivileged, "#!/bin/sh\nsleep 1\n", append([]string{"-H"}, day...)...):                             "JobHeldUser",
		submitAs(t, l, unprivileged, "#!/bin/sh\nsleep 1\n", append([]string{"--begin=now+365days"}, day...)...):            "BeginTime",
		submitAs(t, l, unprivileged, "#!/bin/sh\nsleep 1\n", append([]string{"--dependency=afterok:" + queued}, day...)...): "Dependency",
	}
	// Slurm 22.05 queues a job asking more nodes than the partition has
	// (PartitionConfig); 24.11 refuses it at submission, and there is then
	// nothing to count.
	if id, err := sbatchAs(unprivileged, l, "-N", "100", "--gres=gpu:4", "-t", "1-00:00:00", "--wrap", "sleep 1"); err == nil {
		t.Cleanup(func() { l.CLI.Output(context.Background(), "scancel", id) })
		want[id] = "PartitionConfig"
	} else {
		t.Logf("a job of 100 nodes: %v (refused at submission)", err)
	}
	eligible := submitAs(t, l, unprivileged, "#!/bin/sh\nsleep 1\n", "-N", "1", "--gres=gpu:4", "-t", "60")
	waitFor(t, 30*time.Second, "the pending jobs' reasons", func() bool {
		for id, reason := range want {
			if got := rawReason(t, l, id); got != reason {
				return false
			}
		}
		r := rawReason(t, l, eligible)
		// shrink-to-admit asks about jobs waiting for resources; the drain
		// bound counts jobs Slurm has planned
		return (r == "Resources" || r == "Priority") && rawStart(t, l, eligible) != "N/A" && rawReason(t, l, queued) == "Resources"
	})

	s := settings{dir: t.TempDir(), nodes: []string{"n1", "n2", "n3", "n4"}, extra: "dry_run = true\nspeeds = { v100 = 1.0, t4 = 0.5 }\n"}
	record := filepath.Join(s.dir, "cycle.json")
	runCtx, runCancel := context.WithTimeout(ctx, 60*time.Second)
	defer runCancel()
	cmd := exec.CommandContext(runCtx, os.Args[0], "--config", s.write(t), "--once", "--record", record)
	cmd.Env = append(append([]string{}, l.Env...), childEnv+"=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("easyscale-backfilld --once --record: %v\n%s", err, tail(string(out), 40))
	}
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	var rec daemon.Recording
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("the cycle's recording: %v", err)
	}
	if rec.Admit == nil || rec.Admit.Input.Objective == nil || rec.Admit.Input.Objective.Drain == nil {
		t.Fatalf("the cycle asked no shrink-to-admit question with a drain bound:\n%s", b)
	}
	dr := rec.Admit.Input.Objective.Drain
	if got, w := dr.ByUser[unprivileged], 4*3600*0.5; math.Abs(got-w) > 1 { // untyped: at the slowest managed type's speed
		t.Errorf("%s's work in the drain bound %v GPU-s, want %v (the job Slurm may start alone, not jobs %v)", unprivileged, got, w, strings.Join(slices.Sorted(maps.Keys(want)), ","))
	}
}

// rawStart returns what `squeue -h -j ID -o %S` prints for the job (its
// planned start, N/A before Slurm's backfill plans it).
func rawStart(t *testing.T, l *slurmlab.Lab, id string) string {
	t.Helper()
	return squeueField(t, l, id, "%S")
}

// rawReason returns what `squeue -h -j ID -o %r` prints for the job.
func rawReason(t *testing.T, l *slurmlab.Lab, id string) string {
	t.Helper()
	return squeueField(t, l, id, "%r")
}

// squeueField returns what `squeue -h -j ID -o FORMAT` prints for the job,
// read without the package's parser.
func squeueField(t *testing.T, l *slurmlab.Lab, id, format string) string {
	t.Helper()
	out, err := l.CLI.Output(context.Background(), "squeue", "-h", "-j", id, "-o", format)
	if err != nil {
		t.Fatalf("squeue -o %s of job %s: %v", format, id, err)
	}
	return strings.TrimSpace(string(out))
}

// sbatchAs submits with sbatch --uid=user (running in /tmp, output to
// /dev/null) and returns the job id, or sbatch's error.
func sbatchAs(user string, l *slurmlab.Lab, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := l.CLI.Output(ctx, "sbatch", append([]string{"--parsable", "--uid=" + user, "--chdir=/tmp", "-o", "/dev/null"}, args...)...)
	if err != nil {
		return "", err
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	return id, nil
}
