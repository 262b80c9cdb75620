package trainer

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"

	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/schedule"
	"github.com/easyscale/easyscale-slurm/runtime/workload"
)

// Small but real configurations: real MNIST and the real Opticks text,
// narrow networks, so each run takes well under a second or two.
const mnistSmall = `
task = "mnist"
logical_workers = 8
micro_batch = 8
steps = 200
seed = 7
checkpoint_every = 5
[data]
augment_shift = 2
[model]
channels = [4, 8]
hidden = 32
dropout = 0.25
[optimizer]
kind = "sgd"
lr = 0.05
momentum = 0.9
nesterov = true
weight_decay = 5e-4
[lr_schedule]
warmup_steps = 5
`

const charlmSmall = `
task = "charlm"
logical_workers = 4
micro_batch = 2
steps = 100
seed = 3
checkpoint_every = 5
[data]
seq_len = 16
[model]
d_model = 16
heads = 2
layers = 1
dropout = 0.1
[optimizer]
kind = "adamw"
lr = 0.003
weight_decay = 0.01
[lr_schedule]
warmup_steps = 3
`

// testSteps is how many steps each consistency test trains.
const testSteps = 24

var (
	workloadsMu sync.Mutex
	workloads   = map[string]workload.Workload{}
)

func loadJob(t testing.TB, text string) (*jobspec.Spec, workload.Workload) {
	t.Helper()
	spec, err := jobspec.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	workloadsMu.Lock()
	defer workloadsMu.Unlock()
	if wl, ok := workloads[text]; ok {
		return spec, wl
	}
	wl, err := workload.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	workloads[text] = wl
	return spec, wl
}

func run(t testing.TB, text, sched string, mod func(*Options)) *Summary {
	t.Helper()
	spec, wl := loadJob(t, text)
	opts := Options{Spec: spec, Workload: wl, StopAfter: testSteps, SkipEval: true, CheckReplicas: true}
	if sched != "" {
		s, err := schedule.Parse(sched)
		if err != nil {
			t.Fatal(err)
		}
		opts.Schedule = s
	}
	if mod != nil {
		mod(&opts)
	}
	sum, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatalf("schedule %q: %v", sched, err)
	}
	return sum
}

// randomSchedule makes changes random allocation changes over testSteps,
// some with heterogeneous speeds.
func randomSchedule(seed int64, changes, logical int) string {
	r := rand.New(rand.NewSource(seed))
	steps := r.Perm(testSteps - 1)[:changes]
	for i := range steps {
		steps[i]++
	}
	steps = append(steps, 0)
	sortInts(steps)
	parts := make([]string, len(steps))
	for i, s := range steps {
		w := 1 + r.Intn(logical)
		parts[i] = fmt.Sprintf("%d:%d", s, w)
		if r.Intn(3) == 0 {
			sp := make([]string, w)
			for k := range sp {
				sp[k] = fmt.Sprintf("%.1f", 0.5+3*r.Float64())
			}
			parts[i] += "@" + strings.Join(sp, "/")
		}
	}
	return strings.Join(parts, ",")
}

func sortInts(a []int) {
	for i := 1; i < len(a); i++ {
		for k := i; k > 0 && a[k] < a[k-1]; k-- {
			a[k], a[k-1] = a[k-1], a[k]
		}
	}
}

