package torchengine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// JobConfig is what every Python process of a job loads.
type JobConfig struct {
	Module         string         // the user's module or script (absolute path)
	Script         bool           // Module is a training script of the loop API, run as __main__
	Args           []string       // the script's command line, placeholders replaced
	Seed           uint64         // job seed
	LogicalWorkers int            // N
	MicroBatch     int            // b, samples per logical worker per step
	Steps          int64          // the horizon (LR schedules follow it)
	Threads        int            // intra-op threads of every process (part of the numerics)
	Device         string         // "cpu" or "cuda" (one GPU per process)
	Params         map[string]any // the job file's [torch.params], plus data_dir
}

// loadRequest is the load request of a process started as physical rank
// rank (what dist.get_rank() answers until its first assignment).
func (c JobConfig) loadRequest(rank int) map[string]any {
	params := c.Params
	if params == nil {
		params = map[string]any{}
	}
	req := map[string]any{"module": c.Module, "threads": max(c.Threads, 1), "device": c.Device, "rank": rank,
		"config": map[string]any{"seed": c.Seed, "logical_workers": c.LogicalWorkers,
			"micro_batch": c.MicroBatch, "steps": c.Steps, "params": params}}
	if c.Script {
		delete(req, "module")
		req["script"], req["args"] = c.Module, append([]string{}, c.Args...)
	}
	return req
}

// Loaded is a process's answer to load: its versions and numerics.
type Loaded struct {
	Parameters   int    `json:"parameters"`
	TrainSamples int    `json:"train_samples"` // len(train_set)
	Digest       string `json:"digest"`        // of the initial parameters
	Versions
	Fingerprint map[string]any `json:"fingerprint"`
	Canary      string         `json:"canary"`
}

// Versions are what a Python process runs on (easyscale.numerics.versions):
// every process of a job must run the same, because a kernel's bits may
// change between torch releases, so a job's digests hold for one torch
// version only.
type Versions struct {
	Torch  string `json:"torch"`  // torch.__version__, e.g. "1.13.0a0" (Debian 12), "2.6.0"
	Python string `json:"python"` // the interpreter's major.minor, e.g. "3.11"
}

// VersionError refuses a process whose torch or Python version differs
// from the group's (the job's first process); its message names both
// versions of each that differs.
type VersionError struct {
	Worker, Group Versions
}

func (e *VersionError) Error() string {
	var worker, group []string
	if e.Worker.Torch != e.Group.Torch {
		worker = append(worker, "torch "+orUnknown(e.Worker.Torch))
		group = append(group, "torch "+orUnknown(e.Group.Torch))
	}
	if e.Worker.Python != e.Group.Python {
		worker = append(worker, "Python "+orUnknown(e.Worker.Python))
		group = append(group, "Python "+orUnknown(e.Group.Python))
	}
	return fmt.Sprintf("%s on the joining worker, the group runs %s: a job's digests hold for one torch version "+
		"(a kernel's bits may change between releases); install the group's versions on every worker",
		strings.Join(worker, " and "), strings.Join(group, " and "))
}

func orUnknown(v string) string {
	if v == "" {
		return "(unknown)"
	}
	return v
}

// checkVersions returns a *VersionError when got's torch or Python version
// differs from ref's, else nil.
func checkVersions(ref, got Loaded) error {
	if got.Versions != ref.Versions {
		return &VersionError{Worker: got.Versions, Group: ref.Versions}
	}
	return nil
}

// NumericsError refuses a process that would compute other bits than the
// job's reference process; Differences name each setting ("threads: want 1, got 2").
type NumericsError struct {
	Differences []string
}

func (e *NumericsError) Error() string {
	return "python worker computes other bits than the job's first worker: " + strings.Join(e.Differences, "; ")
}

// Admit compares a joining process's versions and numerics with the
// reference's: it returns a *VersionError naming both versions when its
// torch or Python differs, else a *NumericsError naming every setting that
// differs (the canary digest last: a differing canary with equal settings
// means other hardware or libraries).
func Admit(ref, got Loaded) error {
	if err := checkVersions(ref, got); err != nil {
		return err
	}
	var diffs []string
	for _, d := range numericsDiffs(ref, got, false) {
		diffs = append(diffs, d.String("want", "got"))
	}
	if diffs != nil {
		return &NumericsError{Differences: diffs}
	}
	return nil
}

