package privacy

import (
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/internal/numeric"
)

// nearIdealSlack is the share of δ kept free for the split-off tail event of a NearIdeal
// accountant: the ideal accountant is asked for ε at δ·e^{−λ}·(1 − nearIdealSlack).
const nearIdealSlack = 1e-9

// NearIdeal is the accountant of a mechanism whose every step is close to an ideal one that
// Ideal accounts for: for every event S, given the earlier outputs,
//
//	P'(S) ≤ e^{r}·P(S) + τ  and  P(S) ≤ e^{r}·P'(S) + τ,
//
// with P' the law of the actual step's output, P the ideal step's, r = LogRatio and
// τ = exp(LogTail). It is how dpsgd accounts the secure discrete Gaussian sampler
// (kernels.AddSecureGaussian: r = d·η and τ = d·3·10⁻³⁴⁸ for d coordinates).
//
// Over T steps a hybrid argument (swap one step at a time) gives P'(S) ≤ e^{λ}P(S) + Λ with
// λ = T·r and Λ = T·τ·e^{λ}, and the same with P and P' exchanged. If the ideal run is
// (ε, δ)-DP on neighbours D, D' (P, Q their laws), then for the actual laws P', Q'
//
//	P'(S) ≤ e^{λ}(e^{ε}Q(S) + δ) + Λ ≤ e^{ε+2λ}Q'(S) + e^{λ}δ + Λ(1 + e^{ε+λ}),
//
// so the actual run is (ε + 2λ, e^{λ}δ + Λ(1 + e^{ε+λ}))-DP: the group-privacy style of
// argument for mechanisms within a multiplicative factor of each other (Dwork & Roth 2014,
// §2.3 and Lemma 3.17's use of δ-approximate max divergence). Epsilon asks Ideal at
// δ·e^{−λ}·(1 − 10⁻⁹) and checks that the tail term fits in the rest.
type NearIdeal struct {
	Ideal    Accountant
	LogRatio float64 // r ≥ 0: the per-step log-ratio bound
	LogTail  float64 // ln τ: the per-step mass split off (−Inf: none)
}

// NewNearIdeal returns the NearIdeal accountant of ideal with per-step bounds r = logRatio and
// τ = exp(logTail). Ideal must be a guarantee (not an approximation, not a lower bound).
func NewNearIdeal(ideal Accountant, logRatio, logTail float64) (*NearIdeal, error) {
	if ideal == nil {
		return nil, fmt.Errorf("near-ideal accountant: %w: no ideal accountant", ErrInvalidArgument)
	}
	if IsApproximate(ideal) || IsLowerBound(ideal) {
		return nil, fmt.Errorf("near-ideal accountant over %s: %w", ideal.Name(), ErrNotCertified)
	}
	if !(logRatio >= 0) || math.IsInf(logRatio, 1) {
		return nil, fmt.Errorf("near-ideal accountant: %w: log-ratio %v, want a finite value ≥ 0", ErrInvalidArgument, logRatio)
	}
	if math.IsNaN(logTail) || logTail > 0 {
		return nil, fmt.Errorf("near-ideal accountant: %w: log tail %v, want a value ≤ 0 (−Inf for none)", ErrInvalidArgument, logTail)
	}
	return &NearIdeal{Ideal: ideal, LogRatio: logRatio, LogTail: logTail}, nil
}

// Name is the ideal accountant's name with "+near-ideal".
func (a *NearIdeal) Name() string { return a.Ideal.Name() + "+near-ideal" }

// Sampler is the ideal accountant's sampler.
func (a *NearIdeal) Sampler() string { return a.Ideal.Sampler() }

// Adjacency is the ideal accountant's neighbouring relation.
func (a *NearIdeal) Adjacency() string { return a.Ideal.Adjacency() }

// lambda returns λ = T·r and ln Λ = ln T + ln τ + λ for steps T.
func (a *NearIdeal) lambda(steps int) (lambda, logBigLambda float64) {
	lambda = float64(steps) * a.LogRatio
	return lambda, math.Log(float64(steps)) + a.LogTail + lambda
}

// IdealBudget is the budget the ideal accountant must meet after steps steps so that this
// accountant meets b (NearIdealBudget).
func (a *NearIdeal) IdealBudget(steps int, b Budget) (Budget, error) {
	return NearIdealBudget(a.LogRatio, steps, b)
}

// NearIdealBudget is the budget an ideal accountant must meet after steps steps so that its
// NearIdeal wrapper with per-step log-ratio r = logRatio meets b: ε − 2λ and
// δ·e^{−λ}·(1 − 10⁻⁹), λ = steps·r. Calibrating σ against it with the ideal accountant gives
// a σ the wrapper certifies for b (the tail term, which Epsilon checks, aside).
func NearIdealBudget(logRatio float64, steps int, b Budget) (Budget, error) {
	lambda := float64(steps) * logRatio
	eps := b.Epsilon - 2*lambda
	if !(eps > 0) {
		return Budget{}, fmt.Errorf("near-ideal accountant: %w: ε = %v leaves nothing after the 2λ = %.3g the sampler's deviation costs over %d steps", ErrUnreachable, b.Epsilon, 2*lambda, steps)
	}
	return Budget{Epsilon: eps, Delta: b.Delta * math.Exp(-lambda) * (1 - nearIdealSlack)}, nil
}

// Epsilon returns ε such that the actual run is (ε, delta)-DP after steps steps.
func (a *NearIdeal) Epsilon(steps int, delta float64) (float64, error) {
	if steps == 0 {
		return a.Ideal.Epsilon(steps, delta)
	}
	lambda, logBig := a.lambda(steps)
	in := delta * math.Exp(-lambda) * (1 - nearIdealSlack)
	eps, err := a.Ideal.Epsilon(steps, in)
	if err != nil {
		return eps, err
	}
	// The tail term Λ(1 + e^{ε+λ}) must fit in the δ·10⁻⁹ left free.
	if logTail := logBig + numeric.LogAddExp(0, eps+lambda); logTail > math.Log(delta*nearIdealSlack) {
		return math.Inf(1), fmt.Errorf("near-ideal accountant: %w: the split-off tail e^%.4g exceeds 10⁻⁹·δ at ε = %.4g", ErrUnreachable, logTail, eps)
	}
	return eps + 2*lambda, nil
}

// Delta returns δ such that the actual run is (eps, δ)-DP after steps steps; 1 when eps is
// below the 2λ the deviation costs.
func (a *NearIdeal) Delta(steps int, eps float64) (float64, error) {
	if steps == 0 {
		return a.Ideal.Delta(steps, eps)
	}
	lambda, logBig := a.lambda(steps)
	if eps < 2*lambda {
		return 1, nil
	}
	d, err := a.Ideal.Delta(steps, eps-2*lambda)
	if err != nil {
		return d, err
	}
	d = math.Exp(lambda)*d + math.Exp(logBig+numeric.LogAddExp(0, eps-lambda))
	return math.Min(d, 1), nil
}
