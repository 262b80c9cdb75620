package engine

import "math"

// InitUniform fills t.Data with draws from U(-bound, bound), one
// src.Float32() per element in row-major order, as -bound + u·(2·bound)
// (the form of torch.Tensor.uniform_: from + u·(to-from)).
func InitUniform(t *Tensor, bound float32, src Uniform) {
	width := 2 * bound
	for i := range t.Data {
		t.Data[i] = -bound + float32(src.Float32()*width)
	}
}

// FanInBound returns 1/√fanIn, the bound PyTorch's default initialisation
// gives Linear and Conv2d weights and biases (kaiming_uniform with
// a = √5 yields U(-1/√fanIn, 1/√fanIn)). fanIn is In for Linear and C·KH·KW
// for Conv2d; it returns 0 when fanIn < 1.
func FanInBound(fanIn int) float32 {
	if fanIn < 1 {
		return 0
	}
	return float32(1 / math.Sqrt(float64(fanIn)))
}
