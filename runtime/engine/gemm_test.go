package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// refGemm is the definition of Gemm: a scalar triple loop that rounds every
// product and every sum to float32 and sums p in increasing order.
func refGemm(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, accumulate bool) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float32
			if accumulate {
				s = c[i*ldc+j]
			}
			for p := 0; p < k; p++ {
				var av, bv float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s = s + float32(av*bv)
			}
			c[i*ldc+j] = s
		}
	}
}

// gemmCase is one product with storage padded by extra stride and placed at
// an offset inside larger slices, so alignment and strides vary.
type gemmCase struct {
	transA, transB, acc bool
	m, n, k             int
	padA, padB, padC    int
	offA, offB, offC    int
}

func (g gemmCase) String() string {
	return fmt.Sprintf("tA=%v tB=%v acc=%v m=%d n=%d k=%d pad=%d/%d/%d off=%d/%d/%d",
		g.transA, g.transB, g.acc, g.m, g.n, g.k, g.padA, g.padB, g.padC, g.offA, g.offB, g.offC)
}

// operands returns a, b, c and strides filled from r. Values span several
// binades and signs so that roundings in a wrong order would show.
func (g gemmCase) operands(r *rand.Rand) (a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	ar, ac := g.m, g.k
	if g.transA {
		ar, ac = g.k, g.m
	}
	br, bc := g.k, g.n
	if g.transB {
		br, bc = g.n, g.k
	}
	lda, ldb, ldc = ac+g.padA, bc+g.padB, g.n+g.padC
	fill := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64() * math.Exp2(float64(r.IntN(9)-4)))
		}
		return x
	}
	a = fill(g.offA + max(0, ar*lda))[g.offA:]
	b = fill(g.offB + max(0, br*ldb))[g.offB:]
	c = fill(g.offC + max(0, g.m*ldc))[g.offC:]
	return a, lda, b, ldb, c, ldc
}

func randomGemmCases(r *rand.Rand, n int) []gemmCase {
	dims := []int{0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 23, 24, 31, 32, 33, 40, 47, 64, 65}
	var cs []gemmCase
	for i := 0; i < n; i++ {
		cs = append(cs, gemmCase{
			transA: i&1 != 0, transB: i&2 != 0, acc: i&4 != 0,
			m: dims[r.IntN(len(dims))], n: dims[r.IntN(len(dims))], k: dims[r.IntN(len(dims))],
			padA: r.IntN(3), padB: r.IntN(3), padC: r.IntN(3),
			offA: r.IntN(9), offB: r.IntN(9), offC: r.IntN(9),
		})
	}
	return cs
}

func bitsEqualReport(got, want []float32) string {
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			return fmt.Sprintf("element %d: got %v (%#08x), want %v (%#08x)", i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
	return ""
}

// withKernels runs f once with the AVX2 kernels (where the CPU has them)
// and once with the portable kernel only.
func withKernels(t *testing.T, f func(t *testing.T)) {
	t.Run("default kernels", f)
	if !gemmAVX2 {
		return
	}
	t.Run("portable kernel", func(t *testing.T) {
		gemmAVX2 = false
		t.Cleanup(func() { gemmAVX2 = true })
		f(t)
	})
}

func TestGemmIsBitwiseEqualToTheScalarDefinition(t *testing.T) {
	withKernels(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		for _, tc := range randomGemmCases(r, 400) {
			a, lda, b, ldb, c0, ldc := tc.operands(r)
			want := append([]float32(nil), c0...)
			refGemm(tc.transA, tc.transB, tc.m, tc.n, tc.k, a, lda, b, ldb, want, ldc, tc.acc)
			for threads := 1; threads <= 5; threads++ {
				got := append([]float32(nil), c0...)
				Gemm(tc.transA, tc.transB, tc.m, tc.n, tc.k, a, lda, b, ldb, got, ldc, tc.acc, threads)
				if msg := bitsEqualReport(got, want); msg != "" {
					t.Fatalf("%v threads=%d: %s", tc, threads, msg)
				}
			}
		}
	})
}

