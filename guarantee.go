package dpsgd

import (
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/privacy"
)

// Guarantee returns the sentence that states what res, a run of this plan, guarantees: ε
// (or, for ball noise, the total δ) of every step charged, δ, the adjacency with the public N,
// the sampler and the accountant that prove it, and who can regenerate the noise. dpsgd train
// prints it after "privacy: ". A NaN ε (the accountant failed) is an error, never reported as
// a guarantee.
func (p *Private) Guarantee(res *engine.Result) (string, error) {
	if p.Plan.NonPrivate {
		return "none: non-private baseline", nil
	}
	eps := res.Epsilon
	if math.IsNaN(eps) {
		// The engine sets ε on every exit path; NaN means the accountant failed, and a failed
		// accountant is never reported as ε = 0.
		return "", fmt.Errorf("dpsgd: no ε for the %d steps taken (the accountant %s failed); the run's guarantee is unknown", res.Steps, p.Accountant.Name())
	}
	adjacency := adjacencyText(p.Accountant, p.N, p.Plan.UserLevel)
	level := ""
	if p.Plan.UserLevel {
		level = "user-level "
	}
	s := fmt.Sprintf(level+"(ε = %.4g, δ = %g)-DP after %d steps under %s, proven for the %s sampler by the %s accountant",
		eps, p.Plan.Delta, res.Steps, adjacency, p.Accountant.Sampler(), p.Accountant.Name())
	if res.EpsilonSteps > res.Steps {
		s += fmt.Sprintf(" (ε covers %d steps: the run stopped inside an epoch, which was charged whole before its first step)", res.EpsilonSteps)
	}
	if p.Plan.ball() {
		spent, err := p.DeltaSpent(res)
		if err != nil {
			return "", err
		}
		s = fmt.Sprintf(level+"(0, δ = %.4g)-DP (total variation ≤ %.4g, so (ε, %.4g)-DP for every ε ≥ 0) after %d steps under %s, proven for the %s sampler by the %s accountant (budget δ = %g)",
			spent, spent, spent, res.Steps, adjacency, p.Accountant.Sampler(), p.Accountant.Name(), p.Plan.Delta)
	}
	// A run whose steps ran on the GPU gets the same sentence: the CUDA backend sums the
	// clipped gradients in float64 and adds the noise there, rounding after, as the CPU does
	// (docs/reliability.md, "Summation across records").
	return s + p.scope(), nil
}

// DeltaSpent returns the total δ of a ball-noise run's (0, δ) guarantee after res: that of
// the steps charged, so a run stopped inside an epoch counts the whole epoch, as ε does.
func (p *Private) DeltaSpent(res *engine.Result) (float64, error) {
	if !p.Plan.ball() || p.Plan.NonPrivate {
		return 0, fmt.Errorf("dpsgd: DeltaSpent: the run has no ball noise: %w", ErrInvalid)
	}
	spent, err := p.Accountant.Delta(max(res.EpsilonSteps, res.Steps), 0)
	if err != nil {
		return 0, fmt.Errorf("dpsgd: ball noise: total δ after %d steps: %w", res.Steps, err)
	}
	return spent, nil
}

// adjacencyText names the guarantee's neighbouring relation for the guarantee sentence; at
// the user level, the unit replaced or removed is a user with all its records.
func adjacencyText(acc privacy.Accountant, n int, users bool) string {
	if users {
		if acc.Adjacency() == privacy.AdjacencyZeroOut {
			return fmt.Sprintf("user-level zero-out adjacency (neighbouring datasets differ in all records of one user: that user's records replaced by ghosts whose gradients are zero; the number of users N = %d is public)", n)
		}
		return "user-level " + acc.Adjacency() + " adjacency (neighbouring datasets differ in all records of one user)"
	}
	if acc.Adjacency() == privacy.AdjacencyZeroOut {
		return fmt.Sprintf("zero-out adjacency (one record replaced by a ghost whose gradient is zero; the dataset size N = %d is public)", n)
	}
	return acc.Adjacency() + " adjacency"
}

// scope completes the guarantee sentence with who can regenerate the noise.
func (p *Private) scope() string {
	if p.Plan.Secure {
		return "; noise and batches from the operating system's secure generator"
	}
	return fmt.Sprintf("; the noise and batches are pseudorandom from seed %d, so the guarantee holds only while the seed is secret (anyone who knows it can regenerate the noise): a research run, use --secure for a release", p.Plan.Seed)
}
