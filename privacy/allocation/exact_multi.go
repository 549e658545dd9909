package allocation

import (
	"fmt"
	"math"
	"sync"

	"github.com/dpsgd/dpsgd/internal/numeric"
	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/pld"
)

// ExactDelta returns a certified δ(ε) of E = epochs epochs of random
// allocation with M = rounds rounds at noise multiplier σ: the larger of the
// hockey-stick divergences H_{e^ε}(Q_M^{⊗E}‖P_M^{⊗E}) and
// H_{e^ε}(P_M^{⊗E}‖Q_M^{⊗E}) of the Gaussian pair (Ertan & van Dijk
// 2026, the "any E" case), so that the run is (ε, δ)-DP under zero-out adjacency.
//
// M = 1 is the Gaussian mechanism with μ = √E/σ, returned in closed form
// (privacy.GaussianDelta). Otherwise one epoch is discretized into a
// pessimistic privacy-loss distribution in both directions (cap, mean-
// preserving spread, FFT sum of the M rounds, connect-the-dots onto a loss
// grid of spacing sd(ℓ)/400; see exact_pld.go for the construction and the
// proof that it dominates) and composed E times by FFT (package pld). The
// result is never below the true value: every step is a Blackwell
// domination or a tracked error bound that is added. It exceeds the true
// value by the discretization error (relative ≈ 1e-4 on the E = 1 TV at
// σ ≥ 0.75, tested against ExactDeltaEpoch, Monte Carlo and a finer grid)
// plus the tail mass put at infinity (≈ 1e-15 per epoch, more where the
// grid budget forces a lower cap: σ ≲ 0.7, see ExactCoarse).
func ExactDelta(sigma float64, rounds, epochs int, eps float64) (float64, error) {
	if err := checkSigmaRoundsEpochs(sigma, rounds, epochs); err != nil {
		return 0, err
	}
	if err := checkEps(eps); err != nil {
		return 0, err
	}
	c, err := exactComposeNew(sigma, rounds, epochs)
	if err != nil {
		return 0, err
	}
	return c.delta(eps), nil
}

// ExactTV returns a certified total variation d_TV(P_M^{⊗E}, Q_M^{⊗E}) of E
// epochs (Ertan & van Dijk 2026): ExactDelta(σ, M, E, 0). For E = 1 the
// Fourier value ExactTVEpoch is more accurate.
func ExactTV(sigma float64, rounds, epochs int) (float64, error) {
	return ExactDelta(sigma, rounds, epochs, 0)
}

// ExactEpsilon returns the smallest ε ≥ 0 with ExactDelta(σ, M, E, ε) ≤ delta
// (conservative: rounded up), delta in (0, 1). A delta
// at or below the mass the discretization puts at +∞ plus its error bound
// wraps privacy.ErrUnreachable.
func ExactEpsilon(sigma float64, rounds, epochs int, delta float64) (float64, error) {
	if err := checkSigmaRoundsEpochs(sigma, rounds, epochs); err != nil {
		return 0, err
	}
	if err := checkProb("delta", delta); err != nil {
		return 0, err
	}
	c, err := exactComposeNew(sigma, rounds, epochs)
	if err != nil {
		return 0, err
	}
	return c.epsilon(delta)
}

// ExactCoarse reports whether the per-epoch discretization of (σ, M) had to
// leave its default accuracy to stay within its grid budget of 2²⁰ points:
// a lower cap on the per-round likelihood ratio (more mass at +∞, up to
// ≈ 3e-5 per epoch) and/or a coarser spread grid. This happens for small σ
// (heavy-tailed likelihood ratio; about σ < 0.7) and for very large M
// (≳ 10⁷). The values stay certified upper bounds, only looser.
func ExactCoarse(sigma float64, rounds int) (bool, error) {
	if err := checkSigmaRounds(sigma, rounds); err != nil {
		return false, err
	}
	t := 1 / sigma
	_, _, coarse := exactPlan(t, math.Expm1(t*t), rounds)
	return coarse, nil
}

