package optim

import (
	"fmt"

	"github.com/easyscale/easyscale-slurm/runtime/engine"
)

// SGD is stochastic gradient descent with optional momentum, Nesterov
// momentum and L2 weight decay, with the semantics of torch.optim.SGD
// (dampening 0; https://pytorch.org/docs/stable/generated/torch.optim.SGD.html).
// For every element, with gradient g, parameter p and momentum buffer b:
//
//	g = g + WeightDecay·p                  (when WeightDecay != 0)
//	b = Momentum·b + g                     (when Momentum != 0)
//	g = g + Momentum·b  if Nesterov, else g = b
//	p = p - lr·g
//
// each product rounded to float32 before it is added. PyTorch sets b = g on
// the first step; SGD starts b at zero, which gives the same value
// (Momentum·0 + g = g). Build it with NewSGD.
type SGD struct {
	Momentum, WeightDecay float32
	Nesterov              bool
	lens                  []int       // parameter sizes
	bufs                  [][]float32 // momentum buffers, allocated when Momentum != 0
}

var _ Optimizer = (*SGD)(nil)

// NewSGD returns an SGD optimizer for params (their order is the order Step
// must receive them in and the order of the state tensors).
func NewSGD(params []*engine.Tensor, momentum, weightDecay float32, nesterov bool) *SGD {
	return &SGD{Momentum: momentum, WeightDecay: weightDecay, Nesterov: nesterov, lens: lengths(params)}
}

// buffers returns the momentum buffers, allocating zeros on first use.
func (s *SGD) buffers() [][]float32 {
	if s.bufs == nil {
		s.bufs = zeros(s.lens)
	}
	return s.bufs
}

// Step applies one SGD update to params with learning rate lr. It panics
// when params differ in number or sizes from those given to NewSGD, or a
// parameter has no gradient.
func (s *SGD) Step(params []*engine.Tensor, lr float32) {
	checkParams("SGD", params, s.lens)
	for i, p := range params {
		var buf []float32
		if s.Momentum != 0 {
			buf = s.buffers()[i]
		}
		for j, g := range p.Grad {
			if s.WeightDecay != 0 {
				g += float32(s.WeightDecay * p.Data[j])
			}
			if buf != nil {
				buf[j] = float32(s.Momentum*buf[j]) + g
				if s.Nesterov {
					g += float32(s.Momentum * buf[j])
				} else {
					g = buf[j]
				}
			}
			p.Data[j] -= float32(lr * g)
		}
	}
}

// State returns copies of the momentum buffers named "momentum_buffer.<i>"
// for parameter index i, in parameter order; empty without momentum.
func (s *SGD) State() []NamedSlice {
	if s.Momentum == 0 {
		return nil
	}
	return copyState(sgdNames(len(s.lens)), s.buffers())
}

// LoadState restores the momentum buffers from s, which must hold exactly
// the tensors State returns; the error names the first that does not fit.
func (s *SGD) LoadState(st []NamedSlice) error {
	if s.Momentum == 0 {
		return loadState("SGD", nil, nil, st)
	}
	return loadState("SGD", sgdNames(len(s.lens)), s.buffers(), st)
}

func sgdNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("momentum_buffer.%d", i)
	}
	return names
}
