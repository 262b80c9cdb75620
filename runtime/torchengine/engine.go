package torchengine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/runtime/cluster"
	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/datasets"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/placement"
	"github.com/easyscale/easyscale-slurm/runtime/trainer"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// Datasets the runtime knows how to find for a torch job ([torch] datasets
// in the job file): each is located on this machine, hashed into the job's
// identity, and passed to setup in config.params.
const (
	// DatasetMNIST is MNIST's four idx files: params["data_dir"] is their
	// directory (datasets.LocateMNIST: data.dir, $EASYSCALE_MNIST_DIR,
	// ./data/mnist, the installed copy, the module cache).
	DatasetMNIST = "mnist"
	// DatasetOpticks is Newton's Opticks shipped with Go: params["text"] is its path.
	DatasetOpticks = "opticks"
)

// Options configure the torch engine of one run.
type Options struct {
	// Spec is the job file (engine "torch").
	Spec *jobspec.Spec
	// PackageRoot is where the Python package is extracted (a per-user cache directory by default).
	PackageRoot string
	// Stderr receives the Python processes' output (os.Stderr when nil).
	Stderr io.Writer
	// HeartbeatTimeout is how long a process may be silent before it is
	// declared lost (5 s when zero).
	HeartbeatTimeout int
	// KillAt and TermAt inject faults: at step S, each physical worker R
	// listed SIGKILLs (SIGTERMs) itself once its step has started; once, so
	// the redone step runs clean.
	KillAt, TermAt map[int64][]int
	// Listen is the coordinator's --listen address when workers on other
	// machines may join (Engine.Listen): its host is the address this
	// machine's processes are reached on, and their gloo uses the
	// interface holding it.
	Listen string
	// Logger logs admissions and releases (a null logger when nil).
	Logger hclog.Logger
	// NoSelfCheck skips the self-check before the first step (run
	// --no-self-check); the summary says it was skipped.
	NoSelfCheck bool
	// CheckedBefore, when set, says why the self-check is not run again:
	// a standby taking over coordinates a run whose lost coordinator ran
	// it before the first step (a failed check would have refused the
	// job), on processes whose versions and numerics its admission
	// matched. The summary says "skipped: " and this.
	CheckedBefore string
	// Workers is how many processes of this machine the run's first
	// allocation has (0 or 1: one): New starts them all at once, so they
	// import torch and load the job alongside the first process, and the
	// trainer's first Resize admits them (a Resize to fewer leaves the
	// rest as spares for a later grow; Close stops them).
	Workers int
	// Node is this coordinator's Slurm node; with Standby, the lowest-ranked
	// remote worker on another node receives every logical worker's
	// context with each step, to take over when this node is lost
	// (standby.go).
	Node    string
	Standby bool
	// AwaitStandby, with Standby, is how long the run's first Boundary
	// waits for a joiner on another node than Node, the standby-to-be, so
	// that the committed state has a copy off this node from the first
	// step; 0 does not wait. The coordinator's Python processes start as
	// the other tasks' do, so the wait is their difference; without it a
	// lab job trained alone for about 6 s, and losing its first node then
	// went through a requeue from step 0 (docs/first-node-loss.md).
	AwaitStandby time.Duration
	// Spare is a Python process a standby started ahead of this takeover
	// (spare.go): New adopts it as its first process when it was started
	// and loaded as New would start that one, and closes it otherwise.
	Spare *Spare
}

// CheckSteps is how many steps the self-check runs in each placement.
const CheckSteps = 2

// Engine is the PyTorch engine: trainer.Engine over local Python processes.
type Engine struct {
	local   *Local
	opts    Options
	python  string
	files   data.Manifest
	samples int
	digest  string
	hashS   float64
	tensors []statedb.TensorDigest
	log     hclog.Logger

	ln      *cluster.Listener
	stop    chan struct{} // closed by Close: the intake of joiners ends
	closed  sync.Once
	mu      sync.Mutex
	pending []*remote // joiners that passed the checks, admitted at the next Boundary
	// fullLogged says Boundary logged that joiners wait because every
	// logical worker has a process (reset when one is admitted).
	fullLogged bool
	// joined is signalled (never blocking) when Listen queues a joiner;
	// awaited is set once the first Boundary has waited (AwaitStandby).
	joined  chan struct{}
	awaited bool
	// ledger chooses the ledger rows sent to the standby (standby.go);
	// pendingRow builds the row a step will be recorded with, sent with
	// its contexts (nil: the run records no ledger).
	ledger     cluster.LedgerFeed
	pendingRow trainer.PendingRow
}

