package allocation

import (
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/internal/numeric"
	"github.com/dpsgd/dpsgd/privacy"
)

// BerryEsseenB is the Berry–Esseen constant used by van Dijk & Ertan's Theorem 4.1:
// Shevtsova's 2011 i.i.d. upper bound 0.4748. The best constant is known to
// lie in [0.4097, 0.4748] (Esseen's lower bound, Shevtsova's upper bound;
// Ertan & van Dijk 2026).
const BerryEsseenB = 0.4748

// Rho selects the third-absolute-moment factor of the Berry–Esseen bound
// (see BerryEsseenDelta1).
type Rho int

const (
	// RhoSimplified bounds ρ = E|Y−1|³ by e^{3/σ²} + 4 (from
	// |Y−1|³ ≤ Y³ + 3Y + 1). It is the default and the factor that
	// reproduces van Dijk & Ertan's published numbers (M ≈ 1.14·10⁶ at σ = 1,
	// δ = 0.01; optimum σ ≈ 1.03).
	RhoSimplified Rho = iota
	// RhoExact uses the exact third absolute moment (beLogRho), allowed by
	// Ertan & van Dijk 2026 under the same conditions; it is 1.6–70× smaller
	// for σ ∈ [0.75, 2].
	RhoExact
)

// String returns "simplified" or "exact".
func (r Rho) String() string {
	switch r {
	case RhoSimplified:
		return "simplified"
	case RhoExact:
		return "exact"
	}
	return fmt.Sprintf("Rho(%d)", int(r))
}

// checkRho validates a Rho.
func checkRho(r Rho) error {
	if r != RhoSimplified && r != RhoExact {
		return fmt.Errorf("allocation: rho = %d out of range {RhoSimplified = 0, RhoExact = 1}: %w", int(r), privacy.ErrInvalidArgument)
	}
	return nil
}

// beMaxRounds is the largest M the solvers search (2⁵³, exact in float64).
const beMaxRounds = 1 << 53

// beSeriesT is the t = 1/σ below which ln ρ uses its power series.
const beSeriesT = 0.02

// beLogRho returns ln ρ, ρ = E|Y−1|³ for Y = e^{tX − t²/2}, X ~ N(0,1),
// t² = t2 (closed form derived here, checked by quadrature in the tests):
//
//	ρ = e^{3t²} − 3e^{t²} + 2 + 2[Φ(t/2) − 3Φ(−t/2) + 3e^{t²}Φ(−3t/2) − e^{3t²}Φ(−5t/2)].
//
// With Φ(x) = ½(1 + erf(x/√2)) and u = t/(2√2) this collapses to
//
//	ρ = e^{3t²} erf(5u) − 3 e^{t²} erf(3u) + 4 erf(u),
//
// evaluated as ln ρ = 3t² + ln(erf(5u) − 3e^{−2t²} erf(3u) + 4e^{−3t²} erf(u)),
// which cannot overflow for small σ and loses only ~1e-16/t² relative
// precision for large σ (ρ ~ 2√(2/π)·t³ while the terms are O(t)). Below
// t = 0.02 the double power series in t² of the same expression is used.
func beLogRho(t2 float64) float64 {
	t := math.Sqrt(t2)
	if t < beSeriesT {
		return beLogRhoSeries(t2)
	}
	u := t / (2 * math.Sqrt2)
	a := math.Erf(5*u) - 3*math.Exp(-2*t2)*math.Erf(3*u) + 4*math.Exp(-3*t2)*math.Erf(u)
	return 3*t2 + math.Log(a)
}

// beLogRhoSeries is beLogRho by the expansion
// ρ = (2/√π)·u·Σ_{m,n} c_{mn} t^{2m} u^{2n} (−1)ⁿ/(m! n! (2n+1)),
// c_{mn} = 3^m 5^{2n+1} − 3^{2n+2} + 4·[m = 0], u = t/(2√2), whose
// terms of total degree k = m+n shrink like (6t²)^k; k ≤ 12 is far below
// rounding for t < 0.02. The k = 0 coefficient vanishes, so the sum starts
// at k = 1 (leading term 2√(2/π) t³).
func beLogRhoSeries(t2 float64) float64 {
	u2 := t2 / 8
	sum := 0.0
	for k := 12; k >= 1; k-- { // smallest terms first
		for m := 0; m <= k; m++ {
			n := k - m
			c := math.Pow(3, float64(m))*math.Pow(5, float64(2*n+1)) - math.Pow(3, float64(2*n+2))
			if m == 0 {
				c += 4
			}
			lf, _ := math.Lgamma(float64(m + 1))
			ln, _ := math.Lgamma(float64(n + 1))
			term := c * math.Pow(t2, float64(m)) * math.Pow(u2, float64(n)) / (math.Exp(lf+ln) * float64(2*n+1))
			if n%2 == 1 {
				term = -term
			}
			sum += term
		}
	}
	// ρ = (2/√π)·u·sum with u = t/(2√2).
	return math.Log(2/math.SqrtPi) + 0.5*math.Log(t2/8) + math.Log(sum)
}

