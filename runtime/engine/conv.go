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
// over samples in increasing order, then over output positions, as one
// Gemm over all samples' columns (split by output elements only); db
// likewise, in parallel over output channels.
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
	// cols holds every sample's column matrix side by side, [C·KH·KW,
	// B·OH·OW] (sample n in columns [n·P, (n+1)·P)), kept for dw: then dw
	// is one product over all samples without transposing the columns.
	var cols []float32
	ld := p // row stride of the column matrices
	if rec && w.needsGrad() {
		cols, _ = tp.allocRaw(ckk * batch * p) // im2col writes every element
		ld = batch * p
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
				col = cols[n*p:]
			}
			g.im2col(x.Data[n*inSize:(n+1)*inSize], col, ld)
			yn := y.Data[n*outSize : (n+1)*outSize]
			if b != nil {
				for o := range outC {
					fill(yn[o*p:(o+1)*p], b.Data[o])
				}
			}
			Gemm(false, false, outC, p, ckk, w.Data, ckk, col, ld, yn, p, b != nil, inner)
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
			tp.convWeightGrad(w.Grad, y.Grad, cols, outC, ckk, batch, p)
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

// convWeightGrad adds dw[o,r] += Σ_n Σ_q dy[n,o,q]·cols[r, n·P+q] (summed
// over n, then q, in increasing order, from dw's value) for dw [O, R],
// dy [B, O, P] and cols [R, B·P]. It runs as one product
// dwᵀ[R,O] += cols · dyᵀ, whose k runs over (n, q) in that same order, on
// dy transposed to [B·P, O] (O times smaller than transposing the columns);
// dwᵀ starts as the transpose of dw and is transposed back.
func (tp *Tape) convWeightGrad(dw, dy, cols []float32, outC, ckk, batch, p int) {
	k := batch * p
	dyT, _ := tp.allocRaw(k * outC)
	for n := range batch {
		blk := dy[n*outC*p : (n+1)*outC*p]
		dst := dyT[n*p*outC : (n+1)*p*outC]
		for o := range outC {
			for q, v := range blk[o*p : (o+1)*p] {
				dst[q*outC+o] = v
			}
		}
	}
	dwT, _ := tp.allocRaw(ckk * outC)
	for o := range outC {
		for r, v := range dw[o*ckk : (o+1)*ckk] {
			dwT[r*outC+o] = v
		}
	}
	Gemm(false, false, ckk, outC, k, cols, k, dyT, outC, dwT, outC, true, gemmThreads(tp.threads, ckk*outC*k))
	for o := range outC {
		row := dw[o*ckk : (o+1)*ckk]
		for r := range row {
			row[r] = dwT[r*outC+o]
		}
	}
}

// convGeom is the geometry of one convolution: input channels and size,
// kernel size, stride, zero padding and output size.
type convGeom struct {
	c, h, w, kh, kw, stride, pad, oh, ow int
}

// rows is the number of rows of the column matrix, C·KH·KW.
func (g convGeom) rows() int { return g.c * g.kh * g.kw }

// im2col writes the column matrix of one sample x [C,H,W] into col, whose
// rows are ld elements apart (ld ≥ OH·OW):
// col[(c·KH+i)·KW+j][oy·OW+ox] = x[c][oy·s-pad+i][ox·s-pad+j], zero outside
// the input.
func (g convGeom) im2col(x, col []float32, ld int) {
	if g.stride == 1 {
		g.im2colStride1(x, col, ld)
		return
	}
	p := g.oh * g.ow
	for c := range g.c {
		plane := x[c*g.h*g.w : (c+1)*g.h*g.w]
		for i := range g.kh {
			for j := range g.kw {
				row := col[((c*g.kh+i)*g.kw+j)*ld:][:p]
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

// im2colStride1 is im2col for stride 1: each output row of a column-matrix
// row is a run of one input row between the valid columns [lo, hi). Runs
// of 8 (LeNet's second layer) are copied as one array, which costs less
// than a call to memmove.
func (g convGeom) im2colStride1(x, col []float32, ld int) {
	h, w, oh, ow, pad := g.h, g.w, g.oh, g.ow, g.pad
	for c := range g.c {
		plane := x[c*h*w : (c+1)*h*w]
		for i := range g.kh {
			for j := range g.kw {
				row := col[((c*g.kh+i)*g.kw+j)*ld:][:oh*ow]
				lo, hi := g.validCols(j)
				for oy := range oh {
					dst := row[oy*ow : oy*ow+ow]
					iy := oy - pad + i
					if iy < 0 || iy >= h || lo == hi {
						clear(dst)
						continue
					}
					if lo > 0 {
						clear(dst[:lo])
					}
					d := dst[lo:hi]
					s := plane[iy*w+lo-pad+j:][:len(d)]
					if len(d) == 8 {
						*(*[8]float32)(d) = *(*[8]float32)(s)
					} else {
						copy(d, s)
					}
					if hi < ow {
						clear(dst[hi:])
					}
				}
			}
		}
	}
}

// validCols returns, for stride 1 and kernel column j, the output columns
// [lo, hi) whose input column ox-pad+j lies inside the input.
func (g convGeom) validCols(j int) (lo, hi int) {
	lo = min(max(g.pad-j, 0), g.ow)
	hi = max(min(g.ow, g.w+g.pad-j), lo)
	return lo, hi
}

// col2imAdd is the adjoint of im2col (col with rows OH·OW apart): it adds
// every element of col to the input position it was read from, visiting
// col in row-major order.
func (g convGeom) col2imAdd(col, dx []float32) {
	p := g.oh * g.ow
	for c := range g.c {
		plane := dx[c*g.h*g.w : (c+1)*g.h*g.w]
		for i := range g.kh {
			for j := range g.kw {
				row := col[((c*g.kh+i)*g.kw+j)*p:][:p]
				lo, hi := g.validCols(j)
				for oy := range g.oh {
					iy := oy*g.stride - g.pad + i
					if iy < 0 || iy >= g.h {
						continue
					}
					dst := plane[iy*g.w : (iy+1)*g.w]
					if g.stride == 1 {
						if lo < hi {
							addTo(dst[lo-g.pad+j:hi-g.pad+j], row[oy*g.ow+lo:oy*g.ow+hi])
						}
						continue
					}
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

// addTo adds src to dst elementwise (len(src) elements).
func addTo(dst, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] += v
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
