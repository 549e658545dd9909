package personalized

import (
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/privacy"
)

// Client is one client's privacy request.
type Client struct {
	Epsilon     float64 // εᵢ > 0
	DeltaPrime  float64 // δ'ᵢ ∈ (0, 1): the Gaussian mechanism's δ
	DeltaTail   float64 // δ‴ᵢ ∈ (0, 1): probability that the selection count exceeds Rᵢ
	SampleRate  float64 // qᵢ ∈ (0, 1]: probability that a draw selects client i
	Sensitivity float64 // sᵢ > 0, the client's sensitivity factor; 0 means 1
}

// sensitivity returns sᵢ with the default applied.
func (c Client) sensitivity() float64 {
	if c.Sensitivity == 0 {
		return 1
	}
	return c.Sensitivity
}

// Validate checks every field of c against its range; the error wraps
// privacy.ErrInvalidArgument and names the field.
func (c Client) Validate() error {
	if !(c.Epsilon > 0) || math.IsInf(c.Epsilon, 1) {
		return fmt.Errorf("personalized: Client.Epsilon = %g out of range (0, +Inf): %w", c.Epsilon, privacy.ErrInvalidArgument)
	}
	if !(c.DeltaPrime > 0 && c.DeltaPrime < 1) {
		return fmt.Errorf("personalized: Client.DeltaPrime = %g out of range (0, 1): %w", c.DeltaPrime, privacy.ErrInvalidArgument)
	}
	if !(c.DeltaTail > 0 && c.DeltaTail < 1) {
		return fmt.Errorf("personalized: Client.DeltaTail = %g out of range (0, 1): %w", c.DeltaTail, privacy.ErrInvalidArgument)
	}
	if !(c.SampleRate > 0 && c.SampleRate <= 1) {
		return fmt.Errorf("personalized: Client.SampleRate = %g out of range (0, 1]: %w", c.SampleRate, privacy.ErrInvalidArgument)
	}
	if s := c.Sensitivity; !(s >= 0) || math.IsInf(s, 1) {
		return fmt.Errorf("personalized: Client.Sensitivity = %g out of range (0, +Inf) (0 means 1): %w", s, privacy.ErrInvalidArgument)
	}
	return nil
}

// Perturbation says where the Gaussian noise goes, and so how many Gaussian
// releases one participation of a client makes.
type Perturbation int

const (
	// Gradient perturbation (seed Theorem 2): each of the I local steps adds
	// noise to the client's averaged clipped gradient, so a participation
	// releases I Gaussian mechanisms.
	Gradient Perturbation = iota
	// Output perturbation (seed Theorem 1, and Theorem 4 whose proof gives
	// the explicit calibration): noise is added once to the client's update,
	// one Gaussian release per participation. The sensitivity of that
	// update is the caller's to bound; Calibration.Multiplier is in units of
	// it.
	Output
)

// String returns "gradient" or "output".
func (p Perturbation) String() string {
	switch p {
	case Gradient:
		return "gradient"
	case Output:
		return "output"
	}
	return fmt.Sprintf("Perturbation(%d)", int(p))
}

// Setting is what all clients share.
type Setting struct {
	Draws         int          // T = K·R ≥ 1 draws in the whole run
	Clip          float64      // C > 0, the clipping norm
	LocalExamples int          // m ≥ 1 examples per client update
	LocalSteps    int          // I ≥ 1 local steps per participation (E in Theorem 2)
	K             float64      // logistic constant k > 0 of Lemma 1; 0 means DefaultK
	Perturbation  Perturbation // Gradient (default) or Output
}

// k returns the logistic constant with the default applied.
func (s Setting) k() float64 {
	if s.K == 0 {
		return DefaultK
	}
	return s.K
}

// Releases is the number of Gaussian releases one participation makes:
// LocalSteps for Gradient perturbation, 1 for Output perturbation.
func (s Setting) Releases() int {
	if s.Perturbation == Output {
		return 1
	}
	return s.LocalSteps
}