// beLogR returns ln R(σ) = ln(ρ/b^{3/2}), b = e^{1/σ²} − 1, with ρ exact
// (beLogRho) or simplified (e^{3/σ²} + 4) (RhoSimplified).
func beLogR(t2 float64, rho Rho) float64 {
	var lr float64
	if rho == RhoExact {
		lr = beLogRho(t2)
	} else {
		lr = numeric.LogAddExp(3*t2, math.Log(4))
	}
	return lr - 1.5*numeric.LogExpm1(t2)
}

// beDelta1 returns van Dijk & Ertan's one-epoch δ₁ (BerryEsseenDelta1) for
// t² = 1/σ², real M > 0 and ln R:
//
//	δ₁ = 2B·R/√M + [2Φ(θ/2) − 1],  θ = √(b/M),  2Φ(θ/2) − 1 = erf(θ/(2√2)),
//
// capped at 1. Both terms decrease in M.
func beDelta1(t2, m, logR float64) float64 {
	lm := math.Log(m)
	a := math.Exp(math.Log(2*BerryEsseenB) + logR - 0.5*lm)
	theta := math.Exp(0.5 * (numeric.LogExpm1(t2) - lm))
	d := a + math.Erf(theta/(2*math.Sqrt2))
	if !(d < 1) { // also catches NaN from overflow at tiny σ
		return 1
	}
	return d
}

// beCompose returns δ_E = 1 − (1 − δ₁)^E, the E-fold composition of
// f_{0,δ₁} (the pair is told apart iff some epoch
// "reveals"), computed as −expm1(E·log1p(−δ₁)) and capped at 1.
func beCompose(d1 float64, epochs int) float64 {
	if d1 >= 1 {
		return 1
	}
	return math.Min(1, -math.Expm1(float64(epochs)*math.Log1p(-d1)))
}

// beInRegime reports whether (σ, M) satisfies Theorem 4.1's conditions
// M ≥ 3 and σ ≥ √(3/ln M).
func beInRegime(sigma float64, rounds int) bool {
	return rounds >= 3 && sigma >= math.Sqrt(3/math.Log(float64(rounds)))
}

// beCheckRegime returns nil inside Theorem 4.1's regime and otherwise an
// error wrapping privacy.ErrOutOfRegime that names the violated condition.
func beCheckRegime(sigma float64, rounds int) error {
	const alt = "the chi-square and exact methods (accountant chisq / exact) have no such condition"
	if rounds < 3 {
		return fmt.Errorf("allocation: Berry–Esseen bound (van Dijk & Ertan, Thm 4.1) needs M ≥ 3: rounds = %d below 3; %s: %w",
			rounds, alt, privacy.ErrOutOfRegime)
	}
	if th := math.Sqrt(3 / math.Log(float64(rounds))); !(sigma >= th) {
		return fmt.Errorf("allocation: Berry–Esseen bound (van Dijk & Ertan, Thm 4.1) needs σ ≥ √(3/ln M): sigma = %.4g below sqrt(3/ln M) = %.4g for M = %d; %s: %w",
			sigma, th, rounds, alt, privacy.ErrOutOfRegime)
	}
	return nil
}

// BerryEsseenDelta1 returns δ₁, van Dijk & Ertan's Theorem 4.1 (Thm 3.1 of v3)
// for one epoch of M = rounds rounds at noise multiplier σ, as reconstructed
// here (checked against the paper's published numbers): one epoch satisfies
// f(α) ≥ 1 − α − δ₁, i.e. it is (0, δ₁)-DP (total variation ≤ δ₁), with
//
//	δ₁ = 2B·R(σ)/√M + [2Φ(θ/2) − 1],  θ = √((e^{1/σ²}−1)/M),  B = BerryEsseenB,
//	R(σ) = ρ/(e^{1/σ²}−1)^{3/2},  ρ = e^{3/σ²} + 4 (RhoSimplified) or E|Y−1|³ (RhoExact).
//
// The formula is RECONSTRUCTED (it reproduces the paper's three published
// numbers with no free parameter) and is 10–20× looser than the exact total
// variation: use it as a comparison curve, not as the accountant.
//
// Validity (Theorem 4.1's conditions): σ ≥ √(3/ln M) and M ≥ 3; outside, the error wraps
// privacy.ErrOutOfRegime and names the condition. The paper's v3 states a
// further "condition (2)" that must hold together with the bound; its text
// is unknown (perhaps M ≥ 8κ³), so it is not checked here:
// the result is only as good as the reconstruction.
func BerryEsseenDelta1(sigma float64, rounds int, rho Rho) (float64, error) {
	if err := beValidate(sigma, rounds, rho); err != nil {
		return 0, err
	}
	t2 := 1 / (sigma * sigma)
	return beDelta1(t2, float64(rounds), beLogR(t2, rho)), nil
}

