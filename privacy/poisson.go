package privacy

import (
	"fmt"
	"math"
)

// PoissonRDP is the RDP accountant of DP-SGD with Poisson sampling (each
// example in each step independently with probability q) and Gaussian noise
// of multiplier σ (Mironov, Talwar & Zhang 2019). The per-step RDP curve is computed
// once at construction; Epsilon and Delta then cost one pass over the orders.
// A PoissonRDP is immutable and safe for concurrent use.
type PoissonRDP struct {
	q, sigma float64
	orders   []float64
	rdp      []float64 // per-step ε_RDP(α)
	// Per-order constants of the improved conversion:
	//   ε_α = T·rdp + cEps − ln δ·invAm1,   ln δ_α = (α−1)(T·rdp − ε + log1mInv) − logA.
	invAm1, cEps, log1mInv, logA []float64
}

// NewPoissonRDP returns the Poisson RDP accountant for sampling rate q in
// (0, 1] and noise multiplier σ > 0, over the given Rényi orders (each in
// (1, MaxOrder]); nil or empty orders select DefaultOrders().
func NewPoissonRDP(q, sigma float64, orders []float64) (*PoissonRDP, error) {
	if len(orders) == 0 {
		orders = DefaultOrders()
	} else {
		orders = append([]float64(nil), orders...)
	}
	rdp, err := PoissonGaussianRDP(q, sigma, orders)
	if err != nil {
		return nil, fmt.Errorf("privacy: NewPoissonRDP: %w", err)
	}
	n := len(orders)
	p := &PoissonRDP{
		q: q, sigma: sigma, orders: orders, rdp: rdp,
		invAm1: make([]float64, n), cEps: make([]float64, n),
		log1mInv: make([]float64, n), logA: make([]float64, n),
	}
	for i, a := range orders {
		p.invAm1[i] = 1 / (a - 1)
		p.log1mInv[i] = math.Log1p(-1 / a)
		p.logA[i] = math.Log(a)
		p.cEps[i] = p.log1mInv[i] - p.logA[i]/(a-1)
	}
	return p, nil
}

var _ Accountant = (*PoissonRDP)(nil)

// Name returns "rdp".
func (p *PoissonRDP) Name() string { return "rdp" }

// Sampler returns "poisson".
func (p *PoissonRDP) Sampler() string { return SamplerPoisson }

// Adjacency returns AdjacencyAddRemove.
func (p *PoissonRDP) Adjacency() string { return AdjacencyAddRemove }

// SamplingRate returns q.
func (p *PoissonRDP) SamplingRate() float64 { return p.q }

// Sigma returns the noise multiplier σ.
func (p *PoissonRDP) Sigma() float64 { return p.sigma }

// Orders returns a copy of the Rényi orders.
func (p *PoissonRDP) Orders() []float64 { return append([]float64(nil), p.orders...) }

// RDP returns the RDP curve after steps steps, T·ε_RDP(α) at each order
// (composition adds RDP; Mironov 2017 Prop. 1).
func (p *PoissonRDP) RDP(steps int) ([]float64, error) {
	if err := checkSteps(steps); err != nil {
		return nil, err
	}
	return ComposeRDP(p.rdp, steps), nil
}

// Epsilon returns ε such that steps steps are (ε, delta)-DP, by the improved
// conversion of RDPToEpsilon.
func (p *PoissonRDP) Epsilon(steps int, delta float64) (float64, error) {
	eps, _, err := p.EpsilonOrder(steps, delta)
	return eps, err
}

// EpsilonOrder is Epsilon and the optimal Rényi order. An optimal order at
// either end of the grid means a wider grid could give a smaller ε.
func (p *PoissonRDP) EpsilonOrder(steps int, delta float64) (eps, order float64, err error) {
	if err := checkSteps(steps); err != nil {
		return 0, 0, err
	}
	if err := checkDelta("delta", delta); err != nil {
		return 0, 0, err
	}
	if steps == 0 {
		return 0, p.orders[0], nil
	}
	t := float64(steps)
	klMax := -math.Log1p(-delta * delta)
	ld := math.Log(delta)
	eps, order = math.Inf(1), math.NaN()
	for i, r := range p.rdp {
		r *= t
		e := r + p.cEps[i] - ld*p.invAm1[i]
		if r < klMax {
			e = 0
		}
		if e < eps {
			eps, order = e, p.orders[i]
		}
	}
	return math.Max(eps, 0), order, nil
}

// EpsilonClassic is ε by the classic conversion (RDPToEpsilonClassic), for
// comparison; the accountant itself uses the improved one.
func (p *PoissonRDP) EpsilonClassic(steps int, delta float64) (eps, order float64, err error) {
	if err := checkSteps(steps); err != nil {
		return 0, 0, err
	}
	return RDPToEpsilonClassic(p.orders, ComposeRDP(p.rdp, steps), delta)
}

// Delta returns δ such that steps steps are (eps, δ)-DP (RDPToDelta).
func (p *PoissonRDP) Delta(steps int, eps float64) (float64, error) {
	d, _, err := p.DeltaOrder(steps, eps)
	return d, err
}

// DeltaOrder is Delta and the optimal Rényi order.
func (p *PoissonRDP) DeltaOrder(steps int, eps float64) (delta, order float64, err error) {
	if err := checkSteps(steps); err != nil {
		return 0, 0, err
	}
	if err := checkEps(eps); err != nil {
		return 0, 0, err
	}
	if steps == 0 {
		return 0, p.orders[0], nil
	}
	ld, order := p.logDelta(float64(steps), eps)
	return math.Min(1, math.Exp(ld)), order, nil
}

// logDelta returns ln δ(ε) after t steps and its order (see RDPToDelta).
// The KL bound ½ ln(1 − e^{−T·ε_RDP(α)}) is evaluated once, at the order of
// smallest RDP, where it is smallest.
func (p *PoissonRDP) logDelta(t, eps float64) (float64, float64) {
	best, order := math.Inf(1), math.NaN()
	rmin, imin := math.Inf(1), -1
	for i, r := range p.rdp {
		r *= t
		if r < rmin {
			rmin, imin = r, i
		}
		if b := (p.orders[i]-1)*(r-eps+p.log1mInv[i]) - p.logA[i]; b < best {
			best, order = b, p.orders[i]
		}
	}
	if imin >= 0 {
		if kl := 0.5 * math.Log1p(-math.Exp(-rmin)); kl < best {
			best, order = kl, p.orders[imin]
		}
	}
	return best, order
}
