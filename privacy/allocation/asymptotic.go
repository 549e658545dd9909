package allocation

import (
	"math"

	"github.com/dpsgd/dpsgd/internal/numeric"
	"gonum.org/v1/gonum/stat/distuv"
)

// asymCheck reports whether σ and c are valid for the μ coefficients.
func asymCheck(sigma, c float64) bool {
	return checkSigma(sigma) == nil && c >= 0 && !math.IsInf(c, 1)
}

// MuAllocation returns van Dijk & Ertan's asymptotic Gaussian-DP parameter of
// random allocation (Thm 5.2 of v1 = Thm 4.2 of v3; Ertan & van Dijk 2026, Thm
// 3.5, prove it is the exact limit): if E/M → c², the E-epoch trade-off curve
// tends to G_μ with
//
//	μ = c·√(e^{1/σ²} − 1),
//
// numerically the Poisson CLT value. It is an ASYMPTOTIC statement for
// display only, not a bound: at finite M use the chi-square, exact or RDP
// accountants. Invalid input (σ ≤ 0, c < 0, NaN or Inf) gives NaN; a σ so
// small that μ overflows gives +Inf.
func MuAllocation(sigma, c float64) float64 {
	if !asymCheck(sigma, c) {
		return math.NaN()
	}
	if c == 0 {
		return 0
	}
	return c * math.Exp(0.5*numeric.LogExpm1(1/(sigma*sigma)))
}

// MuSubsampled returns the comparison curve of van Dijk & Ertan's Figure 2, the
// μ of DRS's CLT for uniform subsampling (tf_privacy compute_mu_uniform;
// the attribution to DRS is ours):
//
//	μ_sub = √2·c·√(E[(Y−1)_+²]) = √2·c·√(e^{1/σ²}Φ(3/(2σ)) + 3Φ(−1/(2σ)) − 2).
//
// μ_sub/MuAllocation decreases from √2 (σ → 0) to 1 (σ → ∞) and equals
// (1+√2)/2 at σ ≈ 1.668. Asymptotic, display only, not a bound. Invalid
// input gives NaN; overflow gives +Inf.
func MuSubsampled(sigma, c float64) float64 {
	if !asymCheck(sigma, c) {
		return math.NaN()
	}
	if c == 0 {
		return 0
	}
	return c * math.Exp(0.5*(math.Ln2+asymLogPosSecond(1/(sigma*sigma))))
}

// asymLogPosSecond returns ln E[(Y−1)_+²] for Y = e^{tX − t²/2}, t² = t2
// (closed form derived here, checked by quadrature in the tests:
// e^{t²}Φ(3t/2) + 3Φ(−t/2) − 2). With v = t/(2√2) it equals
//
//	½(e^{t²} − 1) + ½e^{t²} erf(3v) − (3/2) erf(v)   (t ≤ 1; terms O(t), result ≈ t²/2),
//	e^{t²}[Φ(3t/2) + e^{−t²}(3Φ(−t/2) − 2)]           (t > 1; no overflow),
//
// and t²/2 + t³/√(2π) for t < 1e-6 (relative error O(t²)).
func asymLogPosSecond(t2 float64) float64 {
	t := math.Sqrt(t2)
	switch {
	case t < 1e-6:
		return math.Log(t2/2 + t2*t/math.Sqrt(2*math.Pi))
	case t <= 1:
		v := t / (2 * math.Sqrt2)
		return math.Log(0.5*math.Expm1(t2) + 0.5*math.Exp(t2)*math.Erf(3*v) - 1.5*math.Erf(v))
	}
	return t2 + math.Log(distuv.UnitNormal.CDF(1.5*t)+math.Exp(-t2)*(3*distuv.UnitNormal.CDF(-0.5*t)-2))
}