// beValidate checks σ, M and ρ, then the regime.
func beValidate(sigma float64, rounds int, rho Rho) error {
	if err := checkSigmaRounds(sigma, rounds); err != nil {
		return err
	}
	if err := checkRho(rho); err != nil {
		return err
	}
	return beCheckRegime(sigma, rounds)
}

// BerryEsseenDelta returns δ_E = 1 − (1 − δ₁)^E ≤ E·δ₁ for E epochs, the
// E-fold composition of the one-epoch (0, δ₁) bound of BerryEsseenDelta1,
// computed as −expm1(E·log1p(−δ₁)) and capped at 1.
// Same validity conditions as BerryEsseenDelta1.
func BerryEsseenDelta(sigma float64, rounds, epochs int, rho Rho) (float64, error) {
	if err := checkEpochs(epochs); err != nil {
		return 0, err
	}
	d1, err := BerryEsseenDelta1(sigma, rounds, rho)
	if err != nil {
		return 0, err
	}
	return beCompose(d1, epochs), nil
}

// BerryEsseenRounds returns the smallest M with BerryEsseenDelta(σ, M, E) ≤
// delta inside Theorem 4.1's regime (M ≥ 3, σ ≥ √(3/ln M)), van Dijk &
// Ertan's "required rounds" (M ≈ 1.1401·10⁶ at σ = 1,
// δ = 0.01, E = 1 with RhoSimplified). δ_E decreases in M (both terms of
// δ₁ do), so the search doubles from the smallest M of the regime and then
// bisects. A σ whose regime starts above 2⁵³ rounds gives an error wrapping
// privacy.ErrOutOfRegime; a δ not reached by M = 2⁵³ one wrapping
// privacy.ErrUnreachable.
func BerryEsseenRounds(sigma, delta float64, epochs int, rho Rho) (int, error) {
	if err := checkRoundsSolve(sigma, "delta", delta, epochs); err != nil {
		return 0, err
	}
	if err := checkRho(rho); err != nil {
		return 0, err
	}
	t2 := 1 / (sigma * sigma)
	lo, err := beRegimeStart(sigma)
	if err != nil {
		return 0, err
	}
	logR := beLogR(t2, rho)
	ok := func(m int) bool { return beCompose(beDelta1(t2, float64(m), logR), epochs) <= delta }
	if ok(lo) {
		return lo, nil
	}
	okE := func(m int) (bool, error) { return ok(m), nil }
	// Invariant: !ok(lo), ok(hi).
	lo, hi, found, _ := numeric.Bracket(okE, lo, lo, func(_, h int) (int, bool) { return min(2*h, beMaxRounds), h < beMaxRounds })
	if !found {
		d := beCompose(beDelta1(t2, beMaxRounds, logR), epochs)
		return 0, fmt.Errorf("allocation: Berry–Esseen bound at sigma = %g, epochs = %d stays above delta = %g for every M ≤ 2^53 (δ_E = %.4g there): %w",
			sigma, epochs, delta, d, privacy.ErrUnreachable)
	}
	return numeric.BisectInt(okE, lo, hi)
}

// beRegimeStart returns the smallest M ≥ 3 with σ ≥ √(3/ln M), i.e.
// M ≥ e^{3/σ²}; an error wrapping privacy.ErrOutOfRegime when that exceeds 2⁵³.
func beRegimeStart(sigma float64) (int, error) {
	x := 3 / (sigma * sigma)
	if x > 53*math.Ln2 {
		return 0, fmt.Errorf("allocation: Berry–Esseen bound needs σ ≥ √(3/ln M), i.e. M ≥ e^{3/σ²} = e^%.4g > 2^53 at sigma = %g; the chi-square and exact methods (accountant chisq / exact) have no such condition: %w",
			x, sigma, privacy.ErrOutOfRegime)
	}
	m := max(3, int(math.Ceil(math.Exp(x))))
	for !beInRegime(sigma, m) {
		m++
	}
	for m > 3 && beInRegime(sigma, m-1) {
		m--
	}
	return m, nil
}