var (
	_ trainer.SparseDigester = (*Engine)(nil)
	_ trainer.Preparer       = (*Engine)(nil)
	_ trainer.SelfChecker    = (*Engine)(nil)
	_ trainer.LedgerFollower = (*Engine)(nil)
)

// FollowLedger makes the standby frames carry the job's ledger rows, and
// each step's contexts the row the step will be recorded with
// (trainer.LedgerFollower; standby.go).
func (e *Engine) FollowLedger(read trainer.LedgerReader, row trainer.PendingRow) {
	e.ledger.Follow(read)
	e.pendingRow = row
}

// LedgerRecorded sends the standby the row of step at once: the standby's
// process commits a step with the contexts it was sent before the commit,
// so its copy is of step (the state after it) before the coordinator
// records the step's row, and a coordinator lost before its next step
// would otherwise leave that row out of the copy (trainer.LedgerFollower;
// standby.go).
func (e *Engine) LedgerRecorded(step int64) {
	if e.opts.Standby {
		e.sendStandby(step, nil, nil)
	}
}

// New extracts the Python package, locates and hashes the job's datasets,
// starts the first allocation's Python processes at once (o.Workers) and
// waits for the first (it reports the training set's size and the
// numerics every later process must match). Errors name the
// interpreter, the dataset or the module that failed.
func New(ctx context.Context, o Options) (*Engine, error) {
	spec := o.Spec
	adopted := false
	defer func() {
		if !adopted {
			_ = o.Spare.Close()
		}
	}()
	if spec.Engine != jobspec.EngineTorch || spec.Torch == nil {
		return nil, fmt.Errorf("job %q is not a torch job (engine = %q)", spec.Name, spec.Engine)
	}
	py, _, err := Python(ctx)
	if err != nil {
		return nil, err
	}
	root := o.PackageRoot
	if root == "" {
		if root, err = defaultPackageRoot(); err != nil {
			return nil, err
		}
	}
	dir, err := Extract(root)
	if err != nil {
		return nil, err
	}
	params := map[string]any{}
	for k, v := range spec.Torch.Params {
		params[k] = v
	}
	files, err := locateDatasets(spec, params)
	if err != nil {
		return nil, err
	}
	hb := o.HeartbeatTimeout
	if hb <= 0 {
		hb = 5
	}
	cfg := jobConfig(spec, params)
	start := StartOptions{Python: py, PackageDir: dir, Stderr: o.Stderr, HeartbeatTimeout: time.Duration(hb) * time.Second}
	if start.Stderr == nil {
		start.Stderr = os.Stderr
	}
	start.Stdout = start.Stderr // the training script's prints (its logging) show with the run's log
	var host string
	if o.Listen != "" {
		if host, _, err = net.SplitHostPort(o.Listen); err != nil {
			return nil, fmt.Errorf("--listen %q: want HOST:PORT: %w", o.Listen, err)
		}
		if ifname := ifaceOf(host); ifname != "" {
			start.Env = append(start.Env, "GLOO_SOCKET_IFNAME="+ifname)
		}
	}
	log := o.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	e := &Engine{local: NewLocal(cfg, start), opts: o, python: py, files: files, log: log.Named("torch"), stop: make(chan struct{}), joined: make(chan struct{}, 1)}
	if o.Standby {
		e.local.group.Standby = e.sendStandby
	}
	if host != "" && !net.ParseIP(host).IsUnspecified() {
		e.local.Host = host
	}
	// A collective waits only for transfers (Group.TimeoutSeconds): a step's
	// computation, however long, is outside it, and a peer lost during it
	// is found by its heartbeats. The bound matters where a peer's loss
	// closes no socket (a worker on another machine cut off by the
	// network while the gradients travel): its peers' collectives fail
	// after it.
	e.local.group.TimeoutSeconds = max(5, float64(hb))
	if !o.NoSelfCheck && o.CheckedBefore == "" {
		e.local.CheckSteps = CheckSteps
	}
	// The first line a torch run prints: its workers take seconds to import
	// torch and form their group (a tester saw 9 to 17 s of silence).
	e.log.Info("starting python workers", "python", py)
	started, ready := time.Now(), false
	e.local.OnGroup = func(workers int, step int64, took time.Duration) {
		if !ready { // the bench's torch_start_s ends at this line
			ready = true
			e.log.Info("python workers ready", "world_size", workers, "step", step,
				"startup_s", fmt.Sprintf("%.2f", time.Since(started).Seconds()))
			return
		}
		e.log.Debug("process group formed", "world_size", workers, "step", step, "ms", took.Milliseconds())
	}
	if o.Spare != nil {
		adopted = e.local.adoptSpare(ctx, o.Spare, e.log)
	}
	e.local.Prestart(ctx, max(1, o.Workers))
	if err := e.local.Resize(ctx, 1); err != nil {
		e.local.Close()
		return nil, err
	}
	e.samples, e.digest = e.local.ref.TrainSamples, e.local.ref.Digest
	return e, nil
}

