package personalized

import (
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/internal/numeric"
	"github.com/dpsgd/dpsgd/privacy"
)

// DefaultK is the default constant k of the logistic approximation
// Φ(x) ≈ 1/(1 + e^{−kx}) used by Lemma 1 (the appendix does
// not state k; 1.702 is the usual constant of this approximation).
const DefaultK = 1.702

// MaxDraws is the largest number of draws T that SelectionBound accepts. The
// exact quantile costs O(√(T·q(1−q))) operations (a few milliseconds at
// T = 10⁷, about a second at T = 2⁴⁰).
const MaxDraws = 1 << 40

// RoundsBound is Lemma 1's bound on how often one client is selected
// (the personalized-DP FL appendix, Lemma 1).
type RoundsBound struct {
	// Logistic is the appendix's bound T·q + ln((1−δ‴)/δ‴)·√(T·q(1−q))/k,
	// an approximation (normal approximation of the binomial, then the
	// logistic approximation of Φ) that can fall below the true quantile
	// when T·q is small.
	Logistic float64 `json:"logistic"`
	// Exact is the smallest r with P(Binomial(T, q) ≤ r) ≥ 1 − δ‴.
	Exact int `json:"exact"`
	// Used is min(T, max(⌈Logistic⌉, Exact)): never below the exact
	// quantile, so P(C > Used) ≤ δ‴ holds, and never above T, the most
	// selections T draws can make.
	Used int `json:"used"`
}

// SelectionBound returns Lemma 1's bound on the number of times Cᵢ ~
// Binomial(draws, q) that a client with selection probability q per draw is
// chosen in draws = T = K·R draws, exceeded with probability at most
// deltaTail = δ‴ (the personalized-DP FL appendix, Lemma 1, eq. 1–4):
// both the appendix's logistic approximation with constant k (0 means DefaultK)
// and the exact binomial (1 − δ‴) quantile, and the larger, which is the one
// to use. q = 1 gives T.
//
// The exact quantile sums the binomial upper tail downwards in log space from
// a point beyond which a Chernoff bound makes the rest negligible (and is
// added, so the computed tail is never too small), with each probability
// evaluated by Loader's saddle-point formula to full relative precision.
func SelectionBound(draws int, q, deltaTail, k float64) (RoundsBound, error) {
	if draws < 1 || draws > MaxDraws {
		return RoundsBound{}, fmt.Errorf("personalized: draws = %d out of range [1, 2^40]: %w", draws, privacy.ErrInvalidArgument)
	}
	if !(q > 0 && q <= 1) {
		return RoundsBound{}, fmt.Errorf("personalized: sample rate q = %g out of range (0, 1]: %w", q, privacy.ErrInvalidArgument)
	}
	if !(deltaTail > 0 && deltaTail < 1) {
		return RoundsBound{}, fmt.Errorf("personalized: deltaTail = %g out of range (0, 1): %w", deltaTail, privacy.ErrInvalidArgument)
	}
	if k == 0 {
		k = DefaultK
	}
	if !(k > 0) || math.IsInf(k, 1) {
		return RoundsBound{}, fmt.Errorf("personalized: logistic constant k = %g out of range (0, +Inf): %w", k, privacy.ErrInvalidArgument)
	}
	rb := RoundsBound{
		Logistic: logisticBound(draws, q, deltaTail, k),
		Exact:    binomialQuantile(draws, q, deltaTail),
	}
	rb.Used = rb.Exact
	if c := math.Ceil(rb.Logistic); c > float64(rb.Used) {
		rb.Used = int(math.Min(c, float64(draws)))
	}
	return rb, nil
}

// logisticBound is Lemma 1's Rᵢ = T·q + ln((1−δ)/δ)·√(T·q(1−q))/k
// (the personalized-DP FL appendix, eq. 1).
func logisticBound(draws int, q, delta, k float64) float64 {
	t := float64(draws)
	return t*q + (math.Log1p(-delta)-math.Log(delta))*math.Sqrt(t*q*(1-q))/k
}

// tieMargin is the relative margin by which binomialQuantile's computed
// tail must be below δ.
const tieMargin = 1e-10