// numericsDiff is one setting in which two processes' numerics differ:
// a fingerprint key, or "canary digest", and its value on either side.
type numericsDiff struct {
	Setting  string
	Ref, Got any
}

// String is "Setting: REFWORD ref, GOTWORD got" (an empty or missing value
// printed as "", so that an environment variable set on one side reads).
func (d numericsDiff) String(refWord, gotWord string) string {
	return fmt.Sprintf("%s: %s %v, %s %v", d.Setting, refWord, orEmpty(d.Ref), gotWord, orEmpty(d.Got))
}

// orEmpty is v, or `""` for nil and the empty string.
func orEmpty(v any) any {
	if v == nil || v == "" {
		return `""`
	}
	return v
}

// numericsDiffs lists the fingerprint settings, by key, and then the
// canary digest in which got differs from ref (values compared as
// printed: both come from JSON). With inBoth, a key only one side has is
// not compared (a checkpoint written by a release that recorded fewer
// settings).
func numericsDiffs(ref, got Loaded, inBoth bool) []numericsDiff {
	keys := map[string]bool{}
	for k := range ref.Fingerprint {
		keys[k] = true
	}
	for k := range got.Fingerprint {
		keys[k] = true
	}
	if inBoth {
		for k := range keys {
			_, r := ref.Fingerprint[k]
			_, g := got.Fingerprint[k]
			if !r || !g {
				delete(keys, k)
			}
		}
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var diffs []numericsDiff
	for _, k := range sorted {
		if fmt.Sprint(ref.Fingerprint[k]) != fmt.Sprint(got.Fingerprint[k]) {
			diffs = append(diffs, numericsDiff{k, ref.Fingerprint[k], got.Fingerprint[k]})
		}
	}
	if ref.Canary != got.Canary {
		diffs = append(diffs, numericsDiff{"canary digest", ref.Canary, got.Canary})
	}
	return diffs
}

// Local runs a torch job's physical workers as Python processes on this
// machine: it starts and stops them as the allocation changes, admits each
// by its numerics, and drives them through a Group.
type Local struct {
	cfg   JobConfig
	start StartOptions
	group *Group
	procs []*slot // in rank order
	// Host is the address other nodes reach this machine's processes on
	// (the coordinator's --listen host; 127.0.0.1 on one node).
	Host  string
	ref   *Loaded // the numerics of the job's first process
	sizes []int   // the assignment in force; nil after a change of processes
	// restore is a checkpoint's replica every process loads at the next assignment.
	restore []byte
	// abandoned is set when a step was given up on its context: the
	// processes may still be computing, so Close kills them.
	abandoned bool
	// EnvOf gives extra environment for the process of a physical rank
	// (tests use it to start a worker with other numerics).
	EnvOf func(rank int) []string
	// spares are processes Prestart started ahead of a grow, in the order
	// Resize takes them: each channel delivers one started, loaded and
	// admitted process (or why it failed).
	spares []chan launched
	// CheckSteps is how many steps the self-check runs in each of its two
	// placements before the first step (python/easyscale/selfcheck.py);
	// 0: no self-check.
	CheckSteps int
	// checked is the self-check's answer, once it ran.
	checked *CheckResult
	// OnGroup, when set, is called after each assignment of the logical
	// workers to the processes, when they are in their process group and
	// ready to step: with the number of processes, the step the assignment
	// starts at and how long the assignment took.
	OnGroup func(workers int, step int64, took time.Duration)
}

// CheckResult is the self-check's answer (python/easyscale/selfcheck.py):
// Result "passed", "failed" or "skipped" (no room in the epoch or the job
// where it was asked), the steps run in each placement, how long it took
// in seconds, and a message naming what differed and the likely cause.
type CheckResult struct {
	Result  string  `json:"result"`
	Steps   int     `json:"steps"`
	Seconds float64 `json:"seconds"`
	Message string  `json:"message"`
}

// SelfCheckError refuses a job whose bits depend on the placement of its
// logical workers: its message names the first tensor or attribute that
// differed between the two placements and the likely cause.
type SelfCheckError struct {
	Message string
}

func (e *SelfCheckError) Error() string { return "job refused: " + e.Message }

// selfCheck asks process 0 to run the self-check from step with every
// logical worker's committed context (fresh ones at the start of a job).
// A failed check is a *SelfCheckError.
func (l *Local) selfCheck(ctx context.Context, step int64) (*CheckResult, error) {
	if len(l.procs) == 0 {
		return nil, errors.New("self-check: no python worker")
	}
	index, payload := pack(l.group.Contexts())
	var res CheckResult
	if _, err := l.procs[0].w.Call(ctx, "check", map[string]any{"step": step, "steps": l.CheckSteps, "contexts": index}, payload, &res); err != nil {
		return nil, fmt.Errorf("self-check at step %d: %w", step, err)
	}
	l.checked = &res
	if res.Result == "failed" {
		return &res, &SelfCheckError{Message: res.Message}
	}
	return &res, nil
}

// launched is the outcome of starting and loading the process of a
// physical rank: the process and its answer to load, or why it failed
// (p is then nil).
type launched struct {
	p      *Process
	loaded Loaded
	rank   int
	err    error
}

// physical is one physical worker a Local drives: a Python process it
// started (*Process) or one behind a worker on another machine (*remote).
type physical interface {
	Member
	exited() bool
	Close(grace time.Duration) error
	Kill()
}

var (
	_ physical = (*Process)(nil)
	_ physical = (*remote)(nil)
)

// slot is one physical worker of the job.
type slot struct {
	w physical
	// joining marks a worker that has not yet received the job's replica.
	joining bool
	// remote is w when it is on another machine, else nil.
	remote *remote
}

// NewLocal returns a Local for cfg; processes start with Resize.
func NewLocal(cfg JobConfig, start StartOptions) *Local {
	if start.Stderr == nil {
		start.Stderr = os.Stderr
	}
	return &Local{cfg: cfg, start: start, group: NewGroup(cfg.LogicalWorkers), Host: "127.0.0.1"}
}

// Workers returns the number of physical workers, local and remote.
func (l *Local) Workers() int { return len(l.procs) }

// locals returns the ranks of the processes this machine started.
func (l *Local) locals() []int {
	var out []int
	for r, s := range l.procs {
		if s.remote == nil {
			out = append(out, r)
		}
	}
	return out
}

// Resize starts or stops processes on this machine until there are
// workers of them (workers on other machines come and go on their own:
// AddRemote, and SIGTERM). The processes missing start at once, all of
// them (Prestart), and are waited for together: each spends about a
// second importing torch and loading the job, so started one after another
// they would cost that many seconds, where on P cores P of them load at a
// time. Joining processes are then admitted in rank order by their
// versions and numerics against the job's first process (a *VersionError
// or *NumericsError otherwise), and receive the replica of a trained
// worker at the next Step.
func (l *Local) Resize(ctx context.Context, workers int) error {
	if workers < 1 {
		return fmt.Errorf("resizing to %d python workers: want at least 1", workers)
	}
	for loc := l.locals(); len(loc) > workers; loc = l.locals() {
		r := loc[len(loc)-1]
		last := l.procs[r]
		l.procs = append(l.procs[:r:r], l.procs[r+1:]...)
		if err := last.w.Close(10 * time.Second); err != nil {
			fmt.Fprintf(l.start.Stderr, "easyscale: python worker %d: %v\n", r, err)
		}
		l.sizes = nil
	}
	n := workers - len(l.locals())
	if n <= 0 {
		return nil
	}
	// Processes Prestart started come first (waiting for one still
	// starting beats starting another); the rest start now.
	l.Prestart(ctx, workers)
	pending := l.spares[:n]
	l.spares = l.spares[n:]
	results := make([]launched, n)
	for i, ch := range pending {
		results[i] = <-ch
	}
	// The first failure in rank order is the answer (processes loading
	// one job mostly fail alike); every process after it is stopped.
	var failed error
	for _, r := range results {
		if r.err == nil && failed == nil {
			r.err = l.admit(r)
		}
		switch {
		case failed != nil || r.err != nil:
			if r.p != nil {
				r.p.Kill()
			}
			if failed == nil {
				failed = r.err
			}
		default:
			l.procs, l.sizes = append(l.procs, &slot{w: r.p, joining: true}), nil
		}
	}
	return failed
}

// admit checks a loaded process against the job's first one, or makes it
// the first: the versions and numerics every later process must match.
func (l *Local) admit(r launched) error {
	if l.ref == nil {
		l.ref = &r.loaded
		return nil
	}
	if err := Admit(*l.ref, r.loaded); err != nil {
		return fmt.Errorf("python worker %d refused: %w", r.rank, err)
	}
	return nil
}

// Prestart starts processes in the background until this machine has, or
// is starting, workers of them (the ones running plus the spares), without
// waiting: each imports torch and loads the job (about a second on this
// machine's CPU), so that a later Resize to workers admits them at once.
// Engine.New calls it for the first allocation's processes, which so load
// alongside the first one; the trainer calls it when the run's --workers
// schedule announces a grow (trainer.Preparer). A spare that fails to
// start fails the Resize that takes it; Close stops the spares not taken.
func (l *Local) Prestart(ctx context.Context, workers int) {
	for have := len(l.locals()) + len(l.spares); have < workers; have++ {
		ch := make(chan launched, 1)
		rank := have
		go func() {
			p, loaded, err := l.launch(ctx, rank)
			ch <- launched{p: p, loaded: loaded, rank: rank, err: err}
		}()
		l.spares = append(l.spares, ch)
	}
}

// addRemote makes a worker on another machine (already admitted by its
// numerics) the job's last rank; it receives a replica at the next Step.
func (l *Local) addRemote(r *remote) {
	l.procs = append(l.procs, &slot{w: r, joining: true, remote: r})
	l.sizes = nil
}

// dropGone removes the workers whose control channel closed since the last
// step (a remote worker killed or cut off between steps), reporting the
// ranks removed.
func (l *Local) dropGone() []int {
	var gone []int
	keep := l.procs[:0]
	for r, s := range l.procs {
		if s.w.exited() {
			s.w.Kill()
			gone = append(gone, r)
			continue
		}
		keep = append(keep, s)
	}
	l.procs = keep
	if gone != nil {
		l.sizes = nil
	}
	return gone
}

// launch starts the process of physical rank rank and has it load the
// job; admission is the caller's (admit), so processes launch concurrently.
func (l *Local) launch(ctx context.Context, rank int) (*Process, Loaded, error) {
	var loaded Loaded
	o := l.start
	if l.EnvOf != nil {
		o.Env = append(append([]string(nil), o.Env...), l.EnvOf(rank)...)
	}
	p, err := Start(o)
	if err != nil {
		return nil, loaded, err
	}
	if _, err := p.CallSetup(ctx, "load", l.cfg.loadRequest(rank), nil, &loaded); err != nil {
		p.Kill()
		return nil, loaded, fmt.Errorf("python worker %d: loading %s: %w", rank, l.cfg.Module, err)
	}
	return p, loaded, nil
}

// Step runs step with sizes[r] logical workers on process r (contiguous
// ranges in rank order) and commits it; faults as in Group.Step. A lost process is removed and
// reported as a *LostError naming its rank; the caller re-places the
// logical workers on the survivors and redoes the step.
func (l *Local) Step(ctx context.Context, step int64, sizes []int, faults map[int]string) (*StepResult, error) {
	l.group.next = step
	if !slices.Equal(sizes, l.sizes) {
		if err := l.assign(ctx, sizes); err != nil {
			return nil, err
		}
	}
	if l.CheckSteps > 0 && l.checked == nil {
		if _, err := l.selfCheck(ctx, step); err != nil {
			if lost := l.dropLost(err); lost != nil {
				return nil, lost
			}
			return nil, err
		}
	}
	res, err := l.group.Step(ctx, step, faults)
	if ctx.Err() != nil {
		l.abandoned = true
		return nil, err
	}
	if err != nil {
		if lost := l.dropLost(err); lost != nil {
			if res != nil { // lost during the commit: the step is done on the survivors
				return l.redigest(ctx, res)
			}
			return nil, lost
		}
		return nil, err
	}
	l.release(res.Leaving)
	return res, nil
}

// redigest completes res, a step committed on the survivors of a loss
// inside the commit: when the digest was asked for and process 0, the one
// that hashes, was lost, the survivors are reassigned (an even split; the
// caller's next placement reassigns them again if it differs, and the
// result does not depend on placement) and the new process 0 hashes. The
// ledger's final and checkpoint steps must carry a digest (but the step a
// standby took over at when the coordinator was lost before recording its
// row: the standby records the step's pending row, unhashed; standby.go).
func (l *Local) redigest(ctx context.Context, res *StepResult) (*StepResult, error) {
	if res.Digest != "" || l.group.SkipDigest {
		return res, nil
	}
	for attempt := 0; ; attempt++ {
		if len(l.procs) == 0 {
			return nil, &LostError{Err: errors.New("every python worker was lost during the commit")}
		}
		err := l.assign(ctx, evenSizes(l.group.world, len(l.procs)))
		if err == nil {
			res.Digest, res.HashSeconds, res.Tensors, err = l.group.Digest(ctx)
			if err == nil {
				return res, nil
			}
			if lost := l.dropLost(err); lost == nil {
				return nil, err
			}
		}
		var lost *LostError
		if !errors.As(err, &lost) || attempt >= 3 {
			return nil, fmt.Errorf("hashing the committed step after losing process 0: %w", err)
		}
	}
}

// evenSizes divides n logical workers over w processes, the larger ranges
// first.
func evenSizes(n, w int) []int {
	sizes := make([]int, w)
	for r := range sizes {
		sizes[r] = n / w
		if r < n%w {
			sizes[r]++
		}
	}
	return sizes
}

// release closes the processes that asked to leave (SIGTERM) once the step
// they took part in is committed; the caller re-places the logical workers
// on the others. The last process is never released: the job would stop.
func (l *Local) release(ranks []int) {
	if len(ranks) == 0 {
		return
	}
	keep := l.procs[:0]
	for r, p := range l.procs {
		if slices.Contains(ranks, r) && len(l.procs)-len(ranks) >= 1 {
			if err := p.w.Close(10 * time.Second); err != nil {
				fmt.Fprintf(l.start.Stderr, "easyscale: python worker %d leaving: %v\n", r, err)
			}
			continue
		}
		keep = append(keep, p)
	}
	l.procs, l.sizes = keep, nil
}

func (l *Local) assign(ctx context.Context, sizes []int) error {
	t0 := time.Now()
	members := make([]Member, len(l.procs))
	joining := make([]bool, len(l.procs))
	var src Member
	for r, p := range l.procs {
		members[r] = p.w
		joining[r] = p.joining && l.group.trained
		if !p.joining && src == nil {
			src = p.w
		}
	}
	if len(l.procs) > 0 {
		l.group.Host = l.Host
		if r := l.procs[0].remote; r != nil {
			l.group.Host = r.nodeAddr() // member 0 hosts the store
		}
	}
	if l.restore != nil {
		for r, p := range l.procs {
			if _, err := p.w.Call(ctx, "replica_set", nil, l.restore, nil); err != nil {
				return fmt.Errorf("python worker %d: loading the checkpoint: %w", r, err)
			}
			p.joining = false
			joining[r] = false
		}
		src, l.restore = nil, nil
		l.group.trained = true // a member new to the job later needs this replica, not its initial one
	} else if src == nil && l.group.trained {
		return ErrReplicaLost
	}
	if err := l.group.Assign(ctx, members, sizes, src, joining); err != nil {
		if lost := l.dropLost(err); lost != nil {
			return lost
		}
		return err
	}
	for _, p := range l.procs {
		p.joining = false
	}
	l.sizes = append([]int(nil), sizes...)
	if l.OnGroup != nil {
		l.OnGroup(len(sizes), l.group.next, time.Since(t0))
	}
	return nil
}

// ErrReplicaLost is returned when every process that held the job's replica
// is gone: the run must resume from its last checkpoint.
var ErrReplicaLost = errors.New("every python worker holding the replica is gone; resume from the last checkpoint")

// LostError names the processes (ranks before removal) that died or hung.
type LostError struct {
	Ranks []int
	Err   error
}

func (e *LostError) Error() string { return fmt.Sprintf("lost python workers %v: %v", e.Ranks, e.Err) }
func (e *LostError) Unwrap() error { return e.Err }

// dropLost kills and removes the processes err reports as exited or hung,
// returning a *LostError, or nil when no process was lost.
func (l *Local) dropLost(err error) error {
	var ranks []int
	for r, p := range l.procs {
		if p.w.exited() {
			ranks = append(ranks, r)
		}
	}
	if len(ranks) == 0 && (errors.Is(err, ErrHung) || errors.Is(err, ErrExited)) {
		var me *MemberError
		if errors.As(err, &me) {
			ranks = append(ranks, me.Rank)
		}
	}
	if len(ranks) == 0 {
		return nil
	}
	keep := l.procs[:0]
	for r, p := range l.procs {
		if slices.Contains(ranks, r) {
			p.w.Kill()
			continue
		}
		keep = append(keep, p)
	}
	l.procs, l.sizes = keep, nil
	return &LostError{Ranks: ranks, Err: err}
}

// Checkpoint returns the replica of process 0 as a checkpoint file for
// step (safetensors: parameters, optimizer and scheduler state; see
// statedb.SaveCheckpointFile) and every logical worker's context after the
// last committed step.
func (l *Local) Checkpoint(ctx context.Context, step int64) (file []byte, contexts map[int][]byte, err error) {
	if len(l.procs) == 0 {
		return nil, nil, errors.New("checkpointing: no python worker")
	}
	file, err = l.procs[0].w.Call(ctx, "checkpoint", map[string]any{"step": step}, nil, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpointing step %d: %w", step, err)
	}
	return file, l.group.Contexts(), nil
}

// Restore makes a checkpoint the state every process starts the next step
// from: the replica file (loaded at the next Step) and the contexts.
func (l *Local) Restore(file []byte, contexts map[int][]byte) {
	l.restore = file
	l.group.SetContexts(contexts)
	l.sizes = nil
}

// Processes returns the live processes this machine started, in rank
// order (fault injection and tests).
func (l *Local) Processes() []*Process {
	var out []*Process
	for _, s := range l.procs {
		if p, ok := s.w.(*Process); ok {
			out = append(out, p)
		}
	}
	return out
}

// Evaluate returns the test-set loss and accuracy of the model with
// logical worker 0's buffers, computed by process 0; samples is 0 when the
// job has no test set (a script evaluates itself, a Job may have none).
func (l *Local) Evaluate(ctx context.Context) (loss, accuracy float64, samples int, err error) {
	if len(l.procs) == 0 {
		return 0, 0, 0, errors.New("evaluating: no python worker")
	}
	var out struct {
		Loss     float64 `json:"test_loss"`
		Accuracy float64 `json:"test_accuracy"`
		Samples  int     `json:"test_samples"`
	}
	if _, err := l.procs[0].w.Call(ctx, "evaluate", nil, nil, &out); err != nil {
		return 0, 0, 0, fmt.Errorf("evaluating: %w", err)
	}
	return out.Loss, out.Accuracy, out.Samples, nil
}

// Close stops every process: asks each to exit and waits for them
// together (each takes a while to tear torch down), or kills them at once
// after an abandoned step (remote workers are told goodbye and waited for
// at most 1 s).
func (l *Local) Close() error {
	errs := make([]error, len(l.procs))
	var wg sync.WaitGroup
	for i, p := range l.procs {
		if l.abandoned {
			if p.remote != nil {
				// Goodbye, a short wait: it holds nothing the checkpoint lacks.
				_ = p.remote.Close(time.Second)
				continue
			}
			p.w.Kill()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.w.Close(10 * time.Second)
		}()
	}
	wg.Wait()
	l.procs = nil
	for _, ch := range l.spares {
		if r := <-ch; r.p != nil {
			r.p.Kill()
		}
	}
	l.spares = nil
	return errors.Join(errs...)
}
