package privacy

import (
	"math"

	"github.com/dpsgd/dpsgd/internal/numeric"
	"gonum.org/v1/gonum/integrate/quad"
)

// This file holds independent oracles used by several tests.

// legendre16 returns 16 Gauss–Legendre nodes and weights on [0, 1] (gonum quad).
func legendre16() (x, w []float64) {
	x, w = make([]float64, 16), make([]float64, 16)
	quad.Legendre{}.FixedLocations(x, w, 0, 1)
	return x, w
}

// logIntegrate returns ln ∫_lo^hi e^{logf(z)} dz by composite 16-point
// Gauss–Legendre on panels of width at most h, summed in log space.
func logIntegrate(logf func(float64) float64, lo, hi, h float64) float64 {
	x, w := legendre16()
	n := int(math.Ceil((hi - lo) / h))
	width := (hi - lo) / float64(n)
	vals := make([]float64, 0, 16*n)
	wts := make([]float64, 0, 16*n)
	m := math.Inf(-1)
	for p := 0; p < n; p++ {
		a := lo + float64(p)*width
		for k := range x {
			v := logf(a + x[k]*width)
			vals = append(vals, v)
			wts = append(wts, w[k]*width)
			m = math.Max(m, v)
		}
	}
	s := 0.0
	for i, v := range vals {
		s += wts[i] * math.Exp(v-m)
	}
	return m + math.Log(s)
}

// logAQuad returns ln A_α by direct quadrature of
// A_α = ∫ N(z; 0, σ²) (1 − q + q e^{(2z−1)/(2σ²)})^α dz,
// the definition of Mironov, Talwar & Zhang 2019, independent of the series.
// The mass sits near z = 0 and z = α, each of width σ.
func logAQuad(q, sigma, alpha float64) float64 {
	lq, l1q := math.Log(q), math.Log1p(-q)
	s2 := sigma * sigma
	logf := func(z float64) float64 {
		u := (2*z - 1) / (2 * s2)
		return -z*z/(2*s2) - math.Log(sigma) - numeric.LogSqrt2Pi + alpha*numeric.LogAddExp(l1q, lq+u)
	}
	return logIntegrate(logf, -40*sigma-1, alpha+40*sigma+1, sigma/4)
}