// exactComposeNew builds and composes the per-epoch PLD. M = 1 is the
// Gaussian mechanism with μ = √E/σ, returned in closed form; where the grid
// does not fit its budget it returns the amplification-free bound instead
// (see exactComposed).
func exactComposeNew(sigma float64, rounds, epochs int) (*exactComposed, error) {
	if rounds == 1 {
		return exactGaussianComposed(sigma, epochs), nil
	}
	e, err := exactNewEpochPLD(sigma, rounds)
	if exactGridErr(err) {
		return exactGaussianComposed(sigma, epochs), nil
	}
	if err != nil {
		return nil, err
	}
	c, err := e.compose(epochs)
	if exactGridErr(err) {
		return exactGaussianComposed(sigma, epochs), nil
	}
	return c, err
}

// exactGaussTV is 2Φ(√E/(2σ)) − 1, the TV of M = 1.
func exactGaussTV(sigma float64, epochs int) float64 {
	return math.Erf(math.Sqrt(float64(epochs)) / (2 * sigma * math.Sqrt2))
}

// exactTVFunc returns TV(σ, M, E) for the solvers: ExactTVEpoch for E = 1
// (Fourier, most accurate), the closed form for M = 1, the composed PLD
// otherwise.
func exactTVFunc(sigma float64, rounds, epochs int) (float64, error) {
	switch {
	case rounds == 1:
		return exactGaussTV(sigma, epochs), nil
	case epochs == 1:
		return ExactTVEpoch(sigma, rounds)
	}
	return ExactTV(sigma, rounds, epochs)
}

// ExactSigma returns the smallest noise multiplier σ (to a relative 1e-4,
// rounded up) whose certified total variation after E = epochs epochs of
// M = rounds rounds is at most tv (the TV is
// non-increasing in σ). E = 1 uses ExactTVEpoch, E > 1 ExactTV. The
// chi-square σ (ChiSquareSigma) brackets it from above.
func ExactSigma(tv float64, rounds, epochs int) (float64, error) {
	return exactSigma(exactTVFunc, tv, rounds, epochs)
}

// tvFunc is a certified TV(σ, M, E): exactTVFunc, or a stand-in in tests.
type tvFunc func(sigma float64, rounds, epochs int) (float64, error)

// exactSigma is ExactSigma with the TV function tvf.
func exactSigma(tvf tvFunc, tv float64, rounds, epochs int) (float64, error) {
	if err := checkSigmaSolve(tv, rounds, epochs); err != nil {
		return 0, err
	}
	hi, err := ChiSquareSigma(tv, rounds, epochs)
	if err != nil {
		return 0, err
	}
	ok, hi, err := tvBracket(tvf, tv, epochs, func(s float64) (float64, int) { return s, rounds }, hi,
		func(i int, h float64) (float64, bool) { return h * 1.25, i < 30 },
		func(hi float64) string {
			return fmt.Sprintf("ExactSigma: tv = %g not certified by any sigma up to %g (rounds = %d, epochs = %d)", tv, hi, rounds, epochs)
		})
	if err != nil {
		return 0, err
	}
	lo := hi / 2
	for {
		good, err := ok(lo)
		if err != nil {
			return 0, err
		}
		if !good {
			break
		}
		hi, lo = lo, lo/2
		if lo < 1e-3 {
			return hi, nil
		}
	}
	return numeric.BisectGeometric(ok, lo, hi, 1e-4)
}

// tvBracket starts ExactSigma's and ExactRounds's searches: ok(x) says whether the certified
// TV (tvf) after epochs epochs of the (σ, M) that x stands for (at(x)) is at most tv, and the
// point returned is the first of hi, next(0, hi), … (hi the chi-square solution, which bounds
// the exact one from above, where ok should already hold) at which ok holds. None within
// next's range is an error wrapping privacy.ErrUnreachable, which unreachable(last point
// tried) words.
func tvBracket[T float64 | int](tvf tvFunc, tv float64, epochs int, at func(T) (float64, int), hi T,
	next func(int, T) (T, bool), unreachable func(T) string) (func(T) (bool, error), T, error) {
	ok := func(x T) (bool, error) {
		sigma, rounds := at(x)
		v, err := tvf(sigma, rounds, epochs)
		return v <= tv, err
	}
	_, hi, found, err := numeric.Bracket(ok, 0, hi, next)
	if err != nil {
		return nil, 0, err
	}
	if !found {
		return nil, 0, fmt.Errorf("allocation: %s: %w", unreachable(hi), privacy.ErrUnreachable)
	}
	return ok, hi, nil
}

