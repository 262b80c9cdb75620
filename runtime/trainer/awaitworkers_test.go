package trainer

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/placement"
	"github.com/easyscale/easyscale-slurm/runtime/schedule"
)

// emptyingExecutor is the in-process executor, except that at step empty
// it loses every worker at once (the last member left while another
// worker of the job rejoins), and AwaitWorkers then brings back comes
// workers (0: none was on its way).
type emptyingExecutor struct {
	*localExecutor
	empty  int64
	comes  int
	gone   bool
	awaits int
}

func (x *emptyingExecutor) Workers() int {
	if x.gone {
		return 0
	}
	return x.localExecutor.Workers()
}

func (x *emptyingExecutor) Step(ctx context.Context, step int64, plan placement.Plan, ests []*ESTContext, grad []float32, out *StepOutput) error {
	if step == x.empty && !x.gone && x.awaits == 0 {
		x.gone = true
		return &LostError{Step: step, Ranks: []int{0, 1}, Err: errors.New("injected loss of every worker")}
	}
	return x.localExecutor.Step(ctx, step, plan, ests, grad, out)
}

func (x *emptyingExecutor) AwaitWorkers(ctx context.Context, src *Replica, _ int64) (int, error) {
	x.awaits++
	if x.comes == 0 {
		return 0, nil
	}
	if err := x.localExecutor.Resize(ctx, x.comes, src); err != nil {
		return 0, err
	}
	x.gone = false
	return x.comes, nil
}

// TestNoWorkerLeftWaitsForThoseOnTheirWay: when a step loses every worker
// while others are on their way (AwaitingExecutor), the trainer waits for
// them and redoes the step on them, reaching the uninterrupted digest;
// with none on its way it stops with ErrNoWorkers, as before.
func TestNoWorkerLeftWaitsForThoseOnTheirWay(t *testing.T) {
	ref := run(t, mnistSmall, "", func(o *Options) { o.StopAfter = 8 })
	for _, tc := range []struct {
		name  string
		comes int
	}{{"a worker rejoins", 1}, {"two workers rejoin", 2}, {"none is on its way", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			spec, wl := loadJob(t, mnistSmall)
			sampler, err := data.NewSampler(wl.TrainLen(), spec.LogicalWorkers, spec.Seed)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := NewReplica(spec, wl, 1)
			if err != nil {
				t.Fatal(err)
			}
			x := &emptyingExecutor{localExecutor: newLocalExecutor(spec, wl, sampler, 2, Ablation{}, rep.NumParams()), empty: 4, comes: tc.comes}
			sum, err := Run(context.Background(), Options{Spec: spec, Workload: wl, StopAfter: 8, SkipEval: true, Executor: x,
				StateDir: t.TempDir(), Schedule: mustSchedule(t, "0:2")})
			if x.awaits != 1 {
				t.Errorf("AwaitWorkers called %d times, want once", x.awaits)
			}
			if tc.comes == 0 {
				if !errors.Is(err, ErrNoWorkers) || !strings.Contains(err.Error(), "checkpointed") {
					t.Fatalf("Run = %v, want ErrNoWorkers with the last step checkpointed", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sum.Digest != ref.Digest || sum.RedoneSteps != 1 {
				t.Fatalf("digest %s with %d redone steps, uninterrupted %s; want it with 1", sum.Digest, sum.RedoneSteps, ref.Digest)
			}
		})
	}
}

func mustSchedule(t *testing.T, s string) schedule.Schedule {
	t.Helper()
	sc, err := schedule.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}