// TestDigestIndependentOfAllocation is the product's promise: the model
// after each schedule is bit-identical to one physical worker per logical
// worker.
func TestDigestIndependentOfAllocation(t *testing.T) {
	for _, job := range []struct{ name, text string }{{"mnist", mnistSmall}, {"charlm", charlmSmall}} {
		spec, _ := loadJob(t, job.text)
		n := spec.LogicalWorkers
		ref := run(t, job.text, "", nil)
		cases := []struct{ name, sched string }{
			{"one worker", "1"},
			{"growing from one to all", fmt.Sprintf("0:1,10:%d", n)},
			{"shrinking from all to one", fmt.Sprintf("0:%d,10:1", n)},
			{"one, three, all, two", fmt.Sprintf("0:1,5:3,12:%d,18:2", n)},
			{"ten random changes", randomSchedule(1, 10, n)},
			{"heterogeneous speeds", "0:3@3.1/2.4/1,8:2@1/5,16:3@1/1/4"},
		}
		for _, c := range cases {
			t.Run(job.name+"/"+c.name, func(t *testing.T) {
				got := run(t, job.text, c.sched, nil)
				if got.Digest != ref.Digest {
					t.Fatalf("schedule %s: digest %s, fixed run %s", c.sched, got.Digest, ref.Digest)
				}
				if got.Steps != testSteps {
					t.Fatalf("ran %d steps, want %d", got.Steps, testSteps)
				}
			})
		}
	}
}

func TestDifferentSeedGivesDifferentDigest(t *testing.T) {
	a := run(t, mnistSmall, "2", nil)
	b := run(t, strings.Replace(mnistSmall, "seed = 7", "seed = 8", 1), "2", nil)
	if a.Digest == b.Digest {
		t.Fatal("seeds 7 and 8 gave the same digest")
	}
}

// TestEachConsistencyFactorMatters switches off one factor at a time: on the
// fixed one-worker-per-EST allocation the ablation is harmless (same
// digest), under a changing schedule the digest differs. So every factor's
// handling is needed and the equality test above has teeth.
func TestEachConsistencyFactorMatters(t *testing.T) {
	ref := run(t, mnistSmall, "", nil)
	changing := "0:2,6:3,13:8,19:1"
	cases := []struct {
		name string
		ab   Ablation
	}{
		{"random streams keyed by the physical worker", Ablation{KeyRNGByWorker: true}},
		{"sampler cursor not carried with a moving EST", Ablation{DropCursorOnMove: true}},
		{"BatchNorm buffers kept per physical worker", Ablation{BuffersPerWorker: true}},
		{"gradients reduced per worker first", Ablation{GroupedReduction: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fixed := run(t, mnistSmall, "", func(o *Options) { o.Ablation = c.ab })
			if fixed.Digest != ref.Digest {
				t.Fatalf("on the fixed allocation the ablation changed the digest; the test would not isolate the factor")
			}
			moved := run(t, mnistSmall, changing, func(o *Options) { o.Ablation = c.ab })
			if moved.Digest == ref.Digest {
				t.Fatalf("with %s the changing schedule still matched: the factor is not exercised", c.name)
			}
		})
	}
}

func TestResumeReproducesUninterruptedRun(t *testing.T) {
	ref := run(t, mnistSmall, "", nil)
	dir := t.TempDir()
	first := run(t, mnistSmall, "0:3", func(o *Options) { o.StateDir = dir; o.StopAfter = 13 })
	if first.Steps != 13 {
		t.Fatalf("first part ran %d steps", first.Steps)
	}
	second := run(t, mnistSmall, "0:2,20:5", func(o *Options) { o.StateDir = dir })
	if second.ResumedFrom != 13 {
		t.Fatalf("resumed from %d, want the step-13 checkpoint", second.ResumedFrom)
	}
	if second.Digest != ref.Digest {
		t.Fatalf("resumed run digest %s, uninterrupted %s", second.Digest, ref.Digest)
	}
}

func TestStateDirOfAnotherJobIsRefused(t *testing.T) {
	dir := t.TempDir()
	run(t, mnistSmall, "2", func(o *Options) { o.StateDir = dir; o.StopAfter = 2 })
	spec, wl := loadJob(t, strings.Replace(mnistSmall, "seed = 7", "seed = 9", 1))
	_, err := Run(context.Background(), Options{Spec: spec, Workload: wl, StateDir: dir, StopAfter: 2, SkipEval: true})
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "fields that differ: seed") {
		t.Fatalf("running another job in %s: err = %v, want a refusal naming the directory and the field seed", dir, err)
	}
}
