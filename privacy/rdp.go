package privacy

import (
	"fmt"
	"math"
	"sort"

	"github.com/dpsgd/dpsgd/internal/numeric"
)

// MaxOrder is the largest Rényi order accepted.
const MaxOrder = 1 << 20

// DefaultOrders returns a fresh copy of the default grid of Rényi orders: a
// superset of Opacus's grid (1.1, 1.2, …, 10.9 and 12…63) and of TF
// Privacy's (which adds 1.25, 1.75, …, 128, 256, 512), with 11, 64 and a
// denser tail up to 1024 (169 orders in all). Being a superset, it never
// reports a larger ε than either library. Small orders matter for small ε or
// large δ, large ones for small σ or large ε.
func DefaultOrders() []float64 {
	var o []float64
	for x := 1; x < 100; x++ {
		o = append(o, 1+float64(x)/10)
	}
	o = append(o, 1.25, 1.75, 2.25, 2.75, 3.25, 3.75)
	for a := 11; a <= 64; a++ {
		o = append(o, float64(a))
	}
	o = append(o, 80, 96, 128, 160, 192, 256, 384, 512, 768, 1024)
	sort.Float64s(o)
	return o
}

// checkOrders validates a grid of Rényi orders: non-empty, each in (1, MaxOrder].
func checkOrders(orders []float64) error {
	if len(orders) == 0 {
		return fmt.Errorf("privacy: orders is empty (want at least one order in (1, %d]): %w", MaxOrder, ErrInvalidArgument)
	}
	for i, a := range orders {
		if !(a > 1 && a <= MaxOrder) {
			return fmt.Errorf("privacy: orders[%d] = %g out of range (1, %d]: %w", i, a, MaxOrder, ErrInvalidArgument)
		}
	}
	return nil
}

// ComposeRDP returns the Rényi DP curve of n ≥ 0 adaptive compositions of a
// mechanism whose curve is rdp: n·ε_RDP(α) at each order (composition adds
// RDP; Mironov 2017 Prop. 1). n = 0 gives zeros, whatever rdp holds.
func ComposeRDP(rdp []float64, n int) []float64 {
	out := make([]float64, len(rdp))
	if n <= 0 {
		return out
	}
	for i, r := range rdp {
		out[i] = float64(n) * r
	}
	return out
}

// PoissonGaussianRDP returns the per-step Rényi DP ε_RDP(α) of the
// Poisson-subsampled Gaussian mechanism (sampling rate q, noise multiplier σ,
// sensitivity 1, add/remove adjacency) at each order α of orders
// (Mironov, Talwar & Zhang 2019, "Rényi Differential
// Privacy of the Sampled Gaussian Mechanism", §3.3):
//
//	ε_RDP(α) = ln A_α / (α − 1),  A_α = E_{z∼N(0,σ²)}[(1 − q + q·e^{(2z−1)/(2σ²)})^α].
//
// q = 1 gives the plain Gaussian α/(2σ²). T steps compose to T·ε_RDP(α).
// Integer α use the binomial sum, fractional α the two-series formula; both
// in log space (see logAInt and logAFrac). Values are clamped at 0; a σ so
// small that the computation overflows gives +Inf (no privacy), never 0.
func PoissonGaussianRDP(q, sigma float64, orders []float64) ([]float64, error) {
	if err := checkRate(q); err != nil {
		return nil, err
	}
	if err := checkSigma(sigma); err != nil {
		return nil, err
	}
	if err := checkOrders(orders); err != nil {
		return nil, err
	}
	rdp := make([]float64, len(orders))
	for i, a := range orders {
		rdp[i] = rdpPoissonGaussian(q, sigma, a)
	}
	return rdp, nil
}

// rdpPoissonGaussian is PoissonGaussianRDP at one valid order.
func rdpPoissonGaussian(q, sigma, alpha float64) float64 {
	if q == 1 {
		return alpha / (2 * sigma * sigma)
	}
	if math.IsInf(1/(sigma*sigma), 1) {
		return math.Inf(1)
	}
	var la float64
	if alpha == math.Trunc(alpha) {
		la = logAInt(q, sigma, int(alpha))
	} else {
		la = logAFrac(q, sigma, alpha)
	}
	r := la / (alpha - 1)
	switch {
	case math.IsNaN(r): // σ so small that the exponents overflow: no privacy
		return math.Inf(1)
	case r < 0: // rounding at tiny q
		return 0
	}
	return r
}