// Validate checks every field of s against its range; the error wraps
// privacy.ErrInvalidArgument and names the field.
func (s Setting) Validate() error {
	if s.Draws < 1 || s.Draws > MaxDraws {
		return fmt.Errorf("personalized: Setting.Draws = %d out of range [1, 2^40]: %w", s.Draws, privacy.ErrInvalidArgument)
	}
	if !(s.Clip > 0) || math.IsInf(s.Clip, 1) {
		return fmt.Errorf("personalized: Setting.Clip = %g out of range (0, +Inf): %w", s.Clip, privacy.ErrInvalidArgument)
	}
	if s.LocalExamples < 1 {
		return fmt.Errorf("personalized: Setting.LocalExamples = %d out of range [1, +Inf): %w", s.LocalExamples, privacy.ErrInvalidArgument)
	}
	if s.LocalSteps < 1 {
		return fmt.Errorf("personalized: Setting.LocalSteps = %d out of range [1, +Inf): %w", s.LocalSteps, privacy.ErrInvalidArgument)
	}
	if !(s.K >= 0) || math.IsInf(s.K, 1) {
		return fmt.Errorf("personalized: Setting.K = %g out of range (0, +Inf) (0 means %g): %w", s.K, DefaultK, privacy.ErrInvalidArgument)
	}
	if s.Perturbation != Gradient && s.Perturbation != Output {
		return fmt.Errorf("personalized: Setting.Perturbation = %d: want Gradient (%d) or Output (%d): %w", int(s.Perturbation), int(Gradient), int(Output), privacy.ErrInvalidArgument)
	}
	return nil
}

// Calibration is one client's noise for its budget: the appendix's
// explicit calibration and the tight GDP one (docs/accounting.md). Noise standard
// deviations are absolute (per coordinate, in the units of the released
// average gradient); Multiplier is in units of Sensitivity.
type Calibration struct {
	// Rounds is Lemma 1's selection bound; Rounds.Used is the Rᵢ both
	// calibrations assume. A run must retire the client once it has been
	// selected Rounds.Used times.
	Rounds RoundsBound
	// SigmaSeed is the appendix's explicit calibration (end of Theorem 4's
	// proof): S/εᵢ·√(2·ln(1.25/δ'ᵢ)·Rᵢ), the classic Gaussian constant for
	// Rᵢ releases of sensitivity S (one per participation).
	SigmaSeed float64
	// SigmaGDP is the tight calibration: Multiplier·S.
	SigmaGDP float64
	// Multiplier is SigmaGDP/S: the smallest noise multiplier for which Rᵢ
	// participations of Releases Gaussian releases each are (εᵢ, δ'ᵢ)-DP.
	Multiplier float64
	// Sensitivity is S = 2·C·sᵢ/m: the L2 sensitivity of an average of m
	// clipped gradients when one example is replaced.
	Sensitivity float64
	// Mu is μ = √(Rᵢ·Releases)/Multiplier of the GDP statement at SigmaGDP.
	Mu float64
	// Releases is the number of Gaussian releases per participation that
	// SigmaGDP assumes (Setting.Releases).
	Releases int
	// DeltaTotal is δ' + δ‴ − δ'·δ‴: the δ of the run when retirement
	// after Rᵢ selections is not enforced (the selection count then exceeds
	// Rᵢ with probability at most δ‴). With retirement enforced, δ'ᵢ alone
	// holds.
	DeltaTotal float64
	// SeedValid says whether SigmaSeed is proven: the classic Gaussian
	// constant √(2 ln(1.25/δ)) is a theorem only for ε < 1 (Dwork & Roth
	// 2014, Thm A.1), a condition the appendix does not state, and its
	// formula covers one release per participation (Releases = 1).
	SeedValid bool
	// SeedDelta is the exact δ at εᵢ of SigmaSeed applied to Rᵢ·Releases
	// releases (μ-GDP with μ = √(Rᵢ·Releases)·S/SigmaSeed): whether the
	// appendix's σ in fact meets δ'ᵢ, inside or outside its proven regime.
	SeedDelta float64
}

// DeltaTotal returns δ' + δ‴ − δ'·δ‴ = 1 − (1−δ')(1−δ‴) (the
// personalized-DP FL appendix, Theorem 1): the δ of a mechanism that is (ε, δ')-DP
// except on a data-independent event of probability at most δ‴ (the
// selection count exceeding Rᵢ). Arguments are expected in [0, 1].
func DeltaTotal(deltaPrime, deltaTail float64) float64 {
	return deltaPrime + deltaTail - deltaPrime*deltaTail
}

