package engine

import (
	"fmt"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// gemmBenchShapes are the products this project runs: LeNet convolutions via
// im2col (batch 32), the MNIST classifier's hidden layer and a small
// transformer's projections (sequence 512).
var gemmBenchShapes = []struct {
	name    string
	m, n, k int
}{
	{"conv1", 8, 576 * 32, 25},
	{"conv2", 16, 64 * 32, 200},
	{"fc", 32, 128, 256},
	{"qkv", 512, 192, 64},
	{"mlpdown", 512, 64, 256},
	{"mlpup", 512, 256, 64},
}

// BenchmarkGemm measures Gemm (threads=1) and gonum's Sgemm on the same
// operands for NN, TN and NT. gonum runs with GOMAXPROCS=1 so both are
// single-threaded; compare the ns/op of matching sub-benchmarks (or the
// reported GFLOP/s).
func BenchmarkGemm(b *testing.B) {
	for _, op := range []struct {
		name           string
		transA, transB bool
	}{{"NN", false, false}, {"TN", true, false}, {"NT", false, true}} {
		for _, s := range gemmBenchShapes {
			lda, ldb := s.k, s.n
			if op.transA {
				lda = s.m
			}
			if op.transB {
				ldb = s.k
			}
			x := make([]float32, s.m*s.k)
			y := make([]float32, s.k*s.n)
			c := make([]float32, s.m*s.n)
			for i := range x {
				x[i] = float32(i%17) * 0.25
			}
			for i := range y {
				y[i] = float32(i%13) * 0.5
			}
			flops := 2 * float64(s.m*s.n*s.k)
			name := fmt.Sprintf("%s/%s_m%dn%dk%d", op.name, s.name, s.m, s.n, s.k)
			b.Run(name+"/ours", func(b *testing.B) {
				for b.Loop() {
					Gemm(op.transA, op.transB, s.m, s.n, s.k, x, lda, y, ldb, c, s.n, false, 1)
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
			b.Run(name+"/gonum", func(b *testing.B) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
				ta, tb := blas.NoTrans, blas.NoTrans
				if op.transA {
					ta = blas.Trans
				}
				if op.transB {
					tb = blas.Trans
				}
				for b.Loop() {
					gonum.Implementation{}.Sgemm(ta, tb, s.m, s.n, s.k, 1, x, lda, y, ldb, 0, c, s.n)
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
