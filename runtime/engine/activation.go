package engine

import "github.com/easyscale/easyscale-slurm/runtime/detmath"

// ReLU returns max(x, 0) elementwise, same shape as x. Backward passes the
// gradient where x > 0 (the derivative at 0 is taken as 0, as in PyTorch).
func (tp *Tape) ReLU(x *Tensor) *Tensor {
	rec := tp.recording(x)
	y := tp.output(rec, x.Shape...)
	n := len(x.Data)
	parallelFor(tp.threads, n, n, func(lo, hi int) {
		for i, v := range x.Data[lo:hi] {
			if v > 0 {
				y.Data[lo+i] = v
			}
		}
	})
	if !rec {
		return y
	}
	tp.record(func() {
		parallelFor(tp.threads, n, n, func(lo, hi int) {
			for i, v := range x.Data[lo:hi] {
				if v > 0 {
					x.Grad[lo+i] += y.Grad[lo+i]
				}
			}
		})
	})
	return y
}

// GELU constants of the tanh approximation (Hendrycks & Gimpel 2016, as in
// torch.nn.functional.gelu with approximate='tanh').
const (
	geluBeta  float32 = 0.7978845608028654 // sqrt(2/π)
	geluKappa float32 = 0.044715
	gelu3K    float32 = 3 * 0.044715
)

// geluWork is the approximate cost of one GELU element in multiply-adds.
const geluWork = 20

// GELU returns 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) elementwise (the
// tanh approximation, torch approximate='tanh'), same shape as x. tanh is
// detmath.Tanh. Backward uses the analytic derivative
// 0.5·(1+t) + 0.5·x·(1-t²)·√(2/π)·(1 + 3·0.044715·x²) with t the tanh above.
func (tp *Tape) GELU(x *Tensor) *Tensor {
	rec := tp.recording(x)
	y := tp.output(rec, x.Shape...)
	n := len(x.Data)
	parallelFor(tp.threads, n, n*geluWork, func(lo, hi int) {
		for i, v := range x.Data[lo:hi] {
			t := geluTanh(v)
			y.Data[lo+i] = float32(0.5*v) * (1 + t)
		}
	})
	if !rec {
		return y
	}
	tp.record(func() {
		parallelFor(tp.threads, n, n*geluWork, func(lo, hi int) {
			for i, v := range x.Data[lo:hi] {
				t := geluTanh(v)
				rd := float32(float32(float32(0.5*v)*(1-float32(t*t))*geluBeta) * (1 + float32(gelu3K*float32(v*v))))
				d := float32(0.5*(1+t)) + rd
				x.Grad[lo+i] += float32(y.Grad[lo+i] * d)
			}
		})
	})
	return y
}

// geluTanh returns tanh(√(2/π)·(x + 0.044715·x³)).
func geluTanh(x float32) float32 {
	x3 := float32(x*x) * x
	return detmath.Tanh(geluBeta * (x + float32(geluKappa*x3)))
}
