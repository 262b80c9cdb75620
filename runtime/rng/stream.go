package rng

import (
	"fmt"
	"math"
	"math/bits"
)

// Purpose says what a stream's numbers are for, so that two uses at the same
// (seed, logical worker, step) never share numbers. The values are part of the
// reproducibility contract: they are mixed into the Philox counter and so into
// every saved model; never renumber them, only append.
type Purpose uint8

// Purposes. Zero is reserved (Unspecified) so that a zero StreamKey is never
// mistaken for a real use.
const (
	Unspecified Purpose = 0 // reserved; valid, but no component should use it
	Dropout     Purpose = 1 // dropout masks; Sub = layer index
	Augment     Purpose = 2 // data augmentation (random shift); Sub = sample index in the micro-batch
	Shuffle     Purpose = 3 // per-epoch dataset permutation; Worker = 0, Step = epoch
	Init        Purpose = 4 // parameter initialisation; Worker = 0, Step = 0, Sub = parameter index
	Eval        Purpose = 5 // randomness during evaluation (e.g. sampling text); Sub = caller-defined
)

// String returns the purpose's name, or "Purpose(N)" for an unnamed value.
func (p Purpose) String() string {
	switch p {
	case Unspecified:
		return "Unspecified"
	case Dropout:
		return "Dropout"
	case Augment:
		return "Augment"
	case Shuffle:
		return "Shuffle"
	case Init:
		return "Init"
	case Eval:
		return "Eval"
	}
	return fmt.Sprintf("Purpose(%d)", uint8(p))
}

// Field limits of a StreamKey: the bits each field occupies in the Philox
// counter (see StreamKey).
const (
	MaxWorker = 1<<24 - 1 // largest logical worker id (24 bits)
	MaxStep   = 1<<48 - 1 // largest step (48 bits)
	// StreamLen is the number of uint32 values in one stream (2^32 Philox
	// blocks of 4 words); positions are taken modulo StreamLen.
	StreamLen = 1 << 34
)

// StreamKey names one random stream by logical identity: the job seed, the
// logical worker (EasyScaleThread id, never the physical worker), the training
// step, the purpose and a purpose-specific sub-stream (e.g. layer index).
//
// The mapping onto Philox4x32-10 is part of the reproducibility contract. For
// the draw with index i (0-based; i = Position() before the draw):
//
//	key     = [ uint32(Seed), uint32(Seed >> 32) ]
//	counter = [ uint32(i / 4),
//	            Worker | uint32(Purpose) << 24,
//	            uint32(Step),
//	            uint32(Step >> 32) & 0xFFFF | uint32(Sub) << 16 ]
//	value   = Philox4x32(counter, key)[i % 4]
//
// so distinct keys within the field limits (Worker <= MaxWorker,
// Step <= MaxStep) address disjoint counter ranges and never share a value.
type StreamKey struct {
	Seed    uint64  // job seed
	Worker  uint32  // logical worker (EST id), <= MaxWorker
	Step    uint64  // training step (or epoch, for Shuffle), <= MaxStep
	Purpose Purpose // what the numbers are for
	Sub     uint16  // sub-stream within a purpose, e.g. layer index
}

// Validate reports whether every field fits the bits the Philox mapping gives
// it. Keys built from outside input should be validated: NewStream silently
// drops the excess high bits of Worker and Step, and so would alias streams.
func (k StreamKey) Validate() error {
	if k.Worker > MaxWorker {
		return fmt.Errorf("rng: stream key worker %d exceeds the 24-bit limit %d", k.Worker, MaxWorker)
	}
	if k.Step > MaxStep {
		return fmt.Errorf("rng: stream key step %d exceeds the 48-bit limit %d", k.Step, uint64(MaxStep))
	}
	return nil
}

// Stream is a seekable sequence of uint32 values drawn from Philox4x32-10 at
// the counters a StreamKey addresses. Its whole state is its key and its
// position, so it can be saved with an EST's context and restored with Seek.
// A Stream is not safe for concurrent use; give each goroutine its own.
type Stream struct {
	key   StreamKey
	pkey  [2]uint32
	ctr   [4]uint32 // ctr[0] is filled per block
	pos   uint64
	block uint64    // block index + 1 held in buf; 0 = none
	buf   [4]uint32 // Philox output for block-1
}

// NewStream returns the stream for key k at position 0. Worker bits above 24
// and Step bits above 48 are dropped (see StreamKey.Validate).
func NewStream(k StreamKey) *Stream {
	return &Stream{
		key:  k,
		pkey: [2]uint32{uint32(k.Seed), uint32(k.Seed >> 32)},
		ctr: [4]uint32{
			0,
			k.Worker&MaxWorker | uint32(k.Purpose)<<24,
			uint32(k.Step),
			uint32(k.Step>>32)&0xFFFF | uint32(k.Sub)<<16,
		},
	}
}

// Key returns the key the stream was created with.
func (s *Stream) Key() StreamKey { return s.key }

// Position returns the number of uint32 values drawn so far (Float32 draws
// one, Intn one or more).
func (s *Stream) Position() uint64 { return s.pos }

// Seek sets the position, so that the next Uint32 returns the value with
// index pos; Seek(Position()) after saving restores a stream exactly.
func (s *Stream) Seek(pos uint64) { s.pos = pos }

// Uint32 returns the next value, uniform over [0, 2^32).
func (s *Stream) Uint32() uint32 {
	b := s.pos>>2 + 1
	if b != s.block {
		s.ctr[0] = uint32(s.pos >> 2)
		s.buf = Philox4x32(s.ctr, s.pkey)
		s.block = b
	}
	v := s.buf[s.pos&3]
	s.pos++
	return v
}

// Float32 returns a value uniform on [0, 1) with 24 random bits: the top 24
// bits of one Uint32 times 2^-24, which is exact in float32. It implements the
// engine's Uniform interface.
func (s *Stream) Float32() float32 {
	return float32(s.Uint32()>>8) * (1.0 / (1 << 24))
}

// Intn returns a value uniform on [0, n) without modulo bias, by Lemire's
// multiply-and-reject method (D. Lemire, "Fast random integer generation in
// an interval", ACM TOMACS 29(1), 2019). It draws one Uint32 (two for n above
// 2^32) and draws again only on rejection, with probability below n/2^32.
// It panics if n <= 0, as math/rand does: that is a programming error.
func (s *Stream) Intn(n int) int {
	if n <= 0 {
		panic(fmt.Sprintf("rng: Intn called with n = %d, need n > 0", n))
	}
	if uint64(n) <= math.MaxUint32 {
		return int(s.uint32n(uint32(n)))
	}
	return int(s.uint64n(uint64(n)))
}

func (s *Stream) uint32n(n uint32) uint32 {
	hi, lo := bits.Mul32(s.Uint32(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul32(s.Uint32(), n)
		}
	}
	return hi
}

func (s *Stream) uint64() uint64 {
	hi := uint64(s.Uint32())
	return hi<<32 | uint64(s.Uint32())
}

func (s *Stream) uint64n(n uint64) uint64 {
	hi, lo := bits.Mul64(s.uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(s.uint64(), n)
		}
	}
	return hi
}
