package ball

import (
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/internal/numeric"
	"github.com/dpsgd/dpsgd/privacy"
)

// Composition says how the (0, δ') guarantees of single steps are composed.
type Composition int

const (
	// Exact is 1 − (1 − δ')ᵀ (ComposeExact): the optimal composition of
	// (0, δ')-DP mechanisms, what the Accountant uses.
	Exact Composition = iota
	// Sum is min(1, T·δ') (ComposeSum): Tholeti Eq. 7, basic composition.
	Sum
)

// String returns "exact" or "sum".
func (c Composition) String() string {
	switch c {
	case Exact:
		return "exact"
	case Sum:
		return "sum"
	}
	return fmt.Sprintf("Composition(%d)", int(c))
}

// radiusRel is the relative tolerance of the radius solvers.
const radiusRel = 1e-10

// Amplify returns δ/N, the per-step δ of a step that applies a (0, δ)-DP
// mechanism to one of n points drawn uniformly (Tholeti §IV.A): the
// step's output depends on the differing point only when that point
// is drawn, with probability 1/N, so its total variation is at most δ/N. n < 1
// or δ outside [0, 1] is an error wrapping privacy.ErrInvalidArgument.
func Amplify(delta float64, n int) (float64, error) {
	if err := checkDelta("delta", delta); err != nil {
		return 0, err
	}
	if n < 1 {
		return 0, fmt.Errorf("ball: Amplify: n = %d out of range [1, +Inf): %w", n, privacy.ErrInvalidArgument)
	}
	return delta / float64(n), nil
}

// ComposeSum returns min(1, T·δ'), the composition of T (0, δ')-DP steps used
// by Tholeti (Eq. 7; basic composition, Dwork & Roth 2014 Thm 3.16). It is an
// upper bound on ComposeExact, equal to it for T ≤ 1.
func ComposeSum(deltaStep float64, steps int) (float64, error) {
	if err := checkCompose(deltaStep, steps); err != nil {
		return 0, err
	}
	return math.Min(1, float64(steps)*deltaStep), nil
}

// ComposeExact returns 1 − (1 − δ')ᵀ, computed as −expm1(T·log1p(−δ')) so that
// it keeps full relative precision for tiny δ'. It is the δ of the T-fold
// adaptive composition of (0, δ')-DP mechanisms, and it is optimal:
// Kairouz, Oh & Viswanath 2017 (Theorem 3.3 with ε = 0, where their δ_i term
// vanishes) prove that the k-fold adaptive composition of (ε, δ)-DP mechanisms
// is ((k−2i)ε, 1 − (1−δ)ᵏ(1−δ_i))-DP and that no better bound holds for the
// class. Directly: (0, δ')-DP is d_TV ≤ δ' for every neighbouring pair; given
// the same history the two runs' next outputs can be coupled to agree with
// probability ≥ 1 − δ' (maximal coupling), so whole transcripts agree with
// probability ≥ (1 − δ')ᵀ, and d_TV of the transcripts ≤ 1 − (1 − δ')ᵀ. The
// bound is attained by T independent uniform-ball steps at distance Δ.
func ComposeExact(deltaStep float64, steps int) (float64, error) {
	if err := checkCompose(deltaStep, steps); err != nil {
		return 0, err
	}
	if steps == 0 || deltaStep == 0 {
		return 0, nil
	}
	if deltaStep == 1 || steps == 1 {
		return deltaStep, nil
	}
	// Never above the sum, which it is below in exact arithmetic.
	sum := float64(steps) * deltaStep
	return math.Min(1, math.Min(sum, -math.Expm1(float64(steps)*math.Log1p(-deltaStep)))), nil
}

// Compose returns ComposeExact or ComposeSum.
func Compose(c Composition, deltaStep float64, steps int) (float64, error) {
	switch c {
	case Exact:
		return ComposeExact(deltaStep, steps)
	case Sum:
		return ComposeSum(deltaStep, steps)
	}
	return 0, fmt.Errorf("ball: composition = %d, want Exact (%d) or Sum (%d): %w", int(c), Exact, Sum, privacy.ErrInvalidArgument)
}

// SolveRadius returns the smallest radius r (to relative tolerance 1e-10,
// rounded up) for which Tholeti's setting (dimension d, distance Δ, one of n
// points drawn per step, steps steps) has a total δ at most target, with
// composition c: Compose(c, StepDelta(d, Δ, r)/n, steps) ≤ target. δ is
// non-increasing in r (StepDelta decreases in r, composition increases in δ'),
// so the search bisects geometrically between Δ/2 (where the step δ is 1) and a
// radius found by doubling.
//
// It returns 0 when every radius meets the target: Δ = 0, steps = 0, or a
// target that the sampling alone meets (Compose(c, 1/n, steps) ≤ target). A
// target outside (0, 1) is an error wrapping privacy.ErrInvalidArgument.
func SolveRadius(dim int, distance float64, n, steps int, target float64, c Composition) (float64, error) {
	if n < 1 {
		return 0, fmt.Errorf("ball: SolveRadius: n = %d out of range [1, +Inf): %w", n, privacy.ErrInvalidArgument)
	}
	if steps < 0 {
		return 0, fmt.Errorf("ball: SolveRadius: steps = %d out of range [0, +Inf): %w", steps, privacy.ErrInvalidArgument)
	}
	nf := float64(n)
	return solveRadius(dim, distance, target, func(step float64) (float64, error) {
		return Compose(c, step/nf, steps)
	})
}

// solveRadius returns the smallest r with total(StepDelta(d, Δ, r)) ≤ target,
// total non-decreasing; 0 when total(1) ≤ target or Δ = 0.
func solveRadius(dim int, distance, target float64, total func(step float64) (float64, error)) (float64, error) {
	if err := checkGeometry(dim, distance, 1); err != nil {
		return 0, err
	}
	if !(target > 0 && target < 1) {
		return 0, fmt.Errorf("ball: target delta = %g out of range (0, 1): %w", target, privacy.ErrInvalidArgument)
	}
	if distance == 0 {
		return 0, nil
	}
	at := func(r float64) (bool, error) {
		step, err := StepDelta(dim, distance, r)
		if err != nil {
			return false, err
		}
		d, err := total(step)
		return d <= target, err
	}
	lo := 0.5 * distance // step δ = 1 here and below
	if ok, err := at(lo); err != nil || ok {
		return 0, err
	}
	hi := 2 * lo
	for {
		if math.IsInf(hi, 1) {
			return 0, fmt.Errorf("ball: no finite radius meets total delta %g for dim = %d, distance = %g: %w", target, dim, distance, privacy.ErrUnreachable)
		}
		ok, err := at(hi)
		if err != nil {
			return 0, err
		}
		if ok {
			break
		}
		lo, hi = hi, 2*hi
	}
	return numeric.BisectGeometric(at, lo, hi, radiusRel)
}

// checkDelta validates a δ in [0, 1].
func checkDelta(field string, delta float64) error {
	if !(delta >= 0 && delta <= 1) {
		return fmt.Errorf("ball: %s = %g out of range [0, 1]: %w", field, delta, privacy.ErrInvalidArgument)
	}
	return nil
}

// checkCompose validates the arguments of the compositions.
func checkCompose(deltaStep float64, steps int) error {
	if err := checkDelta("per-step delta", deltaStep); err != nil {
		return err
	}
	if steps < 0 {
		return fmt.Errorf("ball: steps = %d out of range [0, +Inf): %w", steps, privacy.ErrInvalidArgument)
	}
	return nil
}
