package allocation

import (
	"math"
	"math/cmplx"

	"gonum.org/v1/gonum/integrate/quad"

	"github.com/dpsgd/dpsgd/internal/numeric"
)

// This file evaluates the one-epoch hockey-stick curve of the Gaussian pair
//
//	h(γ) = H_γ(Q_M‖P_M) = E_P (L_M − γ)_+,   L_M = (1/M) Σ_j Y_j,
//
// Y_j = exp(tX_j − t²/2), X_j iid N(0, 1), t = 1/σ, by
// one Fourier integral per γ. With Z = Σ_j (Y_j − 1) (E Z = 0, Var Z = Mb,
// b = e^{t²} − 1) and k = M(γ − 1), E(Z − k)_+ = (E|Z − k| − k)/2 and
// E|X| = (2/π) ∫₀^∞ (1 − Re φ_X(u))/u² du, the identity behind eq. 16 of
// Ertan & van Dijk 2026. Subtracting the same identity for a Gaussian W with
// the variance of Z gives
//
//	h(γ) = (1/M) E(W − k)_+ + (1/(πM)) Re ∫₀^∞ r(u) e^{−iuk} du,
//	r(u) = (e^{−Mbu²/2} − φ_Z(u))/u²,   φ_Z(u) = (1 + z(u))^M,
//
// where z(u) = E[e^{iu(Y−1)} − 1 − iu(Y−1)]. r is smooth and bounded
// near u = 0 (the Gaussian cancels the second-order term), so a plain
// Gauss–Legendre rule on [0, U] converges fast; the tail beyond U is bounded
// by (e^{−MbU²/2} + sup_{u>U}|φ_Z|)/(πMU). At γ = 1 this is eq. (16) itself.

// exactGL holds the 10-point Gauss–Legendre rule on [0, 1].
type exactGL struct{ x, w [10]float64 }

func exactNewGL() exactGL {
	var g exactGL
	quad.Legendre{}.FixedLocations(g.x[:], g.w[:], 0, 1)
	return g
}

// exactPair is the one-epoch Gaussian pair with its Fourier data.
type exactPair struct {
	sigma, t, b float64
	m           float64 // M as a float
	sZ          float64 // √(Mb), the standard deviation of Z
	u, uw       []float64
	r           []complex128
	// trunc bounds the error of the u-integral's truncation at U and of
	// the dropped far tails, in units of h (absolute).
	trunc float64
	gl    exactGL
}

// exactXTop is where the x-quadrature of z(u) stops; the oscillating part
// e^{iu(Y−1)} beyond it is dropped (its modulus is at most Φ̄(xTop) ≈ 1e-18)
// and the polynomial part is added in closed form.
const exactXTop = 8.8

// exactNewPair prepares the pair for σ and M, with u-nodes fine enough for
// |k| ≤ kMax (k = M(γ − 1)).
func exactNewPair(sigma float64, m int, kMax float64) *exactPair {
	t := 1 / sigma
	b := math.Expm1(t * t)
	p := &exactPair{sigma: sigma, t: t, b: b, m: float64(m), gl: exactNewGL()}
	p.sZ = math.Sqrt(p.m * b)
	// U: e^{−Mb U²/2} ≤ e^{−40}, then extend while |φ_Z| is not negligible.
	U := 9 / p.sZ
	for it := 0; it < 8; it++ {
		worst := 0.0
		for _, f := range []float64{1, 1.3, 1.7, 2.2, 3} {
			worst = math.Max(worst, cmplx.Abs(p.phiZ(U*f)))
		}
		if worst/(math.Pi*p.m*U) <= 1e-15 {
			break
		}
		U *= 2
	}
	// Tail bound: e^{−MbU²/2} + sup|φ_Z| beyond U, checked above on a few
	// points; use a safety factor of 10 on the checked value.
	sup := 0.0
	for _, f := range []float64{1, 1.3, 1.7, 2.2, 3, 4} {
		sup = math.Max(sup, cmplx.Abs(p.phiZ(U*f)))
	}
	p.trunc = 10 * (math.Exp(-p.m*b*U*U/2) + sup) / (math.Pi * p.m * U)
	// Dropped oscillating x-tail: |δz| ≤ Φ̄(xTop), |δφ_Z| ≤ M|δz|, integrated
	// against du/(πMu²) from the first node: ≤ Φ̄(xTop)/(π u₀).
	p.buildU(U, kMax)
	if len(p.u) > 0 {
		p.trunc += numeric.NormSF(exactXTop) / (math.Pi * p.u[0])
	}
	return p
}

