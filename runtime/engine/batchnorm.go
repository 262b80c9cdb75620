package engine

import (
	"fmt"
	"math"
)

// BatchNorm normalises x per channel (torch.nn.functional.batch_norm).
//
// Shapes: x [B,C] or [B,C,H,W]; gamma, beta, runMean and runVar [C] (gamma
// and beta may be nil for an affine-free layer; runMean and runVar may be nil
// in training when no running statistics are kept). The result has x's
// shape: y = gamma·(x-μ)/√(σ²+eps) + beta.
//
// Training: μ and the biased σ² are the channel's batch statistics over
// B·H·W values (two passes, summed in float64 in increasing (b,h,w) order,
// then rounded to float32), and the running buffers are updated in place
// as run = (1-momentum)·run + momentum·batch with the UNBIASED variance
// σ²·n/(n-1) (PyTorch semantics; with n = 1 the biased value 0 is used).
// Eval: μ and σ² are read from runMean and runVar, which must be non-nil.
//
// Backward (training) uses the standard formula
// dx = gamma/√(σ²+eps) · (dy - mean(dy) - x̂·mean(dy·x̂)); dgamma += Σ dy·x̂,
// dbeta += Σ dy, sums in float64 in increasing (b,h,w) order. Channels run
// in parallel. It panics on mismatched shapes or missing eval buffers.
func (tp *Tape) BatchNorm(x, gamma, beta, runMean, runVar *Tensor, momentum, eps float32, training bool) *Tensor {
	const op = "BatchNorm"
	if x == nil || (len(x.Shape) != 2 && len(x.Shape) != 4) {
		panic(fmt.Sprintf("engine: BatchNorm: x must be [B,C] or [B,C,H,W], got %v", shapeOf(x)))
	}
	batch, ch := x.Shape[0], x.Shape[1]
	sp := 1
	if len(x.Shape) == 4 {
		sp = x.Shape[2] * x.Shape[3]
	}
	for _, p := range []struct {
		name string
		t    *Tensor
	}{{"gamma", gamma}, {"beta", beta}, {"runMean", runMean}, {"runVar", runVar}} {
		if p.t != nil {
			mustShape(op, p.name, p.t, ch)
		}
	}
	if !training && (runMean == nil || runVar == nil) {
		panic("engine: BatchNorm: eval mode needs runMean and runVar")
	}
	rec := tp.recording(x, gamma, beta)
	y := tp.output(rec, x.Shape...)
	cnt := batch * sp
	var xhat []float32
	if rec {
		xhat = tp.alloc(len(x.Data))
	} else {
		xhat = y.Data // normalise in place, then apply the affine map
	}
	invstd := make([]float32, ch)
	parallelFor(tp.threads, ch, len(x.Data)*4, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			var mean float32
			if training {
				var v64 float64
				mean, v64 = channelStats(x.Data, batch, ch, sp, c)
				invstd[c] = float32(1 / math.Sqrt(v64/float64(cnt)+float64(eps)))
				if runMean != nil {
					runMean.Data[c] = float32(float32((1-momentum)*runMean.Data[c]) + float32(momentum*mean))
				}
				if runVar != nil {
					unbiased := float32(v64 / float64(max(cnt-1, 1)))
					if cnt == 1 {
						unbiased = 0
					}
					runVar.Data[c] = float32(float32((1-momentum)*runVar.Data[c]) + float32(momentum*unbiased))
				}
			} else {
				mean = runMean.Data[c]
				invstd[c] = float32(1 / math.Sqrt(float64(runVar.Data[c])+float64(eps)))
			}
			g, b := affineAt(gamma, beta, c)
			for n := range batch {
				base := (n*ch + c) * sp
				for i := base; i < base+sp; i++ {
					xh := (x.Data[i] - mean) * invstd[c]
					xhat[i] = xh
					y.Data[i] = float32(g*xh) + b
				}
			}
		}
	})
	if !rec {
		return y
	}
	tp.record(func() {
		parallelFor(tp.threads, ch, len(x.Data)*4, func(lo, hi int) {
			for c := lo; c < hi; c++ {
				var sdy, sdyx float64
				for n := range batch {
					base := (n*ch + c) * sp
					for i := base; i < base+sp; i++ {
						dy := float64(y.Grad[i])
						sdy += dy
						sdyx += float64(dy * float64(xhat[i]))
					}
				}
				g, _ := affineAt(gamma, beta, c)
				if gamma.needsGrad() {
					gamma.Grad[c] += float32(sdyx)
				}
				if beta.needsGrad() {
					beta.Grad[c] += float32(sdy)
				}
				if !x.needsGrad() {
					continue
				}
				k := g * invstd[c]
				var a, bc float32 // mean(dy), mean(dy·x̂); zero in eval mode
				if training {
					a, bc = float32(sdy/float64(cnt)), float32(sdyx/float64(cnt))
				}
				for n := range batch {
					base := (n*ch + c) * sp
					for i := base; i < base+sp; i++ {
						x.Grad[i] += float32(k * (y.Grad[i] - a - float32(xhat[i]*bc)))
					}
				}
			}
		})
	})
	return y
}

// channelStats returns channel c's mean (rounded to float32) and
// Σ(x-mean)² in float64, summing in increasing (b, spatial)
// order over x laid out as [batch, ch, sp].
func channelStats(x []float32, batch, ch, sp, c int) (float32, float64) {
	var s float64
	for n := range batch {
		base := (n*ch + c) * sp
		for _, v := range x[base : base+sp] {
			s += float64(v)
		}
	}
	mean := float32(s / float64(batch*sp))
	var ss float64
	for n := range batch {
		base := (n*ch + c) * sp
		for _, v := range x[base : base+sp] {
			d := float64(v - mean)
			ss += float64(d * d)
		}
	}
	return mean, ss
}

// affineAt returns gamma[c] and beta[c], defaulting to 1 and 0 when nil.
func affineAt(gamma, beta *Tensor, c int) (float32, float32) {
	g, b := float32(1), float32(0)
	if gamma != nil {
		g = gamma.Data[c]
	}
	if beta != nil {
		b = beta.Data[c]
	}
	return g, b
}

// shapeOf returns t.Shape, or nil for a nil tensor.
func shapeOf(t *Tensor) []int {
	if t == nil {
		return nil
	}
	return t.Shape
}
