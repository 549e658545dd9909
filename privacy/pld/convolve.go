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

// mgfTable holds the logMGFs of one PMF at the exponents ±λ of
// chernoffLambdas: pos[k] at +λ_k, neg[k] at −λ_k.
type mgfTable struct{ pos, neg [len(chernoffLambdas)]float64 }

// mgfs returns the logMGFs of p's masses at ±chernoffLambdas, computed on
// the first call and kept: every composition with p (an accountant's
// single step composed once per epoch asked, say) needs the same 80 values.
func (p *PMF) mgfs() *mgfTable {
	p.mgfOnce.Do(func() { p.mgf = logMGFs(p.probs, p.interval) })
	return p.mgf
}

// logMGFs returns logMGF(p, interval, ±λ) for every λ of chernoffLambdas,
// bit for bit: the sums of four exponents are taken in one pass over the
// masses (their rounding chains are independent, so the processor overlaps
// them), each in the order and with the roundings of logMGF.
func logMGFs(p []float64, interval float64) *mgfTable {
	var t mgfTable
	// The factor of one grid step, e^{−λΔ}, is the same in both directions
	// (logMGF forms it as e^{λΔ} with λ < 0, the same float64).
	var r [len(chernoffLambdas)]float64
	for k, lam := range chernoffLambdas {
		r[k] = math.Exp(-lam * interval)
	}
	var sp, sn [len(chernoffLambdas)]float64
	decayingSums(reversed(p), r[:], sp[:])
	decayingSums(p, r[:], sn[:])
	for k, lam := range chernoffLambdas {
		t.pos[k] = logMGFFromSum(p, interval, lam, sp[k])
		t.neg[k] = logMGFFromSum(p, interval, -lam, sn[k])
	}
	return &t
}

// reversed returns a reversed copy of p.
func reversed(p []float64) []float64 {
	out := make([]float64, len(p))
	for i, v := range p {
		out[len(p)-1-i] = v
	}
	return out
}

// logMGF returns an upper bound on ln Σ_i p_i e^{λ·i·Δ} (relative losses
// i·Δ from the first grid point). The factors e^{λ(i−i₀)Δ} are built by
// repeated multiplication from the end where they are 1 (relative error at
// most len(p)·2⁻⁵² < 1e-8, covered by the 1e-8 added to the result); if the
// scaled sum underflows, it is recomputed term by term in log space.
func logMGF(p []float64, interval, lambda float64) float64 {
	var s float64
	if lambda >= 0 {
		s = decayingSum(reversed(p), math.Exp(-lambda*interval), maxAbs(p), 0, 0, 1)
	} else {
		s = decayingSum(p, math.Exp(lambda*interval), maxAbs(p), 0, 0, 1)
	}
	return logMGFFromSum(p, interval, lambda, s)
}

