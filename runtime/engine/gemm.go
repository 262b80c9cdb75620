package engine

// Gemm computes C = op(A)·op(B), or C += op(A)·op(B) when accumulate is
// true, for row-major float32 matrices. op(X) is X, or Xᵀ when the matching
// trans flag is set. Shapes: op(A) is m×k, op(B) is k×n, C is m×n; lda, ldb
// and ldc are the row strides (in elements) of the stored A, B and C.
//
// Every output element is summed over k in increasing order, and every
// product and sum is rounded to float32 on its own (no fused multiply-add),
// so the result is bitwise identical for any threads value, any memory
// alignment and on every architecture. Work is split across threads
// goroutines by output rows only.
func Gemm(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, accumulate bool, threads int) {
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
