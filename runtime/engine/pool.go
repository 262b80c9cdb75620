package engine

import "fmt"

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
		arg = make([]int32, len(y.Data))
	}
	planes, in, out := batch*ch, h*w, oh*ow
	parallelFor(tp.threads, planes, len(y.Data)*k*k, func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			xp := x.Data[pl*in : (pl+1)*in]
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
					o := pl*out + oy*ow + ox
					y.Data[o] = best
					if arg != nil {
						arg[o] = int32(bi)
					}
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
				for o := pl * out; o < (pl+1)*out; o++ {
					gp[arg[o]] += y.Grad[o]
				}
			}
		})
	})
	return y
}
