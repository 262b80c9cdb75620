package optim_test

import (
	"fmt"

	"github.com/easyscale/easyscale-slurm/runtime/engine"
	"github.com/easyscale/easyscale-slurm/runtime/optim"
)

// Checkpoint an AdamW optimizer and resume it elsewhere: the resumed copy
// takes the same next step bit for bit.
func ExampleAdamW_State() {
	w := engine.FromSlice([]float32{1, -1}, 2)
	w.Grad = []float32{0.5, 0.25}
	opt := optim.NewAdamW([]*engine.Tensor{w}, 0.9, 0.999, 1e-8, 0.01)
	opt.Step([]*engine.Tensor{w}, 1e-2)

	saved := opt.State() // what a checkpoint stores
	for _, s := range saved {
		fmt.Println(s.Name, len(s.Data))
	}
	w2 := engine.FromSlice(append([]float32(nil), w.Data...), 2)
	w2.Grad = append([]float32(nil), w.Grad...)
	resumed := optim.NewAdamW([]*engine.Tensor{w2}, 0.9, 0.999, 1e-8, 0.01)
	if err := resumed.LoadState(saved); err != nil {
		fmt.Println(err)
		return
	}
	opt.Step([]*engine.Tensor{w}, 1e-2)
	resumed.Step([]*engine.Tensor{w2}, 1e-2)
	fmt.Println(w.Data[0] == w2.Data[0] && w.Data[1] == w2.Data[1], resumed.Steps())
	// Output:
	// step 1
	// exp_avg.0 2
	// exp_avg_sq.0 2
	// true 2
}

// One plain SGD step with momentum 0.9 on p = 1 with gradient 0.5 and
// learning rate 0.1: the buffer starts as the gradient, so p = 1 - 0.05.
func ExampleSGD() {
	p := engine.FromSlice([]float32{1}, 1)
	p.Grad = []float32{0.5}
	opt := optim.NewSGD([]*engine.Tensor{p}, 0.9, 0, false)
	opt.Step([]*engine.Tensor{p}, 0.1)
	fmt.Println(p.Data[0])
	// Output: 0.95
}