// logAInt returns ln A_α for integer α ≥ 2 and 0 < q < 1 (Mironov,
// Talwar & Zhang 2019): A_α = Σ_{k=0}^{α} C(α,k)(1−q)^{α−k} q^k e^{(k²−k)/(2σ²)}.
//
// Since Σ_k C(α,k)(1−q)^{α−k}q^k = 1 and the k = 0, 1 exponents vanish,
//
//	A_α − 1 = Σ_{k=2}^{α} C(α,k)(1−q)^{α−k} q^k (e^{(k²−k)/(2σ²)} − 1),
//
// a sum of positive terms, evaluated by log-sum-exp; ln A_α = numeric.Softplus(ln(A_α−1)).
// This keeps full relative precision when A_α − 1 is tiny (q = 1e-6, σ = 100)
// and cannot overflow when it is huge (σ = 0.3, α = 1024).
func logAInt(q, sigma float64, alpha int) float64 {
	lq, l1q := math.Log(q), math.Log1p(-q)
	inv2s2 := 1 / (2 * sigma * sigma)
	fa := float64(alpha)
	// log C(α,k) by recurrence, exact enough (relative error ~ k·ulp).
	logc := math.Log(fa * (fa - 1) / 2) // k = 2
	// Σ e^{t_k} kept as e^m·s with m the running maximum: one exp per term.
	m, s := math.Inf(-1), 0.0
	for k := 2; k <= alpha; k++ {
		fk := float64(k)
		if k > 2 {
			logc += math.Log((fa - fk + 1) / fk)
		}
		t := logc + fk*lq + (fa-fk)*l1q + numeric.LogExpm1((fk*fk-fk)*inv2s2)
		if t <= m {
			s += math.Exp(t - m)
		} else {
			s = s*math.Exp(m-t) + 1
			m = t
		}
	}
	return numeric.Softplus(m + math.Log(s))
}

// fracStop is ln of the relative tolerance (e^{-25} ≈ 1.4e-11) of the
// fractional-order series, relative to A_α − 1 (which ln A_α is close to when
// small); fracFloor (2^-60) is an absolute floor below the resolution of A_α.
const (
	fracStop  = -25
	fracFloor = -60 * math.Ln2
)

// fracMaxTerms caps the fractional-order series; stopping there still gives
// an upper bound (see logAFrac).
const fracMaxTerms = 1 << 18

// logAFrac returns ln A_α for fractional α > 1 and 0 < q < 1 by the two-series
// formula of Mironov, Talwar & Zhang 2019 §3.3. Split the
// integral defining A_α at z₀ = σ² ln(1/q − 1) + 1/2, where q·e^{(2z−1)/(2σ²)}
// = 1 − q, and expand the binomial on each side:
//
//	A_α = Σ_{i≥0} C(α,i) [ q^i (1−q)^{α−i} e^{(i²−i)/(2σ²)} Φ((z₀−i)/σ)
//	                     + q^{α−i} (1−q)^i e^{(j²−j)/(2σ²)} Φ((j−z₀)/σ) ],  j = α − i.
//
// The terms are summed in log space, positive and negative parts apart.
//
// Remainder. C(α,i) alternates in sign for i > ⌊α⌋. With q/(1−q) =
// e^{−(z₀−1/2)/σ²} the bracket equals (1−q)^α e^{−z₀²/(2σ²)} (2π)^{−1/2}
// [R((i−z₀)/σ) + R((z₀−j)/σ)], R the Mills ratio Φ(−x)/φ(x), which is
// decreasing and log-convex; |C(α,i)| has the increasing ratio (i−α)/(i+1) < 1,
// so it is decreasing and log-convex too. Hence the magnitudes aᵢ of the
// terms are decreasing and convex there, and the remainder after term n of an
// alternating series with such terms has the sign of term n+1 and a
// magnitude in [a_{n+1}/2, a_{n+1} − a_{n+2}/2]. The sum stops when that
// interval is narrower than e^{-25}·(A_α − 1) (plus a floor of 2^-60) and
// a_{n+1} < e^{-25}·A_α, and adds the upper end of the interval (for a
// negative remainder, −a_{n+1}/2): the result is an upper bound on A_α. The
// second condition alone (monotone terms) bounds the error by e^{-25}·A_α.
func logAFrac(q, sigma, alpha float64) float64 {
	lq, l1q := math.Log(q), math.Log1p(-q)
	inv2s2 := 1 / (2 * sigma * sigma)
	z0 := sigma*sigma*(l1q-lq) + 0.5
	fl := math.Floor(alpha)
	// term returns ln|term i| given ln|C(α,i)|.
	term := func(i, logc float64) float64 {
		j := alpha - i
		s0 := logc + i*lq + j*l1q + (i*i-i)*inv2s2 + numeric.LogNormCDF((z0-i)/sigma)
		s1 := logc + j*lq + i*l1q + (j*j-j)*inv2s2 + numeric.LogNormCDF((j-z0)/sigma)
		return numeric.LogAddExp(s0, s1)
	}
	pos, neg := math.Inf(-1), math.Inf(-1)
	logc := 0.0 // ln|C(α,i)|
	s := term(0, logc)
	for i := 0; ; i++ {
		fi := float64(i)
		logcNext := logc + math.Log(math.Abs(alpha-fi)/(fi+1))
		sNext := term(fi+1, logcNext)
		if math.IsNaN(sNext) { // exponents overflowed (σ tiny): no bound
			return math.NaN()
		}
		negative := fi > fl+1 && int(fi-fl-1)%2 == 1
		if fi > fl { // alternating, decreasing, convex region
			lnS := numeric.LogSubExp(pos, neg)
			width := numeric.LogSubExp(s, sNext) - math.Ln2
			scale := fracFloor
			if lnS > 0 {
				scale = numeric.LogAddExp(numeric.LogExpm1(lnS)+fracStop, fracFloor)
			}
			if (width < scale && s < lnS+fracStop) || i >= fracMaxTerms {
				if negative {
					neg = numeric.LogAddExp(neg, s-math.Ln2)
				} else {
					pos = numeric.LogAddExp(pos, numeric.LogSubExp(s, sNext-math.Ln2))
				}
				return numeric.LogSubExp(pos, neg)
			}
		}
		if negative {
			neg = numeric.LogAddExp(neg, s)
		} else {
			pos = numeric.LogAddExp(pos, s)
		}
		logc, s = logcNext, sNext
	}
}

