package trainer

import (
	"context"
	"fmt"
)

// WorkerAwaiter is an Engine whose workers may still be on their way when
// none is left: a worker process that lost its session and is rejoining
// (one that missed a step's all-reduce result when a rank upstream of it
// was killed), a joiner waiting for admission. When the last member leaves
// meanwhile, the trainer asks AwaitWorkers before it gives up with
// ErrNoWorkers: it waits for those workers (bounded by the engine's join
// timeout), admits them before step and returns how many workers the
// engine then has; 0 at once when none is on its way. When ctx ends it
// returns an error wrapping ctx.Err().
type WorkerAwaiter interface {
	Engine
	AwaitWorkers(ctx context.Context, step int64) (int, error)
}

// AwaitingExecutor is an Executor that can wait for workers on their way
// (WorkerAwaiter), joiners copying src.
type AwaitingExecutor interface {
	Executor
	AwaitWorkers(ctx context.Context, src *Replica, step int64) (int, error)
}

var _ WorkerAwaiter = (*nativeEngine)(nil)

// AwaitWorkers implements WorkerAwaiter through the executor, when it can
// wait (AwaitingExecutor); otherwise it returns Workers().
func (e *nativeEngine) AwaitWorkers(ctx context.Context, step int64) (int, error) {
	ax, ok := e.exec.(AwaitingExecutor)
	if !ok {
		return e.exec.Workers(), nil
	}
	return ax.AwaitWorkers(ctx, e.master, step)
}

// workers returns the engine's number of physical workers. When none is
// left and the engine can wait for workers on their way (WorkerAwaiter),
// it waits for them first, so a job whose last member left while another
// rejoins goes on instead of stopping with ErrNoWorkers.
func (j *job) workers(ctx context.Context) (int, error) {
	n := j.eng.Workers()
	wa, ok := j.eng.(WorkerAwaiter)
	if n > 0 || !ok {
		return n, nil
	}
	n, err := wa.AwaitWorkers(ctx, j.step)
	if err != nil {
		return 0, fmt.Errorf("step %d: no physical worker left: %w", j.step, err)
	}
	return n, nil
}
