package engine

import (
	"math"
	"math/rand/v2"
)

// newRand returns a seeded generator for test inputs (never the global one).
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// randParam returns a parameter of the given shape with values from U(-1,1).
func randParam(r *rand.Rand, shape ...int) *Tensor {
	t := NewParam(shape...)
	for i := range t.Data {
		t.Data[i] = float32(2*r.Float32()) - 1
	}
	return t
}

// randConst is randParam without a gradient.
func randConst(r *rand.Rand, shape ...int) *Tensor {
	t := randParam(r, shape...)
	t.Grad = nil
	return t
}

// awayFromZero pushes every value of t to at least margin in magnitude so
// finite differences never straddle a ReLU kink.
func awayFromZero(t *Tensor, margin float32) *Tensor {
	for i, v := range t.Data {
		if v >= 0 && v < margin {
			t.Data[i] = v + margin
		} else if v < 0 && v > -margin {
			t.Data[i] = v - margin
		}
	}
	return t
}

// distinctValues fills t with a random permutation of values spaced step
// apart and centred on zero, so every max-pool window has a clear winner.
func distinctValues(r *rand.Rand, t *Tensor, step float32) *Tensor {
	perm := r.Perm(len(t.Data))
	for i, p := range perm {
		t.Data[i] = (float32(p) - float32(len(perm))/2) * step
	}
	return t
}

// weightedSum returns the scalar Σ out[i]·w[i] (summed in float64) and
// records its backward out.Grad[i] += w[i]·dy; it turns any op's output into
// a loss for gradient tests.
func weightedSum(tp *Tape, out *Tensor, w []float32) *Tensor {
	y := tp.output(tp.recording(out), 1)
	y.Data[0] = float32(weightedSum64(out, w))
	if y.Grad != nil {
		tp.record(func() {
			for i, v := range w {
				out.Grad[i] += float32(v * y.Grad[0])
			}
		})
	}
	return y
}

// weightedSum64 returns Σ out[i]·w[i] in float64.
func weightedSum64(out *Tensor, w []float32) float64 {
	var s float64
	for i, v := range out.Data {
		s += float64(float64(v) * float64(w[i]))
	}
	return s
}

// seqSource is a Uniform that replays a fixed sequence and counts draws.
type seqSource struct {
	vals  []float32
	draws int
}

func (s *seqSource) Float32() float32 {
	v := s.vals[s.draws%len(s.vals)]
	s.draws++
	return v
}

// bitsEqual reports whether a and b hold identical bit patterns.
func bitsEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}
