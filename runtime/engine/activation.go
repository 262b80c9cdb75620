package engine

import (
	"math"

	"github.com/easyscale/easyscale-slurm/runtime/detmath"
)

// ReLU returns max(x, 0) elementwise, same shape as x. Backward passes the
// gradient where x > 0 (the derivative at 0 is taken as 0, as in PyTorch).
// Both passes are branch-free (a mask from the bits, not a comparison per
// element) with exactly the bits of `if x > 0 { y = x } else { y = +0 }`:
// negative values, ±0 and NaNs give +0.
func (tp *Tape) ReLU(x *Tensor) *Tensor {
	rec := tp.recording(x)
	y := tp.output(rec, x.Shape...)
	n := len(x.Data)
	parallelFor(tp.threads, n, n, func(lo, hi int) { reluForward(y.Data[lo:hi], x.Data[lo:hi]) })
	if !rec {
		return y
	}
	tp.record(func() {
		parallelFor(tp.threads, n, n, func(lo, hi int) { reluBackward(x.Grad[lo:hi], y.Grad[lo:hi], x.Data[lo:hi]) })
	})
	return y
}

// reluKeep returns all ones when v > 0, else 0. v > 0 holds exactly when
// its bits b lie in [1, 0x7f800000] (the smallest subnormal up to +Inf),
// i.e. when b-1, as uint32, is below 0x7f800000.
func reluKeep(v float32) uint32 {
	d := int64(math.Float32bits(v)-1) - 0x7f800000
	return uint32(d >> 63)
}

// reluForward sets y[i] = x[i] where x[i] > 0, else +0.
func reluForward(y, x []float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] = math.Float32frombits(math.Float32bits(v) & reluKeep(v))
	}
}

// reluBackward adds dy[i] to dx[i] where x[i] > 0 and leaves dx[i] (its
// bits, −0 included) alone elsewhere.
func reluBackward(dx, dy, x []float32) {
	dx, dy = dx[:len(x)], dy[:len(x)]
	for i, v := range x {
		m := reluKeep(v)
		old := math.Float32bits(dx[i])
		sum := math.Float32bits(dx[i] + dy[i])
		dx[i] = math.Float32frombits(sum&m | old&^m)
	}
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
