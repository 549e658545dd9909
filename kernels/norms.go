package kernels

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas/gonum"
)

// checkLen panics with a gonum-style message when a slice is shorter than a
// shape requires; it is a programmer error, never a data error.
func checkLen(name string, have, want int) {
	if have < want {
		panic(fmt.Sprintf("kernels: %s has length %d, need at least %d", name, have, want))
	}
}

func checkDims(rows, cols int) {
	if rows < 0 || cols < 0 {
		panic(fmt.Sprintf("kernels: negative dimension rows=%d cols=%d", rows, cols))
	}
}

// RowSqNorms sets, for the rows×cols row-major matrix a,
//
//	dst[i] = Σⱼ a[i·cols+j]²,  i < rows,
//
// accumulating in float64 (gonum's Ddot, or Dsdot for float32 data, which
// widens each element before multiplying). These are the ‖aᵢ‖² and ‖eᵢ‖²
// of the ghost-norm identity ‖aᵢ⊗eᵢ‖² = ‖aᵢ‖²·‖eᵢ‖² (DESIGN.md step 3).
// A row holding NaN or ±Inf gives a non-finite entry, which ClipCoefs zeroes.
func RowSqNorms[T Float](dst []float64, a []T, rows, cols int) {
	checkDims(rows, cols)
	checkLen("dst", len(dst), rows)
	checkLen("a", len(a), rows*cols)
	var impl gonum.Implementation
	if cols == 0 {
		clear(dst[:rows])
		return
	}
	if is32[T]() {
		x := asF32(a)
		for i := range rows {
			r := x[i*cols : (i+1)*cols]
			dst[i] = impl.Dsdot(cols, r, 1, r, 1)
		}
		return
	}
	x := asF64(a)
	for i := range rows {
		r := x[i*cols : (i+1)*cols]
		dst[i] = impl.Ddot(cols, r, 1, r, 1)
	}
}

// GhostAccum adds one dense layer's contribution to the per-example squared
// gradient norms:
//
//	norm2[i] += (asq[i] + β)·esq[i],  β = 1 if hasBias else 0,
//
// where asq[i] = ‖aᵢ‖² (input activations) and esq[i] = ‖eᵢ‖² (errors at the
// pre-activation), both from RowSqNorms. The weight gradient of example i is
// aᵢ⊗eᵢ with ‖aᵢ⊗eᵢ‖² = ‖aᵢ‖²‖eᵢ‖², and the bias gradient is eᵢ
// (DESIGN.md step 3, Li et al. 2022 "ghost clipping"). The three slices have
// the same length; a shorter asq or esq panics.
func GhostAccum(norm2, asq, esq []float64, hasBias bool) {
	n := len(norm2)
	checkLen("asq", len(asq), n)
	checkLen("esq", len(esq), n)
	asq, esq = asq[:n], esq[:n]
	if hasBias {
		for i := range norm2 {
			norm2[i] += (asq[i] + 1) * esq[i]
		}
		return
	}
	for i := range norm2 {
		norm2[i] += asq[i] * esq[i]
	}
}

// ClipCoefs sets the clip coefficients of DESIGN.md step 4,
//
//	coef[i] = mask[i]·min(1, C/√norm2[i]),
//
// so that every clipped per-example gradient has norm ≤ C, the sensitivity
// that the Gaussian mechanism's noise σ·C is calibrated to (privacy-math.md
// §2, clip norm C; padding rows with mask 0 contribute nothing, as the
// zero-out adjacency there requires).
// for i < len(coef), with C = clip. A nil mask means all ones; otherwise mask
// entries are 0 or 1 (padding rows of a fixed-shape batch have mask 0).
//
// Edge cases: norm2[i] = 0 gives mask[i] (nothing to clip); clip = +Inf means
// no clipping, coef = mask for every finite norm. A norm2[i] that is NaN,
// ±Inf or negative (impossible for a sum of squares, so a sign of overflow or
// a NaN upstream) gives coef[i] = 0, so the example contributes nothing, and is
// counted in nonFinite whatever its mask.
//
// clip must be > 0 (possibly +Inf); a NaN or non-positive clip is a programmer
// error and panics (the engine validates the user's clip norm beforehand).
func ClipCoefs(coef, norm2, mask []float64, clip float64) (nonFinite int) {
	if !(clip > 0) {
		panic(fmt.Sprintf("kernels: ClipCoefs clip = %v, need clip > 0 or +Inf", clip))
	}
	n := len(coef)
	checkLen("norm2", len(norm2), n)
	norm2 = norm2[:n]
	if mask != nil {
		checkLen("mask", len(mask), n)
		mask = mask[:n]
	}
	for i, v := range norm2 {
		m := 1.0
		if mask != nil {
			m = mask[i]
		}
		// v ≥ 0 is false for NaN and negatives; v ≤ MaxFloat64 excludes +Inf.
		if !(v >= 0 && v <= math.MaxFloat64) {
			coef[i] = 0
			nonFinite++
			continue
		}
		// clip/√v ≥ 1 exactly when √v ≤ clip (IEEE division is monotone),
		// and clip/0 = +Inf, so min gives 1 for unclipped rows without a
		// data-dependent branch.
		coef[i] = m * min(1, clip/math.Sqrt(v))
	}
	return nonFinite
}

