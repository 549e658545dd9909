package pld

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/dsp/fourier"

	"github.com/dpsgd/dpsgd/internal/numeric"
	"github.com/dpsgd/dpsgd/privacy"
)

// windowTail is the mass the Chernoff bound may leave outside the FFT
// window on each side of a composition; it is added to ErrorBound.
const windowTail = 1e-18

// chernoffLambdas are the exponents λ (per unit of loss) over which the
// Chernoff bounds of the composition window are minimized.
var chernoffLambdas = func() [40]float64 {
	var ls [40]float64
	for k := range ls {
		ls[k] = 1e-3 * math.Pow(2, float64(k)/2)
	}
	return ls
}()

// logMGF returns an upper bound on ln Σ_i p_i e^{λ·i·Δ} (relative losses
// i·Δ from the first grid point). The factors e^{λ(i−i₀)Δ} are built by
// repeated multiplication from the end where they are 1 (relative error at
// most len(p)·2⁻⁵² < 1e-8, covered by the 1e-8 added to the result); if the
// scaled sum underflows, it is recomputed term by term in log space.
func logMGF(p []float64, interval, lambda float64) float64 {
	const slack = 1e-8
	n := len(p)
	var s, shift float64
	if lambda >= 0 {
		r, c := math.Exp(-lambda*interval), 1.0
		for i := n - 1; i >= 0; i-- {
			s += p[i] * c
			c *= r
		}
		shift = lambda * float64(n-1) * interval
	} else {
		r, c := math.Exp(lambda*interval), 1.0
		for _, v := range p {
			s += v * c
			c *= r
		}
	}
	if s > 1e-280 {
		return shift + math.Log(s) + slack
	}
	m := math.Inf(-1)
	for i, v := range p {
		if v > 0 {
			m = math.Max(m, math.Log(v)+lambda*float64(i)*interval)
		}
	}
	if math.IsInf(m, -1) {
		return m
	}
	s = 0
	for i, v := range p {
		if v > 0 {
			s += math.Exp(math.Log(v) + lambda*float64(i)*interval - m)
		}
	}
	return m + math.Log(s) + slack
}

// window returns the relative grid indices [kl, ku] ⊆ [0, kmax] of the
// composition outside of which the Chernoff bounds
//
//	P(S > u) ≤ e^{−λu + K(λ)},  P(S < l) ≤ e^{λl + K(−λ)},  λ > 0,
//
// (K the log moment generating function of the relative sum S, which is the
// sum of the logMGFs of the factors) leave at most windowTail on each side,
// and the two bounds on the mass left out (0 on a side the window reaches
// the end of the support).
func window(k func(lambda float64) float64, interval float64, kmax int) (kl, ku int, tauL, tauU float64) {
	lnTau := math.Log(windowTail)
	ku, kl = kmax, 0
	bestU, bestL := math.Inf(1), math.Inf(-1)
	var lamU, lamL, kU, kL float64
	for _, lam := range chernoffLambdas {
		kp, km := k(lam), k(-lam)
		if u := (kp - lnTau) / lam; u < bestU {
			bestU, lamU, kU = u, lam, kp
		}
		if l := -(km - lnTau) / lam; l > bestL {
			bestL, lamL, kL = l, lam, km
		}
	}
	if c := math.Ceil(bestU / interval); c < float64(kmax) {
		ku = max(int(c), 0)
		tauU = math.Min(1, math.Exp(-lamU*float64(ku)*interval+kU))
	}
	if f := math.Floor(bestL / interval); f > 0 {
		kl = min(int(f), ku)
		tauL = math.Min(1, math.Exp(lamL*float64(kl)*interval+kL))
	}
	return kl, ku, tauL, tauU
}

