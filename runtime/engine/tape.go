package engine

import "fmt"

// Tape records the backward closure of every differentiable op in the order
// the ops ran, for reverse-mode automatic differentiation. Ops are methods
// on Tape; each returns a new tensor.
//
// A recording tape keeps every saved activation and intermediate gradient
// until Reset: call Reset after each Backward, and use
// SetGradEnabled(false) for evaluation so nothing is kept. Those internal
// buffers are pooled and reused after Reset.
//
// A Tape is not safe for concurrent use; each logical worker owns its own.
// The ops themselves run on up to Threads() goroutines, splitting work by
// output elements only, so results do not depend on the thread count.
type Tape struct {
	threads  int
	ops      []func()
	disabled bool
	reuse    bool // op outputs' Data come from the pool too (SetReuseOutputs)

	// Buffers that only recorded backward closures read (saved
	// activations, intermediate gradients) come from a pool keyed by
	// length and return to it on Reset, so a training loop with stable
	// shapes allocates them once.
	free  map[int][][]float32
	taken [][]float32
	outs  []*Tensor // op outputs whose Grad came from the pool
	// Index buffers (MaxPool2d's argmax) are pooled the same way.
	freeIdx  map[int][][]int32
	takenIdx [][]int32
}

// NewTape returns an empty tape whose ops use up to threads goroutines
// (values below 1 mean 1).
func NewTape(threads int) *Tape {
	return &Tape{threads: max(threads, 1)}
}

// Threads returns the number of goroutines ops may use (at least 1).
func (tp *Tape) Threads() int { return tp.threads }

// SetGradEnabled turns recording on (the default) or off. With recording
// off, op outputs never need a gradient and ops keep no state for backward,
// which saves memory and time in evaluation (like torch.no_grad).
func (tp *Tape) SetGradEnabled(enabled bool) { tp.disabled = !enabled }

// SetReuseOutputs turns on (or off) pooling of the Data of op outputs on a
// recording tape: they come zeroed from the tape's pool like the internal
// buffers and are reused after Reset, so a training loop with stable shapes
// stops allocating (and the garbage collector stops running) per
// micro-batch. With it on, a tensor returned by an op is valid only until
// the next Reset: read the loss and logits before it. Off by default.
func (tp *Tape) SetReuseOutputs(on bool) { tp.reuse = on }

// Backward propagates gradients from loss, which must have exactly one
// element, through every recorded op in reverse order. It seeds
// d(loss)/d(loss) = 1 and ACCUMULATES (+=) into the Grad of every parameter
// the loss depends on; gradients of intermediate tensors are internal.
// Call it at most once between Resets. It does nothing when loss does not
// depend on any parameter, and panics when loss has more than one element.
func (tp *Tape) Backward(loss *Tensor) {
	if loss.Len() != 1 {
		panic(fmt.Sprintf("engine: Backward: loss must have 1 element, has shape %v", loss.Shape))
	}
	if !loss.needsGrad() {
		return
	}
	loss.Grad[0]++
	for i := len(tp.ops) - 1; i >= 0; i-- {
		tp.ops[i]()
	}
}

// Reset forgets every recorded op so the tape can be reused for the next
// micro-batch. Tensors returned earlier keep their Shape and Data (unless
// SetReuseOutputs is on: then their Data is reused too); the Grad of op
// outputs (internal) is set to nil and its memory reused.
func (tp *Tape) Reset() {
	clear(tp.ops)
	tp.ops = tp.ops[:0]
	for _, t := range tp.outs {
		t.Grad = nil
	}
	clear(tp.outs)
	tp.outs = tp.outs[:0]
	if tp.free == nil {
		tp.free = map[int][][]float32{}
	}
	for _, b := range tp.taken {
		tp.free[len(b)] = append(tp.free[len(b)], b)
	}
	clear(tp.taken)
	tp.taken = tp.taken[:0]
	if tp.freeIdx == nil {
		tp.freeIdx = map[int][][]int32{}
	}
	for _, b := range tp.takenIdx {
		tp.freeIdx[len(b)] = append(tp.freeIdx[len(b)], b)
	}
	clear(tp.takenIdx)
	tp.takenIdx = tp.takenIdx[:0]
}

// alloc returns a zeroed buffer of n elements that belongs to the tape until
// the next Reset. Only ops that record a backward closure use it (a tape
// that records is Reset by its owner), for buffers the closure reads.
func (tp *Tape) alloc(n int) []float32 {
	b, reused := tp.allocRaw(n)
	if reused {
		clear(b)
	}
	return b
}

// allocRaw is alloc without clearing a reused buffer (it reports whether it
// reused one), for buffers the op overwrites in full before reading them.
func (tp *Tape) allocRaw(n int) (b []float32, reused bool) {
	if l := tp.free[n]; len(l) > 0 {
		b = l[len(l)-1]
		l[len(l)-1] = nil
		tp.free[n] = l[:len(l)-1]
		reused = true
	} else {
		b = make([]float32, n)
	}
	tp.taken = append(tp.taken, b)
	return b, reused
}

// allocIndex returns an index buffer of n elements (contents unspecified:
// the caller writes every element) that belongs to the tape until the next
// Reset, for a recording op's backward closure.
func (tp *Tape) allocIndex(n int) []int32 {
	var b []int32
	if l := tp.freeIdx[n]; len(l) > 0 {
		b = l[len(l)-1]
		l[len(l)-1] = nil
		tp.freeIdx[n] = l[:len(l)-1]
	} else {
		b = make([]int32, n)
	}
	tp.takenIdx = append(tp.takenIdx, b)
	return b
}

// recording reports whether an op with these inputs must record a backward
// closure: recording is enabled and at least one input needs a gradient.
func (tp *Tape) recording(inputs ...*Tensor) bool {
	if tp.disabled {
		return false
	}
	for _, t := range inputs {
		if t.needsGrad() {
			return true
		}
	}
	return false
}

// record appends a backward closure.
func (tp *Tape) record(back func()) { tp.ops = append(tp.ops, back) }

// output allocates a zero op result of the given shape, with a zero Grad
// from the tape's pool when withGrad is true, and its Data from the pool
// as well when SetReuseOutputs is on and the op records.
func (tp *Tape) output(withGrad bool, shape ...int) *Tensor {
	var t *Tensor
	if withGrad && tp.reuse {
		t = &Tensor{Shape: cloneShape(shape), Data: tp.alloc(shapeLen("output", shape))}
	} else {
		t = NewTensor(shape...)
	}
	if withGrad {
		t.Grad = tp.alloc(len(t.Data))
		tp.outs = append(tp.outs, t)
	}
	return t
}
