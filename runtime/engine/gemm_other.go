//go:build !amd64

package engine

// gemmMicro computes a rows×cols block of C (rows ≤ 4); see gemmMicroGo.
func gemmMicro(rows, cols, k int, a []float32, sa, sp int, b []float32, ldb int, c []float32, ldc int, acc bool) {
	gemmMicroGo(rows, cols, k, a, sa, sp, b, ldb, c, ldc, acc)
}

// gemmAVX2 is always false off amd64; it exists so tests can name it.
var gemmAVX2 = false
