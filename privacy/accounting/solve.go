package accounting

import (
	"errors"
	"fmt"

	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/ball"
	"github.com/dpsgd/dpsgd/privacy/internal/numeric"
)

// Search ranges of the solvers.
const (
	SigmaMin  = 1e-2 // smallest σ SolveSigma tries
	SigmaMax  = 1e4  // largest σ SolveSigma tries
	RoundsMax = 1e9  // largest M SolveRounds tries
	EpochsMax = 1e6  // largest E SolveEpochs tries
	sigmaRel  = 1e-4 // relative tolerance of SolveSigma
)

// within says whether spec's accountant after steps steps meets target; a
// bound that is out of its regime or cannot certify the target counts as not
// meeting it.
func within(spec Spec, steps int, target privacy.Budget) (bool, error) {
	acc, err := spec.New()
	if err != nil {
		if errors.Is(err, privacy.ErrOutOfRegime) {
			return false, nil
		}
		return false, err
	}
	return accWithin(acc, steps, target)
}

// accWithin is within for a built accountant.
func accWithin(acc privacy.Accountant, steps int, target privacy.Budget) (bool, error) {
	d, err := acc.Delta(steps, target.Epsilon)
	if errors.Is(err, privacy.ErrOutOfRegime) || errors.Is(err, privacy.ErrUnreachable) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return d <= target.Delta, nil
}

// noise describes the noise of spec for messages: "σ = …" or the ball's radius.
func (s Spec) noise() string {
	if s.IsBall() {
		return fmt.Sprintf("ball radius %g (d = %d, Δ = %g)", s.Radius, s.Dim, s.Distance)
	}
	return fmt.Sprintf("σ = %g", s.Sigma)
}

// SolveSigma returns the smallest σ in [SigmaMin, SigmaMax] (to relative
// tolerance 1e-4, rounded up) for which spec's accountant meets target after
// steps steps: δ(target.Epsilon) ≤ target.Delta. A TV target t is the budget
// (0, t). Every accountant here is non-increasing in σ, so bisection is
// well posed.
func SolveSigma(spec Spec, steps int, target privacy.Budget) (float64, error) {
	return SolveSigmaTol(spec, steps, target, sigmaRel)
}

// SolveSigmaTol is SolveSigma to relative tolerance rel in (0, 0.1], still rounded up, so the
// σ it returns always meets target: a coarser rel buys a faster search with a slightly larger σ.
func SolveSigmaTol(spec Spec, steps int, target privacy.Budget, rel float64) (float64, error) {
	if !(rel > 0 && rel <= 0.1) {
		return 0, fmt.Errorf("accounting: σ tolerance %v out of range (0, 0.1]: %w", rel, privacy.ErrInvalidArgument)
	}
	if err := target.Validate(); err != nil {
		return 0, err
	}
	if steps < 0 {
		return 0, fmt.Errorf("accounting: steps = %d out of range [0, +Inf): %w", steps, privacy.ErrInvalidArgument)
	}
	if spec.IsBall() {
		return 0, fmt.Errorf("accounting: SolveSigma: mechanism ball has no σ, use SolveRadius: %w", privacy.ErrInvalidArgument)
	}
	at := func(sigma float64) (bool, error) {
		s := spec
		s.Sigma = sigma
		return within(s, steps, target)
	}
	lo, hi := SigmaMin, SigmaMax
	ok, err := at(hi)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("accounting: target (ε = %g, δ = %g) after %d steps is not met by %s/%s for any σ ≤ %g: %w",
			target.Epsilon, target.Delta, steps, spec.Sampler, spec.Method, hi, privacy.ErrUnreachable)
	}
	if ok, err = at(lo); err != nil {
		return 0, err
	} else if ok {
		return lo, nil
	}
	return numeric.BisectGeometric(at, lo, hi, rel)
}

