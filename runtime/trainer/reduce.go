package trainer

import "github.com/easyscale/easyscale-slurm/runtime/vecf32"

// Reducer combines the gradients of all logical workers into the one
// gradient every replica applies.
//
// Contract: the result must depend only on the per-EST gradients and their
// EST ids, never on how ESTs are spread over physical workers. The in-process
// implementation is canonicalReduce; a network transport (TCP pipeline along
// the ranks, whose ESTs are contiguous in rank order) implements the same
// order.
type Reducer interface {
	// Reduce writes into dst the reduced gradient of grads, where grads[e]
	// is logical worker e's gradient (all of len(dst)) and n the number of
	// logical workers. It may use up to parts goroutines.
	Reduce(dst []float32, grads [][]float32, parts int)
}

// canonicalReduce is the reference reduction: for every element j,
//
//	s = g_0[j]; s = float32(s + g_1[j]); ...; s = float32(s + g_{N-1}[j])
//	dst[j] = float32(s * (1/N))
//
// a sequential float32 sum in increasing EST order followed by the mean.
// Numerics: the same rounding as accumulating N micro-batch gradients in a
// loop (what gradient accumulation does on one GPU); the relative error is
// bounded by about N·2^-24 of the sum of magnitudes, negligible for the
// N ≤ 4096 the job file allows. Splitting j across goroutines does not
// change any element's order of operations.
type canonicalReduce struct{}

func (canonicalReduce) Reduce(dst []float32, grads [][]float32, parts int) {
	scale := float32(1) / float32(len(grads))
	parallelRanges(len(dst), parts, func(lo, hi int) {
		// Blocks of reduceBlock elements keep the partial sums in the L1
		// cache across the N passes; each element's sum is unchanged.
		for b := lo; b < hi; b += reduceBlock {
			e := min(b+reduceBlock, hi)
			d := dst[b:e]
			copy(d, grads[0][b:e])
			for _, g := range grads[1:] {
				vecf32.Add(d, g[b:e])
			}
			vecf32.Scale(d, scale)
		}
	})
}

// reduceRest finishes canonicalReduce's sum when dst already holds its
// first prefix terms, g_0 + ... + g_{prefix-1} unscaled (as
// Replica.AccumulateEST leaves them): it adds grads[prefix:] in EST order
// and scales by 1/len(grads), giving canonicalReduce's bits. It may use up
// to parts goroutines.
func reduceRest(dst []float32, prefix int, grads [][]float32, parts int) {
	if prefix == 0 {
		canonicalReduce{}.Reduce(dst, grads, parts)
		return
	}
	scale := float32(1) / float32(len(grads))
	parallelRanges(len(dst), parts, func(lo, hi int) {
		for b := lo; b < hi; b += reduceBlock {
			e := min(b+reduceBlock, hi)
			d := dst[b:e]
			for _, g := range grads[prefix:] {
				vecf32.Add(d, g[b:e])
			}
			vecf32.Scale(d, scale)
		}
	})
}

// reduceBlock is the number of gradient elements canonicalReduce sums
// over all logical workers at a time (8 KiB of float32).
const reduceBlock = 2048

// groupedReduce is the ablation that shows why the order matters: each
// physical worker first sums its own ESTs, then the partial sums are added
// in rank order, as a naive "local accumulation + all-reduce" would do. Its
// result changes with the placement.
type groupedReduce struct {
	groups [][]int // EST ids per physical worker
}

func (r groupedReduce) Reduce(dst []float32, grads [][]float32, parts int) {
	scale := float32(1) / float32(len(grads))
	parallelRanges(len(dst), parts, func(lo, hi int) {
		partial := make([]float32, hi-lo)
		first := true
		for _, g := range r.groups {
			if len(g) == 0 {
				continue
			}
			copy(partial, grads[g[0]][lo:hi])
			for _, e := range g[1:] {
				for j := lo; j < hi; j++ {
					partial[j-lo] = partial[j-lo] + grads[e][j]
				}
			}
			if first {
				copy(dst[lo:hi], partial)
				first = false
				continue
			}
			for j := lo; j < hi; j++ {
				dst[j] = dst[j] + partial[j-lo]
			}
		}
		for j := lo; j < hi; j++ {
			dst[j] = dst[j] * scale
		}
	})
}
