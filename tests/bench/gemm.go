package main

import (
	"flag"
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/easyscale/easyscale-slurm/runtime/engine"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

func init() { register("gemm", gemmFigures) }

// gemmShapes are the products the project runs (as in runtime/engine's
// BenchmarkGemm): LeNet convolutions via im2col at batch 32, the MNIST
// hidden layer, and a small transformer's projections at sequence 512.
var gemmShapes = []struct{ m, n, k int }{
	{8, 576 * 32, 25},
	{16, 64 * 32, 200},
	{32, 128, 256},
	{512, 192, 64},
	{512, 64, 256},
	{512, 256, 64},
}

// gemmFigures measures engine.Gemm (threads=1) and gonum's Sgemm on the same
// operands, both with GOMAXPROCS=1, and returns:
//   - gemm_gflops_{nn,tn,nt}: mean GFLOP/s of engine.Gemm over the shapes,
//     counting 2·m·n·k floating-point operations per call;
//   - gemm_vs_gonum_ratio: geometric mean over all 18 (op, shape) pairs of
//     gonum's time divided by ours (above 1 means faster than gonum).
func gemmFigures() ([]figure, error) {
	testing.Init()
	if err := flag.Set("test.benchtime", "100ms"); err != nil {
		return nil, fmt.Errorf("setting the benchmark time: %w", err)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var figs []figure
	logRatio, pairs := 0.0, 0
	for _, op := range []struct {
		name           string
		transA, transB bool
	}{{"nn", false, false}, {"tn", true, false}, {"nt", false, true}} {
		sum := 0.0
		for _, s := range gemmShapes {
			lda, ldb := s.k, s.n
			if op.transA {
				lda = s.m
			}
			if op.transB {
				ldb = s.k
			}
			a, b, c := gemmOperand(s.m*s.k, 17), gemmOperand(s.k*s.n, 13), make([]float32, s.m*s.n)
			ours := testing.Benchmark(func(tb *testing.B) {
				for tb.Loop() {
					engine.Gemm(op.transA, op.transB, s.m, s.n, s.k, a, lda, b, ldb, c, s.n, false, 1)
				}
			})
			ta, tb := blas.NoTrans, blas.NoTrans
			if op.transA {
				ta = blas.Trans
			}
			if op.transB {
				tb = blas.Trans
			}
			ref := testing.Benchmark(func(bb *testing.B) {
				for bb.Loop() {
					gonum.Implementation{}.Sgemm(ta, tb, s.m, s.n, s.k, 1, a, lda, b, ldb, 0, c, s.n)
				}
			})
			if ours.N == 0 || ref.N == 0 {
				return nil, fmt.Errorf("gemm %s %dx%dx%d: benchmark did not run", op.name, s.m, s.n, s.k)
			}
			oursNs, refNs := float64(ours.NsPerOp()), float64(ref.NsPerOp())
			sum += 2 * float64(s.m*s.n*s.k) / math.Max(oursNs, 1)
			logRatio += math.Log(refNs / math.Max(oursNs, 1))
			pairs++
		}
		figs = append(figs, figure{"gemm_gflops_" + op.name, sum / float64(len(gemmShapes)), "GFLOP/s"})
	}
	figs = append(figs, figure{"gemm_vs_gonum_ratio", math.Exp(logRatio / float64(pairs)), "x"})
	return figs, nil
}

// gemmOperand returns n small exactly representable values repeating with
// the given period.
func gemmOperand(n, period int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i%period) * 0.25
	}
	return x
}
