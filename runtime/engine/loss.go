package engine

import (
	"fmt"
	"math"

	"github.com/easyscale/easyscale-slurm/runtime/detmath"
)

// SoftmaxCrossEntropy returns the mean cross-entropy loss of logits against
// class targets (torch.nn.functional.cross_entropy, reduction 'mean').
//
// Shapes: logits [B,K], len(targets) == B, each target in [0,K); the result
// is a [1] tensor. Row i contributes log Σ_k exp(l_k - m) + m - l_{t_i} with m
// the row maximum (so large logits do not overflow); exp and log are
// detmath's. The mean sums rows in increasing order in float64. Backward:
// dlogits[i,k] += dy/B · (softmax_k - [k == t_i]). Rows run in parallel. It
// panics on an empty batch, a length mismatch or a target out of range.
func (tp *Tape) SoftmaxCrossEntropy(logits *Tensor, targets []int32) *Tensor {
	mustRank("SoftmaxCrossEntropy", "logits", logits, 2)
	b, k := logits.Shape[0], logits.Shape[1]
	if b == 0 || k == 0 || len(targets) != b {
		panic(fmt.Sprintf("engine: SoftmaxCrossEntropy: logits %v with %d targets", logits.Shape, len(targets)))
	}
	for i, t := range targets {
		if t < 0 || int(t) >= k {
			panic(fmt.Sprintf("engine: SoftmaxCrossEntropy: target %d at row %d outside [0,%d)", t, i, k))
		}
	}
	rec := tp.recording(logits)
	var probs []float32 // softmax of every row, kept for backward
	if rec {
		probs, _ = tp.allocRaw(len(logits.Data)) // every row is written below
	} else {
		probs = make([]float32, len(logits.Data))
	}
	rowLoss := make([]float32, b)
	parallelFor(tp.threads, b, b*k*8, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			l, p := logits.Data[i*k:(i+1)*k], probs[i*k:(i+1)*k]
			m := float32(math.Inf(-1))
			for _, v := range l {
				m = max(m, v)
			}
			var sum float32
			for j, v := range l {
				p[j] = detmath.Exp(v - m)
				sum += p[j]
			}
			for j := range p {
				p[j] /= sum
			}
			rowLoss[i] = detmath.Log(sum) + m - l[targets[i]]
		}
	})
	var total float64
	for _, v := range rowLoss {
		total += float64(v)
	}
	y := tp.output(rec, 1)
	y.Data[0] = float32(total / float64(b))
	if !rec {
		return y
	}
	targets = append([]int32(nil), targets...) // the caller may reuse its slice
	tp.record(func() {
		g := y.Grad[0] / float32(b)
		parallelFor(tp.threads, b, b*k, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				p, dl := probs[i*k:(i+1)*k], logits.Grad[i*k:(i+1)*k]
				for j, v := range p {
					if j == int(targets[i]) {
						v--
					}
					dl[j] += float32(g * v)
				}
			}
		})
	})
	return y
}

// Argmax returns the index of the first largest element of row, or -1 when
// row is empty. NaN values are never chosen unless every value is NaN, in
// which case 0 is returned.
func Argmax(row []float32) int {
	if len(row) == 0 {
		return -1
	}
	best := 0
	for i, v := range row {
		if v > row[best] || (row[best] != row[best] && v == v) {
			best = i
		}
	}
	return best
}
