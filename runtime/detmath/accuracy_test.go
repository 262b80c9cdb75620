package detmath

import (
	"flag"
	"math"
	"math/big"
	"testing"
)

var exhaustive = flag.Bool("exhaustive", false, "measure float32 accuracy over all 2**32 inputs (minutes)")

// ordered32 maps float32 bits to integers whose order and differences are
// the float order and ulp distance (+0 and -0 map to the same value).
func ordered32(x float32) int64 {
	i := int64(int32(math.Float32bits(x)))
	if i < 0 {
		i = math.MinInt32 - i
	}
	return i
}

func ordered64(x float64) *big.Int {
	i := int64(math.Float64bits(x))
	if i < 0 {
		return new(big.Int).Sub(big.NewInt(math.MinInt64), big.NewInt(i))
	}
	return big.NewInt(i)
}

// ulp32 is the distance in float32 ulps; NaN against NaN is 0 and NaN
// against a number is 1<<40.
func ulp32(a, b float32) int64 {
	an, bn := a != a, b != b
	switch {
	case an && bn:
		return 0
	case an || bn:
		return 1 << 40
	}
	d := ordered32(a) - ordered32(b)
	if d < 0 {
		d = -d
	}
	return d
}

func ulp64(a, b float64) int64 {
	an, bn := a != a, b != b
	switch {
	case an && bn:
		return 0
	case an || bn:
		return 1 << 60
	}
	d := new(big.Int).Sub(ordered64(a), ordered64(b))
	d.Abs(d)
	if !d.IsInt64() || d.Int64() > 1<<60 {
		return 1 << 60
	}
	return d.Int64()
}

type func32 struct {
	name string
	f    func(float32) float32
	ref  func(float32) float32
}

var funcs32 = []func32{
	{"Exp", Exp, func(x float32) float32 { return float32(math.Exp(float64(x))) }},
	{"Log", Log, func(x float32) float32 { return float32(math.Log(float64(x))) }},
	{"Tanh", Tanh, func(x float32) float32 { return float32(math.Tanh(float64(x))) }},
}

// sweep32 measures the max ulp error and the number of inexact results of f
// against ref over every stride-th float32 bit pattern and over n evenly
// spaced values in [lo, hi].
func sweep32(fn func32, stride uint64, lo, hi float32, n int) (maxUlp int64, worst float32, off, total int) {
	check := func(x float32) {
		u := ulp32(fn.f(x), fn.ref(x))
		total++
		if u > 0 {
			off++
		}
		if u > maxUlp {
			maxUlp, worst = u, x
		}
	}
	for b := uint64(0); b < 1<<32; b += stride {
		check(math.Float32frombits(uint32(b)))
	}
	for i := 0; i < n; i++ {
		check(lo + (hi-lo)*float32(i)/float32(n))
	}
	return maxUlp, worst, off, total
}

func TestFloat32FunctionsAreWithinOneUlpOfPackageMath(t *testing.T) {
	for _, fn := range funcs32 {
		t.Run(fn.name+" over a strided sweep of all float32 and a dense sweep of [-20, 20]", func(t *testing.T) {
			stride, n := uint64(1021), 1<<20
			if testing.Short() {
				stride, n = 65521, 1<<14
			}
			if *exhaustive {
				stride, n = 1, 0
			}
			maxUlp, worst, off, total := sweep32(fn, stride, -20, 20, n)
			t.Logf("%s: max %d ulp (at %g), %d of %d results differ from float32(math.%s)", fn.name, maxUlp, worst, off, total, fn.name)
			if maxUlp > 1 {
				t.Errorf("%s(%g) is %d ulp from package math, want at most 1", fn.name, worst, maxUlp)
			}
		})
	}
}

