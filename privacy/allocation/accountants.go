package allocation

import (
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/privacy"
)

// tvOnly is the common part of the random-allocation accountants that certify
// only a total variation, given per epoch count (ChiSquareAccountant,
// BerryEsseenAccountant, which embed it): after E = ⌈steps/M⌉ epochs the run
// is (0, tv(E))-DP, hence (ε, tv(E))-DP for every ε ≥ 0.
type tvOnly struct {
	name   string                   // the bound's name, for the Epsilon error
	sigma  float64                  // σ
	rounds int                      // M
	tv     func(epochs int) float64 // the certified TV after E ≥ 1 epochs
}

// Sampler returns privacy.SamplerAllocation.
func (b tvOnly) Sampler() string { return privacy.SamplerAllocation }

// Adjacency returns privacy.AdjacencyZeroOut.
func (b tvOnly) Adjacency() string { return privacy.AdjacencyZeroOut }

// Sigma returns σ.
func (b tvOnly) Sigma() float64 { return b.sigma }

// Rounds returns M, the steps per epoch.
func (b tvOnly) Rounds() int { return b.rounds }

// TV returns tv(E) after steps ≥ 0 steps, E = ⌈steps/M⌉ (0 steps give 0).
func (b tvOnly) TV(steps int) (float64, error) {
	if err := checkSteps(steps); err != nil {
		return 0, err
	}
	e := privacy.EpochsOf(steps, b.rounds)
	if e == 0 {
		return 0, nil
	}
	return b.tv(e), nil
}

// Delta returns TV(steps) for every eps ≥ 0.
func (b tvOnly) Delta(steps int, eps float64) (float64, error) {
	if err := checkEps(eps); err != nil {
		return 0, err
	}
	return b.TV(steps)
}

// Epsilon returns 0 when TV(steps) ≤ delta ((0, tv)-DP implies (0, δ)-DP);
// otherwise no ε reaches delta and the error wraps privacy.ErrUnreachable.
func (b tvOnly) Epsilon(steps int, delta float64) (float64, error) {
	if err := checkProb("delta", delta); err != nil {
		return 0, err
	}
	tv, err := b.TV(steps)
	if err != nil {
		return 0, err
	}
	if tv <= delta {
		return 0, nil
	}
	return 0, fmt.Errorf("allocation: %s certifies only a total variation (δ ≥ TV = %.6g), and delta = %g is below it; use accountant rdp or exact for (ε, δ) with a smaller δ: %w",
		b.name, tv, delta, privacy.ErrUnreachable)
}

// ChiSquareAccountant is the certified chi-square accountant of random
// allocation (Ertan & van Dijk 2026, Prop. 3.1): after E = ⌈steps/M⌉ epochs the run is
// (0, U(c_E))-DP, U(c_E) = ChiSquareTV(σ, M, E), hence (ε, U(c_E))-DP for
// every ε ≥ 0. It is a total-variation statement only: TV and Delta (for
// every eps ≥ 0) return U(c_E) (0 steps give 0); Epsilon returns 0 if
// U(c_E) ≤ delta and otherwise an error wrapping privacy.ErrUnreachable.
// Immutable; safe for concurrent use.
type ChiSquareAccountant struct {
	tvOnly // U(c_E), c_E from ln(1 + b/M)
}

// NewChiSquareAccountant returns the chi-square accountant for noise
// multiplier σ > 0 and M = rounds ≥ 1 rounds (steps) per epoch.
func NewChiSquareAccountant(sigma float64, rounds int) (*ChiSquareAccountant, error) {
	if err := checkSigmaRounds(sigma, rounds); err != nil {
		return nil, fmt.Errorf("allocation: NewChiSquareAccountant: %w", err)
	}
	logStep := chisqLogStep(sigma, rounds) // ln(1 + b/M)
	return &ChiSquareAccountant{tvOnly{
		name: "chi-square", sigma: sigma, rounds: rounds,
		tv: func(e int) float64 { return chisqU(chisqC(logStep, e)) },
	}}, nil
}

var _ privacy.Accountant = (*ChiSquareAccountant)(nil)

// Name returns "chisq".
func (a *ChiSquareAccountant) Name() string { return "chisq" }

// BerryEsseenAccountant is van Dijk & Ertan's Theorem 4.1 as an accountant
// (as reconstructed in BerryEsseenDelta1; a loose comparison, 10–20× above
// the exact TV): after E epochs the run is (0, δ_E)-DP with
// δ_E = BerryEsseenDelta(σ, M, E, ρ) = 1 − (1 − δ₁)^E. TV and Delta (for
// every eps ≥ 0) return δ_E (0 steps give 0); Epsilon returns 0 if δ_E ≤ delta
// and otherwise an error wrapping privacy.ErrUnreachable. Immutable; safe for
// concurrent use.
type BerryEsseenAccountant struct {
	tvOnly // δ_E from δ₁
	rho    Rho
}

