package daemon

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// tradingJob is a d2 elastic job of 8 logical workers on at most 2 nodes
// (8 GPUs, its maximum) that runs 5 times faster on a V100 than on a T4.
const tradingJob = "es-req min=1 max=2 lw=8 d2 speeds=t4:0.2,v100:1"

// Job 10 holds V100 node n1 and an extra job of 4 T4s on n3, at its
// maximum, with hours to run; V100 node n2 is idle. The daemon ends the T4
// extra job and lends n2's V100s in the same cycle (trade_up), and once
// the grace period is over cancels the T4 one if it is still there. With
// trade_up = false it does neither.
func TestTheDaemonTradesASlowExtraJobUpToIdleFasterGPUs(t *testing.T) {
	for _, tc := range []struct {
		name, comment string
		on            bool
	}{
		{"trade_up on (default)", tradingJob, true},
		// its runtime's report: every logical worker has a worker, so
		// nothing is lent beyond what it holds, and a trade stays within it
		{"trade_up on, the job's status comment says workers=8/8", "es step=100/100000 workers=8/8 d2 req=1-2 speeds=t4:0.2,v100:1", true},
		{"trade_up = false", tradingJob, false},
	} {
		on := tc.on
		t.Run(tc.name, func(t *testing.T) {
			toml := ""
			if !on {
				toml = "trade_up = false\n"
			}
			td := newTestDaemon(t, toml)
			td.fake.running("10", tc.comment, "n1", 4, 10*time.Hour, rendezvous(t, "10"))
			recordT4Extra(t, td)
			r := td.cycle(t)
			subs := td.fake.commands("sbatch")
			if !on {
				if len(subs) != 0 || len(td.fake.commands("scancel")) != 0 {
					t.Fatalf("submitted %q, cancelled %q; want nothing with trade_up = false", subs, td.fake.commands("scancel"))
				}
				return
			}
			if len(subs) != 1 || argValue(subs[0], "nodelist") != "n2" || !strings.Contains(argValue(subs[0], "gres"), ":4") {
				t.Fatalf("submitted %q, want one extra job of 4 GPUs on n2", subs)
			}
			if got := td.fake.commands("scancel"); !slices.Equal(got, []string{"scancel --signal=TERM 50"}) || !slices.Equal(r.Signalled, []string{"50"}) {
				t.Fatalf("scancel %q (report signalled %v), want extra job 50 signalled", got, r.Signalled)
			}
			if len(r.Untraded) != 0 {
				t.Fatalf("the report lists %+v as untraded, want none: the trade was carried out", r.Untraded)
			}
			if got := value(td.Metrics().Trades); got != 1 {
				t.Fatalf("trades_total %v, want 1", got)
			}
			ds := decisionsOf(t, td, "signal")
			if len(ds) != 1 || !strings.Contains(ds[0].Detail, "trading up") {
				t.Fatalf("signal decisions %+v, want one that says it trades up", ds)
			}
			td.advance(11 * time.Second) // past grace_period: the T4 extra job is still there
			td.cycle(t)
			if got := td.fake.commands("scancel"); !slices.Contains(got, "scancel 50") {
				t.Fatalf("scancel %q, want extra job 50 cancelled after its grace period", got)
			}
			if n := len(td.fake.commands("sbatch")); n != 1 {
				t.Fatalf("%d extra jobs submitted, want still 1", n)
			}
		})
	}
}

// recordT4Extra adds running extra job 50 of job 10, 4 T4s on n3, as the
// daemon recorded it.
func recordT4Extra(t *testing.T, td *testDaemon) {
	t.Helper()
	td.fake.extra("50", "10", "n3", 4, time.Hour)
	if err := td.db.RecordExtra(context.Background(), backfillstore.ExtraJob{ID: "50", Parent: "10", User: "alice",
		Partition: "low", Node: "n3", GPUType: "t4", GPUs: 4, Submitted: td.now, End: td.now.Add(time.Hour),
		Name: "es-extra-10", Comment: "es-extra parent=10"}); err != nil {
		t.Fatal(err)
	}
}

