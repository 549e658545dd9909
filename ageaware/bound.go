package ageaware

import (
	"math"
)

// maxMomentCache bounds the noise scales a client's moment cache holds before
// it starts over.
const maxMomentCache = 1 << 14

// moments returns the moments of client c's projected noisy upload
// U = clip(W + N, lo, hi), W the mean of its n collected values (exact law on
// the lattice) and N Laplace with scale eta, together with Cov(U, Fₐ) for the
// fresh mean Fₐ of the same records at every age a. The result is cached by
// eta.
func (c *client) moments(eta float64) *uMoments {
	key := math.Float64bits(eta)
	c.cacheMu.Lock()
	um, ok := c.cache[key]
	c.cacheMu.Unlock()
	if ok {
		return um
	}
	T := len(c.h) - 1
	nf := float64(c.n)
	center := c.collMean
	var r1, r2, r3, r4 float64 // raw moments of U − center
	cross := make([]float64, T+1)
	for s, ps := range c.pmfS {
		if ps == 0 {
			continue
		}
		w := c.lat.lo + c.lat.step*float64(s)/nf
		w = math.Min(math.Max(w, c.lo), c.hi)
		m := clippedLaplaceMoments(w-c.lo, c.hi-w, eta)
		d := w - center
		d2 := d * d
		r1 += ps * (d + m[0])
		r2 += ps * (d2 + 2*d*m[0] + m[1])
		r3 += ps * (d2*d + 3*d2*m[0] + 3*d*m[1] + m[2])
		r4 += ps * (d2*d2 + 4*d2*d*m[0] + 6*d2*m[1] + 4*d*m[2] + m[3])
		// E[U·Fₐ] = Σ_s E[U | S = s]·Σ_x μ(x)hₐ(x)R(s − off_x).
		g := w + m[0]
		for x, q := range c.mu {
			if q == 0 {
				continue
			}
			j := s - c.lat.off[x]
			if j < 0 || j >= len(c.pmfR) || c.pmfR[j] == 0 {
				continue
			}
			wgt := g * q * c.pmfR[j]
			for a := range cross {
				cross[a] += wgt * c.h[a][x]
			}
		}
	}
	um = &uMoments{mean: center + r1, cov: make([]float64, T+1)}
	um.c2 = math.Max(r2-r1*r1, 0)
	um.c3 = r3 - 3*r1*r2 + 2*r1*r1*r1
	um.c4 = math.Max(r4-4*r1*r3+6*r1*r1*r2-3*r1*r1*r1*r1, 0)
	for a := range cross {
		um.cov[a] = cross[a] - um.mean*c.freshMean[a]
	}
	c.cacheMu.Lock()
	if len(c.cache) >= maxMomentCache {
		clear(c.cache)
	}
	c.cache[key] = um
	c.cacheMu.Unlock()
	return um
}

// expectedLoss is the exact expected loss difference of the protocol with
// projected uploads (see Problem.ExpectedLoss).
func (p *Problem) expectedLoss(ages []int, eta []float64) float64 {
	var v, bias float64
	for i, c := range p.clients {
		um := c.moments(eta[i])
		a := ages[i]
		w := p.weights[i]
		varF := c.freshK[a][0] / float64(c.n)
		v += w * w * (um.c2 + varF - 2*um.cov[a])
		bias += w * (um.mean - c.freshMean[a])
	}
	return math.Max(v, 0) + bias*bias
}

// BoundTerms are the terms of Theorem 1's bound (3) for one schedule and
// noise, evaluated as described at Problem.Bound.
type BoundTerms struct {
	// Aged[i] = ψ*⁻¹ᵢ,₊(I(Wᵢ; Z_{i,j}^{agg})): the generalization term of the
	// noisy aged model on client i's fresh data.
	Aged []float64
	// Fresh[i] = φ*⁻¹ᵢ,₋(I(Wᵢ^{agg}; Z_{i,j}^{agg})): the generalization term
	// of the fresh non-private model.
	Fresh []float64
	// Risk is E[R(W̃, W^{agg})] = E[L̄(W̃)] − E[L̄(W^{agg})], exact.
	Risk float64
	// Total = Σᵢ pᵢ(Aged[i] + Fresh[i]) + Risk.
	Total float64
}