// TestGemmSplitsLargeProductsWithoutChangingBits uses shapes above the
// parallel threshold, split by rows (tall C) and by columns (wide C).
func TestGemmSplitsLargeProductsWithoutChangingBits(t *testing.T) {
	tests := []struct {
		name string
		tc   gemmCase
	}{
		{"a tall product is split by rows", gemmCase{m: 67, n: 45, k: 50, padA: 1, offA: 3, offB: 1, offC: 2}},
		{"a wide product is split by columns", gemmCase{m: 5, n: 301, k: 60, padB: 2, offB: 5, offC: 1}},
		{"a transposed-B product shares the packed B across goroutines", gemmCase{transB: true, acc: true, m: 40, n: 70, k: 33, offB: 7}},
		{"a transposed-A product reads A by columns", gemmCase{transA: true, m: 36, n: 100, k: 41, padA: 3, offA: 1}},
	}
	withKernels(t, func(t *testing.T) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				tc := tt.tc
				r := rand.New(rand.NewPCG(3, 4))
				a, lda, b, ldb, c0, ldc := tc.operands(r)
				want := append([]float32(nil), c0...)
				refGemm(tc.transA, tc.transB, tc.m, tc.n, tc.k, a, lda, b, ldb, want, ldc, tc.acc)
				for _, threads := range []int{1, 2, 3, 4, 5, 8} {
					got := append([]float32(nil), c0...)
					Gemm(tc.transA, tc.transB, tc.m, tc.n, tc.k, a, lda, b, ldb, got, ldc, tc.acc, threads)
					if msg := bitsEqualReport(got, want); msg != "" {
						t.Fatalf("threads=%d: %s", threads, msg)
					}
				}
			})
		}
	})
}

func TestGemmEdgeCases(t *testing.T) {
	tests := []struct {
		name    string
		m, n, k int
		acc     bool
		c, want []float32
	}{
		{"k of zero without accumulate sets C to zero", 1, 2, 0, false, []float32{5, 6}, []float32{0, 0}},
		{"k of zero with accumulate leaves C alone", 1, 2, 0, true, []float32{5, 6}, []float32{5, 6}},
		{"m of zero touches nothing", 0, 2, 3, false, []float32{5, 6}, []float32{5, 6}},
		{"n of zero touches nothing", 2, 0, 3, false, []float32{5, 6}, []float32{5, 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := []float32{1, 2, 3, 4, 5, 6}
			b := []float32{1, 2, 3, 4, 5, 6}
			ldc := max(tt.n, 1)
			Gemm(false, false, tt.m, tt.n, tt.k, a, max(tt.k, 1), b, max(tt.n, 1), tt.c, ldc, tt.acc, 2)
			if msg := bitsEqualReport(tt.c, tt.want); msg != "" {
				t.Error(msg)
			}
		})
	}
	t.Run("a sum that starts from +0 keeps +0 when the first product is -0", func(t *testing.T) {
		c := []float32{7}
		Gemm(false, false, 1, 1, 1, []float32{float32(math.Copysign(0, -1))}, 1, []float32{1}, 1, c, 1, false, 1)
		if math.Float32bits(c[0]) != 0 {
			t.Errorf("got bits %#08x, want +0", math.Float32bits(c[0]))
		}
	})
}

