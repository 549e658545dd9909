package ageaware

import (
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/privacy"
)

func checkDelta(delta float64) error {
	if math.IsNaN(delta) || delta < 0 || delta > 1 {
		return fmt.Errorf("ageaware: Δ = %v, want a total variation in [0, 1]: %w", delta, privacy.ErrInvalidArgument)
	}
	return nil
}

// Epsilon returns the age-dependent privacy level of an ε_c-DP mechanism
// applied to data whose Δ(t) is delta (Proposition 1 of Lin, Lin, Hsu & Huang,
// [12, Th. 1]):
//
//	ε(t, ε_c) = ln(1 + Δ(t)·(e^{ε_c} − 1)),
//
// evaluated with log1p and expm1 (and in log form for ε_c > 700, where e^{ε_c}
// overflows). ε ≤ ε_c, with equality at Δ = 1. epsC = +Inf (no noise) gives
// +Inf, or 0 when Δ = 0 (the released data say nothing about today's).
// delta outside [0, 1] or epsC < 0 or NaN is an error.
func Epsilon(delta, epsC float64) (float64, error) {
	if err := checkDelta(delta); err != nil {
		return 0, err
	}
	if math.IsNaN(epsC) || epsC < 0 {
		return 0, fmt.Errorf("ageaware: ε_c = %v, want ε_c in [0, +Inf]: %w", epsC, privacy.ErrInvalidArgument)
	}
	switch {
	case delta == 0:
		return 0, nil
	case math.IsInf(epsC, 1):
		return math.Inf(1), nil
	case epsC <= 700:
		return math.Log1p(delta * math.Expm1(epsC)), nil
	}
	// ln(Δe^{ε_c} + 1 − Δ) = ε_c + ln Δ + ln(1 + (1−Δ)e^{−ε_c}/Δ).
	return epsC + math.Log(delta) + math.Log1p((1-delta)*math.Exp(-epsC)/delta), nil
}

// AdaptiveEpsC returns the classical privacy level ε_c that a client with
// data of age t, Δ(t) = delta, may use so that its release is ε̄-age-dependent
// DP: the inverse of Proposition 1 in ε_c, Lin et al.'s
// eq. 4,
//
//	ε_c = ln((e^{ε̄} − 1)/Δ(t) + 1),
//
// evaluated without overflow. ε_c ≥ ε̄, with equality at Δ = 1. When
// delta = 0 the data carry no information about today's records: noiseFree is
// true and ε_c = +Inf (no noise is needed; Laplace scale 0), never a division
// by zero. epsBar must be finite and > 0 and delta in [0, 1].
func AdaptiveEpsC(delta, epsBar float64) (epsC float64, noiseFree bool, err error) {
	if err := checkDelta(delta); err != nil {
		return 0, false, err
	}
	if math.IsNaN(epsBar) || math.IsInf(epsBar, 0) || epsBar <= 0 {
		return 0, false, fmt.Errorf("ageaware: ε̄ = %v, want a target ε̄ in (0, +Inf): %w", epsBar, privacy.ErrInvalidArgument)
	}
	if delta == 0 {
		return math.Inf(1), true, nil
	}
	if epsBar <= 1 {
		// (e^{ε̄} − 1)/Δ overflows only for subnormal Δ; then the log
		// form below is used.
		if r := math.Expm1(epsBar) / delta; !math.IsInf(r, 1) {
			return math.Log1p(r), false, nil
		}
	}
	// ln(1 + (e^{ε̄} − 1)/Δ) = ε̄ − ln Δ + ln(1 − (1 − Δ)e^{−ε̄}).
	return epsBar - math.Log(delta) + math.Log1p(-(1-delta)*math.Exp(-epsBar)), false, nil
}

// LaplaceScale returns the scale η = s/ε_c of the Laplace mechanism, density
// (1/(2η))·e^{−|x|/η} per coordinate, that makes a function of ℓ1-sensitivity
// s ε_c-DP (Lin et al., Section III-B). ε_c = +Inf gives 0
// (no noise). s must be finite and ≥ 0, ε_c > 0.
func LaplaceScale(sensitivity, epsC float64) (float64, error) {
	if math.IsNaN(sensitivity) || math.IsInf(sensitivity, 0) || sensitivity < 0 {
		return 0, fmt.Errorf("ageaware: sensitivity = %v, want a finite ℓ1-sensitivity >= 0: %w", sensitivity, privacy.ErrInvalidArgument)
	}
	if math.IsNaN(epsC) || epsC <= 0 {
		return 0, fmt.Errorf("ageaware: ε_c = %v, want ε_c in (0, +Inf]: %w", epsC, privacy.ErrInvalidArgument)
	}
	if math.IsInf(epsC, 1) {
		return 0, nil
	}
	return sensitivity / epsC, nil
}

// TV returns the total variation distance ½Σ|p − q| between two laws of the
// same length. It panics if the lengths differ.
func TV(p, q []float64) float64 {
	if len(p) != len(q) {
		panic(fmt.Sprintf("ageaware: TV of laws of lengths %d and %d", len(p), len(q)))
	}
	s := 0.0
	for i := range p {
		s += math.Abs(p[i] - q[i])
	}
	return s / 2
}
