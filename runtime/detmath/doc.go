// Package detmath provides the transcendental functions the training engine
// needs (Exp, Log, Tanh in float32; Cos64, Pow64 in float64) with results that
// are bitwise identical on every architecture and GOAMD64/GOARM64 level Go
// supports.
//
// Package math does not give that guarantee: its functions use assembly on
// some architectures and Go code on others, and the compiler may contract
// x*y+z into a fused multiply-add on arm64 (always) and on amd64 v3, so
// results differ by up to 2 ulp between machines. An accuracy-consistent
// trainer (EasyScale, arXiv 2208.14228, section 3.3) must not depend on that.
//
// # How the bits are pinned
//
// Every function here uses only IEEE-754 operations that are correctly
// rounded on all targets (+, -, *, /, conversions) and exact ones
// (math.Float64bits, math.Floor, comparisons). Every product that feeds an
// addition is written float64(a*b) + c: the Go specification says an explicit
// conversion rounds, so the compiler cannot fuse it. The float32 functions
// compute in float64 and round once at the end, which makes them almost
// always correctly rounded. NaN results are always the canonical quiet NaN
// (0x7fc00000 / 0x7ff8000000000001 as returned by math.NaN), never a payload
// that depends on the hardware's NaN propagation rules.
//
// The golden-bits tests (TestGolden*) hash the outputs over a large fixed
// input set and compare with testdata/golden.txt; tests/crossarch/run.sh runs
// them under GOAMD64=v1, GOAMD64=v3 and emulated arm64.
//
// # Algorithms
//
// Exp: Cody–Waite reduction x = n·ln2 + r with ln2 split into a 32-bit head
// and a tail (as in fdlibm e_exp.c), |r| ≤ ln2/2, a degree-13 Taylor
// polynomial for e**r, and an exact scaling by 2**n.
//
// Log: x = 2**e·m with m in [√½, √2), f = m-1, s = f/(2+f) and
// log(1+f) = f - (f²/2 - s·(f²/2 + R(s²))), where R is the atanh series
// 2z/3 + 2z²/5 + … (the fdlibm e_log.c formulation, with Taylor instead of
// minimax coefficients).
//
// Tanh: the odd Taylor series for |x| < 2**-5, (e-1)/(e+1) with e = exp(2|x|)
// otherwise, ±1 beyond |x| > 9.1 where the float32 result is exactly ±1.
//
// Cos64: reduction by the nearest multiple of π/2 with a three-part π/2
// (Cody–Waite) for |x| < 2**20, exact reduction with math/big (π from
// Machin's formula) beyond, then Taylor polynomials for sin and cos on
// [-π/4, π/4].
//
// Pow64: exp(y·log(x)) in float64.
package detmath
