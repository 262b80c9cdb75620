package trainer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/placement"
	"github.com/easyscale/easyscale-slurm/runtime/schedule"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// stallingExecutor computes step at completely on the real executor (so
// the EST cursors and BatchNorm buffers have advanced, as in a real step
// that is not done yet), then stalls until ctx ends, like a step far
// longer than Slurm's KillWait.
type stallingExecutor struct {
	Executor
	at      int64
	stalled chan struct{}
}

func (x *stallingExecutor) Step(ctx context.Context, step int64, plan placement.Plan, ests []*ESTContext, grad []float32, out *StepOutput) error {
	if step != x.at {
		return x.Executor.Step(ctx, step, plan, ests, grad, out)
	}
	if err := x.Executor.Step(context.Background(), step, plan, ests, grad, out); err != nil {
		return err
	}
	close(x.stalled)
	<-ctx.Done()
	return fmt.Errorf("stalled step %d: %w", step, ctx.Err())
}

// TestSignalMidStepCheckpointsTheLastCompletedStep: a signal (ctx ending)
// while a step is in progress abandons that step at once and checkpoints
// the state at the end of the last completed one, not the half-advanced
// contexts; resuming reproduces the uninterrupted run.
func TestSignalMidStepCheckpointsTheLastCompletedStep(t *testing.T) {
	ref := run(t, mnistSmall, "", nil)
	spec, wl := loadJob(t, mnistSmall)
	sampler, err := data.NewSampler(wl.TrainLen(), spec.LogicalWorkers, spec.Seed)
	if err != nil {
		t.Fatal(err)
	}
	const at = 9 // checkpoint_every is 5: step 9 is no boundary checkpoint
	x := &stallingExecutor{at: at, stalled: make(chan struct{}),
		Executor: newLocalExecutor(spec, wl, sampler, 2, Ablation{}, paramCount(wl.NewNet().Params()))}
	dir := t.TempDir()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, Options{Spec: spec, Workload: wl, StopAfter: testSteps, SkipEval: true, StateDir: dir,
			Executor: x, Schedule: schedule.Schedule{{Workers: 3}}})
		done <- err
	}()
	select {
	case <-x.stalled:
	case err := <-done:
		t.Fatalf("the run ended before step %d stalled: %v", at, err)
	case <-time.After(2 * time.Minute):
		t.Fatalf("step %d never started", at)
	}
	cancel(errors.New("signal terminated"))
	t0 := time.Now()
	select {
	case err := <-done:
		if !errors.Is(err, ErrInterrupted) {
			t.Fatalf("Run returned %v, want ErrInterrupted", err)
		}
		// the cause is the signal, not "context canceled" (a new user's finding)
		if !strings.Contains(err.Error(), "signal terminated") {
			t.Errorf("Run returned %v, want it to name the signal", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return within 5 s of the signal: it waits for the step in progress")
	}
	t.Logf("returned %v after the signal", time.Since(t0).Round(time.Millisecond))
	db, err := statedb.OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	ck, _, err := db.LatestCheckpoint()
	db.Close()
	if err != nil || ck == nil || ck.Step != at {
		t.Fatalf("newest checkpoint %v (%v), want one of step %d, the last completed", ck, err, at)
	}
	resumed := run(t, mnistSmall, "2", func(o *Options) { o.StateDir = dir })
	if resumed.ResumedFrom != at {
		t.Fatalf("resumed from %d, want %d", resumed.ResumedFrom, at)
	}
	if resumed.Digest != ref.Digest {
		t.Fatalf("digest %s after the mid-step signal and resume, uninterrupted %s: the checkpoint held half-done state", resumed.Digest, ref.Digest)
	}
}