// Calibrate returns client c's noise for setting s (docs/accounting.md):
//
//   - Rᵢ = SelectionBound(T, qᵢ, δ‴ᵢ, k).Used (Lemma 1, exact quantile
//     and logistic approximation, the larger);
//   - the explicit calibration of the personalized-DP FL appendix (end of the proof
//     of Theorem 4; the bracket there is Lemma 1's Rᵢ, reading its K·T as T
//     and its γ'ᵢ as δ‴ᵢ):
//     σ_seed = (2·C·sᵢ)/(m·εᵢ)·√(2·ln(1.25/δ'ᵢ)·Rᵢ);
//   - the tight one (exact composition in μ-GDP, Dong, Roth & Su 2019): Rᵢ
//     participations of Releases Gaussian releases with sensitivity S and
//     noise Multiplier·S are exactly μ-GDP with μ = √(Rᵢ·Releases)/Multiplier
//     (no amplification by sampling claimed); Multiplier is the smallest
//     with δ(εᵢ; μ) ≤ δ'ᵢ by the GDP conversion privacy.GaussianDelta,
//     rounded up by 1e−9 relative (so Spent(Rᵢ, …) ≤ εᵢ).
//
// A bound Rᵢ = 0 (δ‴ so large that the client need never be selected) is
// an error naming DeltaTail.
func Calibrate(c Client, s Setting) (Calibration, error) {
	if err := c.Validate(); err != nil {
		return Calibration{}, err
	}
	if err := s.Validate(); err != nil {
		return Calibration{}, err
	}
	rb, err := SelectionBound(s.Draws, c.SampleRate, c.DeltaTail, s.k())
	if err != nil {
		return Calibration{}, err
	}
	if rb.Used == 0 {
		return Calibration{}, fmt.Errorf("personalized: Client.DeltaTail = %g with SampleRate = %g and Draws = %d gives a selection bound of 0 (the client would never take part): want a smaller DeltaTail: %w",
			c.DeltaTail, c.SampleRate, s.Draws, privacy.ErrInvalidArgument)
	}
	sens := 2 * s.Clip * c.sensitivity() / float64(s.LocalExamples)
	rel := s.Releases()
	cal := Calibration{
		Rounds:      rb,
		Sensitivity: sens,
		Releases:    rel,
		DeltaTotal:  DeltaTotal(c.DeltaPrime, c.DeltaTail),
		SigmaSeed:   seedSigma(sens, c.Epsilon, c.DeltaPrime, rb.Used),
		SeedValid:   c.Epsilon < 1 && rel == 1,
	}
	n := math.Sqrt(float64(rb.Used) * float64(rel))
	mu, err := maxMu(c.Epsilon, c.DeltaPrime)
	if err != nil {
		return Calibration{}, err
	}
	cal.Multiplier = n / mu
	cal.Mu = n / cal.Multiplier
	cal.SigmaGDP = cal.Multiplier * sens
	if cal.SeedDelta, err = privacy.GaussianDelta(n*sens/cal.SigmaSeed, c.Epsilon); err != nil {
		return Calibration{}, err
	}
	return cal, nil
}

// seedSigma is the explicit calibration of the personalized-DP FL appendix (end
// of the proof of Theorem 4): sens/ε·√(2·ln(1.25/δ')·R).
func seedSigma(sens, eps, deltaPrime float64, r int) float64 {
	return sens / eps * math.Sqrt(2*math.Log(1.25/deltaPrime)*float64(r))
}

// muMargin is the relative amount by which Calibrate's μ stays below the
// largest one that meets the target: far above the rounding of √n/(√n/μ)
// and of privacy.GaussianEpsilon (1e−12 absolute), so that Spent at Rᵢ
// selections reports at most εᵢ (for εᵢ ≥ 0.01), at a cost of 1e−9 relative
// noise.
const muMargin = 1e-9

// maxMu returns, to 1e−13 relative and rounded down, the largest μ for which
// μ-GDP is (eps, delta)-DP: δ(ε; μ) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) ≤ delta
// (Dong, Roth & Su 2019), δ(ε; μ) being increasing in μ, reduced by muMargin.
func maxMu(eps, delta float64) (float64, error) {
	ok := func(mu float64) (bool, error) {
		d, err := privacy.GaussianDelta(mu, eps)
		return d <= delta, err
	}
	// Bracket: δ(lo) ≤ delta < δ(hi).
	lo, hi := 1.0, 1.0
	good, err := ok(1)
	for err == nil {
		if good {
			lo, hi = hi, 2*hi
			if hi > 1e300 {
				return 0, fmt.Errorf("personalized: no GDP μ bound for ε = %g, δ = %g: %w", eps, delta, privacy.ErrUnreachable)
			}
			good, err = ok(hi)
			if !good {
				break
			}
		} else {
			hi, lo = lo, lo/2
			if lo < 1e-300 {
				return 0, fmt.Errorf("personalized: no GDP μ ≥ 1e-300 meets ε = %g, δ = %g: %w", eps, delta, privacy.ErrUnreachable)
			}
			if good, err = ok(lo); good {
				break
			}
		}
	}
	for err == nil && hi-lo > 1e-13*hi {
		mid := 0.5 * (lo + hi)
		if good, err = ok(mid); good {
			lo = mid
		} else {
			hi = mid
		}
	}
	if err != nil {
		return 0, err
	}
	return lo * (1 - muMargin), nil
}

