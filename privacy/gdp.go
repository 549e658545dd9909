package privacy

import (
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/internal/numeric"
	"gonum.org/v1/gonum/mathext"
)

// GaussianDelta returns δ(ε) of μ-GDP, the smallest δ for which a μ-GDP
// mechanism is (ε, δ)-DP (Dong, Roth & Su 2019
// Cor. 2.13; tf_privacy delta_eps_mu):
//
//	δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2).
//
// It is exact for a Gaussian mechanism of sensitivity 1 and noise μ⁻¹, and
// at ε = 0 it is the total variation 2Φ(μ/2) − 1. The difference is taken in
// log space. μ must be ≥ 0 (+Inf gives 1), ε ≥ 0.
func GaussianDelta(mu, eps float64) (float64, error) {
	if err := checkMu(mu); err != nil {
		return 0, err
	}
	if err := checkEps(eps); err != nil {
		return 0, err
	}
	return math.Exp(logGaussianDelta(mu, eps)), nil
}

// GaussianEpsilon returns the smallest ε ≥ 0 with δ(ε) ≤ delta for μ-GDP
// (Dong, Roth & Su 2019): δ(ε) decreases in ε, so ε is found by bisection on
// ln δ(ε) − ln delta in [0, μ(μ/2 − Φ⁻¹(δ))] (at the right end
// δ(ε) ≤ Φ(μ/2 − ε/μ) = delta), to 1e-12 relative; the returned end has
// δ(ε) ≤ delta. μ = +Inf gives +Inf.
func GaussianEpsilon(mu, delta float64) (float64, error) {
	if err := checkMu(mu); err != nil {
		return 0, err
	}
	if err := checkDelta("delta", delta); err != nil {
		return 0, err
	}
	return gaussianEpsilon(mu, delta), nil
}

// gaussianEpsilon is GaussianEpsilon for valid input.
func gaussianEpsilon(mu, delta float64) float64 {
	if mu == 0 {
		return 0
	}
	if math.IsInf(mu, 1) {
		return math.Inf(1)
	}
	target := math.Log(delta)
	f := func(eps float64) float64 { return logGaussianDelta(mu, eps) - target }
	if f(0) <= 0 {
		return 0
	}
	hi := mu * (mu/2 - mathext.NormalQuantile(delta))
	for i := 0; f(hi) > 0 && i < 64; i++ { // guard against rounding at the edge
		hi = 2*hi + 1
	}
	return numeric.BisectDecreasing(f, 0, hi, 1e-12*math.Max(1, hi))
}

// logGaussianDelta returns ln δ(ε) of μ-GDP (see GaussianDelta) for μ ≥ 0, ε ≥ 0.
func logGaussianDelta(mu, eps float64) float64 {
	if mu == 0 || math.IsInf(eps, 1) {
		return math.Inf(-1)
	}
	if math.IsInf(mu, 1) {
		return 0
	}
	la := numeric.LogNormCDF(-eps/mu + mu/2)
	lb := eps + numeric.LogNormCDF(-eps/mu-mu/2)
	return numeric.LogSubExp(la, lb)
}

// checkMu validates a GDP parameter μ in [0, +Inf].
func checkMu(mu float64) error {
	if !(mu >= 0) {
		return fmt.Errorf("privacy: mu = %g out of range [0, +Inf]: %w", mu, ErrInvalidArgument)
	}
	return nil
}

// MuGDP is μ(steps) of an accountant whose run is μ-GDP after every number of
// steps: its Epsilon and Delta are the Gaussian pair's at that μ
// (GaussianEpsilon, GaussianDelta). GaussianEpochs, GDPCLT and the asymptotic
// GDP accountant of random allocation (package accounting) answer through it.
type MuGDP func(steps int) float64

// Epsilon returns GaussianEpsilon(μ(steps), delta) for steps ≥ 0.
func (mu MuGDP) Epsilon(steps int, delta float64) (float64, error) {
	if err := checkSteps(steps); err != nil {
		return 0, err
	}
	return GaussianEpsilon(mu(steps), delta)
}

// Delta returns GaussianDelta(μ(steps), eps) for steps ≥ 0.
func (mu MuGDP) Delta(steps int, eps float64) (float64, error) {
	if err := checkSteps(steps); err != nil {
		return 0, err
	}
	return GaussianDelta(mu(steps), eps)
}

// GaussianEpochs is the amplification-free accountant for samplers that use
// each example at most once per epoch: shuffling (fixed batches from a
// permutation) and random allocation (the deterministic-batches case of
// Chua et al. 2024).
//
// Under zero-out adjacency the differing record moves the clipped sum of at
// most one step per epoch by at most C, and the noise there is N(0, σ²C²), so
// given the batch assignment (which is independent of the data, and whose
// release only helps the adversary) one epoch is a Gaussian mechanism of
// sensitivity 1 and noise σ: exactly (1/σ)-GDP, whichever step holds the
// record (trade-off functions of mixtures with data-independent weights stay
// above a convex f). E epochs compose to μ-GDP with μ = √E/σ (Dong, Roth & Su
// 2019: G_a ⊗ G_b = G_√(a²+b²)), and δ(ε) is GaussianDelta(μ, ε), exact for
// this μ-GDP bound. A partial epoch counts as a whole one:
// E = ⌈steps / stepsPerEpoch⌉. No amplification by sampling is claimed.
type GaussianEpochs struct {
	sigma         float64
	stepsPerEpoch int
	sampler       string
}

