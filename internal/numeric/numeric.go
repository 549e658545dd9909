// Package numeric is the one home of the module's small numerical helpers,
// shared by the privacy accountants and the audit: log-space arithmetic
// (ln(eᵃ ± eᵇ), softplus), the normal tails (ln Φ with full precision in the
// far tail, 1 − Φ without cancellation; Φ itself is gonum's
// distuv.UnitNormal.CDF), one-dimensional root finding and search
// (bracketing, bisections, golden-section search), and the FFT helpers of the
// PLD compositions.
package numeric

import (
	"math"
	"math/cmplx"

	"gonum.org/v1/gonum/stat/distuv"
)

// LogSqrt2Pi is ln √(2π).
const LogSqrt2Pi = 0.91893853320467274178032973640561763986139747363778

// LogAddExp returns ln(eᵃ + eᵇ) without overflow.
func LogAddExp(a, b float64) float64 {
	if a < b {
		a, b = b, a
	}
	if math.IsInf(b, -1) {
		return a
	}
	if math.IsInf(a, 1) {
		return a
	}
	return a + math.Log1p(math.Exp(b-a))
}

// LogSubExp returns ln(eᵃ − eᵇ) for a ≥ b; it returns −Inf when a ≤ b.
func LogSubExp(a, b float64) float64 {
	if math.IsInf(b, -1) {
		return a
	}
	if a <= b {
		return math.Inf(-1)
	}
	return a + math.Log(-math.Expm1(b-a))
}

// Softplus returns ln(1 + eˣ) without overflow or loss of precision.
func Softplus(x float64) float64 {
	if x > 0 {
		return x + math.Log1p(math.Exp(-x))
	}
	return math.Log1p(math.Exp(x))
}

// LogExpm1 returns ln(eˣ − 1) for x > 0, accurate for tiny and huge x.
func LogExpm1(x float64) float64 {
	if x > 40 {
		return x + math.Log1p(-math.Exp(-x))
	}
	return math.Log(math.Expm1(x))
}

// LogNormCDF returns ln Φ(x), Φ the standard normal distribution function,
// with full relative precision in both tails. Below x = −20 it uses Laplace's
// continued fraction for the Mills ratio Φ(−t)/φ(t) = 1/(t+1/(t+2/(t+3/(t+…)))),
// so it does not underflow where erfc would.
func LogNormCDF(x float64) float64 {
	switch {
	case math.IsNaN(x):
		return math.NaN()
	case x > 0:
		return math.Log1p(-0.5 * math.Erfc(x/math.Sqrt2))
	case x > -20:
		return math.Log(0.5 * math.Erfc(-x/math.Sqrt2))
	case math.IsInf(x, -1):
		return math.Inf(-1)
	}
	t := -x
	f := t
	for k := 48; k >= 1; k-- {
		f = t + float64(k)/f
	}
	return -0.5*t*t - LogSqrt2Pi - math.Log(f)
}