// Helper 110's, seen on the fake and on the 22.05 lab: with more idle
// V100s than one trade takes and 12 logical workers (so the waste cap does
// not stop it), the next cycles within the grace period traded the
// signalled T4 extra job again, lent past the job's maximum and the caps,
// and cancelled it at once. Now one trade is made and the T4 extra job
// gets its whole grace period.
func TestATradeIsMadeOnceAndKeepsTheGracePeriod(t *testing.T) {
	for _, toml := range []string{"", "[limits]\nmax_extra_gpus_per_user = 8\nmax_extra_gpus_per_job = 8\n"} {
		t.Run(toml, func(t *testing.T) {
			td := newTestDaemon(t, toml)
			td.fake.set(func() {
				td.fake.nodes = append(td.fake.nodes, &fakeNode{name: "n5", gpuType: "v100", gpus: 4, cpus: 8, partitions: []string{"normal", "low"}})
			})
			td.fake.running("10", "es-req min=1 max=2 lw=12 d2 speeds=t4:0.2,v100:1", "n1", 4, 10*time.Hour, rendezvous(t, "10"))
			recordT4Extra(t, td)
			td.cycle(t)
			for range 4 { // 8 s: within the 10-s grace period
				td.advance(2 * time.Second)
				td.cycle(t)
			}
			if subs := td.fake.commands("sbatch"); len(subs) != 1 {
				t.Fatalf("submitted %q, want one extra job for one trade", subs)
			}
			if got := td.fake.commands("scancel"); !slices.Equal(got, []string{"scancel --signal=TERM 50"}) {
				t.Fatalf("scancel %q within the grace period, want extra job 50 signalled only", got)
			}
			td.advance(3 * time.Second)
			td.cycle(t)
			if got := td.fake.commands("scancel"); !slices.Contains(got, "scancel 50") {
				t.Fatalf("scancel %q, want extra job 50 cancelled once its grace period is over", got)
			}
		})
	}
}

// Helper 110's: when sbatch refuses the faster extra job, the slow one is
// not ended: the job keeps its GPUs.
func TestATradeWhoseReplacementSbatchRefusesEndsNothing(t *testing.T) {
	td := newTestDaemon(t, "")
	td.fake.running("10", tradingJob, "n1", 4, 10*time.Hour, rendezvous(t, "10"))
	recordT4Extra(t, td)
	td.fake.set(func() {
		td.fake.sbatchFails = "sbatch: error: Batch job submission failed: Requested node configuration is not available"
	})
	r := td.cycle(t)
	if len(td.fake.commands("sbatch")) != 1 {
		t.Fatalf("sbatch %q, want the trade's one try", td.fake.commands("sbatch"))
	}
	if got := td.fake.commands("scancel"); len(got) != 0 || len(r.Signalled) != 0 {
		t.Fatalf("scancel %q (signalled %v), want the T4 extra job kept when its replacement was refused", got, r.Signalled)
	}
	if len(r.Untraded) != 1 || r.Untraded[0].Extra != "50" || !r.Untraded[0].Trade {
		t.Fatalf("the report's untraded shrinks %+v, want extra job 50's trade (its replacement was refused)", r.Untraded)
	}
	if got := value(td.Metrics().Trades); got != 0 {
		t.Fatalf("trades_total %v, want 0: nothing was traded", got)
	}
}

// Helper 111's: when the signal to the slow extra job fails after its
// replacement was submitted, the job holds more than its maximum; the
// next cycle ends the slow extra job (the planner's over-maximum rule)
// instead of leaving it for its whole lend, and trades nothing again.
func TestATradeWhoseSignalFailedIsFinishedNextCycle(t *testing.T) {
	td := newTestDaemon(t, "")
	td.fake.running("10", tradingJob, "n1", 4, 10*time.Hour, rendezvous(t, "10"))
	recordT4Extra(t, td)
	td.fake.set(func() {
		td.fake.refuse = map[string]string{"scancel --signal=TERM 50": "scancel: error: Socket timed out"}
	})
	td.cycle(t)
	td.fake.set(func() { td.fake.refuse = nil })
	td.advance(2 * time.Second)
	td.cycle(t)
	if got := td.fake.commands("scancel"); !slices.Equal(got, []string{"scancel --signal=TERM 50", "scancel --signal=TERM 50"}) {
		t.Fatalf("scancel %q, want the failed signal of extra job 50 sent again the next cycle", got)
	}
	if ds := decisionsOf(t, td, "signal"); len(ds) != 2 || !strings.Contains(ds[1].Detail, "more GPUs than its maximum") {
		t.Fatalf("signal decisions %+v, want the second to say the job holds more than its maximum", ds)
	}
	if n := len(td.fake.commands("sbatch")); n != 1 {
		t.Fatalf("%d extra jobs submitted, want 1", n)
	}
}
