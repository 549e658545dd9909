package allocation

import (
	"errors"
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/internal/numeric"
	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/pld"
	"gonum.org/v1/gonum/dsp/fourier"
	"gonum.org/v1/gonum/stat/distuv"
)

// This file builds a pessimistic privacy-loss distribution of one epoch of the
// Gaussian pair (P_M, Q_M) (package doc), in both directions, for FFT
// composition over E epochs (Ertan & van Dijk 2026, "any E": tabulate the loss
// of one epoch, compose E copies).
//
// Construction (every step replaces the pair by one that dominates it in the
// Blackwell sense, i.e. whose hockey-stick curve H_γ(A‖B) is at least the
// original's at every γ > 0; such dominance survives products, so the E-fold
// composition of the replacement dominates P_M^{⊗E} vs Q_M^{⊗E}, and then
// H_γ(B^E‖A^E) = 1 − γ + γH_{1/γ}(A^E‖B^E) dominates in the other direction
// as well; Zhu, Dong & Wang 2022, Blackwell's theorem):
//
//  1. Cap. Y = Y^c + Y^e with Y^c = min(Y, y_cap). Since
//     (L − γ)₊ ≤ (L^c − γ)₊ + L^e, h(γ) = E_P(L − γ)₊ ≤ E(L^c − γ)₊ + τ with
//     τ = E(Y − y_cap)₊ = Φ̄(x_cap − t) − y_cap Φ̄(x_cap); the right side is
//     the curve of the pair with an extra Q-atom of mass τ at loss +∞.
//  2. Spread. Y^c is replaced by Ỹ on the grid {j·dy}: the mass of each cell
//     [j·dy, (j+1)·dy) goes to its two ends so that its mean is kept. Ỹ is
//     a mean-preserving spread of Y^c, hence L̃ = ΣỸ_j/M of L^c, and by
//     Jensen E(L̃ − γ)₊ ≥ E(L^c − γ)₊ for every γ (second-order error
//     ≈ dy²/(8M) times the density of L).
//  3. Sum. The law of S = ΣỸ_j (M iid copies) is computed by one FFT, an
//     M-th power and one inverse FFT over a window outside of which Chernoff
//     bounds leave at most exactWindowTail of P-mass on each side; the mass
//     outside, its Q-mass E[L; outside] and an FFT roundoff allowance are
//     tracked as ℓ¹ errors eB (P-masses) and eA (Q-masses) of the tabulated
//     pair, which add at most eB resp. eA to δ(ε) at every ε.
//  4. Lump. Atoms in the extreme tails (P-mass below exactLumpMass from the
//     bottom, Q-mass below it from the top) are replaced by the fully
//     revealing pair (Q-mass at loss +∞ in Q‖P, P-mass at +∞ in P‖Q).
//  5. Connect the dots (Doroshenko et al. 2022). An atom with likelihood
//     ratio l (P-mass p, Q-mass l·p) at loss ln l ∈ [kΔ, (k+1)Δ] is split
//     into two atoms at the grid losses kΔ and (k+1)Δ with the same total
//     P- and Q-mass; merging them back is post-processing, so the split pair
//     dominates. Both directions are then exactly on the grid: Q‖P has
//     Q-masses at losses kΔ, P‖Q P-masses at −kΔ.
//
// The composed δ of each direction is pld's pessimistic DeltaForEpsilon
// plus (1 + e)^E − 1 for the tracked per-epoch error e of that direction
// (pld's composition rule for an absolute error with no relative one).

// Tuning constants of the per-epoch discretization.
const (
	exactWindowTail = 1e-17   // P-mass left outside the FFT window per side
	exactLumpMass   = 1e-16   // tail mass lumped into +∞ per side
	exactSpreadRel  = 0.02    // dy/√b at full accuracy
	exactSpreadMax  = 0.1     // dy/√b before the cap is lowered further
	exactCapSigmas  = 8.0     // x_cap − t at full accuracy (τ ≈ Φ̄(8) ≈ 6e-16)
	exactCapMin     = 4.0     // smallest x_cap − t (τ ≈ 3e-5)
	exactGridMax    = 1 << 20 // planned FFT window (the Chernoff one may be up to 4× it)
	exactLossPerSD  = 400.0   // loss grid points per standard deviation of ℓ
)

