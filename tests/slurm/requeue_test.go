package slurm

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/slurmlab"
)

// TestRequeueOfAFinishedJobEndsAtOnce requeues (scontrol requeue) an
// elastic job on 3 nodes that has finished: its second run's coordinator
// resumes at the last step and exits at once, and the other tasks learn
// from the rendezvous directory that the run has ended and exit 0, so the
// step ends COMPLETED well before the workers' 60 s JoinTimeout of
// "rejoining ... connection refused" would have run out. The bound is
// 40 s, not a few seconds: on a loaded 2-core CI machine the requeued
// run's start (7.6 s) and final evaluation (8 s) alone took 19 s.
func TestRequeueOfAFinishedJobEndsAtOnce(t *testing.T) {
	lab := slurmlab.Require(t)
	start := time.Now()
	id, summary := submit(t, lab, 30, "--elastic=3-4")
	waitDone(t, lab, id, summary)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := lab.CLI.Output(ctx, "scontrol", "requeue", id); err != nil {
		t.Fatalf("scontrol requeue %s: %v\n%s", id, err, out)
	}
	waitDone(t, lab, id, summary)
	job, err := showJob(ctx, lab, id)
	if err != nil || job.State != "COMPLETED" || job.Restarts != 1 {
		t.Fatalf("the requeued job ended %q after %d restarts (%v), want COMPLETED after 1\n%s", job.State, job.Restarts, err, jobOutput(lab, id))
	}
	// sacct -D lists both runs; the step of the second run is the last id.0.
	out, err := lab.CLI.Output(ctx, "sacct", "-n", "-P", "-D", "-j", id, "-S", start.Add(-time.Minute).Format("2006-01-02T15:04:05"),
		"-o", "JobID,State,ElapsedRaw")
	if err != nil {
		t.Fatalf("sacct: %v", err)
	}
	var state string
	elapsed := -1
	runs := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		if len(f) == 3 && f[0] == id+".0" {
			state, runs = f[1], runs+1
			elapsed, _ = strconv.Atoi(f[2])
		}
	}
	if runs != 2 {
		t.Fatalf("sacct shows %d runs of step %s.0, want 2:\n%s", runs, id, out)
	}
	if state != "COMPLETED" || elapsed < 0 || elapsed > 40 {
		t.Fatalf("the requeued run's step %s.0 ended %s after %d s, want COMPLETED within 40 s (the workers' JoinTimeout is 60 s):\n%s\n%s", id, state, elapsed, out, jobOutput(lab, id))
	}
	t.Logf("requeued run's step: %s in %d s", state, elapsed)
	o := jobOutput(lab, id)
	if strings.Contains(o, "unreachable for") {
		t.Fatalf("a worker waited for the ended coordinator:\n%s", o)
	}
	// Every task's worker side (srun gathers the 3 tasks' stderr in the
	// job's output file) learns that the run has ended.
	batch, _ := os.ReadFile(filepath.Join(lab.Root, "es-mnist-"+id+".out"))
	if n := strings.Count(string(batch), "the job has ended; not rejoining"); n != 3 {
		t.Fatalf("%d tasks logged that the job has ended, want 3:\n%s", n, o)
	}
}
