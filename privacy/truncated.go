package privacy

import (
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/internal/numeric"
	"gonum.org/v1/gonum/mathext"
	"gonum.org/v1/gonum/stat/distuv"
)

// TruncatedPoisson accounts for Poisson sampling whose batches are cut at a
// physical size B_phys (the excess examples of an oversized batch are
// dropped; the sum is still divided by the public expected batch size).
//
// Derivation. Under add/remove adjacency the larger neighbour has at most
// N+1 records, so one step truncates with probability at most
// p = P(Binomial(N+1, q) > B_phys) (the tail grows with the number of
// records). The batch sizes are drawn independently of the data and of the
// model, so couple the truncated run M' with the untruncated Poisson run M on
// the same randomness: they differ only if some step truncates, which has
// probability τ = 1 − (1−p)^T ≤ T·p on either neighbour. Hence for every
// event S and neighbours D, D′,
//
//	P[M'(D)∈S] ≤ P[M(D)∈S] + τ ≤ e^ε P[M(D′)∈S] + δ + τ
//	           ≤ e^ε (P[M'(D′)∈S] + τ) + δ + τ,
//
// so (ε, δ)-DP of the Poisson run (PoissonRDP) gives (ε, δ + (1 + e^ε)·τ)-DP
// for the truncated sampler.
type TruncatedPoisson struct {
	base          *PoissonRDP
	datasetSize   int
	physicalBatch int
	logP          float64 // ln p, per step
}

// NewTruncatedPoisson returns the accountant for Poisson sampling at rate q in
// (0, 1] with noise multiplier σ > 0 on datasetSize ≥ 1 records, batches cut
// at physicalBatch ≥ 1, over the given Rényi orders (nil for DefaultOrders).
func NewTruncatedPoisson(q, sigma float64, datasetSize, physicalBatch int, orders []float64) (*TruncatedPoisson, error) {
	if datasetSize < 1 || datasetSize == math.MaxInt {
		return nil, fmt.Errorf("privacy: NewTruncatedPoisson: datasetSize = %d out of range [1, MaxInt): %w", datasetSize, ErrInvalidArgument)
	}
	if physicalBatch < 1 {
		return nil, fmt.Errorf("privacy: NewTruncatedPoisson: physicalBatch = %d out of range [1, +Inf): %w", physicalBatch, ErrInvalidArgument)
	}
	base, err := NewPoissonRDP(q, sigma, orders)
	if err != nil {
		return nil, fmt.Errorf("privacy: NewTruncatedPoisson: %w", err)
	}
	return &TruncatedPoisson{
		base:          base,
		datasetSize:   datasetSize,
		physicalBatch: physicalBatch,
		logP:          logBinomialSurvival(datasetSize+1, q, physicalBatch),
	}, nil
}

var _ Accountant = (*TruncatedPoisson)(nil)

// Name returns "rdp+truncation".
func (t *TruncatedPoisson) Name() string { return "rdp+truncation" }

// Sampler returns "poisson-truncated".
func (t *TruncatedPoisson) Sampler() string { return SamplerPoissonTruncated }

// Adjacency returns AdjacencyAddRemove.
func (t *TruncatedPoisson) Adjacency() string { return AdjacencyAddRemove }

// Poisson returns the untruncated Poisson accountant it wraps.
func (t *TruncatedPoisson) Poisson() *PoissonRDP { return t.base }

// TruncationProbability returns p = P(Binomial(N+1, q) > B_phys), the
// per-step probability of a cut batch; LogTruncationProbability is ln p.
func (t *TruncatedPoisson) TruncationProbability() float64 { return math.Exp(t.logP) }

// LogTruncationProbability returns ln p (accurate where p underflows).
func (t *TruncatedPoisson) LogTruncationProbability() float64 { return t.logP }

// TruncationMass returns τ = 1 − (1−p)^T ≤ T·p, the probability that at
// least one of steps steps truncates.
func (t *TruncatedPoisson) TruncationMass(steps int) (float64, error) {
	if err := checkSteps(steps); err != nil {
		return 0, err
	}
	return t.mass(steps), nil
}

// mass is TruncationMass for steps ≥ 0.
func (t *TruncatedPoisson) mass(steps int) float64 {
	if steps == 0 || math.IsInf(t.logP, -1) {
		return 0
	}
	p := math.Exp(t.logP)
	if p >= 1 {
		return 1
	}
	return -math.Expm1(float64(steps) * math.Log1p(-p))
}

// Delta returns δ_Poisson(eps) + (1 + e^eps)·τ, capped at 1.
func (t *TruncatedPoisson) Delta(steps int, eps float64) (float64, error) {
	d, err := t.base.Delta(steps, eps)
	if err != nil {
		return 0, err
	}
	tau := t.mass(steps)
	if tau == 0 {
		return d, nil
	}
	return math.Min(1, d+(1+math.Exp(eps))*tau), nil
}