// exactEpochPLD is the pessimistic PLD of one epoch in both directions.
type exactEpochPLD struct {
	qp, pq *pld.PMF // Q‖P (remove) and P‖Q (add)
	eA, eB float64  // tracked ℓ¹ errors of the Q- and P-masses
	tau    float64  // Q-mass at +∞ from the cap
	dy     float64  // spread grid actually used
	coarse bool     // the grid budget forced a coarser grid or a lower cap
}

// exactCellMass returns Φ(x2) − Φ(x1) for x1 ≤ x2 without cancellation:
// differences of Φ below the median, of 1 − Φ above it.
func exactCellMass(x1, x2 float64) float64 {
	switch {
	case x2 <= 0:
		return distuv.UnitNormal.CDF(x2) - distuv.UnitNormal.CDF(x1)
	case x1 >= 0:
		return numeric.NormSF(x1) - numeric.NormSF(x2)
	}
	return (0.5 - distuv.UnitNormal.CDF(x1)) + (0.5 - numeric.NormSF(x2))
}

// exactSpreadY returns the masses of Ỹ on {0, dy, …, J·dy} (J·dy = y_cap)
// and τ = E(Y − y_cap)₊ (step 1–2 above).
func exactSpreadY(t, dy float64, J int) (w []float64, tau float64) {
	w = make([]float64, J+1)
	xOf := func(y float64) float64 { return (math.Log(y) + t*t/2) / t }
	x1 := math.Inf(-1)
	for j := 0; j < J; j++ {
		y1 := float64(j) * dy
		x2 := xOf(float64(j+1) * dy)
		p := exactCellMass(x1, x2)
		if p > 0 {
			mean := exactCellMass(x1-t, x2-t) / p // E[Y | cell]
			f := math.Min(1, math.Max(0, (mean-y1)/dy))
			w[j] += p * (1 - f)
			w[j+1] += p * f
		}
		x1 = x2
	}
	// Y ≥ y_cap: Y^c = y_cap.
	w[J] += numeric.NormSF(x1)
	tau = math.Max(0, numeric.NormSF(x1-t)-float64(J)*dy*numeric.NormSF(x1))
	return w, tau
}

// exactLogMGF returns ln Σ_j w_j e^{λj} (λ per grid index), stably.
func exactLogMGF(w []float64, lambda float64) float64 {
	n := len(w)
	var s, shift float64
	if lambda >= 0 {
		r, c := math.Exp(-lambda), 1.0
		for i := n - 1; i >= 0; i-- {
			s += w[i] * c
			c *= r
		}
		shift = lambda * float64(n-1)
	} else {
		r, c := math.Exp(lambda), 1.0
		for _, v := range w {
			s += v * c
			c *= r
		}
	}
	return shift + math.Log(s) + 1e-8
}

// exactLogMGF1 returns ln Σ_j j·w_j e^{λj} for λ ≥ 0.
func exactLogMGF1(w []float64, lambda float64) float64 {
	n := len(w)
	r, c := math.Exp(-lambda), 1.0
	var s float64
	for i := n - 1; i >= 0; i-- {
		s += float64(i) * w[i] * c
		c *= r
	}
	return lambda*float64(n-1) + math.Log(s) + 1e-8
}

// exactSumWindow returns the Chernoff window [lo, hi] (grid indices) of the
// sum of m iid copies of w, the P-mass bounds outside on each side and a
// bound on E[S; S > hi] (in grid units).
func exactSumWindow(w []float64, m int) (lo, hi int, tLo, tHi, sHi float64) {
	mf := float64(m)
	lnT := math.Log(exactWindowTail)
	J := float64(len(w) - 1)
	bestHi, bestLo := math.Inf(1), math.Inf(-1)
	var lamHi float64
	for k := 0; k < 80; k++ {
		lam := 1e-3 / J * math.Pow(2, float64(k)/2)
		if lam > 50 {
			break
		}
		// A moment generating function that underflows (large σ: all mass far
		// from 0, e^{−λj} below the smallest float) gives no bound: skip it.
		if u := (mf*exactLogMGF(w, lam) - lnT) / lam; exactFinite(u) && u < bestHi {
			bestHi, lamHi = u, lam
		}
		if l := -(mf*exactLogMGF(w, -lam) - lnT) / lam; exactFinite(l) && l > bestLo {
			bestLo = l
		}
	}
	top := mf * J
	hi = int(math.Min(top, math.Ceil(bestHi)))
	lo = int(math.Max(0, math.Floor(bestLo)))
	lo = min(lo, hi)
	if float64(hi) < top {
		k := mf * exactLogMGF(w, lamHi)
		tHi = math.Min(1, math.Exp(-lamHi*float64(hi)+k))
		// E[S e^{λ(S−hi)}] = e^{−λ hi} m E[j e^{λj}] (E e^{λj})^{m−1}.
		sHi = math.Exp(-lamHi*float64(hi) + math.Log(mf) + exactLogMGF1(w, lamHi) + (mf-1)*exactLogMGF(w, lamHi))
	}
	if lo > 0 {
		best := math.Inf(1)
		for k := 0; k < 80; k++ {
			lam := 1e-3 / J * math.Pow(2, float64(k)/2)
			if lam > 50 {
				break
			}
			if v := lam*float64(lo) + mf*exactLogMGF(w, -lam); exactFinite(v) {
				best = math.Min(best, v)
			}
		}
		tLo = math.Min(1, math.Exp(best))
	}
	return lo, hi, tLo, tHi, sHi
}