// BisectDecreasing finds the crossing of a non-increasing function f on
// [lo, hi] with f(lo) > 0 ≥ f(hi). It returns a point x with f(x) ≤ 0 within
// tol (absolute) of the crossing: the conservative end of the last bracket.
func BisectDecreasing(f func(float64) float64, lo, hi, tol float64) float64 {
	for i := 0; i < 200 && hi-lo > tol; i++ {
		mid := lo + 0.5*(hi-lo)
		if mid <= lo || mid >= hi {
			break
		}
		if f(mid) > 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// NormSF returns 1 − Φ(x) = Φ(−x) without cancellation in the upper tail: ½ erfc(x/√2) by
// distuv.UnitNormal.CDF(−x). For Φ itself use distuv.UnitNormal.CDF. distuv's Survival
// computes ½(1 − erf(x/√2)) instead, which loses the upper tail (7.6e-24 at x = 10 is 0 there).
func NormSF(x float64) float64 { return distuv.UnitNormal.CDF(-x) }

// FastFFTLen returns the smallest n' ≥ n of the form 2^a·3^b·5^c that gonum's FFT can
// factor: its FFTPACK port splits n' into radix-4, 2, 3 and 5 passes and has room for at most
// maxFFTFactors of them (⌊a/2⌋ + a mod 2 + b + c ≤ 13); a longer factorization panics inside
// fourier.NewFFT (2^27 = 4^13·2, or 2^13·3^6·5^3, say).
func FastFFTLen(n int) int {
	best := math.MaxInt
	for p5, c := 1, 0; p5 < 2*n; p5, c = p5*5, c+1 {
		for p35, b := p5, 0; p35 < 2*n; p35, b = p35*3, b+1 {
			p, a := p35, 0
			for p < n {
				p *= 2
				a++
			}
			if a/2+a%2+b+c <= maxFFTFactors {
				best = min(best, p)
			}
		}
	}
	if best == math.MaxInt { // beyond 4^13·5^… ≈ 10⁹: no such length; n itself is the answer
		return n
	}
	return best
}

// maxFFTFactors is the number of radix passes gonum's FFTPACK port has room for (its factor
// table has 15 entries, the first two being n and the count).
const maxFFTFactors = 13

// BisectGeometric returns the smallest x in (lo, hi], to relative tolerance
// rel and rounded up, at which the monotone predicate ok holds, given that it
// fails at lo > 0 and holds at hi. The search is geometric (scale-free), as
// suits noise multipliers. An error from ok stops the search.
func BisectGeometric(ok func(x float64) (bool, error), lo, hi, rel float64) (float64, error) {
	return bisect(ok, lo, hi, func(lo, hi float64) (float64, bool) {
		if !(hi > lo*(1+rel)) {
			return 0, false
		}
		mid := math.Sqrt(lo * hi)
		return mid, !(mid <= lo || mid >= hi)
	})
}

// BisectInt returns the smallest n in (lo, hi] at which the monotone
// predicate ok holds, given that it fails at lo (or lo is below the domain)
// and holds at hi. An error from ok stops the search.
func BisectInt(ok func(n int) (bool, error), lo, hi int) (int, error) {
	return bisect(ok, lo, hi, func(lo, hi int) (int, bool) {
		return lo + (hi-lo)/2, hi-lo > 1
	})
}

// Bracket searches upward for a point where the monotone predicate ok holds,
// to bracket its boundary for BisectInt or BisectGeometric: it evaluates ok at
// hi and, while ok fails there, moves lo to hi and hi to next(i, hi) (i = 0, 1,
// … counts the moves), until ok holds (found = true) or next reports that no
// further point may be tried (more = false; found = false, hi the last point
// tried). lo is the last point where ok failed, or the lo given (a point known
// to fail, or below the domain) if ok held at the first hi. An error from ok
// stops the search.
func Bracket[T float64 | int](ok func(T) (bool, error), lo, hi T, next func(i int, hi T) (T, bool)) (newLo, newHi T, found bool, err error) {
	for i := 0; ; i++ {
		good, err := ok(hi)
		if err != nil {
			return lo, hi, false, err
		}
		if good {
			return lo, hi, true, nil
		}
		h, more := next(i, hi)
		if !more {
			return lo, hi, false, nil
		}
		lo, hi = hi, h
	}
}

// bisect is the loop of BisectGeometric and BisectInt: while split gives a
// point mid of (lo, hi) (more = true), it evaluates ok there and moves hi to
// mid where ok holds, lo otherwise; then it returns hi. An error from ok stops
// the search.
func bisect[T float64 | int](ok func(T) (bool, error), lo, hi T, split func(lo, hi T) (mid T, more bool)) (T, error) {
	for {
		mid, more := split(lo, hi)
		if !more {
			return hi, nil
		}
		good, err := ok(mid)
		if err != nil {
			return 0, err
		}
		if good {
			hi = mid
		} else {
			lo = mid
		}
	}
}

// PowPolar raises every entry of c to the real power n in polar form, |z|ⁿ·e^{i·n·arg z},
// in place; zeros stay zero. On the DFT of a sequence it gives that of the n-fold circular
// self-convolution, as the PLD compositions use it.
func PowPolar(c []complex128, n float64) {
	for i, z := range c {
		r := cmplx.Abs(z)
		if r == 0 {
			continue
		}
		s, co := math.Sincos(n * cmplx.Phase(z))
		m := math.Exp(n * math.Log(r))
		c[i] = complex(m*co, m*s)
	}
}

// invPhi is (√5 − 1)/2 = 1/φ, the golden-section ratio.
const invPhi = 0.6180339887498949

// Golden is where a golden-section search ended: the bracket [Lo, Hi], its interior points
// C < D and the values FC = f(C), FD = f(D).
type Golden struct {
	Lo, Hi, C, D, FC, FD float64
}

// GoldenMax searches [lo, hi] for the maximum of f, unimodal there, by golden-section search.
// With the interior points c = hi − (hi−lo)/φ and d = lo + (hi−lo)/φ it keeps [lo, d] when
// f(c) ≥ f(d) and [c, hi] otherwise, one new evaluation of f per step (f(c), then f(d), at the
// start). It stops after maxIter steps, once hi − lo ≤ tol, or when rounding has left the
// points not strictly inside the bracket (lo < c < d < hi), and returns the last bracket.
func GoldenMax(f func(float64) float64, lo, hi float64, maxIter int, tol float64) Golden {
	c, d := hi-invPhi*(hi-lo), lo+invPhi*(hi-lo)
	fc, fd := f(c), f(d)
	for i := 0; i < maxIter && hi-lo > tol && lo < c && c < d && d < hi; i++ {
		if fc >= fd {
			hi, d, fd = d, c, fc
			c = hi - invPhi*(hi-lo)
			fc = f(c)
		} else {
			lo, c, fc = c, d, fd
			d = lo + invPhi*(hi-lo)
			fd = f(d)
		}
	}
	return Golden{Lo: lo, Hi: hi, C: c, D: d, FC: fc, FD: fd}
}

// GoldenMin is GoldenMax for the minimum of f: it keeps [lo, d] when f(c) ≤ f(d).
func GoldenMin(f func(float64) float64, lo, hi float64, maxIter int, tol float64) Golden {
	g := GoldenMax(func(x float64) float64 { return -f(x) }, lo, hi, maxIter, tol)
	g.FC, g.FD = -g.FC, -g.FD
	return g
}
