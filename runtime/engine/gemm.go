package engine

import (
	"fmt"
	"sync"
)

// Gemm computes C = op(A)·op(B), or C += op(A)·op(B) when accumulate is
// true, for row-major float32 matrices. op(X) is X, or Xᵀ when the matching
// trans flag is set. Shapes: op(A) is m×k, op(B) is k×n, C is m×n; lda, ldb
// and ldc are the row strides (in elements) of the stored A, B and C (A is
// stored m×k, or k×m when transA; B is stored k×n, or n×k when transB).
//
// Every output element is summed over k in increasing order, starting from
// +0 (or from C when accumulate), and every product and sum is rounded to
// float32 on its own (no fused multiply-add):
//
//	c[i,j] = (…((c0 + float32(a[i,0]·b[0,j])) + float32(a[i,1]·b[1,j])) …)
//
// so the result is bitwise identical for any threads value, any memory
// alignment and on every architecture (amd64 with or without AVX2, arm64,
// any GOAMD64 level). The one exception is the payload of a NaN result,
// which follows the hardware's NaN propagation rules.
//
// Speed: the product is vectorised across output columns (an axpy per
// element of A, with separate multiply and add), in an AVX2 kernel holding
// a 4×16 block of C in registers on amd64 and in portable Go elsewhere.
// For transB, B is first transposed into pooled scratch. Work is split
// across up to threads goroutines by blocks of output rows (or of output
// columns when there are fewer row blocks than threads), never by k;
// threads ≤ 1 and problems below gemmMinParallel multiply-adds run on the
// calling goroutine.
//
// m, n or k may be 0 (k = 0 sets C to 0, or leaves it when accumulate).
// Gemm panics on programmer error: a negative dimension, a stride smaller
// than its row length, or a slice too short for the shape and stride.
func Gemm(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, accumulate bool, threads int) {
	gemmCheck(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		if !accumulate {
			for i := 0; i < m; i++ {
				clear(c[i*ldc : i*ldc+n])
			}
		}
		return
	}
	// op(A)[i,p] = a[i*sa + p*sp].
	sa, sp := lda, 1
	if transA {
		sa, sp = 1, lda
	}
	if transB {
		bt := gemmScratch.Get().(*[]float32)
		defer gemmScratch.Put(bt)
		if cap(*bt) < k*n {
			*bt = make([]float32, k*n)
		}
		*bt = (*bt)[:k*n]
		gemmTranspose(*bt, b, n, k, ldb)
		b, ldb = *bt, n
	}
	job := gemmJob{k: k, a: a, sa: sa, sp: sp, b: b, ldb: ldb, c: c, ldc: ldc, acc: accumulate}
	gemmParallel(&job, m, n, threads)
}

// gemmMinParallel is the number of multiply-adds below which Gemm does not
// start goroutines (starting one costs about a microsecond, roughly this much
// arithmetic on one core).
const gemmMinParallel = 1 << 16

// gemmScratch pools the transposed-B buffers of NT products.
var gemmScratch = sync.Pool{New: func() any { return new([]float32) }}

// gemmJob is one product with A given by element strides, B row-major.
type gemmJob struct {
	k      int
	a      []float32
	sa, sp int
	b      []float32
	ldb    int
	c      []float32
	ldc    int
	acc    bool
}

// gemmParallel splits C by blocks of 4 rows, or of 16 columns when there are
// fewer row blocks than threads, and runs the blocks on up to threads
// goroutines. Each C element is computed by exactly one goroutine with the
// same operation sequence, so the split never changes the bits.
func gemmParallel(job *gemmJob, m, n, threads int) {
	if threads <= 1 || m*n*job.k < gemmMinParallel {
		job.block(0, m, 0, n)
		return
	}
	rowBlocks, colBlocks := (m+3)/4, (n+15)/16
	byRows := rowBlocks >= threads || rowBlocks >= colBlocks
	blocks := colBlocks
	if byRows {
		blocks = rowBlocks
	}
	g := min(threads, blocks)
	var wg sync.WaitGroup
	for w := 0; w < g; w++ {
		lo, hi := w*blocks/g, (w+1)*blocks/g
		run := func() {
			if byRows {
				job.block(lo*4, min(hi*4, m), 0, n)
			} else {
				job.block(0, m, lo*16, min(hi*16, n))
			}
		}
		if w == g-1 {
			run()
			continue
		}
		wg.Go(run)
	}
	wg.Wait()
}