// exactFinite reports whether v is neither NaN nor ±Inf.
func exactFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// exactPlan chooses dy and J for (t, M) within the grid budget.
func exactPlan(t, b float64, m int) (dy float64, J int, coarse bool) {
	sb := math.Sqrt(b)
	rel := exactSpreadRel
	capSig := exactCapSigmas
	mf := float64(m)
	for {
		dy = rel * sb
		yCap := math.Exp(t*(t+capSig) - t*t/2)
		est := (24*math.Sqrt(mf*b) + 1.5*yCap) / dy
		if est <= exactGridMax || (capSig <= exactCapMin && rel >= 64*exactSpreadMax) {
			J = max(2, int(math.Ceil(yCap/dy)))
			return dy, J, coarse
		}
		coarse = true
		switch {
		case capSig > exactCapSigmas-2:
			capSig -= 0.5
		case rel < exactSpreadMax:
			rel = math.Min(exactSpreadMax, rel*1.25)
		case capSig > exactCapMin:
			capSig -= 0.5
		default:
			rel *= 1.25
		}
	}
}

// exactNewEpochPLD builds the per-epoch pessimistic PLD of the pair for σ and
// M ≥ 1 (steps 1–5 above).
func exactNewEpochPLD(sigma float64, m int) (*exactEpochPLD, error) {
	return exactBuildEpochPLD(sigma, m, 1)
}

