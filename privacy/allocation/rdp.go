package allocation

import (
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/internal/numeric"
	"github.com/dpsgd/dpsgd/privacy"
)

// RDPMaxOrder is the largest Rényi order RDP accepts. The cost of RDP grows
// like α_max³/12 (≈ 15 ms at 256, ≈ 1 s at 1024).
const RDPMaxOrder = 1024

// DefaultRDPOrders returns a fresh copy of the default integer orders of
// the allocation RDP accountant: 2…64, 72, 80, 96, 112, 128, 160, 192, 224,
// 256 (72 orders). Only integer orders are supported: the remove direction
// is a finite sum only there.
func DefaultRDPOrders() []float64 {
	o := make([]float64, 0, 72)
	for a := 2; a <= 64; a++ {
		o = append(o, float64(a))
	}
	return append(o, 72, 80, 96, 112, 128, 160, 192, 224, 256)
}

// rdpCheckOrders validates integer orders in [2, RDPMaxOrder] and returns the largest.
func rdpCheckOrders(orders []float64) (int, error) {
	if len(orders) == 0 {
		return 0, fmt.Errorf("allocation: orders is empty (want integer orders in [2, %d]): %w", RDPMaxOrder, privacy.ErrInvalidArgument)
	}
	amax := 2
	for i, a := range orders {
		if !(a >= 2 && a <= RDPMaxOrder && a == math.Trunc(a)) {
			return 0, fmt.Errorf("allocation: orders[%d] = %g out of range (integers in [2, %d]): %w", i, a, RDPMaxOrder, privacy.ErrInvalidArgument)
		}
		amax = max(amax, int(a))
	}
	return amax, nil
}

// rdpLSE accumulates ln Σ eˣ in one pass (one exp per term).
type rdpLSE struct{ m, s float64 }

func rdpNewLSE() rdpLSE { return rdpLSE{m: math.Inf(-1)} }

func (a *rdpLSE) add(x float64) {
	switch {
	case math.IsInf(x, -1):
	case x <= a.m:
		a.s += math.Exp(x - a.m)
	default:
		a.s = a.s*math.Exp(a.m-x) + 1
		a.m = x
	}
}

func (a *rdpLSE) log() float64 {
	if a.s == 0 {
		return math.Inf(-1)
	}
	return a.m + math.Log(a.s)
}

// rdpRemoveAll returns D_α(Q_M‖P_M) for α = 0…amax (entries 0 and 1 unused;
// only those with need[α] when need is non-nil),
// the Rényi divergence of one epoch in the remove direction
// (the formula is derived here and checked against Feldman–Shenfeld's
// allocation_rdp_remove):
//
//	E_P[L^α] = M^{−α} Σ_{λ ⊢ α, ℓ(λ) ≤ M} (M)_ℓ/Π m_i! · α!/Π λ_j! · e^{Σ λ_j(λ_j−1)/(2σ²)}.
//
// The sum over partitions is α!·M^{−α}·[x^α] f(x)^M with the exponential
// generating function f(x) = Σ_k w_k x^k/k!, w_k = e^{k(k−1)t²/2} = E Y^k
// (L^α expanded multinomially; the partition sum groups the terms). Writing
// f = eˣ + d, d_k = (w_k − 1)/k! ≥ 0 (d₀ = d₁ = 0), and noting that eˣ alone
// gives E L^α = 1,
//
//	E_P[L^α] − 1 = α!·M^{−α} Σ_{j=1}^{min(M, α/2)} C(M,j) Σ_n [xⁿ]dʲ · (M−j)^{α−n}/(α−n)!,
//
// a sum of non-negative terms, evaluated in log space: no cancellation when
// E L^α − 1 is tiny (large M or σ) and no overflow when it is huge (small
// σ). The powers dʲ are built by convolution once for all orders, O(α³/12).
func rdpRemoveAll(t2 float64, rounds, amax int, need []bool) []float64 {
	out := make([]float64, amax+1)
	if math.IsInf(t2, 1) || math.IsNaN(t2) {
		for i := range out {
			out[i] = math.Inf(1)
		}
		return out
	}
	lgam := make([]float64, amax+1)
	for k := range lgam {
		lgam[k], _ = math.Lgamma(float64(k + 1)) // ln k!
	}
	logd := make([]float64, amax+1)
	logd[0], logd[1] = math.Inf(-1), math.Inf(-1)
	for k := 2; k <= amax; k++ {
		fk := float64(k)
		logd[k] = numeric.LogExpm1(fk*(fk-1)*t2/2) - lgam[k]
	}
	jmax := min(rounds, amax/2)
	// pw[j][n] = ln [xⁿ] dʲ, n ≥ 2j.
	pw := make([][]float64, jmax+1)
	pw[1] = logd
	for j := 2; j <= jmax; j++ {
		p := make([]float64, amax+1)
		for n := range p {
			p[n] = math.Inf(-1)
		}
		prev := pw[j-1]
		for n := 2 * j; n <= amax; n++ {
			acc := rdpNewLSE()
			for k := 2; k <= n-2*(j-1); k++ {
				acc.add(logd[k] + prev[n-k])
			}
			p[n] = acc.log()
		}
		pw[j] = p
	}
	m := float64(rounds)
	lnM := math.Log(m)
	// lc[j] = ln(C(M,j)/M^j) = Σ_{i<j} log1p(−i/M) − ln j!.
	lc := make([]float64, jmax+1)
	for j := 1; j <= jmax; j++ {
		lc[j] = lc[j-1] + math.Log1p(-float64(j-1)/m)
	}
	for j := 1; j <= jmax; j++ {
		lc[j] -= lgam[j]
	}
	for a := 2; a <= amax; a++ {
		if need != nil && !need[a] {
			continue
		}
		acc := rdpNewLSE()
		for j := 1; j <= min(jmax, a/2); j++ {
			l1j := math.Log1p(-float64(j) / m) // ln((M−j)/M), −Inf at j = M
			for n := 2 * j; n <= a; n++ {
				// α!·M^{−α}·C(M,j)·[xⁿ]dʲ·(M−j)^{α−n}/(α−n)! with
				// M^{−α} = M^{−j}·M^{−(α−n)}·M^{−(n−j)}.
				x := lc[j] - float64(n-j)*lnM + pw[j][n] - lgam[a-n]
				if a > n {
					x += float64(a-n) * l1j
				}
				acc.add(x)
			}
		}
		r := numeric.Softplus(acc.log()+lgam[a]) / float64(a-1)
		if math.IsNaN(r) {
			r = math.Inf(1)
		}
		out[a] = r
	}
	return out
}

