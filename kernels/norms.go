package kernels

import (
	"fmt"
	"math"
	"slices"

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
// accumulating in float64 (SqNorm). These are the ‖aᵢ‖² and ‖eᵢ‖² of the ghost-norm identity
// ‖aᵢ⊗eᵢ‖² = ‖aᵢ‖²·‖eᵢ‖² (docs/design.md step 3). A row holding NaN or ±Inf gives a non-finite
// entry, which ClipCoefs zeroes. Each row's value depends on that row's elements only, never on
// where the row sits in memory, so an example's norm does not change with its position in the
// batch.
func RowSqNorms[T Float](dst []float64, a []T, rows, cols int) {
	checkDims(rows, cols)
	checkLen("dst", len(dst), rows)
	checkLen("a", len(a), rows*cols)
	for i := range rows {
		dst[i] = SqNorm(a[i*cols : (i+1)*cols])
	}
}

// SqNorm returns Σⱼ x[j]² accumulated in float64.
//
// float32 data are widened exactly and summed in a fixed order (four interleaved partial
// sums); their squares lie in [2⁻²⁹⁸, 2¹²⁸] and never underflow or overflow in float64.
// (gonum's Dsdot is not used: its SIMD loop first peels elements until the address is
// 16-byte aligned, so its rounding depended on the row's offset in the batch.)
//
// float64 data use gonum's Ddot, whose order depends on the length only. Squares below 2⁻¹⁰²²
// lose precision or vanish there, so a sum below 2⁻⁹⁶⁹ (where such losses could matter) is
// recomputed on the row scaled by 2⁶⁰⁰ — exact, a power of two — and scaled back, rounded
// up where the result is subnormal: a tiny norm is never underestimated by underflow, and an
// overflowing one is +Inf.
func SqNorm[T Float](x []T) float64 {
	if len(x) == 0 {
		return 0
	}
	if is32[T]() {
		return sqNorm32(asF32(x))
	}
	var impl gonum.Implementation
	v := asF64(x)
	s := impl.Ddot(len(v), v, 1, v, 1)
	if s < 0x1p-969 {
		return tinySqNorm(v)
	}
	return s
}

func sqNorm32(x []float32) float64 {
	var s0, s1, s2, s3 float64
	n := len(x) &^ 3
	for j := 0; j < n; j += 4 {
		a, b, c, d := float64(x[j]), float64(x[j+1]), float64(x[j+2]), float64(x[j+3])
		s0 += a * a
		s1 += b * b
		s2 += c * c
		s3 += d * d
	}
	for _, v := range x[n:] {
		s0 += float64(v) * float64(v)
	}
	return (s0 + s1) + (s2 + s3)
}

// tinySqNorm is Σ x² for a float64 row whose plain sum was below 2⁻⁹⁶⁹, so every |x| < 2⁻⁴⁸⁴:
// scaled by 2⁶⁰⁰ the squares are normal and below 2²³², and the scaled-back sum is rounded up
// when it is subnormal.
func tinySqNorm(x []float64) float64 {
	var s float64
	for _, v := range x {
		w := v * 0x1p600
		s += w * w
	}
	r := math.Ldexp(s, -1200)
	if s != 0 && r < 0x1p-1022 {
		r = math.Nextafter(r, math.Inf(1))
	}
	return r
}

// GhostAccum adds one dense layer's contribution to the per-example squared
// gradient norms:
//
//	norm2[i] += (asq[i] + β)·esq[i],  β = 1 if hasBias else 0,
//
// where asq[i] = ‖aᵢ‖² (input activations) and esq[i] = ‖eᵢ‖² (errors at the
// pre-activation), both from RowSqNorms. The weight gradient of example i is
// aᵢ⊗eᵢ with ‖aᵢ⊗eᵢ‖² = ‖aᵢ‖²‖eᵢ‖², and the bias gradient is eᵢ
// (docs/design.md step 3, Li et al. 2022 "ghost clipping"). The three slices have
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

// ClipCoefs sets the clip coefficients of docs/design.md step 4,
//
//	coef[i] = mask[i]·min(1, C/√norm2[i]),
//
// so that every clipped per-example gradient has norm ≤ C, the sensitivity
// that the Gaussian mechanism's noise σ·C is calibrated to (clip
// norm C; padding rows with mask 0 contribute nothing, as zero-out adjacency
// requires).
// for i < len(coef), with C = clip. A nil mask means all ones; otherwise mask
// entries are 0 or 1 (padding rows of a fixed-shape batch have mask 0).
//
// An unclipped row (√norm2[i] ≤ C) gets exactly mask[i]. A clipped row's
// coefficient is the float64 quotient, within 1.5 units of the last place of
// C/√norm2[i]; one that would be subnormal is rounded toward zero instead
// (a subnormal quotient has no relative accuracy).
//
// Edge cases: norm2[i] = 0 gives mask[i] (nothing to clip); clip = +Inf means
// no clipping, coef = mask for every finite norm. A norm2[i] that is NaN,
// ±Inf or negative (impossible for a sum of squares, so a sign of overflow or
// a NaN upstream) gives coef[i] = 0, so the example contributes nothing, and is
// counted in nonFinite when it is a real example (mask[i] ≠ 0): a padding row
// is not an example, and counting it would blind the engine's check that
// every example of a step was non-finite.
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
			if m != 0 {
				nonFinite++
			}
			continue
		}
		// clip/√v ≥ 1 exactly when √v ≤ clip (IEEE division is monotone),
		// and clip/0 = +Inf, so min gives 1 for unclipped rows without a
		// data-dependent branch.
		c := m * min(1, clip/math.Sqrt(v))
		if c < 0x1p-1022 && c > 0 {
			c = math.Nextafter(c, 0)
		}
		coef[i] = c
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

