// Package torchengine is the PyTorch engine's Go half: it ships the Python
// package easyscale (python/easyscale, embedded in every binary that imports
// this package, so the Go and Python halves are always of one version) and
// finds the Python interpreter that has torch.
//
// The Python side holds what decides the bits of a torch job
// (../shared/pytorch/NOTES.md):
//
//	easyscale.streams      random streams keyed by (seed, logical worker, step, purpose)
//	easyscale.sampler      DistributedSampler order over N logical workers, a cursor per worker
//	easyscale.context      per-logical-worker buffers (BatchNorm) swapped into one replica
//	easyscale.reduce       the chain: left fold in logical-worker order, ×float32(1/N), over gloo/NCCL
//	easyscale.numerics     pinned numerics, fingerprint and canary digest checked before admission
//	easyscale.safetensors  checkpoints in every dtype, byte-identical for equal tensors
//
// Status (issue 9): these building blocks and their tests are in place; the
// engine seam in the runtime, the Go↔Python control protocol and the process
// supervision are the next slices.
package torchengine