func TestCos64IsWithinOneUlpOfACorrectlyRoundedReference(t *testing.T) {
	tests := []struct {
		name string
		x    func(*uint64) float64
	}{
		{"uniform over [-16, 16]", func(s *uint64) float64 { return 32*unit(s) - 16 }},
		{"near the zeros of cos in [-16, 16]", func(s *uint64) float64 {
			k := math.Floor(10*unit(s)) - 5
			return float64((k+0.5)*math.Pi) + (2*unit(s)-1)*0x1p-30
		}},
		{"uniform over [-2**20, 2**20]", func(s *uint64) float64 { return (2*unit(s) - 1) * 0x1p20 }},
		{"random bit patterns", func(s *uint64) float64 { return math.Float64frombits(splitmix(s)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rng := uint64(99)
			var maxUlp int64
			var worst float64
			for i := 0; i < 1500; i++ {
				x := tc.x(&rng)
				if math.IsNaN(x) || math.IsInf(x, 0) {
					continue
				}
				if u := ulp64(Cos64(x), refCos(x)); u > maxUlp {
					maxUlp, worst = u, x
				}
			}
			t.Logf("Cos64 %s: max %d ulp (at %v)", tc.name, maxUlp, worst)
			if maxUlp > 1 {
				t.Errorf("Cos64(%v) is %d ulp from the reference, want at most 1", worst, maxUlp)
			}
		})
	}
}

func TestCos64ReducesHugeArgumentsLikeMathCos(t *testing.T) {
	xs := []float64{0x1p20, -0x1p20, 1e6 + 0.5, 0x1p29, 1e9, 1e15, 1e22, 1e300, -1e300, math.MaxFloat64,
		math.Nextafter(0x1p20, 0)}
	for _, x := range xs {
		got, want := Cos64(x), math.Cos(x)
		if u := ulp64(got, want); u > 1 {
			t.Errorf("Cos64(%g) = %v, math.Cos = %v (%d ulp)", x, got, want, u)
		}
	}
}

// TestCos64ReducesTheWorstCaseCorrectly uses the hardest float64 for
// argument reduction, 6381956970095103·2**797, which lies 4.687e-19 from
// a multiple of π/2 (J.-M. Muller, Elementary Functions, 3rd ed., ch. 11;
// Kahan and McDonald). Its cosine is -4.68716592425462761112e-19.
func TestCos64ReducesTheWorstCaseCorrectly(t *testing.T) {
	x := 6381956970095103 * 0x1p797
	const want = -4.68716592425462761112e-19
	if got := Cos64(x); ulp64(got, want) > 1 {
		t.Errorf("Cos64(6381956970095103·2**797) = %v, want %v", got, want)
	}
}

func TestLogAndExpInFloat64AreWithinOneUlpOfACorrectlyRoundedReference(t *testing.T) {
	tests := []struct {
		name string
		f    func(float64) float64
		ref  func(float64) float64
		x    func(*uint64) float64
		max  int64
	}{
		{"log64 near 1", log64, refLog, func(s *uint64) float64 { return 1 + (2*unit(s)-1)*0x1p-8 }, 1},
		{"log64 over (0, 4)", log64, refLog, func(s *uint64) float64 { return 4 * unit(s) }, 1},
		{"log64 over all exponents", log64, refLog, func(s *uint64) float64 { return math.Float64frombits(splitmix(s) >> 1) }, 1},
		{"exp64 over [-40, 40]", exp64, refExp, func(s *uint64) float64 { return 80*unit(s) - 40 }, 1},
		{"exp64 over [-745, 709]", exp64, refExp, func(s *uint64) float64 { return 1454*unit(s) - 745 }, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rng := uint64(7)
			var maxUlp int64
			var worst float64
			for i := 0; i < 4000; i++ {
				x := tc.x(&rng)
				if math.IsInf(x, 0) || math.IsNaN(x) || x == 0 {
					continue
				}
				if u := ulp64(tc.f(x), tc.ref(x)); u > maxUlp {
					maxUlp, worst = u, x
				}
			}
			t.Logf("%s: max %d ulp (at %v)", tc.name, maxUlp, worst)
			if maxUlp > tc.max {
				t.Errorf("%s(%v) is %d ulp from the reference, want at most %d", tc.name, worst, maxUlp, tc.max)
			}
		})
	}
}

