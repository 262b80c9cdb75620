package data

import (
	"testing"

	"github.com/easyscale/easyscale-slurm/runtime/rng"
)

// seq returns c planes of h×w floats valued 1, 2, 3, ... (never 0).
func seq(c, h, w int) []float32 {
	x := make([]float32, c*h*w)
	for i := range x {
		x[i] = float32(i + 1)
	}
	return x
}

func TestShiftMovesContentAndZeroFills(t *testing.T) {
	const h, w = 4, 5
	cases := []struct {
		name   string
		dy, dx int
	}{
		{"no shift copies the image", 0, 0},
		{"one row down and two columns right", 1, 2},
		{"two rows up and one column left", -2, -1},
		{"a shift as large as the image clears it", 4, 0},
		{"a horizontal shift past the width clears it", 0, -7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := seq(2, h, w)
			dst := make([]float32, len(src))
			for i := range dst {
				dst[i] = -1 // must all be overwritten
			}
			Shift(dst, src, h, w, tc.dy, tc.dx)
			for c := range 2 {
				for y := range h {
					for x := range w {
						sy, sx := y-tc.dy, x-tc.dx
						var want float32
						if sy >= 0 && sy < h && sx >= 0 && sx < w {
							want = src[c*h*w+sy*w+sx]
						}
						if got := dst[c*h*w+y*w+x]; got != want {
							t.Fatalf("plane %d (%d,%d) = %v, want %v", c, y, x, got, want)
						}
					}
				}
			}
		})
	}
}

func TestRandomShiftDrawsRowsThenColumnsFromTheStream(t *testing.T) {
	const h, w, maxShift = 28, 28, 2
	key := rng.StreamKey{Seed: 1, Worker: 3, Step: 17, Purpose: rng.Augment}
	s := rng.NewStream(key)
	replay := rng.NewStream(key)
	src := seq(1, h, w)
	dst := make([]float32, len(src))
	want := make([]float32, len(src))
	seen := map[[2]int]bool{}
	for range 200 {
		RandomShift(dst, src, h, w, maxShift, s)
		dy := replay.Intn(2*maxShift+1) - maxShift
		dx := replay.Intn(2*maxShift+1) - maxShift
		if dy < -maxShift || dy > maxShift || dx < -maxShift || dx > maxShift {
			t.Fatalf("shift (%d,%d) outside ±%d", dy, dx, maxShift)
		}
		seen[[2]int{dy, dx}] = true
		Shift(want, src, h, w, dy, dx)
		for i := range dst {
			if dst[i] != want[i] {
				t.Fatalf("RandomShift differs from Shift(dy=%d, dx=%d) at %d", dy, dx, i)
			}
		}
	}
	if s.Position() != 400 {
		t.Fatalf("200 shifts drew %d values, want exactly 2 each", s.Position())
	}
	if len(seen) != 25 {
		t.Fatalf("200 shifts hit %d of the 25 possible offsets", len(seen))
	}
}

func TestRandomShiftWithZeroMaxShiftCopiesAndStillDrawsTwice(t *testing.T) {
	s := rng.NewStream(rng.StreamKey{Purpose: rng.Augment})
	src := seq(1, 3, 3)
	dst := make([]float32, 9)
	RandomShift(dst, src, 3, 3, 0, s)
	for i := range src {
		if dst[i] != src[i] {
			t.Fatalf("dst[%d] = %v, want %v", i, dst[i], src[i])
		}
	}
	if s.Position() != 2 {
		t.Fatalf("drew %d values, want 2", s.Position())
	}
}

func TestShiftPanicsOnMismatchedBuffers(t *testing.T) {
	cases := []struct {
		name     string
		dst, src int
		h, w     int
	}{
		{"a destination shorter than the source", 8, 9, 3, 3},
		{"a source that is not whole planes", 10, 10, 3, 3},
		{"an empty image", 0, 0, 3, 3},
		{"a zero height", 9, 9, 0, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			Shift(make([]float32, tc.dst), make([]float32, tc.src), tc.h, tc.w, 1, 1)
		})
	}
}

func BenchmarkRandomShiftMNIST(b *testing.B) {
	s := rng.NewStream(rng.StreamKey{Purpose: rng.Augment})
	src := seq(1, 28, 28)
	dst := make([]float32, len(src))
	for b.Loop() {
		RandomShift(dst, src, 28, 28, 2, s)
	}
}
