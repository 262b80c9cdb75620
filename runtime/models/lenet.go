package models

import (
	"fmt"
	"math"

	"github.com/easyscale/easyscale-slurm/runtime/engine"
)

// LeNet is a LeNet-5-style CNN for 28×28 grey images with BatchNorm:
//
//	conv 5×5 (1→C1) → BN → ReLU → maxpool 2 →
//	conv 5×5 (C1→C2) → BN → ReLU → maxpool 2 →
//	linear (C2·4·4 → H) → ReLU → dropout(p) → linear (H → 10)
//
// Convolutions have no bias (BatchNorm follows). BatchNorm uses PyTorch's
// defaults: momentum 0.1, eps 1e-5.
type LeNet struct {
	c1, c2, hidden int
	dropout        float32
	params         []Named
}

const (
	bnMomentum = 0.1
	bnEps      = 1e-5
	mnistSide  = 28
	classes    = 10
)

// NewLeNet returns a LeNet with zero parameters; call Init before training.
// channels are C1 and C2, hidden is H, dropout is p in [0,1).
func NewLeNet(c1, c2, hidden int, dropout float32) *LeNet {
	n := &LeNet{c1: c1, c2: c2, hidden: hidden, dropout: dropout}
	n.params = []Named{
		{"conv1.weight", engine.NewParam(c1, 1, 5, 5)},
		{"bn1.weight", engine.NewParam(c1)},
		{"bn1.bias", engine.NewParam(c1)},
		{"conv2.weight", engine.NewParam(c2, c1, 5, 5)},
		{"bn2.weight", engine.NewParam(c2)},
		{"bn2.bias", engine.NewParam(c2)},
		{"fc1.weight", engine.NewParam(hidden, c2*16)},
		{"fc1.bias", engine.NewParam(hidden)},
		{"fc2.weight", engine.NewParam(classes, hidden)},
		{"fc2.bias", engine.NewParam(classes)},
	}
	return n
}

// Params implements Net.
func (n *LeNet) Params() []Named { return n.params }

// NewBuffers implements Net: running mean (zeros) and variance (ones) of
// both BatchNorm layers.
func (n *LeNet) NewBuffers() []Named {
	b := []Named{
		{"bn1.running_mean", engine.NewTensor(n.c1)},
		{"bn1.running_var", engine.NewTensor(n.c1)},
		{"bn2.running_mean", engine.NewTensor(n.c2)},
		{"bn2.running_var", engine.NewTensor(n.c2)},
	}
	fill(b[1].T.Data, 1)
	fill(b[3].T.Data, 1)
	return b
}

// Init sets PyTorch's default initialisation: weights and biases of conv
// and linear layers U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (kaiming_uniform with
// a=sqrt(5)), BatchNorm weight 1 and bias 0. src(i) is the uniform source of
// parameter number i.
func (n *LeNet) Init(src func(param int) engine.Uniform) {
	fanIn := map[string]int{
		"conv1.weight": 25, "conv2.weight": n.c1 * 25,
		"fc1.weight": n.c2 * 16, "fc1.bias": n.c2 * 16,
		"fc2.weight": n.hidden, "fc2.bias": n.hidden,
	}
	for i, p := range n.params {
		switch p.Name {
		case "bn1.weight", "bn2.weight":
			fill(p.T.Data, 1)
		case "bn1.bias", "bn2.bias":
			fill(p.T.Data, 0)
		default:
			engine.InitUniform(p.T, float32(1/math.Sqrt(float64(fanIn[p.Name]))), src(i))
		}
	}
}

// Forward implements Net. mb.X must be [B,1,28,28] and buffers must come
// from NewBuffers.
func (n *LeNet) Forward(tp *engine.Tape, buffers []Named, mb *MicroBatch, dropout DropoutSource, training bool) (loss, logits *engine.Tensor) {
	if mb.X == nil || len(mb.X.Shape) != 4 || mb.X.Shape[2] != mnistSide || mb.X.Shape[3] != mnistSide {
		panic(fmt.Sprintf("models: LeNet needs images [B,1,28,28], got %v", mb.X))
	}
	p := n.params
	x := tp.Conv2d(mb.X, p[0].T, nil, 1, 0)
	x = tp.BatchNorm(x, p[1].T, p[2].T, buffers[0].T, buffers[1].T, bnMomentum, bnEps, training)
	x = tp.MaxPool2d(tp.ReLU(x), 2, 2)
	x = tp.Conv2d(x, p[3].T, nil, 1, 0)
	x = tp.BatchNorm(x, p[4].T, p[5].T, buffers[2].T, buffers[3].T, bnMomentum, bnEps, training)
	x = tp.MaxPool2d(tp.ReLU(x), 2, 2)
	x = tp.Reshape(x, mb.Batch, n.c2*16)
	x = tp.ReLU(tp.Linear(x, p[6].T, p[7].T))
	if training && n.dropout > 0 {
		x = tp.Dropout(x, n.dropout, dropout(0))
	}
	logits = tp.Linear(x, p[8].T, p[9].T)
	return tp.SoftmaxCrossEntropy(logits, mb.Targets), logits
}

func fill(s []float32, v float32) {
	for i := range s {
		s[i] = v
	}
}
