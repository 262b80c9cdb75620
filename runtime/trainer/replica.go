package trainer

import (
	"fmt"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/engine"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/models"
	"github.com/easyscale/easyscale-slurm/runtime/optim"
	"github.com/easyscale/easyscale-slurm/runtime/rng"
	"github.com/easyscale/easyscale-slurm/runtime/workload"
)

// Replica is one copy of the model's parameters and optimizer state, with
// the autodiff tape that computes on it. Every physical worker holds one,
// and so does the coordinator (the copy that is checkpointed and digested).
type Replica struct {
	Net    models.Net
	Params []models.Named
	Opt    optim.Optimizer
	Tape   *engine.Tape
}

// NewReplica builds a replica of spec's network with zero parameters and
// fresh optimizer state; threads is the tape's intra-op parallelism.
func NewReplica(spec *jobspec.Spec, wl workload.Workload, threads int) (*Replica, error) {
	net := wl.NewNet()
	opt, err := newOptimizer(spec, net.Params())
	if err != nil {
		return nil, err
	}
	return &Replica{Net: net, Params: net.Params(), Opt: opt, Tape: newTrainTape(threads)}, nil
}

// newTrainTape is a replica's tape: ComputeEST reads the loss before the
// next micro-batch's Reset, so op outputs can be pooled across micro-batches.
func newTrainTape(threads int) *engine.Tape {
	tp := engine.NewTape(threads)
	tp.SetReuseOutputs(true)
	return tp
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

// CopyFrom makes r an exact copy of src's parameters and optimizer state
// (what a joining worker receives).
func (r *Replica) CopyFrom(src *Replica) error {
	models.CopyData(r.Params, src.Params)
	if err := r.Opt.LoadState(src.Opt.State()); err != nil { // LoadState copies
		return fmt.Errorf("copying optimizer state: %w", err)
	}
	return nil
}

// NumParams is the number of parameter elements: the length of a
// flattened gradient.
func (r *Replica) NumParams() int { return paramCount(r.Params) }

// Apply runs one optimizer step with the reduced, flattened gradient grad
// (parameters in canonical order) and learning rate lr.
func (r *Replica) Apply(grad []float32, lr float32) {
	unflattenGrads(r.Params, grad)
	r.Opt.Step(models.Tensors(r.Params), lr)
}

// ESTInput says how to compute one logical worker's micro-batch.
type ESTInput struct {
	Workload workload.Workload
	Sampler  *data.Sampler
	Seed     uint64
	Step     int64
	// MicroBatch is b, the samples per logical worker.
	MicroBatch int
	// StreamKey is the logical worker id that keys the random streams
	// (the EST id; only an ablation passes anything else).
	StreamKey int
	// Buffers are the BatchNorm buffers to use (the EST's, unless an
	// ablation says otherwise).
	Buffers []models.Named
}

// ComputeEST runs logical worker c's micro-batch of in.Step on r, advancing
// c's sampler cursor and updating in.Buffers, and writes its flattened
// gradient into grad. It returns the micro-batch loss and a hash of the
// sample indices consumed.
func (r *Replica) ComputeEST(c *ESTContext, in ESTInput, grad []float32) (loss float32, samples string) {
	loss, samples = r.backward(c, in)
	flattenGrads(grad, r.Params)
	return loss, samples
}

// AccumulateEST is ComputeEST that adds the gradient into sum instead of
// writing it to a buffer of its own: sum = g when first, else sum = sum + g
// (float32 adds). Called for logical workers 0, 1, ..., k in turn, it
// leaves in sum the first k+1 terms of canonicalReduce's sequential sum,
// bit for bit, while the gradient is still in the cache, and saves a
// buffer, a copy and a pass of the reduction per logical worker.
func (r *Replica) AccumulateEST(c *ESTContext, in ESTInput, sum []float32, first bool) (loss float32, samples string) {
	loss, samples = r.backward(c, in)
	if first {
		flattenGrads(sum, r.Params)
	} else {
		addGrads(sum, r.Params)
	}
	return loss, samples
}

// backward runs c's micro-batch forward and backward, leaving its gradient
// in r's parameters.
func (r *Replica) backward(c *ESTContext, in ESTInput) (loss float32, samples string) {
	start := time.Now()
	idx := in.Sampler.Next(&c.Cursor, c.ID, in.MicroBatch)
	mb := in.Workload.TrainBatch(idx, in.Seed, in.StreamKey, in.Step)
	r.Tape.Reset()
	for _, p := range r.Params {
		p.T.ZeroGrad()
	}
	l, _ := r.Net.Forward(r.Tape, in.Buffers, mb, dropoutSource(in.Seed, in.StreamKey, in.Step), true)
	r.Tape.Backward(l)
	slowIfDue(in.Step)
	paceSince(start)
	return l.Data[0], hashIndices(idx)
}

// dropoutSource returns the dropout streams of logical worker est at step:
// layer l draws from Philox stream (seed, est, step, Dropout, l), so two
// logical workers never share a mask even though they share the job seed.
func dropoutSource(seed uint64, est int, step int64) models.DropoutSource {
	return func(layer int) engine.Uniform {
		return rng.NewStream(rng.StreamKey{Seed: seed, Worker: uint32(est), Step: uint64(step), Purpose: rng.Dropout, Sub: uint16(layer)})
	}
}
