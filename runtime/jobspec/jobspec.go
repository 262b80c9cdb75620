// Package jobspec reads and validates a training job file (TOML).
//
// The job file fixes everything that defines the training semantics: the
// task (dataset and model), the number of logical workers N and the
// micro-batch b per logical worker (so the global batch is N*b), the
// optimizer, the learning-rate schedule and the seed. How many physical
// workers run it is NOT part of the job: that is the allocation, and the
// trained model must not depend on it.
//
// Loading follows decode → validate → defaults: unknown keys are an error
// naming the key, and every validation error names the field and the fix.
// See examples/mnist/job.toml and examples/charlm/job.toml.
package jobspec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/easyscale/easyscale-slurm/internal/elastic"
)

// Spec is a parsed job file. Zero values are replaced by defaults in Load.
type Spec struct {
	// Name labels the job in logs and the state database.
	Name string `toml:"name" json:"name"`
	// Task selects the dataset and model family: "mnist" or "charlm".
	Task string `toml:"task" json:"task"`
	// LogicalWorkers is N, the data-parallel world size of the training
	// semantics (number of ESTs).
	LogicalWorkers int `toml:"logical_workers" json:"logical_workers"`
	// MicroBatch is b, the samples (sequences for charlm) per logical worker
	// per step.
	MicroBatch int `toml:"micro_batch" json:"micro_batch"`
	// Epochs sets the training horizon in passes over the training set;
	// ignored when Steps is set.
	Epochs int `toml:"epochs" json:"epochs"`
	// Steps sets the training horizon in optimizer steps (overrides Epochs).
	// The horizon fixes the learning-rate schedule; `run --steps` may stop
	// earlier without changing it.
	Steps int `toml:"steps" json:"steps"`
	// Seed keys every random stream of the job (initialisation, shuffling,
	// augmentation, dropout).
	Seed uint64 `toml:"seed" json:"seed"`
	// CheckpointEvery is the checkpoint period in steps (default 50).
	// Not part of the job's identity: changing it does not make another job.
	CheckpointEvery int `toml:"checkpoint_every" json:"-"`
	// Speeds is the job's throughput per GPU type relative to the reference
	// type ([speeds] table, e.g. t4 = 0.4, v100 = 1; internal/elastic's
	// ParseSpeeds rules), for easyscale-backfilld, which prefers it to the
	// site's table: the runtime writes it into the job's status comment
	// when the submission (easyscale-sbatch --speeds, EASYSCALE_SPEEDS) did
	// not give one. A scheduling hint, not part of the job's identity.
	Speeds map[string]float64 `toml:"speeds" json:"-"`

	// Engine computes the job: "native" (the default: the built-in Go
	// engine, Task names the model) or "torch" (a PyTorch module, see Torch).
	Engine string `toml:"engine" json:"engine,omitempty"`

	Data      Data       `toml:"data" json:"data"`
	Model     Model      `toml:"model" json:"model"`
	Optimizer Optimizer  `toml:"optimizer" json:"optimizer"`
	LR        LRSchedule `toml:"lr_schedule" json:"lr_schedule"`
	// Torch configures a job of engine "torch"; nil for the native engine.
	Torch *Torch `toml:"torch" json:"torch,omitempty"`
}

// Engines.
const (
	EngineNative = "native"
	EngineTorch  = "torch"
)