// ScaleRows multiplies row i of the rows×cols row-major matrix a by c[i]:
//
//	a[i·cols+j] ← c[i]·a[i·cols+j].
//
// Where c[i] == 0 the row is set to exactly 0 instead, so a row holding NaN or
// ±Inf (whose norm ClipCoefs zeroed) never leaks: 0·NaN would be NaN.
func ScaleRows[T Float](a []T, rows, cols int, c []float64) {
	checkDims(rows, cols)
	checkLen("a", len(a), rows*cols)
	checkLen("c", len(c), rows)
	for i := range rows {
		r := a[i*cols : (i+1)*cols]
		switch ci := c[i]; ci {
		case 0:
			clear(r)
		case 1:
		default:
			s := T(ci)
			for j := range r {
				r[j] *= s
			}
		}
	}
}

// ClippedSum computes the clipped gradient sum of one dense layer without
// materializing per-example gradients (DESIGN.md step 5):
//
//	dstW = Aᵀ·diag(c)·E   (d×h),   dstB = 1ᵀ·diag(c)·E   (h),
//
// i.e. dstW = Σᵢ cᵢ·aᵢ⊗eᵢ and dstB = Σᵢ cᵢ·eᵢ, for activations A (b×d) and
// errors E (b×h). scratch (length ≥ b·h) receives diag(c)·E (rows with
// cᵢ = 0 set to exactly 0) and the weights take one GEMM, Aᵀ·scratch; dstB is
// skipped when nil. dstW and dstB are overwritten.
//
// Rows with cᵢ == 0 contribute exactly 0 even when their row of E or of A
// holds NaN or ±Inf. (A non-finite row of A would survive a zero row of
// scratch in the GEMM, since 0·NaN = NaN; in that rare case the GEMM is split
// into the runs of rows between such rows, giving the same sum.)
func ClippedSum[T Float](dstW, dstB []T, a, e []T, b, d, h int, c []float64, scratch []T) {
	if b < 0 || d < 0 || h < 0 {
		panic(fmt.Sprintf("kernels: negative dimension b=%d d=%d h=%d", b, d, h))
	}
	checkLen("dstW", len(dstW), d*h)
	checkLen("a", len(a), b*d)
	checkLen("e", len(e), b*h)
	checkLen("c", len(c), b)
	checkLen("scratch", len(scratch), b*h)
	if dstB != nil {
		checkLen("dstB", len(dstB), h)
	}
	s := scratch[:b*h]
	for i := range b {
		row, src := s[i*h:(i+1)*h], e[i*h:(i+1)*h]
		switch ci := c[i]; ci {
		case 0:
			clear(row)
		case 1:
			copy(row, src)
		default:
			f := T(ci)
			for j, v := range src {
				row[j] = f * v
			}
		}
	}
	if dstB != nil {
		bias := dstB[:h]
		clear(bias)
		for i := range b {
			if c[i] == 0 {
				continue
			}
			for j, v := range s[i*h : (i+1)*h] {
				bias[j] += v
			}
		}
	}
	if d == 0 || h == 0 {
		return
	}
	w := dstW[:d*h]
	// Find rows that are dropped (c = 0) and whose activations are not all
	// finite; only those can poison the single GEMM.
	lo, first := 0, true
	for i := range b {
		if c[i] != 0 || allFinite(a[i*d:(i+1)*d]) {
			continue
		}
		if i > lo {
			gemmRows(first, w, a, s, lo, i, d, h)
			first = false
		}
		lo = i + 1
	}
	if lo < b || first {
		gemmRows(first, w, a, s, lo, b, d, h)
	}
}

// gemmRows sets (first) or adds to w the product A[lo:hi]ᵀ·S[lo:hi].
func gemmRows[T Float](first bool, w, a, s []T, lo, hi, d, h int) {
	beta := T(1)
	if first {
		beta = 0
	}
	if hi == lo {
		if first {
			clear(w)
		}
		return
	}
	Gemm(true, false, d, h, hi-lo, 1, a[lo*d:hi*d], d, s[lo*h:hi*h], h, beta, w, h)
}

// allFinite reports whether every element of x is finite.
func allFinite[T Float](x []T) bool {
	for _, v := range x {
		// v−v is 0 for finite v and NaN for ±Inf or NaN.
		if v-v != 0 {
			return false
		}
	}
	return true
}