// rdpLogMu4 returns ln E(Y−1)⁴ = ln(e^{6x} − 4e^{3x} + 6eˣ − 3), x = t²,
// by its power series Σ_{n≥2}(6ⁿ − 4·3ⁿ + 6)xⁿ/n!
// (positive terms) below x = ½, factored in log space above.
func rdpLogMu4(x float64) float64 {
	if x >= 0.5 {
		return 6*x + math.Log(1-4*math.Exp(-3*x)+6*math.Exp(-5*x)-3*math.Exp(-6*x))
	}
	sum, p6, p3, xn, fact := 0.0, 36.0, 9.0, x*x, 2.0
	for n := 2; n <= 60; n++ {
		if n > 2 {
			p6 *= 6
			p3 *= 3
			xn *= x
			fact *= float64(n)
		}
		sum += (p6 - 4*p3 + 6) * xn / fact
	}
	return math.Log(sum)
}

// rdpX0 are the thresholds x₀ tried by rdpAdd.
var rdpX0 = [...]float64{0.3, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 0.98, 0.99}

// rdpAdd returns an upper bound on D_α(P_M‖Q_M), the other (add) direction
// (proven here). With β = α − 1, D_α(P‖Q) = ln E_P[L^{−β}]/β, and it is the
// smaller of two bounds:
//
// (a) AM–GM: L ≥ (Π Yⱼ)^{1/M} = e^{(t/M)ΣXⱼ − t²/2}, so
// E_P L^{−β} ≤ e^{βt²/2 + β²t²/(2M)} and D ≤ (t²/2)(1 + β/M) (the "add" RDP
// of Feldman–Shenfeld's code; exact at M = 1, but it does not vanish as M grows).
//
// (b) Taylor + tail, for a threshold x₀ ∈ (0, 1): for x ≥ x₀,
// x^{−β} ≤ 1 − β(x−1) + ½β(β+1)(x−1)² + K₃|x−1|³ with
// K₃ = β(β+1)(β+2)x₀^{−β−3}/6 (Lagrange remainder; the cubic term is ≤ 0
// for x ≥ 1), and the right side is ≥ 0 for x < 1, so
// E[L^{−β}1{L ≥ x₀}] ≤ 1 + ½β(β+1)·b/M + K₃·E|L−1|³, with
// E|L−1|³ ≤ (E(L−1)⁴)^{3/4} = ((μ₄ + 3(M−1)b²)/M³)^{3/4}. Below x₀,
// Cauchy–Schwarz gives E[L^{−β}1{L < x₀}] ≤ √(E L^{−2β})·√P(L < x₀) with
// E L^{−2β} ≤ e^{βt² + 2β²t²/M} (AM–GM) and the Chernoff bound
// P(L < x₀) ≤ e^{M(s x₀ + ln(1 − s + s²e^{t²}/2))}, s = (1−x₀)e^{−t²}
// (e^{−y} ≤ 1 − y + y²/2 for y ≥ 0). The best x₀ of a fixed grid is used.
// As M → ∞ bound (b) is αb/(2M) + O(M^{−3/2}), the leading term of the
// remove direction.
func rdpAdd(t2 float64, rounds int, alpha float64) float64 {
	beta := alpha - 1
	m := float64(rounds)
	amgm := t2 / 2 * (1 + beta/m)
	if math.IsInf(t2, 1) {
		return math.Inf(1)
	}
	lnM := math.Log(m)
	lb := numeric.LogExpm1(t2)
	l1 := math.Log(0.5*beta*(beta+1)) + lb - lnM
	l4 := rdpLogMu4(t2)
	if rounds > 1 {
		l4 = numeric.LogAddExp(l4, math.Log(3)+math.Log(m-1)+2*lb)
	}
	lm3 := 0.75 * (l4 - 3*lnM)
	lk3 := math.Log(beta * (beta + 1) * (beta + 2) / 6)
	le2 := beta*t2 + 2*beta*beta*t2/m
	iw := math.Exp(-t2)
	best := amgm
	for _, x0 := range rdpX0 {
		l2 := lk3 - (beta+3)*math.Log(x0) + lm3
		g := (1-x0)*x0*iw + math.Log1p(-(1-x0)*iw+(1-x0)*(1-x0)*iw/2)
		l3 := 0.5*le2 + 0.5*m*math.Min(g, 0)
		b := numeric.Softplus(numeric.LogAddExp(numeric.LogAddExp(l1, l2), l3)) / beta
		if b < best {
			best = b
		}
	}
	return best
}