// ExactRounds returns the smallest M whose certified total variation after
// E = epochs epochs at σ is at most tv (2,730 at
// σ = 1, tv = 0.01, E = 1). The TV is non-increasing in M; the chi-square
// M (ChiSquareRounds) brackets it from above. E = 1 uses ExactTVEpoch.
func ExactRounds(sigma, tv float64, epochs int) (int, error) {
	return exactRounds(exactTVFunc, sigma, tv, epochs)
}

// exactRounds is ExactRounds with the TV function tvf.
func exactRounds(tvf tvFunc, sigma, tv float64, epochs int) (int, error) {
	if err := checkRoundsSolve(sigma, "tv", tv, epochs); err != nil {
		return 0, err
	}
	hi, err := ChiSquareRounds(sigma, tv, epochs)
	if err != nil {
		return 0, err
	}
	ok, hi, err := tvBracket(tvf, tv, epochs, func(m int) (float64, int) { return sigma, m }, hi,
		func(i, h int) (int, bool) { return h + h/4 + 1, i < 20 && h <= 1<<40 },
		func(hi int) string {
			return fmt.Sprintf("ExactRounds: tv = %g not certified up to rounds = %d (sigma = %g, epochs = %d)", tv, hi, sigma, epochs)
		})
	if err != nil {
		return 0, err
	}
	if good, err := ok(1); err != nil {
		return 0, err
	} else if good {
		return 1, nil
	}
	return numeric.BisectInt(ok, 1, hi) // TV(1) > tv ≥ TV(hi)
}

// ExactEpochs returns the largest E whose certified total variation at σ and
// M = rounds is at most tv (TV is non-decreasing in E).
// The per-epoch PLD is built once and composed for each candidate E. If one
// epoch already exceeds tv the error wraps privacy.ErrUnreachable; E is
// searched up to 2²⁰.
func ExactEpochs(sigma, tv float64, rounds int) (int, error) {
	if err := checkProb("tv", tv); err != nil {
		return 0, err
	}
	// One accountant: the per-epoch PLD is built once and every probe only
	// composes it.
	acc, err := NewExactAccountant(sigma, rounds)
	if err != nil {
		return 0, err
	}
	fits := func(e int) (bool, error) {
		v, err := acc.TV(e * rounds)
		return v <= tv, err
	}
	if ok, err := fits(1); err != nil {
		return 0, err
	} else if !ok {
		return 0, fmt.Errorf("allocation: ExactEpochs: one epoch already has a TV above tv = %g (sigma = %g, rounds = %d): %w",
			tv, sigma, rounds, privacy.ErrUnreachable)
	}
	const eMax = 1 << 20
	misses := func(e int) (bool, error) { ok, err := fits(e); return !ok, err }
	// fits(1); the first E that misses is in (lo, hi].
	lo, hi, found, err := numeric.Bracket(misses, 1, 2, func(_, h int) (int, bool) { return 2 * h, h < eMax })
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("allocation: ExactEpochs: TV stays below tv = %g up to %d epochs (sigma = %g, rounds = %d): %w",
			tv, eMax, sigma, rounds, privacy.ErrUnreachable)
	}
	first, err := numeric.BisectInt(misses, lo, hi)
	return first - 1, err
}

// exactCacheSize is the number of composed PLDs an ExactAccountant keeps.
const exactCacheSize = 16

// ExactAccountant is the exact accountant of random allocation: after
// E = ⌈steps/M⌉ epochs it reports ExactDelta / ExactEpsilon / ExactTV of
// the Gaussian pair (Ertan & van Dijk 2026), certified upper bounds under
// zero-out adjacency. The per-epoch PLD is built on first use and kept; the
// composed PLDs of the last 16 epoch counts are cached, so asking once per
// epoch costs one FFT composition, and asking again at the same epoch count
// (several δ, or every step of an epoch) costs only the δ(ε) sums. Safe for
// concurrent use (one mutex; the PLDs are immutable).
type ExactAccountant struct {
	sigma  float64
	rounds int

	mu    sync.Mutex
	epoch *exactEpochPLD
	cache *pld.Cache[*exactComposed]
	// noGrid: the per-epoch PLD does not fit its grid budget; the
	// amplification-free bound is used (see exactComposed).
	noGrid bool
}