// Spent returns the ε at δ' that a client has spent after being selected
// selections times with localSteps Gaussian releases per selection at noise
// multiplier multiplier (exact composition in μ-GDP): the
// client is μ-GDP with μ = √(selections·localSteps)/multiplier, and ε is the
// GDP conversion privacy.GaussianEpsilon(μ, δ'). For output perturbation pass
// localSteps = 1 (one release per selection). Zero selections spend ε = 0.
func Spent(selections, localSteps int, multiplier, deltaPrime float64) (eps float64, err error) {
	if selections < 0 {
		return 0, fmt.Errorf("personalized: selections = %d out of range [0, +Inf): %w", selections, privacy.ErrInvalidArgument)
	}
	if localSteps < 1 {
		return 0, fmt.Errorf("personalized: localSteps = %d out of range [1, +Inf): %w", localSteps, privacy.ErrInvalidArgument)
	}
	if !(multiplier > 0) || math.IsInf(multiplier, 1) {
		return 0, fmt.Errorf("personalized: multiplier = %g out of range (0, +Inf): %w", multiplier, privacy.ErrInvalidArgument)
	}
	if !(deltaPrime > 0 && deltaPrime < 1) {
		return 0, fmt.Errorf("personalized: deltaPrime = %g out of range (0, 1): %w", deltaPrime, privacy.ErrInvalidArgument)
	}
	mu := math.Sqrt(float64(selections)*float64(localSteps)) / multiplier
	return privacy.GaussianEpsilon(mu, deltaPrime)
}

// sharesTol is how far from 1 the data shares may sum.
const sharesTol = 1e-9

// UtilityCost returns the noise term of the convergence bound of
// the personalized-DP FL appendix (Theorem 3, eq. 11):
//
//	(γ·L·N/K)·Σₙ θₙ·pₙ²·Sₙ²·σₙ²,  θₙ = K − 1 + 1/qₙ,  Sₙ = 2·C·sₙ/m,
//
// with N = len(clients), K = k clients per round, pₙ = shares[n] (the data
// weights, summing to 1), qₙ = clients[n].SampleRate and σₙ = sigmas[n] the
// noise multiplier of client n (Calibration.Multiplier, noise std in units of
// Sₙ), so that Sₙ²·σₙ² is the per-coordinate noise variance. With sₙ = 1,
// Sₙ is eq. 11's S = 2C/m and the expression is eq. 11's verbatim.
// gammaL is the product γ·L of the step size and the smoothness constant.
func UtilityCost(gammaL float64, k int, clients []Client, shares, sigmas []float64, s Setting) (float64, error) {
	n := len(clients)
	if n == 0 {
		return 0, fmt.Errorf("personalized: UtilityCost: no clients: %w", privacy.ErrInvalidArgument)
	}
	if len(shares) != n || len(sigmas) != n {
		return 0, fmt.Errorf("personalized: UtilityCost: %d clients, %d shares, %d sigmas: want equal lengths: %w", n, len(shares), len(sigmas), privacy.ErrInvalidArgument)
	}
	if !(gammaL >= 0) || math.IsInf(gammaL, 1) {
		return 0, fmt.Errorf("personalized: UtilityCost: gammaL = %g out of range [0, +Inf): %w", gammaL, privacy.ErrInvalidArgument)
	}
	if k < 1 || k > n {
		return 0, fmt.Errorf("personalized: UtilityCost: k = %d clients per round out of range [1, N = %d]: %w", k, n, privacy.ErrInvalidArgument)
	}
	if !(s.Clip > 0) || math.IsInf(s.Clip, 1) {
		return 0, fmt.Errorf("personalized: Setting.Clip = %g out of range (0, +Inf): %w", s.Clip, privacy.ErrInvalidArgument)
	}
	if s.LocalExamples < 1 {
		return 0, fmt.Errorf("personalized: Setting.LocalExamples = %d out of range [1, +Inf): %w", s.LocalExamples, privacy.ErrInvalidArgument)
	}
	var sum, total float64
	for i, c := range clients {
		if err := c.Validate(); err != nil {
			return 0, fmt.Errorf("client %d: %w", i, err)
		}
		p, sg := shares[i], sigmas[i]
		if !(p >= 0 && p <= 1) {
			return 0, fmt.Errorf("personalized: UtilityCost: shares[%d] = %g out of range [0, 1]: %w", i, p, privacy.ErrInvalidArgument)
		}
		if !(sg >= 0) || math.IsInf(sg, 1) {
			return 0, fmt.Errorf("personalized: UtilityCost: sigmas[%d] = %g out of range [0, +Inf): %w", i, sg, privacy.ErrInvalidArgument)
		}
		total += p
		theta := float64(k) - 1 + 1/c.SampleRate
		sn := 2 * s.Clip * c.sensitivity() / float64(s.LocalExamples)
		sum += theta * p * p * sn * sn * sg * sg
	}
	if math.Abs(total-1) > sharesTol {
		return 0, fmt.Errorf("personalized: UtilityCost: shares sum to %.12g: want 1 (±%g): %w", total, sharesTol, privacy.ErrInvalidArgument)
	}
	return gammaL * float64(n) / float64(k) * sum, nil
}

