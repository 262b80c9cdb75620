package engine

import (
	"fmt"
	"testing"
)

// leNet is a LeNet-5-style network with BatchNorm and dropout, the shape of
// the MNIST example, for benchmarks.
type leNet struct {
	c1w, c1b, bn1g, bn1b, bn1m, bn1v *Tensor
	c2w, c2b, bn2g, bn2b, bn2m, bn2v *Tensor
	f1w, f1b, f2w, f2b, f3w, f3b     *Tensor
}

func newLeNet() *leNet {
	r := newRand(7)
	n := &leNet{
		c1w: randParam(r, 6, 1, 5, 5), c1b: randParam(r, 6), bn1g: randParam(r, 6), bn1b: randParam(r, 6),
		bn1m: NewTensor(6), bn1v: NewTensor(6),
		c2w: randParam(r, 16, 6, 5, 5), c2b: randParam(r, 16), bn2g: randParam(r, 16), bn2b: randParam(r, 16),
		bn2m: NewTensor(16), bn2v: NewTensor(16),
		f1w: randParam(r, 120, 400), f1b: randParam(r, 120), f2w: randParam(r, 84, 120), f2b: randParam(r, 84),
		f3w: randParam(r, 10, 84), f3b: randParam(r, 10),
	}
	fill(n.bn1v.Data, 1)
	fill(n.bn2v.Data, 1)
	return n
}

// loss runs the forward pass on x [B,1,28,28] and returns the mean
// cross-entropy against targets.
func (n *leNet) loss(tp *Tape, x *Tensor, targets []int32, src Uniform) *Tensor {
	h := tp.Conv2d(x, n.c1w, n.c1b, 1, 2)
	h = tp.MaxPool2d(tp.ReLU(tp.BatchNorm(h, n.bn1g, n.bn1b, n.bn1m, n.bn1v, 0.1, 1e-5, true)), 2, 2)
	h = tp.Conv2d(h, n.c2w, n.c2b, 1, 0)
	h = tp.MaxPool2d(tp.ReLU(tp.BatchNorm(h, n.bn2g, n.bn2b, n.bn2m, n.bn2v, 0.1, 1e-5, true)), 2, 2)
	h = tp.Reshape(h, x.Shape[0], 400)
	h = tp.Dropout(tp.ReLU(tp.Linear(h, n.f1w, n.f1b)), 0.25, src)
	h = tp.ReLU(tp.Linear(h, n.f2w, n.f2b))
	return tp.SoftmaxCrossEntropy(tp.Linear(h, n.f3w, n.f3b), targets)
}

// BenchmarkLeNetStep measures one forward and backward pass of the MNIST
// LeNet on a micro-batch of 32 images.
func BenchmarkLeNetStep(b *testing.B) {
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			r := newRand(1)
			net := newLeNet()
			x := randConst(r, 32, 1, 28, 28)
			targets := make([]int32, 32)
			for i := range targets {
				targets[i] = int32(i % 10)
			}
			tp := NewTape(threads)
			b.ReportAllocs()
			for b.Loop() {
				tp.Backward(net.loss(tp, x, targets, r))
				tp.Reset()
			}
			b.ReportMetric(float64(b.N)*32/b.Elapsed().Seconds(), "samples/s")
		})
	}
}
