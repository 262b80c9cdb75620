package e2e

import (
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/statedb"
)

const steps = "200"

// lastStep reads the newest ledger step of a state directory (0 if none).
func lastStep(dir string) int64 {
	db, err := statedb.OpenReadOnly(dir)
	if err != nil {
		return 0
	}
	defer db.Close()
	s, _, _ := db.LastStep()
	return s
}

// stepsOn counts the ledger's steps under state that ran on workers
// physical workers (0 while there is no ledger).
func stepsOn(state string, workers int) int {
	db, err := statedb.OpenReadOnly(state)
	if err != nil {
		return 0
	}
	defer db.Close()
	rows, err := db.Ledger(0, 1<<62)
	if err != nil {
		return 0
	}
	n := 0
	for _, r := range rows {
		if r.Workers == workers {
			n++
		}
	}
	return n
}

// waitStep waits until the ledger in the state directory has step, and
// fails the test when it has not after within: a run that stopped or
// stalled must not let a test go on without the event it waits for.
func waitStep(t *testing.T, state string, step int64, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); lastStep(state) < step; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the run in %s has not reached step %d after %v (last step %d)", state, step, within, lastStep(state))
		}
	}
}

// TestSIGKILLAtRandomStepsThenResume kills the training process with
// SIGKILL at random steps (checkpointing every step, so kills also land
// while a checkpoint is being written), reruns the same command each time,
// and requires the uninterrupted run's digest and an intact database.
func TestSIGKILLAtRandomStepsThenResume(t *testing.T) {
	refState := t.TempDir()
	ref := mustRun(t, "run", "--config", config(), "--steps", steps, "--no-eval", "--state", refState)
	state := t.TempDir()
	r := rand.New(rand.NewSource(time.Now().UnixNano()))
	kills := 0
	for target := int64(3); target < 180 && kills < 4; target += int64(15 + r.Intn(40)) {
		cmd := exec.Command(easyscale, "run", "--config", config(), "--steps", steps, "--no-eval", "--quiet", "--state", state, "--workers", "0:3,70:5,140:2")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(60 * time.Second)
		for lastStep(state) < target && time.Now().Before(deadline) {
			time.Sleep(time.Duration(2+r.Intn(20)) * time.Millisecond) // a random moment within the step
		}
		if s := lastStep(state); s < target {
			t.Fatalf("the run has not reached step %d after 60 s (last step %d)", target, s)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err == nil {
			t.Fatalf("the run finished before the SIGKILL at step %d", target)
		}
		kills++
		t.Logf("SIGKILL number %d after step %d (target %d)", kills, lastStep(state), target)
	}
	if kills < 3 {
		t.Fatalf("only %d kills happened", kills)
	}
	final := mustRun(t, "run", "--config", config(), "--steps", steps, "--no-eval", "--state", state, "--workers", "0:3,70:5,140:2")
	if digest(final) != digest(ref) {
		t.Fatalf("after %d SIGKILLs the digest is %s, uninterrupted %s", kills, digest(final), digest(ref))
	}
	db, err := statedb.OpenReadOnly(state)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.IntegrityCheck(); err != nil {
		t.Fatalf("database after kills: %v", err)
	}
	if v := easy(t, "verify", refState, state); v.code != 0 {
		t.Fatalf("verify of the killed-and-resumed run against the reference: exit %d\n%s%s", v.code, v.stdout, v.stderr)
	}
}

// TestCorruptCheckpointFallsBackToThePreviousOne flips a byte in the newest
// checkpoint: the rerun reports it, resumes from the previous checkpoint
// and still reaches the uninterrupted digest.
func TestCorruptCheckpointFallsBackToThePreviousOne(t *testing.T) {
	ref := mustRun(t, "run", "--config", config(), "--steps", "12", "--no-eval")
	state := t.TempDir()
	mustRun(t, "run", "--config", config(), "--steps", "8", "--no-eval", "--state", state)
	newest := filepath.Join(state, "checkpoints", "step-8.safetensors")
	b, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-5] ^= 0x40
	if err := os.WriteFile(newest, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, "run", "--config", config(), "--steps", "12", "--no-eval", "--state", state)
	if got := r.summary["resumed_from"].(float64); got != 7 {
		t.Fatalf("resumed from step %v, want 7 (the checkpoint before the corrupt one)", got)
	}
	if !contains(r.stderr, "step-8.safetensors") {
		t.Fatalf("the corrupt checkpoint was not reported; stderr:\n%s", r.stderr)
	}
	if digest(r) != digest(ref) {
		t.Fatalf("digest %s after falling back, uninterrupted %s", digest(r), digest(ref))
	}
}

// TestSIGTERMCheckpointsAndResumes: SIGTERM (what Slurm sends at
// preemption and at the time limit) makes the run checkpoint its last
// completed step and exit 143; rerunning resumes there and reaches the
// uninterrupted digest.
func TestSIGTERMCheckpointsAndResumes(t *testing.T) {
	ref := mustRun(t, "run", "--config", config(), "--steps", "200", "--no-eval")
	state := t.TempDir()
	args := []string{"run", "--config", config(), "--steps", "200", "--no-eval", "--quiet", "--state", state}
	cmd := exec.Command(easyscale, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitStep(t, state, 12, 60*time.Second)
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 143 {
		t.Fatalf("after SIGTERM: %v, want exit status 143", err)
	}
	stopped := lastStep(state)
	if stopped >= 200 {
		t.Fatal("the run finished before the signal")
	}
	db, err := statedb.OpenReadOnly(state)
	if err != nil {
		t.Fatal(err)
	}
	ck, _, err := db.LatestCheckpoint()
	db.Close()
	if err != nil || ck == nil || ck.Step != stopped {
		t.Fatalf("newest checkpoint %v (%v), want one at the last step %d", ck, err, stopped)
	}
	final := mustRun(t, "run", "--config", config(), "--steps", "200", "--no-eval", "--state", state)
	if got := int64(final.summary["resumed_from"].(float64)); got != stopped {
		t.Fatalf("resumed from %d, want %d", got, stopped)
	}
	if digest(final) != digest(ref) {
		t.Fatalf("digest %s after SIGTERM and resume, uninterrupted %s", digest(final), digest(ref))
	}
}