// ClipBound returns the norm that clip coefficients aim at so that every example's clipped
// gradient, as computed in T, has norm at most clip: clip·(1 − m) with m = 2⁻²¹ for float32
// and 2⁻²⁹ for float64. The margin covers the rounding between the exact scaled gradient and
// the values that enter the sum — the float64 sum of a row's squares (relative error below
// 2⁻³⁰ for rows of up to 2²³ entries), the scaling of each error entry and the product with
// each activation (ClipScaleRow and the GEMM: each within (1 + u), u = 2⁻²⁴ or 2⁻⁵³) — so
// that the sensitivity the accountants assume, C, holds exactly, not within 1 + 1.2·10⁻⁷.
// The noise stays σ·clip. clip = +Inf (no clipping) is returned as it is.
func ClipBound[T Float](clip float64) float64 {
	if is32[T]() {
		return clip * (1 - 0x1p-21)
	}
	return clip * (1 - 0x1p-29)
}

// ClipScaleRow sets dst[j] to src[j] scaled by a clip coefficient 0 < c < 1,
// never larger in magnitude than c·|src[j]| beyond the unit roundoff of T:
//
//   - float32: where float32(c) is normal and the product float32(c)·src[j] is
//     normal or zero, that product, rounded to nearest — bit for bit the
//     device kernel's value — so |dst[j]| ≤ (1 + 2⁻²⁴)²·c·|src[j]|, below
//     (1 + 1.2·10⁻⁷)·c·|src[j]|. Elsewhere (c below 2⁻¹²⁶, where float32(c)
//     is subnormal, or a product below 2⁻¹²⁶, where a subnormal result has
//     no relative accuracy and one example's clipped gradient could exceed C
//     by a third) the exact product c·src[j], computed in float64 with the
//     residual from an FMA, is rounded toward zero: |dst[j]| ≤ c·|src[j]|.
//   - float64: c·src[j] rounded to nearest (|dst[j]| ≤ (1 + 2⁻⁵³)·c·|src[j]|),
//     moved one step toward zero where it is subnormal (|dst[j]| < c·|src[j]|).
//
// So a clipped dense-layer gradient [aᵢ,1]⊗ẽᵢ has norm at most C times that
// factor, however small c or the errors are. dst and src have the same
// length; they may be the same slice.
func ClipScaleRow[T Float](dst, src []T, c float64) {
	checkLen("dst", len(dst), len(src))
	if is32[T]() {
		clipScaleRow32(asF32(dst), asF32(src), c)
		return
	}
	clipScaleRow64(asF64(dst), asF64(src), c)
}