func TestGemmPanicsOnProgrammerErrors(t *testing.T) {
	a, b, c := make([]float32, 6), make([]float32, 6), make([]float32, 4)
	tests := []struct {
		name string
		call func()
		want string
	}{
		{"a negative dimension", func() { Gemm(false, false, -1, 2, 3, a, 3, b, 2, c, 2, false, 1) }, "negative dimension"},
		{"an A stride shorter than its row", func() { Gemm(false, false, 2, 2, 3, a, 2, b, 2, c, 2, false, 1) }, "ldA=2"},
		{"a B slice too short", func() { Gemm(false, false, 2, 2, 3, a, 3, b[:5], 2, c, 2, false, 1) }, "B has 5 elements"},
		{"a C slice too short", func() { Gemm(false, false, 2, 2, 3, a, 3, b, 2, c[:3], 2, false, 1) }, "C has 3 elements"},
		{"a transposed B checked against its stored shape", func() { Gemm(false, true, 2, 2, 3, a, 3, b, 2, c, 2, false, 1) }, "ldB=2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), tt.want) {
					t.Errorf("panic %v, want one containing %q", r, tt.want)
				}
			}()
			tt.call()
		})
	}
}

const gemmGoldenFile = "testdata/gemm.golden"

// gemmGoldenHash hashes the result bits of a fixed set of products covering
// all trans combinations, accumulate, odd shapes and the project's shapes.
func gemmGoldenHash() string {
	h := sha256.New()
	r := rand.New(rand.NewPCG(2024, 7))
	cases := randomGemmCases(r, 64)
	cases = append(cases,
		gemmCase{m: 16, n: 300, k: 200},
		gemmCase{transB: true, m: 33, n: 128, k: 256, acc: true},
		gemmCase{transA: true, m: 64, n: 192, k: 72, padA: 1},
	)
	var buf [4]byte
	for _, tc := range cases {
		a, lda, b, ldb, c, ldc := tc.operands(r)
		Gemm(tc.transA, tc.transB, tc.m, tc.n, tc.k, a, lda, b, ldb, c, ldc, tc.acc, 3)
		for _, v := range c {
			binary.LittleEndian.PutUint32(buf[:], math.Float32bits(v))
			h.Write(buf[:])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestGemmGoldenBits pins the result bits; tests/crossarch/run.sh runs it on
// amd64 v1, v3 and emulated arm64. Refresh with -update only after changing
// the operand generator (never to make an architecture pass).
func TestGemmGoldenBits(t *testing.T) {
	got := gemmGoldenHash()
	if *update {
		if err := os.WriteFile(gemmGoldenFile, []byte(got+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(gemmGoldenFile)
	if err != nil {
		t.Fatalf("reading golden hash (create with -update): %v", err)
	}
	if w := strings.TrimSpace(string(want)); got != w {
		t.Errorf("Gemm result bits hash %s, golden %s", got, w)
	}
}

// FuzzGemm compares Gemm bit for bit with the scalar definition for any
// shape up to 40, trans flags, accumulate, padding, offset and thread count.
func FuzzGemm(f *testing.F) {
	f.Add(uint8(3), uint8(17), uint8(9), uint8(0), uint64(1))
	f.Add(uint8(4), uint8(16), uint8(1), uint8(0xff), uint64(2))
	f.Add(uint8(9), uint8(33), uint8(40), uint8(0x5a), uint64(3))
	f.Fuzz(func(t *testing.T, m, n, k, flags uint8, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 11))
		tc := gemmCase{
			transA: flags&1 != 0, transB: flags&2 != 0, acc: flags&4 != 0,
			m: int(m % 41), n: int(n % 41), k: int(k % 41),
			padA: int(flags>>3) & 1, padB: int(flags>>4) & 1, padC: int(flags>>5) & 1,
			offA: r.IntN(8), offB: r.IntN(8), offC: r.IntN(8),
		}
		a, lda, b, ldb, c0, ldc := tc.operands(r)
		want := append([]float32(nil), c0...)
		refGemm(tc.transA, tc.transB, tc.m, tc.n, tc.k, a, lda, b, ldb, want, ldc, tc.acc)
		got := append([]float32(nil), c0...)
		Gemm(tc.transA, tc.transB, tc.m, tc.n, tc.k, a, lda, b, ldb, got, ldc, tc.acc, 1+int(flags>>6))
		if msg := bitsEqualReport(got, want); msg != "" {
			t.Fatalf("%v: %s", tc, msg)
		}
	})
}