// SolveRounds returns the smallest M (rounds per epoch) in [1, RoundsMax] for
// which spec's accountant meets target after epochs epochs of M rounds (shuffle
// and allocation). It assumes, as holds for the Gaussian pair's bounds, that
// meeting the target at M implies meeting it at every larger M.
func SolveRounds(spec Spec, epochs int, target privacy.Budget) (int, error) {
	if err := target.Validate(); err != nil {
		return 0, err
	}
	if spec.Sampler != privacy.SamplerShuffle && spec.Sampler != privacy.SamplerAllocation {
		return 0, fmt.Errorf("accounting: SolveRounds: sampler = %q, want shuffle or allocation: %w", spec.Sampler, privacy.ErrInvalidArgument)
	}
	if epochs < 1 {
		return 0, fmt.Errorf("accounting: epochs = %d out of range [1, +Inf): %w", epochs, privacy.ErrInvalidArgument)
	}
	at := func(m int) (bool, error) {
		s := spec
		s.Rounds = m
		s.SampleRate = 1 / float64(m)
		return within(s, epochs*m, target)
	}
	// Exponential search for a feasible M, then bisection on integers.
	lo, hi := 0, 1 // at(lo) false (lo = 0 stands for "none"), at(hi) to be found true
	for {
		ok, err := at(hi)
		if err != nil {
			return 0, err
		}
		if ok {
			break
		}
		lo = hi
		if hi >= RoundsMax {
			return 0, fmt.Errorf("accounting: target (ε = %g, δ = %g) over %d epochs is not met by %s/%s at %s for any M ≤ %g: %w",
				target.Epsilon, target.Delta, epochs, spec.Sampler, spec.Method, spec.noise(), RoundsMax, privacy.ErrUnreachable)
		}
		hi = min(2*hi, int(RoundsMax))
	}
	return numeric.BisectInt(at, lo, hi)
}

// SolveEpochs returns the largest number of whole epochs E ≤ EpochsMax of
// stepsPerEpoch steps after which spec's accountant still meets target. No
// epoch at all fitting is an error wrapping privacy.ErrUnreachable.
func SolveEpochs(spec Spec, stepsPerEpoch int, target privacy.Budget) (int, error) {
	if err := target.Validate(); err != nil {
		return 0, err
	}
	if stepsPerEpoch < 1 {
		return 0, fmt.Errorf("accounting: steps per epoch = %d out of range [1, +Inf): %w", stepsPerEpoch, privacy.ErrInvalidArgument)
	}
	acc, err := spec.New() // one accountant, so its caches serve every probe
	if err != nil {
		return 0, err
	}
	at := func(e int) (bool, error) { return accWithin(acc, e*stepsPerEpoch, target) }
	ok, err := at(1)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("accounting: target (ε = %g, δ = %g) is exceeded by one epoch of %s/%s at %s: %w",
			target.Epsilon, target.Delta, spec.Sampler, spec.Method, spec.noise(), privacy.ErrUnreachable)
	}
	lo, hi := 1, 2 // at(lo) true, at(hi) to be found false
	for {
		if hi > int(EpochsMax) {
			return int(EpochsMax), nil
		}
		ok, err := at(hi)
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		lo, hi = hi, 2*hi
	}
	// The first E that does not fit, minus one.
	first, err := numeric.BisectInt(func(e int) (bool, error) { ok, err := at(e); return !ok, err }, lo, hi)
	return first - 1, err
}

// SolveRadius returns the smallest ball radius (to relative tolerance 1e-10,
// rounded up) at which the ball Spec spec meets target after steps steps:
// DeltaTotal ≤ target.Delta (ball noise gives (0, δ) statements, so
// target.Epsilon does not matter). spec.Radius is ignored. It returns 0 when
// every radius meets the target (Δ = 0, no steps, or the sampling alone), see
// ball.SolveRadiusFor.
func SolveRadius(spec Spec, steps int, target privacy.Budget) (float64, error) {
	if err := target.Validate(); err != nil {
		return 0, err
	}
	if !spec.IsBall() {
		return 0, fmt.Errorf("accounting: SolveRadius: mechanism = %q, want %q: %w", spec.Mechanism, MechanismBall, privacy.ErrInvalidArgument)
	}
	probe := spec
	probe.Radius = 1
	if err := probe.Validate(); err != nil {
		return 0, err
	}
	return ball.SolveRadiusFor(spec.BallConfig(), steps, target.Delta)
}