// block computes C[i0:i1, j0:j1] in column panels whose slice of B stays in
// the L2 cache, and within a panel by 4-row micro-panels.
func (g *gemmJob) block(i0, i1, j0, j1 int) {
	nc := max(16, (32768/g.k)&^15)
	for jp := j0; jp < j1; jp += nc {
		cols := min(nc, j1-jp)
		for i := i0; i < i1; i += 4 {
			rows := min(4, i1-i)
			gemmMicro(rows, cols, g.k, g.a[i*g.sa:], g.sa, g.sp, g.b[jp:], g.ldb, g.c[i*g.ldc+jp:], g.ldc, g.acc)
		}
	}
}

// gemmMicroGo computes rows×cols of C in portable Go: a starts at op(A)[i,0],
// b at B[0,j], c at C[i,j]. It is the reference-order kernel used for
// column tails, on non-amd64 architectures and on amd64 without AVX2.
// Four columns are accumulated in locals across the k loop.
func gemmMicroGo(rows, cols, k int, a []float32, sa, sp int, b []float32, ldb int, c []float32, ldc int, acc bool) {
	for r := 0; r < rows; r++ {
		ar := a[r*sa:]
		cr := c[r*ldc : r*ldc+cols]
		j := 0
		for ; j+4 <= cols; j += 4 {
			var s0, s1, s2, s3 float32
			if acc {
				s0, s1, s2, s3 = cr[j], cr[j+1], cr[j+2], cr[j+3]
			}
			bi := j
			for p := 0; p < k; p++ {
				av := ar[p*sp]
				bp := b[bi : bi+4 : bi+4]
				s0 = s0 + float32(av*bp[0])
				s1 = s1 + float32(av*bp[1])
				s2 = s2 + float32(av*bp[2])
				s3 = s3 + float32(av*bp[3])
				bi += ldb
			}
			cr[j], cr[j+1], cr[j+2], cr[j+3] = s0, s1, s2, s3
		}
		for ; j < cols; j++ {
			var s float32
			if acc {
				s = cr[j]
			}
			bi := j
			for p := 0; p < k; p++ {
				s = s + float32(ar[p*sp]*b[bi])
				bi += ldb
			}
			cr[j] = s
		}
	}
}

// gemmTranspose writes the k×n transpose of the n×k matrix b (row stride
// ldb) into dst (row stride n). Eight rows of b are read as parallel
// sequential streams and written as 8 contiguous floats per row of dst.
func gemmTranspose(dst, b []float32, n, k, ldb int) {
	j := 0
	for ; j+8 <= n; j += 8 {
		r0 := b[j*ldb : j*ldb+k]
		r1 := b[(j+1)*ldb : (j+1)*ldb+k]
		r2 := b[(j+2)*ldb : (j+2)*ldb+k]
		r3 := b[(j+3)*ldb : (j+3)*ldb+k]
		r4 := b[(j+4)*ldb : (j+4)*ldb+k]
		r5 := b[(j+5)*ldb : (j+5)*ldb+k]
		r6 := b[(j+6)*ldb : (j+6)*ldb+k]
		r7 := b[(j+7)*ldb : (j+7)*ldb+k]
		for p := range r0 {
			d := dst[p*n+j : p*n+j+8 : p*n+j+8]
			d[0], d[1], d[2], d[3] = r0[p], r1[p], r2[p], r3[p]
			d[4], d[5], d[6], d[7] = r4[p], r5[p], r6[p], r7[p]
		}
	}
	for ; j < n; j++ {
		row := b[j*ldb : j*ldb+k]
		for p, v := range row {
			dst[p*n+j] = v
		}
	}
}

// gemmCheck panics unless the shapes, strides and slice lengths are
// consistent: these are programmer errors, not input errors.
func gemmCheck(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("engine.Gemm: negative dimension m=%d n=%d k=%d", m, n, k))
	}
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	gemmCheckMatrix("A", ar, ac, a, lda)
	gemmCheckMatrix("B", br, bc, b, ldb)
	gemmCheckMatrix("C", m, n, c, ldc)
}

func gemmCheckMatrix(name string, rows, cols int, x []float32, ld int) {
	if rows == 0 || cols == 0 {
		return
	}
	if ld < cols {
		panic(fmt.Sprintf("engine.Gemm: ld%s=%d is less than its row length %d", name, ld, cols))
	}
	if need := (rows-1)*ld + cols; len(x) < need {
		panic(fmt.Sprintf("engine.Gemm: %s has %d elements, a %d×%d matrix with stride %d needs %d", name, len(x), rows, cols, ld, need))
	}
}
