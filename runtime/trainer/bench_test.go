package trainer

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/engine"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/models"
	"github.com/easyscale/easyscale-slurm/runtime/optim"
	"github.com/easyscale/easyscale-slurm/runtime/rng"
	"github.com/easyscale/easyscale-slurm/runtime/schedule"
	"github.com/easyscale/easyscale-slurm/runtime/workload"
)

// benchJob is the real MNIST example's configuration (examples/mnist/job.toml).
const benchJob = `
task = "mnist"
logical_workers = 8
micro_batch = 32
epochs = 1
seed = 1
[data]
augment_shift = 2
[model]
channels = [8, 16]
hidden = 128
dropout = 0.25
[optimizer]
lr = 0.1
momentum = 0.9
nesterov = true
weight_decay = 5e-4
[lr_schedule]
warmup_steps = 20
`

// benchCharLMJob is the LM example (examples/charlm/job.toml) with 8
// logical workers instead of 4, so that both benchmarks accumulate 8
// micro-batches per step (tests/bench's native_vs_torch_step_ratio_charlm).
const benchCharLMJob = `
task = "charlm"
logical_workers = 8
micro_batch = 8
steps = 300
seed = 1
[data]
seq_len = 64
[model]
d_model = 64
heads = 4
layers = 2
dropout = 0.1
[optimizer]
kind = "adamw"
lr = 3e-3
weight_decay = 0.01
beta1 = 0.9
beta2 = 0.99
[lr_schedule]
warmup_steps = 20
min_lr = 3e-4
`

func newBenchJob(b *testing.B, text string, workers int) *job {
	spec, wl := loadJob(b, text)
	j, err := newJob(Options{Spec: spec, Workload: wl, Schedule: schedule.Schedule{{Workers: workers}}, SkipEval: true, Threads: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(j.close)
	if err := j.reallocate(context.Background(), j.schedule().At(0)); err != nil {
		b.Fatal(err)
	}
	return j
}

// stepTimer keeps the fastest step of a benchmark by the wall clock and by
// the process CPU clock, reported as the min-ns/step and min-cpu-ns/step
// metrics next to ns/op. On a shared, loaded machine the fastest step is the
// least disturbed one, and CPU time leaves out the time the process was
// descheduled (tests/bench compares these with PyTorch's, measured alike).
type stepTimer struct {
	wall, cpu time.Duration
	t0        time.Time
	c0        time.Duration
	last      time.Duration // CPU time of the last step
}

func (s *stepTimer) start() { s.t0, s.c0 = time.Now(), processCPU() }

func (s *stepTimer) stop() {
	w, c := time.Since(s.t0), processCPU()-s.c0
	s.last = c
	if s.wall == 0 || w < s.wall {
		s.wall = w
	}
	if s.cpu == 0 || c < s.cpu {
		s.cpu = c
	}
}

func (s *stepTimer) report(b *testing.B) {
	b.ReportMetric(float64(s.wall.Nanoseconds()), "min-ns/step")
	b.ReportMetric(float64(s.cpu.Nanoseconds()), "min-cpu-ns/step")
}

// benchSteps runs the benchmark's steps of 8 ESTs on one physical worker
// ("est"), and, as the baseline without any EST context handling, the same
// 8 micro-batches accumulated on one tape ("plain").
func benchSteps(b *testing.B, text string) {
	b.Run("est", func(b *testing.B) {
		j := newBenchJob(b, text, 1)
		var t stepTimer
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t.start()
			j.runStep(context.Background())
			t.stop()
			j.step++
		}
		t.report(b)
	})
	b.Run("plain", func(b *testing.B) { benchPlain(b, text) })
}

// benchPlain is plain gradient accumulation of the job's N micro-batches on
// one tape, then the job's optimizer.
func benchPlain(b *testing.B, text string) {
	p := newPlainStepper(b, text)
	var t stepTimer
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t.start()
		p.step(int64(i))
		t.stop()
	}
	t.report(b)
}

// plainStepper is the baseline without EST contexts: one net, one tape,
// one sampler cursor, the job's optimizer.
type plainStepper struct {
	spec    *jobspec.Spec
	wl      workload.Workload
	net     models.Net
	params  []models.Named
	buffers []models.Named
	opt     optim.Optimizer
	sampler *data.Sampler
	cursors []data.Cursor // one per logical worker, as the ESTs' contexts
	horizon int64
	tp      *engine.Tape
}

func newPlainStepper(b *testing.B, text string) *plainStepper {
	spec, wl := loadJob(b, text)
	net := wl.NewNet()
	wl.InitNet(net, spec.Seed)
	params := net.Params()
	opt, err := newOptimizer(spec, params)
	if err != nil {
		b.Fatal(err)
	}
	return plainStepperOn(b, spec, wl, &Replica{Net: net, Params: params, Opt: opt, Tape: newTrainTape(1)})
}

