package optim

import (
	"fmt"
	"math"

	"github.com/easyscale/easyscale-slurm/runtime/detmath"
	"github.com/easyscale/easyscale-slurm/runtime/engine"
)

// AdamW is Adam with decoupled weight decay (Loshchilov & Hutter 2019) with
// the semantics of torch.optim.AdamW's single-tensor path (amsgrad off;
// https://pytorch.org/docs/stable/generated/torch.optim.AdamW.html). At step
// t (1-based), for every element with gradient g, parameter p, first moment
// m and second moment v:
//
//	p  = p·(1 - lr·WeightDecay)                 (the factor computed in float64)
//	m  = lerp(m, g, 1-Beta1)                     (torch.lerp: m + w·(g-m) when w < 0.5, else g - (g-m)·(1-w))
//	v  = Beta2·v + (1-Beta2)·g·g
//	c1 = 1 - Beta1^t,  c2 = 1 - Beta2^t          (float64, detmath.Pow64)
//	p  = p - (lr/c1)·m / (√v/√c2 + Eps)          (√v and the quotient in float32)
//
// each product rounded to float32 before it is added. Build it with
// NewAdamW; the step count is part of the state.
type AdamW struct {
	Beta1, Beta2, Eps, WeightDecay float32
	step                           int64
	lens                           []int
	m, v                           [][]float32
}

var _ Optimizer = (*AdamW)(nil)

// maxExactStep is the largest step count a float32 state value holds exactly.
const maxExactStep = 1 << 24

// NewAdamW returns an AdamW optimizer for params (their order is the order
// Step must receive them in and the order of the state tensors). PyTorch's
// defaults are beta1 0.9, beta2 0.999, eps 1e-8, weight decay 0.01.
func NewAdamW(params []*engine.Tensor, beta1, beta2, eps, weightDecay float32) *AdamW {
	lens := lengths(params)
	return &AdamW{Beta1: beta1, Beta2: beta2, Eps: eps, WeightDecay: weightDecay, lens: lens, m: zeros(lens), v: zeros(lens)}
}

// Steps returns how many updates have been applied.
func (a *AdamW) Steps() int64 { return a.step }

// Step applies one AdamW update to params with learning rate lr. It panics
// when params differ in number or sizes from those given to NewAdamW, or a
// parameter has no gradient.
func (a *AdamW) Step(params []*engine.Tensor, lr float32) {
	checkParams("AdamW", params, a.lens)
	a.step++
	t := float64(a.step)
	decay := float32(1 - float64(float64(lr)*float64(a.WeightDecay)))
	w := float32(1 - float64(a.Beta1))
	c2 := float32(1 - float64(a.Beta2))
	bc1 := 1 - detmath.Pow64(float64(a.Beta1), t)
	bc2 := 1 - detmath.Pow64(float64(a.Beta2), t)
	stepSize := float32(float64(lr) / bc1)
	bc2Sqrt := float32(math.Sqrt(bc2))
	for i, p := range params {
		m, v := a.m[i], a.v[i]
		for j, g := range p.Grad {
			pj := float32(p.Data[j] * decay)
			m[j] = lerp(m[j], g, w)
			v[j] = float32(a.Beta2*v[j]) + float32(float32(c2*g)*g)
			denom := float32(math.Sqrt(float64(v[j])))/bc2Sqrt + a.Eps
			p.Data[j] = pj - float32(stepSize*float32(m[j]/denom))
		}
	}
}

// lerp is torch.lerp(start, end, weight) for float32 as PyTorch computes it:
// start + weight·(end-start) when |weight| < 0.5, else
// end - (end-start)·(1-weight).
func lerp(start, end, weight float32) float32 {
	d := end - start
	if weight < 0.5 && weight > -0.5 {
		return start + float32(weight*d)
	}
	return end - float32(d*(1-weight))
}

// State returns the step count as "step" (one value, exact up to 2^24
// steps) followed by "exp_avg.<i>" and "exp_avg_sq.<i>" for each parameter
// index i, in parameter order; all copies.
func (a *AdamW) State() []NamedSlice {
	names, data := a.layout()
	data[0] = []float32{float32(a.step)}
	return copyState(names, data)
}

// LoadState restores the step count and moments from s, which must hold
// exactly the tensors State returns; the error names the first that does
// not fit, or says the step count is not a whole number in [0, 2^24].
func (a *AdamW) LoadState(s []NamedSlice) error {
	names, data := a.layout()
	step := []float32{0}
	data[0] = step
	for _, ns := range s {
		if ns.Name == "step" && len(ns.Data) == 1 {
			if v := ns.Data[0]; !(v >= 0 && v <= maxExactStep && v == float32(math.Floor(float64(v)))) {
				return fmt.Errorf("optim: loading AdamW state: tensor \"step\" holds %v, want a whole number in [0, %d]", v, maxExactStep)
			}
		}
	}
	if err := loadState("AdamW", names, data, s); err != nil {
		return err
	}
	a.step = int64(step[0])
	return nil
}

// layout returns the state names and the slices they map to, with a nil
// placeholder for the step count.
func (a *AdamW) layout() ([]string, [][]float32) {
	names := []string{"step"}
	data := [][]float32{nil}
	for i := range a.lens {
		names = append(names, fmt.Sprintf("exp_avg.%d", i), fmt.Sprintf("exp_avg_sq.%d", i))
		data = append(data, a.m[i], a.v[i])
	}
	return names, data
}