// binomialQuantile returns the smallest r in [0, n] with P(X > r) ≤ delta
// for X ~ Binomial(n, q), i.e. P(X ≤ r) ≥ 1 − delta.
//
// From r0, the smallest r ≥ ⌊nq⌋ whose Chernoff bound
// P(X > r) ≤ exp(−n·KL((r+1)/n ‖ q)) is below delta·e⁻⁴⁰, it walks down:
// S(r−1) = S(r) + P(X = r), starting from S(r0) set to that bound, so the
// computed tail is an upper bound of the true one (up to rounding), and stops
// at the first r with S(r) > delta. Every term is computed in log space. A
// tail within 1e−10 relative of delta counts as above it: a near-tie that
// rounding cannot decide gives the larger, safe, r.
func binomialQuantile(n int, q, delta float64) int {
	if q == 1 {
		return n
	}
	// Accept r only when the computed tail is below δ by a relative margin
	// larger than its rounding error (≲ 1e−12), so near-ties resolve upwards.
	lnDelta := math.Log(delta) + math.Log1p(-tieMargin)
	target := lnDelta - 40
	// lnTail(r) bounds ln P(X > r) (Chernoff), −Inf for r ≥ n.
	lnTail := func(r int) float64 {
		if r >= n {
			return math.Inf(-1)
		}
		return -float64(n) * klBernoulli(float64(r+1)/float64(n), q)
	}
	lo := int(math.Floor(float64(n) * q))
	r0 := lo
	if lnTail(lo) > target {
		// lnTail is non-increasing above nq; find the smallest r with
		// lnTail(r) ≤ target in (lo, n].
		r0, _ = numeric.BisectInt(func(r int) (bool, error) { return lnTail(r) <= target, nil }, lo, n)
	}
	lnS := lnTail(r0) // ≥ ln P(X > r0)
	lr := math.Log1p(-q) - math.Log(q)
	const reanchor = 64
	var lp float64
	for r, i := r0, 0; ; r, i = r-1, i+1 {
		if lnS > lnDelta {
			return r + 1
		}
		if r == 0 {
			return 0
		}
		// lp = ln P(X = r): exact every reanchor steps, by the ratio
		// P(X = r−1)/P(X = r) = r/(n−r+1)·(1−q)/q in between.
		if i%reanchor == 0 {
			lp = logBinomPMF(n, r, q)
		}
		lnS = numeric.LogAddExp(lnS, lp) // S(r−1) = S(r) + P(X = r)
		lp += math.Log(float64(r)/float64(n-r+1)) + lr
	}
}

// klBernoulli returns KL(a ‖ q) = a ln(a/q) + (1−a) ln((1−a)/(1−q)) for
// a in [0, 1], q in (0, 1).
func klBernoulli(a, q float64) float64 {
	v := 0.0
	if a > 0 {
		v += a * math.Log(a/q)
	}
	if a < 1 {
		v += (1 - a) * (math.Log1p(-a) - math.Log1p(-q))
	}
	return math.Max(v, 0)
}

// logBinomPMF returns ln P(X = x) for X ~ Binomial(n, p), 0 ≤ x ≤ n,
// 0 < p < 1, to full relative precision (Loader 2000, "Fast and accurate
// computation of binomial probabilities"): the Stirling remainders of n!, x!
// and (n−x)! and the deviance terms bd0 replace ln C(n, x), whose
// evaluation through ln Γ loses about ln(n!)·2⁻⁵³ absolutely.
func logBinomPMF(n, x int, p float64) float64 {
	fn := float64(n)
	switch x {
	case 0:
		return fn * math.Log1p(-p)
	case n:
		return fn * math.Log(p)
	}
	fx, fy := float64(x), float64(n-x)
	lc := stirlerr(fn) - stirlerr(fx) - stirlerr(fy) - bd0(fx, fn*p) - bd0(fy, fn*(1-p))
	return lc + 0.5*math.Log(fn/(2*math.Pi*fx*fy))
}

// stirlerr returns ln(n!) − ln(√(2πn)·(n/e)ⁿ) for n ≥ 1: by ln Γ for small
// n, by the asymptotic series 1/(12n) − 1/(360n³) + 1/(1260n⁵) − … beyond 15,
// where its first omitted term is below 1e−16.
func stirlerr(n float64) float64 {
	if n <= 15 {
		lg, _ := math.Lgamma(n + 1)
		return lg - (n+0.5)*math.Log(n) + n - numeric.LogSqrt2Pi
	}
	const (
		s0 = 1.0 / 12
		s1 = 1.0 / 360
		s2 = 1.0 / 1260
		s3 = 1.0 / 1680
		s4 = 1.0 / 1188
	)
	nn := n * n
	return (s0 - (s1-(s2-(s3-s4/nn)/nn)/nn)/nn) / n
}

// bd0 returns the deviance x·ln(x/m) + m − x ≥ 0 without cancellation when x
// is close to m (Loader's series in v = (x−m)/(x+m)).
func bd0(x, m float64) float64 {
	if math.Abs(x-m) < 0.1*(x+m) {
		v := (x - m) / (x + m)
		s := (x - m) * v
		ej := 2 * x * v
		v2 := v * v
		for j := 1; j < 1000; j++ {
			ej *= v2
			s1 := s + ej/float64(2*j+1)
			if s1 == s {
				return s
			}
			s = s1
		}
		return s
	}
	return x*math.Log(x/m) + m - x
}
