package ball

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/integrate/quad"

	"github.com/dpsgd/dpsgd/privacy"
)

// MaxDim is the largest dimension StepDelta accepts.
const MaxDim = 1 << 30

// Tuning of the series (see StepDelta for the error analysis).
const (
	// powerSeriesMinB is the smallest b = (d+1)/2 for which the power series
	// is used (where b·x ≤ 1); below it the positive series has < 30 terms.
	powerSeriesMinB = 30
	// quadMinB is the smallest b for which quadrature (or the bound that δ
	// rounds to 1) replaces the positive series where b·x > 1: below it the
	// series has < 500 terms.
	quadMinB = 500
	// quadNodes is the Gauss–Legendre order of each quadrature panel.
	quadNodes = 20
	// anchorEvery: the positive series recomputes its term from scratch every
	// anchorEvery terms, bounding the error of the multiplicative recurrence.
	anchorEvery = 32
	// seriesTol is the relative truncation tolerance of both series (2⁻⁵⁵).
	seriesTol = 0x1p-55
	// lnPi is ln π.
	lnPi = 1.14472988584940017414342735135305871164729481291531
)

// StepDelta returns the δ for which adding noise drawn uniformly from the
// volume of a d-dimensional ball of radius r is (0, δ)-DP for a query whose
// values on neighbouring datasets are at most distance = Δ apart (ℓ2):
//
//	δ = TV(U(B(0, r)), U(B(Δe₁, r))) = I_{(Δ/(2r))²}(1/2, (d+1)/2)
//
// (Tholeti, Theorem 1 / Eq. 6), where I is the
// regularized incomplete beta function. It is the volume of one ball outside
// the other over the volume of a ball, increasing in Δ (Tholeti Eq. 10) and
// in d, decreasing in r; Δ = 0 gives 0, Δ ≥ 2r gives 1 (disjoint balls), and
// d = 1 gives Δ/(2r) exactly (uniform noise on an interval).
//
// Evaluation. With a = Δ/(2r), x = a², y = 1 − x and b = (d+1)/2:
//
//   - If b ≥ 30 and b·x ≤ 1: the power series I_x(1/2, b) =
//     (2a/√π)·Γ(b+½)/Γ(b)·Σ_j (1−b)_j xʲ/((2j+1) j!), the form
//     xᵃ/(a·B(a, b))·₂F₁(a, 1−b; a+1; x) of DLMF §8.17(ii). Its terms
//     alternate and decrease (ratio < b·x/j ≤ 1/j), so the truncation error is
//     below the first omitted term, and Σ|terms| ≤ e^{bx} ≤ e while the sum is
//     ≥ 2/3: cancellation costs at most a factor 4. Γ(b+½)/Γ(b) comes from
//     the difference of two Stirling series (remainder < 1e-21 at b ≥ 30),
//     not from exp(lgamma − lgamma), which loses ~b·log b ulps at large b.
//   - If b ≥ 500 and b·x > 1: δ = 1 when the bound
//     1 − δ ≤ x^{−1/2}(1−x)ᵇ/(b·B(1/2, b)) is below 2⁻⁵⁴ (then δ rounds to 1);
//     otherwise Gauss–Legendre quadrature of the integral form
//     δ = (2/B(1/2, b))·∫₀^a (1−s²)^{b−1} ds, whose error is proven below
//     1e-21 by analyticity (see quadrature), so only rounding remains.
//   - Otherwise (b < 500) the finite sums of positive terms given by the
//     recurrence I_x(a, b+1) = I_x(a, b) + xᵃ(1−x)ᵇ/(b·B(a, b)) (DLMF §8.17(iv)):
//     odd d:  δ = a·Σ_{k=0}^{(d−1)/2} c_k yᵏ,   c_k = (1/2)_k/k! (Tholeti Eq. 9);
//     even d: δ = (2/π)·(asin a + a·√y·Σ_{k=0}^{d/2−1} e_k yᵏ),  e_k = Π_{i≤k} 2i/(2i+1).
//     Every term is positive, so there is no cancellation. y is formed as
//     (1−a)(1+a) for a > 1/2 and asin a as atan2(a, √y), both accurate near
//     a = 1. Every 32nd term is computed afresh as exp(ln coef + k·ln y)
//     (ln y = log1p(−x), ln coef from the same Stirling difference), the
//     others by the exact coefficient ratio, and the sum is compensated
//     (Fast2Sum, whose error term is exact here since each term is below the
//     running sum). The sum stops when the tail, at most term·y/x (the
//     coefficients decrease), is below 2⁻⁵⁵ of the sum: at most 500 terms.
//
// So one evaluation costs at most a few µs at any d. The relative error is
// below 1e-13: the analysis of the positive sums bounds it by about 200 ulps
// (a fresh term is within ~50 ulps, 31 ratio steps add ~4 ulps each), that of
// the other two methods by less (the prefactor Γ(b+½)/Γ(b) is within ~15
// ulps); the tests measure at most a few ulps against 256-bit sums, also
// where δ is tiny and d is large. There gonum's RegIncBeta, which takes the
// beta function as the exp of a difference of lgammas of size b·ln b, loses
// ~1e-11 at d = 10⁴ and ~1e-9 at d = 10⁶. Near δ = 1 the absolute error is a
// few ulps of 1 (1 − δ is not computed to relative accuracy).
//
// Errors wrap privacy.ErrInvalidArgument: dim outside [1, MaxDim], distance
// outside [0, +Inf), radius outside (0, +Inf), NaN.
func StepDelta(dim int, distance, radius float64) (float64, error) {
	if err := checkGeometry(dim, distance, radius); err != nil {
		return 0, err
	}
	if distance == 0 {
		return 0, nil
	}
	a := 0.5 * distance / radius // Δ/(2r); halving is exact for normal numbers
	if a >= 1 {
		return 1, nil
	}
	return deltaOf(dim, a), nil
}