// NewGaussianEpochs returns the per-epoch Gaussian accountant for noise
// multiplier σ > 0, stepsPerEpoch ≥ 1, and a sampler that uses each example
// at most once per epoch: "shuffle" or "allocation".
func NewGaussianEpochs(sigma float64, stepsPerEpoch int, sampler string) (*GaussianEpochs, error) {
	if err := checkSigma(sigma); err != nil {
		return nil, fmt.Errorf("privacy: NewGaussianEpochs: %w", err)
	}
	if stepsPerEpoch < 1 {
		return nil, fmt.Errorf("privacy: NewGaussianEpochs: stepsPerEpoch = %d out of range [1, +Inf): %w", stepsPerEpoch, ErrInvalidArgument)
	}
	if sampler != SamplerShuffle && sampler != SamplerAllocation {
		return nil, fmt.Errorf("privacy: NewGaussianEpochs: sampler = %q, want %q or %q (each example at most once per epoch): %w",
			sampler, SamplerShuffle, SamplerAllocation, ErrInvalidArgument)
	}
	return &GaussianEpochs{sigma: sigma, stepsPerEpoch: stepsPerEpoch, sampler: sampler}, nil
}

var _ Accountant = (*GaussianEpochs)(nil)

// Name returns "gaussian-epochs".
func (g *GaussianEpochs) Name() string { return "gaussian-epochs" }

// Sampler returns the sampler given at construction.
func (g *GaussianEpochs) Sampler() string { return g.sampler }

// Adjacency returns AdjacencyZeroOut.
func (g *GaussianEpochs) Adjacency() string { return AdjacencyZeroOut }

// Epochs returns E = ⌈steps / stepsPerEpoch⌉, the epochs begun after steps steps.
func (g *GaussianEpochs) Epochs(steps int) int { return EpochsOf(steps, g.stepsPerEpoch) }

// Mu returns μ = √E/σ after steps steps.
func (g *GaussianEpochs) Mu(steps int) float64 {
	return math.Sqrt(float64(g.Epochs(steps))) / g.sigma
}

// Epsilon returns the smallest ε with δ(ε) ≤ delta for μ = √E/σ.
func (g *GaussianEpochs) Epsilon(steps int, delta float64) (float64, error) {
	return MuGDP(g.Mu).Epsilon(steps, delta)
}

// Delta returns δ(eps) for μ = √E/σ.
func (g *GaussianEpochs) Delta(steps int, eps float64) (float64, error) {
	return MuGDP(g.Mu).Delta(steps, eps)
}

// GDPCLT is the Gaussian-DP central-limit approximation for Poisson sampling
// of Bu, Dong, Long & Su 2019 (tf_privacy
// compute_mu_poisson): after T steps the run is approximately μ-GDP with
//
//	μ = q √(T (e^{1/σ²} − 1)).
//
// It is an asymptotic APPROXIMATION, not a bound: it can under-report at
// finite sizes. It reports Approximate() == true, and Budget.Check refuses it.
type GDPCLT struct {
	q, sigma float64
}

// NewGDPCLT returns the GDP-CLT approximation for sampling rate q in (0, 1]
// and noise multiplier σ > 0.
func NewGDPCLT(q, sigma float64) (*GDPCLT, error) {
	if err := checkRate(q); err != nil {
		return nil, fmt.Errorf("privacy: NewGDPCLT: %w", err)
	}
	if err := checkSigma(sigma); err != nil {
		return nil, fmt.Errorf("privacy: NewGDPCLT: %w", err)
	}
	return &GDPCLT{q: q, sigma: sigma}, nil
}

var (
	_ Accountant    = (*GDPCLT)(nil)
	_ Approximation = (*GDPCLT)(nil)
)

// Name returns "gdp-clt (approximate)".
func (g *GDPCLT) Name() string { return "gdp-clt (approximate)" }

// Sampler returns "poisson".
func (g *GDPCLT) Sampler() string { return SamplerPoisson }

// Adjacency returns AdjacencyAddRemove.
func (g *GDPCLT) Adjacency() string { return AdjacencyAddRemove }

// Approximate returns true: GDP-CLT numbers are not guarantees.
func (g *GDPCLT) Approximate() bool { return true }

// Mu returns μ = q √(T (e^{1/σ²} − 1)) after steps steps.
func (g *GDPCLT) Mu(steps int) float64 {
	if steps <= 0 {
		return 0
	}
	return g.q * math.Sqrt(float64(steps)*math.Expm1(1/(g.sigma*g.sigma)))
}

// Epsilon returns the approximate ε at delta after steps steps.
func (g *GDPCLT) Epsilon(steps int, delta float64) (float64, error) {
	return MuGDP(g.Mu).Epsilon(steps, delta)
}

// Delta returns the approximate δ at eps after steps steps.
func (g *GDPCLT) Delta(steps int, eps float64) (float64, error) {
	return MuGDP(g.Mu).Delta(steps, eps)
}
