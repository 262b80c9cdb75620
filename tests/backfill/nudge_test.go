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
func TestARequeuedElasticJobStartsOnceItsBeginTimePassesBecauseTheDaemonNudgesIt(t *testing.T) {
	l := slurmlab.Require(t)
	ctx := context.Background()
	s := settings{dir: t.TempDir(), nodes: []string{"n4"}}
	d := startDaemon(t, l, s, "backfilld")
	e, _ := submitElastic(t, l, "es-req min=1 max=1 lw=4 d1", "-w", "n4", "--gres=gpu:t4:1", "-t", "5")
	if _, err := l.CLI.Output(ctx, "scontrol", "requeue", e.ID); err != nil {
		t.Fatalf("scontrol requeue %s: %v", e.ID, err)
	}
	requeued := time.Now()
	var begin, started time.Time
	waitFor(t, 90*time.Second, "job "+e.ID+" running again after its requeue", func() bool {
		out, err := l.CLI.Output(ctx, "squeue", "-h", "-j", e.ID, "-o", "%T|%r|%S")
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
		if f[0] == "RUNNING" {
			started = time.Now()
			return true
		}
		return false
	})
	if begin.IsZero() {
		t.Fatalf("never saw job %s held by its begin time after the requeue (%v)", e.ID, started.Sub(requeued))
	}
	if n := countLog(t, d.log, "nudged Slurm's scheduler: the job's begin time has passed"); n != 1 {
		t.Errorf("the daemon logged %d nudges, want 1", n)
	}
	d.stop(syscall.SIGTERM) // state_db is the daemon's alone while it runs
	if n := countDecisions(t, s, "nudge"); n != 1 {
		t.Errorf("%d nudge decisions in state_db, want 1", n)
	}
	after := started.Sub(begin)
	t.Logf("job %s: requeued, eligible %v later (begin time %s), running %v after its begin time",
		e.ID, begin.Sub(requeued).Round(time.Second), begin.Format(time.TimeOnly), after.Round(10*time.Millisecond))
	// A cycle a second (poll_interval) nudges it within about 2 s of the
	// begin time (squeue prints whole seconds); Slurm starts it in under a
	// second after. The bound leaves room for a loaded machine.
	if after > 6*time.Second {
		t.Errorf("job %s ran %v after its begin time, want within 6 s", e.ID, after)
	}
}
