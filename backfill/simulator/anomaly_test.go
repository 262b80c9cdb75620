package simulator

import (
	"fmt"
	"strings"
	"testing"

	"github.com/easyscale/easyscale-slurm/backfill/trace"
)

// TestGrowingIntoIdleGPUsCanRaiseMeanJCT records why no elastic policy
// that leaves Slurm's FIFO + backfill order in charge can be no worse
// than rigid on mean JCT on every trace (issue 17's first goal). On one
// node of 2 GPUs, A (1 GPU, elastic to 2, 10,000 s at 1 GPU) is alone, so
// the daemon grows it into the idle GPU (as issue 17 asks: "grow-back to
// idle GPUs at once when nothing queued wants them") and it ends near
// 5,000 s. B (2 GPUs, 10,000 s) is submitted at 7,000 s and ten short jobs
// C0…C9 (1 GPU, 500 s) at 7,500 s. Rigid: B is reserved at A's end
// (10,000 s), C0…C4 backfill into the second GPU before it, and C5…C9 wait
// for B. Elastic: B starts at once, as Slurm starts any job that fits, and
// all ten Cs wait for it. No reservation is delayed and no GPU a queued
// job could use was taken; A only finished sooner, yet mean JCT rises
// (makespan falls).
func TestGrowingIntoIdleGPUsCanRaiseMeanJCT(t *testing.T) {
	var b strings.Builder
	b.WriteString("job_id,submit_time_s,duration_s,num_gpus,gpu_type,status,is_training,logical_workers,min_gpus,max_gpus,determinism\n")
	b.WriteString("A,0,10000,1,,,1,2,1,2,d1\n")
	b.WriteString("B,7000,10000,2,,,1,2,2,2,d1\n")
	for i := range 10 {
		fmt.Fprintf(&b, "C%d,%d,500,1,,,1,1,1,1,d1\n", i, 7500+i)
	}
	run := func(p Policy) Result {
		jobs, err := trace.Read(strings.NewReader(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		cfg := Config{Policy: Rigid}
		if p != Rigid {
			cfg = DaemonDefaults()
		}
		cfg.GPUs, cfg.GPUsPerNode = []GPUGroup{{"v100", 2}}, 2
		res, err := Run(jobs, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	rigid, elastic := run(Rigid), run(Elastic)
	for _, res := range []Result{rigid, elastic} {
		for _, r := range res.PerJob {
			t.Logf("%s %s start %d end %d", res.Policy, r.ID, r.Start, r.End)
		}
	}
	t.Logf("mean JCT rigid %.0f s, elastic %.0f s; makespan %d s, %d s", rigid.MeanJCT, elastic.MeanJCT, rigid.Makespan, elastic.Makespan)
	if elastic.MeanJCT <= rigid.MeanJCT {
		t.Fatalf("elastic mean JCT %.0f s ≤ rigid's %.0f s: the anomaly this test records is gone", elastic.MeanJCT, rigid.MeanJCT)
	}
	if elastic.Makespan >= rigid.Makespan {
		t.Fatalf("elastic makespan %d s ≥ rigid's %d s", elastic.Makespan, rigid.Makespan)
	}
}
