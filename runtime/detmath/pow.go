package detmath

import "math"

// Pow64 returns x**y for x > 0, computed as exp(y·ln x) with ln x and the
// product y·ln x carried in double-double (head + tail) arithmetic.
//
// Domain: x > 0 and any y (the intended use is AdamW's bias correction
// β**t with 0 < β < 1 and integer t ≥ 1). Edge cases follow package math
// where it is cheap: Pow64(x, ±0) = 1 and Pow64(1, y) = 1 for any y, even
// NaN; NaN in either argument otherwise gives NaN; Pow64(+Inf, y) is +Inf
// for y > 0 and 0 for y < 0; Pow64(±0, y) is 0 for y > 0 and +Inf for y < 0.
// Unlike math.Pow, every x < 0 returns NaN, even for integer y.
//
// Accuracy against a correctly rounded math/big reference (see
// TestPow64Accuracy…): max 1 ulp for |y·ln x| ≤ 1, 2 ulp for |y·ln x| ≤ 16,
// and below 2 + |y·ln x|/8 ulp up to |y·ln x| = 700 (64 ulp measured at
// 583), because ln x is carried to about 2**-56 relative. math.Pow itself
// is off by hundreds of ulp for large integer y (it multiplies by repeated
// squaring), so it is not the reference.
//
// Algorithms: error-free transformations TwoSum (Knuth) and TwoProduct with
// Veltkamp splitting (Dekker 1971), which need no fused multiply-add.
func Pow64(x, y float64) float64 {
	switch {
	case y == 0 || x == 1:
		return 1
	case x != x || y != y || x < 0:
		return nan64
	case x == 0:
		if y > 0 {
			return 0
		}
		return math.Inf(1)
	case x > math.MaxFloat64:
		if y > 0 {
			return math.Inf(1)
		}
		return 0
	}
	lh, ll := log64DD(x)
	t := float64(y * lh)
	if t != t || t > 2*expOverflow || t < 2*expUnderflow || math.Abs(y) > 0x1p996 {
		// Far outside the finite range (or y infinite): the tail
		// cannot matter and TwoProduct would overflow.
		return exp64(t)
	}
	th, tl := twoProduct(y, lh)
	tl += float64(y * ll)
	return exp64DD(th, tl)
}

// log64DD returns ln x for finite x > 0 as head + tail with |tail| ≤ ulp(head),
// accurate to about 2**-60 relative. It follows log64 but keeps f - f²/2
// exact.
func log64DD(x float64) (float64, float64) {
	bits := math.Float64bits(x)
	e := int(bits>>52) & 0x7ff
	if e == 0 {
		bits = math.Float64bits(float64(x * 0x1p54))
		e = int(bits>>52)&0x7ff - 54
	}
	e -= 1023
	m := math.Float64frombits(bits&^(0x7ff<<52) | 1023<<52)
	if m > sqrt2 {
		m = float64(m * 0.5)
		e++
	}
	fe := float64(e)
	f := m - 1
	s := f / (2 + f)
	z := float64(s * s)
	r := 2.0 / 23
	for _, c := range [...]float64{2.0 / 21, 2.0 / 19, 2.0 / 17, 2.0 / 15, 2.0 / 13, 2.0 / 11, 2.0 / 9, 2.0 / 7, 2.0 / 5, 2.0 / 3} {
		r = float64(r*z) + c
	}
	r = float64(r * z)
	// ln(1+f) = f - h + s·(h + R), h = f²/2 exact as hh + hl.
	hh, hl := twoProduct(f, f)
	hh, hl = float64(hh*0.5), float64(hl*0.5)
	corr := float64(s * ((hh + r) + hl))
	// Sum fe·ln2Hi (exact) + f - hh - hl + corr + fe·ln2Lo in double-double.
	sh, sl := twoSum(float64(fe*ln2Hi), f)
	sh, sl2 := twoSum(sh, -hh)
	sl += sl2
	sl += corr - hl + float64(fe*ln2Lo)
	return fastTwoSum(sh, sl)
}

// exp64DD returns e**(h+l) for a double-double argument with |l| ≲ ulp(h).
func exp64DD(h, l float64) float64 {
	switch {
	case h > expOverflow:
		return math.Inf(1)
	case h < expUnderflow:
		return 0
	}
	n := math.Floor(float64(h*log2e) + 0.5)
	r := (float64(h-float64(n*ln2Hi)) + l) - float64(n*ln2Lo)
	return scalePow2(expPoly(r), int(n))
}

// twoSum returns s = fl(a+b) and the exact error a+b-s (Knuth).
func twoSum(a, b float64) (float64, float64) {
	s := a + b
	bb := s - a
	return s, (a - (s - bb)) + (b - bb)
}

// fastTwoSum is twoSum for |a| ≥ |b| (Dekker).
func fastTwoSum(a, b float64) (float64, float64) {
	s := a + b
	return s, b - (s - a)
}

// twoProduct returns p = fl(a·b) and the exact error a·b-p, valid when
// |a|, |b| < 2**996 and the error is not subnormal (Dekker 1971).
func twoProduct(a, b float64) (float64, float64) {
	p := float64(a * b)
	ah, al := split(a)
	bh, bl := split(b)
	e := float64(float64(float64(ah*bh)-p)+float64(ah*bl)) + float64(al*bh)
	return p, e + float64(al*bl)
}

// split returns the Veltkamp split a = hi + lo with 26-bit halves.
func split(a float64) (float64, float64) {
	c := float64(134217729 * a) // 2**27 + 1
	hi := c - (c - a)
	return hi, a - hi
}
