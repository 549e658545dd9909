package allocation

import (
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/internal/numeric"
	"github.com/dpsgd/dpsgd/privacy"
)

// chisqMaxEpochs caps ChiSquareEpochs (2⁵³, exact in float64).
const chisqMaxEpochs = 1 << 53

// chisqLogStep returns ln(1 + b/M), the per-epoch ln(1 + χ²(Q_M‖P_M)),
// b = e^{1/σ²} − 1 (Ertan & van Dijk 2026, Prop. 3.1), without overflow:
// ln(1 + e^{ln b − ln M}).
func chisqLogStep(sigma float64, rounds int) float64 {
	return numeric.Softplus(numeric.LogExpm1(1/(sigma*sigma)) - math.Log(float64(rounds)))
}

// chisqC returns c_E = (1 + b/M)^E − 1 = expm1(E·ln(1 + b/M)), saturated at
// math.MaxFloat64.
func chisqC(logStep float64, epochs int) float64 {
	return math.Min(math.Expm1(float64(epochs)*logStep), math.MaxFloat64)
}

// chisqU returns U(c), the total-variation bound given χ² ≤ c
// (Sason–Verdú; Ertan & van Dijk 2026): ½√c for c ≤ 1, c/(1+c) above.
func chisqU(c float64) float64 {
	if c <= 1 {
		return 0.5 * math.Sqrt(c)
	}
	return 1 / (1 + 1/c)
}

// chisqTarget returns c_λ, the largest χ² with U(c) ≤ λ (Ertan & van
// Dijk 2026, Cor. 3.4): 4λ² for λ ≤ ½, λ/(1−λ) above.
func chisqTarget(tv float64) float64 {
	if tv <= 0.5 {
		return 4 * tv * tv
	}
	return tv / (1 - tv)
}

// ChiSquare returns c_E = χ²(Q_M^{⊗E}‖P_M^{⊗E}) of E epochs of random
// allocation with M = rounds rounds at noise multiplier σ
// (Ertan & van Dijk 2026, Prop. 3.1):
//
//	c_E = (1 + (e^{1/σ²} − 1)/M)^E − 1,
//
// computed as expm1(E·log1p(b/M)), saturated at math.MaxFloat64 where the
// true value overflows.
func ChiSquare(sigma float64, rounds, epochs int) (float64, error) {
	if err := checkSigmaRoundsEpochs(sigma, rounds, epochs); err != nil {
		return 0, err
	}
	return chisqC(chisqLogStep(sigma, rounds), epochs), nil
}

// ChiSquareTV returns U(c_E), a certified bound on the total variation
// between the E-epoch pair, valid at every finite M and E
// (Ertan & van Dijk 2026): E epochs are (0, U)-DP, f ≥ f_{0,U}, and no
// membership-inference attack has accuracy above ½ + ½U. It is about
// √(π/2) ≈ 1.2533× the exact TV as E/M → 0.
func ChiSquareTV(sigma float64, rounds, epochs int) (float64, error) {
	c, err := ChiSquare(sigma, rounds, epochs)
	if err != nil {
		return 0, err
	}
	return chisqU(c), nil
}

// ChiSquareSigma returns the smallest σ with ChiSquareTV(σ, M, E) ≤ tv, by
// the closed form of Cor. 3.4 (Ertan & van Dijk 2026):
//
//	σ = [ln(1 + M((1 + c_λ)^{1/E} − 1))]^{−1/2},  c_λ = 4λ² (λ ≤ ½) or λ/(1−λ),
//
// then nudged up by a few ulps if rounding left ChiSquareTV above tv.
func ChiSquareSigma(tv float64, rounds, epochs int) (float64, error) {
	if err := checkSigmaSolve(tv, rounds, epochs); err != nil {
		return 0, err
	}
	g := math.Expm1(math.Log1p(chisqTarget(tv)) / float64(epochs)) // per-epoch χ² budget
	sigma := 1 / math.Sqrt(math.Log1p(float64(rounds)*g))
	for i := 0; chisqU(chisqC(chisqLogStep(sigma, rounds), epochs)) > tv; i++ {
		if i < 64 {
			sigma = math.Nextafter(sigma, math.Inf(1))
		} else {
			sigma *= 1 + 1e-12
		}
	}
	return sigma, nil
}