// jobConfig is what every Python process of spec loads; params are the
// job file's [torch.params] with the located datasets' paths.
func jobConfig(spec *jobspec.Spec, params map[string]any) JobConfig {
	return JobConfig{Module: spec.Torch.ModulePath, Script: spec.Torch.IsScript, Args: scriptArgs(spec.Torch.Args, params),
		Seed: spec.Seed, LogicalWorkers: spec.LogicalWorkers, MicroBatch: spec.MicroBatch, Steps: int64(spec.Steps),
		Threads: spec.Torch.Threads, Device: spec.Torch.Device, Params: params}
}

// scriptArgs replaces "{data_dir}" and "{text}" in a script's arguments by
// the located datasets' paths (params' "data_dir" and "text"; a
// placeholder of a dataset the job does not list stays as written).
func scriptArgs(args []string, params map[string]any) []string {
	out := make([]string, len(args))
	for i, a := range args {
		for _, key := range []string{"data_dir", "text"} {
			if v, ok := params[key].(string); ok {
				a = strings.ReplaceAll(a, "{"+key+"}", v)
			}
		}
		out[i] = a
	}
	return out
}

// locateDatasets finds the job's datasets, adds their paths to params and
// returns their manifest (the files hashed into the job's identity).
func locateDatasets(spec *jobspec.Spec, params map[string]any) (data.Manifest, error) {
	var paths []string
	for _, ds := range spec.Torch.Datasets {
		switch ds {
		case DatasetMNIST:
			dir, err := datasets.LocateMNIST(spec.Data.Dir)
			if err != nil {
				return nil, fmt.Errorf("locating MNIST for torch.datasets: %w", err)
			}
			params["data_dir"] = dir
			paths = append(paths, data.MNISTPaths(dir)...)
		case DatasetOpticks:
			path, err := datasets.LocateOpticks()
			if err != nil {
				return nil, fmt.Errorf("locating Opticks for torch.datasets: %w", err)
			}
			params["text"] = path
			paths = append(paths, path)
		default:
			return nil, &jobspec.FieldError{Field: "torch.datasets", Msg: fmt.Sprintf("%q is not known; use %q or %q", ds, DatasetMNIST, DatasetOpticks)}
		}
	}
	if len(paths) == 0 {
		return nil, nil
	}
	m, err := data.HashFiles(paths...)
	if err != nil {
		return nil, fmt.Errorf("hashing the training data: %w", err)
	}
	return m, nil
}

func defaultPackageRoot() (string, error) { return userPackageRoot() }

// Python returns the interpreter the engine's processes run
// ($EASYSCALE_PYTHON, else DefaultPython).
func (e *Engine) Python() string { return e.python }

// Name returns "torch".
func (e *Engine) Name() string { return jobspec.EngineTorch }

// StepsPerEpoch is floor(ceil(train set / N) / micro_batch), as the sampler cuts it.
func (e *Engine) StepsPerEpoch() int {
	n := e.opts.Spec.LogicalWorkers
	return (e.samples + n - 1) / n / e.opts.Spec.MicroBatch
}

// Data lists the datasets' files with their digests.
func (e *Engine) Data() data.Manifest { return e.files }

// Workers returns the number of Python processes.
func (e *Engine) Workers() int { return e.local.Workers() }

