package engine

import (
	"math"
	"testing"
)

// reluBitPatterns returns the edges of the float32 encoding (±0, the
// smallest subnormals, the largest finite values, ±Inf, NaNs of both signs)
// and a sweep over all 2^32 patterns with a stride of 65521 (a prime).
func reluBitPatterns() []uint32 {
	ps := []uint32{0, 1, 2, 0x007fffff, 0x00800000, 0x3f800000, 0x7f7fffff, 0x7f800000, 0x7f800001, 0x7fc00000,
		0x7fffffff, 0x80000000, 0x80000001, 0xbf800000, 0xff7fffff, 0xff800000, 0xff800001, 0xffc00000, 0xffffffff}
	for b := uint64(3); b < 1<<32; b += 65521 {
		ps = append(ps, uint32(b))
	}
	return ps
}

// TestReLUKernelsHaveTheBitsOfTheComparison checks the branch-free ReLU
// against `if x > 0` on every edge of the encoding: the forward value, and
// the backward update of a gradient that starts at +0, −0 or a value.
func TestReLUKernelsHaveTheBitsOfTheComparison(t *testing.T) {
	ps := reluBitPatterns()
	x := make([]float32, len(ps))
	for i, b := range ps {
		x[i] = math.Float32frombits(b)
	}
	y := make([]float32, len(x))
	reluForward(y, x)
	for i, v := range x {
		want := float32(0)
		if v > 0 {
			want = v
		}
		if math.Float32bits(y[i]) != math.Float32bits(want) {
			t.Fatalf("forward of bits %#x: got bits %#x, want %#x", ps[i], math.Float32bits(y[i]), math.Float32bits(want))
		}
	}
	for _, start := range []float32{0, float32(math.Copysign(0, -1)), 1.5} {
		dx, dy := make([]float32, len(x)), make([]float32, len(x))
		for i := range dx {
			dx[i], dy[i] = start, float32(i%7)-3
		}
		reluBackward(dx, dy, x)
		for i, v := range x {
			want := start
			if v > 0 {
				want += dy[i]
			}
			if math.Float32bits(dx[i]) != math.Float32bits(want) {
				t.Fatalf("backward at bits %#x from %v: got bits %#x, want %#x", ps[i], start, math.Float32bits(dx[i]), math.Float32bits(want))
			}
		}
	}
}
