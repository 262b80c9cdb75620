package detmath

import (
	"math"
	"testing"
)

// FuzzCos64 checks that any input is accepted, the result is in [-1, 1] or
// NaN exactly for non-finite input, and it is within 1 ulp of the
// correctly rounded math/big reference.
func FuzzCos64(f *testing.F) {
	for _, x := range []float64{0, 1, -1, math.Pi / 2, 1e6, 1e300, math.Inf(1), math.NaN(), 5e-324} {
		f.Add(x)
	}
	f.Fuzz(func(t *testing.T, x float64) {
		c := Cos64(x)
		finite := !math.IsNaN(x) && !math.IsInf(x, 0)
		if finite != !math.IsNaN(c) {
			t.Fatalf("Cos64(%v) = %v: NaN exactly for non-finite input", x, c)
		}
		if finite && (c < -1 || c > 1) {
			t.Fatalf("Cos64(%v) = %v outside [-1, 1]", x, c)
		}
		if finite && ulp64(c, refCos(x)) > 1 {
			t.Fatalf("Cos64(%v) = %v, reference %v", x, c, refCos(x))
		}
	})
}

// FuzzFloat32 checks Exp, Log and Tanh against package math to 1 ulp on any
// float32 bit pattern.
func FuzzFloat32(f *testing.F) {
	for _, b := range []uint32{0, 0x3f800000, 0x7f800000, 0xff800000, 0x7fc00000, 1, 0x80000001, 0x42b17218} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b uint32) {
		x := math.Float32frombits(b)
		for _, fn := range funcs32 {
			if u := ulp32(fn.f(x), fn.ref(x)); u > 1 {
				t.Fatalf("%s(%v) = %v, math gives %v (%d ulp)", fn.name, x, fn.f(x), fn.ref(x), u)
			}
		}
	})
}
