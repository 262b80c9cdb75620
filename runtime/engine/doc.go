// Package engine is the deterministic CPU training engine: float32 tensors,
// a tape for reverse-mode automatic differentiation and the layers the
// examples need (Linear, Conv2d, MaxPool2d, ReLU, GELU, Dropout, BatchNorm,
// LayerNorm, Embedding, causal self-attention, softmax cross-entropy).
//
// # Determinism
//
// Every result is bitwise identical for any goroutine count, any memory
// alignment of the inputs and on amd64 and arm64 (EasyScale, arXiv
// 2208.14228, §3: an accuracy-consistent elastic job must not depend on how
// many physical workers run it). The code keeps three rules:
//
//   - every sum runs in one fixed order that does not depend on the thread
//     count: reductions over the batch (weight and bias gradients, BatchNorm
//     statistics) run sequentially inside one goroutine, and work is split
//     across goroutines by output elements only;
//   - every product that feeds an addition is rounded explicitly, written
//     float32(a*b)+c, so the compiler cannot fuse it into a multiply-add
//     (the Go specification allows fusion unless an explicit conversion
//     rounds the product);
//   - transcendental functions come from runtime/detmath, never from package
//     math (math.Sqrt is correctly rounded everywhere and is used).
//
// # Usage
//
// A Tape records the backward closure of every op in order. Parameters are
// created with NewParam (their Grad is allocated); an op's output needs a
// gradient when any input does. Backward(loss) accumulates d(loss)/d(param)
// into every parameter's Grad; Reset forgets the recorded ops so the tape can
// serve the next micro-batch.
//
// Shape mismatches and out-of-range indices are programming errors and panic
// with a message naming the op; nothing in this package reads outside input.
package engine
