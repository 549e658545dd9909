package ball

import (
	"math"
	"math/big"
	"math/rand/v2"

	"gonum.org/v1/gonum/integrate/quad"
)

// Independent references for the tests. None of them shares code with
// StepDelta.

// oraclePrec is the precision of the big-float reference, in bits.
const oraclePrec = 256

// piBig is π to 70 digits.
var piBig, _ = new(big.Float).SetPrec(oraclePrec).SetString("3.141592653589793238462643383279502884197169399375105820974944592307816")

// bigDelta returns I_{a²}(1/2, (d+1)/2) from the finite sums of Tholeti's
// Eq. 9 (odd d) and its even-d analogue, every step in 256-bit arithmetic.
// Its cost is O(d); use it for d up to ~10⁴.
func bigDelta(dim int, a float64) float64 {
	prec := uint(oraclePrec)
	nf := func(v float64) *big.Float { return new(big.Float).SetPrec(prec).SetFloat64(v) }
	A := nf(a)
	y := new(big.Float).SetPrec(prec).Sub(nf(1), new(big.Float).SetPrec(prec).Mul(A, A)) // exact
	sum := nf(0)
	term := nf(1) // coef_k · y^k
	if dim%2 == 1 {
		// a · Σ_{k=0}^{(d−1)/2} (1/2)_k/k! y^k
		for k := 0; k <= (dim-1)/2; k++ {
			if k > 0 {
				term.Mul(term, y)
				term.Mul(term, nf(float64(2*k-1)))
				term.Quo(term, nf(float64(2*k)))
			}
			sum.Add(sum, term)
		}
		r, _ := sum.Mul(sum, A).Float64()
		return r
	}
	// (2/π)(asin a + a√y Σ_{k=0}^{d/2−1} e_k y^k), e_k = Π 2i/(2i+1)
	for k := 0; k <= dim/2-1; k++ {
		if k > 0 {
			term.Mul(term, y)
			term.Mul(term, nf(float64(2*k)))
			term.Quo(term, nf(float64(2*k+1)))
		}
		sum.Add(sum, term)
	}
	sy := new(big.Float).SetPrec(prec).Sqrt(y)
	sum.Mul(sum, sy)
	sum.Mul(sum, A)
	sum.Add(sum, bigAsin(A, sy))
	sum.Mul(sum, nf(2))
	sum.Quo(sum, piBig)
	r, _ := sum.Float64()
	return r
}

// bigAsin returns asin a given c = √(1 − a²), in 256-bit arithmetic: six
// half-angle steps (sin(θ/2) = sin θ/(2cos(θ/2)), cos(θ/2) = √((1 + cos θ)/2),
// no cancellation) bring the angle below π/128, where the Taylor series
// asin s = Σ (1/2)_k/k! s^{2k+1}/(2k+1) converges by a factor < 6e-4 a term.
func bigAsin(a, c *big.Float) *big.Float {
	prec := uint(oraclePrec)
	s := new(big.Float).SetPrec(prec).Set(a)
	c = new(big.Float).SetPrec(prec).Set(c)
	one := new(big.Float).SetPrec(prec).SetInt64(1)
	const halvings = 6
	for i := 0; i < halvings; i++ {
		c.Add(c, one)
		c.Quo(c, new(big.Float).SetInt64(2))
		c.Sqrt(c)
		s.Quo(s, c)
		s.Quo(s, new(big.Float).SetInt64(2))
	}
	s2 := new(big.Float).SetPrec(prec).Mul(s, s)
	pow := new(big.Float).SetPrec(prec).Set(s) // s^{2k+1}
	coef := new(big.Float).SetPrec(prec).SetInt64(1)
	sum := new(big.Float).SetPrec(prec)
	for k := 0; k < 120; k++ {
		if k > 0 {
			coef.Mul(coef, new(big.Float).SetInt64(int64(2*k-1)))
			coef.Quo(coef, new(big.Float).SetInt64(int64(2*k)))
			pow.Mul(pow, s2)
		}
		t := new(big.Float).SetPrec(prec).Mul(coef, pow)
		t.Quo(t, new(big.Float).SetInt64(int64(2*k+1)))
		sum.Add(sum, t)
	}
	return sum.Mul(sum, new(big.Float).SetInt64(1<<halvings))
}

// capDelta returns the total variation between uniform distributions on two
// unit d-balls whose centres are 2a apart from the geometry of their overlap:
// slicing perpendicular to the line of centres, the part of one ball outside
// the other is the slab |t| ≤ a of cross-sections of volume
// V_{d−1}(1 − t²)^{(d−1)/2}, so
//
//	TV = 2 (V_{d−1}/V_d) ∫₀^a (1 − t²)^{(d−1)/2} dt,  V_{d−1}/V_d = Γ(d/2+1)/(√π Γ((d+1)/2)).
//
// The integral is Gauss–Legendre quadrature (gonum integrate/quad) over
// panels of width ≤ 0.25/√d, 40 nodes each, on which the integrand is smooth.
func capDelta(dim int, a float64) float64 {
	n := float64(dim)
	lg1, _ := math.Lgamma(n/2 + 1)
	lg2, _ := math.Lgamma((n + 1) / 2)
	ratio := math.Exp(lg1 - lg2 - 0.5*math.Log(math.Pi))
	f := func(t float64) float64 { return math.Pow((1-t)*(1+t), (n-1)/2) }
	panels := int(math.Ceil(a / (0.25 / math.Sqrt(n))))
	w := a / float64(panels)
	var s float64
	for i := 0; i < panels; i++ {
		s += quad.Fixed(f, float64(i)*w, float64(i+1)*w, 40, quad.Legendre{}, 0)
	}
	return 2 * ratio * s
}

// mcDelta estimates the total variation between U(B(0, 1)) and U(B(2a e₁, 1))
// in d dimensions by Monte Carlo: the fraction of n uniform points of the
// first ball (Gaussian direction, radius U^{1/d}) that lie outside the second.
func mcDelta(dim int, a float64, n int, rng *rand.Rand) float64 {
	out := 0
	v := make([]float64, dim)
	for i := 0; i < n; i++ {
		var norm2 float64
		for j := range v {
			v[j] = rng.NormFloat64()
			norm2 += v[j] * v[j]
		}
		s := math.Pow(rng.Float64(), 1/float64(dim)) / math.Sqrt(norm2)
		var dist2 float64
		for j := range v {
			c := v[j] * s
			if j == 0 {
				c -= 2 * a
			}
			dist2 += c * c
		}
		if dist2 > 1 {
			out++
		}
	}
	return float64(out) / float64(n)
}
