package ageaware

import (
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/privacy"
	pa "github.com/dpsgd/dpsgd/privacy/ageaware"
)

// NoiseMode is how clients set their Laplace noise for a target ε̄.
type NoiseMode int

const (
	// NoiseConstant: every client uses the same ε_c whatever the age of its
	// data, Lin et al.'s "constant noise" (Section IV, schemes 1, 3, 5): the
	// largest common ε_c whose age-dependent level max_i ε(aᵢ, ε_c) is ε̄,
	// that is eq. 4's ε_c of the client whose Δᵢ(aᵢ) is largest. When some
	// client's data are fresh (Δ = 1) it is ε_c = ε̄, classical DP.
	NoiseConstant NoiseMode = iota
	// NoiseAdaptive: each client uses eq. 4's ε_{c,i} for its own Δᵢ(aᵢ)
	// (schemes 2, 4, 6), so every client's release is exactly ε̄-age-dependent
	// DP (or noise-free when Δᵢ(aᵢ) = 0).
	NoiseAdaptive
)

func (n NoiseMode) String() string {
	switch n {
	case NoiseConstant:
		return "constant"
	case NoiseAdaptive:
		return "adaptive"
	}
	return fmt.Sprintf("NoiseMode(%d)", int(n))
}

// Schedule holds each client's collection time t_{c,i} ∈ {0, …, t_agg}; its
// data have age aᵢ = t_agg − t_{c,i} at aggregation.
type Schedule []int

// Ages returns the ages t_agg − t_{c,i}.
func (s Schedule) Ages(aggTime int) []int {
	out := make([]int, len(s))
	for i, t := range s {
		out[i] = aggTime - t
	}
	return out
}

func (p *Problem) checkSchedule(s Schedule) error {
	if len(s) != p.m {
		return fmt.Errorf("ageaware: schedule has %d collection times, want %d (one per client): %w", len(s), p.m, privacy.ErrInvalidArgument)
	}
	for i, t := range s {
		if t < 0 || t > p.T {
			return fmt.Errorf("ageaware: client %d: collection time %d, want t_c in [0, t_agg = %d] (age %d < 0 or > t_agg): %w", i, t, p.T, p.T-t, privacy.ErrInvalidArgument)
		}
	}
	return nil
}

// level holds eq. 4's ε_c of every client at every age for one ε̄.
type level struct {
	epsBar float64
	epsC   [][]float64 // [client][age], +Inf where Δ = 0
}

func (p *Problem) level(epsBar float64) (*level, error) {
	if math.IsNaN(epsBar) || math.IsInf(epsBar, 0) || epsBar <= 0 {
		return nil, fmt.Errorf("ageaware: ε̄ = %v, want a target ε̄ in (0, +Inf): %w", epsBar, privacy.ErrInvalidArgument)
	}
	lv := &level{epsBar: epsBar, epsC: make([][]float64, p.m)}
	for i, c := range p.clients {
		lv.epsC[i] = make([]float64, p.T+1)
		for a, d := range c.delta {
			e, _, err := pa.AdaptiveEpsC(d, epsBar)
			if err != nil {
				return nil, err
			}
			lv.epsC[i][a] = e
		}
	}
	return lv, nil
}

// scales writes each client's ε_c and Laplace scale η = sᵢ/ε_c for the ages
// under mode.
func (p *Problem) scales(lv *level, mode NoiseMode, ages []int, epsC, eta []float64) {
	common := math.Inf(1)
	if mode == NoiseConstant {
		for i, a := range ages {
			common = math.Min(common, lv.epsC[i][a])
		}
	}
	for i, a := range ages {
		e := common
		if mode == NoiseAdaptive {
			e = lv.epsC[i][a]
		}
		epsC[i] = e
		eta[i] = 0
		if !math.IsInf(e, 1) {
			eta[i] = p.clients[i].sens / e
		}
	}
}

// noisePower is the variance of the aggregate's (unprojected) noise,
// Σ pᵢ²·2ηᵢ².
func (p *Problem) noisePower(eta []float64) float64 {
	s := 0.0
	for i, e := range eta {
		s += p.weights[i] * p.weights[i] * 2 * e * e
	}
	return s
}