var _ privacy.Accountant = (*ExactAccountant)(nil)

// NewExactAccountant returns the exact accountant for σ > 0 and M = rounds ≥ 1
// rounds (steps) per epoch. Construction is cheap; the per-epoch PLD is
// built on the first query.
func NewExactAccountant(sigma float64, rounds int) (*ExactAccountant, error) {
	if err := checkSigmaRounds(sigma, rounds); err != nil {
		return nil, fmt.Errorf("allocation: NewExactAccountant: %w", err)
	}
	return &ExactAccountant{sigma: sigma, rounds: rounds, cache: pld.NewCache[*exactComposed](exactCacheSize)}, nil
}

// Name returns "exact".
func (a *ExactAccountant) Name() string { return "exact" }

// Sampler returns privacy.SamplerAllocation.
func (a *ExactAccountant) Sampler() string { return privacy.SamplerAllocation }

// Adjacency returns privacy.AdjacencyZeroOut.
func (a *ExactAccountant) Adjacency() string { return privacy.AdjacencyZeroOut }

// Sigma returns σ.
func (a *ExactAccountant) Sigma() float64 { return a.sigma }

// Rounds returns M.
func (a *ExactAccountant) Rounds() int { return a.rounds }

// composed returns the composition for E ≥ 1 epochs: for M = 1 the Gaussian
// mechanism with μ = √E/σ in closed form, for M ≥ 2 the cached composed PLD.
func (a *ExactAccountant) composed(epochs int) (*exactComposed, error) {
	if a.rounds == 1 {
		return exactGaussianComposed(a.sigma, epochs), nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.cache.Get(epochs); ok {
		return c, nil
	}
	var c *exactComposed
	if a.epoch == nil && !a.noGrid {
		e, err := exactNewEpochPLD(a.sigma, a.rounds)
		switch {
		case exactGridErr(err):
			a.noGrid = true
		case err != nil:
			return nil, err
		default:
			a.epoch = e
		}
	}
	if a.noGrid {
		c = exactGaussianComposed(a.sigma, epochs)
	} else {
		var err error
		c, err = a.epoch.compose(epochs)
		if exactGridErr(err) {
			c, err = exactGaussianComposed(a.sigma, epochs), nil
		}
		if err != nil {
			return nil, err
		}
	}
	a.cache.Put(epochs, c)
	return c, nil
}

// Delta returns the certified δ at eps ≥ 0 after steps ≥ 0 steps (0 steps: 0).
func (a *ExactAccountant) Delta(steps int, eps float64) (float64, error) {
	c, err := a.composedAt(steps, checkEps(eps))
	if c == nil || err != nil {
		return 0, err
	}
	return c.delta(eps), nil
}

// composedAt returns the composition of the epochs that steps ≥ 0 steps cover, nil for none;
// an invalid steps, then argErr (the check of the other argument), is returned first.
func (a *ExactAccountant) composedAt(steps int, argErr error) (*exactComposed, error) {
	if err := checkSteps(steps); err != nil {
		return nil, err
	}
	if argErr != nil {
		return nil, argErr
	}
	e := privacy.EpochsOf(steps, a.rounds)
	if e == 0 {
		return nil, nil
	}
	return a.composed(e)
}

// TV returns the certified total variation after steps steps: Delta(steps, 0).
func (a *ExactAccountant) TV(steps int) (float64, error) { return a.Delta(steps, 0) }

// Epsilon returns the smallest ε ≥ 0 with Delta(steps, ε) ≤ delta (rounded
// up), delta in (0, 1); 0 steps give 0.
func (a *ExactAccountant) Epsilon(steps int, delta float64) (float64, error) {
	c, err := a.composedAt(steps, checkProb("delta", delta))
	if c == nil || err != nil {
		return 0, err
	}
	return c.epsilon(delta)
}