// Resize starts or stops Python processes of this machine until there are
// workers of them, but never more than the job's logical workers less the
// workers of other machines admitted (a process with no logical worker
// would fail the placement), and at least one.
func (e *Engine) Resize(ctx context.Context, workers int) error {
	remotes := e.local.Workers() - len(e.local.locals())
	if room := e.opts.Spec.LogicalWorkers - remotes; workers > room {
		e.log.Info("starting fewer python workers than the allocation asks: workers of other machines hold the other logical workers",
			"asked", workers, "started", max(1, room), "remote_workers", remotes, "logical_workers", e.opts.Spec.LogicalWorkers)
		workers = max(1, room)
	}
	return e.local.Resize(ctx, workers)
}

// Prepare starts, in the background, the Python processes a later Resize
// to workers needs (Local.Prestart).
func (e *Engine) Prepare(ctx context.Context, workers int) { e.local.Prestart(ctx, workers) }

// Listen accepts workers of this job from other machines (`easyscale
// worker --join`) on o.Listen: the token and job-id files go into
// o.StateDir (or o.TokenDir), joiners pass cluster's handshake and data
// check and this engine's check (the Python package's version, then
// Admit against the first process: torch and Python versions, numerics),
// and wait for the next
// Boundary. o.Spec, o.Data and o.Check are set here.
func (e *Engine) Listen(o cluster.ListenerOptions) (*cluster.Listener, error) {
	ref := *e.local.ref
	o.Spec, o.Data = e.opts.Spec, e.files
	o.Check = func(raw json.RawMessage) error { return checkJoin(ref, raw) }
	ln, err := cluster.NewListener(o)
	if err != nil {
		return nil, err
	}
	e.ln = ln
	timeout := e.local.start.HeartbeatTimeout
	go func() {
		for {
			select {
			case j := <-ln.Joiners():
				r := newRemote(j.Conn, timeout, j.Node, j.Addr, j.LocalAddr)
				r.slurmNode = j.SlurmNode
				e.mu.Lock()
				e.pending = append(e.pending, r)
				e.mu.Unlock()
				select {
				case e.joined <- struct{}{}:
				default:
				}
			case <-e.stop:
				return
			}
		}
	}()
	return ln, nil
}

// Boundary removes remote workers lost since the last step and admits the
// joiners queued by Listen as the last ranks (they receive a surviving
// worker's replica and the logical workers' contexts at the next Step). It
// reports whether the membership changed.
func (e *Engine) Boundary(ctx context.Context, step int64) (bool, error) {
	if !e.awaited {
		e.awaited = true
		e.awaitStandby(ctx, step)
	}
	gone := e.local.dropGone()
	for _, r := range gone {
		e.log.Warn("removing a lost worker", "rank", r, "step", step)
	}
	e.mu.Lock()
	pending := e.pending
	e.pending = nil
	e.mu.Unlock()
	admitted := 0
	for i, r := range pending {
		if r.exited() {
			e.log.Warn("a joiner left before its admission", "node", r.node, "peer", r.addr)
			continue
		}
		if e.local.Workers() >= e.opts.Spec.LogicalWorkers {
			e.waitForAPlace(step, pending[i:])
			break
		}
		e.local.addRemote(r)
		admitted++
		e.fullLogged = false
		e.log.Info("admitted", "rank", e.local.Workers()-1, "node", r.node, "peer", r.addr, "gloo", r.localAddr, "step", step)
	}
	return len(gone) > 0 || admitted > 0, nil
}

// waitForAPlace puts joiners back in front of the queue when every
// logical worker has a process (a replacement extra job Slurm started
// before the one it replaces left): a process with no logical worker
// would fail the placement, so they are admitted at a boundary after a
// member leaves. It logs the first such boundary after an admission.
func (e *Engine) waitForAPlace(step int64, joiners []*remote) {
	e.mu.Lock()
	e.pending = append(slices.Clone(joiners), e.pending...)
	e.mu.Unlock()
	if !e.fullLogged {
		e.fullLogged = true
		e.log.Info("workers wait for admission: each of the job's logical workers has a worker; they are admitted when one leaves",
			"step", step, "waiting", len(joiners), "world_size", e.local.Workers(), "logical_workers", e.opts.Spec.LogicalWorkers)
	}
}

