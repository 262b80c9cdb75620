package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// opCase builds the leaves of one op (or small graph) and its forward pass.
// Leaves with a Grad are differentiated; big asks for sizes large enough
// that every op splits its work across goroutines.
type opCase struct {
	name  string
	setup func(r *rand.Rand, big bool) (leaves []*Tensor, fwd func(tp *Tape) *Tensor)
}

// pick returns small or large by big.
func pick(big bool, small, large int) int {
	if big {
		return large
	}
	return small
}

// opCases lists every op, alone and in two small networks.
var opCases = []opCase{
	{"linear with bias differentiates x, w and b", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		bt, in, out := pick(big, 3, 64), pick(big, 4, 64), pick(big, 5, 32)
		x, w, b := randParam(r, bt, in), randParam(r, out, in), randParam(r, out)
		return []*Tensor{x, w, b}, func(tp *Tape) *Tensor { return tp.Linear(x, w, b) }
	}},
	{"linear without bias on a constant input differentiates w only", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		x, w := randConst(r, pick(big, 2, 64), pick(big, 3, 64)), randParam(r, pick(big, 4, 48), pick(big, 3, 64))
		return []*Tensor{x, w}, func(tp *Tape) *Tensor { return tp.Linear(x, w, nil) }
	}},
	{"conv2d with stride 1 and padding 1", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		n, hw := pick(big, 2, 8), pick(big, 5, 12)
		x, w, b := randParam(r, n, 3, hw, hw), randParam(r, pick(big, 4, 8), 3, 3, 3), randParam(r, pick(big, 4, 8))
		return []*Tensor{x, w, b}, func(tp *Tape) *Tensor { return tp.Conv2d(x, w, b, 1, 1) }
	}},
	{"conv2d with stride 2, no padding and no bias", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		x, w := randParam(r, pick(big, 2, 8), 2, pick(big, 6, 24), pick(big, 7, 24)), randParam(r, pick(big, 3, 16), 2, 2, 3)
		return []*Tensor{x, w}, func(tp *Tape) *Tensor { return tp.Conv2d(x, w, nil, 2, 0) }
	}},
	{"max pool with disjoint 2x2 windows", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		x := distinctValues(r, NewParam(pick(big, 2, 8), pick(big, 3, 8), pick(big, 4, 32), pick(big, 4, 32)), 0.05)
		return []*Tensor{x}, func(tp *Tape) *Tensor { return tp.MaxPool2d(x, 2, 2) }
	}},
	{"max pool with overlapping 3x3 windows", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		x := distinctValues(r, NewParam(pick(big, 1, 8), 2, pick(big, 5, 30), pick(big, 5, 30)), 0.05)
		return []*Tensor{x}, func(tp *Tape) *Tensor { return tp.MaxPool2d(x, 3, 1) }
	}},
	{"relu away from its kink", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		x := awayFromZero(randParam(r, pick(big, 3, 256), pick(big, 7, 256)), 0.05)
		return []*Tensor{x}, func(tp *Tape) *Tensor { return tp.ReLU(x) }
	}},
	{"gelu with the tanh approximation", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		x := randParam(r, pick(big, 4, 128), pick(big, 6, 128))
		for i := range x.Data {
			x.Data[i] *= 3
		}
		return []*Tensor{x}, func(tp *Tape) *Tensor { return tp.GELU(x) }
	}},
	{"dropout with a replayed mask", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		x := randParam(r, pick(big, 4, 64), pick(big, 5, 64))
		return []*Tensor{x}, func(tp *Tape) *Tensor { return tp.Dropout(x, 0.3, newRand(99)) }
	}},
	{"batch norm training on [B,C,H,W] with running buffers", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		c := pick(big, 3, 8)
		x, g, b := randParam(r, pick(big, 4, 16), c, pick(big, 3, 16), pick(big, 3, 16)), randParam(r, c), randParam(r, c)
		rm, rv := NewTensor(c), NewTensor(c)
		fill(rv.Data, 1)
		return []*Tensor{x, g, b, rm, rv}, func(tp *Tape) *Tensor { return tp.BatchNorm(x, g, b, rm, rv, 0.1, 1e-5, true) }
	}},
	{"batch norm training on [B,C] without affine parameters", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		x := randParam(r, pick(big, 6, 256), pick(big, 4, 128))
		return []*Tensor{x}, func(tp *Tape) *Tensor { return tp.BatchNorm(x, nil, nil, nil, nil, 0.1, 1e-5, true) }
	}},
	{"batch norm in eval mode uses the running buffers", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		c := pick(big, 3, 8)
		x, g, b := randParam(r, pick(big, 2, 16), c, pick(big, 2, 16), pick(big, 3, 16)), randParam(r, c), randParam(r, c)
		rm, rv := randConst(r, c), randConst(r, c)
		for i := range rv.Data {
			rv.Data[i] = 0.5 + float32(rv.Data[i]*rv.Data[i])
		}
		return []*Tensor{x, g, b, rm, rv}, func(tp *Tape) *Tensor { return tp.BatchNorm(x, g, b, rm, rv, 0.1, 1e-5, false) }
	}},
	{"layer norm over the last dimension", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		d := pick(big, 8, 128)
		x, g, b := randParam(r, pick(big, 5, 256), d), randParam(r, d), randParam(r, d)
		return []*Tensor{x, g, b}, func(tp *Tape) *Tensor { return tp.LayerNorm(x, g, b, 1e-5) }
	}},
	{"embedding with repeated ids", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		v, d := pick(big, 5, 64), pick(big, 3, 64)
		table := randParam(r, v, d)
		ids := make([]int32, pick(big, 7, 512))
		for i := range ids {
			ids[i] = int32(r.IntN(v))
		}
		ids[0], ids[1] = 2, 2
		return []*Tensor{table}, func(tp *Tape) *Tensor { return tp.Embedding(ids, table) }
	}},
	{"causal self-attention with two heads", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		bt, t, heads, d := pick(big, 2, 4), pick(big, 4, 32), pick(big, 2, 4), pick(big, 4, 32)
		qkv := randParam(r, bt*t, 3*d)
		return []*Tensor{qkv}, func(tp *Tape) *Tensor { return tp.CausalSelfAttention(qkv, bt, t, heads) }
	}},
	{"add of two parameters", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		a, b := randParam(r, pick(big, 3, 256), 4), randParam(r, pick(big, 3, 256), 4)
		return []*Tensor{a, b}, func(tp *Tape) *Tensor { return tp.Add(a, b) }
	}},
	{"add positional embedding", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		bt, t, d := pick(big, 2, 16), pick(big, 3, 32), pick(big, 4, 64)
		x, pos := randParam(r, bt*t, d), randParam(r, t+2, d)
		return []*Tensor{x, pos}, func(tp *Tape) *Tensor { return tp.AddPositional(x, pos, bt, t) }
	}},
	{"reshape passes gradients through", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		x := randParam(r, pick(big, 2, 64), pick(big, 6, 96))
		return []*Tensor{x}, func(tp *Tape) *Tensor { return tp.GELU(tp.Reshape(x, -1, 3)) }
	}},
	{"softmax cross-entropy", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		b, k := pick(big, 4, 512), pick(big, 5, 64)
		logits := randParam(r, b, k)
		tg := make([]int32, b)
		for i := range tg {
			tg[i] = int32(r.IntN(k))
		}
		return []*Tensor{logits}, func(tp *Tape) *Tensor { return tp.SoftmaxCrossEntropy(logits, tg) }
	}},
	{"small conv net: conv, batch norm, relu, pool, linear, cross-entropy", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		n, hw := pick(big, 3, 16), pick(big, 6, 14)
		x := randConst(r, n, 1, hw, hw)
		cw, cb := randParam(r, 4, 1, 3, 3), randParam(r, 4)
		g, b := randParam(r, 4), randParam(r, 4)
		fin := 4 * (hw / 2) * (hw / 2)
		lw, lb := randParam(r, 3, fin), randParam(r, 3)
		tg := make([]int32, n)
		for i := range tg {
			tg[i] = int32(i % 3)
		}
		return []*Tensor{x, cw, cb, g, b, lw, lb}, func(tp *Tape) *Tensor {
			h := tp.Conv2d(x, cw, cb, 1, 1)
			h = tp.ReLU(tp.BatchNorm(h, g, b, nil, nil, 0.1, 1e-5, true))
			h = tp.Reshape(tp.MaxPool2d(h, 2, 2), n, fin)
			return tp.SoftmaxCrossEntropy(tp.Linear(h, lw, lb), tg)
		}
	}},
	{"small transformer block: embedding, positions, layer norm, attention, gelu, cross-entropy", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		bt, t, d, v := pick(big, 2, 4), pick(big, 3, 16), pick(big, 4, 32), pick(big, 5, 16)
		emb, pos := randParam(r, v, d), randParam(r, t, d)
		g, b := randParam(r, d), randParam(r, d)
		wqkv, wo, wout := randParam(r, 3*d, d), randParam(r, d, d), randParam(r, v, d)
		ids, tg := make([]int32, bt*t), make([]int32, bt*t)
		for i := range ids {
			ids[i], tg[i] = int32(r.IntN(v)), int32(r.IntN(v))
		}
		return []*Tensor{emb, pos, g, b, wqkv, wo, wout}, func(tp *Tape) *Tensor {
			h := tp.AddPositional(tp.Embedding(ids, emb), pos, bt, t)
			a := tp.CausalSelfAttention(tp.Linear(tp.LayerNorm(h, g, b, 1e-5), wqkv, nil), bt, t, 2)
			h = tp.Add(h, tp.Linear(a, wo, nil))
			return tp.SoftmaxCrossEntropy(tp.Linear(tp.GELU(h), wout, nil), tg)
		}
	}},
	// The shapes of the examples' layers that the kernels special-case
	// (stride 1, channel counts that are no multiple of the kernels' width).
	{"conv2d 5x5 with stride 1, no padding and no bias, as LeNet's second layer", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		x, w := randParam(r, pick(big, 2, 8), pick(big, 2, 4), pick(big, 6, 12), pick(big, 7, 12)), randParam(r, pick(big, 3, 16), pick(big, 2, 4), 5, 5)
		return []*Tensor{x, w}, func(tp *Tape) *Tensor { return tp.Conv2d(x, w, nil, 1, 0) }
	}},
	{"conv2d with padding 2 on a constant input differentiates w and b only", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		x, w, b := randConst(r, pick(big, 2, 8), 1, pick(big, 5, 14), pick(big, 4, 14)), randParam(r, pick(big, 3, 8), 1, 3, 3), randParam(r, pick(big, 3, 8))
		return []*Tensor{x, w, b}, func(tp *Tape) *Tensor { return tp.Conv2d(x, w, b, 1, 2) }
	}},
	{"max pool with 2x2 windows on an odd-sized input", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		x := distinctValues(r, NewParam(pick(big, 2, 8), pick(big, 3, 8), pick(big, 5, 25), pick(big, 7, 27)), 0.05)
		return []*Tensor{x}, func(tp *Tape) *Tensor { return tp.MaxPool2d(x, 2, 2) }
	}},
	{"batch norm training on [B,C,H,W] with 7 channels", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		x, g, b := randParam(r, pick(big, 3, 16), 7, pick(big, 2, 12), pick(big, 3, 12)), randParam(r, 7), randParam(r, 7)
		rm, rv := NewTensor(7), NewTensor(7)
		fill(rv.Data, 1)
		return []*Tensor{x, g, b, rm, rv}, func(tp *Tape) *Tensor { return tp.BatchNorm(x, g, b, rm, rv, 0.1, 1e-5, true) }
	}},
	{"batch norm training on [B,C] with 5 channels", func(r *rand.Rand, big bool) ([]*Tensor, func(*Tape) *Tensor) {
		x, g, b := randParam(r, pick(big, 6, 256), 5), randParam(r, 5), randParam(r, 5)
		return []*Tensor{x, g, b}, func(tp *Tape) *Tensor { return tp.BatchNorm(x, g, b, nil, nil, 0.1, 1e-5, true) }
	}},
}

