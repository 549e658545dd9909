package fdp

import (
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/internal/numeric"
	"github.com/dpsgd/dpsgd/privacy"
)

// Search parameters of ToDelta: the coarse scan runs over α = 1/(1 + e^{−t})
// for t = scanLo, scanLo + scanStep, …, scanHi (α from about 4e-322 to
// 1 − 4e-18, two points per factor e), plus α = 0 and α = 1.
const (
	scanLo      = -740.0
	scanHi      = 40.0
	scanStep    = 0.5
	goldenIters = 200
	// roundSlack covers the rounding of 1 − f(α) − e^ε α (a few ulps of 1).
	roundSlack = 2e-15
)

// ToDelta returns δ(ε) = sup_{α ∈ [0,1]} (1 − f(α) − e^ε α), the smallest δ
// for which an f-DP mechanism is (ε, δ)-DP (DRS Prop. 2.12,
// the converse of FromProfile). f must be a symmetric trade-off
// function (convex, non-increasing), as every curve of this package is; for
// an asymmetric f this is the δ of one direction only. ε must be in
// [0, +Inf] (+Inf gives 1 − f(0)).
//
// Numerics, rounded up: g(α) = 1 − f(α) − e^ε α is concave, so its samples
// on a coarse grid (α = 0, 1, and 1/(1+e^{−t}) for t from −740 to 40 in steps
// of ½, which resolves sups at α as small as 1e-321) have a first maximum at
// some α_j, and the sup lies in [α_{j−1}, α_{j+1}]. Golden-section search
// shrinks that bracket [L, R] to relative width ~1e-16. Because f is
// non-increasing, every α in [L, R] has g(α) ≤ 1 − f(R) − e^ε L, which is
// what is returned, plus 2e-15 for rounding. So the result is never below
// the sup for a convex f; it exceeds it by at most (f(L) − f(R)) +
// e^ε (R − L) + 2e-15, a relative 1e-9 or better for Gaussian curves at
// δ ≥ 1e-12 (tested against privacy.GaussianDelta). Absolute accuracy is
// limited to about 1e-15 by 1 − f(α) in float64.
//
// An f that returns NaN or a value outside [0, 1] is an error; values above
// 1 − α are lowered to 1 − α (no trade-off function exceeds it).
func ToDelta(f Curve, eps float64) (float64, error) {
	if f == nil {
		return 0, fmt.Errorf("fdp: ToDelta: curve is nil: %w", privacy.ErrInvalidArgument)
	}
	if !(eps >= 0) {
		return 0, fmt.Errorf("fdp: ToDelta: eps = %g out of range [0, +Inf]: %w", eps, privacy.ErrInvalidArgument)
	}
	var bad error
	eval := func(a float64) float64 {
		v := f(a)
		if !(v >= -1e-12 && v <= 1+1e-12) {
			if bad == nil {
				bad = fmt.Errorf("fdp: ToDelta: curve(%g) = %g out of range [0, 1]: %w", a, v, privacy.ErrInvalidArgument)
			}
			return 0
		}
		return math.Min(math.Max(v, 0), 1-a)
	}
	if math.IsInf(eps, 1) {
		d := clamp01(1 - eval(0) + roundSlack)
		return d, bad
	}
	expEps := math.Exp(eps)
	g := func(a float64) float64 {
		if a == 0 {
			return 1 - eval(0)
		}
		return 1 - eval(a) - expEps*a
	}

	// Coarse scan: first maximum of g.
	n := int((scanHi-scanLo)/scanStep) + 1
	alphas := make([]float64, 0, n+2)
	alphas = append(alphas, 0)
	for i := 0; i < n; i++ {
		t := scanLo + float64(i)*scanStep
		alphas = append(alphas, 1/(1+math.Exp(-t)))
	}
	alphas = append(alphas, 1)
	j, best := 0, math.Inf(-1)
	for i, a := range alphas {
		if v := g(a); v > best {
			j, best = i, v
		}
	}
	if bad != nil {
		return 0, bad
	}
	lo, hi := alphas[max(j-1, 0)], alphas[min(j+1, len(alphas)-1)]

	// Golden-section search for the maximum of the unimodal g on [lo, hi].
	gs := numeric.GoldenMax(g, lo, hi, goldenIters, 0)
	lo, hi = gs.Lo, gs.Hi
	if bad != nil {
		return 0, bad
	}
	// Monotone bound over the final bracket.
	up := 1 - eval(hi)
	if lo > 0 {
		up -= expEps * lo
	}
	return clamp01(up + roundSlack), bad
}

// clamp01 clamps x into [0, 1].
func clamp01(x float64) float64 { return math.Min(math.Max(x, 0), 1) }

// TV returns the total variation distance bounded by f, δ(0) =
// sup_α (1 − α − f(α)) (DRS), rounded up as in ToDelta.
// For G_μ it is 2Φ(μ/2) − 1.
func TV(f Curve) (float64, error) {
	d, err := ToDelta(f, 0)
	if err != nil {
		return 0, fmt.Errorf("fdp: TV: %w", err)
	}
	return d, nil
}

// MIAAccuracy returns ½(1 + TV(f)), the highest accuracy any
// membership-inference attack can reach against an f-DP mechanism when "member"
// and "non-member" are equally likely a priori: a test with errors (α, β) is
// right with probability 1 − (α + β)/2, and β ≥ f(α), so the best accuracy is ½
// + ½ sup_α (1 − α − f(α)).
func MIAAccuracy(f Curve) (float64, error) {
	tv, err := ToDelta(f, 0)
	if err != nil {
		return 0, fmt.Errorf("fdp: MIAAccuracy: %w", err)
	}
	return 0.5 * (1 + tv), nil
}

// Points samples f at n ≥ 2 equally spaced α in [0, 1] (for plotting).
// A NaN sample is an error.
func Points(f Curve, n int) (alpha, beta []float64, err error) {
	if f == nil {
		return nil, nil, fmt.Errorf("fdp: Points: curve is nil: %w", privacy.ErrInvalidArgument)
	}
	if n < 2 {
		return nil, nil, fmt.Errorf("fdp: Points: n = %d out of range [2, +Inf): %w", n, privacy.ErrInvalidArgument)
	}
	alpha = make([]float64, n)
	beta = make([]float64, n)
	for i := range alpha {
		a := float64(i) / float64(n-1)
		b := f(a)
		if math.IsNaN(b) || math.IsInf(b, 0) {
			return nil, nil, fmt.Errorf("fdp: Points: curve(%g) = %g, want a finite value in [0, 1]: %w", a, b, privacy.ErrInvalidArgument)
		}
		alpha[i], beta[i] = a, b
	}
	return alpha, beta, nil
}