// awaitStandby waits, for at most Options.AwaitStandby, until a joiner
// on another Slurm node than this engine's is queued (the standby
// sendStandby picks once it is admitted), or ctx ends. With no wait set,
// no Standby or no listener, it returns at once.
func (e *Engine) awaitStandby(ctx context.Context, step int64) {
	if !e.opts.Standby || e.opts.AwaitStandby <= 0 || e.ln == nil {
		return
	}
	start := time.Now()
	timer := time.NewTimer(e.opts.AwaitStandby)
	defer timer.Stop()
	for {
		e.mu.Lock()
		found := slices.ContainsFunc(e.pending, func(r *remote) bool { return r.slurmNode != "" && r.slurmNode != e.opts.Node })
		e.mu.Unlock()
		if found {
			e.log.Info("a standby-to-be joined before the first step", "step", step, "waited_ms", time.Since(start).Milliseconds())
			return
		}
		select {
		case <-e.joined:
		case <-timer.C:
			e.log.Warn("no worker on another node joined: training without a standby until one does", "step", step, "waited", e.opts.AwaitStandby.String())
			return
		case <-ctx.Done():
			return
		}
	}
}

// Step runs and commits step on plan. A lost process is reported as a
// *trainer.LostError after it is removed; a process that got SIGTERM is
// released after the step (the next Step sees fewer workers).
func (e *Engine) Step(ctx context.Context, step int64, plan placement.Plan) (trainer.StepReport, error) {
	sizes := make([]int, len(plan))
	next := 0
	for r, rg := range plan {
		if rg.First != next || rg.Count < 1 {
			return trainer.StepReport{}, fmt.Errorf("step %d: placement %s is not contiguous ranges in rank order", step, plan)
		}
		sizes[r], next = rg.Count, rg.First+rg.Count
	}
	faults := map[int]string{}
	for _, r := range e.opts.TermAt[step] {
		faults[r] = "term"
	}
	for _, r := range e.opts.KillAt[step] {
		faults[r] = "kill"
	}
	delete(e.opts.KillAt, step) // once: the redone step must not fail again
	delete(e.opts.TermAt, step)
	res, err := e.local.Step(ctx, step, sizes, faults)
	if err != nil {
		var lost *LostError
		if errors.As(err, &lost) {
			return trainer.StepReport{}, &trainer.LostError{Step: step, Ranks: lost.Ranks, Err: lost.Err}
		}
		return trainer.StepReport{}, err
	}
	e.digest, e.hashS, e.tensors = res.Digest, res.HashSeconds, res.Tensors
	return stepReport(res, e.opts.Spec.LogicalWorkers), nil
}

// stepReport is a step's result as the trainer takes it, for n logical
// workers.
func stepReport(res *StepResult, n int) trainer.StepReport {
	rep := trainer.StepReport{Losses: make([]float32, n), Samples: make([]string, n)}
	for lw := range n {
		rep.Losses[lw], rep.Samples[lw] = float32(res.Losses[lw]), res.Samples[lw]
	}
	return rep
}

// Digest is the digest process 0 computed after the last committed step
// (sha256 over the parameters and logical worker 0's buffers, in the torch
// engine's own encoding: it does not equal the native engine's) and each of
// those tensors' digests (so `easyscale verify` names the tensors two runs
// differ in); "" and nil when HashNext(false) skipped it.
func (e *Engine) Digest() (string, []statedb.TensorDigest) { return e.digest, e.tensors }

// HashNext says whether the next Step computes the digest (on process 0 only).
func (e *Engine) HashNext(hash bool) { e.local.group.SkipDigest = !hash }

// HashSeconds is how long process 0 took to hash the last step (0 when it did not).
func (e *Engine) HashSeconds() float64 { return e.hashS }

// DigestEvery is the job file's [torch] digest_every_steps (0: measure).
func (e *Engine) DigestEvery() int { return e.opts.Spec.Torch.DigestEvery }

// Snapshot returns process 0's replica as a checkpoint file and every
// logical worker's context; it answers at once even during a step.
func (e *Engine) Snapshot(ctx context.Context, step int64) (trainer.Snapshot, error) {
	file, contexts, err := e.local.Checkpoint(ctx, step)
	if err != nil {
		return trainer.Snapshot{}, err
	}
	snap := trainer.Snapshot{File: file}
	for lw := range e.opts.Spec.LogicalWorkers {
		c, ok := contexts[lw]
		if !ok {
			if len(contexts) == 0 {
				break // no step committed yet: fresh contexts at resume
			}
			return trainer.Snapshot{}, fmt.Errorf("checkpointing step %d: no context of logical worker %d", step, lw)
		}
		snap.Contexts = append(snap.Contexts, statedb.ESTContext{EST: lw, Blob: c})
	}
	return snap, nil
}

