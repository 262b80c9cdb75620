package optim

import (
	"math"

	"github.com/easyscale/easyscale-slurm/runtime/detmath"
)

// WarmupCosine returns the learning rate at 0-based step: a linear warmup
// followed by a cosine decay (Loshchilov & Hutter 2017, SGDR, without
// restarts), computed in float64 and rounded to float32:
//
//	step < warmup:           base·(step+1)/warmup   (base/warmup at step 0, base at step warmup-1)
//	warmup <= step < total:  min + (base-min)·(1 + cos(π·(step-warmup)/(total-warmup)))/2
//	step >= total:           min
//
// so the rate is base at step warmup and reaches min at step total. A
// negative step counts as 0; warmup <= 0 means no warmup; total <= warmup
// means the rate drops to min when the warmup ends.
func WarmupCosine(step, warmup, total int, base, min float32) float32 {
	step = max(step, 0)
	b, m := float64(base), float64(min)
	switch {
	case step < warmup:
		return float32(b * float64(step+1) / float64(warmup))
	case step >= total:
		return min
	}
	progress := float64(step-warmup) / float64(total-warmup)
	return float32(m + float64(float64((b-m)*(1+detmath.Cos64(math.Pi*progress)))/2))
}
