package cluster

import (
	"fmt"
	"runtime"

	"github.com/easyscale/easyscale-slurm/runtime/optim"
	"github.com/easyscale/easyscale-slurm/runtime/trainer"
)

func numCPU() int { return runtime.GOMAXPROCS(0) }

// packState flattens a replica's parameters and optimizer state (in
// canonical order) into one slice, with the optimizer tensors' names and
// lengths: what a joining worker receives.
func packState(r *trainer.Replica) (state []float32, names []string, lens []int) {
	for _, p := range r.Params {
		state = append(state, p.T.Data...)
	}
	for _, s := range r.Opt.State() {
		names = append(names, s.Name)
		lens = append(lens, len(s.Data))
		state = append(state, s.Data...)
	}
	return state, names, lens
}

// loadState is the inverse of packState.
func loadState(r *trainer.Replica, state []float32, names []string, lens []int) error {
	off := 0
	for _, p := range r.Params {
		if off+p.T.Len() > len(state) {
			return fmt.Errorf("model state too short for parameter %s", p.Name)
		}
		off += copy(p.T.Data, state[off:off+p.T.Len()])
	}
	if len(names) != len(lens) {
		return fmt.Errorf("optimizer state: %d names for %d lengths", len(names), len(lens))
	}
	st := make([]optim.NamedSlice, len(names))
	for i, n := range names {
		if lens[i] < 0 || off+lens[i] > len(state) {
			return fmt.Errorf("optimizer state %s: bad length %d", n, lens[i])
		}
		st[i] = optim.NamedSlice{Name: n, Data: append([]float32(nil), state[off:off+lens[i]]...)}
		off += lens[i]
	}
	if off != len(state) {
		return fmt.Errorf("model state has %d values, %d expected", len(state), off)
	}
	if err := r.Opt.LoadState(st); err != nil {
		return fmt.Errorf("loading optimizer state: %w", err)
	}
	return nil
}

// bufferLen is the number of buffer values of one EST context.
func bufferLen(c *trainer.ESTContext) int {
	n := 0
	for _, b := range c.Buffers {
		n += b.T.Len()
	}
	return n
}

// gatherBuffers concatenates the buffers of ests, in order, into dst.
func gatherBuffers(dst []float32, ests []*trainer.ESTContext) {
	off := 0
	for _, c := range ests {
		for _, b := range c.Buffers {
			off += copy(dst[off:], b.T.Data)
		}
	}
}

// scatterBuffers copies src into the buffers of ests, in order.
func scatterBuffers(ests []*trainer.ESTContext, src []float32) {
	off := 0
	for _, c := range ests {
		for _, b := range c.Buffers {
			off += copy(b.T.Data, src[off:])
		}
	}
}