// checkGeometry validates (d, Δ, r).
func checkGeometry(dim int, distance, radius float64) error {
	if dim < 1 || dim > MaxDim {
		return fmt.Errorf("ball: dim = %d out of range [1, %d]: %w", dim, MaxDim, privacy.ErrInvalidArgument)
	}
	if !(distance >= 0) || math.IsInf(distance, 1) {
		return fmt.Errorf("ball: distance = %g out of range [0, +Inf): %w", distance, privacy.ErrInvalidArgument)
	}
	return checkRadius(radius)
}

// checkRadius validates r in (0, +Inf).
func checkRadius(radius float64) error {
	if !(radius > 0) || math.IsInf(radius, 1) {
		return fmt.Errorf("ball: radius = %g out of range (0, +Inf): %w", radius, privacy.ErrInvalidArgument)
	}
	return nil
}

// deltaOf returns I_{a²}(1/2, (d+1)/2) for 0 < a < 1.
func deltaOf(dim int, a float64) float64 {
	x := a * a
	b := 0.5 * float64(dim+1)
	var d float64
	switch {
	case b >= powerSeriesMinB && b*x <= 1:
		d = powerSeries(b, a, x)
	case b >= quadMinB && complementNegligible(b, a, x):
		d = 1
	case b >= quadMinB:
		d = quadrature(b, a)
	default:
		d = positiveSeries(dim, a, x)
	}
	return math.Min(1, math.Max(0, d))
}

// lnOneMinusSq returns y = 1 − a² and ln y to a few ulps: (1−a)(1+a) near
// a = 1 (where 1 − a is exact), log1p(−a²) for small a.
func lnOneMinusSq(a, x float64) (y, lnY float64) {
	if a > 0.5 {
		y = (1 - a) * (1 + a)
		return y, math.Log(y)
	}
	lnY = math.Log1p(-x)
	return math.Exp(lnY), lnY
}

