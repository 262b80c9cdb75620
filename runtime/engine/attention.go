package engine

import (
	"fmt"
	"math"

	"github.com/easyscale/easyscale-slurm/runtime/detmath"
)

// CausalSelfAttention is multi-head scaled dot-product attention with a
// causal mask (Vaswani et al. 2017, §3.2; torch
// scaled_dot_product_attention with is_causal=True), without the input and
// output projections.
//
// Shapes: qkv [batch·seqLen, 3·D] holds the queries, keys and values side
// by side along the last dimension (q | k | v); each is split into heads
// blocks of D/heads columns. The result is [batch·seqLen, D] with head h in
// columns [h·D/heads, (h+1)·D/heads). For query position i the scores
// s_j = (q_i·k_j)·scale, scale = 1/√(D/heads), are computed for j <= i only
// and softmax-normalised with the row maximum subtracted; the output is
// Σ_j p_j·v_j in increasing j. Every (sample, head) pair runs on its own,
// in parallel. It panics when the shapes disagree or heads does not divide D.
func (tp *Tape) CausalSelfAttention(qkv *Tensor, batch, seqLen, heads int) *Tensor {
	mustRank("CausalSelfAttention", "qkv", qkv, 2)
	if heads < 1 || batch < 0 || seqLen < 1 || qkv.Shape[0] != batch*seqLen || qkv.Shape[1]%(3*heads) != 0 {
		panic(fmt.Sprintf("engine: CausalSelfAttention: qkv %v incompatible with batch %d, seqLen %d, heads %d", qkv.Shape, batch, seqLen, heads))
	}
	a := attnGeom{t: seqLen, d: qkv.Shape[1] / 3, heads: heads}
	a.hd = a.d / heads
	a.scale = float32(1 / math.Sqrt(float64(a.hd)))
	rec := tp.recording(qkv)
	y := tp.output(rec, batch*seqLen, a.d)
	pairs := batch * heads
	var probs []float32 // softmax rows of every pair, [pairs, T, T], kept for backward
	if rec {
		probs = tp.alloc(pairs * seqLen * seqLen)
	}
	work := pairs * seqLen * seqLen * a.hd
	parallelFor(tp.threads, pairs, work, func(lo, hi int) {
		scratch := make([]float32, seqLen*seqLen)
		for pr := lo; pr < hi; pr++ {
			p := scratch
			if probs != nil {
				p = probs[pr*seqLen*seqLen : (pr+1)*seqLen*seqLen]
			}
			a.forward(qkv.Data, y.Data, p, pr/heads, pr%heads)
		}
	})
	if !rec {
		return y
	}
	tp.record(func() {
		parallelFor(tp.threads, pairs, 2*work, func(lo, hi int) {
			s := newAttnScratch(a)
			for pr := lo; pr < hi; pr++ {
				a.backward(qkv.Data, qkv.Grad, y.Grad, probs[pr*seqLen*seqLen:(pr+1)*seqLen*seqLen], pr/heads, pr%heads, s)
			}
		})
	})
	return y
}

// attnGeom is the geometry of one attention call: sequence length, model
// width, head count, head width and score scale.
type attnGeom struct {
	t, d, heads, hd int
	scale           float32
}

// cols returns the offsets in a qkv row of head h's query, key and value
// columns, and in an output row of its output columns.
func (a attnGeom) cols(h int) (q, k, v, o int) {
	return h * a.hd, a.d + h*a.hd, 2*a.d + h*a.hd, h * a.hd
}

// forward computes one (sample b, head h) pair, writing its softmax rows to
// p [T,T] (zero above the diagonal) and its output columns to y.
func (a attnGeom) forward(qkv, y, p []float32, b, h int) {
	qo, ko, vo, oo := a.cols(h)
	w3 := 3 * a.d
	row := func(i int) int { return (b*a.t + i) * w3 }
	for i := range a.t {
		q := qkv[row(i)+qo:][:a.hd]
		pi := p[i*a.t : (i+1)*a.t]
		m := float32(math.Inf(-1))
		for j := 0; j <= i; j++ {
			k := qkv[row(j)+ko:][:a.hd]
			var s float32
			for d, qv := range q {
				s += float32(qv * k[d])
			}
			pi[j] = float32(s * a.scale)
			m = max(m, pi[j])
		}
		var sum float32
		for j := 0; j <= i; j++ {
			pi[j] = detmath.Exp(pi[j] - m)
			sum += pi[j]
		}
		clear(pi[i+1:])
		out := y[(b*a.t+i)*a.d+oo:][:a.hd]
		for j := 0; j <= i; j++ {
			pi[j] /= sum
			v := qkv[row(j)+vo:][:a.hd]
			for d, vv := range v {
				out[d] += float32(pi[j] * vv)
			}
		}
	}
}

// attnScratch holds one goroutine's backward buffers.
type attnScratch struct {
	dp, dq, dk, dv []float32
}

func newAttnScratch(a attnGeom) *attnScratch {
	return &attnScratch{
		dp: make([]float32, a.t), dq: make([]float32, a.hd),
		dk: make([]float32, a.t*a.hd), dv: make([]float32, a.t*a.hd),
	}
}

// backward adds one (b, h) pair's gradients to g (the qkv gradient) from the
// output gradient dy and the pair's softmax rows p:
// dP = dO·Vᵀ, dV = Pᵀ·dO, dS = P⊙(dP - rowsum(P⊙dP))·scale, dQ = dS·K,
// dK = dSᵀ·Q, every sum in increasing index order.
func (a attnGeom) backward(qkv, g, dy, p []float32, b, h int, s *attnScratch) {
	qo, ko, vo, oo := a.cols(h)
	w3 := 3 * a.d
	row := func(i int) int { return (b*a.t + i) * w3 }
	clear(s.dk)
	clear(s.dv)
	for i := range a.t {
		do := dy[(b*a.t+i)*a.d+oo:][:a.hd]
		pi := p[i*a.t : (i+1)*a.t]
		var r float32
		for j := 0; j <= i; j++ {
			v := qkv[row(j)+vo:][:a.hd]
			var dp float32
			for d, dov := range do {
				dp += float32(dov * v[d])
			}
			s.dp[j] = dp
			r += float32(pi[j] * dp)
			dvj := s.dv[j*a.hd:][:a.hd]
			for d, dov := range do {
				dvj[d] += float32(pi[j] * dov)
			}
		}
		clear(s.dq)
		q := qkv[row(i)+qo:][:a.hd]
		for j := 0; j <= i; j++ {
			ds := float32(pi[j]*(s.dp[j]-r)) * a.scale
			k := qkv[row(j)+ko:][:a.hd]
			dkj := s.dk[j*a.hd:][:a.hd]
			for d := range a.hd {
				s.dq[d] += float32(ds * k[d])
				dkj[d] += float32(ds * q[d])
			}
		}
		gq := g[row(i)+qo:][:a.hd]
		for d, v := range s.dq {
			gq[d] += v
		}
	}
	for j := range a.t {
		gk, gv := g[row(j)+ko:][:a.hd], g[row(j)+vo:][:a.hd]
		for d := range a.hd {
			gk[d] += s.dk[j*a.hd+d]
			gv[d] += s.dv[j*a.hd+d]
		}
	}
}
