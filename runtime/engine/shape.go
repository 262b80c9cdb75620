package engine

import (
	"fmt"
	"slices"
)

// Add returns a + b elementwise (a residual connection). a and b must have
// the same shape; the result has it too. Backward adds the gradient to both.
func (tp *Tape) Add(a, b *Tensor) *Tensor {
	if a == nil || b == nil || !slices.Equal(a.Shape, b.Shape) {
		panic(fmt.Sprintf("engine: Add: shapes %v and %v differ", shapeOf(a), shapeOf(b)))
	}
	rec := tp.recording(a, b)
	y := tp.output(rec, a.Shape...)
	for i, v := range a.Data {
		y.Data[i] = v + b.Data[i]
	}
	if rec {
		tp.record(func() {
			for _, t := range []*Tensor{a, b} {
				if t.needsGrad() {
					for i, g := range y.Grad {
						t.Grad[i] += g
					}
				}
			}
		})
	}
	return y
}

// AddPositional adds a learned positional embedding to a batch of
// sequences: x [batch·seqLen, D], pos [maxLen, D] with seqLen <= maxLen;
// row b·seqLen+t of the result is x's row plus pos[t]. Backward:
// dx += dy; dpos[t] += Σ_b dy[b·seqLen+t] summed in increasing b. It panics
// on mismatched shapes.
func (tp *Tape) AddPositional(x, pos *Tensor, batch, seqLen int) *Tensor {
	mustRank("AddPositional", "x", x, 2)
	mustRank("AddPositional", "pos", pos, 2)
	d := x.Shape[1]
	if x.Shape[0] != batch*seqLen || pos.Shape[1] != d || seqLen > pos.Shape[0] || batch < 0 || seqLen < 0 {
		panic(fmt.Sprintf("engine: AddPositional: x %v, pos %v incompatible with batch %d, seqLen %d", x.Shape, pos.Shape, batch, seqLen))
	}
	rec := tp.recording(x, pos)
	y := tp.output(rec, x.Shape...)
	for r := range batch * seqLen {
		p := pos.Data[(r%seqLen)*d:]
		for j, v := range x.Data[r*d : (r+1)*d] {
			y.Data[r*d+j] = v + p[j]
		}
	}
	if !rec {
		return y
	}
	tp.record(func() {
		if x.needsGrad() {
			for i, g := range y.Grad {
				x.Grad[i] += g
			}
		}
		if pos.needsGrad() {
			for b := range batch {
				for t := range seqLen {
					row := y.Grad[(b*seqLen+t)*d : (b*seqLen+t+1)*d]
					dp := pos.Grad[t*d : (t+1)*d]
					for j, g := range row {
						dp[j] += g
					}
				}
			}
		}
	})
	return y
}

// Reshape returns a view of x with a new shape holding the same number of
// elements; one dimension may be -1 and is then inferred. The view shares
// Data with x and, when x needs a gradient, shares Grad too, so gradients
// flow through without a copy. It panics when the sizes disagree.
func (tp *Tape) Reshape(x *Tensor, shape ...int) *Tensor {
	shape = cloneShape(shape)
	infer, n := -1, 1
	for i, d := range shape {
		switch {
		case d == -1 && infer < 0:
			infer = i
		case d < 0:
			panic(fmt.Sprintf("engine: Reshape: invalid shape %v", shape))
		default:
			n *= d
		}
	}
	if infer >= 0 && n > 0 && len(x.Data)%n == 0 {
		shape[infer] = len(x.Data) / n
		n *= shape[infer]
	}
	if n != len(x.Data) || (infer >= 0 && shape[infer] < 0) {
		panic(fmt.Sprintf("engine: Reshape: cannot view %v as %v", x.Shape, shape))
	}
	y := &Tensor{Shape: shape, Data: x.Data}
	if tp.recording(x) {
		y.Grad = x.Grad
		tp.outs = append(tp.outs, y) // drop the shared Grad on Reset
	}
	return y
}
