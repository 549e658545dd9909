package pld

// The σ calibration and the per-epoch ε of the PLD accountant were made
// cheaper (the logMGFs of a composition window taken four exponents per pass,
// without subnormal arithmetic, and kept per PMF; the two directions of a
// Poisson step built from one set of edges, with the normal CDFs evaluated
// only for the cells that use them) under the promise that every number
// stays the same bit for bit. This file keeps the code as it was before, as
// the oracle of that promise (legacy_match_test.go): the former logMGF,
// window, convolve, PoissonGaussian, cdfs, between and splitCell, verbatim but for
// their names.

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/dsp/fourier"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/dpsgd/dpsgd/internal/numeric"
	"github.com/dpsgd/dpsgd/privacy"
)

func oldLogMGF(p []float64, interval, lambda float64) float64 {
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

func oldWindow(k func(lambda float64) float64, interval float64, kmax int) (kl, ku int, tauL, tauU float64) {
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

func oldConvolve(a, b *PMF, n int) (*PMF, error) {
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
		k = func(lam float64) float64 { return nf * oldLogMGF(a.probs, a.interval, lam) }
	} else {
		out.inf = a.inf + b.inf - a.inf*b.inf
		out.rel = a.rel + b.rel + a.rel*b.rel
		out.err = a.err*(1+b.rel) + b.err*(1+a.rel) + a.err*b.err
		kmaxF, baseF = float64(len(a.probs)+len(b.probs)-2), float64(a.offset)+float64(b.offset)
		k = func(lam float64) float64 {
			return oldLogMGF(a.probs, a.interval, lam) + oldLogMGF(b.probs, a.interval, lam)
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
	kl, ku, tauL, tauU := oldWindow(k, a.interval, kmax)
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

func oldPoissonGaussian(q, sigma float64, dir Direction, o Options) (*PMF, error) {
	if err := checkQSigma(q, sigma); err != nil {
		return nil, fmt.Errorf("pld: PoissonGaussian: %w", err)
	}
	if dir != Remove && dir != Add {
		return nil, fmt.Errorf("pld: PoissonGaussian: dir = %d, want Remove (0) or Add (1): %w", int(dir), privacy.ErrInvalidArgument)
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("pld: PoissonGaussian: %w", err)
	}
	g := newPoissonGaussian(q, sigma, dir)
	delta := o.Interval
	lmin, lmax := g.lossRange(o.TailMass)
	// The loss is 0 at x = 1/2, inside the range; the grid always holds
	// −Δ, 0 and Δ, so that a range narrower than Δ (a large σ, where the
	// loss is nearly a point mass at 0) still has the cells on both sides of
	// loss 0 rather than one edge with half of P above it sent to +∞.
	ilo, ihi := math.Min(math.Floor(lmin/delta), -1), math.Max(math.Ceil(lmax/delta), 1)
	if ihi-ilo+1 > maxGridLen {
		return nil, fmt.Errorf("pld: PoissonGaussian: q = %g, sigma = %g needs %g grid points at Interval = %g (more than %d): %w",
			q, sigma, ihi-ilo+1, delta, maxGridLen, ErrGridTooLarge)
	}
	lo, n := int(ilo), int(ihi-ilo)+1

	// Boundary outputs: b[i] = x at loss (lo+i)Δ, and the CDFs of the two
	// mixture components (means 0 and 1) there.
	type edge struct {
		z0, z1 float64
		c0, c1 oldNormCDFs
	}
	edges := make([]edge, n)
	for i := range edges {
		l := float64(lo+i) * delta
		if dir == Add {
			l = -l
		}
		var e edge
		e.z0, e.z1 = g.zRemove(l)
		e.c0, e.c1 = oldCdfs(e.z0), oldCdfs(e.z1)
		edges[i] = e
	}
	// mass returns (P, Q) of the x-interval between edges i and j (in x
	// order: i is the left edge).
	wP0, wP1, wQ0, wQ1 := 1-q, q, 1.0, 0.0 // remove: P = mixture, Q = N(0)
	if dir == Add {
		wP0, wP1, wQ0, wQ1 = 1, 0, 1-q, q
	}
	mass := func(a, b edge) (p, r float64) {
		m0 := oldBetween(a.c0, b.c0, a.z0, b.z0)
		m1 := oldBetween(a.c1, b.c1, a.z1, b.z1)
		return wP0*m0 + wP1*m1, wQ0*m0 + wQ1*m1
	}
	minusInf := edge{z0: math.Inf(-1), z1: math.Inf(-1), c0: oldNormCDFs{0, 1}, c1: oldNormCDFs{0, 1}}
	plusInf := edge{z0: math.Inf(1), z1: math.Inf(1), c0: oldNormCDFs{1, 0}, c1: oldNormCDFs{1, 0}}

	probs := make([]float64, n)
	oneMinusEmD := -math.Expm1(-delta)
	var inf float64
	if dir == Remove { // loss increases with x
		probs[0], _ = mass(minusInf, edges[0])
		inf, _ = mass(edges[n-1], plusInf)
		for i := 0; i+1 < n; i++ {
			p, r := mass(edges[i], edges[i+1])
			oldSplitCell(probs, i, p, r, float64(lo+i)*delta, oneMinusEmD)
		}
	} else { // loss decreases with x
		probs[0], _ = mass(edges[0], plusInf)
		inf, _ = mass(minusInf, edges[n-1])
		for i := 0; i+1 < n; i++ {
			p, r := mass(edges[i+1], edges[i])
			oldSplitCell(probs, i, p, r, float64(lo+i)*delta, oneMinusEmD)
		}
	}
	out := &PMF{interval: delta, offset: lo, probs: probs, inf: inf, pessimistic: true}
	// Roundoff allowance: every cell mass is computed to a few ulps
	// (between), so δ, a positive combination of them, is within a relative
	// 64 ulps; the split's cancellation moves at most a few ulps of a cell's
	// mass by one grid step, which changes δ by far less.
	out.rel = 64 * 0x1p-52
	out.trim()
	return out, nil
}

type oldNormCDFs struct{ lo, hi float64 }

func oldCdfs(z float64) oldNormCDFs {
	return oldNormCDFs{lo: distuv.UnitNormal.CDF(z), hi: numeric.NormSF(z)}
}

func oldBetween(a, b oldNormCDFs, za, zb float64) float64 {
	if w := zb - za; w*math.Max(1, math.Max(math.Abs(za), math.Abs(zb))) <= 0.5 {
		h, m := 0.5*w, 0.5*(za+zb)
		var s float64
		for i, x := range glNodes {
			u, v := m-h*x, m+h*x
			s += glWeights[i] * (math.Exp(-0.5*u*u) + math.Exp(-0.5*v*v))
		}
		return h * s / math.Sqrt(2*math.Pi)
	}
	switch {
	case za >= 0:
		return math.Max(0, a.hi-b.hi)
	case zb <= 0:
		return math.Max(0, b.lo-a.lo)
	}
	return math.Max(0, 1-a.lo-b.hi)
}

func oldSplitCell(probs []float64, i int, p, r, li, oneMinusEmD float64) {
	if p == 0 {
		return
	}
	hi := (p - math.Exp(li+math.Log(r))) / oneMinusEmD
	hi = math.Min(math.Max(hi, 0), p)
	probs[i+1] += hi
	probs[i] += p - hi
}
