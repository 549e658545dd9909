package fastblas

import (
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/dpsgd/dpsgd/internal/avxgemm"
)

// Implementation is gonum's BLAS with Sgemm and Dgemm computed by a loaded library or by
// dpsgd's AVX kernels (package avxgemm: AVX-512 or AVX2). It implements blas.Float32,
// blas.Float64, blas.Complex64 and blas.Complex128 (what Gorgonia's Use asks for); every
// routine other than Sgemm and Dgemm is gonum's. A precision's products go to lib when its flag is set, else to
// asm when there is one, else to gonum. The zero value is gonum's BLAS alone.
type Implementation struct {
	gonum.Implementation
	lib *Library
	s32 bool // Sgemm goes to lib
	d64 bool // Dgemm goes to lib
	asm *avxgemm.Impl
}

// Implementation returns the BLAS whose Sgemm and Dgemm are the library's.
func (l *Library) Implementation() Implementation {
	return Implementation{lib: l, s32: true, d64: true}
}

// Library is the library computing Sgemm and Dgemm, nil for gonum's BLAS alone.
func (im Implementation) Library() *Library { return im.lib }

var (
	_ blas.Float32    = Implementation{}
	_ blas.Float64    = Implementation{}
	_ blas.Complex64  = Implementation{}
	_ blas.Complex128 = Implementation{}
)

// Sgemm computes C = α·op(A)·op(B) + β·C for row-major float32 matrices, as gonum's Sgemm
// (blas.Float32): through the library or dpsgd's AVX kernels when the arguments are valid and
// there is a product to compute, else through gonum (which panics on bad arguments with its
// messages).
func (im Implementation) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	switch {
	case !libraryGemm(tA, tB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc) || alpha == 0:
	case im.lib != nil && im.s32:
		im.lib.sgemm(cblasRowMajor, cblasOp(tA), cblasOp(tB), int32(m), int32(n), int32(k),
			alpha, a, int32(lda), b, int32(ldb), beta, c, int32(ldc))
		return
	case im.asm != nil:
		im.asm.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	panicIfWrapped(tA, tB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	im.Implementation.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// Dgemm is Sgemm for float64 matrices (blas.Float64).
func (im Implementation) Dgemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	switch {
	case !libraryGemm(tA, tB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc) || alpha == 0:
	case im.lib != nil && im.d64:
		im.lib.dgemm(cblasRowMajor, cblasOp(tA), cblasOp(tB), int32(m), int32(n), int32(k),
			alpha, a, int32(lda), b, int32(ldb), beta, c, int32(ldc))
		return
	case im.asm != nil:
		im.asm.Dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	panicIfWrapped(tA, tB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	im.Implementation.Dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// cblasOp maps a valid gonum transpose flag to CBLAS's (ConjTrans of a real matrix is Trans).
func cblasOp(t blas.Transpose) int32 {
	if t == blas.NoTrans {
		return cblasNoTrans
	}
	return cblasTrans
}

// libraryGemm reports whether a GEMM with these arguments goes to the library: gonum would
// accept them (its checks, in gonum's Sgemm and Dgemm, are repeated here), there is a product
// to compute (m, n, k > 0), and every size fits the library's 32-bit integers. Anything else
// goes to gonum, which panics with its own message or computes the edge case its way.
func libraryGemm(tA, tB blas.Transpose, m, n, k, lenA, lda, lenB, ldb, lenC, ldc int) bool {
	if !validTrans(tA) || !validTrans(tB) || m <= 0 || n <= 0 || k <= 0 {
		return false
	}
	for _, v := range []int{m, n, k, lda, ldb, ldc} {
		if v > math.MaxInt32 {
			return false
		}
	}
	aRows, aCols, bRows, bCols := storedShapes(tA, tB, m, n, k)
	// m, n, k ≥ 1 and strides < 2³¹: the products below cannot overflow an int.
	return lda >= aCols && ldb >= bCols && ldc >= n &&
		lenA >= (aRows-1)*lda+aCols && lenB >= (bRows-1)*ldb+bCols && lenC >= (m-1)*ldc+n
}

// panicIfWrapped panics with gonum's message for a short matrix when gonum's own length check
// would pass only because (rows − 1)·ld + cols wrapped around int (a stride near MaxInt):
// gonum's assembly then addresses rows outside the slice and faults or worse, where a short
// slice must panic. It returns when the arguments are otherwise invalid (gonum panics on its
// own, with its message, in its order) or the lengths really suffice.
func panicIfWrapped(tA, tB blas.Transpose, m, n, k, lenA, lda, lenB, ldb, lenC, ldc int) {
	if !validTrans(tA) || !validTrans(tB) || m <= 0 || n <= 0 || k <= 0 {
		return
	}
	aRows, aCols, bRows, bCols := storedShapes(tA, tB, m, n, k)
	if lda < aCols || ldb < bCols || ldc < n {
		return
	}
	for _, x := range []struct {
		length, rows, cols, ld int
		msg                    string
	}{
		{lenA, aRows, aCols, lda, "blas: insufficient length of a"},
		{lenB, bRows, bCols, ldb, "blas: insufficient length of b"},
		{lenC, m, n, ldc, "blas: insufficient length of c"},
	} {
		if x.length < (x.rows-1)*x.ld+x.cols {
			return // gonum panics here, with this message
		}
		if x.rows > 1 && x.ld > (x.length-x.cols)/(x.rows-1) {
			panic(x.msg)
		}
	}
}

// storedShapes is the shapes of A and B as stored, for op(A) m×k and op(B) k×n.
func storedShapes(tA, tB blas.Transpose, m, n, k int) (aRows, aCols, bRows, bCols int) {
	aRows, aCols, bRows, bCols = m, k, k, n
	if tA != blas.NoTrans {
		aRows, aCols = k, m
	}
	if tB != blas.NoTrans {
		bRows, bCols = n, k
	}
	return aRows, aCols, bRows, bCols
}

func validTrans(t blas.Transpose) bool {
	return t == blas.NoTrans || t == blas.Trans || t == blas.ConjTrans
}