// gradCheck compares the analytic gradient of L = Σ out·w (w fixed random
// weights) with respect to every leaf that has a Grad against central
// finite differences evaluated in float64 on the float32 forward pass. It
// returns a description of the first element outside tolerance, or "".
func gradCheck(leaves []*Tensor, fwd func(*Tape) *Tensor, seed uint64) string {
	const eps, atol, rtol = 1e-2, 2e-3, 2e-2
	tp := NewTape(1)
	out := fwd(tp)
	r := newRand(seed)
	w := make([]float32, out.Len())
	for i := range w {
		w[i] = float32(2*r.Float32()) - 1
	}
	tp.Backward(weightedSum(tp, out, w))
	eval := func() float64 {
		tp := NewTape(1)
		tp.SetGradEnabled(false)
		return weightedSum64(fwd(tp), w)
	}
	for li, leaf := range leaves {
		if leaf.Grad == nil {
			continue
		}
		for i, v := range leaf.Data {
			hi, lo := v+eps, v-eps
			leaf.Data[i] = hi
			lp := eval()
			leaf.Data[i] = lo
			lm := eval()
			leaf.Data[i] = v
			num := (lp - lm) / (float64(hi) - float64(lo))
			got := float64(leaf.Grad[i])
			if math.Abs(got-num) > atol+rtol*math.Abs(num) || math.IsNaN(got) {
				return fmt.Sprintf("leaf %d element %d: analytic %.6g, finite difference %.6g", li, i, got, num)
			}
		}
	}
	return ""
}