// exactBuildEpochPLD is exactNewEpochPLD with both grids refined by the
// factor fine ≥ 1 (the spread grid dy and the loss grid Δ divided by it;
// used by the refinement tests).
func exactBuildEpochPLD(sigma float64, m int, fine float64) (*exactEpochPLD, error) {
	t := 1 / sigma
	b := math.Expm1(t * t)
	dy, J, coarse := exactPlan(t, b, m)
	if fine > 1 {
		dy /= fine
		J = int(math.Ceil(float64(J) * fine))
	}
	if J > 4*exactGridMax || J < 0 {
		// Small σ: the capped ratio needs more points than the budget; fail
		// before allocating them.
		return nil, fmt.Errorf("allocation: exact PLD at sigma = %g, rounds = %d needs a spread grid of %d points (more than %d): %w",
			sigma, m, J, 4*exactGridMax, errExactGrid)
	}
	w, tau := exactSpreadY(t, dy, J)
	out := &exactEpochPLD{tau: tau, dy: dy, coarse: coarse}

	// Step 3: law of S on the window [lo, hi].
	lo, hi, tLo, tHi, sHi := exactSumWindow(w, m)
	wlen := hi - lo + 1
	if wlen > 4*exactGridMax {
		return nil, fmt.Errorf("allocation: exact PLD at sigma = %g, rounds = %d needs %d grid points (more than %d): %w",
			sigma, m, wlen, 4*exactGridMax, errExactGrid)
	}
	size := numeric.FastFFTLen(wlen)
	buf := make([]float64, size)
	for j, v := range w {
		buf[j%size] += v
	}
	fft := fourier.NewFFT(size)
	c := fft.Coefficients(nil, buf)
	if m > 1 {
		numeric.PowPolar(c, float64(m))
	}
	seq := fft.Sequence(buf, c)
	inv := 1 / float64(size)
	mf := float64(m)
	scale := dy / mf // L = S·dy/M
	probs := make([]float64, wlen)
	var maxNeg float64
	for i := range probs {
		v := seq[(lo+i)%size] * inv
		if v < 0 {
			maxNeg = math.Max(maxNeg, -v)
			v = 0
		}
		probs[i] = v
	}
	lMax := float64(hi) * scale
	// ℓ¹ errors: the outside mass is missing from its place and may appear
	// (aliased) anywhere in the window; roundoff of every entry is taken as
	// the noise level the inverse FFT shows in its negative entries (true
	// masses are ≥ 0), with a floor (pld's rule).
	noise := math.Max(maxNeg, 1e-19*math.Log2(float64(size)))
	var sp, sq float64
	for i, v := range probs {
		sp += v
		sq += v * float64(lo+i) * scale
	}
	out.eB = 2*(tLo+tHi) + float64(wlen)*noise
	out.eA = (tLo+tHi)*lMax + noise*float64(wlen)*float64(lo+hi)/2*scale + float64(lo)*scale*tLo + sHi*scale

	// Step 4: lumping thresholds.
	a0, a1 := 0, wlen-1
	for cum := 0.0; a0 < wlen; a0++ {
		if cum+probs[a0] > exactLumpMass {
			break
		}
		cum += probs[a0]
	}
	for cum := 0.0; a1 >= a0; a1-- {
		q := probs[a1] * float64(lo+a1) * scale
		if cum+q > exactLumpMass {
			break
		}
		cum += q
	}
	// Q-mass at +∞ in Q‖P and P-mass at +∞ in P‖Q; a deficit of the
	// tabulated masses (roundoff) is put there too.
	infQ := tau + math.Max(0, 1-tau-sq)
	infP := math.Max(0, 1-sp)
	for i := 0; i < a0; i++ {
		infQ += probs[i] * float64(lo+i) * scale
		infP += probs[i]
	}
	for i := a1 + 1; i < wlen; i++ {
		infQ += probs[i] * float64(lo+i) * scale
		infP += probs[i]
	}
	// Step 5: connect the dots onto the loss grid.
	sl := math.Sqrt(math.Log1p(b / mf))
	delta := sl / (exactLossPerSD * math.Max(1, fine))
	var kMin, kMax = math.MaxInt, math.MinInt
	for i := a0; i <= a1; i++ {
		if probs[i] == 0 {
			continue
		}
		n := lo + i
		if n == 0 {
			infP += probs[i] // l = 0: Q-mass 0, loss +∞ in P‖Q
			continue
		}
		k := int(math.Floor(math.Log(float64(n)*scale) / delta))
		kMin, kMax = min(kMin, k), max(kMax, k+1)
	}
	if kMin > kMax {
		return nil, fmt.Errorf("allocation: exact PLD at sigma = %g, rounds = %d is empty: %w", sigma, m, errExactGrid)
	}
	nk := kMax - kMin + 1
	qm := make([]float64, nk) // Q-masses at losses kΔ
	pm := make([]float64, nk) // P-masses at losses kΔ (of ln L)
	for i := a0; i <= a1; i++ {
		p := probs[i]
		n := lo + i
		if p == 0 || n == 0 {
			continue
		}
		l := float64(n) * scale
		ll := math.Log(l)
		k := int(math.Floor(ll / delta))
		e0, e1 := float64(k)*delta, float64(k+1)*delta
		// P-mass on the upper point: p (l − e^{e0})/(e^{e1} − e^{e0}).
		f := math.Min(1, math.Max(0, math.Exp(ll-e1)*math.Expm1(e0-ll)/math.Expm1(e0-e1)))
		p1 := p * f
		p0 := p - p1
		pm[k-kMin] += p0
		pm[k+1-kMin] += p1
		qm[k-kMin] += p0 * math.Exp(e0)
		qm[k+1-kMin] += p1 * math.Exp(e1)
	}
	// Roundoff can leave a total above 1; scale the finite masses down and
	// count the change (the excess) as ℓ¹ error.
	out.eA += exactNormalize(qm, infQ)
	out.eB += exactNormalize(pm, infP)
	lossQ := make([]float64, nk)
	lossP := make([]float64, nk)
	for i := range lossQ {
		k := float64(kMin + i)
		// Grid losses given just below kΔ so that the pessimistic
		// rounding (ceil) of FromLosses lands exactly on kΔ.
		lossQ[i] = (k - 1e-6) * delta
		lossP[i] = (-k - 1e-6) * delta
	}
	var err error
	// Masses may exceed 1 by roundoff; FromLosses allows 1e-9.
	if out.qp, err = pld.FromLosses(lossQ, qm, math.Min(1, infQ), delta, true); err != nil {
		return nil, fmt.Errorf("allocation: exact PLD (remove direction): %w", err)
	}
	if out.pq, err = pld.FromLosses(lossP, pm, math.Min(1, infP), delta, true); err != nil {
		return nil, fmt.Errorf("allocation: exact PLD (add direction): %w", err)
	}
	return out, nil
}

