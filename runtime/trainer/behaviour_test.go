package trainer

import (
	"context"
	"testing"

	"github.com/easyscale/easyscale-slurm/runtime/engine"
	"github.com/easyscale/easyscale-slurm/runtime/workload"
)

// tenTestSamples keeps only the first 10 test samples of a workload.
type tenTestSamples struct{ workload.Workload }

func (tenTestSamples) TestLen() int { return 10 }

// A reported pitfall of sharded evaluation: with 10 samples over 4 ranks a
// padded DistributedSampler evaluates 12. Evaluation here counts each test
// sample exactly once.
func TestEvaluationCountsEveryTestSampleOnce(t *testing.T) {
	spec, wl := loadJob(t, mnistSmall)
	spec.LogicalWorkers = 4
	sum, err := Run(context.Background(), Options{Spec: spec, Workload: tenTestSamples{wl}, StopAfter: 1})
	if err != nil {
		t.Fatal(err)
	}
	if sum.TestSamples != 10 {
		t.Fatalf("evaluated %d test samples, want 10", sum.TestSamples)
	}
	if sum.TestAccuracy == nil || *sum.TestAccuracy < 0 || *sum.TestAccuracy > 1 {
		t.Fatalf("test accuracy %v out of range", sum.TestAccuracy)
	}
}

// A reported pitfall of seeding every rank alike: logical workers that
// share the job seed must still draw different dropout masks, and the same
// logical worker must draw the same mask wherever it runs.
func TestLogicalWorkersSharingASeedGetDifferentDropoutMasks(t *testing.T) {
	mask := func(est int) []float32 {
		x := engine.NewTensor(1, 64)
		for i := range x.Data {
			x.Data[i] = 1
		}
		return engine.NewTape(1).Dropout(x, 0.5, dropoutSource(42, est, 3)(0)).Data
	}
	a, b, again := mask(0), mask(1), mask(0)
	same := true
	for i := range a {
		if a[i] != b[i] {
			same = false
		}
		if a[i] != again[i] {
			t.Fatal("the same logical worker drew two different masks")
		}
	}
	if same {
		t.Fatal("logical workers 0 and 1 drew the same dropout mask from one seed")
	}
}
