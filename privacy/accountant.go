package privacy

import (
	"errors"
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/internal/numeric"
)

// Sampler names, as returned by Accountant.Sampler.
const (
	SamplerPoisson          = "poisson"           // each example independently with probability q per step
	SamplerShuffle          = "shuffle"           // a permutation per epoch cut into fixed batches
	SamplerAllocation       = "allocation"        // each example in one uniform step per epoch
	SamplerPoissonTruncated = "poisson-truncated" // Poisson, batch cut at the physical batch size
)

// Neighbouring relations, as returned by Accountant.Adjacency. Every
// guarantee holds for one relation, and reports say which.
const (
	// AdjacencyAddRemove: the datasets differ by adding or removing one
	// record (Poisson sampling; Mironov, Talwar & Zhang 2019).
	AdjacencyAddRemove = "add/remove one"
	// AdjacencyZeroOut: one record is replaced by a ghost whose clipped
	// gradient is zero, the dataset size staying public (shuffling and
	// random allocation; Chua et al. 2024).
	AdjacencyZeroOut = "zero-out"
)

var (
	// ErrInvalidArgument is wrapped by every error about an input outside
	// its valid range; the message names the field and the range.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrUnreachable is wrapped when no value meets a privacy target: a σ
	// range that cannot reach a budget, or a δ smaller than what a
	// truncated sampler leaks by itself.
	ErrUnreachable = errors.New("privacy target unreachable")
	// ErrNotCertified is wrapped when an approximate or lower-bound accountant is used
	// where a proven guarantee is required.
	ErrNotCertified = errors.New("accountant is an approximation, not a guarantee")
	// ErrOutOfRegime is wrapped when a bound is used outside the conditions
	// under which it is proven (for example van Dijk & Ertan's Theorem 4.1 needs
	// σ ≥ √(3/ln M) and M ≥ 3); the message names the condition.
	ErrOutOfRegime = errors.New("outside the proven regime of the bound")
)

// Accountant reports the privacy spent by a DP-SGD run after a number of
// steps, for one sampler.
type Accountant interface {
	// Name is the method, e.g. "rdp", "gaussian-epochs".
	Name() string
	// Sampler is the sampler the accountant is proven for: "poisson",
	// "shuffle", "allocation" or "poisson-truncated".
	Sampler() string
	// Adjacency is the neighbouring relation the guarantee holds for:
	// AdjacencyAddRemove or AdjacencyZeroOut.
	Adjacency() string
	// Epsilon returns ε such that the run after steps steps is (ε, delta)-DP.
	Epsilon(steps int, delta float64) (float64, error)
	// Delta returns δ such that the run is (eps, δ)-DP after steps steps.
	Delta(steps int, eps float64) (float64, error)
}

// Approximation is implemented by accountants whose numbers are estimates
// (for example a central-limit approximation) rather than proven bounds. An
// accountant that reports Approximate() == true must never be presented as a
// guarantee; Budget.Check refuses it.
type Approximation interface {
	Approximate() bool
}

// IsApproximate reports whether a declares itself an approximation.
func IsApproximate(a Accountant) bool {
	ap, ok := a.(Approximation)
	return ok && ap.Approximate()
}

// LowerBound is implemented by accountants whose numbers are lower bounds
// on the privacy loss (what an attack provably achieves), not guarantees:
// the true ε is at least the reported one. Budget.Check refuses them.
type LowerBound interface {
	LowerBound() bool
}

// IsLowerBound reports whether a declares itself a lower bound.
func IsLowerBound(a Accountant) bool {
	lb, ok := a.(LowerBound)
	return ok && lb.LowerBound()
}

// Budget is a target (ε, δ). A total-variation target t is the budget
// (0, t): d_TV ≤ t is exactly (0, t)-DP (Dong, Roth & Su 2019).
type Budget struct {
	Epsilon float64 `json:"epsilon"`
	Delta   float64 `json:"delta"`
}

// Validate checks ε ≥ 0 (finite) and δ in (0, 1).
func (b Budget) Validate() error {
	if !(b.Epsilon >= 0) || math.IsInf(b.Epsilon, 1) {
		return fmt.Errorf("privacy: budget Epsilon = %g out of range [0, +Inf): %w", b.Epsilon, ErrInvalidArgument)
	}
	return checkDelta("budget Delta", b.Delta)
}

// Within says whether the run is (Epsilon, Delta)-DP after steps steps,
// decided by a.Delta(steps, Epsilon) ≤ Delta (so a total-variation budget
// (0, t) works with accountants that only certify a TV). It refuses
// accountants that declare themselves approximations or lower bounds
// (ErrNotCertified): a budget check is a guarantee.
func (b Budget) Within(a Accountant, steps int) (bool, error) {
	if err := b.Validate(); err != nil {
		return false, err
	}
	if a == nil {
		return false, fmt.Errorf("privacy: Budget check: accountant is nil: %w", ErrInvalidArgument)
	}
	if IsApproximate(a) || IsLowerBound(a) {
		return false, fmt.Errorf("privacy: Budget check: %q (%s): %w", a.Name(), a.Sampler(), ErrNotCertified)
	}
	d, err := a.Delta(steps, b.Epsilon)
	if err != nil {
		return false, err
	}
	return d <= b.Delta, nil
}

