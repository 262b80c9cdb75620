package vecf32

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// specials are the inputs whose bits differ most between implementations:
// NaNs with distinct payloads and signs, infinities, zeros, subnormals.
var specials = []float32{
	math.Float32frombits(0x7fc00001), math.Float32frombits(0xffc12345), math.Float32frombits(0x7f800001),
	float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
	math.Float32frombits(1), math.Float32frombits(0x807fffff), math.MaxFloat32, -math.MaxFloat32,
}

func randomVec(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		if rng.IntN(8) == 0 {
			v[i] = specials[rng.IntN(len(specials))]
		} else {
			v[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(10)-5)))
		}
	}
	return v
}

// TestKernelsGiveTheScalarLoopsBits compares each kernel with its scalar
// loop, bit for bit, on every length from 0 to 200 and a long one, so the
// AVX2 body, the tail and the dispatch are all covered.
func TestKernelsGiveTheScalarLoopsBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const s = float32(0.125) + 1e-7
	kernels := []struct {
		name   string
		fast   func(dst, src []float32)
		scalar func(dst, src []float32)
	}{
		{"Add", Add, addGo},
		{"AddScale", func(d, x []float32) { AddScale(d, x, s) }, func(d, x []float32) { addScaleGo(d, x, s) }},
		{"Scale", func(d, _ []float32) { Scale(d, s) }, func(d, _ []float32) { scaleGo(d, s) }},
	}
	lengths := []int{100003}
	for n := 0; n <= 200; n++ {
		lengths = append(lengths, n)
	}
	for _, k := range kernels {
		t.Run(k.name, func(t *testing.T) {
			if !useAVX2 {
				t.Log("no AVX2 here: the kernels are the scalar loops")
			}
			for _, n := range lengths {
				dst, src := randomVec(rng, n), randomVec(rng, n+3)
				want := append([]float32(nil), dst...)
				k.scalar(want, src)
				k.fast(dst, src)
				for i := range dst {
					if math.Float32bits(dst[i]) != math.Float32bits(want[i]) {
						t.Fatalf("n=%d: element %d = %08x, the scalar loop gives %08x", n, i, math.Float32bits(dst[i]), math.Float32bits(want[i]))
					}
				}
			}
		})
	}
}

func ExampleAdd() {
	dst := []float32{1, 2, 3}
	Add(dst, []float32{0.5, 0.25, 0.125})
	AddScale(dst, []float32{1, 1, 1}, 0.5)
	fmt.Println(dst)
	// Output: [1.25 1.625 2.0625]
}

// BenchmarkAdd is one pass of the MNIST example's gradient (37,514 floats).
func BenchmarkAdd(b *testing.B) {
	dst, src := make([]float32, 37514), make([]float32, 37514)
	for _, avx := range []bool{false, true} {
		if avx && !useAVX2 {
			continue
		}
		b.Run(fmt.Sprintf("avx2=%v", avx), func(b *testing.B) {
			saved := useAVX2
			defer func() { useAVX2 = saved }()
			useAVX2 = avx
			b.SetBytes(4 * int64(len(dst)))
			for b.Loop() {
				Add(dst, src)
			}
		})
	}
}