// Torch is the [torch] table of a job whose engine is "torch": the user's
// Python program builds the model, optimizer, LR schedulers and data set,
// either a training script that keeps its own loop (Script, the loop API:
// python/easyscale/loop.py) or a module whose setup(config) returns an
// easyscale.Job (Module; runtime/torchengine).
type Torch struct {
	// Module is the Python file, relative to the job file (as written): the
	// module with setup(config) -> easyscale.Job, or the script when
	// Script is set (Parse copies it here).
	Module string `toml:"module" json:"-"`
	// Script is a training script of the loop API, relative to the job file
	// (as written); run as __main__ with Args as its command line. Set
	// module or script, not both.
	Script string `toml:"script" json:"-"`
	// IsScript says Module is a script (the job file gave script): part of
	// the job's identity, so a joiner runs it the same way.
	IsScript bool `toml:"-" json:"script,omitempty"`
	// Args is the script's command line (sys.argv[1:]); "{data_dir}" and
	// "{text}" in an argument are replaced by the located datasets' paths
	// (Datasets). Part of the job's identity as written.
	Args []string `toml:"args" json:"args,omitempty"`
	// ModulePath is Module resolved against the job file's directory (Load).
	ModulePath string `toml:"-" json:"-"`
	// ModuleSHA256 is the hex sha256 of the module's content: the module is
	// part of the job's identity, its path is not (Load).
	ModuleSHA256 string `toml:"-" json:"module_sha256"`
	// Threads is the intra-op thread count of every Python process (default
	// 1): it changes the bits (docs/pytorch-bits.md §2), so it is part
	// of the job.
	Threads int `toml:"threads" json:"threads"`
	// Device is "cpu" (default) or "cuda" (one GPU per process).
	Device string `toml:"device" json:"device"`
	// Datasets the runtime locates, hashes into the job's identity and
	// passes to setup in config.params: "mnist" (params.data_dir, found
	// like the native task's by datasets.LocateMNIST: data.dir,
	// $EASYSCALE_MNIST_DIR, ./data/mnist, the installed copy, the module
	// cache) and "opticks" (params.text, shipped with Go).
	Datasets []string `toml:"datasets" json:"datasets,omitempty"`
	// Params is passed to setup as config.params (any TOML values).
	Params map[string]any `toml:"params" json:"params,omitempty"`
	// DigestEvery is K, the interval in steps of the ledger's digest
	// (sha256 of the parameters and logical worker 0's buffers): a step
	// whose number is a multiple of K is hashed, the others are recorded
	// unhashed. 0 (the default) lets the engine measure: it hashes the
	// first 3 steps, and takes the smallest K that keeps hashing at or below
	// 1 % of a step (K = 1 for the examples' models on the CPU). The final
	// step and every checkpoint step are always hashed. Not part of the
	// job's identity: it changes what is recorded, not what is trained.
	// Between 0 and MaxSteps.
	DigestEvery int `toml:"digest_every_steps" json:"-"`
}

// Data configures the dataset.
type Data struct {
	// Dir is the dataset folder (MNIST idx files, or the text file's folder
	// for charlm); empty means locate automatically. Not part of the job's
	// identity: moving the data does not make it another job. The data's
	// content is: the state database keeps the size and SHA-256 of every
	// file the task reads (workload.Workload.Data) and refuses a resume
	// or a joining worker with other data.
	Dir string `toml:"dir" json:"-"`
	// AugmentShift is the maximum random shift in pixels (MNIST), 0 = off.
	AugmentShift int `toml:"augment_shift" json:"augment_shift"`
	// SeqLen is the context length in characters (charlm).
	SeqLen int `toml:"seq_len" json:"seq_len,omitempty"`
}

// Model configures the network. Fields apply to the task's model family.
type Model struct {
	// Dropout is the drop probability in [0, 1).
	Dropout float32 `toml:"dropout" json:"dropout"`
	// Channels are the LeNet convolution widths (mnist), default [8, 16].
	Channels []int `toml:"channels" json:"channels,omitempty"`
	// Hidden is the LeNet fully connected width (mnist), default 128.
	Hidden int `toml:"hidden" json:"hidden,omitempty"`
	// DModel, Heads, Layers size the transformer (charlm).
	DModel int `toml:"d_model" json:"d_model,omitempty"`
	Heads  int `toml:"heads" json:"heads,omitempty"`
	Layers int `toml:"layers" json:"layers,omitempty"`
}

