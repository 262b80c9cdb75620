package detmath

import (
	"math"
	"math/big"
)

// refPrec is the precision of the math/big reference functions: far beyond
// float64, so rounding their result once gives the correctly rounded value
// except in astronomically rare cases.
const refPrec = 256

func bf(x float64) *big.Float { return new(big.Float).SetPrec(refPrec).SetFloat64(x) }

// bigLn returns ln x for x > 0: x = m·2**e, ln x = e·ln2 + 2·atanh((m-1)/(m+1)).
func bigLn(x *big.Float) *big.Float {
	m := new(big.Float).SetPrec(refPrec)
	e := x.MantExp(m) // m in [0.5, 1)
	res := atanhSeries(m)
	ln2 := atanhSeries(bf(2))
	ln2.Mul(ln2, new(big.Float).SetPrec(refPrec).SetInt64(int64(e)))
	return res.Add(res, ln2)
}

// atanhSeries returns ln m = 2·Σ s**(2k+1)/(2k+1), s = (m-1)/(m+1).
func atanhSeries(m *big.Float) *big.Float {
	one := bf(1)
	num := new(big.Float).SetPrec(refPrec).Sub(m, one)
	den := new(big.Float).SetPrec(refPrec).Add(m, one)
	s := num.Quo(num, den)
	s2 := new(big.Float).SetPrec(refPrec).Mul(s, s)
	sum := new(big.Float).SetPrec(refPrec)
	pow := new(big.Float).SetPrec(refPrec).Set(s)
	t := new(big.Float).SetPrec(refPrec)
	for k := int64(0); k < 2000; k++ {
		t.Quo(pow, new(big.Float).SetPrec(refPrec).SetInt64(2*k+1))
		sum.Add(sum, t)
		if t.Sign() == 0 || t.MantExp(nil)-sum.MantExp(nil) < -refPrec-8 {
			break
		}
		pow.Mul(pow, s2)
	}
	return sum.Mul(sum, bf(2))
}

// bigExp returns e**t: t = n·ln2 + r, e**r by Taylor, scaled by 2**n.
func bigExp(t *big.Float) *big.Float {
	ln2 := atanhSeries(bf(2))
	q := new(big.Float).SetPrec(refPrec).Quo(t, ln2)
	nf, _ := q.Float64()
	n := math.Floor(nf + 0.5)
	r := new(big.Float).SetPrec(refPrec).Mul(ln2, bf(n))
	r.Sub(t, r)
	sum := bf(1)
	term := bf(1)
	for k := int64(1); k < 200; k++ {
		term.Mul(term, r)
		term.Quo(term, new(big.Float).SetPrec(refPrec).SetInt64(k))
		sum.Add(sum, term)
		if term.Sign() == 0 || term.MantExp(nil)-sum.MantExp(nil) < -refPrec-8 {
			break
		}
	}
	return sum.SetMantExp(sum, int(n))
}

// refPow returns the correctly rounded x**y for x > 0 and a finite result.
func refPow(x, y float64) float64 {
	t := bigLn(bf(x))
	t.Mul(t, bf(y))
	v, _ := bigExp(t).Float64()
	return v
}

// refLog returns the correctly rounded ln x for finite x > 0.
func refLog(x float64) float64 {
	v, _ := bigLn(bf(x)).Float64()
	return v
}

// refExp returns the correctly rounded e**x for finite x.
func refExp(x float64) float64 {
	v, _ := bigExp(bf(x)).Float64()
	return v
}

// refCos returns the correctly rounded cos x for finite x: exact reduction
// by π/2 (1300-bit π), then the Taylor series at refPrec bits.
func refCos(x float64) float64 {
	piOnce.Do(func() {
		piOver2Bg = machinPi(piBits)
		piOver2Bg.SetMantExp(piOver2Bg, -1)
	})
	bx := new(big.Float).SetPrec(piBits).SetFloat64(x)
	q := new(big.Float).SetPrec(piBits).Quo(bx, piOver2Bg)
	n, _ := q.Int(nil)
	nf := new(big.Float).SetPrec(piBits).SetInt(n)
	r := new(big.Float).SetPrec(piBits).Mul(nf, piOver2Bg)
	r.Sub(bx, r)
	r.SetPrec(refPrec)
	quadrant := new(big.Int).And(n, big.NewInt(3)).Int64()
	// cos(r + qπ/2): Taylor series of cos (start 0) or sin (start 1).
	series := func(start int64) *big.Float {
		sum := bf(0)
		term := bf(1)
		if start == 1 {
			term.Set(r)
		}
		r2 := new(big.Float).SetPrec(refPrec).Mul(r, r)
		for k := start; k < 400; k += 2 {
			sum.Add(sum, term)
			term.Mul(term, r2)
			term.Quo(term, new(big.Float).SetPrec(refPrec).SetInt64((k+1)*(k+2)))
			term.Neg(term)
			if term.Sign() == 0 || (sum.Sign() != 0 && term.MantExp(nil)-sum.MantExp(nil) < -refPrec-8) {
				break
			}
		}
		return sum
	}
	var v *big.Float
	switch quadrant {
	case 0:
		v = series(0)
	case 1:
		v = series(1).Neg(series(1))
	case 2:
		v = series(0).Neg(series(0))
	default:
		v = series(1)
	}
	f, _ := v.Float64()
	return f
}
