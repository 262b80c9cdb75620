//go:build !amd64

package vecf32

// useAVX2 is never set here; it is a variable so tests can assign it.
var useAVX2 = false

func addAVX2(dst, src *float32, n int)                 { panic("vecf32: no AVX2 on this architecture") }
func addScaleAVX2(dst, src *float32, n int, s float32) { panic("vecf32: no AVX2 on this architecture") }
func scaleAVX2(dst *float32, n int, s float32)         { panic("vecf32: no AVX2 on this architecture") }
