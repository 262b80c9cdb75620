package engine

import (
	"fmt"
	"math"
)

// MaxPool2d returns the maximum over k×k windows moved by stride, without
// padding (torch.nn.functional.max_pool2d with padding 0, ceil_mode false).
//
// Shapes: x [B,C,H,W] -> [B,C,(H-k)/stride+1,(W-k)/stride+1]. Ties go to
// the first maximum in row-major window order. Backward adds each output
// gradient to the input element that was the maximum; overlapping windows
// add in row-major output order. Planes run in parallel. It panics when
// k < 1, stride < 1 or the window is larger than the input.
func (tp *Tape) MaxPool2d(x *Tensor, k, stride int) *Tensor {
	mustRank("MaxPool2d", "x", x, 4)
	batch, ch, h, w := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	if k < 1 || stride < 1 || k > h || k > w {
		panic(fmt.Sprintf("engine: MaxPool2d: window %d stride %d invalid for input %v", k, stride, x.Shape))
	}
	oh, ow := (h-k)/stride+1, (w-k)/stride+1
	rec := tp.recording(x)
	y := tp.output(rec, batch, ch, oh, ow)
	var arg []int32 // index within the input plane of each output's maximum
	if rec {
		arg = tp.allocIndex(len(y.Data))
	} else {
		arg = make([]int32, len(y.Data))
	}
	planes, in, out := batch*ch, h*w, oh*ow
	parallelFor(tp.threads, planes, len(y.Data)*k*k, func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			xp := x.Data[pl*in : (pl+1)*in]
			yp, ap := y.Data[pl*out:(pl+1)*out], arg[pl*out:(pl+1)*out]
			if k == 2 && stride == 2 {
				maxPool2x2(yp, ap, xp, w, oh, ow)
				continue
			}
			for oy := range oh {
				for ox := range ow {
					y0, x0 := oy*stride, ox*stride
					best, bi := xp[y0*w+x0], y0*w+x0
					for i := range k {
						for j := range k {
							if v := xp[(y0+i)*w+x0+j]; v > best {
								best, bi = v, (y0+i)*w+x0+j
							}
						}
					}
					yp[oy*ow+ox], ap[oy*ow+ox] = best, int32(bi)
				}
			}
		}
	})
	if !rec {
		return y
	}
	tp.record(func() {
		parallelFor(tp.threads, planes, len(y.Data), func(lo, hi int) {
			for pl := lo; pl < hi; pl++ {
				gp := x.Grad[pl*in : (pl+1)*in]
				for o, i := range arg[pl*out : (pl+1)*out] {
					gp[i] += y.Grad[pl*out+o]
				}
			}
		})
	})
	return y
}

// maxPool2x2 is MaxPool2d's plane loop for 2×2 windows with stride 2:
// y [oh·ow] and arg get the maximum of each window of x (a plane w wide)
// and its index, visiting the window in row-major order and keeping the
// first maximum (v > best), without branches on the data: each comparison
// becomes a 0/1 that selects bits.
func maxPool2x2(y []float32, arg []int32, x []float32, w, oh, ow int) {
	for oy := range oh {
		r0 := x[2*oy*w : 2*oy*w+2*ow]
		r1 := x[(2*oy+1)*w : (2*oy+1)*w+2*ow]
		yr, ar := y[oy*ow:(oy+1)*ow], arg[oy*ow:(oy+1)*ow]
		base := int32(2 * oy * w)
		for ox := range yr {
			j := 2 * ox
			best, bi := r0[j], base+int32(j)
			best, bi = selectGreater(r0[j+1], base+int32(j+1), best, bi)
			best, bi = selectGreater(r1[j], base+int32(w+j), best, bi)
			best, bi = selectGreater(r1[j+1], base+int32(w+j+1), best, bi)
			yr[ox], ar[ox] = best, bi
		}
	}
}

// selectGreater returns (v, vi) when v > best, else (best, bi), choosing
// by masks so that the compiler emits no branch on the comparison.
func selectGreater(v float32, vi int32, best float32, bi int32) (float32, int32) {
	var gt uint32
	if v > best {
		gt = 1
	}
	m := -gt // all ones when v > best
	b := math.Float32bits(v)&m | math.Float32bits(best)&^m
	return math.Float32frombits(b), int32(uint32(vi)&m | uint32(bi)&^m)
}