// Epsilon returns the smallest ε with δ_Poisson(ε) + (1 + e^ε)·τ ≤ delta.
// Per Rényi order the left side, e^{a_α − (α−1)ε} + (1 + e^ε)τ with
// a_α = (α−1)(T·ε_RDP(α) + ln(1 − 1/α)) − ln α (the improved conversion of
// RDPToDelta), is convex in ε with its minimum at
// ε* = (a_α + ln(α−1) − ln τ)/α; the smallest feasible ε of each order is
// found by bisection on [0, ε*] and the best order wins (the KL bound of
// RDPToDelta is used too). It is an error wrapping ErrUnreachable when 2τ
// (the truncation term at ε = 0) reaches delta, or when no ε meets delta.
func (t *TruncatedPoisson) Epsilon(steps int, delta float64) (float64, error) {
	if err := checkSteps(steps); err != nil {
		return 0, err
	}
	if err := checkDelta("delta", delta); err != nil {
		return 0, err
	}
	tau := t.mass(steps)
	if tau == 0 {
		return t.base.Epsilon(steps, delta)
	}
	if 2*tau >= delta {
		return 0, fmt.Errorf("privacy: truncated Poisson: truncation probability over %d steps τ = %g (p = %g per step, N = %d, B_phys = %d) leaves nothing of delta = %g (need 2τ < delta): %w",
			steps, tau, t.TruncationProbability(), t.datasetSize, t.physicalBatch, delta, ErrUnreachable)
	}
	p := t.base
	T := float64(steps)
	ld := math.Log(delta)
	// KL bound: δ_P(ε) ≤ √(1 − e^{−KL}) for every ε; feasible at ε = 0?
	for _, r := range p.rdp {
		if math.Sqrt(-math.Expm1(-T*r))+2*tau <= delta {
			return 0, nil
		}
	}
	// solve returns the smallest feasible ε of order i, or +Inf.
	solve := func(i int) float64 {
		a1 := p.orders[i] - 1
		a := a1*(T*p.rdp[i]+p.log1mInv[i]) - p.logA[i]
		h := func(eps float64) float64 {
			return math.Exp(a-a1*eps) + (1+math.Exp(eps))*tau - delta
		}
		if h(0) <= 0 {
			return 0
		}
		lo := math.Max(0, (a-ld)/a1) // feasible ε is above the untruncated one
		star := (a + math.Log(a1) - math.Log(tau)) / p.orders[i]
		if star <= lo || h(star) > 0 {
			return math.Inf(1)
		}
		return numeric.BisectDecreasing(h, lo, star, 1e-12*math.Max(1, star))
	}
	// Start from the order that is best without truncation, then skip every
	// order whose untruncated ε (a lower bound) cannot beat the best so far.
	lower := make([]float64, len(p.rdp))
	first := 0
	for i, r := range p.rdp {
		a1 := p.orders[i] - 1
		lower[i] = math.Max(0, T*r+p.log1mInv[i]-(ld+p.logA[i])/a1)
		if lower[i] < lower[first] {
			first = i
		}
	}
	best := solve(first)
	for i := range p.rdp {
		if i != first && lower[i] < best {
			best = math.Min(best, solve(i))
		}
	}
	if math.IsInf(best, 1) {
		return 0, fmt.Errorf("privacy: truncated Poisson: no ε meets delta = %g after %d steps with truncation probability τ = %g: %w",
			delta, steps, tau, ErrUnreachable)
	}
	return best, nil
}

// logBinomialSurvival returns ln P(X > k) for X ~ Binomial(n, q), accurate
// in the far tail. P(X > k) = I_q(k+1, n−k) (regularized incomplete beta,
// gonum mathext.RegIncBeta) where that is representable; below 1e-280 the
// tail is summed in log space from the pmf at k+1 (gonum distuv.Binomial
// LogProb) with the term ratio (n−m)/(m+1)·q/(1−q), which decreases beyond
// the mode, and the geometric bound on what is left is added.
func logBinomialSurvival(n int, q float64, k int) float64 {
	switch {
	case k < 0:
		return 0
	case k >= n || q == 0:
		return math.Inf(-1)
	case q == 1:
		return 0
	}
	if v := mathext.RegIncBeta(float64(k+1), float64(n-k), q); v > 1e-280 {
		return math.Log(v)
	}
	lr := math.Log(q) - math.Log1p(-q)
	m := k + 1
	lt := distuv.Binomial{N: float64(n), P: q}.LogProb(float64(m))
	sum := lt
	for m < n {
		lratio := math.Log(float64(n-m)/float64(m+1)) + lr
		lt += lratio
		m++
		if lratio < 0 && lt < sum-40 {
			// Remaining terms from m on are at most lt·(1 + r + r² + …).
			return numeric.LogAddExp(sum, lt-math.Log(-math.Expm1(lratio)))
		}
		sum = numeric.LogAddExp(sum, lt)
	}
	return sum
}