// RDPToEpsilon converts an RDP curve (rdp[i] at orders[i], already composed
// over all steps) to ε for a target δ with the improved conversion of Balle,
// Barthe, Gaboardi, Hsu & Sato 2020, Thm 21 (the form in
// Opacus get_privacy_spent and dp_accounting):
//
//	ε = min_α [ ε_RDP(α) + ln((α−1)/α) − (ln δ + ln α)/(α − 1) ].
//
// It also uses the bound TV ≤ √(1 − e^{−KL}) (Bretagnolle–Huber) with
// KL ≤ ε_RDP(α): when δ ≥ √(1 − e^{−ε_RDP(α)}) the mechanism is (0, δ)-DP.
// The result is clamped at 0 and order is the minimizing α. Orders whose
// RDP is +Inf are skipped; if all are, ε = +Inf and order is NaN.
func RDPToEpsilon(orders, rdp []float64, delta float64) (eps, order float64, err error) {
	if err := checkCurve(orders, rdp); err != nil {
		return 0, 0, err
	}
	if err := checkDelta("delta", delta); err != nil {
		return 0, 0, err
	}
	klMax := -math.Log1p(-delta * delta) // KL below this gives (0, δ)
	ld := math.Log(delta)
	eps, order = math.Inf(1), math.NaN()
	for i, a := range orders {
		r := rdp[i]
		if math.IsInf(r, 1) {
			continue
		}
		var e float64
		if r < klMax {
			e = 0
		} else {
			e = r + math.Log1p(-1/a) - (ld+math.Log(a))/(a-1)
		}
		if e < eps {
			eps, order = e, a
		}
	}
	return math.Max(eps, 0), order, nil
}

// RDPToEpsilonClassic is the classic conversion of Mironov 2017, Prop. 3:
// ε = min_α [ε_RDP(α) + ln(1/δ)/(α − 1)]. It is never
// smaller than RDPToEpsilon and is kept for comparison with published numbers.
func RDPToEpsilonClassic(orders, rdp []float64, delta float64) (eps, order float64, err error) {
	if err := checkCurve(orders, rdp); err != nil {
		return 0, 0, err
	}
	if err := checkDelta("delta", delta); err != nil {
		return 0, 0, err
	}
	ld := math.Log(delta)
	eps, order = math.Inf(1), math.NaN()
	for i, a := range orders {
		if e := rdp[i] - ld/(a-1); e < eps {
			eps, order = e, a
		}
	}
	return eps, order, nil
}

// RDPToDelta converts an RDP curve to δ at a given ε ≥ 0 with the inverse of
// the improved conversion (Balle et al. 2020 Thm 21; Canonne, Kamath &
// Steinke 2020 Prop. 12, as in dp_accounting compute_delta):
//
//	δ = min_α exp( (α−1)(ε_RDP(α) − ε + ln(1 − 1/α)) − ln α ),
//
// and the KL bound δ ≤ √(1 − e^{−ε_RDP(α)}), capped at 1. For every order,
// RDPToDelta(RDPToEpsilon(δ)) = δ wherever the latter is positive.
func RDPToDelta(orders, rdp []float64, eps float64) (delta, order float64, err error) {
	if err := checkCurve(orders, rdp); err != nil {
		return 0, 0, err
	}
	if err := checkEps(eps); err != nil {
		return 0, 0, err
	}
	best, order := math.Inf(1), math.NaN()
	for i, a := range orders {
		r := rdp[i]
		if math.IsInf(r, 1) {
			continue
		}
		ld := 0.5 * math.Log1p(-math.Exp(-r))
		if b := (a-1)*(r-eps+math.Log1p(-1/a)) - math.Log(a); b < ld {
			ld = b
		}
		if ld < best {
			best, order = ld, a
		}
	}
	if math.IsNaN(order) {
		return 1, order, nil
	}
	return math.Min(1, math.Exp(best)), order, nil
}

// checkCurve validates an RDP curve: orders valid, same length, rdp ≥ 0.
func checkCurve(orders, rdp []float64) error {
	if err := checkOrders(orders); err != nil {
		return err
	}
	if len(rdp) != len(orders) {
		return fmt.Errorf("privacy: len(rdp) = %d, want len(orders) = %d: %w", len(rdp), len(orders), ErrInvalidArgument)
	}
	for i, r := range rdp {
		if !(r >= 0) {
			return fmt.Errorf("privacy: rdp[%d] = %g out of range [0, +Inf]: %w", i, r, ErrInvalidArgument)
		}
	}
	return nil
}
