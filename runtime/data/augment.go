package data

import (
	"fmt"

	"github.com/easyscale/easyscale-slurm/runtime/rng"
)

// RandomShift writes src translated by a random whole number of pixels into
// dst, filling uncovered pixels with zero. src and dst hold C planes of h×w
// floats (len(src) = C·h·w; every plane gets the same shift). The shift is
// drawn from s as exactly two Intn(2·maxShift+1) - maxShift draws, the
// vertical shift dy first, then the horizontal shift dx, each in
// [-maxShift, maxShift]; see Shift for their meaning. Drawing from the
// logical worker's stream (rng.Augment) makes the augmentation independent
// of the physical worker. It panics on mismatched lengths or maxShift < 0
// (programming errors).
func RandomShift(dst, src []float32, h, w, maxShift int, s *rng.Stream) {
	if maxShift < 0 {
		panic(fmt.Sprintf("data: RandomShift with maxShift %d < 0", maxShift))
	}
	dy := s.Intn(2*maxShift+1) - maxShift
	dx := s.Intn(2*maxShift+1) - maxShift
	Shift(dst, src, h, w, dy, dx)
}

// Shift writes src translated by dy rows down and dx columns right into dst:
// dst[c][y][x] = src[c][y-dy][x-dx] where that is inside the image, else 0.
// Negative shifts move up and left. src and dst are C planes of h×w floats
// and must not overlap. It panics unless len(dst) == len(src) and len(src) is
// a positive multiple of h·w.
func Shift(dst, src []float32, h, w, dy, dx int) {
	plane := h * w
	if h < 1 || w < 1 || len(src) == 0 || len(src)%plane != 0 || len(dst) != len(src) {
		panic(fmt.Sprintf("data: Shift of %d floats into %d as %dx%d planes", len(src), len(dst), h, w))
	}
	// Source columns [x0-dx, x1-dx) land on destination columns [x0, x1).
	x0, x1 := max(0, dx), min(w, w+dx)
	for c := 0; c < len(src); c += plane {
		for y := 0; y < h; y++ {
			row := dst[c+y*w : c+(y+1)*w]
			sy := y - dy
			if sy < 0 || sy >= h || x0 >= x1 {
				clear(row)
				continue
			}
			clear(row[:x0])
			copy(row[x0:x1], src[c+sy*w+x0-dx:c+sy*w+x1-dx])
			clear(row[x1:])
		}
	}
}