func TestGradientsMatchFiniteDifferences(t *testing.T) {
	for ci, c := range opCases {
		t.Run(c.name, func(t *testing.T) {
			leaves, fwd := c.setup(newRand(uint64(ci)), false)
			if msg := gradCheck(leaves, fwd, uint64(ci)+100); msg != "" {
				t.Error(msg)
			}
		})
	}
}

// TestGradCheckCatchesAWrongBackward shows the checker has teeth: an op
// whose backward is off by a factor of 1.1 is reported.
func TestGradCheckCatchesAWrongBackward(t *testing.T) {
	x := randParam(newRand(1), 3, 4)
	wrongDouble := func(tp *Tape) *Tensor {
		y := tp.output(tp.recording(x), x.Shape...)
		for i, v := range x.Data {
			y.Data[i] = 2 * v
		}
		if y.Grad != nil {
			tp.record(func() {
				for i, g := range y.Grad {
					x.Grad[i] += float32(2.2 * g)
				}
			})
		}
		return y
	}
	if msg := gradCheck([]*Tensor{x}, wrongDouble, 5); msg == "" {
		t.Fatal("a backward off by 10% passed the gradient check")
	}
}

// runCase runs one case's forward and backward on a tape with the given
// thread count and returns the output, every leaf's data after the step
// (running buffers change) and every leaf's gradient, concatenated.
func runCase(c opCase, threads int, misalign bool) (out, state, grads []float32) {
	return runCaseOn(c, NewTape(threads), misalign)
}