// plainStepperOn is a plain stepper that trains rep's network with rep's
// optimizer and tape.
func plainStepperOn(b *testing.B, spec *jobspec.Spec, wl workload.Workload, rep *Replica) *plainStepper {
	sampler, err := data.NewSampler(wl.TrainLen(), spec.LogicalWorkers, spec.Seed)
	if err != nil {
		b.Fatal(err)
	}
	horizon, err := spec.Horizon(sampler.StepsPerEpoch(spec.MicroBatch))
	if err != nil {
		b.Fatal(err)
	}
	return &plainStepper{spec: spec, wl: wl, net: rep.Net, params: rep.Params, buffers: rep.Net.NewBuffers(), opt: rep.Opt,
		sampler: sampler, cursors: make([]data.Cursor, spec.LogicalWorkers), horizon: horizon, tp: rep.Tape}
}

// step accumulates the N micro-batches of step i and applies the
// optimizer. It trains on the samples, dropout masks and learning rate the
// ESTs of the same step use (logical worker e's shard and streams for
// micro-batch e), so both arms of a comparison follow the same trajectory:
// the speed of a step depends on the values it computes (subnormal floats
// are slow), and two models trained apart run at different speeds.
func (p *plainStepper) step(i int64) {
	spec := p.spec
	for _, q := range p.params {
		q.T.ZeroGrad()
	}
	for e := range spec.LogicalWorkers {
		idx := p.sampler.Next(&p.cursors[e], e, spec.MicroBatch)
		mb := p.wl.TrainBatch(idx, spec.Seed, e, i)
		p.tp.Reset()
		seed, step := spec.Seed, uint64(i)
		loss, _ := p.net.Forward(p.tp, p.buffers, mb, func(l int) engine.Uniform {
			return rng.NewStream(rng.StreamKey{Seed: seed, Worker: uint32(e), Step: step, Purpose: rng.Dropout, Sub: uint16(l)})
		}, true)
		p.tp.Backward(loss)
	}
	scale := 1 / float32(spec.LogicalWorkers)
	for _, q := range p.params {
		for k := range q.T.Grad {
			q.T.Grad[k] *= scale
		}
	}
	lr := optim.WarmupCosine(int(i), spec.LR.WarmupSteps, int(p.horizon), spec.Optimizer.LR, spec.LR.MinLR)
	p.opt.Step(models.Tensors(p.params), lr)
}

// BenchmarkStep measures one training step of the MNIST example (LeNet,
// 8 ESTs × 32 images, SGD with Nesterov momentum).
// est_switch_overhead_pct = est/plain - 1 (EasyScale reports -0.5..+2% on V100).
func BenchmarkStep(b *testing.B) { benchSteps(b, benchJob) }

// BenchmarkStepCharLM measures one training step of the LM example with 8
// ESTs × 8 sequences of 64 characters (AdamW).
func BenchmarkStepCharLM(b *testing.B) { benchSteps(b, benchCharLMJob) }

// BenchmarkStepSwitch runs step i of 8 ESTs on one physical worker and
// step i of the plain job (the same samples, masks and learning rate) in
// iteration i, alternating which goes first, and reports the fastest of
// each by the process CPU clock and est_switch_overhead_pct, the median
// over iterations of est_i/plain_i - 1 (EasyScale reports -0.5..+2 % on
// V100). Pairing the two arms step by step keeps a spell of load on a
// shared machine, and the step's own data, from falling on one arm only;
// the median of the pairs is steadier than the ratio of the two minima.
// Both arms train the same network (the job's replica, with its optimizer
// and tape), so they compute on the same memory: two separate copies of
// the model differ in speed by up to 2 % by their addresses alone
// (measured with two plain steppers side by side), more than the overhead
// measured.
func BenchmarkStepSwitch(b *testing.B) {
	j := newBenchJob(b, benchJob, 1)
	p := plainStepperOn(b, j.opts.Spec, j.opts.Workload, j.eng.(*nativeEngine).master)
	var est, plain stepTimer
	runEST := func() {
		est.start()
		j.runStep(context.Background())
		est.stop()
		j.step++
	}
	runPlain := func(i int) {
		plain.start()
		p.step(int64(i))
		plain.stop()
	}
	ratios := make([]float64, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			runEST()
			runPlain(i)
		} else {
			runPlain(i)
			runEST()
		}
		ratios = append(ratios, float64(est.last)/float64(plain.last))
	}
	slices.Sort(ratios)
	b.ReportMetric(float64(est.cpu.Nanoseconds()), "est-min-cpu-ns/step")
	b.ReportMetric(float64(plain.cpu.Nanoseconds()), "plain-min-cpu-ns/step")
	b.ReportMetric(100*(ratios[len(ratios)/2]-1), "est-overhead-%")

}

// BenchmarkRescale measures one in-process reallocation between 2 and 8
// physical workers (workers join with a copy of rank 0's replica and
// optimizer state, or leave; ESTs move with their contexts). rescale_ms.
func BenchmarkRescale(b *testing.B) {
	j := newBenchJob(b, benchJob, 2)
	allocs := []schedule.Allocation{{Workers: 8}, {Workers: 2}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := j.reallocate(context.Background(), allocs[i%2]); err != nil {
			b.Fatal(err)
		}
	}
}
