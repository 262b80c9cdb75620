package backfill

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/internal/slurmlab"
)

// A requeued elastic job waits Reason BeginTime for cred_expire (10 s in
// the lab), then for Slurm's scheduler's next pass, which nothing triggers
// on an idle cluster (7–17 s measured on the lab; docs/first-node-loss.md).
// The daemon nudges it once its begin time has passed: Slurm starts it at
// once.
//
// The lab is shared with the other test packages: a job change of theirs
// at the begin time makes Slurm's backfill start the job itself before the
// daemon's cycle sees it (stop 29's CI). Such a try proves nothing about
// the nudge, so the test requeues again, up to nudgeTries times. Slurm
// 24.11 often starts the job itself a few hundred milliseconds after its
// begin time, before the daemon's next cycle (stop 37's CI: 320–330 ms in
// all three tries): when every try went so, there was nothing for a nudge
// to speed up and the test skips. A try that starts more than lateBound
// after its begin time without a nudge fails it at once, and so do three
// tries without a nudge of which one started later than promptBySlurm.
func TestARequeuedElasticJobStartsOnceItsBeginTimePassesBecauseTheDaemonNudgesIt(t *testing.T) {
	l := slurmlab.Require(t)
	s := settings{dir: t.TempDir(), nodes: []string{"n4"}}
	d := startDaemon(t, l, s, "backfilld")
	e, _ := submitElastic(t, l, "es-req min=1 max=1 lw=4 d1", "-w", "n4", "--gres=gpu:t4:1", "-t", "5")
	const nudgeMsg = "nudged Slurm's scheduler: the job's begin time has passed"
	const nudgeTries = 3
	// Slurm's own start counts as prompt within this of the begin time
	// (squeue prints whole seconds; 22.05 took 2.4–9.5 s without a nudge).
	const promptBySlurm = 1500 * time.Millisecond
	// A cycle a second (poll_interval) nudges it within about 2 s of the
	// begin time (squeue prints whole seconds); Slurm starts it in under a
	// second after. The bound leaves room for a loaded machine.
	const lateBound = 6 * time.Second
	nudges, prompt := 0, 0
	for try := 1; ; try++ {
		requeued := time.Now()
		begin, started := requeueAndWaitRunning(t, l, e.ID)
		// A cycle that read the job still waiting may log its nudge after
		// the job runs: counted now, it would fall to the next try (a clean
		// -clone CI run on 24.11 counted 0 then 2).
		waitCycleReadAfter(t, d, started, 30*time.Second)
		n := countLog(t, d.log, nudgeMsg)
		after := started.Sub(begin)
		t.Logf("try %d: job %s requeued, eligible %v later (begin time %s), running %v after its begin time, %d nudges logged",
			try, e.ID, begin.Sub(requeued).Round(time.Second), begin.Format(time.TimeOnly), after.Round(10*time.Millisecond), n-nudges)
		if n-nudges > 1 {
			t.Errorf("the daemon logged %d nudges for one requeue, want 1", n-nudges)
		}
		if n == nudges {
			if after > lateBound {
				t.Fatalf("job %s ran %v after its begin time and the daemon never nudged it", e.ID, after.Round(10*time.Millisecond))
			}
			if after <= promptBySlurm {
				prompt++
			}
			if try < nudgeTries {
				continue // Slurm's own pass came first
			}
			if prompt < nudgeTries {
				t.Fatalf("Slurm started job %s on its own in all %d tries, %d of them more than %v after the begin time; the daemon never nudged it",
					e.ID, nudgeTries, nudgeTries-prompt, promptBySlurm)
			}
			t.Skipf("Slurm started job %s within %v of its begin time on its own in all %d tries: nothing was left for a nudge to speed up, so the nudge was not tested",
				e.ID, promptBySlurm, nudgeTries)
		}
		nudges = n
		if after > lateBound {
			t.Errorf("job %s ran %v after its begin time, want within %v", e.ID, after, lateBound)
		}
		break
	}
	d.stop(syscall.SIGTERM) // state_db is the daemon's alone while it runs
	if n := countDecisions(t, s, "nudge"); n != nudges {
		t.Errorf("%d nudge decisions in state_db, want %d (one per logged nudge)", n, nudges)
	}
}

// requeueAndWaitRunning requeues job id and waits until it runs again. It
// returns the begin time Slurm held it for (Reason BeginTime) and when the
// test saw it RUNNING; it fails the test when the job was never held.
func requeueAndWaitRunning(t *testing.T, l *slurmlab.Lab, id string) (begin, started time.Time) {
	t.Helper()
	ctx := context.Background()
	if _, err := l.CLI.Output(ctx, "scontrol", "requeue", id); err != nil {
		t.Fatalf("scontrol requeue %s: %v", id, err)
	}
	requeued := time.Now()
	waitFor(t, 90*time.Second, "job "+id+" running again after its requeue", func() bool {
		out, err := l.CLI.Output(ctx, "squeue", "-h", "-j", id, "-o", "%T|%r|%S")
		if err != nil {
			t.Fatalf("squeue: %v", err)
		}
		f := strings.Split(strings.TrimSpace(string(out)), "|")
		if len(f) != 3 {
			t.Fatalf("squeue printed %q", out)
		}
		if f[0] == "PENDING" && f[1] == "BeginTime" && begin.IsZero() {
			if b, err := slurmcli.ParseTime(f[2], time.Local); err == nil {
				begin = b
			}
		}
		if f[0] == "RUNNING" && !begin.IsZero() {
			started = time.Now()
			return true
		}
		return false
	})
	if begin.IsZero() {
		t.Fatalf("never saw job %s held by its begin time after the requeue (%v)", id, time.Since(requeued))
	}
	return begin, started
}

// waitCycleReadAfter waits until daemon d logged a cycle that read Slurm
// after t0 ("cycle done" with its read_at past t0): cycles run one after
// another, so whatever an earlier cycle logged is in the log by then.
func waitCycleReadAfter(t *testing.T, d *daemonProc, t0 time.Time, within time.Duration) {
	t.Helper()
	waitFor(t, within, "a daemon cycle that read Slurm after "+t0.Format(time.RFC3339Nano), func() bool {
		for _, line := range logLines(t, d.log) {
			if line["@message"] != "cycle done" {
				continue
			}
			s, _ := line["read_at"].(string)
			if at, err := time.Parse(time.RFC3339Nano, s); err == nil && at.After(t0) {
				return true
			}
		}
		return false
	})
}
