package trainer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/engine"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/models"
	"github.com/easyscale/easyscale-slurm/runtime/optim"
	"github.com/easyscale/easyscale-slurm/runtime/placement"
	"github.com/easyscale/easyscale-slurm/runtime/rng"
	"github.com/easyscale/easyscale-slurm/runtime/schedule"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// job is the state of one Run.
type job struct {
	opts    Options
	log     hclog.Logger
	n, b    int
	seed    uint64
	horizon int64
	stop    int64

	sampler *data.Sampler
	ests    []*estContext
	workers []*worker
	plan    placement.Plan
	alloc   *schedule.Allocation
	threads int

	grads   [][]float32 // per EST, flattened in parameter order
	reduced []float32
	losses  []float32
	samples []string

	db            *statedb.DB
	step          int64
	reallocations int
	resumedFrom   int64
	lastLoss      float64
	digest        string
}

// Run trains opts.Spec to its horizon (or opts.StopAfter) on the allocation
// schedule, resuming from opts.StateDir when it holds a checkpoint of the
// same job. It returns the run's summary. Errors: a bad schedule, a state
// directory of another job, an unreadable checkpoint set, database write
// failures, or ctx cancellation (the state stays consistent at the last
// completed step).
func Run(ctx context.Context, opts Options) (*Summary, error) {
	j, err := newJob(opts)
	if err != nil {
		return nil, err
	}
	defer j.close()
	start := time.Now()
	startStep := j.step
	if err := j.train(ctx); err != nil {
		return nil, err
	}
	wall := time.Since(start).Seconds()
	sum := &Summary{
		Job: opts.Spec.Name, JobID: opts.Spec.ID(), LogicalWorkers: j.n, MicroBatch: j.b,
		Steps: j.step, Horizon: j.horizon, Digest: j.digest, TrainLoss: j.lastLoss,
		Reallocations: j.reallocations, ResumedFrom: j.resumedFrom, WallSeconds: wall,
		Schedule: j.schedule().String(),
		Epoch:    float64(j.step) / float64(j.sampler.StepsPerEpoch(j.b)),
	}
	if ran := j.step - startStep; ran > 0 && wall > 0 {
		sum.SamplesPerSec = float64(ran) * float64(j.n*j.b) / wall
	}
	if !opts.SkipEval {
		loss, acc, n := j.evaluate()
		sum.TestLoss, sum.TestAccuracy, sum.TestSamples = &loss, &acc, n
		j.log.Info("evaluated", "test_loss", loss, "test_accuracy", acc)
	}
	return sum, nil
}

func newJob(opts Options) (*job, error) {
	spec := opts.Spec
	j := &job{opts: opts, n: spec.LogicalWorkers, b: spec.MicroBatch, seed: spec.Seed, log: opts.Logger}
	if j.log == nil {
		j.log = hclog.NewNullLogger()
	}
	if err := j.schedule().Validate(j.n); err != nil {
		return nil, err
	}
	j.threads = opts.Threads
	if j.threads < 1 {
		j.threads = runtime.GOMAXPROCS(0)
	}
	sampler, err := data.NewSampler(opts.Workload.TrainLen(), j.n, j.seed)
	if err != nil {
		return nil, fmt.Errorf("building the sampler: %w", err)
	}
	j.sampler = sampler
	spe := j.sampler.StepsPerEpoch(j.b)
	if spe < 1 {
		return nil, fmt.Errorf("micro_batch %d is larger than a logical worker's shard (%d samples); lower micro_batch or logical_workers", j.b, j.sampler.ShardLen())
	}
	j.horizon = spec.Horizon(spe)
	j.stop = j.horizon
	if opts.StopAfter > 0 && opts.StopAfter < j.stop {
		j.stop = opts.StopAfter
	}

	// Initial state: the seed's initialisation and fresh contexts, unless a
	// checkpoint of this job says otherwise.
	first := opts.Workload.NewNet()
	opts.Workload.InitNet(first, j.seed)
	opt, err := newOptimizer(spec, first.Params())
	if err != nil {
		return nil, err
	}
	j.ests = make([]*estContext, j.n)
	for e := range j.ests {
		j.ests[e] = &estContext{ID: e, Buffers: first.NewBuffers()}
	}
	if opts.StateDir != "" {
		if err := j.openState(first, opt); err != nil {
			j.close()
			return nil, err
		}
	}
	j.workers = []*worker{startWorker(0, first, opt, j.threads)}
	np := paramCount(first.Params())
	j.grads = make([][]float32, j.n)
	for e := range j.grads {
		j.grads[e] = make([]float32, np)
	}
	j.reduced = make([]float32, np)
	j.losses = make([]float32, j.n)
	j.samples = make([]string, j.n)
	j.digest, _ = Digest(j.modelTensors())
	return j, nil
}

