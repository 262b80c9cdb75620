package engine_test

import (
	"fmt"

	"github.com/easyscale/easyscale-slurm/runtime/engine"
)

// A 2×3 times 3×2 product, then the same product accumulated into C with B
// stored transposed.
func ExampleGemm() {
	a := []float32{1, 2, 3, 4, 5, 6}  // 2×3
	b := []float32{1, 0, 0, 1, 1, 1}  // 3×2
	bt := []float32{1, 0, 1, 0, 1, 1} // the same B stored 2×3 (transposed)
	c := make([]float32, 4)           // 2×2
	engine.Gemm(false, false, 2, 2, 3, a, 3, b, 2, c, 2, false, 1)
	fmt.Println(c)
	engine.Gemm(false, true, 2, 2, 3, a, 3, bt, 3, c, 2, true, 4)
	fmt.Println(c)
	// Output:
	// [4 5 10 11]
	// [8 10 20 22]
}
