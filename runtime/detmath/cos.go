package detmath

import (
	"math"
	"math/big"
	"sync"
)

const (
	twoOverPi = 2 / math.Pi
	// piOver2 is split in three (Cody–Waite): p1 and p2 have at most 33
	// significant bits, so n*p1 and n*p2 are exact for |n| < 2**20, and p3
	// is the exact remainder rounded to float64 (constant arithmetic).
	piOver2P1 = 0x1.921fb544p+0
	piOver2P2 = 0x1.0b4611a6p-34
	piOver2P3 = math.Pi/2 - piOver2P1 - piOver2P2

	// cosMediumLimit bounds the Cody–Waite reduction (carried in
	// double-double); beyond it Cos64
	// reduces exactly with math/big.
	cosMediumLimit = 0x1p20
)

// Cos64 returns the cosine of x (radians).
//
// Special cases: Cos64(±Inf) = NaN, Cos64(NaN) = NaN. Any finite x is
// accepted: |x| < 2**20 is reduced with a three-part π/2 (absolute error of
// the reduced argument below 2**-95); larger |x| is reduced exactly with
// math/big against π computed to 1300 bits by Machin's formula (slow,
// allocates, but correct for every float64).
//
// Accuracy: max 1 ulp against a correctly rounded math/big reference over
// [-16, 16], near the zeros of cos, over [-2**20, 2**20] and over random
// bit patterns (TestCos64IsWithinOneUlp…). math.Cos is not the reference:
// it is off by 7 ulp at x = float64(π/2) and wrong in the second digit for the
// worst case 6381956970095103·2**797.
func Cos64(x float64) float64 {
	switch {
	case x != x || x > math.MaxFloat64 || x < -math.MaxFloat64:
		return nan64
	case math.Abs(x) >= cosMediumLimit:
		r, q := reduceBig(x)
		return cosQuadrant(r, 0, q)
	}
	n := math.Floor(float64(x*twoOverPi) + 0.5)
	t := x - float64(n*piOver2P1) // exact: n·p1 is exact and within 2× of x
	rh, rl := twoSum(t, -float64(n*piOver2P2))
	rh, rl = twoSum(rh, rl-float64(n*piOver2P3))
	return cosQuadrant(rh, rl, int(int64(n)&3))
}

// cosQuadrant returns cos(rh + rl + q·π/2) for |rh| ≲ π/4, a tail
// |rl| ≤ ulp(rh) and q in 0..3, using cos(h+l) ≈ cos h - l·h and
// sin(h+l) ≈ sin h + l·(1 - h²/2) (the dropped terms are below 0.07 ulp).
func cosQuadrant(rh, rl float64, q int) float64 {
	switch q {
	case 0:
		return cosPoly(rh) - float64(rl*rh)
	case 1:
		return -(sinPoly(rh) + float64(rl*(1-float64(0.5*float64(rh*rh)))))
	case 2:
		return -(cosPoly(rh) - float64(rl*rh))
	}
	return sinPoly(rh) + float64(rl*(1-float64(0.5*float64(rh*rh))))
}

// cosPoly returns cos r for |r| ≤ π/4 + ε by the Taylor polynomial of
// degree 18 in r (truncation below 4e-21).
func cosPoly(r float64) float64 {
	z := float64(r * r)
	p := 1.0 / 6402373705728000 // 1/18!
	p = float64(p*z) - 1.0/20922789888000
	p = float64(p*z) + 1.0/87178291200
	p = float64(p*z) - 1.0/479001600
	p = float64(p*z) + 1.0/3628800
	p = float64(p*z) - 1.0/40320
	p = float64(p*z) + 1.0/720
	p = float64(p*z) - 1.0/24
	p = float64(p*z) + 0.5
	return 1 - float64(p*z)
}

// sinPoly returns sin r for |r| ≤ π/4 + ε by the Taylor polynomial of
// degree 19 in r (truncation below 1e-19 relative).
func sinPoly(r float64) float64 {
	z := float64(r * r)
	p := 1.0 / 121645100408832000 // 1/19!
	p = float64(p*z) - 1.0/355687428096000
	p = float64(p*z) + 1.0/1307674368000
	p = float64(p*z) - 1.0/6227020800
	p = float64(p*z) + 1.0/39916800
	p = float64(p*z) - 1.0/362880
	p = float64(p*z) + 1.0/5040
	p = float64(p*z) - 1.0/120
	p = float64(p*z) + 1.0/6
	return r - float64(float64(r*z)*p)
}

// piBits is the working precision of the exact reduction: enough for
// |x| ≤ MaxFloat64 (2**1024) with about 200 bits to spare.
const piBits = 1300

var (
	piOnce    sync.Once
	piOver2Bg *big.Float
)

// reduceBig returns r and q with x = n·π/2 + r, |r| ≤ π/4 and q = n mod 4,
// computed exactly with math/big and r rounded to float64 once.
func reduceBig(x float64) (float64, int) {
	piOnce.Do(func() {
		piOver2Bg = machinPi(piBits)
		piOver2Bg.SetMantExp(piOver2Bg, -1)
	})
	bx := new(big.Float).SetPrec(piBits).SetFloat64(x)
	q := new(big.Float).SetPrec(piBits).Quo(bx, piOver2Bg)
	// n = round(q) = floor(q + 1/2)
	q.Add(q, big.NewFloat(0.5))
	n, _ := q.Int(nil) // truncates toward zero
	if q.Sign() < 0 && !q.IsInt() {
		n.Sub(n, big.NewInt(1))
	}
	nf := new(big.Float).SetPrec(piBits).SetInt(n)
	r := new(big.Float).SetPrec(piBits).Mul(nf, piOver2Bg)
	r.Sub(bx, r)
	rf, _ := r.Float64()
	quadrant := new(big.Int).And(n, big.NewInt(3)) // two's complement: 0..3
	return rf, int(quadrant.Int64())
}

// machinPi returns π to prec bits by Machin's formula
// π = 16·atan(1/5) - 4·atan(1/239), summed in fixed point with big.Int.
func machinPi(prec uint) *big.Float {
	guard := prec + 32
	one := new(big.Int).Lsh(big.NewInt(1), guard)
	a := arctanInv(5, one)
	b := arctanInv(239, one)
	a.Mul(a, big.NewInt(16))
	b.Mul(b, big.NewInt(4))
	a.Sub(a, b)
	f := new(big.Float).SetPrec(prec).SetInt(a)
	return f.SetMantExp(f, -int(guard))
}

// arctanInv returns atan(1/x)·one in fixed point by the alternating series
// Σ (-1)**k / ((2k+1)·x**(2k+1)); the truncation error is a few units.
func arctanInv(x int64, one *big.Int) *big.Int {
	sum := new(big.Int)
	term := new(big.Int).Quo(one, big.NewInt(x))
	x2 := big.NewInt(x * x)
	t := new(big.Int)
	for k := int64(0); term.Sign() != 0; k++ {
		t.Quo(term, big.NewInt(2*k+1))
		if k%2 == 0 {
			sum.Add(sum, t)
		} else {
			sum.Sub(sum, t)
		}
		term.Quo(term, x2)
	}
	return sum
}