func (j *job) schedule() schedule.Schedule {
	if j.opts.Schedule != nil {
		return j.opts.Schedule
	}
	return schedule.Schedule{{FromStep: 0, Workers: j.n}}
}

// newOptimizer builds the optimizer the job file names for params.
func newOptimizer(spec *jobspec.Spec, params []models.Named) (optim.Optimizer, error) {
	o := spec.Optimizer
	ps := models.Tensors(params)
	switch o.Kind {
	case "sgd":
		return optim.NewSGD(ps, o.Momentum, o.WeightDecay, o.Nesterov), nil
	case "adamw":
		return optim.NewAdamW(ps, o.Beta1, o.Beta2, o.Eps, o.WeightDecay), nil
	}
	return nil, fmt.Errorf("optimizer.kind %q: unknown; use sgd or adamw", o.Kind)
}

func (j *job) close() {
	for _, w := range j.workers {
		w.stop()
	}
	j.workers = nil
	if j.db != nil {
		if err := j.db.Close(); err != nil {
			j.log.Warn("closing state database", "error", err)
		}
		j.db = nil
	}
}

// train runs steps until the stop step.
func (j *job) train(ctx context.Context) error {
	for j.step < j.stop {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("training stopped at step %d: %w", j.step, err)
		}
		if err := j.reallocate(j.schedule().At(j.step)); err != nil {
			return err
		}
		t0 := time.Now()
		j.runStep()
		if j.opts.CheckReplicas {
			if err := j.checkReplicas(); err != nil {
				return err
			}
		}
		j.step++
		if err := j.record(time.Since(t0)); err != nil {
			return err
		}
		if j.db != nil && (j.step%int64(j.opts.Spec.CheckpointEvery) == 0 || j.step == j.stop) {
			if err := j.checkpoint(); err != nil {
				return err
			}
		}
		j.progress(time.Since(t0))
	}
	j.endProgress()
	return nil
}

// runStep computes every EST's gradient on its worker, reduces them and
// applies the optimizer on every replica.
func (j *job) runStep() {
	step := j.step
	lr := optim.WarmupCosine(int(step), j.opts.Spec.LR.WarmupSteps, int(j.horizon), j.opts.Spec.Optimizer.LR, j.opts.Spec.LR.MinLR)
	onAll(j.workers, func(w *worker) {
		r := j.plan[w.rank]
		for e := r.First; e < r.First+r.Count; e++ {
			j.computeEST(w, j.ests[e], step)
		}
	})
	var red Reducer = canonicalReduce{}
	if j.opts.Ablation.GroupedReduction {
		groups := make([][]int, len(j.plan))
		for w, r := range j.plan {
			for e := r.First; e < r.First+r.Count; e++ {
				groups[w] = append(groups[w], e)
			}
		}
		red = groupedReduce{groups: groups}
	}
	red.Reduce(j.reduced, j.grads, j.threads)
	onAll(j.workers, func(w *worker) {
		unflattenGrads(w.params, j.reduced)
		w.opt.Step(models.Tensors(w.params), lr)
	})
	var loss float64
	for _, l := range j.losses {
		loss += float64(l)
	}
	j.lastLoss = loss / float64(j.n)
}

// computeEST runs logical worker c's micro-batch of step on worker w and
// leaves its gradient in j.grads[c.ID].
func (j *job) computeEST(w *worker, c *estContext, step int64) {
	key := c.ID
	if j.opts.Ablation.KeyRNGByWorker {
		key = w.rank
	}
	buffers := c.Buffers
	if j.opts.Ablation.BuffersPerWorker {
		buffers = w.buffers
	}
	idx := j.sampler.Next(&c.Cursor, c.ID, j.b)
	mb := j.opts.Workload.TrainBatch(idx, j.seed, key, step)
	w.tape.Reset()
	for _, p := range w.params {
		p.T.ZeroGrad()
	}
	loss, _ := w.net.Forward(w.tape, buffers, mb, dropoutSource(j.seed, key, step), true)
	w.tape.Backward(loss)
	flattenGrads(j.grads[c.ID], w.params)
	j.losses[c.ID] = loss.Data[0]
	j.samples[c.ID] = hashIndices(idx)
}

