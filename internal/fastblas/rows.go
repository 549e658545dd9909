package fastblas

import (
	"math/rand/v2"

	"gonum.org/v1/gonum/blas"
)

// rowsIndependent reports, for the float32 and for the float64 product of im, whether every
// row of C = A·op(B) comes out bit for bit the same when the rows of A are reordered (reversed,
// behind one more row): whether a row's result depends on that row of A alone, not on its
// position nor on the other rows. The per-example path of the training graphs needs this
// (engine/nn's xentOp documentation, and the adversarial-record test of package engine): with
// it, one record cannot move another record's activations, errors or clip coefficient.
//
// gonum's products have it by construction. Of the libraries, BLIS 0.9 passes (it computes
// every tile with one micro-kernel on zero-padded panels); OpenBLAS 0.3.21 on Haswell does not
// (rows at some positions round differently, in float32 and float64), so its products serve
// the clipped sums only and the graphs stay on gonum's (Choice.Graph), and Auto prefers BLIS.
// The probe covers the edge tiles of the libraries' blocking (sizes that are not multiples of
// any register block) and both layouts of B; it runs in well under a millisecond.
func rowsIndependent(im Implementation) (s32, d64 bool) {
	return probeRows(im.Sgemm), probeRows(im.Dgemm)
}

func probeRows[T float32 | float64](gemm func(tA, tB blas.Transpose, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int)) bool {
	rng := rand.New(rand.NewPCG(0x6f776c73, 0x726f7773))
	for _, sh := range [][3]int{{16, 16, 16}, {37, 19, 23}, {64, 32, 9}, {130, 33, 70}} {
		m, n, k := sh[0], sh[1], sh[2]
		for _, tB := range []blas.Transpose{blas.NoTrans, blas.Trans} {
			ldb := n
			if tB == blas.Trans {
				ldb = k
			}
			a, b := make([]T, m*k), make([]T, k*n)
			for i := range a {
				a[i] = T(rng.NormFloat64())
			}
			for i := range b {
				b[i] = T(rng.NormFloat64())
			}
			c := make([]T, m*n)
			gemm(blas.NoTrans, tB, m, n, k, 1, a, k, b, ldb, 0, c, n)
			// Row i of A becomes row m−i of a2, behind a new row 0.
			a2 := make([]T, (m+1)*k)
			for j := range k {
				a2[j] = T(rng.NormFloat64())
			}
			for i := range m {
				copy(a2[(m-i)*k:(m-i+1)*k], a[i*k:(i+1)*k])
			}
			c2 := make([]T, (m+1)*n)
			gemm(blas.NoTrans, tB, m+1, n, k, 1, a2, k, b, ldb, 0, c2, n)
			for i := range m {
				for j := range n {
					// Compared as numbers: random normal inputs give no NaN, and a signed zero
					// of one is the other's.
					if c[i*n+j] != c2[(m-i)*n+j] {
						return false
					}
				}
			}
		}
	}
	return true
}
