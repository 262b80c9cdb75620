package engine_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/easyscale/easyscale-slurm/runtime/engine"
	"github.com/easyscale/easyscale-slurm/runtime/optim"
)

// Fit y = 2·x₀ - 3·x₁ + 1 with one Linear layer and SGD with momentum,
// minimising the mean squared error built from tape ops.
func Example() {
	src := rand.New(rand.NewPCG(1, 2)) // any Uniform works; training uses runtime/rng
	w, b := engine.NewParam(1, 2), engine.NewParam(1)
	engine.InitUniform(w, engine.FanInBound(2), src)
	engine.InitUniform(b, engine.FanInBound(2), src)
	opt := optim.NewSGD([]*engine.Tensor{w, b}, 0.9, 0, false)

	const batch = 16
	x := engine.NewTensor(batch, 2)
	y := make([]float32, batch)
	for i := range batch {
		x.Data[2*i], x.Data[2*i+1] = float32(2*src.Float32())-1, float32(2*src.Float32())-1
		y[i] = float32(2*x.Data[2*i]) - float32(3*x.Data[2*i+1]) + 1
	}
	tp := engine.NewTape(2)
	for step := range 100 {
		w.ZeroGrad()
		b.ZeroGrad()
		pred := tp.Linear(x, w, b) // [batch, 1]
		// loss = mean((pred - y)²), written as a sum of ops
		diff := tp.Add(pred, engine.FromSlice(negate(y), batch, 1))
		loss := meanSquare(tp, diff)
		tp.Backward(loss)
		opt.Step([]*engine.Tensor{w, b}, 0.1)
		if step%33 == 0 {
			fmt.Printf("step %2d loss %.4f\n", step, loss.Data[0])
		}
		tp.Reset()
	}
	fmt.Printf("w = [%.2f %.2f], b = %.2f\n", w.Data[0], w.Data[1], b.Data[0])
	// Output:
	// step  0 loss 5.0431
	// step 33 loss 0.0777
	// step 66 loss 0.0015
	// step 99 loss 0.0001
	// w = [2.00 -2.99], b = 1.00
}

func negate(v []float32) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = -x
	}
	return out
}

// meanSquare returns mean(d²) as a [1] tensor for d [B,1]: viewed as a
// [1,B] row, Linear(row, row) is row·rowᵀ = Σ d², and a second Linear with
// the constant weight 1/B takes the mean.
func meanSquare(tp *engine.Tape, d *engine.Tensor) *engine.Tensor {
	n := d.Len()
	row := tp.Reshape(d, 1, n)
	sq := tp.Linear(row, row, nil) // [1,1] = Σ d²
	return tp.Reshape(tp.Linear(sq, engine.FromSlice([]float32{1 / float32(n)}, 1, 1), nil), 1)
}