// BerryEsseenTwoTermRounds returns van Dijk & Ertan's closed two-term
// approximation of the required rounds for E epochs at RhoSimplified: with δ₁ ≈
// (2B·R(σ) + √(b/(2π)))/√M (2Φ(θ/2) − 1 ≈ θ/√(2π)) and δ_E ≈ E·δ₁,
//
//	M ≈ ((2B·R(σ) + √(b/(2π)))·E/δ)²,   b = e^{1/σ²} − 1.
//
// It is real-valued, ignores the regime, and is within ~0.1% of
// BerryEsseenRounds for E = 1 (slightly above it for E > 1, since
// 1 − (1−δ₁)^E ≤ E·δ₁). Invalid input (σ ≤ 0, δ outside (0, 1), E < 1,
// NaN or Inf) gives NaN; a σ so small that it overflows gives +Inf.
func BerryEsseenTwoTermRounds(sigma, delta float64, epochs int) float64 {
	if checkRoundsSolve(sigma, "delta", delta, epochs) != nil {
		return math.NaN()
	}
	t2 := 1 / (sigma * sigma)
	lb := numeric.LogExpm1(t2)
	k := 2*BerryEsseenB*math.Exp(beLogR(t2, RhoSimplified)) + math.Exp(0.5*(lb-math.Log(2*math.Pi)))
	m := k * float64(epochs) / delta
	if math.IsNaN(m) {
		return math.Inf(1)
	}
	return m * m
}

// beSigmaRange is the σ interval BerryEsseenOptimalSigma searches.
const (
	beSigmaLo = 0.25
	beSigmaHi = 50.0
)

// beRealRounds returns the real M ≥ max(3, e^{3/σ²}) at which δ_E(M) = delta
// (δ_E continuous and decreasing in M), by bisection in ln M to 1e-12.
func beRealRounds(t2, delta float64, epochs int, logR float64) float64 {
	lo := math.Max(math.Log(3), 3*t2) // regime start, ln M
	f := func(lm float64) float64 { return beCompose(beDelta1(t2, math.Exp(lm), logR), epochs) - delta }
	if f(lo) <= 0 {
		return math.Exp(lo)
	}
	hi := lo + 1
	for f(hi) > 0 && hi < 700 {
		lo, hi = hi, 2*hi
	}
	return math.Exp(numeric.BisectDecreasing(f, lo, hi, 1e-12))
}

// BerryEsseenOptimalSigma returns the σ that minimizes the rounds
// BerryEsseenRounds requires for a target δ over E epochs, and those rounds
// (van Dijk & Ertan, Fig. 3: σ ≈ 1.031 for every δ with
// RhoSimplified, where the required M is U-shaped: it grows like e^{3/σ²}
// for small σ and like σ⁶ for large σ). The minimum is found by golden
// section in ln σ over [0.25, 50] on the real-valued required M (including
// the regime floor e^{3/σ²}), to 1e-9 relative.
//
// With RhoExact the required M decreases in σ all the way (R_exact tends to
// E|N|³ = 2√(2/π) as σ → ∞ instead of growing), so there is no interior
// minimum; the function then returns an error wrapping privacy.ErrUnreachable.
func BerryEsseenOptimalSigma(delta float64, epochs int, rho Rho) (sigma float64, rounds int, err error) {
	if err := checkProb("delta", delta); err != nil {
		return 0, 0, err
	}
	if err := checkEpochs(epochs); err != nil {
		return 0, 0, err
	}
	if err := checkRho(rho); err != nil {
		return 0, 0, err
	}
	obj := func(ls float64) float64 {
		t2 := math.Exp(-2 * ls)
		return math.Log(beRealRounds(t2, delta, epochs, beLogR(t2, rho)))
	}
	gs := numeric.GoldenMin(obj, math.Log(beSigmaLo), math.Log(beSigmaHi), math.MaxInt, 1e-9)
	ls := (gs.Lo + gs.Hi) / 2
	if ls > math.Log(beSigmaHi)-1e-3 || ls < math.Log(beSigmaLo)+1e-3 {
		return 0, 0, fmt.Errorf("allocation: Berry–Esseen required rounds (rho = %v, delta = %g, epochs = %d) have no minimum inside sigma ∈ [%g, %g]: they decrease toward the edge: %w",
			rho, delta, epochs, beSigmaLo, beSigmaHi, privacy.ErrUnreachable)
	}
	sigma = math.Exp(ls)
	rounds, err = BerryEsseenRounds(sigma, delta, epochs, rho)
	if err != nil {
		return 0, 0, err
	}
	return sigma, rounds, nil
}
