// Package rng provides the counter-based random numbers of an EasyScale job,
// keyed by logical identity.
//
// Every random decision of training (dropout masks, augmentation, the
// per-epoch shuffle, initialisation) draws from a Stream named by a
// StreamKey: (job seed, logical worker, step, purpose, sub-stream). The
// numbers come from Philox4x32-10 (Salmon et al., SC'11), a keyed bijection
// of a 128-bit counter, so any value can be computed directly from its
// address: nothing depends on which physical worker or goroutine draws it, on
// how many draws other streams made, or on the architecture. A stream's only
// state is its position, which an EST saves in its context and restores
// with Seek.
//
// The exact key/counter mapping, documented on StreamKey, is part of the
// on-disk meaning of a job's results: changing it changes every digest.
package rng
