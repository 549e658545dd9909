package fdp

import (
	"fmt"
	"math"
	"sort"

	"github.com/dpsgd/dpsgd/internal/numeric"
	"github.com/dpsgd/dpsgd/privacy"
	"gonum.org/v1/gonum/mathext"
)

// Curve is a trade-off function β = f(α) on [0, 1]: the smallest type-II
// error of a test with type-I error α (DRS Def. 2.1).
// Curves of this package clamp α into [0, 1] and return 0 for a NaN α.
type Curve func(alpha float64) float64

// clampAlpha maps α into [0, 1]; ok is false for NaN.
func clampAlpha(alpha float64) (a float64, ok bool) {
	switch {
	case math.IsNaN(alpha):
		return 0, false
	case alpha <= 0:
		return 0, true
	case alpha >= 1:
		return 1, true
	}
	return alpha, true
}

// Gaussian returns G_μ(α) = Φ(Φ⁻¹(1−α) − μ), the trade-off curve of μ-GDP:
// testing N(0, 1) against N(μ, 1) (DRS Eq. 2.4). μ must
// be in [0, +Inf); μ = 0 gives 1 − α.
//
// Φ⁻¹(1−α) is evaluated as −Φ⁻¹(α) for α ≤ ½ (1−α would round away a tiny
// α) and Φ(x) as ½ erfc(−x/√2), so the curve keeps full relative precision
// as α → 0 and α → 1.
func Gaussian(mu float64) (Curve, error) {
	if !(mu >= 0) || math.IsInf(mu, 1) {
		return nil, fmt.Errorf("fdp: Gaussian: mu = %g out of range [0, +Inf): %w", mu, privacy.ErrInvalidArgument)
	}
	return func(alpha float64) float64 {
		a, ok := clampAlpha(alpha)
		if !ok {
			return 0
		}
		switch a {
		case 0:
			return 1
		case 1:
			return 0
		}
		return gaussianAt(mu, a)
	}, nil
}

// gaussianAt is G_μ(α) for α in (0, 1).
func gaussianAt(mu, a float64) float64 {
	var q float64 // Φ⁻¹(1 − α)
	if a <= 0.5 {
		q = -mathext.NormalQuantile(a)
	} else {
		q = mathext.NormalQuantile(1 - a) // 1 − a is exact here (Sterbenz)
	}
	return numeric.NormSF(mu - q)
}

// EpsDelta returns f_{ε,δ}(α) = max{0, 1 − δ − e^ε α, e^{−ε}(1 − δ − α)},
// the trade-off curve equivalent to (ε, δ)-DP (DRS Prop. 2.5).
// ε must be in [0, +Inf) and δ in [0, 1].
func EpsDelta(eps, delta float64) (Curve, error) {
	if !(eps >= 0) || math.IsInf(eps, 1) {
		return nil, fmt.Errorf("fdp: EpsDelta: eps = %g out of range [0, +Inf): %w", eps, privacy.ErrInvalidArgument)
	}
	if !(delta >= 0 && delta <= 1) {
		return nil, fmt.Errorf("fdp: EpsDelta: delta = %g out of range [0, 1]: %w", delta, privacy.ErrInvalidArgument)
	}
	l := line{oneMinusDelta: 1 - delta, expEps: math.Exp(eps), expNegEps: math.Exp(-eps)}
	return func(alpha float64) float64 {
		a, ok := clampAlpha(alpha)
		if !ok {
			return 0
		}
		if a == 0 {
			return l.oneMinusDelta
		}
		return math.Max(0, l.at(a))
	}, nil
}

// line is the pair of supporting lines of f_{ε,δ}.
type line struct{ oneMinusDelta, expEps, expNegEps float64 }

// at returns max{1 − δ − e^ε α, e^{−ε}(1 − δ − α)} for α > 0 (e^ε may be +Inf).
func (l line) at(a float64) float64 {
	return math.Max(l.oneMinusDelta-l.expEps*a, l.expNegEps*(l.oneMinusDelta-a))
}