// complementNegligible reports whether 1 − I_x(1/2, b) < 2⁻⁵⁴, so that
// I_x(1/2, b) rounds to 1, by the bound
//
//	1 − I_x(1/2, b) = ∫_x^1 t^{−1/2}(1−t)^{b−1} dt / B(1/2, b) ≤ x^{−1/2}(1−x)ᵇ / (b·B(1/2, b))
//
// (t^{−1/2} ≤ x^{−1/2} on [x, 1]), with 1/B(1/2, b) = Γ(b+½)/(√π Γ(b)).
func complementNegligible(b, a, x float64) bool {
	_, lnY := lnOneMinusSq(a, x)
	lnBound := lnGammaRatio(b) - 0.5*lnPi + b*lnY - math.Log(b) - math.Log(a)
	return lnBound < -54*math.Ln2
}

// quadrature returns I_{a²}(1/2, b) for b ≥ quadMinB as
//
//	(2/√π)·Γ(b+½)/Γ(b)·(1/c)·∫₀^{ac} g(t) dt,  g(t) = (1 − t²/c²)^{c²},  c = √(b−1)
//
// (the substitution t = c·s in ∫₀^a (1−s²)^{b−1} ds), by 20-point
// Gauss–Legendre on panels of width ≤ 1. g is analytic for |t| < c and, on
// the Bernstein ellipse ρ = 4 of each panel (|Im t| ≤ 0.94, |t| ≤ ac + 1.1),
// |g| ≤ exp((Im t)² + |t|⁴/(2c²(1−|t|²/c²))) ≤ e^{7.4} while ac ≤ 7.5 and
// b ≥ 500 (|log1p(z) − z| ≤ |z|²/(2(1−|z|)); ac < 6 wherever
// complementNegligible is false, as there b·x < 36); the Gauss–Legendre error
// bound (64/15)·M·ρ^{−2n}/(ρ²−1) (Trefethen, Approximation Theory and
// Approximation Practice, Thm 19.3) is then below 1e-21 per panel against an
// integral above 0.7 (ac > 1 here). What remains is rounding: the argument of
// exp in g is computed to a few ulps of its size, ≤ 8 ulps where g matters,
// and the sum is compensated.
func quadrature(b, a float64) float64 {
	c2 := b - 1
	c := math.Sqrt(c2)
	upper := a * c
	panels := max(1, int(math.Ceil(upper)))
	h := 0.5 * upper / float64(panels)
	nodes, weights := make([]float64, quadNodes), make([]float64, quadNodes)
	quad.Legendre{}.FixedLocations(nodes, weights, -1, 1)
	var sum, comp float64
	for p := 0; p < panels; p++ {
		mid := float64(2*p+1) * h
		for i, u := range nodes {
			t := (mid + h*u) / c
			g := math.Exp(c2 * math.Log1p(-t*t))
			sum, comp = neumaier(sum, comp, h*weights[i]*g)
		}
	}
	return 2 * math.Exp(lnGammaRatio(b)-0.5*lnPi) / c * (sum + comp)
}

// neumaier adds t to the compensated sum (sum, comp).
func neumaier(sum, comp, t float64) (float64, float64) {
	n := sum + t
	if math.Abs(sum) >= math.Abs(t) {
		comp += (sum - n) + t
	} else {
		comp += (t - n) + sum
	}
	return n, comp
}

// powerSeries returns I_x(1/2, b) = (2a/√π)·Γ(b+½)/Γ(b)·Σ_j (1−b)_j xʲ/((2j+1) j!)
// for b ≥ 30, b·x ≤ 1 (DLMF §8.17(ii) with a = 1/2).
func powerSeries(b, a, x float64) float64 {
	sum, u := 1.0, 1.0
	for j := 1; j < 100; j++ {
		u *= (float64(j) - b) * x / float64(j)
		s := u / float64(2*j+1)
		sum += s
		if math.Abs(s) <= seriesTol*sum {
			break // alternating, decreasing: the rest is below |s|
		}
	}
	return 2 * a * math.Exp(lnGammaRatio(b)-0.5*lnPi) * sum
}