// runCaseOn is runCase on a given tape (which it leaves un-Reset).
func runCaseOn(c opCase, tp *Tape, misalign bool) (out, state, grads []float32) {
	r := newRand(42)
	leaves, fwd := c.setup(r, true)
	if misalign {
		for _, l := range leaves {
			l.Data = append(make([]float32, 1, len(l.Data)+1), l.Data...)[1:]
			if l.Grad != nil {
				l.Grad = append(make([]float32, 3, len(l.Grad)+3), l.Grad...)[3:]
			}
		}
	}
	y := fwd(tp)
	w := make([]float32, y.Len())
	for i := range w {
		w[i] = float32(2*r.Float32()) - 1
	}
	tp.Backward(weightedSum(tp, y, w))
	out = append(out, y.Data...)
	for _, l := range leaves {
		state = append(state, l.Data...)
		grads = append(grads, l.Grad...)
	}
	return out, state, grads
}

func TestOpsAreBitwiseIdenticalAcrossThreadsAndAlignment(t *testing.T) {
	for _, c := range opCases {
		t.Run(c.name, func(t *testing.T) {
			refOut, refState, refGrad := runCase(c, 1, false)
			for _, th := range []int{1, 2, 3, 7} {
				for _, mis := range []bool{false, true} {
					out, state, grad := runCase(c, th, mis)
					if !bitsEqual(out, refOut) || !bitsEqual(state, refState) || !bitsEqual(grad, refGrad) {
						t.Errorf("threads %d, misaligned %v: result differs from 1 thread aligned (out %v, state %v, grads %v)",
							th, mis, bitsEqual(out, refOut), bitsEqual(state, refState), bitsEqual(grad, refGrad))
					}
				}
			}
		})
	}
}
