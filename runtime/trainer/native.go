package trainer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/models"
	"github.com/easyscale/easyscale-slurm/runtime/optim"
	"github.com/easyscale/easyscale-slurm/runtime/placement"
	"github.com/easyscale/easyscale-slurm/runtime/workload"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// nativeEngine is the built-in Go engine: the coordinator's replica (the
// copy that is digested, checkpointed and handed to joining workers), the
// logical workers' contexts, and an Executor that runs the physical workers
// (goroutines here, or processes and nodes through runtime/cluster).
type nativeEngine struct {
	spec    *jobspec.Spec
	wl      workload.Workload
	n       int
	threads int
	horizon int64
	sampler *data.Sampler
	master  *Replica
	ests    []*ESTContext
	exec    Executor
	reduced []float32
	out     StepOutput
	check   bool // compare every in-process replica with the master after each step
}

var _ Engine = (*nativeEngine)(nil)

// Checkpoint tensor names: "param/<name>", "optim/<name>" and
// "est<id>/<buffer name>"; the EST cursors travel as context blobs.
const (
	paramPrefix = "param/"
	optimPrefix = "optim/"
)

// NativeEngine returns the native engine for opts (Spec, Workload, Threads,
// Executor, Ablation, CheckReplicas): the seed's initialisation and fresh
// logical-worker contexts. Errors: a micro-batch larger than a logical
// worker's shard, a horizon beyond jobspec.MaxSteps.
func NativeEngine(opts Options) (Engine, error) {
	spec := opts.Spec
	if opts.Workload == nil {
		return nil, errors.New("the native engine needs the job's workload")
	}
	e := &nativeEngine{spec: spec, wl: opts.Workload, n: spec.LogicalWorkers, threads: opts.Threads, check: opts.CheckReplicas}
	if e.threads < 1 {
		e.threads = runtime.GOMAXPROCS(0)
	}
	sampler, err := data.NewSampler(opts.Workload.TrainLen(), e.n, spec.Seed)
	if err != nil {
		return nil, fmt.Errorf("building the sampler: %w", err)
	}
	e.sampler = sampler
	spe := sampler.StepsPerEpoch(spec.MicroBatch)
	if spe < 1 {
		return nil, &jobspec.FieldError{Field: "micro_batch", Msg: fmt.Sprintf("%d is larger than a logical worker's shard (%d samples); lower micro_batch or logical_workers", spec.MicroBatch, sampler.ShardLen())}
	}
	if e.horizon, err = spec.Horizon(spe); err != nil {
		return nil, err
	}
	master, err := NewReplica(spec, opts.Workload, e.threads)
	if err != nil {
		return nil, err
	}
	opts.Workload.InitNet(master.Net, spec.Seed)
	e.master = master
	e.ests = make([]*ESTContext, e.n)
	for i := range e.ests {
		e.ests[i] = &ESTContext{ID: i, Buffers: master.Net.NewBuffers()}
	}
	e.exec = opts.Executor
	if e.exec == nil {
		e.exec = newLocalExecutor(spec, opts.Workload, sampler, e.threads, opts.Ablation, master.NumParams())
	}
	e.reduced = make([]float32, master.NumParams())
	e.out = StepOutput{Losses: make([]float32, e.n), Samples: make([]string, e.n)}
	return e, nil
}

func (e *nativeEngine) Name() string        { return jobspec.EngineNative }
func (e *nativeEngine) StepsPerEpoch() int  { return e.sampler.StepsPerEpoch(e.spec.MicroBatch) }
func (e *nativeEngine) Data() data.Manifest { return e.wl.Data() }
func (e *nativeEngine) Workers() int        { return e.exec.Workers() }
func (e *nativeEngine) Close() error        { return e.exec.Close() }

func (e *nativeEngine) Resize(ctx context.Context, workers int) error {
	return e.exec.Resize(ctx, workers, e.master)
}

