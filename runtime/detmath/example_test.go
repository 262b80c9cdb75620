package detmath_test

import (
	"fmt"

	"github.com/easyscale/easyscale-slurm/runtime/detmath"
)

func ExampleExp() {
	fmt.Println(detmath.Exp(1), detmath.Exp(-1), detmath.Exp(100))
	// Output: 2.7182817 0.36787945 +Inf
}

func ExampleLog() {
	fmt.Println(detmath.Log(1), detmath.Log(2), detmath.Log(0))
	// Output: 0 0.6931472 -Inf
}

func ExampleTanh() {
	fmt.Println(detmath.Tanh(0.5), detmath.Tanh(20))
	// Output: 0.46211717 1
}

// A cosine learning-rate schedule from 0.1 down to 0 over 100 steps.
func ExampleCos64() {
	const peak, steps = 0.1, 100
	for _, step := range []int{0, 50, 100} {
		lr := peak * 0.5 * (1 + detmath.Cos64(3.141592653589793*float64(step)/steps))
		fmt.Printf("step %d lr %.4f\n", step, lr)
	}
	// Output:
	// step 0 lr 0.1000
	// step 50 lr 0.0500
	// step 100 lr 0.0000
}

// AdamW's bias correction 1 - β₂**t at step 10.
func ExamplePow64() {
	fmt.Printf("%.10f\n", 1-detmath.Pow64(0.999, 10))
	// Output: 0.0099551198
}
