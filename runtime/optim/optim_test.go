package optim

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/easyscale/easyscale-slurm/runtime/engine"
)

// param returns a parameter holding data with its gradient set to grad.
func param(data, grad []float32) *engine.Tensor {
	p := engine.NewParam(len(data))
	copy(p.Data, data)
	copy(p.Grad, grad)
	return p
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*max(1, math.Abs(b)) }

func TestSGDMatchesThePyTorchFormula(t *testing.T) {
	// torch.optim.SGD, dampening 0, gradient g held fixed across steps:
	//   g' = g + wd·p;  b = μ·b + g' (b = g' on step 1);  d = g' + μ·b if nesterov else b;  p = p - lr·d
	// p0 = 1, g = 0.5, lr = 0.1, μ = 0.9, wd = 0.01.
	// plain:    step 1: g' = 0.51,      b = 0.51,                 p = 1 - 0.051 = 0.949
	//           step 2: g' = 0.50949,   b = 0.9·0.51 + 0.50949 = 0.96849, p = 0.949 - 0.096849 = 0.852151
	// nesterov: step 1: g' = 0.51,      b = 0.51, d = 0.51 + 0.459 = 0.969,  p = 1 - 0.0969 = 0.9031
	//           step 2: g' = 0.509031,  b = 0.459 + 0.509031 = 0.968031, d = 0.509031 + 0.8712279 = 1.3802589,
	//                   p = 0.9031 - 0.13802589 = 0.76507411
	// no momentum:      step 1: p = 1 - 0.1·0.51 = 0.949; step 2: p = 0.949 - 0.1·0.50949 = 0.898051
	cases := []struct {
		name     string
		momentum float32
		nesterov bool
		want     [2]float64
	}{
		{"plain momentum", 0.9, false, [2]float64{0.949, 0.852151}},
		{"nesterov momentum", 0.9, true, [2]float64{0.9031, 0.76507411}},
		{"no momentum", 0, false, [2]float64{0.949, 0.898051}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := param([]float32{1}, []float32{0.5})
			opt := NewSGD([]*engine.Tensor{p}, c.momentum, 0.01, c.nesterov)
			for s, want := range c.want {
				opt.Step([]*engine.Tensor{p}, 0.1)
				if !near(float64(p.Data[0]), want) {
					t.Errorf("after step %d: p = %.8f, want %.8f", s+1, p.Data[0], want)
				}
			}
		})
	}
}

func TestSGDWeightDecayPullsTowardZeroWithoutGradient(t *testing.T) {
	p := param([]float32{2, -2}, []float32{0, 0})
	NewSGD([]*engine.Tensor{p}, 0, 0.5, false).Step([]*engine.Tensor{p}, 0.1)
	// p = p - lr·wd·p = p·(1 - 0.05)
	if !near(float64(p.Data[0]), 1.9) || !near(float64(p.Data[1]), -1.9) {
		t.Errorf("weight decay gave %v, want [1.9 -1.9]", p.Data)
	}
}

func TestAdamWMatchesThePyTorchFormula(t *testing.T) {
	// torch.optim.AdamW, lr = 0.01, β1 = 0.9, β2 = 0.999, eps = 1e-8, wd = 0.1,
	// p0 = 1, gradients 0.5 then -0.25:
	//   p = p·(1 - lr·wd);  m = β1·m + (1-β1)·g;  v = β2·v + (1-β2)·g²
	//   p = p - lr/(1-β1^t) · m / (√v/√(1-β2^t) + eps)
	// step 1: p = 0.999; m = 0.05; v = 0.00025; m̂ = 0.5, v̂ = 0.25 → p = 0.999 - 0.01·0.5/0.5 = 0.989
	// step 2: p = 0.989·0.999 = 0.988011; m = 0.045 - 0.025 = 0.02; v = 0.00024975 + 0.0000625 = 0.00031225
	//         m̂ = 0.02/0.19 = 0.105263158; v̂ = 0.00031225/0.001999 = 0.156203102; √v̂ = 0.395225381
	//         p = 0.988011 - 0.01·0.105263158/0.395225381 = 0.988011 - 0.002663371 = 0.985347629
	p := param([]float32{1}, []float32{0.5})
	opt := NewAdamW([]*engine.Tensor{p}, 0.9, 0.999, 1e-8, 0.1)
	opt.Step([]*engine.Tensor{p}, 0.01)
	if !near(float64(p.Data[0]), 0.989) {
		t.Errorf("after step 1: p = %.8f, want 0.989", p.Data[0])
	}
	p.Grad[0] = -0.25
	opt.Step([]*engine.Tensor{p}, 0.01)
	if !near(float64(p.Data[0]), 0.985347629) {
		t.Errorf("after step 2: p = %.9f, want 0.985347629", p.Data[0])
	}
	if opt.Steps() != 2 {
		t.Errorf("Steps() = %d, want 2", opt.Steps())
	}
}