// MembershipExecutor is an Executor whose workers may join and leave on
// their own (processes started by Slurm, SIGTERM); Boundary applies those
// changes at the step boundary before step, joiners copying src.
type MembershipExecutor interface {
	Executor
	Boundary(src *Replica, step int64) (changed bool, err error)
}

func (e *nativeEngine) Boundary(_ context.Context, step int64) (bool, error) {
	mx, ok := e.exec.(MembershipExecutor)
	if !ok {
		return false, nil
	}
	return mx.Boundary(e.master, step)
}

// Step runs step on the executor and, once every logical worker's gradient
// is reduced, applies the optimizer on the coordinator's replica and
// commits the step on the workers. The step mutates the live contexts
// (sampler cursors, BatchNorm buffers) as it computes: when workers are
// lost they are restored from copies taken before the step; when ctx ends
// the abandoned computation may still be writing into them, so the copies
// replace them. The replica and optimizer state change only in Apply, so
// they hold the last committed step either way.
func (e *nativeEngine) Step(ctx context.Context, step int64, plan placement.Plan) (StepReport, error) {
	lr := LearningRate(e.spec, e.horizon, step)
	saved := make([]*ESTContext, e.n)
	for i, c := range e.ests {
		saved[i] = c.Clone()
	}
	if err := e.exec.Step(ctx, step, plan, e.ests, e.reduced, &e.out); err != nil {
		if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
			e.ests = saved
			return StepReport{}, err
		}
		var lost *LostError
		if errors.As(err, &lost) {
			for i, c := range e.ests {
				c.restoreFrom(saved[i])
			}
			return StepReport{}, err
		}
		return StepReport{}, fmt.Errorf("step %d: %w", step, err)
	}
	e.master.Apply(e.reduced, lr)
	if err := e.exec.Commit(step, e.reduced, lr); err != nil {
		return StepReport{}, fmt.Errorf("committing step %d: %w", step, err)
	}
	if e.check {
		if err := e.checkReplicas(step); err != nil {
			return StepReport{}, err
		}
	}
	return StepReport{Losses: append([]float32(nil), e.out.Losses...), Samples: append([]string(nil), e.out.Samples...)}, nil
}

// LearningRate is the rate of step's update for a job of horizon steps
// (spec.Horizon): the job's linear warm-up then cosine decay
// (optim.WarmupCosine). The coordinator commits every step at this rate;
// a worker computes it too, to apply a step's update before the commit
// arrives (runtime/cluster).
func LearningRate(spec *jobspec.Spec, horizon, step int64) float32 {
	return optim.WarmupCosine(int(step), spec.LR.WarmupSteps, int(horizon), spec.Optimizer.LR, spec.LR.MinLR)
}

// modelTensors is the model DDP would save: the parameters and logical
// worker 0's buffers.
func (e *nativeEngine) modelTensors() []models.Named {
	out := append([]models.Named(nil), e.master.Params...)
	return append(out, e.ests[0].Buffers...)
}

func (e *nativeEngine) Digest() (string, []statedb.TensorDigest) { return Digest(e.modelTensors()) }

// checkReplicas verifies that every in-process worker's replica equals the
// coordinator's bit for bit.
func (e *nativeEngine) checkReplicas(step int64) error {
	lx, ok := e.exec.(*localExecutor)
	if !ok {
		return nil
	}
	for rank, r := range lx.replicas() {
		for i, p := range r.Params {
			if !bytes.Equal(f32bytes(p.T.Data), f32bytes(e.master.Params[i].T.Data)) {
				return fmt.Errorf("replica of rank %d diverged from the coordinator in %s after step %d", rank, p.Name, step+1)
			}
		}
	}
	return nil
}