// logMGFFromSum finishes logMGF from the sum s of the masses scaled to 1 at
// the end where the factors start (decayingSum).
func logMGFFromSum(p []float64, interval, lambda, s float64) float64 {
	const slack = 1e-8
	var shift float64
	if lambda >= 0 {
		shift = lambda * float64(len(p)-1) * interval
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

// decayingSums sets out[k] = decayingSum(p, rs[k], maxAbs(p), 0, 0, 1) for
// every k, four factors at a time in one pass while all four are normal
// and not all of their sums are final (negligible), then each on its own.
// Rounding is monotone, so a factor with the smallest r of the four is,
// after every step, the smallest of the four: while it is normal, so are
// the others, and only it is tested.
func decayingSums(p []float64, rs []float64, out []float64) {
	const tiny = 0x1p-1022 // the smallest normal float64
	pmax := maxAbs(p)
	k := 0
	for ; k+4 <= len(rs); k += 4 {
		// The factors are read from memory in the loops: with them in
		// registers, the four sums and factors no longer fit and spill.
		rr := (*[4]float64)(rs[k : k+4])
		var s0, s1, s2, s3 float64
		c0, c1, c2, c3 := 1.0, 1.0, 1.0, 1.0
		j := 0
		for j < len(p) && c0 >= tiny && c1 >= tiny && c2 >= tiny && c3 >= tiny {
			if negligible(rr[0], pmax, s0, c0) && negligible(rr[1], pmax, s1, c1) &&
				negligible(rr[2], pmax, s2, c2) && negligible(rr[3], pmax, s3, c3) {
				break
			}
			end := min(len(p), j+negligibleEvery)
			if rr[3] <= rr[0] && rr[3] <= rr[1] && rr[3] <= rr[2] {
				for ; j < end && c3 >= tiny; j++ {
					v := p[j]
					s0 += v * c0
					s1 += v * c1
					s2 += v * c2
					s3 += v * c3
					c0 *= rr[0]
					c1 *= rr[1]
					c2 *= rr[2]
					c3 *= rr[3]
				}
			} else {
				for ; j < end && c0 >= tiny && c1 >= tiny && c2 >= tiny && c3 >= tiny; j++ {
					v := p[j]
					s0 += v * c0
					s1 += v * c1
					s2 += v * c2
					s3 += v * c3
					c0 *= rr[0]
					c1 *= rr[1]
					c2 *= rr[2]
					c3 *= rr[3]
				}
			}
		}
		out[k] = decayingSum(p, rr[0], pmax, j, s0, c0)
		out[k+1] = decayingSum(p, rr[1], pmax, j, s1, c1)
		out[k+2] = decayingSum(p, rr[2], pmax, j, s2, c2)
		out[k+3] = decayingSum(p, rr[3], pmax, j, s3, c3)
	}
	for ; k < len(rs); k++ {
		out[k] = decayingSum(p, rs[k], pmax, 0, 0, 1)
	}
}

// negligibleEvery is how many terms the loops of decayingSum(s) add between
// two tests of negligible.
const negligibleEvery = 64

// maxAbs returns max |p_i| (0 for no p, NaN if some p_i is NaN).
func maxAbs(p []float64) float64 {
	var m float64
	for _, v := range p {
		if math.IsNaN(v) {
			return v
		}
		m = math.Max(m, math.Abs(v))
	}
	return m
}

// negligible says whether no term left of a decaying sum (decayingSum) can
// change its running sum s: with the factor c and every |p_i| ≤ pmax, each
// remaining term is |fl(p_i·c_i)| ≤ fl(pmax·c)·(1 + 2⁻⁵²) + 2⁻¹⁰⁷⁵ (c only
// decreases for r ≤ 1, and rounding is monotone), and fl(pmax·c) ≤ |s|·2⁻⁵⁶
// with |s| ≥ 2⁻⁹⁰⁰ (normal, finite) makes that less than half an ulp of s
// (≥ |s|·2⁻⁵⁴), so s + term rounds back to s, which therefore never moves.
// A NaN or infinite pmax never passes.
func negligible(r, pmax, s, c float64) bool {
	a := math.Abs(s)
	return r <= 1 && a >= 0x1p-900 && a <= math.MaxFloat64 && c*pmax <= a*0x1p-56
}

// decayingSum returns Σ p_i·c_i in floating point, from the first index
// up, where the factor starts at 1 and is multiplied by r ≥ 0 after each
// term: exactly the sum of the plain loop
//
//	s, c := 0.0, 1.0
//	for i := range p { s += p[i]*c; c *= r }
//
// rounding for rounding, resumed after j terms with the running s and c
// (j = 0, s = 0, c = 1 for the whole sum); pmax is maxAbs(p). It differs
// from the plain loop only in speed. It stops as soon as the terms left
// cannot move s (negligible), tested every 64 terms. Otherwise: once c has
// decayed below the smallest normal number, every product and every update
// of c is a subnormal operation, tens of times slower than a normal one on
// common CPUs, and with r > 1/2 the update c·r rounds back to c at some
// multiple k of the smallest subnormal 2⁻¹⁰⁷⁴, where c stays for the rest
// of the sum. From that point a term with |p_i| < 0.25/k has an exact
// product |p_i·c| < 2⁻¹⁰⁷⁵, which rounds to ±0 and leaves s (never −0)
// unchanged, so it is skipped; any other term is added as before.
func decayingSum(p []float64, r, pmax float64, j int, s, c float64) float64 {
	const tiny = 0x1p-1022 // the smallest normal float64
	// Normal factors: the plain loop.
	for j < len(p) && c >= tiny {
		if negligible(r, pmax, s, c) {
			return s
		}
		for end := min(len(p), j+negligibleEvery); j < end && c >= tiny; j++ {
			s += p[j] * c
			c *= r
		}
	}
	if j == len(p) || negligible(r, pmax, s, c) {
		return s
	}
	// Subnormal factors, still decaying.
	for ; j < len(p); j++ {
		next := c * r
		if next == c {
			break
		}
		s += p[j] * c
		c = next
	}
	if j == len(p) {
		return s
	}
	// c is fixed from here: c = k·2⁻¹⁰⁷⁴ with k an integer (0 for c = 0,
	// which gives thr = +Inf: every finite term is ±0).
	k := c * 0x1p1000 * 0x1p74
	thr := 0.25 / k
	for _, v := range p[j:] {
		if !(math.Abs(v) < thr) {
			s += v * c
		}
	}
	return s
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
func window(k func(i int) (kp, km float64), interval float64, kmax int) (kl, ku int, tauL, tauU float64) {
	lnTau := math.Log(windowTail)
	ku, kl = kmax, 0
	bestU, bestL := math.Inf(1), math.Inf(-1)
	var lamU, lamL, kU, kL float64
	for i, lam := range chernoffLambdas {
		kp, km := k(i)
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
	var k func(i int) (kp, km float64)
	if b == nil {
		out.inf = -math.Expm1(float64(n) * math.Log1p(-a.inf))
		nf := float64(n)
		out.rel = math.Expm1(nf * math.Log1p(a.rel))
		out.err = math.Exp(nf*math.Log1p(a.rel+a.err)) - math.Exp(nf*math.Log1p(a.rel))
		kmaxF, baseF = nf*float64(len(a.probs)-1), nf*float64(a.offset)
		k = func(i int) (float64, float64) { t := a.mgfs(); return nf * t.pos[i], nf * t.neg[i] }
	} else {
		out.inf = a.inf + b.inf - a.inf*b.inf
		out.rel = a.rel + b.rel + a.rel*b.rel
		out.err = a.err*(1+b.rel) + b.err*(1+a.rel) + a.err*b.err
		kmaxF, baseF = float64(len(a.probs)+len(b.probs)-2), float64(a.offset)+float64(b.offset)
		k = func(i int) (float64, float64) {
			ta, tb := a.mgfs(), b.mgfs()
			return ta.pos[i] + tb.pos[i], ta.neg[i] + tb.neg[i]
		}
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
