// Package models defines the example networks on the deterministic engine:
// a LeNet-style CNN with BatchNorm and dropout for MNIST, and a small causal
// transformer language model over characters.
//
// A Net owns its parameters (one replica per physical worker, identical
// across replicas). BatchNorm running statistics are NOT owned by the Net:
// they are buffers of each logical worker's context (EasyScale §3.2: every
// consistency-relevant state is part of the EST), passed to Forward.
package models

import (
	"github.com/easyscale/easyscale-slurm/runtime/engine"
)

// Named is a tensor with a stable name ("conv1.weight", "bn1.running_mean"),
// the unit of checkpoints and digests.
type Named struct {
	Name string
	T    *engine.Tensor
}

// MicroBatch is one logical worker's input for one step.
type MicroBatch struct {
	// X holds images [Batch, 1, 28, 28] (MNIST); nil for token inputs.
	X *engine.Tensor
	// IDs holds token ids [Batch*SeqLen] (charlm); nil for images.
	IDs []int32
	// Targets holds one class or next-token id per output row:
	// [Batch] for MNIST, [Batch*SeqLen] for charlm.
	Targets []int32
	// Batch is the number of samples (sequences); SeqLen is 0 for images.
	Batch, SeqLen int
}

// DropoutSource returns the uniform source for dropout layer number layer
// (0-based, in forward order) of the current logical worker and step.
type DropoutSource func(layer int) engine.Uniform

// Net is a trainable network replica.
type Net interface {
	// Params returns the trainable parameters in canonical order.
	Params() []Named
	// NewBuffers returns a fresh, initialised set of non-trainable buffers
	// (BatchNorm running mean and variance) for one logical worker, in
	// canonical order; nil when the network has none.
	NewBuffers() []Named
	// Forward runs mb through the network on tp and returns the mean loss
	// (1 element) and the logits [rows, classes]. buffers is the set of the
	// logical worker being computed (updated in place when training).
	// dropout may be nil when training is false.
	Forward(tp *engine.Tape, buffers []Named, mb *MicroBatch, dropout DropoutSource, training bool) (loss, logits *engine.Tensor)
}

// Tensors returns the tensors of named in order.
func Tensors(named []Named) []*engine.Tensor {
	out := make([]*engine.Tensor, len(named))
	for i, n := range named {
		out[i] = n.T
	}
	return out
}

// CopyData copies the values of src into dst, which must have the same
// names and sizes in the same order (two replicas of one network).
func CopyData(dst, src []Named) {
	for i := range dst {
		copy(dst[i].T.Data, src[i].T.Data)
	}
}