// rdpValidate checks σ, M and orders and returns the largest order.
func rdpValidate(sigma float64, rounds int, orders []float64) (int, error) {
	if err := checkSigmaRounds(sigma, rounds); err != nil {
		return 0, err
	}
	return rdpCheckOrders(orders)
}

// RDPRemove returns, for each integer order α in orders (2…RDPMaxOrder), the
// exact Rényi divergence D_α(Q_M‖P_M) of one epoch of random allocation (M =
// rounds rounds, noise multiplier σ) in the remove direction, by the partition
// formula of rdpRemoveAll evaluated as a positive series (see rdpRemoveAll). α
// = 2 gives ln(1 + (e^{1/σ²}−1)/M) (the χ² of ChiSquareTV), M = 1 the Gaussian
// α/(2σ²). A σ so small that 1/σ² overflows gives +Inf.
func RDPRemove(sigma float64, rounds int, orders []float64) ([]float64, error) {
	amax, err := rdpValidate(sigma, rounds, orders)
	if err != nil {
		return nil, err
	}
	need := make([]bool, amax+1)
	for _, a := range orders {
		need[int(a)] = true
	}
	all := rdpRemoveAll(1/(sigma*sigma), rounds, amax, need)
	out := make([]float64, len(orders))
	for i, a := range orders {
		out[i] = all[int(a)]
	}
	return out, nil
}

// RDPAdd returns, for each integer order α in orders, a proven upper bound
// on D_α(P_M‖Q_M), the add direction of one epoch (see rdpAdd for the
// proof). It equals α/(2σ²) at M = 1.
func RDPAdd(sigma float64, rounds int, orders []float64) ([]float64, error) {
	if _, err := rdpValidate(sigma, rounds, orders); err != nil {
		return nil, err
	}
	t2 := 1 / (sigma * sigma)
	out := make([]float64, len(orders))
	for i, a := range orders {
		out[i] = rdpAdd(t2, rounds, a)
	}
	return out, nil
}

// RDP returns the per-epoch Rényi DP curve of random allocation with
// M = rounds rounds and noise multiplier σ under zero-out adjacency:
// at each integer order α in orders (2…RDPMaxOrder),
//
//	max{ D_α(Q_M‖P_M) (exact, RDPRemove), bound on D_α(P_M‖Q_M) (RDPAdd) }.
//
// (ε, δ)-DP needs both hockey-stick divergences below δ, and no proof that
// the remove direction dominates is known to us for this pair, so both
// directions enter. E epochs compose additively (E times the curve); convert
// with privacy.RDPToEpsilon / privacy.RDPToDelta. Which direction is larger
// depends on (σ, M, α): the remove value jumps once a single round can hold
// all α "collisions" (e^{α(α−1)/(2σ²)}M^{1−α} dominates), while the add bound
// exceeds the true add divergence by a factor that tends to 1 as M → ∞ at
// fixed α (it is up to ~15× at σ = 5, M = 1000, α = 64).
func RDP(sigma float64, rounds int, orders []float64) ([]float64, error) {
	rem, err := RDPRemove(sigma, rounds, orders)
	if err != nil {
		return nil, err
	}
	t2 := 1 / (sigma * sigma)
	for i, a := range orders {
		rem[i] = math.Max(rem[i], rdpAdd(t2, rounds, a))
	}
	return rem, nil
}
