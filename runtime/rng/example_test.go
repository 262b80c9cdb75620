package rng_test

import (
	"fmt"

	"github.com/easyscale/easyscale-slurm/runtime/engine"
	"github.com/easyscale/easyscale-slurm/runtime/rng"
)

// A Stream is the engine's source of uniform numbers (dropout, initialisation).
var _ engine.Uniform = (*rng.Stream)(nil)

// The dropout stream of logical worker 3 at step 10 is the same whichever
// physical worker computes it, and its position can be saved and restored.
func ExampleNewStream() {
	key := rng.StreamKey{Seed: 42, Worker: 3, Step: 10, Purpose: rng.Dropout, Sub: 0}
	s := rng.NewStream(key)
	first := s.Float32()
	saved := s.Position()
	next := s.Intn(6)

	again := rng.NewStream(key) // e.g. on another physical worker after a rescale
	again.Seek(saved)
	fmt.Println(first == rng.NewStream(key).Float32(), next == again.Intn(6), saved)
	// Output: true true 1
}

func ExamplePhilox4x32() {
	out := rng.Philox4x32([4]uint32{0, 0, 0, 0}, [2]uint32{0, 0})
	fmt.Printf("%08x\n", out)
	// Output: [6627e8d5 e169c58d bc57ac4c 9b00dbd8]
}
