package engine

import "fmt"

// Linear returns x·wᵀ + b (torch.nn.functional.linear).
//
// Shapes: x [B,In], w [Out,In] (PyTorch layout), b [Out] or nil; the result
// is [B,Out]. Each output element is b[o] + Σ_i x[n,i]·w[o,i] summed over i
// in increasing order. Backward: dx += dy·w, dw += dyᵀ·x summed over the
// batch in increasing order, db += Σ_n dy[n,:] in increasing n.
func (tp *Tape) Linear(x, w, b *Tensor) *Tensor {
	const op = "Linear"
	mustRank(op, "x", x, 2)
	mustRank(op, "w", w, 2)
	batch, in, out := x.Shape[0], x.Shape[1], w.Shape[0]
	if w.Shape[1] != in {
		panic(fmt.Sprintf("engine: Linear: x %v and w %v disagree on In", x.Shape, w.Shape))
	}
	if b != nil {
		mustShape(op, "b", b, out)
	}
	rec := tp.recording(x, w, b)
	y := tp.output(rec, batch, out)
	if b != nil {
		for n := range batch {
			copy(y.Data[n*out:(n+1)*out], b.Data)
		}
	}
	Gemm(false, true, batch, out, in, x.Data, in, w.Data, in, y.Data, out, b != nil, gemmThreads(tp.threads, batch*out*in))
	if !rec {
		return y
	}
	tp.record(func() {
		th := gemmThreads(tp.threads, batch*out*in)
		if x.needsGrad() {
			Gemm(false, false, batch, in, out, y.Grad, out, w.Data, in, x.Grad, in, true, th)
		}
		if w.needsGrad() {
			Gemm(true, false, out, in, batch, y.Grad, out, x.Data, in, w.Grad, in, true, th)
		}
		if b.needsGrad() {
			sumRowsInto(b.Grad, y.Grad, batch, out)
		}
	})
	return y
}

// sumRowsInto adds Σ_n m[n,:] to dst for the rows×cols row-major matrix m,
// summing rows in increasing order starting from dst's current value.
func sumRowsInto(dst, m []float32, rows, cols int) {
	for n := range rows {
		row := m[n*cols : (n+1)*cols]
		for j, v := range row {
			dst[j] += v
		}
	}
}

// gemmThreads returns the thread count for a Gemm of work multiply-adds:
// 1 below minParallelWork, threads otherwise.
func gemmThreads(threads, work int) int {
	if work < minParallelWork {
		return 1
	}
	return threads
}
