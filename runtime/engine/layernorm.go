package engine

import (
	"fmt"
	"math"
)

// LayerNorm normalises x over its last dimension
// (torch.nn.functional.layer_norm with normalized_shape = [D]).
//
// Shapes: x [..., D]; gamma and beta [D] or nil (no affine map); the result
// has x's shape: y = gamma·(x-μ)/√(σ²+eps) + beta with the row's mean μ and
// biased variance σ² (summed in float64 in increasing order, then rounded).
// Backward: dx = (1/√(σ²+eps))·(g - mean(g) - x̂·mean(g·x̂)) with g = dy·gamma,
// rows in parallel; dgamma += Σ_rows dy·x̂ and dbeta += Σ_rows dy summed in
// increasing row order (columns in parallel). It panics on mismatched shapes.
func (tp *Tape) LayerNorm(x, gamma, beta *Tensor, eps float32) *Tensor {
	if x == nil || len(x.Shape) == 0 || x.Shape[len(x.Shape)-1] == 0 {
		panic(fmt.Sprintf("engine: LayerNorm: x needs a non-empty last dimension, got %v", shapeOf(x)))
	}
	d := x.Shape[len(x.Shape)-1]
	rows := len(x.Data) / d
	if gamma != nil {
		mustShape("LayerNorm", "gamma", gamma, d)
	}
	if beta != nil {
		mustShape("LayerNorm", "beta", beta, d)
	}
	rec := tp.recording(x, gamma, beta)
	y := tp.output(rec, x.Shape...)
	xhat, invstd := y.Data, make([]float32, rows)
	if rec {
		xhat, _ = tp.allocRaw(len(x.Data)) // every element is written below
	}
	parallelFor(tp.threads, rows, len(x.Data)*4, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, hr, yr := x.Data[r*d:(r+1)*d], xhat[r*d:(r+1)*d], y.Data[r*d:(r+1)*d]
			var s float64
			for _, v := range xr {
				s += float64(v)
			}
			mean := float32(s / float64(d))
			var ss float64
			for _, v := range xr {
				dv := float64(v - mean)
				ss += float64(dv * dv)
			}
			inv := float32(1 / math.Sqrt(ss/float64(d)+float64(eps)))
			invstd[r] = inv
			for j, v := range xr {
				hr[j] = (v - mean) * inv
			}
			for j := range yr {
				g, b := affineAt(gamma, beta, j)
				yr[j] = float32(g*hr[j]) + b
			}
		}
	})
	if !rec {
		return y
	}
	tp.record(func() {
		if x.needsGrad() {
			parallelFor(tp.threads, rows, len(x.Data)*4, func(lo, hi int) {
				for r := lo; r < hi; r++ {
					layerNormRowGrad(x.Grad[r*d:(r+1)*d], y.Grad[r*d:(r+1)*d], xhat[r*d:(r+1)*d], gamma, invstd[r])
				}
			})
		}
		if gamma.needsGrad() || beta.needsGrad() {
			parallelFor(tp.threads, d, len(x.Data)*2, func(lo, hi int) {
				sg, sb := make([]float64, hi-lo), make([]float64, hi-lo)
				for r := range rows {
					for j := lo; j < hi; j++ {
						dy := float64(y.Grad[r*d+j])
						sg[j-lo] += float64(dy * float64(xhat[r*d+j]))
						sb[j-lo] += dy
					}
				}
				for j := lo; j < hi; j++ {
					if gamma.needsGrad() {
						gamma.Grad[j] += float32(sg[j-lo])
					}
					if beta.needsGrad() {
						beta.Grad[j] += float32(sb[j-lo])
					}
				}
			})
		}
	})
	return y
}

// layerNormRowGrad adds one row's input gradient to dx given the output
// gradient dy, the normalised row xhat, gamma (nil means 1) and 1/√(σ²+eps).
func layerNormRowGrad(dx, dy, xhat []float32, gamma *Tensor, inv float32) {
	d := len(dy)
	var sg, sgx float64
	for j, v := range dy {
		g, _ := affineAt(gamma, nil, j)
		gj := float64(v * g)
		sg += gj
		sgx += float64(gj * float64(xhat[j]))
	}
	a, bc := float32(sg/float64(d)), float32(sgx/float64(d))
	for j, v := range dy {
		g, _ := affineAt(gamma, nil, j)
		dx[j] += float32(inv * (float32(v*g) - a - float32(xhat[j]*bc)))
	}
}
