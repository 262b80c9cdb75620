package trainer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/placement"
)

// Executor runs training steps on a set of physical workers. The trainer
// owns the authoritative state (the coordinator's replica, the EST contexts
// and the state database) and drives an Executor one step at a time:
//
//	Resize(P) → Step(s) → Commit(s) → Step(s+1) → ...
//
// Step computes every logical worker's gradient on the worker the plan
// assigns it to, updating the contexts, and leaves the reduced gradient
// (see Reducer: a function of the EST ids only) in grad. Nothing on the
// workers' replicas changes until Commit applies that gradient, so a step
// that fails (a worker lost) can be redone from the same state. The
// in-process executor (local.go) runs workers as goroutines; a network
// executor runs them as processes.
type Executor interface {
	// Workers returns the current number of physical workers.
	Workers() int
	// Resize sets the number of physical workers; joining workers start
	// as copies of src (parameters and optimizer state). When ctx ends
	// while it waits for workers, it returns at once an error wrapping
	// ctx.Err(), and the executor then accepts only Close.
	Resize(ctx context.Context, workers int, src *Replica) error
	// Step runs step for plan (one range of ESTs per worker rank). On
	// success ests hold each EST's advanced cursor and updated buffers,
	// out its loss and sample hash, grad the reduced gradient. On error
	// the contents of ests, out and grad are undefined; a *LostError says
	// which workers are gone.
	//
	// When ctx ends before the step is done (SIGTERM, SIGINT), Step gives
	// the step up and returns at once (well under a second, whatever the
	// step's length) an error wrapping ctx.Err(). Computation of the
	// abandoned step may still be running and writing into ests, out and
	// grad: the caller must not use them again, and the executor then
	// accepts only Close, which must not wait for that computation.
	Step(ctx context.Context, step int64, plan placement.Plan, ests []*ESTContext, grad []float32, out *StepOutput) error
	// Commit applies grad with learning rate lr on every worker's replica.
	Commit(step int64, grad []float32, lr float32) error
	// Close stops every worker (at once after an abandoned step).
	Close() error
}

// StepOutput receives per-logical-worker results of one step.
type StepOutput struct {
	Losses  []float32 // micro-batch loss per EST
	Samples []string  // hash of the sample indices per EST
}

// LostError reports physical workers that failed during a step (crashed,
// killed, disconnected or silent past the heartbeat timeout).
type LostError struct {
	Step  int64
	Ranks []int
	Err   error
	// DetectedAt is when the loss was detected (for crash_recovery_ms).
	DetectedAt time.Time
}

func (e *LostError) Error() string {
	return fmt.Sprintf("step %d: lost workers %v: %v", e.Step, e.Ranks, e.Err)
}

func (e *LostError) Unwrap() error { return e.Err }

// ErrNoWorkers is returned when every physical worker is gone.
var ErrNoWorkers = errors.New("no physical workers left")
