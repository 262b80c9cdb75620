package detmath

import (
	"math"
	"testing"
)

func TestSpecialValues(t *testing.T) {
	inf32, nan := float32(math.Inf(1)), float32(math.NaN())
	tests := []struct {
		name string
		got  float32
		want float32
	}{
		{"Exp of NaN is NaN", Exp(nan), nan},
		{"Exp of +Inf is +Inf", Exp(inf32), inf32},
		{"Exp of -Inf is 0", Exp(-inf32), 0},
		{"Exp of 0 is exactly 1", Exp(0), 1},
		{"Exp of -0 is exactly 1", Exp(float32(math.Copysign(0, -1))), 1},
		{"Exp of 1 is e rounded", Exp(1), float32(math.E)},
		{"Exp just above ln MaxFloat32 overflows to +Inf", Exp(88.72284), inf32},
		{"Exp just below ln MaxFloat32 is finite", Exp(88.72283), float32(math.Exp(float64(float32(88.72283))))},
		{"Exp of -87.33655 is near the smallest normal", Exp(-87.33655), float32(math.Exp(float64(float32(-87.33655))))},
		{"Exp of -100 is a denormal", Exp(-100), float32(math.Exp(float64(float32(-100))))},
		{"Exp of -103.2789 is the smallest denormal", Exp(-103.2789), math.Float32frombits(1)},
		{"Exp of -104 underflows to 0", Exp(-104), 0},
		{"Log of NaN is NaN", Log(nan), nan},
		{"Log of +Inf is +Inf", Log(inf32), inf32},
		{"Log of 0 is -Inf", Log(0), -inf32},
		{"Log of -0 is -Inf", Log(float32(math.Copysign(0, -1))), -inf32},
		{"Log of a negative number is NaN", Log(-1), nan},
		{"Log of -Inf is NaN", Log(-inf32), nan},
		{"Log of 1 is exactly 0", Log(1), 0},
		{"Log of the smallest denormal is -103.28", Log(math.Float32frombits(1)), float32(math.Log(0x1p-149))},
		{"Log of MaxFloat32 is 88.72", Log(math.MaxFloat32), float32(math.Log(math.MaxFloat32))},
		{"Log of 2 is ln 2 rounded", Log(2), float32(math.Ln2)},
		{"Tanh of NaN is NaN", Tanh(nan), nan},
		{"Tanh of +Inf is 1", Tanh(inf32), 1},
		{"Tanh of -Inf is -1", Tanh(-inf32), -1},
		{"Tanh of 0 is 0", Tanh(0), 0},
		{"Tanh of 9.05 is exactly 1", Tanh(9.05), 1},
		{"Tanh of -9.05 is exactly -1", Tanh(-9.05), -1},
		{"Tanh of a tiny value is that value", Tanh(1e-30), 1e-30},
		{"Tanh of a denormal is that denormal", Tanh(math.Float32frombits(3)), math.Float32frombits(3)},
		{"Tanh of 0.5 is tanh(0.5) rounded", Tanh(0.5), float32(math.Tanh(0.5))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if math.Float32bits(tc.got) != math.Float32bits(tc.want) && !(tc.got != tc.got && tc.want != tc.want) {
				t.Errorf("got %v (%#08x), want %v (%#08x)", tc.got, math.Float32bits(tc.got), tc.want, math.Float32bits(tc.want))
			}
			if tc.got != tc.got && math.Float32bits(tc.got) != 0x7fc00000 {
				t.Errorf("NaN result has bits %#08x, want the canonical 0x7fc00000", math.Float32bits(tc.got))
			}
		})
	}
	if b := math.Float32bits(Tanh(float32(math.Copysign(0, -1)))); b != 0x80000000 {
		t.Errorf("Tanh(-0) has bits %#08x, want -0", b)
	}
}

func TestSpecialValues64(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"Cos64 of NaN is NaN", Cos64(nan), nan},
		{"Cos64 of +Inf is NaN", Cos64(inf), nan},
		{"Cos64 of -Inf is NaN", Cos64(-inf), nan},
		{"Cos64 of 0 is exactly 1", Cos64(0), 1},
		{"Cos64 of π is exactly -1", Cos64(math.Pi), -1},
		{"Cos64 of MaxFloat64 does not panic and is correctly rounded", Cos64(math.MaxFloat64), refCos(math.MaxFloat64)},
		{"Cos64 of float64(π/2) is the correctly rounded 6.123233995736766e-17", Cos64(math.Pi / 2), 6.123233995736766e-17},
		{"Cos64 of a denormal is exactly 1", Cos64(5e-324), 1},
		{"Pow64 of anything to the 0 is 1", Pow64(nan, 0), 1},
		{"Pow64 of 1 to NaN is 1", Pow64(1, nan), 1},
		{"Pow64 of NaN to 2 is NaN", Pow64(nan, 2), nan},
		{"Pow64 of 2 to NaN is NaN", Pow64(2, nan), nan},
		{"Pow64 of a negative base is NaN", Pow64(-2, 2), nan},
		{"Pow64 of 0 to a positive power is 0", Pow64(0, 3), 0},
		{"Pow64 of 0 to a negative power is +Inf", Pow64(0, -3), inf},
		{"Pow64 of +Inf to a positive power is +Inf", Pow64(inf, 0.5), inf},
		{"Pow64 of +Inf to a negative power is 0", Pow64(inf, -0.5), 0},
		{"Pow64 of 2 to +Inf is +Inf", Pow64(2, inf), inf},
		{"Pow64 of 0.5 to +Inf is 0", Pow64(0.5, inf), 0},
		{"Pow64 of 0.5 to -Inf is +Inf", Pow64(0.5, -inf), inf},
		{"Pow64 of 2 to 10 is exactly 1024", Pow64(2, 10), 1024},
		{"Pow64 of 2 to -1074 is the smallest denormal", Pow64(2, -1074), 5e-324},
		{"Pow64 of 2 to 1024 overflows", Pow64(2, 1024), inf},
		{"Pow64 of 0.9 to 1 is 0.9", Pow64(0.9, 1), 0.9},
		{"Pow64 of 0.999 to 1e300 underflows to 0", Pow64(0.999, 1e300), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if math.Float64bits(tc.got) != math.Float64bits(tc.want) && !(tc.got != tc.got && tc.want != tc.want) {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
			if tc.got != tc.got && math.Float64bits(tc.got) != math.Float64bits(nan64) {
				t.Errorf("NaN result has bits %#x, want the canonical NaN", math.Float64bits(tc.got))
			}
		})
	}
}
