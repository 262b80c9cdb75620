package trainer

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestReduceRestGivesTheCanonicalBits checks that summing the first
// prefix gradients as AccumulateEST does (a copy, then float32 adds) and
// finishing with reduceRest gives canonicalReduce's bits, for every prefix
// and goroutine count, on values whose sum depends on the order.
func TestReduceRestGivesTheCanonicalBits(t *testing.T) {
	const n, length = 7, 5000
	r := rand.New(rand.NewPCG(1, 2))
	grads := make([][]float32, n)
	for e := range grads {
		grads[e] = make([]float32, length)
		for j := range grads[e] {
			grads[e][j] = float32(math.Ldexp(r.Float64()-0.5, r.IntN(40)-20))
		}
	}
	grads[3][17] = float32(math.Inf(1))
	grads[5][18] = float32(math.NaN())
	want := make([]float32, length)
	canonicalReduce{}.Reduce(want, grads, 1)
	for _, parts := range []int{1, 3} {
		for prefix := 0; prefix <= n; prefix++ {
			got := make([]float32, length)
			for e := range prefix {
				if e == 0 {
					copy(got, grads[0])
					continue
				}
				for j := range got {
					got[j] += grads[e][j]
				}
			}
			reduceRest(got, prefix, grads, parts)
			for j := range got {
				if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
					t.Fatalf("parts %d prefix %d: element %d is %v, canonical %v", parts, prefix, j, got[j], want[j])
				}
			}
		}
	}
}