// reallocate applies alloc if it differs from the current allocation:
// workers join (copying rank 0's replica and optimizer state) or leave, and
// ESTs move with their contexts to the new placement.
func (j *job) reallocate(alloc schedule.Allocation) error {
	if j.alloc != nil && j.alloc.Workers == alloc.Workers && equalSpeeds(j.alloc.Speeds, alloc.Speeds) {
		return nil
	}
	t0 := time.Now()
	plan, err := placement.Compute(j.n, alloc.Workers, alloc.Speeds)
	if err != nil {
		return fmt.Errorf("reallocating at step %d: %w", j.step, err)
	}
	threads := max(1, j.threads/alloc.Workers)
	for len(j.workers) > alloc.Workers {
		last := j.workers[len(j.workers)-1]
		last.stop()
		j.workers = j.workers[:len(j.workers)-1]
	}
	src := j.workers[0]
	for len(j.workers) < alloc.Workers {
		net := j.opts.Workload.NewNet()
		models.CopyData(net.Params(), src.params)
		opt, err := newOptimizer(j.opts.Spec, net.Params())
		if err != nil {
			return err
		}
		if err := opt.LoadState(cloneState(src.opt.State())); err != nil {
			return fmt.Errorf("copying optimizer state to a joining worker: %w", err)
		}
		j.workers = append(j.workers, startWorker(len(j.workers), net, opt, threads))
	}
	for _, w := range j.workers {
		w.tape = engine.NewTape(threads)
	}
	if j.opts.Ablation.DropCursorOnMove && j.plan != nil {
		for e, c := range j.ests {
			if j.plan.Owner(e) != plan.Owner(e) {
				c.Cursor.Pos = 0
			}
		}
	}
	old := j.plan
	j.plan, j.alloc = plan, &alloc
	if old != nil {
		j.reallocations++
	}
	j.log.Info("allocation", "step", j.step, "world_size", alloc.Workers, "placement", plan.String(),
		"imbalance", fmt.Sprintf("%.3f", plan.Imbalance(alloc.Speeds)), "rescale_ms", float64(time.Since(t0).Microseconds())/1000)
	if j.db != nil {
		err := j.db.RecordAllocation(statedb.Allocation{Step: j.step, Workers: alloc.Workers, Speeds: alloc.Speeds,
			Placement: plan.String(), Reason: "schedule", Time: time.Now()})
		if err != nil {
			return fmt.Errorf("recording allocation at step %d: %w", j.step, err)
		}
	}
	return nil
}

func equalSpeeds(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func cloneState(s []optim.NamedSlice) []optim.NamedSlice {
	out := make([]optim.NamedSlice, len(s))
	for i, n := range s {
		out[i] = optim.NamedSlice{Name: n.Name, Data: append([]float32(nil), n.Data...)}
	}
	return out
}

// modelTensors is the model DDP would save: the parameters and logical
// worker 0's buffers (or, under the BuffersPerWorker ablation, rank 0's).
func (j *job) modelTensors() []models.Named {
	out := append([]models.Named(nil), j.workers[0].params...)
	if j.opts.Ablation.BuffersPerWorker {
		return append(out, j.workers[0].buffers...)
	}
	return append(out, j.ests[0].Buffers...)
}

// checkReplicas verifies that every replica equals rank 0 bit for bit.
func (j *job) checkReplicas() error {
	ref := j.workers[0].params
	for _, w := range j.workers[1:] {
		for i, p := range w.params {
			if !bytes.Equal(f32bytes(p.T.Data), f32bytes(ref[i].T.Data)) {
				return fmt.Errorf("replica of rank %d diverged from rank 0 in %s after step %d", w.rank, p.Name, j.step)
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

// record computes the digest of the completed step and appends it to the
// ledger.
func (j *job) record(wall time.Duration) error {
	digest, per := Digest(j.modelTensors())
	j.digest = digest
	if j.db == nil {
		return nil
	}
	err := j.db.AppendLedger(statedb.LedgerEntry{
		Step: j.step, Digest: digest, TensorDigests: per, Loss: j.lastLoss, WallSeconds: wall.Seconds(),
		Workers: len(j.workers), Placement: j.plan.String(), SamplesHash: joinHashes(j.samples), Time: time.Now(),
	})
	if errors.Is(err, statedb.ErrDivergence) {
		return fmt.Errorf("step %d was recomputed after a resume and differs from the recorded run: %w", j.step, err)
	}
	if err != nil {
		return fmt.Errorf("recording step %d in the ledger: %w", j.step, err)
	}
	return nil
}

func joinHashes(h []string) string {
	var b bytes.Buffer
	for i, s := range h {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s)
	}
	return b.String()
}

// dropoutSource returns the dropout streams of logical worker est at step:
// layer l draws from Philox stream (seed, est, step, Dropout, l), so two
// logical workers never share a mask even though they share the job seed.
func dropoutSource(seed uint64, est int, step int64) models.DropoutSource {
	return func(layer int) engine.Uniform {
		return rng.NewStream(rng.StreamKey{Seed: seed, Worker: uint32(est), Step: uint64(step), Purpose: rng.Dropout, Sub: uint16(layer)})
	}
}
