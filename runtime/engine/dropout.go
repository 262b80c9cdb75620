package engine

import "fmt"

// Uniform is a source of uniform float32 values in [0,1). The project's
// Philox stream (runtime/rng), keyed by logical worker and step, implements
// it; *math/rand/v2.Rand does too.
type Uniform interface{ Float32() float32 }

// Dropout zeroes elements of x at random in training mode and scales the
// kept ones by 1/(1-p) (torch.nn.functional.dropout, training=True).
//
// It draws exactly one src.Float32() per element of x in row-major order,
// whatever p is, so the stream position after the op depends only on the
// shape; element i is kept when its draw u satisfies u >= p. The result has
// x's shape. p = 1 zeroes everything. It panics when p is outside [0,1].
func (tp *Tape) Dropout(x *Tensor, p float32, src Uniform) *Tensor {
	if !(p >= 0 && p <= 1) {
		panic(fmt.Sprintf("engine: Dropout: probability %v outside [0,1]", p))
	}
	var scale float32
	if p < 1 {
		scale = 1 / (1 - p)
	}
	rec := tp.recording(x)
	var mask []float32 // scale where kept, 0 where dropped
	if rec {
		mask = tp.alloc(len(x.Data))
	} else {
		mask = make([]float32, len(x.Data))
	}
	for i := range mask {
		if src.Float32() >= p {
			mask[i] = scale
		}
	}
	y := tp.output(rec, x.Shape...)
	for i, v := range x.Data {
		y.Data[i] = v * mask[i]
	}
	if rec {
		tp.record(func() {
			for i, m := range mask {
				x.Grad[i] += float32(y.Grad[i] * m)
			}
		})
	}
	return y
}