// ChiSquareRounds returns the smallest M with ChiSquareTV(σ, M, E) ≤ tv
// (Ertan & van Dijk 2026): M ≥ b/((1 + c_λ)^{1/E} − 1). A target that needs
// more than 2⁵³ rounds gives an error wrapping privacy.ErrUnreachable. At
// σ = 1, tv = 0.01, E = 1 it is 4,296 (the exact TV needs 2,730).
func ChiSquareRounds(sigma, tv float64, epochs int) (int, error) {
	if err := checkRoundsSolve(sigma, "tv", tv, epochs); err != nil {
		return 0, err
	}
	g := math.Expm1(math.Log1p(chisqTarget(tv)) / float64(epochs))
	lm := numeric.LogExpm1(1/(sigma*sigma)) - math.Log(g) // ln(b/g)
	if lm > 53*math.Ln2 {
		return 0, fmt.Errorf("allocation: chi-square TV ≤ %g at sigma = %g, epochs = %d needs M ≈ e^%.4g > 2^53 rounds: %w",
			tv, sigma, epochs, lm, privacy.ErrUnreachable)
	}
	ok := func(m int) bool { return chisqU(chisqC(chisqLogStep(sigma, m), epochs)) <= tv }
	m := max(1, int(math.Ceil(math.Exp(lm))))
	for m > 1 && ok(m-1) {
		m--
	}
	for !ok(m) {
		m++
	}
	return m, nil
}

// ChiSquareEpochs returns the largest E with ChiSquareTV(σ, M, E) ≤ tv
// (Ertan & van Dijk 2026): E·ln(1 + b/M) ≤ ln(1 + c_λ), capped at 2⁵³. If
// even one epoch exceeds tv the error wraps privacy.ErrUnreachable.
func ChiSquareEpochs(sigma, tv float64, rounds int) (int, error) {
	if err := checkSigma(sigma); err != nil {
		return 0, err
	}
	if err := checkProb("tv", tv); err != nil {
		return 0, err
	}
	if err := checkRounds(rounds); err != nil {
		return 0, err
	}
	ls := chisqLogStep(sigma, rounds)
	ok := func(e int) bool { return chisqU(chisqC(ls, e)) <= tv }
	if !ok(1) {
		return 0, fmt.Errorf("allocation: one epoch at sigma = %g, M = %d already has chi-square TV bound %.4g > tv = %g: %w",
			sigma, rounds, chisqU(chisqC(ls, 1)), tv, privacy.ErrUnreachable)
	}
	ef := math.Log1p(chisqTarget(tv)) / ls
	if !(ef < chisqMaxEpochs) {
		return chisqMaxEpochs, nil
	}
	e := max(1, int(ef))
	for e > 1 && !ok(e) {
		e--
	}
	for e < chisqMaxEpochs && ok(e+1) {
		e++
	}
	return e, nil
}

// ChiSquareTradeOff returns a lower bound on the trade-off function T(α) of
// a pair with χ²(Q‖P) ≤ c (Ertan & van Dijk 2026,
// Prop. B.2):
//
//	T(α) ≥ max{0, 1 − α − U(c), 1 − α − √(c·α(1−α))}.
//
// The second term is the TV bound; the third holds for every α ∈ [0, 1] by
// Cauchy–Schwarz: for a test φ with E_P φ = α, (1 − β) − α = E_P[(L−1)(φ−α)]
// ≤ √χ²·√Var_P φ ≤ √(c·α(1−α)), and is tighter for small α (the paper states
// it for α ≤ ½). Pass c = ChiSquare(σ, M, E) for the E-epoch curve.
// Invalid input (c < 0 or NaN, α outside [0, 1]) gives NaN.
func ChiSquareTradeOff(c, alpha float64) float64 {
	if !(c >= 0) || !(alpha >= 0 && alpha <= 1) {
		return math.NaN()
	}
	f := 1 - alpha - chisqU(c)
	if g := 1 - alpha - math.Sqrt(c*alpha*(1-alpha)); g > f {
		f = g
	}
	return math.Max(0, f)
}