// positiveSeries returns I_x(1/2, (d+1)/2) by the finite positive sums of
// StepDelta's doc comment.
func positiveSeries(dim int, a, x float64) float64 {
	odd := dim%2 == 1
	last := dim/2 - 1 // even d: k = 0 … d/2 − 1
	if odd {
		last = (dim - 1) / 2
	}
	y, lnY := lnOneMinusSq(a, x)
	// ratio of consecutive coefficients: (kf)/(kf+1) with kf = 2k−1 (odd d)
	// or 2k (even d).
	off := 0.0
	if odd {
		off = -1
	}
	// The terms are positive and decrease (ratio < y < 1), so each is at most
	// the running sum and Fast2Sum's error term is exact.
	var sum, comp float64
	for k0 := 0; k0 <= last; k0 += anchorEvery {
		t := 1.0
		if k0 > 0 {
			t = math.Exp(lnCoef(odd, k0) + float64(k0)*lnY)
		}
		kf := float64(2*k0) + off
		for k, end := k0, min(last, k0+anchorEvery-1); ; {
			n := sum + t
			comp += (sum - n) + t
			sum = n
			if k == end {
				break
			}
			k++
			kf += 2
			t *= y * kf / (kf + 1)
		}
		if t*y <= seriesTol*x*(sum+comp) {
			break // the tail after t is at most t·y/(1 − y) = t·y/x
		}
	}
	s := sum + comp
	if odd {
		return a * s
	}
	// asin a as atan2(a, √y): math.Asin forms 1 − a·a itself and loses
	// ~1e-16/√(1−a²) near a = 1.
	sy := math.Sqrt(y)
	return 2 / math.Pi * (math.Atan2(a, sy) + a*sy*s)
}

// lnCoef returns ln c_k (odd d: c_k = Γ(k+½)/(√π Γ(k+1))) or ln e_k (even d:
// e_k = √π Γ(k+1)/((2k+1) Γ(k+½))).
func lnCoef(odd bool, k int) float64 {
	r := lnGammaRatio(float64(k) + 0.5) // ln Γ(k+1)/Γ(k+½)
	if odd {
		return -r - 0.5*lnPi
	}
	return r + 0.5*lnPi - math.Log(float64(2*k+1))
}

// stirling holds B_{2k}/(2k(2k−1)), k = 1…7, the coefficients of the Stirling
// series ln Γ(z) = (z−½)ln z − z + ½ln 2π + Σ_k B_{2k}/(2k(2k−1) z^{2k−1}).
var stirling = [...]float64{1.0 / 12, -1.0 / 360, 1.0 / 1260, -1.0 / 1680, 1.0 / 1188, -691.0 / 360360, 1.0 / 156}

// lnGammaRatio returns ln(Γ(b+½)/Γ(b)) for b > 0 to a few ulps of its size.
// For b ≥ 30 it is the difference of the Stirling series at b+½ and b,
//
//	½ ln b + (b·log1p(1/(2b)) − ½) + Σ_k g_k((b+½)^{1−2k} − b^{1−2k}),
//
// whose remainder is below the first omitted term, g₈/30¹⁵ < 1e-23. Below 30
// it shifts b up with Γ(b+3/2)/Γ(b+1) = Γ(b+½)/Γ(b)·(b+½)/b (at most 30
// exact-ratio steps).
func lnGammaRatio(b float64) float64 {
	shift := 1.0
	for b < 30 {
		shift *= b / (b + 0.5)
		b++
	}
	ip, ib := 1/(b+0.5), 1/b
	ip2, ib2 := ip*ip, ib*ib
	var corr float64
	for _, g := range stirling {
		corr += g * (ip - ib)
		ip *= ip2
		ib *= ib2
	}
	return 0.5*math.Log(b) + (b*math.Log1p(0.5/b) - 0.5) + corr + math.Log(shift)
}
