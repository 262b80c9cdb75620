package trainer

import (
	"io"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/schedule"
	"github.com/easyscale/easyscale-slurm/runtime/workload"
)

// Options configure one Run.
type Options struct {
	// Spec is the validated job file.
	Spec *jobspec.Spec
	// Workload is the dataset and network the spec names (native engine).
	Workload workload.Workload
	// Schedule gives the physical workers per step; nil means one worker
	// per logical worker throughout (the reference allocation).
	Schedule schedule.Schedule
	// StopAfter ends the run after this many steps (counted from step 0)
	// when positive and below the job's horizon; the learning-rate schedule
	// still follows the horizon, so a shorter run is a prefix of the full one.
	StopAfter int64
	// StateDir holds the state database and checkpoints; empty runs
	// without persistence (no resume).
	StateDir string
	// AllowNetworkFS lets the state directory live on NFS, Lustre and
	// other network filesystems, where SQLite is unsafe (refused by default).
	AllowNetworkFS bool
	// StartOverOnOtherNumerics makes a resume whose checkpoint was computed
	// with other numerics than this run's (Engine.Restore returns an error
	// matching ErrOtherNumerics: another GPU type, CPU ISA or torch release)
	// start the job over from step 0 instead of failing; the superseded
	// state is kept under the state directory (statedb.DB.StartOver) and
	// the result is bit-identical to a fixed run in this environment.
	// `easyscale run --on-other-numerics=start-over`.
	StartOverOnOtherNumerics bool
	// Threads is the number of cores to use in total (default GOMAXPROCS);
	// each of P physical workers gets max(1, Threads/P).
	Threads int
	// SkipEval skips the final test-set evaluation.
	SkipEval bool
	// Logger receives structured logs; nil discards them.
	Logger hclog.Logger
	// Progress, when non-nil, receives a one-line progress display
	// (rewritten with \r when it is a terminal).
	Progress io.Writer
	// ProgressIsTerminal selects the \r-rewritten form of the display.
	ProgressIsTerminal bool
	// OnStep, when set, is called after every completed step with the
	// step count, the stop step and the number of physical workers (the
	// Slurm status comment uses it). It must not block.
	OnStep func(step, stop int64, workers int)
	// CheckReplicas compares every replica with rank 0 after each step and
	// fails the run if they differ (a self-check used by tests).
	CheckReplicas bool
	// Engine computes the steps; nil means the native engine built from
	// Workload, Threads, Executor, Ablation and CheckReplicas (NativeEngine).
	// The torch engine comes from runtime/torchengine.
	Engine Engine
	// Executor runs the native engine's physical workers; nil means
	// goroutines in this process (one per physical worker of the schedule).
	Executor Executor
	// Ablation switches off one consistency factor; only tests use it, to
	// show that each factor is needed.
	Ablation Ablation
}

// Ablation names a consistency factor whose handling is switched off. The
// zero value switches nothing off.
type Ablation struct {
	// KeyRNGByWorker keys dropout and augmentation streams by the physical
	// worker rank instead of the logical worker id.
	KeyRNGByWorker bool
	// DropCursorOnMove restarts a logical worker's sampler cursor at the
	// start of its epoch when the EST moves to another physical worker.
	DropCursorOnMove bool
	// BuffersPerWorker keeps BatchNorm buffers per physical worker instead
	// of per logical worker.
	BuffersPerWorker bool
	// GroupedReduction sums each worker's ESTs first and then the workers'
	// partial sums, instead of the canonical EST order.
	GroupedReduction bool
}

// Summary is the result of a run, written as JSON by `easyscale run --summary`.
type Summary struct {
	Job            string   `json:"job"`
	Engine         string   `json:"engine"`
	JobID          string   `json:"job_id"`
	LogicalWorkers int      `json:"logical_workers"`
	MicroBatch     int      `json:"micro_batch"`
	Steps          int64    `json:"steps"`
	Horizon        int64    `json:"horizon"`
	Epoch          float64  `json:"epoch"`
	Digest         string   `json:"digest"`
	TrainLoss      float64  `json:"train_loss"`
	TestAccuracy   *float64 `json:"test_accuracy,omitempty"`
	TestLoss       *float64 `json:"test_loss,omitempty"`
	TestSamples    int      `json:"test_samples,omitempty"`
	// Reallocations counts the changes of the allocation this run made
	// (schedule, joins, leaves, lost workers); Schedule lists them.
	Reallocations int   `json:"reallocations"`
	RedoneSteps   int   `json:"redone_steps"`
	ResumedFrom   int64 `json:"resumed_from"`
	// StartedOver is set when the run started the job over from step 0
	// because its checkpoint was computed with other numerics
	// (Options.StartOverOnOtherNumerics).
	StartedOver   *StartedOver `json:"started_over,omitempty"`
	WallSeconds   float64      `json:"wall_seconds"`
	SamplesPerSec float64      `json:"samples_per_second"`
	Schedule      string       `json:"schedule"`
	// DigestEvery is K, the interval of the ledger's digest in steps (1:
	// every step; the native engine always). HashedSteps counts the steps
	// this run hashed (with K > 1 also the final and checkpoint steps).
	DigestEvery int `json:"digest_every_steps"`
	HashedSteps int `json:"hashed_steps"`
	// DigestSeconds is the median time hashing took and DigestCostPct its
	// ratio to the median step without hashing, in percent, over the
	// measured steps; absent for an engine that does not measure (native).
	DigestSeconds *float64 `json:"digest_seconds,omitempty"`
	DigestCostPct *float64 `json:"digest_cost_pct,omitempty"`
	// SelfCheck is how the torch engine's consistency self-check before the
	// first step went ("passed", "skipped (--no-self-check)", "skipped:
	// ..."), SelfCheckSeconds what it took; absent for the native engine.
	SelfCheck        string   `json:"self_check,omitempty"`
	SelfCheckSeconds *float64 `json:"self_check_s,omitempty"`
}

// StartedOver records a start-over: the step of the checkpoint that was
// not resumed, why (the differing numerics), and the directory that keeps
// the superseded state (a state directory of its own).
type StartedOver struct {
	FromStep   int64  `json:"from_step"`
	Reason     string `json:"reason"`
	Superseded string `json:"superseded"`
}
