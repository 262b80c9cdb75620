package simulator

import (
	"testing"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
)

// TestDrainHorizonLetsTheLongestJobYieldWhenOthersWorkOutlastsIt: on one
// V100 node and one T4 node of 8 GPUs each (the T4 a third as fast), A
// (alice, d2, 8 GPUs, 10,000 s) holds the V100s and C (carol, 300 s of
// work) the T4s, with E (erin, 8 T4s, 60,000 s on their pace) queued
// behind C. B (bob, 4 GPUs pinned to the V100s, 1,000 s) arrives at 10 s.
// Without Config.DrainHorizon, A, the longest running job, does not
// yield (shrunk, it would end after every running job and after B's end
// by waiting), and B waits for A's end. With it, the cluster cannot run
// A's, C's and E's work before A's later end anyway, so A lends B four
// GPUs: B ends about 10,000 s sooner, A about 600 s later, and the
// makespan, E's end, does not move. When the queued work is B's own
// user's (E is bob's), the bound does not widen and B waits. A's end is
// counted as if it never got its GPUs back (admit.horizon "kept"): counted
// as returned after B's run, A yields without the drain bound too
// (TestTheAdmitHorizon).
func TestDrainHorizonLetsTheLongestJobYieldWhenOthersWorkOutlastsIt(t *testing.T) {
	const head = "job_id,submit_time_s,duration_s,num_gpus,gpu_type,status,is_training,vc,logical_workers,min_gpus,max_gpus,determinism\n"
	run := func(csv string, drain bool) (map[string]JobRecord, Result) {
		cfg := twoTypes(8, 8, 8, 1.0/3)
		cfg.DrainHorizon, cfg.AdmitHorizon = drain, planner.HorizonKept
		return runTable(t, head+csv, cfg)
	}
	jobs := func(erin string) string {
		return "A,0,10000,8,,,1,alice,8,1,8,d2\n" +
			"C,1,300,8,t4,,1,carol,8,8,8,d1\n" +
			"E,5,20000,8,t4,,1," + erin + ",8,8,8,d1\n" +
			"B,10,1000,4,v100,,1,bob,4,4,4,d1\n"
	}
	off, resOff := run(jobs("erin"), false)
	on, resOn := run(jobs("erin"), true)
	t.Logf("without: B %d-%d, A ends %d, makespan %d; with: B %d-%d, A ends %d, makespan %d",
		off["B"].Start, off["B"].End, off["A"].End, resOff.Makespan, on["B"].Start, on["B"].End, on["A"].End, resOn.Makespan)
	if off["B"].Start < off["A"].End-100 {
		t.Fatalf("without the drain bound B started at %d s, before A's end at %d s: the test needs A not to yield", off["B"].Start, off["A"].End)
	}
	if on["B"].End > off["B"].End-8000 || resOn.Makespan != resOff.Makespan || resOn.MeanJCT >= resOff.MeanJCT {
		t.Fatalf("with the drain bound B ran %d-%d s (%d-%d s without), makespan %d s (%d), mean JCT %.0f s (%.0f); want B about 9,000 s sooner, the same makespan and a lower mean",
			on["B"].Start, on["B"].End, off["B"].Start, off["B"].End, resOn.Makespan, resOff.Makespan, resOn.MeanJCT, resOff.MeanJCT)
	}
	own, _ := run(jobs("bob"), true)
	if own["B"].Start < own["A"].End-100 {
		t.Fatalf("with C bob's own, B started at %d s, before A's end at %d s: bob's own work widened his bound", own["B"].Start, own["A"].End)
	}
}