// Optimizer configures the update rule.
type Optimizer struct {
	// Kind is "sgd" or "adamw".
	Kind        string  `toml:"kind" json:"kind"`
	LR          float32 `toml:"lr" json:"lr"`
	Momentum    float32 `toml:"momentum" json:"momentum"`
	Nesterov    bool    `toml:"nesterov" json:"nesterov"`
	WeightDecay float32 `toml:"weight_decay" json:"weight_decay"`
	Beta1       float32 `toml:"beta1" json:"beta1,omitempty"`
	Beta2       float32 `toml:"beta2" json:"beta2,omitempty"`
	Eps         float32 `toml:"eps" json:"eps,omitempty"`
}

// LRSchedule is linear warmup followed by cosine decay to MinLR at the
// horizon (see optim.WarmupCosine).
type LRSchedule struct {
	WarmupSteps int     `toml:"warmup_steps" json:"warmup_steps"`
	MinLR       float32 `toml:"min_lr" json:"min_lr"`
}

// FieldError is a validation failure of one field.
type FieldError struct {
	Field string // dotted TOML key, e.g. "optimizer.lr"
	Msg   string // what is wrong and how to fix it
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// ErrUnknownKeys marks a job file with keys this version does not know;
// the error that wraps it is an *UnknownKeysError.
var ErrUnknownKeys = errors.New("unknown keys")

// UnknownKeysError lists the keys of a job file this version does not
// know, each with the key it likely meant (describeUnknown), and the
// example job file to compare with. It wraps ErrUnknownKeys.
type UnknownKeysError struct {
	Keys    []string // "torch.thread (did you mean torch.threads?)", "[optimzer]", ...
	Example string   // e.g. examples/torch-ddp/job.toml
}

func (e *UnknownKeysError) Error() string {
	if len(e.Keys) == 1 {
		what := "key"
		if strings.HasPrefix(e.Keys[0], "[") {
			what = "table"
		}
		return fmt.Sprintf("unknown %s %s; remove or rename it (see %s)", what, e.Keys[0], e.Example)
	}
	return fmt.Sprintf("unknown keys %s; remove or rename them (see %s)", strings.Join(e.Keys, ", "), e.Example)
}

// Unwrap returns ErrUnknownKeys.
func (e *UnknownKeysError) Unwrap() error { return ErrUnknownKeys }

// Load reads, validates and completes the job file at path. Errors name the
// file and the field; unknown keys wrap ErrUnknownKeys and list every key.
func Load(path string) (*Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading job file: %w", err)
	}
	s, err := Parse(string(b))
	if err != nil {
		return nil, fmt.Errorf("job file %s: %w", path, err)
	}
	if s.Torch != nil {
		if err := s.Torch.resolve(filepath.Dir(path)); err != nil {
			return nil, fmt.Errorf("job file %s: %w", path, err)
		}
	}
	return s, nil
}

// resolve finds the module next to the job file and hashes it.
func (t *Torch) resolve(dir string) error {
	t.ModulePath = t.Module
	if !filepath.IsAbs(t.ModulePath) {
		t.ModulePath = filepath.Join(dir, t.Module)
	}
	abs, err := filepath.Abs(t.ModulePath)
	if err != nil {
		return &FieldError{Field: "torch.module", Msg: err.Error()}
	}
	t.ModulePath = abs
	b, err := os.ReadFile(abs)
	if err != nil {
		field := "torch.module"
		if t.IsScript {
			field = "torch.script"
		}
		return &FieldError{Field: field, Msg: fmt.Sprintf("%v; the path is relative to the job file", err)}
	}
	sum := sha256.Sum256(b)
	t.ModuleSHA256 = hex.EncodeToString(sum[:])
	return nil
}