// Check is Within plus the ε spent at the budget's δ, +Inf where the
// accountant cannot certify any ε at that δ.
func (b Budget) Check(a Accountant, steps int) (eps float64, within bool, err error) {
	if within, err = b.Within(a, steps); err != nil {
		return 0, false, err
	}
	eps, err = a.Epsilon(steps, b.Delta)
	if errors.Is(err, ErrUnreachable) {
		return math.Inf(1), within, nil
	}
	if err != nil {
		return 0, false, err
	}
	return eps, within, nil
}

// calibrateRelTol is the relative tolerance of CalibrateSigma.
const calibrateRelTol = 1e-4

// CalibrateSigma finds the smallest σ (to relative tolerance 1e-4) for which
// newAcc(σ).Epsilon(steps, target.Delta) ≤ target.Epsilon, searching σ in
// [lo, hi] (e.g. [0.1, 100]). The returned σ meets the target and σ·(1 − 1e-4)
// does not (unless σ = lo). ε must be non-increasing in σ, which holds for
// every accountant of this package. An unreachable target is an error
// wrapping ErrUnreachable that names the range; an accountant that reports
// ErrUnreachable at some σ counts as missing the target there.
func CalibrateSigma(newAcc func(sigma float64) (Accountant, error), steps int, target Budget, lo, hi float64) (float64, error) {
	if newAcc == nil {
		return 0, fmt.Errorf("privacy: CalibrateSigma: newAcc is nil: %w", ErrInvalidArgument)
	}
	if err := target.Validate(); err != nil {
		return 0, err
	}
	if err := checkSteps(steps); err != nil {
		return 0, err
	}
	if !(lo > 0) || math.IsInf(lo, 1) {
		return 0, fmt.Errorf("privacy: CalibrateSigma: lo = %g out of range (0, +Inf): %w", lo, ErrInvalidArgument)
	}
	if !(hi > lo) || math.IsInf(hi, 1) {
		return 0, fmt.Errorf("privacy: CalibrateSigma: hi = %g out of range (lo = %g, +Inf): %w", hi, lo, ErrInvalidArgument)
	}
	// eps returns ε at σ, +Inf where the accountant says the target δ is
	// unreachable.
	eps := func(sigma float64) (float64, error) {
		a, err := newAcc(sigma)
		if err != nil {
			return 0, fmt.Errorf("privacy: CalibrateSigma: σ = %g: %w", sigma, err)
		}
		if a == nil {
			return 0, fmt.Errorf("privacy: CalibrateSigma: newAcc(%g) returned nil: %w", sigma, ErrInvalidArgument)
		}
		e, err := a.Epsilon(steps, target.Delta)
		if errors.Is(err, ErrUnreachable) {
			return math.Inf(1), nil
		}
		if err != nil {
			return 0, fmt.Errorf("privacy: CalibrateSigma: σ = %g: %w", sigma, err)
		}
		return e, nil
	}
	eHi, err := eps(hi)
	if err != nil {
		return 0, err
	}
	if !(eHi <= target.Epsilon) {
		return 0, fmt.Errorf("privacy: CalibrateSigma: target (ε = %g, δ = %g) after %d steps needs σ above the search range [%g, %g] (σ = %g gives ε = %g): %w",
			target.Epsilon, target.Delta, steps, lo, hi, hi, eHi, ErrUnreachable)
	}
	eLo, err := eps(lo)
	if err != nil {
		return 0, err
	}
	if eLo <= target.Epsilon {
		return lo, nil
	}
	// Invariant: ε(lo) > target ≥ ε(hi). Bisect geometrically.
	return numeric.BisectGeometric(func(sigma float64) (bool, error) {
		e, err := eps(sigma)
		return e <= target.Epsilon, err
	}, lo, hi, calibrateRelTol)
}

// EpochsOf returns E = ⌈steps / stepsPerEpoch⌉ (stepsPerEpoch ≥ 1), the
// epochs begun after steps steps; steps ≤ 0 give 0. A partial epoch counts as
// a whole one: its releases are a prefix of the whole epoch's, so
// post-processing covers it. The per-epoch accountants (GaussianEpochs and
// those of packages allocation, shuffle and ball) count epochs with it.
func EpochsOf(steps, stepsPerEpoch int) int {
	if steps <= 0 {
		return 0
	}
	return (steps-1)/stepsPerEpoch + 1
}

// checkSteps validates a step count (≥ 0).
func checkSteps(steps int) error {
	if steps < 0 {
		return fmt.Errorf("privacy: steps = %d out of range [0, +Inf): %w", steps, ErrInvalidArgument)
	}
	return nil
}

// checkDelta validates δ in (0, 1).
func checkDelta(field string, delta float64) error {
	if !(delta > 0 && delta < 1) {
		return fmt.Errorf("privacy: %s = %g out of range (0, 1): %w", field, delta, ErrInvalidArgument)
	}
	return nil
}

// checkEps validates ε ≥ 0 (+Inf allowed, NaN not).
func checkEps(eps float64) error {
	if !(eps >= 0) {
		return fmt.Errorf("privacy: eps = %g out of range [0, +Inf]: %w", eps, ErrInvalidArgument)
	}
	return nil
}

// checkSigma validates a noise multiplier σ in (0, +Inf).
func checkSigma(sigma float64) error {
	if !(sigma > 0) || math.IsInf(sigma, 1) {
		return fmt.Errorf("privacy: sigma = %g out of range (0, +Inf): %w", sigma, ErrInvalidArgument)
	}
	return nil
}

// checkRate validates a sampling rate q in (0, 1].
func checkRate(q float64) error {
	if !(q > 0 && q <= 1) {
		return fmt.Errorf("privacy: q = %g out of range (0, 1]: %w", q, ErrInvalidArgument)
	}
	return nil
}
