package fastblas

import "gonum.org/v1/gonum/blas"

// gonumBlock and gonumMinParBlocks are gonum's blockSize and minParBlock: gonum computes a
// product whose C has at least 4 blocks of 64×64 in parallel, block by block, each block's k
// products in slices of 64 added in order; a smaller one on the calling goroutine, in one pass.
const (
	gonumBlock        = 64
	gonumMinParBlocks = 4
)

// serialGemm computes gonum's C = α·op(A)·op(B) + β·C (gemm is gonum's Sgemm or Dgemm) on
// the calling goroutine, with the same bits as gonum's own call: where gonum would go
// parallel it is called on C's panels of 64 rows and 192 columns (3 blocks: serial) and on
// k's slices of 64 in order, the blocks and slices of gonum's parallel code, β applied with
// the first slice. Each graph replica already has its core: gonum's goroutines on top of the
// replicas only added scheduling (docs/benchmarks.md).
func serialGemm[T float32 | float64](gemm func(tA, tB blas.Transpose, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int),
	tA, tB blas.Transpose, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	blocks := func(x int) int { return (x + gonumBlock - 1) / gonumBlock }
	if blocks(m)*blocks(n) < gonumMinParBlocks || alpha == 0 || !libraryGemm(tA, tB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc) {
		gemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	const cols = (gonumMinParBlocks - 1) * gonumBlock
	for i := 0; i < m; i += gonumBlock {
		mi := min(gonumBlock, m-i)
		for j := 0; j < n; j += cols {
			nj := min(cols, n-j)
			be := beta
			for l := 0; l < k; l += gonumBlock {
				kl := min(gonumBlock, k-l)
				// op(A)[i, l] and op(B)[l, j] as stored.
				offA, offB := i*lda+l, l*ldb+j
				if tA != blas.NoTrans {
					offA = l*lda + i
				}
				if tB != blas.NoTrans {
					offB = j*ldb + l
				}
				ai, bj := a[offA:], b[offB:]
				gemm(tA, tB, mi, nj, kl, alpha, ai, lda, bj, ldb, be, c[i*ldc+j:], ldc)
				be = 1
			}
		}
	}
}