// NewBerryEsseenAccountant returns the Berry–Esseen accountant for σ > 0,
// M = rounds per epoch and a third-moment factor. Outside the theorem's
// regime (M ≥ 3, σ ≥ √(3/ln M)) the error wraps privacy.ErrOutOfRegime.
func NewBerryEsseenAccountant(sigma float64, rounds int, rho Rho) (*BerryEsseenAccountant, error) {
	d1, err := BerryEsseenDelta1(sigma, rounds, rho)
	if err != nil {
		return nil, fmt.Errorf("allocation: NewBerryEsseenAccountant: %w", err)
	}
	return &BerryEsseenAccountant{rho: rho, tvOnly: tvOnly{
		name: "Berry–Esseen", sigma: sigma, rounds: rounds,
		tv: func(e int) float64 { return beCompose(d1, e) },
	}}, nil
}

var _ privacy.Accountant = (*BerryEsseenAccountant)(nil)

// Name returns "berry-esseen".
func (a *BerryEsseenAccountant) Name() string { return "berry-esseen" }

// Rho returns the third-moment factor.
func (a *BerryEsseenAccountant) Rho() Rho { return a.rho }

// RDPAccountant is the Rényi-DP accountant of random allocation
// (see RDP): the per-epoch curve RDP(σ, M, orders) (the max of
// the exact remove direction and a proven bound on the add direction) is
// computed once at construction (≈ 30 ms for orders up to 256); E epochs
// give E times it, converted with privacy.RDPToEpsilon / RDPToDelta.
// Immutable; safe for concurrent use.
type RDPAccountant struct {
	sigma  float64
	rounds int
	orders []float64
	rdp    []float64 // per epoch
}

// NewRDPAccountant returns the RDP accountant for σ > 0, M = rounds ≥ 1 per
// epoch and integer orders in [2, RDPMaxOrder]; nil or empty orders select
// DefaultRDPOrders() (2…64, 72, …, 256).
func NewRDPAccountant(sigma float64, rounds int, orders []float64) (*RDPAccountant, error) {
	if len(orders) == 0 {
		orders = DefaultRDPOrders()
	} else {
		orders = append([]float64(nil), orders...)
	}
	r, err := RDP(sigma, rounds, orders)
	if err != nil {
		return nil, fmt.Errorf("allocation: NewRDPAccountant: %w", err)
	}
	return &RDPAccountant{sigma: sigma, rounds: rounds, orders: orders, rdp: r}, nil
}

var _ privacy.Accountant = (*RDPAccountant)(nil)

// Name returns "rdp".
func (a *RDPAccountant) Name() string { return "rdp" }

// Sampler returns privacy.SamplerAllocation.
func (a *RDPAccountant) Sampler() string { return privacy.SamplerAllocation }

// Adjacency returns privacy.AdjacencyZeroOut.
func (a *RDPAccountant) Adjacency() string { return privacy.AdjacencyZeroOut }

// Sigma returns σ.
func (a *RDPAccountant) Sigma() float64 { return a.sigma }

// Rounds returns M.
func (a *RDPAccountant) Rounds() int { return a.rounds }

// Orders returns a copy of the Rényi orders.
func (a *RDPAccountant) Orders() []float64 { return append([]float64(nil), a.orders...) }

// RDP returns the curve after steps steps: E·(per-epoch curve), E = ⌈steps/M⌉.
func (a *RDPAccountant) RDP(steps int) ([]float64, error) {
	if err := checkSteps(steps); err != nil {
		return nil, err
	}
	return privacy.ComposeRDP(a.rdp, privacy.EpochsOf(steps, a.rounds)), nil
}

// Epsilon returns the smallest ε over the orders with (ε, delta)-DP after
// steps steps (improved conversion, privacy.RDPToEpsilon). If every order
// overflows (σ tiny) the error wraps privacy.ErrUnreachable.
func (a *RDPAccountant) Epsilon(steps int, delta float64) (float64, error) {
	eps, _, err := a.EpsilonOrder(steps, delta)
	return eps, err
}

// EpsilonOrder is Epsilon and the optimal order; an order at the end of the
// grid means more orders could give a smaller ε.
func (a *RDPAccountant) EpsilonOrder(steps int, delta float64) (eps, order float64, err error) {
	if err := checkProb("delta", delta); err != nil {
		return 0, 0, err
	}
	r, err := a.RDP(steps)
	if err != nil {
		return 0, 0, err
	}
	eps, order, err = privacy.RDPToEpsilon(a.orders, r, delta)
	if err != nil {
		return 0, 0, err
	}
	if math.IsInf(eps, 1) {
		return 0, 0, fmt.Errorf("allocation: RDP at sigma = %g overflows at every order: no finite epsilon for delta = %g: %w",
			a.sigma, delta, privacy.ErrUnreachable)
	}
	return eps, order, nil
}

// Delta returns δ at eps after steps steps (privacy.RDPToDelta, capped at 1).
func (a *RDPAccountant) Delta(steps int, eps float64) (float64, error) {
	if err := checkEps(eps); err != nil {
		return 0, err
	}
	r, err := a.RDP(steps)
	if err != nil {
		return 0, err
	}
	d, _, err := privacy.RDPToDelta(a.orders, r, eps)
	return d, err
}
