package engine

import (
	"fmt"
	"slices"
)

// Tensor is a dense row-major float32 array.
//
// Shape lists the extent of every dimension (outermost first); Data holds
// the product of Shape elements. Grad has the same length as Data when the
// tensor needs a gradient (a parameter from NewParam, or an op output that
// depends on one) and is nil otherwise.
type Tensor struct {
	Shape []int
	Data  []float32
	Grad  []float32
}

// NewTensor returns a zero tensor of the given shape without a gradient.
// It panics if a dimension is negative.
func NewTensor(shape ...int) *Tensor {
	return &Tensor{Shape: cloneShape(shape), Data: make([]float32, shapeLen("NewTensor", shape))}
}

// NewParam returns a zero trainable parameter of the given shape: Grad is
// allocated (zeros) so Tape.Backward accumulates into it. It panics if a
// dimension is negative.
func NewParam(shape ...int) *Tensor {
	t := NewTensor(shape...)
	t.Grad = make([]float32, len(t.Data))
	return t
}

// FromSlice wraps data (not copied) as a tensor of the given shape without a
// gradient. It panics if len(data) is not the product of shape.
func FromSlice(data []float32, shape ...int) *Tensor {
	if n := shapeLen("FromSlice", shape); n != len(data) {
		panic(fmt.Sprintf("engine: FromSlice: %d values for shape %v (want %d)", len(data), shape, n))
	}
	return &Tensor{Shape: cloneShape(shape), Data: data}
}

// Len returns the number of elements, len(t.Data).
func (t *Tensor) Len() int { return len(t.Data) }

// ZeroGrad sets every element of Grad to zero; it does nothing when Grad is nil.
func (t *Tensor) ZeroGrad() { clear(t.Grad) }

// needsGrad reports whether gradients must flow into t.
func (t *Tensor) needsGrad() bool { return t != nil && t.Grad != nil }

// shapeLen returns the element count of shape, panicking on a negative
// dimension; op names the caller for the message.
func shapeLen(op string, shape []int) int {
	n := 1
	for _, d := range shape {
		if d < 0 {
			panic(fmt.Sprintf("engine: %s: negative dimension in shape %v", op, shape))
		}
		n *= d
	}
	return n
}

func cloneShape(shape []int) []int { return append([]int(nil), shape...) }

// mustRank panics unless t has the given rank; op names the caller.
func mustRank(op, name string, t *Tensor, rank int) {
	if t == nil || len(t.Shape) != rank {
		var s []int
		if t != nil {
			s = t.Shape
		}
		panic(fmt.Sprintf("engine: %s: %s must have rank %d, got shape %v", op, name, rank, s))
	}
}

// mustShape panics unless t has exactly the given shape.
func mustShape(op, name string, t *Tensor, shape ...int) {
	if t == nil || !slices.Equal(t.Shape, shape) {
		var s []int
		if t != nil {
			s = t.Shape
		}
		panic(fmt.Sprintf("engine: %s: %s must have shape %v, got %v", op, name, shape, s))
	}
}
