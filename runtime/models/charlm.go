package models

import (
	"math"
	"strconv"
	"strings"

	"github.com/easyscale/easyscale-slurm/runtime/engine"
)

// CharLM is a small GPT-style causal transformer over characters:
// token and learned position embeddings, Layers pre-LayerNorm blocks of
// causal multi-head self-attention and a GELU MLP (4·D wide), each sublayer
// followed by dropout and a residual add, a final LayerNorm and a linear
// head to the vocabulary (Radford et al. 2019, GPT-2 architecture).
type CharLM struct {
	vocab, seqLen, d, heads, layers int
	dropout                         float32
	params                          []Named
}

// NewCharLM returns a CharLM with zero parameters; call Init before
// training. vocab is the number of symbols, seqLen the context length in
// tokens, d the model width (divisible by heads).
func NewCharLM(vocab, seqLen, d, heads, layers int, dropout float32) *CharLM {
	n := &CharLM{vocab: vocab, seqLen: seqLen, d: d, heads: heads, layers: layers, dropout: dropout}
	add := func(name string, shape ...int) { n.params = append(n.params, Named{name, engine.NewParam(shape...)}) }
	add("tok_emb.weight", vocab, d)
	add("pos_emb.weight", seqLen, d)
	for l := 0; l < layers; l++ {
		pre := "block" + strconv.Itoa(l) + "."
		add(pre+"ln1.weight", d)
		add(pre+"ln1.bias", d)
		add(pre+"attn.qkv.weight", 3*d, d)
		add(pre+"attn.qkv.bias", 3*d)
		add(pre+"attn.proj.weight", d, d)
		add(pre+"attn.proj.bias", d)
		add(pre+"ln2.weight", d)
		add(pre+"ln2.bias", d)
		add(pre+"mlp.fc.weight", 4*d, d)
		add(pre+"mlp.fc.bias", 4*d)
		add(pre+"mlp.proj.weight", d, 4*d)
		add(pre+"mlp.proj.bias", d)
	}
	add("ln_f.weight", d)
	add("ln_f.bias", d)
	add("head.weight", vocab, d)
	add("head.bias", vocab)
	return n
}

// Params implements Net.
func (n *CharLM) Params() []Named { return n.params }

// NewBuffers implements Net; the transformer has no buffers.
func (n *CharLM) NewBuffers() []Named { return nil }

// Init sets embeddings U(-0.02·√3, 0.02·√3) (standard deviation 0.02, as
// GPT-2), LayerNorm weight 1 and bias 0, and linear layers PyTorch's default
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)). src(i) is the source of parameter i.
func (n *CharLM) Init(src func(param int) engine.Uniform) {
	for i, p := range n.params {
		switch {
		case hasSuffix(p.Name, "emb.weight"):
			engine.InitUniform(p.T, float32(0.02*math.Sqrt(3)), src(i))
		case hasSuffix(p.Name, "ln1.weight"), hasSuffix(p.Name, "ln2.weight"), p.Name == "ln_f.weight":
			fill(p.T.Data, 1)
		case hasSuffix(p.Name, "ln1.bias"), hasSuffix(p.Name, "ln2.bias"), p.Name == "ln_f.bias":
			fill(p.T.Data, 0)
		default:
			fanIn := p.T.Shape[len(p.T.Shape)-1]
			if len(p.T.Shape) == 1 { // a bias: fan-in is the matching weight's
				fanIn = n.params[i-1].T.Shape[1]
			}
			engine.InitUniform(p.T, float32(1/math.Sqrt(float64(fanIn))), src(i))
		}
	}
}

// Forward implements Net. mb.IDs and mb.Targets hold Batch×SeqLen tokens.
func (n *CharLM) Forward(tp *engine.Tape, _ []Named, mb *MicroBatch, dropout DropoutSource, training bool) (loss, logits *engine.Tensor) {
	p := n.params
	x := tp.Embedding(mb.IDs, p[0].T)
	x = tp.AddPositional(x, p[1].T, mb.Batch, mb.SeqLen)
	drop := func(t *engine.Tensor, layer int) *engine.Tensor {
		if !training || n.dropout == 0 {
			return t
		}
		return tp.Dropout(t, n.dropout, dropout(layer))
	}
	for l := 0; l < n.layers; l++ {
		b := p[2+12*l : 2+12*(l+1)]
		a := tp.LayerNorm(x, b[0].T, b[1].T, 1e-5)
		a = tp.Linear(a, b[2].T, b[3].T)
		a = tp.CausalSelfAttention(a, mb.Batch, mb.SeqLen, n.heads)
		a = drop(tp.Linear(a, b[4].T, b[5].T), 2*l)
		x = tp.Add(x, a)
		m := tp.LayerNorm(x, b[6].T, b[7].T, 1e-5)
		m = tp.GELU(tp.Linear(m, b[8].T, b[9].T))
		m = drop(tp.Linear(m, b[10].T, b[11].T), 2*l+1)
		x = tp.Add(x, m)
	}
	k := len(p)
	x = tp.LayerNorm(x, p[k-4].T, p[k-3].T, 1e-5)
	logits = tp.Linear(x, p[k-2].T, p[k-1].T)
	return tp.SoftmaxCrossEntropy(logits, mb.Targets), logits
}

func hasSuffix(s, suf string) bool { return strings.HasSuffix(s, suf) }