// FromProfile returns the trade-off curve implied by a privacy profile: a
// mechanism that is (ε, δ(ε))-DP for every ε of epsGrid is f-DP with
//
//	f(α) = sup_{ε ∈ grid} max{0, 1 − δ(ε) − e^ε α, e^{−ε}(1 − δ(ε) − α)}
//
// (DRS Prop. 2.12, where the sup runs over all ε ≥ 0).
//
// Why any finite grid gives a valid lower bound: (ε, δ)-DP is equivalent to
// f_{ε,δ}-DP (DRS Prop. 2.5), so the mechanism is f_{ε,δ(ε)}-DP for each grid
// point separately; being f-DP and g-DP means the true trade-off function is
// ≥ f and ≥ g, hence ≥ max(f, g). A sup over fewer ε is smaller, so a coarse
// grid only loosens the curve, it never overstates privacy (provided δ(ε) is
// itself an upper bound, as every certified accountant's Delta is).
//
// Grid error: each term 1 − δ(ε) − e^ε α is the supporting line of slope −e^ε
// of the full-sup curve F, touching it at α_ε. Between grid points ε_i ≤ ε*
// (ε* the slope at α) the gap is F(α) − f(α) ≤ (α_{ε_i} − α)(e^{ε*} − e^{ε_i}):
// second order in the spacing, zero at the touching points. DefaultEpsGrid
// (spacing 0.04) keeps it below 1e-3 for Gaussian curves (tested).
//
// The grid is sorted and deduplicated; every ε must be finite and ≥ 0 and
// every δ(ε) in [0, 1]. delta is called once per grid point at
// construction, in increasing ε, stopping at the first δ(ε) = 0 (larger ε
// then add nothing: their lines lie below that one's). A grid without ε = 0
// gives a curve that may stay below the TV line 1 − δ(0) − α near the middle.
func FromProfile(delta func(eps float64) (float64, error), epsGrid []float64) (Curve, error) {
	if delta == nil {
		return nil, fmt.Errorf("fdp: FromProfile: delta is nil: %w", privacy.ErrInvalidArgument)
	}
	grid, err := checkGrid("FromProfile", epsGrid)
	if err != nil {
		return nil, err
	}
	lines := make([]line, 0, len(grid))
	minDelta := 1.0
	for _, eps := range grid {
		d, err := delta(eps)
		if err != nil {
			return nil, fmt.Errorf("fdp: FromProfile: delta(%g): %w", eps, err)
		}
		if !(d >= 0 && d <= 1) {
			return nil, fmt.Errorf("fdp: FromProfile: delta(%g) = %g out of range [0, 1]: %w", eps, d, privacy.ErrInvalidArgument)
		}
		minDelta = math.Min(minDelta, d)
		if d < 1 {
			lines = append(lines, line{oneMinusDelta: 1 - d, expEps: math.Exp(eps), expNegEps: math.Exp(-eps)})
		}
		if d == 0 {
			break
		}
	}
	return func(alpha float64) float64 {
		a, ok := clampAlpha(alpha)
		if !ok {
			return 0
		}
		if a == 0 {
			return 1 - minDelta
		}
		best := 0.0
		for _, l := range lines {
			if v := l.at(a); v > best {
				best = v
			}
		}
		return best
	}, nil
}

// checkGrid validates an ε grid and returns a sorted, deduplicated copy.
func checkGrid(fn string, epsGrid []float64) ([]float64, error) {
	if len(epsGrid) == 0 {
		return nil, fmt.Errorf("fdp: %s: epsGrid is empty, want at least one ε in [0, +Inf): %w", fn, privacy.ErrInvalidArgument)
	}
	grid := make([]float64, 0, len(epsGrid))
	for i, e := range epsGrid {
		if !(e >= 0) || math.IsInf(e, 1) {
			return nil, fmt.Errorf("fdp: %s: epsGrid[%d] = %g out of range [0, +Inf): %w", fn, i, e, privacy.ErrInvalidArgument)
		}
		grid = append(grid, e)
	}
	sort.Float64s(grid)
	out := grid[:1]
	for _, e := range grid[1:] {
		if e != out[len(out)-1] {
			out = append(out, e)
		}
	}
	return out, nil
}

// EpsGrid returns n ≥ 2 equally spaced ε in [0, epsMax], epsMax in (0, +Inf).
func EpsGrid(epsMax float64, n int) ([]float64, error) {
	if !(epsMax > 0) || math.IsInf(epsMax, 1) {
		return nil, fmt.Errorf("fdp: EpsGrid: epsMax = %g out of range (0, +Inf): %w", epsMax, privacy.ErrInvalidArgument)
	}
	if n < 2 {
		return nil, fmt.Errorf("fdp: EpsGrid: n = %d out of range [2, +Inf): %w", n, privacy.ErrInvalidArgument)
	}
	g := make([]float64, n)
	for i := range g {
		g[i] = epsMax * float64(i) / float64(n-1)
	}
	g[n-1] = epsMax
	return g, nil
}

// DefaultEpsGrid returns the grid FromAccountant callers should use unless
// they know better: ε = 0, 0.04, …, 32 (801 points). Spacing 0.04 keeps the
// FromProfile grid error of a Gaussian curve below 1e-3; ε up to 32 covers
// profiles with δ(32) negligible (μ-GDP with μ up to about 4.5 has
// δ(32) < 1e-5 and the curve's value at α < e^{−32} ≈ 1.3e-14 is then off
// by at most that δ).
func DefaultEpsGrid() []float64 {
	g, _ := EpsGrid(32, 801) // valid constants: cannot fail
	return g
}

// FromAccountant returns the trade-off curve of an accountant's run after
// steps steps: FromProfile of ε ↦ a.Delta(steps, ε) on epsGrid (use
// DefaultEpsGrid()). The curve is a guarantee only if a is: for an
// accountant that is privacy.IsApproximate or privacy.IsLowerBound the
// caller must label the curve the same way.
func FromAccountant(a privacy.Accountant, steps int, epsGrid []float64) (Curve, error) {
	if a == nil {
		return nil, fmt.Errorf("fdp: FromAccountant: accountant is nil: %w", privacy.ErrInvalidArgument)
	}
	if steps < 0 {
		return nil, fmt.Errorf("fdp: FromAccountant: steps = %d out of range [0, +Inf): %w", steps, privacy.ErrInvalidArgument)
	}
	c, err := FromProfile(func(eps float64) (float64, error) { return a.Delta(steps, eps) }, epsGrid)
	if err != nil {
		return nil, fmt.Errorf("fdp: FromAccountant(%s, %s, steps = %d): %w", a.Name(), a.Sampler(), steps, err)
	}
	return c, nil
}