func f32bytes(s []float32) []byte {
	b := make([]byte, 4*len(s))
	for i, v := range s {
		u := math.Float32bits(v)
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	return b
}

// Snapshot saves the coordinator's replica, its optimizer state and every
// logical worker's context.
func (e *nativeEngine) Snapshot(context.Context, int64) (Snapshot, error) {
	return ReplicaSnapshot(e.master, e.ests), nil
}

// ReplicaSnapshot is the native engine's checkpoint of a replica at a step
// boundary: its parameters and optimizer state, and every logical
// worker's context (ests, indexed by EST id, all of the job's). It shares
// the replica's and contexts' memory: save it before they change. A
// standby coordinator (runtime/cluster) writes its copy of the committed
// state with it, so that Restore reads it like the coordinator's own.
func ReplicaSnapshot(rep *Replica, ests []*ESTContext) Snapshot {
	var ts []statedb.Tensor
	for _, p := range rep.Params {
		ts = append(ts, statedb.Tensor{Name: paramPrefix + p.Name, Shape: p.T.Shape, Data: p.T.Data})
	}
	for _, s := range rep.Opt.State() {
		ts = append(ts, statedb.Tensor{Name: optimPrefix + s.Name, Shape: []int{len(s.Data)}, Data: s.Data})
	}
	ctxs := make([]statedb.ESTContext, len(ests))
	for i, c := range ests {
		ctxs[i] = statedb.ESTContext{EST: i, Blob: c.Marshal()}
		for _, b := range c.Buffers {
			ts = append(ts, statedb.Tensor{Name: estPrefix(i) + b.Name, Shape: b.T.Shape, Data: b.T.Data})
		}
	}
	return Snapshot{Tensors: ts, Contexts: ctxs}
}

// ReplicaDigest is the digest the ledger and checkpoints record for a
// native replica at a step boundary: its parameters and logical worker
// 0's buffers (est0), the model DDP would save.
func ReplicaDigest(rep *Replica, est0 *ESTContext) string {
	d, _ := Digest(append(append([]models.Named(nil), rep.Params...), est0.Buffers...))
	return d
}

func estPrefix(id int) string { return "est" + strconv.Itoa(id) + "/" }

// Restore loads a checkpoint written by Snapshot into the replica, the
// optimizer and the contexts.
func (e *nativeEngine) Restore(ck *statedb.Checkpoint) error {
	if ck.Raw != nil {
		return fmt.Errorf("checkpoint of step %d was written by the %s engine, not the native one", ck.Step, ck.Meta[statedb.MetaEngine])
	}
	byName := make(map[string]statedb.Tensor, len(ck.Tensors))
	for _, t := range ck.Tensors {
		byName[t.Name] = t
	}
	load := func(name string, dst []float32) error {
		t, ok := byName[name]
		if !ok {
			return fmt.Errorf("tensor %s missing", name)
		}
		if len(t.Data) != len(dst) {
			return fmt.Errorf("tensor %s has %d values, the model needs %d", name, len(t.Data), len(dst))
		}
		copy(dst, t.Data)
		return nil
	}
	for _, p := range e.master.Params {
		if err := load(paramPrefix+p.Name, p.T.Data); err != nil {
			return err
		}
	}
	var st []optim.NamedSlice
	for _, t := range ck.Tensors {
		if name, ok := strings.CutPrefix(t.Name, optimPrefix); ok {
			st = append(st, optim.NamedSlice{Name: name, Data: t.Data})
		}
	}
	if err := e.master.Opt.LoadState(st); err != nil {
		return fmt.Errorf("optimizer state: %w", err)
	}
	if len(ck.Contexts) != e.n {
		return fmt.Errorf("%d EST contexts saved, the job has %d logical workers", len(ck.Contexts), e.n)
	}
	for _, sc := range ck.Contexts {
		if sc.EST < 0 || sc.EST >= e.n {
			return fmt.Errorf("context of EST %d out of range", sc.EST)
		}
		c := e.ests[sc.EST]
		if err := c.Unmarshal(sc.Blob); err != nil {
			return err
		}
		for _, b := range c.Buffers {
			if err := load(estPrefix(c.ID)+b.Name, b.T.Data); err != nil {
				return err
			}
		}
	}
	return nil
}
