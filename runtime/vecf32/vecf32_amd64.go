package vecf32

import "golang.org/x/sys/cpu"

// useAVX2 selects the AVX2 kernels; tests switch it off to compare bits.
var useAVX2 = cpu.X86.HasAVX2

// The kernels below process n elements, n a positive multiple of 32.

//go:noescape
func addAVX2(dst, src *float32, n int)

//go:noescape
func addScaleAVX2(dst, src *float32, n int, s float32)

//go:noescape
func scaleAVX2(dst *float32, n int, s float32)
