package detmath

import "math"

const (
	log2e = 1 / math.Ln2
	// ln2Hi is ln 2 truncated to 32 significant bits, so n*ln2Hi is exact
	// for |n| < 2**21; ln2Lo is the exact remainder rounded to float64.
	ln2Hi = 0x1.62e42feep-1
	ln2Lo = math.Ln2 - ln2Hi

	// exp64 overflows above ln(MaxFloat64) and underflows to 0 below
	// ln(2**-1075).
	expOverflow  = 7.09782712893383973096e+02
	expUnderflow = -7.45133219101941108420e+02

	// Exp (float32) returns +Inf at or above ln of MaxFloat32 plus half an
	// ulp and 0 below ln(2**-150); float32Overflow is that rounding boundary.
	exp32Overflow   = 88.8
	exp32Underflow  = -104.0
	float32Overflow = 0x1.ffffffp127
)

// Exp returns e**x rounded to float32.
//
// Special cases: Exp(NaN) = NaN, Exp(+Inf) = +Inf, Exp(-Inf) = 0; results
// above MaxFloat32 are +Inf and tiny results round to denormals or 0.
//
// Accuracy: computed in float64 and rounded once. Over all 2**32 float32
// inputs the result equals float32(math.Exp(float64(x))) on amd64 (0 ulp;
// go test -run TestFloat32 -exhaustive, 9 minutes for all three here); the default
// test run checks a 5-million-point sweep with a 1 ulp bound.
func Exp(x float32) float32 {
	switch {
	case x != x:
		return nan32
	case x > exp32Overflow:
		return float32(math.Inf(1))
	case x < exp32Underflow:
		return 0
	}
	v := exp64(float64(x))
	if v >= float32Overflow {
		return float32(math.Inf(1))
	}
	return float32(v)
}

// exp64 returns e**x in float64 with a relative error of about 1 ulp.
// Special cases: NaN → NaN, +Inf → +Inf, -Inf → 0.
func exp64(x float64) float64 {
	switch {
	case x != x:
		return nan64
	case x > expOverflow:
		return math.Inf(1)
	case x < expUnderflow:
		return 0
	}
	n := math.Floor(float64(x*log2e) + 0.5)
	r := float64(x-float64(n*ln2Hi)) - float64(n*ln2Lo)
	return scalePow2(expPoly(r), int(n))
}

// expPoly returns e**r for |r| ≤ ln2/2 (slightly beyond is fine) by the
// Taylor polynomial of degree 13, whose truncation error is below 5e-18.
func expPoly(r float64) float64 {
	p := 1.0 / 6227020800 // 1/13!
	p = float64(p*r) + 1.0/479001600
	p = float64(p*r) + 1.0/39916800
	p = float64(p*r) + 1.0/3628800
	p = float64(p*r) + 1.0/362880
	p = float64(p*r) + 1.0/40320
	p = float64(p*r) + 1.0/5040
	p = float64(p*r) + 1.0/720
	p = float64(p*r) + 1.0/120
	p = float64(p*r) + 1.0/24
	p = float64(p*r) + 1.0/6
	p = float64(p*r) + 0.5
	p = float64(p*r) + 1
	return float64(p*r) + 1
}

// scalePow2 returns p·2**n for p in [0.5, 2) and n in [-1080, 1025],
// rounding once when the result is subnormal and overflowing to +Inf.
func scalePow2(p float64, n int) float64 {
	switch {
	case n > 1023:
		return float64(float64(p*pow2(n-1)) * 2)
	case n < -1022:
		return float64(float64(p*pow2(n+600)) * 0x1p-600)
	}
	return float64(p * pow2(n))
}