// convolve returns a ⊛ b (b != nil, n = 1) or the n-fold self-convolution of
// a (b == nil), over the Chernoff window, by FFT. Mass outside the window
// wraps around the FFT circle; its bound, and an allowance for roundoff
// estimated from the negative entries the inverse FFT produces (true masses
// are ≥ 0, so those entries measure the noise level), go to the absolute
// error bound.
//
// Error bounds compose as follows (δ is linear in the measure, every loss
// term lies in [0, 1], and a stored measure is (1+η)·p + e with |η| ≤ rel
// elementwise and e of positive and negative parts ≤ abs): rel_ab =
// (1+r_a)(1+r_b) − 1 and abs_ab = a_a(1+r_b) + a_b(1+r_a) + a_a·a_b; for n
// copies rel = (1+r)ⁿ − 1 and abs = (1+r+a)ⁿ − (1+r)ⁿ.
func convolve(a, b *PMF, n int) (*PMF, error) {
	out := &PMF{interval: a.interval, pessimistic: a.pessimistic}
	// The support's first index and extent, in float64: n·offset and
	// n·(len−1) overflow int for a huge n.
	var kmaxF, baseF float64
	var k func(float64) float64
	if b == nil {
		out.inf = -math.Expm1(float64(n) * math.Log1p(-a.inf))
		nf := float64(n)
		out.rel = math.Expm1(nf * math.Log1p(a.rel))
		out.err = math.Exp(nf*math.Log1p(a.rel+a.err)) - math.Exp(nf*math.Log1p(a.rel))
		kmaxF, baseF = nf*float64(len(a.probs)-1), nf*float64(a.offset)
		k = func(lam float64) float64 { return nf * logMGF(a.probs, a.interval, lam) }
	} else {
		out.inf = a.inf + b.inf - a.inf*b.inf
		out.rel = a.rel + b.rel + a.rel*b.rel
		out.err = a.err*(1+b.rel) + b.err*(1+a.rel) + a.err*b.err
		kmaxF, baseF = float64(len(a.probs)+len(b.probs)-2), float64(a.offset)+float64(b.offset)
		k = func(lam float64) float64 { return logMGF(a.probs, a.interval, lam) + logMGF(b.probs, a.interval, lam) }
	}
	if out.inf >= 1 || len(a.probs) == 0 || (b != nil && len(b.probs) == 0) {
		out.inf = math.Min(out.inf, 1)
		return out, nil
	}
	// The error bounds grow with the number of mechanisms whatever the
	// grid (64 ulps relative per Gaussian step: 1 after about 5e13 steps);
	// past 1 (or NaN, from ∞ − ∞) they certify nothing, and no σ or
	// interval changes that, so this is not ErrGridTooLarge.
	if !(out.rel < 1 && out.err < 1) {
		return nil, fmt.Errorf("pld: composition of %d mechanisms: numerical error bounds (relative %g, absolute %g) reach 1 and certify no δ; the rdp accountant has no such limit: %w",
			n, out.rel, out.err, privacy.ErrInvalidArgument)
	}
	if math.Abs(baseF) > 1<<50 || kmaxF > 1<<50 {
		return nil, fmt.Errorf("pld: composition of %d mechanisms overflows the loss grid (support from index %g over %g points): %w", n, baseF, kmaxF+1, ErrGridTooLarge)
	}
	kmax, base := int(kmaxF), int(baseF)
	kl, ku, tauL, tauU := window(k, a.interval, kmax)
	wlen := ku - kl + 1
	if wlen > maxGridLen {
		return nil, fmt.Errorf("pld: composition window of %d grid points (more than %d): %w", wlen, maxGridLen, ErrGridTooLarge)
	}
	size := numeric.FastFFTLen(wlen)
	fft := fourier.NewFFT(size)
	buf := make([]float64, size)
	fold := func(p []float64) []complex128 {
		clear(buf)
		for i, v := range p {
			buf[i%size] += v
		}
		return fft.Coefficients(nil, buf)
	}
	ca := fold(a.probs)
	if b == nil {
		numeric.PowPolar(ca, float64(n))
	} else {
		cb := fold(b.probs)
		for i := range ca {
			ca[i] *= cb[i]
		}
	}
	seq := fft.Sequence(buf, ca)
	out.offset = base + kl
	out.probs = make([]float64, wlen)
	inv := 1 / float64(size)
	var maxNeg float64
	for i := range out.probs {
		v := seq[(kl+i)%size] * inv
		if v < 0 {
			maxNeg = math.Max(maxNeg, -v)
			v = 0
		}
		out.probs[i] = v
	}
	out.err += tauL + tauU + float64(wlen)*maxNeg
	out.trim()
	return out, nil
}
