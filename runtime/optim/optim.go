// Package optim holds the optimizers and the learning-rate schedule of the
// deterministic engine: SGD with momentum, Nesterov and weight decay,
// AdamW, and linear warmup followed by cosine decay.
//
// Every update is elementwise, so it is bitwise reproducible whatever runs
// it; products that feed a sum are rounded explicitly (float32(a*b) + c) so
// no architecture fuses them into a multiply-add, and powers and cosines
// come from runtime/detmath.
package optim

import (
	"fmt"

	"github.com/easyscale/easyscale-slurm/runtime/engine"
)

// Optimizer updates parameters in place from their gradients.
type Optimizer interface {
	// Step applies one update to params in place using p.Grad and learning
	// rate lr. Elementwise, deterministic. params must be the list the
	// optimizer was built for, in the same order.
	Step(params []*engine.Tensor, lr float32)
	// State returns copies of the optimizer's state tensors in a canonical
	// order with stable names (for checkpoints).
	State() []NamedSlice
	// LoadState restores the tensors State returns. It checks every tensor
	// before changing anything and returns an error naming the first
	// missing, unexpected or mismatched tensor.
	LoadState(s []NamedSlice) error
}

// NamedSlice is one named state tensor of an optimizer, flattened.
type NamedSlice struct {
	Name string
	Data []float32
}

// copyState returns deep copies of named slices.
func copyState(names []string, data [][]float32) []NamedSlice {
	out := make([]NamedSlice, len(names))
	for i, n := range names {
		out[i] = NamedSlice{Name: n, Data: append([]float32(nil), data[i]...)}
	}
	return out
}

// loadState copies s into dst (whose names are given) after checking that
// s holds exactly those names with matching lengths; who names the
// optimizer in errors. Nothing is written unless every check passes.
func loadState(who string, names []string, dst [][]float32, s []NamedSlice) error {
	byName := make(map[string]int, len(s))
	for i, ns := range s {
		if _, dup := byName[ns.Name]; dup {
			return fmt.Errorf("optim: loading %s state: tensor %q appears twice", who, ns.Name)
		}
		byName[ns.Name] = i
	}
	for i, n := range names {
		j, ok := byName[n]
		if !ok {
			return fmt.Errorf("optim: loading %s state: tensor %q is missing", who, n)
		}
		if len(s[j].Data) != len(dst[i]) {
			return fmt.Errorf("optim: loading %s state: tensor %q has %d values, want %d", who, n, len(s[j].Data), len(dst[i]))
		}
	}
	if len(s) != len(names) {
		known := make(map[string]bool, len(names))
		for _, n := range names {
			known[n] = true
		}
		for _, ns := range s {
			if !known[ns.Name] {
				return fmt.Errorf("optim: loading %s state: unexpected tensor %q", who, ns.Name)
			}
		}
	}
	for i, n := range names {
		copy(dst[i], s[byName[n]].Data)
	}
	return nil
}

// lengths returns every parameter's element count.
func lengths(params []*engine.Tensor) []int {
	n := make([]int, len(params))
	for i, p := range params {
		n[i] = p.Len()
	}
	return n
}

// zeros allocates one zero buffer per length.
func zeros(lens []int) [][]float32 {
	b := make([][]float32, len(lens))
	for i, n := range lens {
		b[i] = make([]float32, n)
	}
	return b
}

// checkParams panics unless params match the sizes the optimizer was built
// with and all have gradients: a different parameter list is a programming
// error.
func checkParams(who string, params []*engine.Tensor, lens []int) {
	if len(params) != len(lens) {
		panic(fmt.Sprintf("optim: %s.Step: %d parameters, built for %d", who, len(params), len(lens)))
	}
	for i, p := range params {
		if p.Len() != lens[i] || len(p.Grad) != p.Len() {
			panic(fmt.Sprintf("optim: %s.Step: parameter %d has %d values and %d gradients, built for %d", who, i, p.Len(), len(p.Grad), lens[i]))
		}
	}
}
