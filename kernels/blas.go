package kernels

import (
	"unsafe"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"
)

// Float is the element type of model tensors.
type Float interface{ ~float32 | ~float64 }

// is32 reports whether T is a float32 type (its size is 4 bytes).
func is32[T Float]() bool {
	var z T
	return unsafe.Sizeof(z) == 4
}

// asF32 reinterprets s, whose element type has float32 as its underlying type,
// as a []float32 sharing the same memory.
func asF32[T Float](s []T) []float32 {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}

// asF64 reinterprets s, whose element type has float64 as its underlying type,
// as a []float64 sharing the same memory.
func asF64[T Float](s []T) []float64 {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}

func transpose(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

// Gemm computes
//
//	C = α·op(A)·op(B) + β·C
//
// for row-major matrices, where op(X) = Xᵀ when the corresponding flag tA or
// tB is true and X otherwise; op(A) is m×k, op(B) is k×n and C is m×n, with
// row strides lda, ldb and ldc. It dispatches to the BLAS installed in gonum's
// blas32 and blas64 packages (Sgemm for float32 element types, Dgemm for
// float64): gonum's pure-Go one, which parallelizes large products over
// goroutines, unless the command installed a library (internal/fastblas).
//
// Bad shapes or strides panic with gonum's BLAS messages. As in BLAS, when
// β = 0 the prior contents of C are not read, and NaN in A or B propagate
// (except that gonum skips the terms of a zero element of A).
func Gemm[T Float](tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	if is32[T]() {
		blas32.Implementation().Sgemm(transpose(tA), transpose(tB), m, n, k, float32(alpha), asF32(a), lda, asF32(b), ldb, float32(beta), asF32(c), ldc)
		return
	}
	blas64.Implementation().Dgemm(transpose(tA), transpose(tB), m, n, k, float64(alpha), asF64(a), lda, asF64(b), ldb, float64(beta), asF64(c), ldc)
}