func TestAdamWWeightDecayIsDecoupled(t *testing.T) {
	// With a zero gradient the moments stay 0 and only the decay p·(1-lr·wd) acts.
	p := param([]float32{3}, []float32{0})
	NewAdamW([]*engine.Tensor{p}, 0.9, 0.999, 1e-8, 0.5).Step([]*engine.Tensor{p}, 0.1)
	if !near(float64(p.Data[0]), 3*0.95) {
		t.Errorf("p = %v, want 2.85", p.Data[0])
	}
}

// stepTwice builds an optimizer with make, steps it twice with changing
// gradients, and returns it and the parameter.
func stepTwice(make func([]*engine.Tensor) Optimizer) (Optimizer, *engine.Tensor) {
	p := param([]float32{1, -2, 3}, []float32{0.3, -0.1, 0.7})
	opt := make([]*engine.Tensor{p})
	opt.Step([]*engine.Tensor{p}, 0.05)
	p.Grad[1] = 0.4
	opt.Step([]*engine.Tensor{p}, 0.05)
	return opt, p
}

func TestStateRoundTripResumesBitwise(t *testing.T) {
	cases := []struct {
		name  string
		make  func([]*engine.Tensor) Optimizer
		names []string
	}{
		{"sgd with nesterov momentum", func(ps []*engine.Tensor) Optimizer { return NewSGD(ps, 0.9, 1e-4, true) },
			[]string{"momentum_buffer.0"}},
		{"adamw", func(ps []*engine.Tensor) Optimizer { return NewAdamW(ps, 0.9, 0.99, 1e-8, 0.01) },
			[]string{"step", "exp_avg.0", "exp_avg_sq.0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opt, p := stepTwice(c.make)
			st := opt.State()
			for i, n := range c.names {
				if i >= len(st) || st[i].Name != n {
					t.Fatalf("state names %v, want %v", st, c.names)
				}
			}
			// continue the original, and a fresh optimizer loaded from the state
			q := param(p.Data, p.Grad)
			fresh := c.make([]*engine.Tensor{q})
			if err := fresh.LoadState(st); err != nil {
				t.Fatal(err)
			}
			opt.Step([]*engine.Tensor{p}, 0.05)
			fresh.Step([]*engine.Tensor{q}, 0.05)
			for i := range p.Data {
				if math.Float32bits(p.Data[i]) != math.Float32bits(q.Data[i]) {
					t.Errorf("element %d: resumed %v, uninterrupted %v", i, q.Data[i], p.Data[i])
				}
			}
		})
	}
}