const minNormal32 = 0x1p-126

func clipScaleRow32(dst, src []float32, c float64) {
	if c < minNormal32 {
		for j, v := range src {
			dst[j] = mulTowardZero32(c, v)
		}
		return
	}
	f := float32(c)
	for j, v := range src {
		p := f * v
		// |p| is subnormal (and not zero) exactly when its magnitude bits minus one fall
		// below the subnormal range's 2²³ − 1: one rarely taken branch, where comparing p
		// with ±2⁻¹²⁶ would branch on the sign, unpredictably.
		if math.Float32bits(p)&^(1<<31)-1 < 1<<23-1 {
			p = mulTowardZero32(c, v)
		}
		dst[j] = p
	}
}

// mulTowardZero32 is the exact product c·v rounded toward zero to float32.
func mulTowardZero32(c float64, v float32) float32 {
	x := float64(v)
	q := c * x // c·v rounded to nearest in float64
	f := float32(q)
	if f == 0 {
		return f
	}
	if af, aq := math.Abs(float64(f)), math.Abs(q); af > aq || af == aq && qAboveExact(c, x, q) {
		f = math.Nextafter32(f, 0)
	}
	return f
}

// qAboveExact reports whether |q| > |c·x| for q = c·x rounded to nearest, q ≠ 0 and
// |q| ≥ 2⁻¹⁴⁹: the FMA residual c·x − q is then exact, and of the opposite sign to q.
func qAboveExact(c, x, q float64) bool {
	r := math.FMA(c, x, -q)
	return r != 0 && (r < 0) != (q < 0)
}

func clipScaleRow64(dst, src []float64, c float64) {
	for j, v := range src {
		p := c * v
		if math.Float64bits(p)&^(1<<63)-1 < 1<<52-1 { // 0 < |p| < 2⁻¹⁰²²
			// In the subnormal range the rounding error is at most half the spacing
			// 2⁻¹⁰⁷⁴, so one step toward zero lands below |c·v|.
			p = math.Nextafter(p, 0)
		}
		dst[j] = p
	}
}

// ClippedSum computes the clipped gradient sum of one dense layer without
// materializing per-example gradients (docs/design.md step 5):
//
//	dstW = Aᵀ·diag(c)·E   (d×h),   dstB = 1ᵀ·diag(c)·E   (h),
//
// i.e. dstW = Σᵢ cᵢ·aᵢ⊗eᵢ and dstB = Σᵢ cᵢ·eᵢ, for activations A (b×d) and
// errors E (b×h). scratch (length ≥ b·h) receives diag(c)·E (rows with
// cᵢ = 0 set to exactly 0, rows with cᵢ = 1 copied; others scaled as
// ClipScaleRow does) and the weights take one GEMM, Aᵀ·scratch; dstB is
// skipped when nil. dstW and dstB are overwritten.
//
// Rows with cᵢ == 0 contribute exactly 0 even when their row of E or of A
// holds NaN or ±Inf. (A non-finite row of A would survive a zero row of
// scratch in the GEMM, since 0·NaN = NaN; in that rare case the GEMM reads a
// copy of A with that row zeroed, giving the same sum.)
func ClippedSum[T Float](dstW, dstB []T, a, e []T, b, d, h int, c []float64, scratch []T) {
	checkClippedSumLens(len(dstW), len(dstB), len(a), len(e), len(c), len(scratch), b, d, h)
	s := scratch[:b*h]
	scaleErrors(s, e, b, h, c)
	sumScaled(dstW, dstB, a, s, b, d, h, c)
}