// exactTheta is the phase rate u·t·Y(x) at which the x-quadrature of z(u)
// stops; the rest of the oscillating integral ∫ e^{iu(Y−1)}ϕ dx is its
// two-term integration-by-parts expansion, whose remainder is at most
// ϕ(x_c)(x_c+t)²/Θ³ (a few 1e-13 at Θ = 1000).
const exactTheta = 1000

// z3 returns z(u) + bu²/2 = E[e^{iuD} − 1 − iuD + (uD)²/2], D = Y − 1, by
// Gauss–Legendre panels in x ∈ [−9, x_c] of width at most 0.4 and about 1.5
// radians of phase, x_c = min(8.8, the x where u·t·Y(x) = Θ); the tail
// beyond x_c is in closed form (polynomial part) and asymptotic (oscillating
// part).
func (p *exactPair) z3(u float64) complex128 {
	t := p.t
	xc := exactXTop
	if u > 0 {
		// u t e^{tx − t²/2} = Θ
		if x := (math.Log(exactTheta/(u*t)) + t*t/2) / t; x < xc {
			xc = x
		}
	}
	var re, im float64
	x := -9.0
	for x < xc {
		w := 0.4
		if rate := u * t * math.Exp(t*(x+w)-t*t/2); rate*w > 1.5 {
			w = 1.5 / rate
		}
		if x+w > xc {
			w = xc - x
		}
		for i := range p.gl.x {
			xi := x + w*p.gl.x[i]
			d := math.Expm1(t*xi - t*t/2)
			wt := w * p.gl.w[i] * math.Exp(-xi*xi/2) / math.Sqrt(2*math.Pi)
			th := u * d
			var gr, gi float64
			if math.Abs(th) <= 1 {
				// Σ_{n≥3} (iθ)ⁿ/n!
				term := complex(0, -th*th*th/6)
				s := term
				for n := 4; n < 30; n++ {
					term *= complex(0, th/float64(n))
					s += term
					if math.Abs(real(term))+math.Abs(imag(term)) < 1e-18*math.Abs(th*th*th) {
						break
					}
				}
				gr, gi = real(s), imag(s)
			} else {
				sn, cs := math.Sincos(th)
				gr = cs - 1 + th*th/2
				gi = sn - th
			}
			re += wt * gr
			im += wt * gi
		}
		x += w
	}
	// Tail beyond xc. Polynomial part in closed form:
	// −Φ̄(x) − iu E[D; X>x] + (u²/2) E[D²; X>x], with
	// E[Y; X>x] = Φ̄(x−t), E[Y²; X>x] = e^{t²} Φ̄(x−2t).
	q0 := numeric.NormSF(xc)
	q1 := numeric.NormSF(xc - t)
	q2 := math.Exp(t*t) * numeric.NormSF(xc-2*t)
	ed := q1 - q0
	ed2 := q2 - 2*q1 + q0
	re += -q0 + u*u*ed2/2
	im += -u * ed
	// Oscillating part ∫_{xc}^∞ e^{iθ}ϕ dx ≈ e^{iθc}ϕc[i/θ' + (xc+t)/θ'²],
	// θ = u(Y−1), θ' = u t Y; dropped (≤ Φ̄(8.8)) where θ' is small.
	if th1 := u * t * math.Exp(t*xc-t*t/2); th1 >= exactTheta/2 {
		ph := math.Exp(-xc*xc/2) / math.Sqrt(2*math.Pi)
		sn, cs := math.Sincos(u * math.Expm1(t*xc-t*t/2))
		a := ph * (xc + t) / (th1 * th1)
		bq := ph / th1
		// (cs + i sn)(a + i bq)
		re += cs*a - sn*bq
		im += sn*a + cs*bq
	}
	return complex(re, im)
}

