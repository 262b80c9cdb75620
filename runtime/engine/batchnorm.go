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
		xhat, _ = tp.allocRaw(len(x.Data)) // every element is written below
	} else {
		xhat = y.Data // normalise in place, then apply the affine map
	}
	invstd := make([]float32, ch)
	parallelFor(tp.threads, ch, len(x.Data)*4, func(lo, hi int) {
		var means, sq []float64
		if training {
			means, sq = channelStats(x.Data, batch, ch, sp, lo, hi)
		}
		for c := lo; c < hi; c++ {
			var mean float32
			if training {
				v64 := sq[c-lo]
				mean = float32(means[c-lo])
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
			is := invstd[c]
			for n := range batch {
				base := (n*ch + c) * sp
				xs, xh, ys := x.Data[base:base+sp], xhat[base:base+sp], y.Data[base:base+sp]
				for i, v := range xs {
					h := (v - mean) * is
					xh[i] = h
					ys[i] = float32(g*h) + b
				}
			}
		}
	})
	if !rec {
		return y
	}
	tp.record(func() {
		parallelFor(tp.threads, ch, len(x.Data)*4, func(lo, hi int) {
			sdys, sdyxs := channelGradSums(y.Grad, xhat, batch, ch, sp, lo, hi)
			for c := lo; c < hi; c++ {
				sdy, sdyx := sdys[c-lo], sdyxs[c-lo]
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
					dx, dy, xh := x.Grad[base:base+sp], y.Grad[base:base+sp], xhat[base:base+sp]
					for i := range dx {
						dx[i] += float32(k * (dy[i] - a - float32(xh[i]*bc)))
					}
				}
			}
		})
	})
	return y
}

// bnGroup is how many channels the BatchNorm sums interleave: each
// channel's sum is one chain of dependent float64 additions, and running
// four channels' chains side by side keeps the adder busy. Every channel's
// sum still runs in its own fixed order.
const bnGroup = 4

// channelStats returns, for channels [lo, hi) of x laid out as [batch, ch,
// sp], each channel's mean (the float64 sum divided by the count; the
// caller rounds it to float32) and Σ(x-mean)² in float64, where
// x-mean is computed in float32 with the rounded mean. Both sums run in
// increasing (b, spatial) order.
func channelStats(x []float32, batch, ch, sp, lo, hi int) (means, sq []float64) {
	means, sq = make([]float64, hi-lo), make([]float64, hi-lo)
	cnt := float64(batch * sp)
	c := lo
	for ; c+bnGroup <= hi; c += bnGroup {
		var s0, s1, s2, s3 float64
		for n := range batch {
			x0, x1, x2, x3 := channelRows(x, n, ch, sp, c)
			for i := range x0 {
				s0 += float64(x0[i])
				s1 += float64(x1[i])
				s2 += float64(x2[i])
				s3 += float64(x3[i])
			}
		}
		m0, m1, m2, m3 := float32(s0/cnt), float32(s1/cnt), float32(s2/cnt), float32(s3/cnt)
		var q0, q1, q2, q3 float64
		for n := range batch {
			x0, x1, x2, x3 := channelRows(x, n, ch, sp, c)
			for i := range x0 {
				d0, d1, d2, d3 := float64(x0[i]-m0), float64(x1[i]-m1), float64(x2[i]-m2), float64(x3[i]-m3)
				q0 += float64(d0 * d0)
				q1 += float64(d1 * d1)
				q2 += float64(d2 * d2)
				q3 += float64(d3 * d3)
			}
		}
		k := c - lo
		means[k], means[k+1], means[k+2], means[k+3] = s0/cnt, s1/cnt, s2/cnt, s3/cnt
		sq[k], sq[k+1], sq[k+2], sq[k+3] = q0, q1, q2, q3
	}
	for ; c < hi; c++ {
		var s float64
		for n := range batch {
			base := (n*ch + c) * sp
			for _, v := range x[base : base+sp] {
				s += float64(v)
			}
		}
		mean := float32(s / cnt)
		var ss float64
		for n := range batch {
			base := (n*ch + c) * sp
			for _, v := range x[base : base+sp] {
				d := float64(v - mean)
				ss += float64(d * d)
			}
		}
		means[c-lo], sq[c-lo] = s/cnt, ss
	}
	return means, sq
}

// channelGradSums returns Σ dy and Σ dy·x̂ (each product rounded to
// float64) of channels [lo, hi), in float64 and increasing (b, spatial)
// order, for dy and xhat laid out as [batch, ch, sp].
func channelGradSums(dy, xhat []float32, batch, ch, sp, lo, hi int) (sdy, sdyx []float64) {
	sdy, sdyx = make([]float64, hi-lo), make([]float64, hi-lo)
	c := lo
	for ; c+bnGroup <= hi; c += bnGroup {
		var a0, a1, a2, a3, b0, b1, b2, b3 float64
		for n := range batch {
			g0, g1, g2, g3 := channelRows(dy, n, ch, sp, c)
			h0, h1, h2, h3 := channelRows(xhat, n, ch, sp, c)
			for i := range g0 {
				d0, d1, d2, d3 := float64(g0[i]), float64(g1[i]), float64(g2[i]), float64(g3[i])
				a0 += d0
				a1 += d1
				a2 += d2
				a3 += d3
				b0 += float64(d0 * float64(h0[i]))
				b1 += float64(d1 * float64(h1[i]))
				b2 += float64(d2 * float64(h2[i]))
				b3 += float64(d3 * float64(h3[i]))
			}
		}
		k := c - lo
		sdy[k], sdy[k+1], sdy[k+2], sdy[k+3] = a0, a1, a2, a3
		sdyx[k], sdyx[k+1], sdyx[k+2], sdyx[k+3] = b0, b1, b2, b3
	}
	for ; c < hi; c++ {
		var a, b float64
		for n := range batch {
			base := (n*ch + c) * sp
			h := xhat[base : base+sp]
			for i, g := range dy[base : base+sp] {
				d := float64(g)
				a += d
				b += float64(d * float64(h[i]))
			}
		}
		sdy[c-lo], sdyx[c-lo] = a, b
	}
	return sdy, sdyx
}

// channelRows returns sample n's rows of channels c..c+3 of x [batch, ch, sp].
func channelRows(x []float32, n, ch, sp, c int) (r0, r1, r2, r3 []float32) {
	base := (n*ch + c) * sp
	r0 = x[base : base+sp]
	r1 = x[base+sp : base+2*sp][:len(r0)]
	r2 = x[base+2*sp : base+3*sp][:len(r0)]
	r3 = x[base+3*sp : base+4*sp][:len(r0)]
	return r0, r1, r2, r3
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