func TestPow64AccuracyAgainstACorrectlyRoundedReference(t *testing.T) {
	tests := []struct {
		name    string
		maxYLnX float64
		maxUlp  int64
	}{
		{"small exponents stay within 1 ulp", 1, 1},
		{"Adam-sized exponents stay within 2 ulp", 16, 2},
		{"exponents up to 700 stay within 2 + |y ln x|/8 ulp", 700, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var maxUlp int64
			var wx, wy float64
			rng := uint64(12345)
			for i := 0; i < 3000; i++ {
				x := 0.01 + 4*unit(&rng)
				l := math.Log(x)
				if math.Abs(l) < 1e-3 {
					continue
				}
				y := (2*unit(&rng) - 1) * tc.maxYLnX / math.Abs(l)
				u := ulp64(Pow64(x, y), refPow(x, y))
				if u > maxUlp {
					maxUlp, wx, wy = u, x, y
				}
				if bound := tc.maxUlp + int64(math.Abs(y*l)/8); u > bound {
					t.Errorf("Pow64(%v, %v) is %d ulp from the reference, want at most %d", x, y, u, bound)
				}
			}
			t.Logf("|y ln x| <= %g: max %d ulp (at %v**%v)", tc.maxYLnX, maxUlp, wx, wy)
		})
	}
	t.Run("AdamW bias corrections for t up to 10000 stay within 2 ulp", func(t *testing.T) {
		for _, beta := range []float64{0.9, 0.95, 0.98, 0.999} {
			for step := 1; step <= 10000; step += 1 + step/50 {
				got, want := Pow64(beta, float64(step)), refPow(beta, float64(step))
				bound := int64(2)
				if u := ulp64(got, want); u > bound {
					t.Fatalf("Pow64(%v, %d) = %v, reference %v: %d ulp > %d", beta, step, got, want, u, bound)
				}
			}
		}
	})
}

// unit returns a deterministic uniform value in [0, 1) from a SplitMix64 state.
func unit(s *uint64) float64 { return float64(splitmix(s)>>11) * 0x1p-53 }

func splitmix(s *uint64) uint64 {
	*s += 0x9e3779b97f4a7c15
	z := *s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func TestPiOver2SplitIsExactEnough(t *testing.T) {
	p := machinPi(300)
	p.SetMantExp(p, -1)
	sum := new(big.Float).SetPrec(300).SetFloat64(piOver2P1)
	sum.Add(sum, new(big.Float).SetFloat64(piOver2P2))
	sum.Add(sum, new(big.Float).SetFloat64(piOver2P3))
	diff := new(big.Float).SetPrec(300).Sub(p, sum)
	d, _ := diff.Float64()
	if math.Abs(d) > 0x1p-118 {
		t.Errorf("p1+p2+p3 differs from π/2 by %g, want below 2**-118", d)
	}
	for _, c := range []struct {
		name string
		v    float64
	}{{"p1", piOver2P1}, {"p2", piOver2P2}} {
		if tz := math.Float64bits(c.v) & (1<<19 - 1); tz != 0 {
			t.Errorf("%s = %x has more than 33 significant bits, so n*%s is not exact", c.name, math.Float64bits(c.v), c.name)
		}
	}
	want := new(big.Float).SetPrec(700)
	want.SetString("3.14159265358979323846264338327950288419716939937510582097494459230781640628620899862803482534211706798214808651328230664709384460955058223172535940812848111745028410270193852110555964462294895493038196")
	got := machinPi(600)
	diff.Sub(want, got)
	if d, _ := diff.Float64(); math.Abs(d) > 1e-170 {
		t.Errorf("machinPi differs from the published digits of π by %g", d)
	}
}