// Noise is the noise of a schedule under a target ε̄.
type Noise struct {
	EpsC    []float64 // ε_{c,i}; +Inf: no noise needed (Δᵢ(aᵢ) = 0)
	Scale   []float64 // Laplace scales ηᵢ = sᵢ/ε_{c,i}
	Epsilon []float64 // age-dependent levels ε(aᵢ, ε_{c,i}) ≤ ε̄ (Proposition 1)
	// Power is the variance of the aggregate noise Σ pᵢ Nᵢ before
	// projection, Σ pᵢ²·2ηᵢ² (Fig. 3(b)'s "noise power").
	Power float64
	// MeanEpsC is Lin et al.'s ε_c = (1/m)Σ ε_{c,i} of Fig. 3(b); +Inf when
	// some client needs no noise.
	MeanEpsC float64
}

// Noise returns the ε_{c,i}, Laplace scales and privacy levels of schedule s
// for target epsBar under mode. ε̄ ≤ 0 or not finite, or a schedule with a
// collection time outside [0, t_agg] (an age < 0), is an error.
func (p *Problem) Noise(epsBar float64, mode NoiseMode, s Schedule) (*Noise, error) {
	if err := p.checkSchedule(s); err != nil {
		return nil, err
	}
	if mode != NoiseConstant && mode != NoiseAdaptive {
		return nil, fmt.Errorf("ageaware: noise mode %d, want NoiseConstant or NoiseAdaptive: %w", int(mode), privacy.ErrInvalidArgument)
	}
	lv, err := p.level(epsBar)
	if err != nil {
		return nil, err
	}
	ages := s.Ages(p.T)
	n := &Noise{EpsC: make([]float64, p.m), Scale: make([]float64, p.m), Epsilon: make([]float64, p.m)}
	p.scales(lv, mode, ages, n.EpsC, n.Scale)
	for i, a := range ages {
		n.Epsilon[i], err = pa.Epsilon(p.clients[i].delta[a], n.EpsC[i])
		if err != nil {
			return nil, err
		}
		n.MeanEpsC += n.EpsC[i] / float64(p.m)
	}
	n.Power = p.noisePower(n.Scale)
	return n, nil
}

// prepare validates a query and returns the ages and Laplace scales.
func (p *Problem) prepare(epsBar float64, mode NoiseMode, s Schedule) (ages []int, eta []float64, err error) {
	n, err := p.Noise(epsBar, mode, s)
	if err != nil {
		return nil, nil, err
	}
	return s.Ages(p.T), n.Scale, nil
}

// ExpectedLoss returns the exact expected loss difference (2a) of schedule s
// under target epsBar and mode: E[L̂(W̃, D^{agg}) − L̂(W^{agg}, D^{agg})] =
// E[(W̃ − W^{agg})²] for the squared loss, W̃ = Σ pᵢ clip(Wᵢ + Nᵢ) and W^{agg}
// the mean of the same records at t_agg. It is computed from the exact laws of
// the collected means on the lattice and the closed-form moments of the
// projected Laplace noise (no simulation), and is the oracle the Monte Carlo
// estimates are tested against. Errors as for Noise.
func (p *Problem) ExpectedLoss(epsBar float64, mode NoiseMode, s Schedule) (float64, error) {
	ages, eta, err := p.prepare(epsBar, mode, s)
	if err != nil {
		return 0, err
	}
	return p.expectedLoss(ages, eta), nil
}

// Bound returns Theorem 1's upper bound (3) on the expected loss difference of
// schedule s under target epsBar and mode, with its terms. How each term is
// evaluated (the paper leaves ψ, φ and the mutual informations to the user) is
// described in the package documentation, "Evaluating Theorem 1". Errors as
// for Noise.
func (p *Problem) Bound(epsBar float64, mode NoiseMode, s Schedule) (*BoundTerms, error) {
	ages, eta, err := p.prepare(epsBar, mode, s)
	if err != nil {
		return nil, err
	}
	t := &BoundTerms{Aged: make([]float64, p.m), Fresh: make([]float64, p.m)}
	p.bound(ages, eta, t)
	return t, nil
}