func TestLoadStateNamesTheBadTensorAndChangesNothing(t *testing.T) {
	good := func() []NamedSlice {
		opt, _ := stepTwice(func(ps []*engine.Tensor) Optimizer { return NewAdamW(ps, 0.9, 0.99, 1e-8, 0) })
		return opt.State()
	}
	cases := []struct {
		name   string
		edit   func([]NamedSlice) []NamedSlice
		errHas string
	}{
		{"a missing moment", func(s []NamedSlice) []NamedSlice { return s[:2] }, `"exp_avg_sq.0" is missing`},
		{"a moment of the wrong size", func(s []NamedSlice) []NamedSlice { s[1].Data = s[1].Data[:2]; return s }, `"exp_avg.0" has 2 values`},
		{"an unexpected extra tensor", func(s []NamedSlice) []NamedSlice { return append(s, NamedSlice{"exp_avg.7", nil}) }, `unexpected tensor "exp_avg.7"`},
		{"a duplicated tensor", func(s []NamedSlice) []NamedSlice { return append(s, s[1]) }, `"exp_avg.0" appears twice`},
		{"a fractional step count", func(s []NamedSlice) []NamedSlice { s[0].Data = []float32{2.5}; return s }, `"step" holds 2.5`},
		{"a negative step count", func(s []NamedSlice) []NamedSlice { s[0].Data = []float32{-1}; return s }, `"step" holds -1`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opt, _ := stepTwice(func(ps []*engine.Tensor) Optimizer { return NewAdamW(ps, 0.9, 0.99, 1e-8, 0) })
			before := opt.State()
			err := opt.LoadState(c.edit(good()))
			if err == nil || !strings.Contains(err.Error(), c.errHas) {
				t.Fatalf("error %v, want one containing %s", err, c.errHas)
			}
			after := opt.State()
			for i := range before {
				for j := range before[i].Data {
					if before[i].Data[j] != after[i].Data[j] {
						t.Fatalf("a failed LoadState changed %s", before[i].Name)
					}
				}
			}
		})
	}
}

func TestSGDWithoutMomentumHasNoState(t *testing.T) {
	opt := NewSGD([]*engine.Tensor{engine.NewParam(3)}, 0, 0, false)
	if st := opt.State(); len(st) != 0 {
		t.Errorf("state %v, want none", st)
	}
	if err := opt.LoadState([]NamedSlice{{"momentum_buffer.0", make([]float32, 3)}}); err == nil {
		t.Error("loading momentum into a momentum-free SGD succeeded")
	}
}

func TestWarmupCosineEndpointsAndShape(t *testing.T) {
	const base, minLR, warmup, total = 0.1, 0.001, 10, 110
	cases := []struct {
		name string
		step int
		want float64
	}{
		{"step 0 is base/warmup", 0, base / warmup},
		{"the last warmup step is base", warmup - 1, base},
		{"the first decay step is base", warmup, base},
		{"halfway through the decay is the midpoint", warmup + 50, (base + minLR) / 2},
		{"the total step is min", total, minLR},
		{"past the total stays at min", total + 100, minLR},
		{"a negative step counts as 0", -5, base / warmup},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := WarmupCosine(c.step, warmup, total, base, minLR); !near(float64(got), c.want) {
				t.Errorf("WarmupCosine(%d) = %v, want %v", c.step, got, c.want)
			}
		})
	}
	for s := 1; s < warmup; s++ {
		if WarmupCosine(s, warmup, total, base, minLR) <= WarmupCosine(s-1, warmup, total, base, minLR) {
			t.Errorf("warmup not increasing at step %d", s)
		}
	}
	for s := warmup + 1; s <= total; s++ {
		if WarmupCosine(s, warmup, total, base, minLR) > WarmupCosine(s-1, warmup, total, base, minLR) {
			t.Errorf("decay increases at step %d", s)
		}
	}
	if got := WarmupCosine(0, 0, 10, base, minLR); got != base {
		t.Errorf("without warmup step 0 = %v, want base", got)
	}
}

func ExampleWarmupCosine() {
	for _, step := range []int{0, 4, 5, 10, 15, 20} {
		fmt.Printf("step %2d lr %.4f\n", step, WarmupCosine(step, 5, 15, 0.1, 0.01))
	}
	// Output:
	// step  0 lr 0.0200
	// step  4 lr 0.1000
	// step  5 lr 0.1000
	// step 10 lr 0.0550
	// step 15 lr 0.0100
	// step 20 lr 0.0100
}