// Restore makes a checkpoint written by Snapshot the state of the next
// step. A checkpoint whose recorded numerics (NumericsMeta) differ from
// this run's first process's is refused with a *ResumeError; one without
// a record (written by an older release) is resumed with a warning.
func (e *Engine) Restore(ck *statedb.Checkpoint) error {
	if ck.Raw == nil || ck.Meta[statedb.MetaEngine] != jobspec.EngineTorch {
		return fmt.Errorf("checkpoint of step %d was not written by the torch engine", ck.Step)
	}
	n := e.opts.Spec.LogicalWorkers
	if len(ck.Contexts) != n {
		return fmt.Errorf("checkpoint of step %d holds %d logical-worker contexts, the job has %d", ck.Step, len(ck.Contexts), n)
	}
	check, err := checkResume(ck.Meta, ck.Step, *e.local.ref)
	if err != nil {
		return err
	}
	switch {
	case !check.Recorded:
		e.log.Warn("the checkpoint holds no record of the numerics it was computed with (written by an easyscale before "+
			"such records): resuming without comparing them with this run's; make sure this run's torch, CPU or GPU model "+
			"and pinned environment variables are those the job ran with, or its bits will differ from its fixed run",
			"step", ck.Step, "checkpoint", ck.Path)
	case len(check.Unrecorded) > 0:
		e.log.Warn("the checkpoint's numerics record lacks settings this run records (written by an older easyscale): "+
			"resuming without comparing them; make sure they are as the job ran with, or its bits will differ from its fixed run",
			"step", ck.Step, "checkpoint", ck.Path, "settings", strings.Join(check.Unrecorded, ","))
	}
	contexts := make(map[int][]byte, n)
	for _, c := range ck.Contexts {
		contexts[c.EST] = c.Blob
	}
	e.local.Restore(ck.Raw, contexts)
	if d := ck.Meta["easyscale.digest"]; d != "" {
		e.digest = d
	}
	return nil
}

// Evaluate runs the module's test set on process 0 with logical worker 0's
// buffers; trainer.ErrNoTestSet when the job has none (a training script
// evaluates in its own loop).
func (e *Engine) Evaluate(ctx context.Context) (float64, float64, int, error) {
	loss, acc, n, err := e.local.Evaluate(ctx)
	if err == nil && n == 0 {
		return 0, 0, 0, trainer.ErrNoTestSet
	}
	return loss, acc, n, err
}

// SelfCheck says how the self-check before the first step went: "passed",
// "skipped (--no-self-check)", "skipped: <why>" or "" when no step ran, and
// its seconds.
func (e *Engine) SelfCheck() (string, float64) {
	switch c := e.local.checked; {
	case e.opts.NoSelfCheck:
		return "skipped (--no-self-check)", 0
	case e.opts.CheckedBefore != "":
		return "skipped: " + e.opts.CheckedBefore, 0
	case c == nil:
		return "", 0
	case c.Result == "skipped":
		return "skipped: " + c.Message, c.Seconds
	default:
		return c.Result, c.Seconds
	}
}

// Check runs the self-check of the job from its start on the first
// process, which takes every logical worker (easyscale check): a
// *SelfCheckError when it fails. The save and load round trip of every
// registered object ran when the process loaded the job.
func (e *Engine) Check(ctx context.Context) (*CheckResult, error) {
	e.local.group.next = 0
	if err := e.local.assign(ctx, []int{e.opts.Spec.LogicalWorkers}); err != nil {
		return nil, err
	}
	steps := e.local.CheckSteps
	if steps == 0 {
		steps = CheckSteps
	}
	e.local.CheckSteps = steps
	return e.local.selfCheck(ctx, 0)
}

// Close stops every Python process and releases the remote workers.
func (e *Engine) Close() error {
	first := false
	e.closed.Do(func() { first = true })
	if !first {
		return nil
	}
	close(e.stop)
	if e.ln != nil {
		e.ln.Close()
	}
	e.mu.Lock()
	for _, r := range e.pending {
		r.Kill()
	}
	e.pending = nil
	e.mu.Unlock()
	return e.local.Close()
}
