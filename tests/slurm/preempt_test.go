package slurm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/slurmlab"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// lastWorkers returns the number of physical workers of the newest ledger
// step of a state directory (0 when none).
func lastWorkers(state string) int {
	db, err := statedb.OpenReadOnly(state)
	if err != nil {
		return 0
	}
	defer db.Close()
	s, ok, _ := db.LastStep()
	if !ok {
		return 0
	}
	rows, err := db.Ledger(s, s)
	if err != nil || len(rows) == 0 {
		return 0
	}
	return rows[0].Workers
}

// TestPreemptedExtraWorkerDoesNotLoseProgress grows an elastic job by an
// extra job in the preemptible partition (what easyscale-backfilld
// submits), then lets a normal job preempt it with --no-requeue (a
// partition or QOS that cancels on preemption): the job loses that worker,
// goes on at its minimum, and still ends with the local run's model.
func TestPreemptedExtraWorkerDoesNotLoseProgress(t *testing.T) {
	lab := slurmlab.Require(t)
	const steps = 234
	want := lab.LocalMNISTDigest(t, steps)
	id, summary := submit(t, lab, steps, "--elastic=1-2")
	dir := filepath.Join(lab.Root, ".easyscale", id)
	state := filepath.Join(dir, "state")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		if _, err := os.Stat(filepath.Join(dir, "coordinator")); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the coordinator never published its address:\n%s", jobOutput(lab, id))
		}
		time.Sleep(20 * time.Millisecond)
	}
	extraScript := "#!/bin/bash\nsrun easyscale worker --join \"$(cat " + filepath.Join(dir, "coordinator") + ")\" --token-file " + filepath.Join(dir, "token") + "\n"
	extra := lab.Submit(t, extraScript, "-p", "low", "--no-requeue", "-N1", "-w", "n4", "--chdir", lab.Root, "--job-name", "es-extra-"+id,
		"--output", filepath.Join(t.TempDir(), "extra-%j.out"))
	for lastWorkers(state) < 2 {
		if ctx.Err() != nil {
			t.Fatalf("the extra worker never joined; job output:\n%s", jobOutput(lab, id))
		}
		time.Sleep(20 * time.Millisecond)
	}
	joinedAt := lastStep(state)
	lab.Submit(t, "#!/bin/bash\nsleep 3\n", "-p", "normal", "-N1", "-w", "n4", "--exclusive", "--output", "/dev/null")
	s := waitDone(t, lab, id, summary)
	if joinedAt >= steps {
		t.Fatal("the job ended before the preemption")
	}
	if s["digest"] != want {
		t.Fatalf("digest after the preemption %v, local run %s\n%s", s["digest"], want, jobOutput(lab, id))
	}
	if w := lastWorkers(state); w != 1 {
		t.Fatalf("the job ended on %d workers, want its minimum 1 after the preemption", w)
	}
	out, _ := lab.Command(ctx, "sacct", "-n", "-X", "-j", extra, "-o", "State").Output()
	if st := strings.TrimSpace(string(out)); !strings.Contains(st, "PREEMPTED") && !strings.Contains(st, "CANCELLED") {
		t.Fatalf("the extra job ended %q, want PREEMPTED", st)
	}
}
