package daemon

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// lendFailureCount reads lend_failures_total{reason}.
func lendFailureCount(td *testDaemon, reason string) float64 {
	return value(td.Metrics().LendFailures.WithLabelValues(reason))
}

// TestExtraJobsThatSbatchRefusesBackOffAndStop is issue 20 item 2 for
// submissions: an sbatch that Slurm refuses (no Slurm job is made) was
// retried every cycle. Now a refusal counts as a failed lend of the job on
// the node, so with [retry] base 10s, max 40s, stop_after 5 and cycles
// 2 s apart the job is tried at 0, 10, 30, 70 and 110 s, then stopped with
// one log line; its other grows of a cycle that was refused are not
// submitted. A failure that is Slurm's or the daemon's (slurmctld
// unreachable, sbatch killed at its timeout) is not counted: the cycle
// fails (Run backs off) and the job is grown as soon as sbatch works.
func TestExtraJobsThatSbatchRefusesBackOffAndStop(t *testing.T) {
	tests := []struct {
		name     string
		stderr   string
		exit     error
		wantSubs []int // seconds from the start of the cycles that ran sbatch
		counted  bool  // a failed lend (backoff, stop) rather than a failed cycle
	}{
		{name: "a partition Slurm does not know",
			stderr:   "sbatch: error: Batch job submission failed: Invalid partition name specified",
			wantSubs: []int{0, 10, 30, 70, 110}, counted: true},
		{name: "a policy that refuses the user's request",
			stderr:   "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)",
			wantSubs: []int{0, 10, 30, 70, 110}, counted: true},
		{name: "slurmctld unreachable",
			stderr:   "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)",
			wantSubs: everyCycle(100)},
		{name: "sbatch killed at its timeout", exit: context.DeadlineExceeded, wantSubs: everyCycle(100)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDaemon(t, "nodes = [\"n1\", \"n2\", \"n3\"]\n[retry]\nbase = \"10s\"\nmax = \"40s\"\nstop_after = 5\n")
			td.fake.nodes[2].gpuType = "v100" // n2 and n3 may both take the d1 job's type
			var logs bytes.Buffer
			td.Daemon.log = hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true})
			td.fake.running("10", "es-req min=1 max=3 lw=12 d1", "n1", 4, time.Hour, rendezvous(t, "10"))
			td.fake.sbatchFails, td.fake.sbatchErr = tc.stderr, tc.exit
			start := td.now
			var subs []int
			failedCycles := 0
			for k := range 100 {
				before := len(td.fake.commands("sbatch"))
				r, err := td.Cycle(context.Background())
				if err != nil {
					failedCycles++
				}
				if k == 0 && len(r.Planned.Grows) < 2 {
					t.Fatalf("the first plan grows %+v: the test wants grows on two nodes", r.Planned.Grows)
				}
				switch n := len(td.fake.commands("sbatch")) - before; {
				case n > 1:
					t.Fatalf("cycle %d ran sbatch %d times after its first failed", k, n)
				case n == 1:
					subs = append(subs, int(td.now.Sub(start).Seconds()))
				}
				td.advance(2 * time.Second)
			}
			if !slices.Equal(subs, tc.wantSubs) {
				t.Fatalf("sbatch ran at %v s over 100 cycles, want %v", subs, tc.wantSubs)
			}
			hs, err := td.db.LendHistories(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			stops := countLogs(t, &logs, "not growing job", "10")
			if !tc.counted {
				if failedCycles != 100 || len(hs) != 0 || stops != 0 || lendFailureCount(td, "sbatch") != 0 {
					t.Errorf("%d failed cycles (want 100: Run backs off), lend histories %+v, %d stop lines, %v failures counted: "+
						"want nothing counted against the job", failedCycles, hs, stops, lendFailureCount(td, "sbatch"))
				}
				td.fake.sbatchFails, td.fake.sbatchErr = "", nil
				if r := td.cycle(t); len(r.Submitted) == 0 {
					t.Errorf("once sbatch works the job is not grown at once: %+v", r)
				}
				return
			}
			if failedCycles != 0 {
				t.Errorf("%d cycles failed, want none: a refusal is the job's, not the daemon's", failedCycles)
			}
			if stops != 1 {
				t.Errorf("%d log lines saying job 10 is not grown, want 1:\n%s", stops, logs.String())
			}
			if got := lendFailureCount(td, "sbatch"); got != 5 {
				t.Errorf("lend_failures_total{reason=sbatch} = %v, want 5", got)
			}
			if got := metricValue(t, td, "easyscale_backfill_jobs_not_grown"); got != 1 {
				t.Errorf("jobs_not_grown = %v, want 1", got)
			}
			ds, _ := td.db.Decisions(context.Background(), 0, 0)
			kinds := map[string]int{}
			for _, d := range ds {
				kinds[d.Kind]++
			}
			if kinds["grow-failed"] != 5 || kinds["stop-growing"] != 1 {
				t.Errorf("decisions %v, want 5 grow-failed and 1 stop-growing", kinds)
			}
		})
	}
}

