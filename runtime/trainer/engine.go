package trainer

import (
	"context"
	"errors"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/placement"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// Engine computes a job's steps on its physical workers. The trainer owns
// everything around it, the same for every engine: the allocation schedule
// and membership, the placement of logical workers, the state database
// (ledger, checkpoints, allocation history), resume, SIGTERM handling,
// progress and the summary. Two engines exist: the native Go engine
// (native.go; physical workers are goroutines or, through an Executor,
// processes and nodes) and the PyTorch engine (runtime/torchengine;
// physical workers are Python processes).
//
// The trainer drives an engine one step at a time:
//
//	Resize(P) → Step(s, plan) → Digest → [Snapshot] → Step(s+1, plan) → ...
//
// Step computes every logical worker's micro-batch on the worker plan
// assigns it to, reduces the gradients in logical-worker order and
// commits the update on every replica. A step either commits everywhere
// or nowhere that matters:
//   - a *LostError: workers died; nothing was committed and the logical
//     workers' contexts are those of the last committed step. The trainer
//     re-places them on the Workers() left and redoes the step.
//   - an error wrapping ctx.Err(): the step was abandoned at once (SIGTERM);
//     the engine's state is the last committed step's, ready for Snapshot,
//     and it then accepts only Snapshot and Close.
type Engine interface {
	// Name is "native" or "torch" (logs and the summary).
	Name() string
	// StepsPerEpoch is the number of steps in one pass over the training
	// set: floor(ceil(train set / N) / micro_batch).
	StepsPerEpoch() int
	// Data lists every file the job trains on, with its sha256: part of the
	// job's identity (a resume with other data is refused).
	Data() data.Manifest
	// Workers returns the current number of physical workers.
	Workers() int
	// Resize sets the number of physical workers; joiners start from the
	// last committed step's replica. When ctx ends it returns an error
	// wrapping ctx.Err() at once.
	Resize(ctx context.Context, workers int) error
	// Boundary admits and releases workers that join or leave on their own
	// (processes started by Slurm, SIGTERM) before step; it reports whether
	// the membership changed. Engines without such workers return false.
	Boundary(ctx context.Context, step int64) (changed bool, err error)
	// Step runs step on plan (one contiguous range of logical workers per
	// worker rank) and commits it; see the type's documentation for errors.
	Step(ctx context.Context, step int64, plan placement.Plan) (StepReport, error)
	// Digest returns the digest of the model DDP would save after the last
	// committed step (parameters and logical worker 0's buffers), and the
	// per-tensor digests when the engine has them.
	Digest() (string, []statedb.TensorDigest)
	// Snapshot returns the checkpoint of the last committed step, which is step.
	Snapshot(ctx context.Context, step int64) (Snapshot, error)
	// Restore makes a checkpoint the last committed step.
	Restore(ck *statedb.Checkpoint) error
	// Evaluate returns the test-set loss and accuracy of the saved model and
	// the number of test samples; ErrNoTestSet (wrapped) when the job has
	// none, which is no failure: the summary then has no test figures.
	Evaluate(ctx context.Context) (loss, accuracy float64, samples int, err error)
	// Close stops every worker (at once after an abandoned step).
	Close() error
}

// StepReport is what a committed step reports per logical worker.
type StepReport struct {
	Losses  []float32 // micro-batch loss, indexed by logical worker
	Samples []string  // hash of the micro-batch's sample indices, indexed by logical worker
}

// Snapshot is a checkpoint as an engine encodes it: either float32 Tensors
// (statedb.SaveCheckpoint, the native engine) or a whole safetensors File
// of any dtypes (statedb.SaveCheckpointFile, the torch engine), plus every
// logical worker's context.
type Snapshot struct {
	Tensors  []statedb.Tensor
	File     []byte
	Contexts []statedb.ESTContext
	Meta     map[string]string
}

// Preparer is an Engine whose physical workers take long to start (the
// torch engine: a Python process imports torch and loads the job, about a
// second each on this machine's CPU). When the run's --workers schedule
// announces a grow, the trainer calls Prepare(ctx, workers) right after the
// allocation before it takes effect, so that the Resize at the grow's step
// finds the workers started: the rescale then costs what it costs on a
// cluster, where a lent GPU's worker starts its process before it asks to
// join. Prepare must not block; ctx is the run's.
type Preparer interface {
	Engine
	Prepare(ctx context.Context, workers int)
}

// ErrNoTestSet is what Engine.Evaluate returns for a job without a test set
// (a torch job whose training script evaluates in its own loop, or a Job
// without test_set): the run skips the final evaluation, without a flag.
var ErrNoTestSet = errors.New("the job has no test set")

// ErrOtherNumerics is what Engine.Restore's error matches when the
// checkpoint was computed with other numerics than this run's (the torch
// engine's *torchengine.ResumeError): resuming would break the job's
// bit-identity with its fixed run. The run fails, or with
// Options.StartOverOnOtherNumerics starts the job over from step 0.
var ErrOtherNumerics = errors.New("the checkpoint was computed with other numerics than this run's")

// FinishedRefusal is an error matching ErrOtherNumerics whose message
// offers starting the job over (the torch engine's ResumeError). For a
// job that finished, which is never started over (its result stands), the
// trainer returns Finished(step) instead: the same refusal, worded for a
// job finished at step, offering no start-over.
type FinishedRefusal interface {
	error
	Finished(step int64) error
}

// NumericsRecorder is an Engine whose bits depend on where it runs (the
// torch engine: torch release, CPU ISA, GPU model, pinned environment).
// The trainer keeps NumericsRecord in the state directory
// (statedb.DB.SetNumerics) beside the ledger it computes, and a run that
// finds no usable checkpoint but ledger rows it would recompute calls
// CheckNumerics with the kept record and the ledger's last step: an error
// matching ErrOtherNumerics says those rows were computed with other bits
// (without the check, the first recomputed step failed as a divergence).
type NumericsRecorder interface {
	Engine
	NumericsRecord() (string, error)
	CheckNumerics(record string, lastStep int64) error
}

// SelfChecker is an Engine that checks, before the first step, that the
// job's bits do not depend on the placement (the torch engine's
// self-check): SelfCheck reports "passed", "skipped ..." or "" (not run)
// and its seconds, for the summary. A failed check fails Step.
type SelfChecker interface {
	Engine
	SelfCheck() (status string, seconds float64)
}
