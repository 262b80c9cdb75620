package trainer

import (
	"context"
	"errors"
	"testing"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/placement"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// losingExecutor is the in-process executor, except that the first attempt
// at each step in lose fails as if a worker had been lost, so the trainer
// redoes it.
type losingExecutor struct {
	*localExecutor
	lose map[int64]int // step -> attempts still to fail
}

func (x *losingExecutor) Step(ctx context.Context, step int64, plan placement.Plan, ests []*ESTContext, grad []float32, out *StepOutput) error {
	if x.lose[step] > 0 {
		x.lose[step]--
		return &LostError{Step: step, Ranks: []int{0}, Err: errors.New("injected loss")}
	}
	return x.localExecutor.Step(ctx, step, plan, ests, grad, out)
}

// TestLedgerMarksOnlyTheRedoneSteps: a step redone after losing workers is
// recorded with redo=1 and the number of times it was redone; the steps
// after it, run once, are not marked.
func TestLedgerMarksOnlyTheRedoneSteps(t *testing.T) {
	spec, wl := loadJob(t, mnistSmall)
	sampler, err := data.NewSampler(wl.TrainLen(), spec.LogicalWorkers, spec.Seed)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := NewReplica(spec, wl, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Step indices 3 and 6 are recorded as ledger steps 4 and 7 (the
	// ledger counts completed steps); step 6 fails twice.
	x := &losingExecutor{
		localExecutor: newLocalExecutor(spec, wl, sampler, 2, Ablation{}, rep.NumParams()),
		lose:          map[int64]int{3: 1, 6: 2},
	}
	dir := t.TempDir()
	ref := run(t, mnistSmall, "", func(o *Options) { o.StopAfter = 10 })
	sum := run(t, mnistSmall, "", func(o *Options) { o.StateDir = dir; o.StopAfter = 10; o.Executor = x })
	if sum.Digest != ref.Digest {
		t.Fatalf("digest %s after redone steps, uninterrupted %s", sum.Digest, ref.Digest)
	}
	if sum.RedoneSteps != 3 {
		t.Errorf("summary counts %d redone steps, want 3", sum.RedoneSteps)
	}
	db, err := statedb.OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Ledger(0, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]int{4: 1, 7: 2}
	for _, r := range rows {
		if r.Redo != (want[r.Step] > 0) || r.Redos != want[r.Step] {
			t.Errorf("ledger step %d: redo=%v redo_count=%d, want redo=%v redo_count=%d",
				r.Step, r.Redo, r.Redos, want[r.Step] > 0, want[r.Step])
		}
	}
	if len(rows) != 10 {
		t.Fatalf("ledger has %d rows, want 10", len(rows))
	}
}