// checkClippedSumLens panics unless the lengths fit a clipped sum of b rows of A (b×d) and E
// (b×h); a bias length of 0 means no bias.
func checkClippedSumLens(nW, nB, nA, nE, nC, nScratch, b, d, h int) {
	if b < 0 || d < 0 || h < 0 {
		panic(fmt.Sprintf("kernels: negative dimension b=%d d=%d h=%d", b, d, h))
	}
	checkLen("dstW", nW, d*h)
	checkLen("a", nA, b*d)
	checkLen("e", nE, b*h)
	checkLen("c", nC, b)
	checkLen("scratch", nScratch, b*h)
	if nB != 0 {
		checkLen("dstB", nB, h)
	}
}

// ClippedSumWide is ClippedSum with float64 sums: the scaled error rows ẽᵢ are formed in T
// exactly as ClippedSum forms them (into scratch, length ≥ b·h), then for a float32 T the rows
// of A and of scratch are widened into wide (length ≥ b·(d+h)) and dstW = Aᵀ·diag(c)·E and
// dstB = 1ᵀ·diag(c)·E are summed in float64. Every product of two float32 values is exact in
// float64, so each entry of dstW and dstB is the exact sum Σᵢ cᵢ·aᵢⱼ·ẽᵢₖ of the per-example
// clipped gradients up to the float64 rounding of the sum, at most γ_b·Σᵢ|terms| with
// γ_b = b·2⁻⁵³/(1 − b·2⁻⁵³) (no underflow: products of float32 values are far above float64's
// subnormals). For a float64 T it is ClippedSum itself and wide is not used (may be nil).
// dstB is skipped when nil; dstW and dstB are overwritten. Rows with cᵢ == 0 contribute
// exactly 0, as in ClippedSum.
func ClippedSumWide[T Float](dstW, dstB []float64, a, e []T, b, d, h int, c []float64, scratch []T, wide []float64) {
	if !is32[T]() {
		ClippedSum(dstW, dstB, asF64(a), asF64(e), b, d, h, c, asF64(scratch))
		return
	}
	checkClippedSumLens(len(dstW), len(dstB), len(a), len(e), len(c), len(scratch), b, d, h)
	checkLen("wide", len(wide), b*(d+h))
	s := scratch[:b*h]
	scaleErrors(s, e, b, h, c)
	wa, ws := wide[:b*d], wide[b*d:b*(d+h)]
	for i, v := range a[:b*d] {
		wa[i] = float64(v)
	}
	for i, v := range s {
		ws[i] = float64(v)
	}
	sumScaled(dstW, dstB, wa, ws, b, d, h, c)
}

// scaleErrors sets s to diag(c)·E: rows with cᵢ = 0 to exactly 0, rows with cᵢ = 1 copied,
// others scaled by ClipScaleRow.
func scaleErrors[T Float](s, e []T, b, h int, c []float64) {
	for i := range b {
		row, src := s[i*h:(i+1)*h], e[i*h:(i+1)*h]
		switch ci := c[i]; ci {
		case 0:
			clear(row)
		case 1:
			copy(row, src)
		default:
			ClipScaleRow(row, src, ci)
		}
	}
}

// sumScaled sets dstW = Aᵀ·S and (dstB non-nil) dstB = 1ᵀ·S over the rows of S = diag(c)·E,
// leaving out rows with cᵢ = 0 whose activations are not finite (see ClippedSum).
func sumScaled[D Float](dstW, dstB []D, a, s []D, b, d, h int, c []float64) {
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
	// A dropped row (cᵢ = 0) whose activations are not all finite would poison the GEMM
	// (0·NaN = NaN): it is replaced by zeros in a copy of A. Every dropped row then adds
	// products that are exactly ±0, whatever its values, so the sum is the one the same GEMM
	// gives with that row finite (equal, up to the sign of a zero, in whatever order the BLAS
	// adds: kernels.Gemm may run on a library, internal/fastblas).
	src := a
	for i := range b {
		if c[i] != 0 || allFinite(a[i*d:(i+1)*d]) {
			continue
		}
		if &src[0] == &a[0] {
			src = slices.Clone(a[:b*d])
		}
		clear(src[i*d : (i+1)*d])
	}
	Gemm(true, false, d, h, b, 1, src, d, s, h, 0, dstW[:d*h], h)
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