func everyCycle(n int) []int {
	out := make([]int, n)
	for k := range out {
		out[k] = 2 * k
	}
	return out
}

// TestExtraJobsCancelledPendingBackOff is issue 20 item 2 for extra jobs
// that Slurm keeps pending: each was cancelled after pending_timeout and
// submitted again in the same cycle. Now the cancel counts as a failed
// lend on the node: with pending_timeout 3s, [retry] base 10s, max 40s,
// stop_after 2 and cycles 2 s apart, an extra job pending for Resources
// on the job's only node is tried at 0, 14, 38, 82, 126 and 170 s (each
// cancelled 4 s later, the node's wait doubling) and the job is never held
// elsewhere nor stopped; one pending for a limit of the user's QOS counts
// against the job and stops it after two.
func TestExtraJobsCancelledPendingBackOff(t *testing.T) {
	tests := []struct {
		reason   string
		wantSubs []int
		stopped  bool
	}{
		{reason: "Resources", wantSubs: []int{0, 14, 38, 82, 126, 170}},
		{reason: "ReqNodeNotAvail, UnavailableNodes:n1", wantSubs: []int{0, 14, 38, 82, 126, 170}},
		{reason: "QOSMaxGRESPerUser", wantSubs: []int{0, 14}, stopped: true},
	}
	for _, tc := range tests {
		t.Run(tc.reason, func(t *testing.T) {
			td := newTestDaemon(t, "nodes = [\"n1\"]\n[retry]\nbase = \"10s\"\nmax = \"40s\"\nstop_after = 2\n")
			td.cfg.PendingTimeout.Duration = 3 * time.Second
			var logs bytes.Buffer
			td.Daemon.log = hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true})
			td.fake.startPending, td.fake.pendingReason = true, tc.reason
			td.fake.running("10", "es-req min=1 max=2 lw=2 d1", "n1", 1, time.Hour, rendezvous(t, "10"))
			start := td.now
			var subs []int
			heldJobWide := false
			for range 100 {
				r := td.cycle(t)
				if len(r.Submitted) > 0 {
					subs = append(subs, int(td.now.Sub(start).Seconds()))
				}
				heldJobWide = heldJobWide || slices.Contains(r.Held, "10")
				td.advance(2 * time.Second)
			}
			if !slices.Equal(subs, tc.wantSubs) {
				t.Fatalf("extra jobs submitted at %v s over 100 cycles, want %v", subs, tc.wantSubs)
			}
			cancels := len(td.fake.commands("scancel"))
			if got := lendFailureCount(td, "pending"); got != float64(cancels) || cancels < len(subs)-1 {
				t.Errorf("lend_failures_total{reason=pending} = %v after %d cancels of %d extra jobs, want one per cancel",
					got, cancels, len(subs))
			}
			stops := countLogs(t, &logs, "not growing job", "10")
			if tc.stopped != (stops == 1) || stops > 1 {
				t.Errorf("%d log lines saying job 10 is not grown, want stopped %v:\n%s", stops, tc.stopped, logs.String())
			}
			if !tc.stopped && heldJobWide {
				t.Errorf("a node's failures held the job everywhere")
			}
			ds, _ := td.db.Decisions(context.Background(), 0, 0)
			n := 0
			for _, d := range ds {
				if d.Kind == "lend-failed" && strings.Contains(d.Detail, "pending_timeout") && strings.Contains(d.Detail, tc.reason) {
					n++
				}
			}
			if n != cancels {
				t.Errorf("%d lend-failed decisions naming pending_timeout and %q, want %d", n, tc.reason, cancels)
			}
		})
	}
}