// Order holds the Ω(·) expressions of the personalized-DP FL appendix
// evaluated with constant 1 (Theorem 1, Theorem 2, Corollary 1). They are
// ORDERS OF MAGNITUDE, NOT CALIBRATIONS: the appendix proves no constant, so
// none of them may be used to set σ (use Calibration.SigmaGDP). They are in
// the appendix's units (sensitivity factor sᵢ, without C/m).
type Order struct {
	// Theorem1 is sᵢ·√(T*ᵢ·ln(1/δ'))/εᵢ (output perturbation, ε
	// outside the root).
	Theorem1 float64
	// Theorem2 is sᵢ·√(T*ᵢ·E·ln(1/δ')·ln(1/δ″))/εᵢ (gradient perturbation,
	// E = LocalSteps).
	Theorem2 float64
	// DeltaTheorem2 is Theorem 2's δ = T·δ' + δ″ + δ‴ − (T·δ' + δ″)·δ‴
	// with T = Draws, as the appendix states it (it may exceed 1).
	DeltaTheorem2 float64
	// Corollary1 is √(E·√(qᵢ·K·R))·Bᵢ with K·R = T and
	// Bᵢ = sᵢ·√(ln(1/δ')·ln(1/δ″)·ln(1/δ‴))/εᵢ: Theorem 2 with T*ᵢ replaced
	// by its dominant term ln(1/δ‴)·√(qᵢT) (001's reading: Bᵢ outside the
	// outer root and εᵢ outside Bᵢ's root, which is what that substitution
	// gives).
	Corollary1 float64
	// Corollary1Applies reports the corollary's condition
	// R < (ln(1/δ‴))²/(qᵢ·K·k²), i.e. T < (ln(1/δ‴))²/(qᵢ·k²).
	Corollary1Applies bool
	// RoundsUsed is the T*ᵢ used above: SelectionBound(...).Used.
	RoundsUsed int
}

// OrderOfMagnitude evaluates the appendix's Ω(·) statements for client c in
// setting s with constant 1 (Theorem 1, Theorem 2 and Corollary 1). deltaComp
// is Theorem 2's δ″ in (0, 1), the slack of its composition theorem. The
// results are orders of magnitude, not calibrations: never use them to set σ.
func OrderOfMagnitude(c Client, s Setting, deltaComp float64) (Order, error) {
	if err := c.Validate(); err != nil {
		return Order{}, err
	}
	if err := s.Validate(); err != nil {
		return Order{}, err
	}
	if !(deltaComp > 0 && deltaComp < 1) {
		return Order{}, fmt.Errorf("personalized: deltaComp = %g out of range (0, 1): %w", deltaComp, privacy.ErrInvalidArgument)
	}
	rb, err := SelectionBound(s.Draws, c.SampleRate, c.DeltaTail, s.k())
	if err != nil {
		return Order{}, err
	}
	si, eps := c.sensitivity(), c.Epsilon
	tStar, e := float64(rb.Used), float64(s.LocalSteps)
	l1, l2, l3 := -math.Log(c.DeltaPrime), -math.Log(deltaComp), -math.Log(c.DeltaTail)
	t := float64(s.Draws)
	td := t*c.DeltaPrime + deltaComp
	b := si * math.Sqrt(l1*l2*l3) / eps
	k := s.k()
	return Order{
		Theorem1:          si * math.Sqrt(tStar*l1) / eps,
		Theorem2:          si * math.Sqrt(tStar*e*l1*l2) / eps,
		DeltaTheorem2:     td + c.DeltaTail - td*c.DeltaTail,
		Corollary1:        math.Sqrt(e*math.Sqrt(c.SampleRate*t)) * b,
		Corollary1Applies: t < l3*l3/(c.SampleRate*k*k),
		RoundsUsed:        rb.Used,
	}, nil
}
