package trainer

import (
	"context"
	"fmt"
	"sync"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/models"
	"github.com/easyscale/easyscale-slurm/runtime/placement"
	"github.com/easyscale/easyscale-slurm/runtime/vecf32"
	"github.com/easyscale/easyscale-slurm/runtime/workload"
)

// localExecutor runs physical workers as goroutines of this process, each
// with its own replica, tape and share of the cores. It never loses a
// worker. It also carries the ablations (Options.Ablation) that show each
// consistency factor is needed.
type localExecutor struct {
	spec    *jobspec.Spec
	wl      workload.Workload
	sampler *data.Sampler
	threads int // cores in total
	ablate  Ablation

	workers []*worker
	// master is the coordinator's replica, the src of Resize: rank 0
	// computes on it directly (see Resize), so Commit skips it.
	master *Replica
	grads  [][]float32 // per EST, flattened
	plan   placement.Plan
	// abandoned is set when a Step gave up on ctx: its goroutines may
	// still be computing, so Close must not wait for them.
	abandoned bool
}

// worker is one physical worker: a goroutine that executes the functions
// sent to it one at a time, in order.
type worker struct {
	rank int
	rep  *Replica
	// buffers is the worker's own BatchNorm set, used only by the
	// BuffersPerWorker ablation (buffers tied to the device, not the EST).
	buffers []models.Named
	tasks   chan func()
	wg      sync.WaitGroup
}

var _ Executor = (*localExecutor)(nil)

func newLocalExecutor(spec *jobspec.Spec, wl workload.Workload, sampler *data.Sampler, threads int, ab Ablation, numParams int) *localExecutor {
	x := &localExecutor{spec: spec, wl: wl, sampler: sampler, threads: threads, ablate: ab}
	x.grads = make([][]float32, spec.LogicalWorkers)
	for e := range x.grads {
		x.grads[e] = make([]float32, numParams)
	}
	return x
}

func startWorker(rank int, rep *Replica, buffers []models.Named) *worker {
	w := &worker{rank: rank, rep: rep, buffers: buffers, tasks: make(chan func())}
	go func() {
		for f := range w.tasks {
			f()
			w.wg.Done()
		}
	}()
	return w
}

func (w *worker) submit(f func()) {
	w.wg.Add(1)
	w.tasks <- f
}

func (w *worker) stop() {
	w.wg.Wait()
	close(w.tasks)
}

// release ends w without waiting for the function it is running (after
// an abandoned step): the goroutine exits when that function returns.
func (w *worker) release() { close(w.tasks) }

// onAll runs f(w) on every worker concurrently and waits for all.
func onAll(ws []*worker, f func(w *worker)) {
	for _, w := range ws {
		w.submit(func() { f(w) })
	}
	for _, w := range ws {
		w.wg.Wait()
	}
}

func (x *localExecutor) Workers() int { return len(x.workers) }

// Resize starts or stops workers; a new worker of rank 1 or above copies
// src (the coordinator's replica). Rank 0 computes on src itself: in one
// process its replica would be a second copy of src that only costs an
// optimizer step per step to keep equal (the replica self-check then
// compares ranks 1 and above). Computing on src is safe because a step
// only reads the parameters and writes gradients; the parameters and
// optimizer state change in the coordinator's Apply, between steps.
func (x *localExecutor) Resize(_ context.Context, n int, src *Replica) error {
	for len(x.workers) > n {
		last := x.workers[len(x.workers)-1]
		last.stop()
		x.workers = x.workers[:len(x.workers)-1]
	}
	x.master = src
	for len(x.workers) < n {
		if len(x.workers) == 0 {
			x.workers = append(x.workers, startWorker(0, src, src.Net.NewBuffers()))
			continue
		}
		rep, err := NewReplica(x.spec, x.wl, 1)
		if err != nil {
			return err
		}
		if err := rep.CopyFrom(src); err != nil {
			return err
		}
		x.workers = append(x.workers, startWorker(len(x.workers), rep, rep.Net.NewBuffers()))
	}
	per := max(1, x.threads/n)
	for _, w := range x.workers {
		w.rep.Tape = newTrainTape(per)
	}
	return nil
}