// exactNormalize scales the masses so that Σ masses + inf ≤ 1 and returns
// the ℓ¹ change.
func exactNormalize(masses []float64, inf float64) float64 {
	var s float64
	for _, v := range masses {
		s += v
	}
	if s+inf <= 1 || s == 0 {
		return 0
	}
	f := math.Max(0, 1-inf) / s * (1 - 1e-15)
	for i := range masses {
		masses[i] *= f
	}
	return s * (1 - f)
}

// errExactGrid is wrapped when the per-epoch PLD cannot be built within its
// grid budget (σ below about 0.3, where δ is close to 1 anyway).
var errExactGrid = errors.New("the exact privacy-loss grid exceeds its budget")

// exactGridErr reports whether err means the PLD (or its composition) did
// not fit its grid budget: then the amplification-free bound is used.
func exactGridErr(err error) bool {
	return errors.Is(err, errExactGrid) || errors.Is(err, pld.ErrGridTooLarge)
}

// exactComposed is the E-fold composition of an epoch PLD with its error,
// or (mu > 0) μ-GDP with μ = √E/σ: exact for M = 1, where an epoch is one
// Gaussian mechanism, and for M ≥ 2, where the PLD does not fit its grid, the
// amplification-free bound of E epochs (Chua et al. 2024; valid for the pair
// because each epoch's release is a data-independent mixture of Gaussian
// mechanisms of sensitivity 1).
type exactComposed struct {
	qp, pq     *pld.PMF
	errA, errB float64
	mu         float64
}

// exactGaussianComposed is the μ-GDP exactComposed for E epochs at σ (M = 1,
// or the fallback where the grid does not fit).
func exactGaussianComposed(sigma float64, epochs int) *exactComposed {
	return &exactComposed{mu: math.Sqrt(float64(epochs)) / sigma}
}

// compose returns the E-fold composition.
func (e *exactEpochPLD) compose(epochs int) (*exactComposed, error) {
	qp, err := e.qp.SelfCompose(epochs)
	if err != nil {
		return nil, fmt.Errorf("allocation: composing %d epochs: %w", epochs, err)
	}
	pq, err := e.pq.SelfCompose(epochs)
	if err != nil {
		return nil, fmt.Errorf("allocation: composing %d epochs: %w", epochs, err)
	}
	ef := float64(epochs)
	return &exactComposed{
		qp: qp, pq: pq,
		errA: math.Expm1(ef * math.Log1p(e.eA)),
		errB: math.Expm1(ef * math.Log1p(e.eB)),
	}, nil
}

// delta returns the certified δ(ε), the larger of the two directions.
func (c *exactComposed) delta(eps float64) float64 {
	if c.mu > 0 {
		d, err := privacy.GaussianDelta(c.mu, eps)
		if err != nil {
			return 1
		}
		return d
	}
	d1, _ := c.qp.DeltaForEpsilon(eps)
	d2, _ := c.pq.DeltaForEpsilon(eps)
	return exactClamp(math.Max(d1+c.errA, d2+c.errB))
}

// epsilon returns the smallest ε ≥ 0 with delta(ε) ≤ target (conservative).
func (c *exactComposed) epsilon(target float64) (float64, error) {
	if c.mu > 0 {
		return privacy.GaussianEpsilon(c.mu, target)
	}
	e1, err := c.qp.EpsilonForDelta(target - c.errA)
	if err != nil {
		return 0, fmt.Errorf("allocation: delta = %g not reached (remove direction, error bound %.3g): %w", target, c.errA, privacy.ErrUnreachable)
	}
	e2, err := c.pq.EpsilonForDelta(target - c.errB)
	if err != nil {
		return 0, fmt.Errorf("allocation: delta = %g not reached (add direction, error bound %.3g): %w", target, c.errB, privacy.ErrUnreachable)
	}
	return math.Max(e1, e2), nil
}