// bound evaluates Theorem 1's bound (see Problem.Bound).
func (p *Problem) bound(ages []int, eta []float64, terms *BoundTerms) float64 {
	// Cumulants of W̃ = Σ pₖUₖ (independent clients) and of the fresh
	// aggregate W^agg = Σ pₖFₖ, Fₖ the mean of nₖ i.i.d. fresh values.
	var mt, k2t, k3t, k4t float64
	var mf, k2f, k3f, k4f float64
	var lo, hi float64
	for k, c := range p.clients {
		um := c.moments(eta[k])
		w := p.weights[k]
		w2 := w * w
		mt += w * um.mean
		k2t += w2 * um.c2
		k3t += w2 * w * um.c3
		k4t += w2 * w2 * (um.c4 - 3*um.c2*um.c2)
		a := ages[k]
		nf := float64(c.n)
		mf += w * c.freshMean[a]
		k2f += w2 * c.freshK[a][0] / nf
		k3f += w2 * w * c.freshK[a][1] / (nf * nf)
		k4f += w2 * w2 * c.freshK[a][2] / (nf * nf * nf)
		lo += w * c.lo
		hi += w * c.hi
	}
	risk := k2t + (mt-mf)*(mt-mf) - k2f
	total := risk
	for i, c := range p.clients {
		a := ages[i]
		nu := c.fresh[a]
		// Loss ℓ(w, z) = (w − z)² under the product law (W̃ or W^agg) ⊗ νᵢ.
		el, el2, sup := lossMoments(nu, c.values, mt, k2t, k3t, k4t, lo, hi)
		gAged := bennettInv(c.mi[a], el2-el*el, sup-el)
		fl, fl2, _ := lossMoments(nu, c.values, mf, k2f, k3f, k4f, lo, hi)
		gFresh := bennettInv(c.miFresh[a], fl2-fl*fl, fl)
		total += p.weights[i] * (gAged + gFresh)
		if terms != nil {
			terms.Aged[i], terms.Fresh[i] = gAged, gFresh
		}
	}
	if terms != nil {
		terms.Risk, terms.Total = risk, total
	}
	return total
}

// lossMoments returns E ℓ, E ℓ² and sup ℓ of ℓ = (W − Z)² for W with mean m
// and cumulants k2, k3, k4 and support in [lo, hi], independent of Z ~ law
// over values.
func lossMoments(law, values []float64, m, k2, k3, k4, lo, hi float64) (el, el2, sup float64) {
	c4 := k4 + 3*k2*k2
	for z, q := range law {
		if q == 0 {
			continue
		}
		d := m - values[z]
		e2 := k2 + d*d
		e4 := c4 + 4*k3*d + 6*k2*d*d + d*d*d*d
		el += q * e2
		el2 += q * e4
		sup = math.Max(sup, math.Max((values[z]-lo)*(values[z]-lo), (hi-values[z])*(hi-values[z])))
	}
	return el, el2, sup
}

// bennettInv returns inf_{λ>0} (x + ψ(λ))/λ for Bennett's bound on the
// cumulant generating function of a centred variable X ≤ b with variance v,
// ψ(λ) = (v/b²)(e^{λb} − 1 − λb) (Boucheron, Lugosi & Massart,
// Concentration Inequalities, Th. 2.9): the ψ*⁻¹(x) of Theorem 1 with that ψ.
// At the optimum u = λb solves (u − 1)eᵘ + 1 = x·b²/v. The value never
// exceeds b (ψ(λ) ≤ λb) and is ≈ √(2vx) for small x.
func bennettInv(x, v, b float64) float64 {
	if !(x > 0) || !(v > 0) {
		return 0
	}
	if !(b > 0) {
		return math.Sqrt(2 * v * x)
	}
	k := x * b * b / v
	f := func(u float64) float64 { // (u − 1)eᵘ + 1
		if u < 0.1 {
			// Σ_{j≥2} (j − 1)uʲ/j!
			s, t := 0.0, u
			for j := 2; j < 30; j++ {
				t *= u / float64(j)
				s += float64(j-1) * t
				if t < 1e-18*s {
					break
				}
			}
			return s
		}
		return (u-1)*math.Exp(u) + 1
	}
	phi := func(u float64) float64 { // eᵘ − 1 − u
		if u < 0.1 {
			s, t := 0.0, u
			for j := 2; j < 30; j++ {
				t *= u / float64(j)
				s += t
				if t < 1e-18*s {
					break
				}
			}
			return s
		}
		return math.Expm1(u) - u
	}
	// f(u) ≥ u²/2, so u₀ = √(2k) lies above the root; for k > 1 so does
	// ln k + 2. Newton on the convex increasing f converges monotonically.
	u := math.Sqrt(2 * k)
	if k > 1 {
		u = math.Min(u, math.Log(k)+2)
	}
	if u > 700 {
		return b
	}
	for it := 0; it < 100; it++ {
		du := (f(u) - k) / (u * math.Exp(u))
		u -= du
		if math.Abs(du) <= 1e-14*u {
			break
		}
	}
	if !(u > 0) {
		return math.Sqrt(2 * v * x)
	}
	return math.Min(b/u*(x+v/(b*b)*phi(u)), b)
}
