package trainer

import (
	"context"

	"github.com/easyscale/easyscale-slurm/runtime/engine"
)

// evalBatch is the number of test samples per forward pass in evaluation.
const evalBatch = 500

// evaluate runs the saved model (the coordinator's parameters with logical worker
// 0's buffers) over the whole test set in inference mode and returns the
// mean loss, the accuracy and the number of test samples seen. Every test sample is counted exactly once:
// the set is cut into consecutive batches, not sharded with padding.
// Accuracy is the fraction of rows whose arg-max logit is the target
// (classes for MNIST, next characters for charlm).
func (e *nativeEngine) Evaluate(context.Context) (loss, accuracy float64, samples int, err error) {
	net := e.master.Net
	buffers := e.ests[0].Buffers
	wl := e.wl
	n := wl.TestLen()
	tp := engine.NewTape(e.threads)
	tp.SetGradEnabled(false)
	var lossSum float64
	correct, rows := 0, 0
	idx := make([]int, 0, evalBatch)
	for lo := 0; lo < n; lo += evalBatch {
		idx = idx[:0]
		for i := lo; i < min(n, lo+evalBatch); i++ {
			idx = append(idx, i)
		}
		mb := wl.TestBatch(idx)
		tp.Reset()
		l, logits := net.Forward(tp, buffers, mb, nil, false)
		r := len(mb.Targets)
		lossSum += float64(l.Data[0]) * float64(r)
		correct += countCorrect(logits, mb.Targets)
		rows += r
		samples += len(idx)
	}
	if rows == 0 {
		return 0, 0, samples, nil
	}
	return lossSum / float64(rows), float64(correct) / float64(rows), samples, nil
}

func countCorrect(logits *engine.Tensor, targets []int32) int {
	k := logits.Shape[len(logits.Shape)-1]
	c := 0
	for r, t := range targets {
		if engine.Argmax(logits.Data[r*k:(r+1)*k]) == int(t) {
			c++
		}
	}
	return c
}
