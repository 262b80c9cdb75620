package trainer

import (
	"context"
	"testing"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/engine"
	"github.com/easyscale/easyscale-slurm/runtime/models"
	"github.com/easyscale/easyscale-slurm/runtime/optim"
	"github.com/easyscale/easyscale-slurm/runtime/rng"
	"github.com/easyscale/easyscale-slurm/runtime/schedule"
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

func newBenchJob(b *testing.B, workers int) *job {
	spec, wl := loadJob(b, benchJob)
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

// BenchmarkStep measures one training step of the MNIST example: 8 ESTs on
// one physical worker ("est"), and, as the baseline without any EST context
// handling, the same 8 micro-batches accumulated on one tape ("plain").
// est_switch_overhead_pct = est/plain - 1 (EasyScale reports -0.5..+2% on V100).
func BenchmarkStep(b *testing.B) {
	b.Run("est", func(b *testing.B) {
		j := newBenchJob(b, 1)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			j.runStep(context.Background())
			j.step++
		}
	})
	b.Run("plain", func(b *testing.B) {
		spec, wl := loadJob(b, benchJob)
		net := wl.NewNet()
		wl.InitNet(net, spec.Seed)
		params := net.Params()
		opt := optim.NewSGD(models.Tensors(params), 0.9, 5e-4, true)
		buffers := net.NewBuffers()
		sampler, _ := data.NewSampler(wl.TrainLen(), spec.LogicalWorkers, spec.Seed)
		cursor := data.Cursor{}
		tp := engine.NewTape(1)
		scale := 1 / float32(spec.LogicalWorkers)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			for _, p := range params {
				p.T.ZeroGrad()
			}
			for e := 0; e < spec.LogicalWorkers; e++ {
				idx := sampler.Next(&cursor, 0, spec.MicroBatch)
				mb := wl.TrainBatch(idx, spec.Seed, 0, int64(i))
				tp.Reset()
				src := rng.NewStream(rng.StreamKey{Seed: spec.Seed, Step: uint64(i), Purpose: rng.Dropout})
				loss, _ := net.Forward(tp, buffers, mb, func(int) engine.Uniform { return src }, true)
				tp.Backward(loss)
			}
			for _, p := range params {
				for k := range p.T.Grad {
					p.T.Grad[k] *= scale
				}
			}
			opt.Step(models.Tensors(params), 0.05)
		}
	})
}

// BenchmarkRescale measures one in-process reallocation between 2 and 8
// physical workers (workers join with a copy of rank 0's replica and
// optimizer state, or leave; ESTs move with their contexts). rescale_ms.
func BenchmarkRescale(b *testing.B) {
	j := newBenchJob(b, 2)
	allocs := []schedule.Allocation{{Workers: 8}, {Workers: 2}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := j.reallocate(context.Background(), allocs[i%2]); err != nil {
			b.Fatal(err)
		}
	}
}
