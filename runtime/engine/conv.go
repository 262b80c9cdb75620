package engine

import "fmt"

// Conv2d returns the 2-D cross-correlation of x with w plus b
// (torch.nn.functional.conv2d with dilation 1 and groups 1).
//
// Shapes: x [B,C,H,W], w [O,C,KH,KW], b [O] or nil; the result is
// [B,O,OH,OW] with OH = (H+2·pad-KH)/stride+1 and OW likewise. Zero padding.
// It lowers each sample to a column matrix (im2col, [C·KH·KW, OH·OW]) and
// calls Gemm, so every output element is b[o] + Σ over (c,kh,kw) in
// increasing order. The forward pass runs samples in parallel. Backward:
// dx by Gemm and col2im per sample (in parallel over samples); dw summed
// over samples in increasing order, then over output positions (in parallel
// over output channels only); db likewise.
//
// It panics on mismatched shapes, stride < 1, pad < 0 or an empty output.
func (tp *Tape) Conv2d(x, w, b *Tensor, stride, pad int) *Tensor {
	const op = "Conv2d"
	mustRank(op, "x", x, 4)
	mustRank(op, "w", w, 4)
	batch, ch, h, wd := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	outC, kh, kw := w.Shape[0], w.Shape[2], w.Shape[3]
	if w.Shape[1] != ch {
		panic(fmt.Sprintf("engine: Conv2d: x %v and w %v disagree on channels", x.Shape, w.Shape))
	}
	if b != nil {
		mustShape(op, "b", b, outC)
	}
	if stride < 1 || pad < 0 {
		panic(fmt.Sprintf("engine: Conv2d: stride %d must be >= 1 and pad %d >= 0", stride, pad))
	}
	g := convGeom{c: ch, h: h, w: wd, kh: kh, kw: kw, stride: stride, pad: pad}
	g.oh, g.ow = (h+2*pad-kh)/stride+1, (wd+2*pad-kw)/stride+1
	if h+2*pad < kh || wd+2*pad < kw || g.oh < 1 || g.ow < 1 {
		panic(fmt.Sprintf("engine: Conv2d: kernel %dx%d larger than padded input %dx%d", kh, kw, h+2*pad, wd+2*pad))
	}
	rec := tp.recording(x, w, b)
	y := tp.output(rec, batch, outC, g.oh, g.ow)
	ckk, p := g.rows(), g.oh*g.ow
	inSize, outSize := ch*h*wd, outC*p
	var cols []float32 // every sample's im2col, kept for dw
	if rec && w.needsGrad() {
		cols = tp.alloc(batch * ckk * p)
	}
	work := batch * outC * ckk * p
	inner := innerThreads(tp.threads, batch, work, outC*ckk*p)
	parallelFor(tp.threads, batch, work, func(lo, hi int) {
		var scratch []float32
		if cols == nil {
			scratch = make([]float32, ckk*p)
		}
		for n := lo; n < hi; n++ {
			col := scratch
			if cols != nil {
				col = cols[n*ckk*p : (n+1)*ckk*p]
			}
			g.im2col(x.Data[n*inSize:(n+1)*inSize], col)
			yn := y.Data[n*outSize : (n+1)*outSize]
			if b != nil {
				for o := range outC {
					fill(yn[o*p:(o+1)*p], b.Data[o])
				}
			}
			Gemm(false, false, outC, p, ckk, w.Data, ckk, col, p, yn, p, b != nil, inner)
		}
	})
	if !rec {
		return y
	}
	tp.record(func() {
		if x.needsGrad() {
			parallelFor(tp.threads, batch, work, func(lo, hi int) {
				dcol := make([]float32, ckk*p)
				for n := lo; n < hi; n++ {
					Gemm(true, false, ckk, p, outC, w.Data, ckk, y.Grad[n*outSize:(n+1)*outSize], p, dcol, p, false, inner)
					g.col2imAdd(dcol, x.Grad[n*inSize:(n+1)*inSize])
				}
			})
		}
		if w.needsGrad() {
			parallelFor(tp.threads, outC, work, func(lo, hi int) {
				for n := range batch {
					Gemm(false, true, hi-lo, ckk, p, y.Grad[n*outSize+lo*p:], p, cols[n*ckk*p:], p, w.Grad[lo*ckk:], ckk, true, 1)
				}
			})
		}
		if b.needsGrad() {
			parallelFor(tp.threads, outC, batch*outC*p, func(lo, hi int) {
				for o := lo; o < hi; o++ {
					s := b.Grad[o]
					for n := range batch {
						for _, v := range y.Grad[n*outSize+o*p : n*outSize+(o+1)*p] {
							s += v
						}
					}
					b.Grad[o] = s
				}
			})
		}
	})
	return y
}

// convGeom is the geometry of one convolution: input channels and size,
// kernel size, stride, zero padding and output size.
type convGeom struct {
	c, h, w, kh, kw, stride, pad, oh, ow int
}

// rows is the number of rows of the column matrix, C·KH·KW.
func (g convGeom) rows() int { return g.c * g.kh * g.kw }

// im2col writes the column matrix of one sample x [C,H,W] into col
// [C·KH·KW, OH·OW]: col[(c·KH+i)·KW+j][oy·OW+ox] = x[c][oy·s-pad+i][ox·s-pad+j],
// zero outside the input.
func (g convGeom) im2col(x, col []float32) {
	p := g.oh * g.ow
	for c := range g.c {
		plane := x[c*g.h*g.w : (c+1)*g.h*g.w]
		for i := range g.kh {
			for j := range g.kw {
				row := col[((c*g.kh+i)*g.kw+j)*p:][:p]
				for oy := range g.oh {
					iy := oy*g.stride - g.pad + i
					dst := row[oy*g.ow : (oy+1)*g.ow]
					if iy < 0 || iy >= g.h {
						clear(dst)
						continue
					}
					src := plane[iy*g.w : (iy+1)*g.w]
					for ox := range dst {
						ix := ox*g.stride - g.pad + j
						if ix < 0 || ix >= g.w {
							dst[ox] = 0
						} else {
							dst[ox] = src[ix]
						}
					}
				}
			}
		}
	}
}

// col2imAdd is the adjoint of im2col: it adds every element of col to the
// input position it was read from, visiting col in row-major order.
func (g convGeom) col2imAdd(col, dx []float32) {
	p := g.oh * g.ow
	for c := range g.c {
		plane := dx[c*g.h*g.w : (c+1)*g.h*g.w]
		for i := range g.kh {
			for j := range g.kw {
				row := col[((c*g.kh+i)*g.kw+j)*p:][:p]
				for oy := range g.oh {
					iy := oy*g.stride - g.pad + i
					if iy < 0 || iy >= g.h {
						continue
					}
					dst := plane[iy*g.w : (iy+1)*g.w]
					for ox, v := range row[oy*g.ow : (oy+1)*g.ow] {
						if ix := ox*g.stride - g.pad + j; ix >= 0 && ix < g.w {
							dst[ix] += v
						}
					}
				}
			}
		}
	}
}

// innerThreads returns the thread count for Gemm calls inside a loop over n
// items parallelised with parallelFor: 1 when the loop itself runs in
// parallel, otherwise all threads when one item is big enough.
func innerThreads(threads, n, work, itemWork int) int {
	if chunks(threads, n, work) > 1 {
		return 1
	}
	return gemmThreads(threads, itemWork)
}

// fill sets every element of s to v.
func fill(s []float32, v float32) {
	for i := range s {
		s[i] = v
	}
}
