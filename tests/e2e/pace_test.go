package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestPacedRunTakesItsTimeAndKeepsItsDigest checks the pace fault
// (trainer.FaultPaceEnv), which the lab's node-failure tests use to make a
// job outlast Slurm's DOWN without the CPU of more steps: on one physical
// worker, which computes the logical workers' micro-batches in turn, every
// micro-batch takes at least the pace, the digest is
// the unpaced run's, and a malformed or too long pace is refused before
// training, naming the variable.
func TestPacedRunTakesItsTimeAndKeepsItsDigest(t *testing.T) {
	// 16 micro-batches of 250 ms: 4 s, far more than the run's start-up
	// (under a second here), so a pace applied per step (0.5 s) fails
	const steps, ests, pace = 2, 8, 250 * time.Millisecond
	args := []string{"run", "--config", config(), "--steps", "2", "--no-eval", "--workers", "1", "--state", t.TempDir()}
	plain := mustRun(t, args...)

	t.Setenv("EASYSCALE_FAULT_PACE", pace.String())
	args[len(args)-1] = t.TempDir()
	began := time.Now()
	paced := mustRun(t, args...)
	took := time.Since(began)
	if digest(paced) == "" || digest(paced) != digest(plain) {
		t.Fatalf("paced run's digest %q, the unpaced run's %q", digest(paced), digest(plain))
	}
	if least := steps * ests * pace; took < least {
		t.Fatalf("paced run of %d steps took %v, want at least %v (%d micro-batches of %v)", steps, took, least, steps*ests, pace)
	}

	for _, bad := range []string{"fast", "-1s", "2m"} {
		t.Setenv("EASYSCALE_FAULT_PACE", bad)
		args[len(args)-1] = t.TempDir()
		r := easy(t, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "EASYSCALE_FAULT_PACE=\""+bad+"\"") {
			t.Fatalf("EASYSCALE_FAULT_PACE=%s: exit %d, want 2 and an error naming the variable and value\nstderr:\n%s", bad, r.code, r.stderr)
		}
	}
}
