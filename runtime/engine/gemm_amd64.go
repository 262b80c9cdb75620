package engine

import "golang.org/x/sys/cpu"

// gemmAVX2 selects the AVX2 kernels; tests switch it off to check that the
// portable kernel gives the same bits.
var gemmAVX2 = cpu.X86.HasAVX2

// gemmMicro computes a rows×cols block of C (rows ≤ 4): a starts at
// op(A)[i,0] with element strides sa (rows) and sp (k), b at B[0,j], c at
// C[i,j]. Full 16- and 8-column strips go to the AVX2 kernels, the rest to
// gemmMicroGo; both perform the same roundings in the same order.
func gemmMicro(rows, cols, k int, a []float32, sa, sp int, b []float32, ldb int, c []float32, ldc int, acc bool) {
	if !gemmAVX2 {
		gemmMicroGo(rows, cols, k, a, sa, sp, b, ldb, c, ldc, acc)
		return
	}
	j := 0
	if nb := cols / 16; nb > 0 {
		j = nb * 16
		if rows == 4 {
			gemm4x16AVX2(nb, k, &a[0], sa, sp, &b[0], ldb, &c[0], ldc, acc)
		} else {
			for r := 0; r < rows; r++ {
				gemm1x16AVX2(nb, k, &a[r*sa], sa, sp, &b[0], ldb, &c[r*ldc], ldc, acc)
			}
		}
	}
	if cols-j >= 8 {
		if rows == 4 {
			gemm4x8AVX2(1, k, &a[0], sa, sp, &b[j], ldb, &c[j], ldc, acc)
		} else {
			for r := 0; r < rows; r++ {
				gemm1x8AVX2(1, k, &a[r*sa], sa, sp, &b[j], ldb, &c[r*ldc+j], ldc, acc)
			}
		}
		j += 8
	}
	if j < cols {
		gemmMicroGo(rows, cols-j, k, a, sa, sp, b[j:], ldb, c[j:], ldc, acc)
	}
}

// The AVX2 kernels compute nb consecutive blocks of R rows × W columns of C
// (R×W = 4×16, 4×8, 1×16 or 1×8): for p = 0..k-1, C[r, cols] += A[r,p]·B[p, cols]
// with VMULPS then VADDPS (never FMA), starting from +0 or from C when acc.
// a points at op(A)[i,0] (element strides sa between rows, sp along k), b at
// B[0,j] (row stride ldb), c at C[i,j] (row stride ldc); block t uses columns
// j+t·W. k ≥ 1 and nb ≥ 1; the caller guarantees every address is in bounds.

//go:noescape
func gemm4x16AVX2(nb, k int, a *float32, sa, sp int, b *float32, ldb int, c *float32, ldc int, acc bool)

//go:noescape
func gemm4x8AVX2(nb, k int, a *float32, sa, sp int, b *float32, ldb int, c *float32, ldc int, acc bool)

//go:noescape
func gemm1x16AVX2(nb, k int, a *float32, sa, sp int, b *float32, ldb int, c *float32, ldc int, acc bool)

//go:noescape
func gemm1x8AVX2(nb, k int, a *float32, sa, sp int, b *float32, ldb int, c *float32, ldc int, acc bool)