func (x *localExecutor) Step(ctx context.Context, step int64, plan placement.Plan, ests []*ESTContext, grad []float32, out *StepOutput) error {
	if x.abandoned {
		return fmt.Errorf("step %d: the executor abandoned a step; only Close is allowed", step)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("step %d not started: %w", step, err)
	}
	if x.ablate.DropCursorOnMove && x.plan != nil {
		for e, c := range ests {
			if x.plan.Owner(e) != plan.Owner(e) {
				c.Cursor.Pos = 0
			}
		}
	}
	x.plan = plan
	computed := make(chan struct{})
	lead := -1 // the worker holding EST 0, which sums its ESTs into grad as it goes
	if !x.ablate.GroupedReduction {
		lead = plan.Owner(0)
	}
	go func() {
		defer close(computed)
		x.computeAll(step, plan, ests, out, lead, grad)
	}()
	select {
	case <-computed:
	case <-ctx.Done():
		// The workers' goroutines cannot be interrupted mid-EST: leave them
		// to finish into buffers nobody reads again.
		x.abandoned = true
		return fmt.Errorf("step %d abandoned: %w", step, ctx.Err())
	}
	if x.ablate.BuffersPerWorker { // the saved model then holds rank 0's buffers
		models.CopyData(ests[0].Buffers, x.workers[0].buffers)
	}
	if x.ablate.GroupedReduction {
		groups := make([][]int, len(plan))
		for w, r := range plan {
			for e := r.First; e < r.First+r.Count; e++ {
				groups[w] = append(groups[w], e)
			}
		}
		groupedReduce{groups: groups}.Reduce(grad, x.grads, x.threads)
		return nil
	}
	prefix := 0
	if lead >= 0 {
		prefix = plan[lead].Count
	}
	reduceRest(grad, prefix, x.grads, x.threads)
	return nil
}

// computeAll runs every EST of step on the worker plan assigns it to and
// waits for all. Worker lead (the one holding EST 0; -1 for none) sums
// its ESTs' gradients into sum in EST order (AccumulateEST), the others
// write theirs to x.grads.
func (x *localExecutor) computeAll(step int64, plan placement.Plan, ests []*ESTContext, out *StepOutput, lead int, sum []float32) {
	onAll(x.workers, func(w *worker) {
		r := plan[w.rank]
		for e := r.First; e < r.First+r.Count; e++ {
			in := ESTInput{Workload: x.wl, Sampler: x.sampler, Seed: x.spec.Seed, Step: step,
				MicroBatch: x.spec.MicroBatch, StreamKey: e, Buffers: ests[e].Buffers}
			if x.ablate.KeyRNGByWorker {
				in.StreamKey = w.rank
			}
			if x.ablate.BuffersPerWorker {
				in.Buffers = w.buffers
			}
			if w.rank == lead {
				out.Losses[e], out.Samples[e] = w.rep.AccumulateEST(ests[e], in, sum, e == 0)
				continue
			}
			out.Losses[e], out.Samples[e] = w.rep.ComputeEST(ests[e], in, x.grads[e])
		}
	})
}

func (x *localExecutor) Commit(_ int64, grad []float32, lr float32) error {
	onAll(x.workers, func(w *worker) {
		if w.rep != x.master {
			w.rep.Apply(grad, lr)
		}
	})
	return nil
}

func (x *localExecutor) Close() error {
	for _, w := range x.workers {
		if x.abandoned {
			w.release()
			continue
		}
		w.stop()
	}
	x.workers = nil
	return nil
}

// replicas returns every worker's replica (for the replica self-check).
func (x *localExecutor) replicas() []*Replica {
	out := make([]*Replica, len(x.workers))
	for i, w := range x.workers {
		out[i] = w.rep
	}
	return out
}

// flattenGrads copies the gradients of params, in order, into dst.
func flattenGrads(dst []float32, params []models.Named) {
	off := 0
	for _, p := range params {
		off += copy(dst[off:], p.T.Grad)
	}
}

// addGrads adds the gradients of params, in order, into dst (float32 adds).
func addGrads(dst []float32, params []models.Named) {
	off := 0
	for _, p := range params {
		vecf32.Add(dst[off:off+len(p.T.Grad)], p.T.Grad)
		off += len(p.T.Grad)
	}
}

// unflattenGrads copies src into the gradients of params, in order.
func unflattenGrads(params []models.Named, src []float32) {
	off := 0
	for _, p := range params {
		off += copy(p.T.Grad, src[off:])
	}
}

// paramCount is the total number of parameter elements.
func paramCount(params []models.Named) int {
	n := 0
	for _, p := range params {
		n += p.T.Len()
	}
	return n
}