// logPhiZPlusGauss returns ln φ_Z(u) + Mbu²/2 = M(log1p(z) − z + z₃).
func (p *exactPair) logPhiZPlusGauss(u float64) complex128 {
	z3 := p.z3(u)
	z := z3 - complex(p.b*u*u/2, 0)
	return complex(p.m, 0) * (exactLog1pMinus(z) + z3)
}

// phiZ returns φ_Z(u).
func (p *exactPair) phiZ(u float64) complex128 {
	w := p.logPhiZPlusGauss(u)
	return cmplx.Exp(w - complex(p.m*p.b*u*u/2, 0))
}

// exactLog1pMinus returns log(1+z) − z for complex z, accurate for small |z|.
func exactLog1pMinus(z complex128) complex128 {
	if cmplx.Abs(z) < 0.05 {
		// −z²/2 + z³/3 − …
		var s complex128
		zn := z
		for n := 2; n < 16; n++ {
			zn *= z
			if n%2 == 0 {
				s -= zn / complex(float64(n), 0)
			} else {
				s += zn / complex(float64(n), 0)
			}
		}
		return s
	}
	return cmplx.Log(1+z) - z
}

// exactExpm1 returns eʷ − 1 for complex w, accurate for small |w|.
func exactExpm1(w complex128) complex128 {
	if cmplx.Abs(w) < 0.02 {
		term := w
		s := w
		for n := 2; n < 12; n++ {
			term *= w / complex(float64(n), 0)
			s += term
		}
		return s
	}
	return cmplx.Exp(w) - 1
}

// buildU lays Gauss–Legendre panels on [0, U] resolving e^{−iuk} for
// |k| ≤ kMax and the scale 1/√(Mb) of r, and stores r(u) at the nodes.
func (p *exactPair) buildU(U, kMax float64) {
	k := math.Max(kMax, 4*p.sZ)
	w := math.Min(math.Min(U/24, 0.5/p.sZ), 1.5/k)
	n := int(math.Ceil(U / w))
	w = U / float64(n)
	// Panels: the first one [0, w] split geometrically 8 times (r has
	// structure near 0 when Y is heavy-tailed), then uniform of width w.
	type panel struct{ lo, hi float64 }
	var panels []panel
	hi := w
	for j := 0; j < 8; j++ {
		panels = append(panels, panel{hi / 2, hi})
		hi /= 2
	}
	panels = append(panels, panel{0, hi})
	for j := 1; j < n; j++ {
		panels = append(panels, panel{float64(j) * w, float64(j+1) * w})
	}
	p.u = make([]float64, 0, 10*len(panels))
	p.uw = make([]float64, 0, 10*len(panels))
	p.r = make([]complex128, 0, 10*len(panels))
	a := p.m * p.b / 2
	for _, pn := range panels {
		pw := pn.hi - pn.lo
		for i := range p.gl.x {
			u := pn.lo + p.gl.x[i]*pw
			var r complex128
			if w := p.logPhiZPlusGauss(u); a*u*u < 1 {
				e := math.Exp(-a * u * u)
				r = -complex(e, 0) * exactExpm1(w) / complex(u*u, 0)
			} else {
				// No cancellation here; avoid overflow of e^{w}.
				r = (complex(math.Exp(-a*u*u), 0) - cmplx.Exp(w-complex(a*u*u, 0))) / complex(u*u, 0)
			}
			p.u = append(p.u, u)
			p.uw = append(p.uw, pw*p.gl.w[i])
			p.r = append(p.r, r)
		}
	}
}

// h returns h(γ) = E_P(L_M − γ)_+ for γ = 1 + k/M, computed from k to keep
// precision near γ = 1.
func (p *exactPair) hk(k float64) float64 {
	s := p.sZ
	// E(W − k)_+ = s ϕ(k/s) − k Φ̄(k/s).
	g := s*math.Exp(-k*k/(2*s*s))/math.Sqrt(2*math.Pi) - k*numeric.NormSF(k/s)
	var acc float64
	// Re ∫ r(u) e^{−iuk} du, with the rotation e^{−iuk} evaluated directly.
	for i, u := range p.u {
		sn, cs := math.Sincos(u * k)
		acc += p.uw[i] * (real(p.r[i])*cs + imag(p.r[i])*sn)
	}
	return (g + acc/math.Pi) / p.m
}