// Parse decodes job TOML text; see Load.
func Parse(text string) (*Spec, error) {
	var s Spec
	md, err := toml.Decode(text, &s)
	if err != nil {
		return nil, fmt.Errorf("parsing TOML: %w", err)
	}
	// A negative seed would wrap around in the unsigned field: refuse it.
	var probe struct {
		Seed any `toml:"seed"`
	}
	if _, err := toml.Decode(text, &probe); err == nil {
		if v, ok := probe.Seed.(int64); ok && v < 0 {
			return nil, &FieldError{Field: "seed", Msg: fmt.Sprintf("%d must not be negative", v)}
		}
	}
	if und := md.Undecoded(); len(und) > 0 {
		// A file with a [torch] table and no engine, or one not known,
		// most likely misspelt engine = "torch": its hints and example are
		// the torch engine's.
		engine := s.Engine
		if engine != EngineNative && engine != EngineTorch && md.IsDefined("torch") {
			engine = EngineTorch
		}
		example := "examples/mnist/job.toml"
		if engine == EngineTorch {
			example = "examples/torch-ddp/job.toml"
		}
		isTable := func(k toml.Key) bool { return md.Type(k...) == "Hash" }
		return nil, &UnknownKeysError{Keys: describeUnknown(engine, und, isTable), Example: example}
	}
	if s.Engine == EngineTorch && s.Torch != nil {
		switch t := s.Torch; {
		case t.Module != "" && t.Script != "":
			return nil, &FieldError{Field: "torch.script", Msg: "set torch.module (setup(config) -> easyscale.Job) or torch.script (a training script), not both"}
		case t.Script != "":
			t.Module, t.IsScript = t.Script, true
		case len(t.Args) > 0:
			return nil, &FieldError{Field: "torch.args", Msg: "applies only to torch.script (a module's setup reads [torch.params])"}
		}
	}
	if s.Engine == EngineTorch {
		// The module builds these: a value here would be silently ignored.
		for _, key := range []string{"task", "model", "optimizer", "lr_schedule", "epochs", "data.augment_shift", "data.seq_len"} {
			if md.IsDefined(strings.Split(key, ".")...) {
				msg := "does not apply to engine \"torch\": the module's setup builds the model, optimizer, schedule and data; remove it (pass values in [torch.params])"
				if key == "epochs" {
					msg = "engine \"torch\" needs steps: the data set's size is known only inside the module"
				}
				return nil, &FieldError{Field: key, Msg: msg}
			}
		}
	}
	s.applyDefaults()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

func (s *Spec) applyDefaults() {
	if s.Engine == EngineTorch {
		if s.Name == "" {
			s.Name = "torch"
		}
		if s.CheckpointEvery == 0 {
			s.CheckpointEvery = 50
		}
		if s.Torch != nil {
			if s.Torch.Threads == 0 {
				s.Torch.Threads = 1
			}
			if s.Torch.Device == "" {
				s.Torch.Device = "cpu"
			}
		}
		return
	}
	if s.Name == "" {
		s.Name = s.Task
	}
	if s.CheckpointEvery == 0 {
		s.CheckpointEvery = 50
	}
	if s.Optimizer.Kind == "" {
		s.Optimizer.Kind = "sgd"
	}
	if s.Optimizer.Kind == "adamw" {
		if s.Optimizer.Beta1 == 0 {
			s.Optimizer.Beta1 = 0.9
		}
		if s.Optimizer.Beta2 == 0 {
			s.Optimizer.Beta2 = 0.999
		}
		if s.Optimizer.Eps == 0 {
			s.Optimizer.Eps = 1e-8
		}
	}
	switch s.Task {
	case "mnist":
		if len(s.Model.Channels) == 0 {
			s.Model.Channels = []int{8, 16}
		}
		if s.Model.Hidden == 0 {
			s.Model.Hidden = 128
		}
	case "charlm":
		if s.Data.SeqLen == 0 {
			s.Data.SeqLen = 64
		}
		if s.Model.DModel == 0 {
			s.Model.DModel = 64
		}
		if s.Model.Heads == 0 {
			s.Model.Heads = 4
		}
		if s.Model.Layers == 0 {
			s.Model.Layers = 2
		}
	}
}

// Validate checks every field and returns the first *FieldError found.
func (s *Spec) Validate() error {
	fe := func(field, format string, a ...any) error {
		return &FieldError{Field: field, Msg: fmt.Sprintf(format, a...)}
	}
	if len(s.Speeds) > 0 {
		if _, err := elastic.ParseSpeeds(elastic.FormatSpeeds(s.Speeds)); err != nil {
			return fe("speeds", "%v; e.g. [speeds] t4 = 0.4, v100 = 1", err)
		}
	}
	switch s.Engine {
	case "", EngineNative:
		if s.Torch != nil {
			return fe("torch", "applies only to engine = \"torch\"; set engine or remove the [torch] table")
		}
	case EngineTorch:
		return s.validateTorch()
	default:
		return fe("engine", "%q is not known; use \"native\" (the default) or \"torch\"", s.Engine)
	}
	switch {
	case s.Task != "mnist" && s.Task != "charlm":
		return fe("task", "%q is not a known task; use \"mnist\" or \"charlm\"", s.Task)
	case s.LogicalWorkers < 1 || s.LogicalWorkers > 4096:
		return fe("logical_workers", "%d must be between 1 and 4096", s.LogicalWorkers)
	case s.MicroBatch < 1 || s.MicroBatch > 65536:
		return fe("micro_batch", "%d must be between 1 and 65536", s.MicroBatch)
	case s.Steps < 0 || s.Steps > MaxSteps:
		return fe("steps", "%d must be between 1 and %d", s.Steps, MaxSteps)
	case s.Epochs < 0 || s.Epochs > MaxEpochs:
		return fe("epochs", "%d must be between 1 and %d", s.Epochs, MaxEpochs)
	case s.Steps == 0 && s.Epochs == 0:
		return fe("steps", "set steps or epochs to fix the training horizon")
	case s.Steps > 0 && s.Epochs > 0:
		return fe("epochs", "set either steps or epochs, not both")
	case s.CheckpointEvery < 0:
		return fe("checkpoint_every", "%d must not be negative (0 means every 50 steps)", s.CheckpointEvery)
	case s.Data.AugmentShift < 0 || s.Data.AugmentShift > 8:
		return fe("data.augment_shift", "%d must be between 0 and 8 pixels", s.Data.AugmentShift)
	case !(s.Model.Dropout >= 0 && s.Model.Dropout < 1):
		return fe("model.dropout", "%v must be in [0, 1)", s.Model.Dropout)
	case s.Optimizer.Kind != "sgd" && s.Optimizer.Kind != "adamw":
		return fe("optimizer.kind", "%q is not known; use \"sgd\" or \"adamw\"", s.Optimizer.Kind)
	case !(s.Optimizer.LR > 0) || s.Optimizer.LR > 10:
		return fe("optimizer.lr", "%v must be in (0, 10]", s.Optimizer.LR)
	case !(s.Optimizer.Momentum >= 0 && s.Optimizer.Momentum < 1):
		return fe("optimizer.momentum", "%v must be in [0, 1)", s.Optimizer.Momentum)
	case s.Optimizer.Nesterov && s.Optimizer.Momentum == 0:
		return fe("optimizer.nesterov", "Nesterov needs optimizer.momentum > 0")
	case !(s.Optimizer.WeightDecay >= 0 && s.Optimizer.WeightDecay < 1):
		return fe("optimizer.weight_decay", "%v must be in [0, 1)", s.Optimizer.WeightDecay)
	case s.LR.WarmupSteps < 0:
		return fe("lr_schedule.warmup_steps", "%d must not be negative", s.LR.WarmupSteps)
	case !(s.LR.MinLR >= 0 && s.LR.MinLR <= s.Optimizer.LR):
		return fe("lr_schedule.min_lr", "%v must be in [0, optimizer.lr]", s.LR.MinLR)
	}
	if s.Optimizer.Kind == "adamw" {
		if !(s.Optimizer.Beta1 >= 0 && s.Optimizer.Beta1 < 1) || !(s.Optimizer.Beta2 >= 0 && s.Optimizer.Beta2 < 1) {
			return fe("optimizer.beta1", "beta1 and beta2 must be in [0, 1)")
		}
		if !(s.Optimizer.Eps > 0) {
			return fe("optimizer.eps", "%v must be positive", s.Optimizer.Eps)
		}
	}
	if err := s.checkTaskFields(); err != nil {
		return err
	}
	switch s.Task {
	case "mnist":
		if len(s.Model.Channels) != 2 || s.Model.Channels[0] < 1 || s.Model.Channels[1] < 1 || s.Model.Channels[0] > 256 || s.Model.Channels[1] > 256 {
			return fe("model.channels", "%v must be two widths between 1 and 256, e.g. [8, 16]", s.Model.Channels)
		}
		if s.Model.Hidden < 1 || s.Model.Hidden > 4096 {
			return fe("model.hidden", "%d must be between 1 and 4096", s.Model.Hidden)
		}
	case "charlm":
		if s.Data.SeqLen < 2 || s.Data.SeqLen > 1024 {
			return fe("data.seq_len", "%d must be between 2 and 1024", s.Data.SeqLen)
		}
		if s.Model.DModel < 1 || s.Model.DModel > 1024 {
			return fe("model.d_model", "%d must be between 1 and 1024", s.Model.DModel)
		}
		if s.Model.Heads < 1 || s.Model.DModel%s.Model.Heads != 0 {
			return fe("model.heads", "%d must be at least 1 and divide model.d_model (%d)", s.Model.Heads, s.Model.DModel)
		}
		if s.Model.Layers < 1 || s.Model.Layers > 48 {
			return fe("model.layers", "%d must be between 1 and 48", s.Model.Layers)
		}
	}
	return nil
}

// validateTorch checks a job of engine "torch".
func (s *Spec) validateTorch() error {
	fe := func(field, format string, a ...any) error {
		return &FieldError{Field: field, Msg: fmt.Sprintf(format, a...)}
	}
	switch {
	case s.Torch == nil || s.Torch.Module == "":
		return fe("torch.module", "engine \"torch\" needs [torch] script = \"train.py\" (a training script) or module = \"model.py\" (setup(config) -> easyscale.Job), relative to the job file")
	case len(s.Torch.Args) > 0 && !s.Torch.IsScript:
		return fe("torch.args", "applies only to torch.script (a module's setup reads [torch.params])")
	case s.LogicalWorkers < 1 || s.LogicalWorkers > 4096:
		return fe("logical_workers", "%d must be between 1 and 4096", s.LogicalWorkers)
	case s.MicroBatch < 1 || s.MicroBatch > 65536:
		return fe("micro_batch", "%d must be between 1 and 65536", s.MicroBatch)
	case s.Steps < 1 || s.Steps > MaxSteps:
		return fe("steps", "%d must be between 1 and %d", s.Steps, MaxSteps)
	case s.CheckpointEvery < 0:
		return fe("checkpoint_every", "%d must not be negative (0 means every 50 steps)", s.CheckpointEvery)
	case s.Seed > 1<<62:
		return fe("seed", "%d must be below 2^62 (the torch engine adds epochs to it)", s.Seed)
	case s.Torch.Threads < 1 || s.Torch.Threads > 256:
		return fe("torch.threads", "%d must be between 1 and 256", s.Torch.Threads)
	case s.Torch.Device != "cpu" && s.Torch.Device != "cuda":
		return fe("torch.device", "%q is not known; use \"cpu\" or \"cuda\"", s.Torch.Device)
	case s.Torch.DigestEvery < 0 || s.Torch.DigestEvery > MaxSteps:
		return fe("torch.digest_every_steps", "%d must be between 0 (measure: hash every K steps where hashing costs more than 1 %% of a step) and %d",
			s.Torch.DigestEvery, MaxSteps)
	}
	for i, d := range s.Torch.Datasets {
		if d != "mnist" && d != "opticks" {
			return fe("torch.datasets", "%q is not known; use \"mnist\" or \"opticks\" (or pass your own paths in [torch.params])", d)
		}
		if slices.Contains(s.Torch.Datasets[:i], d) {
			return fe("torch.datasets", "%q is listed twice", d)
		}
	}
	if _, err := json.Marshal(s.Torch.Params); err != nil {
		return fe("torch.params", "cannot be passed to Python: %v", err)
	}
	return nil
}

// Bounds of the training horizon.
const (
	MaxSteps  = 1_000_000_000 // optimizer steps
	MaxEpochs = 1_000_000
)

// checkTaskFields refuses keys of the other task's model or data, which
// would otherwise be silently ignored.
func (s *Spec) checkTaskFields() error {
	type field struct {
		name string
		set  bool
	}
	var foreign []field
	switch s.Task {
	case "mnist":
		foreign = []field{{"model.d_model", s.Model.DModel != 0}, {"model.heads", s.Model.Heads != 0},
			{"model.layers", s.Model.Layers != 0}, {"data.seq_len", s.Data.SeqLen != 0}}
	case "charlm":
		foreign = []field{{"model.channels", len(s.Model.Channels) != 0}, {"model.hidden", s.Model.Hidden != 0},
			{"data.augment_shift", s.Data.AugmentShift != 0}}
	}
	for _, f := range foreign {
		if f.set {
			return &FieldError{Field: f.name, Msg: fmt.Sprintf("does not apply to task %q; remove it", s.Task)}
		}
	}
	return nil
}

// Horizon returns the training horizon in steps: Steps if set, else
// Epochs * stepsPerEpoch. It fails when that exceeds MaxSteps.
func (s *Spec) Horizon(stepsPerEpoch int) (int64, error) {
	if s.Steps > 0 {
		return int64(s.Steps), nil
	}
	h := int64(s.Epochs) * int64(stepsPerEpoch)
	if stepsPerEpoch < 1 || h > MaxSteps {
		return 0, &FieldError{Field: "epochs", Msg: fmt.Sprintf("%d epochs of %d steps exceed %d steps; lower epochs or set steps", s.Epochs, stepsPerEpoch, MaxSteps)}
	}
	return h, nil
}

// Diff lists the dotted keys whose values differ between two canonical
// specs (Canonical's JSON), e.g. ["micro_batch", "optimizer.lr"]; it
// returns nil when either does not decode.
func Diff(a, b string) []string {
	var ma, mb map[string]any
	if json.Unmarshal([]byte(a), &ma) != nil || json.Unmarshal([]byte(b), &mb) != nil {
		return nil
	}
	var out []string
	diffMaps("", ma, mb, &out)
	sort.Strings(out)
	return out
}

func diffMaps(prefix string, a, b map[string]any, out *[]string) {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	for k := range keys {
		va, vb := a[k], b[k]
		sa, oka := va.(map[string]any)
		sb, okb := vb.(map[string]any)
		if oka && okb {
			diffMaps(prefix+k+".", sa, sb, out)
			continue
		}
		ja, _ := json.Marshal(va)
		jb, _ := json.Marshal(vb)
		if string(ja) != string(jb) {
			*out = append(*out, prefix+k)
		}
	}
}

// Canonical returns the spec as canonical JSON: the fields that define the
// training semantics, in a fixed order (data.dir excluded).
func (s *Spec) Canonical() string {
	b, err := json.Marshal(s)
	if err != nil { // only a NaN that Validate would have refused gets here
		return fmt.Sprintf("%+v", *s)
	}
	return string(b)
}

// ID returns "sha256:<hex>" of Canonical(): the job's identity in the state
// database. Two specs with the same ID train the same model.
func (s *Spec) ID() string {
	sum := sha256.Sum256([]byte(s.Canonical()))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ShortID is ID cut to "sha256:" and its first 12 hex digits: the job_id
// every runtime log line about this job carries.
func (s *Spec) ShortID() string { return s.ID()[:len("sha256:")+12] }
