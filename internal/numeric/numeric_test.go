package numeric

import (
	"errors"
	"math"
	"math/bits"
	"testing"

	"gonum.org/v1/gonum/dsp/fourier"
	"gonum.org/v1/gonum/stat/distuv"
)

// TestLogNormCDF compares with ln(erfc/2) where erfc is representable, across
// the switch to the continued fraction at −20, and with the asymptotic series
// far out.
func TestLogNormCDF(t *testing.T) {
	for x := -37.0; x <= 8; x += 0.125 {
		want := math.Log(0.5 * math.Erfc(-x/math.Sqrt2))
		if got := LogNormCDF(x); !close(got, want, 1e-13, 1e-15) {
			t.Errorf("x=%g: %.17g want %.17g", x, got, want)
		}
	}
	// Upper tail: ln Φ(x) = log1p(−Φ(−x)).
	for _, x := range []float64{5, 10, 20, 38} {
		want := math.Log1p(-0.5 * math.Erfc(x/math.Sqrt2))
		if got := LogNormCDF(x); !close(got, want, 1e-12, 1e-300) {
			t.Errorf("x=%g: %.17g want %.17g", x, got, want)
		}
	}
	// Far tail: Φ(−t) = φ(t)/t·(1 − 1/t² + 3/t⁴ − 15/t⁶ + …).
	for _, tt := range []float64{100, 1000, 1e5} {
		s := 1 - 1/(tt*tt) + 3/math.Pow(tt, 4) - 15/math.Pow(tt, 6)
		want := -tt*tt/2 - LogSqrt2Pi - math.Log(tt) + math.Log(s)
		if got := LogNormCDF(-tt); !close(got, want, 1e-15, 1e-12) {
			t.Errorf("x=%g: %.17g want %.17g", -tt, got, want)
		}
	}
	if !math.IsInf(LogNormCDF(math.Inf(-1)), -1) || LogNormCDF(math.Inf(1)) != 0 || !math.IsNaN(LogNormCDF(math.NaN())) {
		t.Error("logNormCDF special values")
	}
}

func TestLogAddSubExp(t *testing.T) {
	for _, c := range [][2]float64{{0, 0}, {1, -3}, {-700, -701}, {-1e-3, -50}, {5, 4}} {
		a, b := c[0], c[1]
		want := math.Log(math.Exp(a) + math.Exp(b))
		if got := LogAddExp(a, b); !close(got, want, 1e-14, 1e-15) {
			t.Errorf("LogAddExp(%g,%g)=%g want %g", a, b, got, want)
		}
		if a > b {
			want := math.Log(math.Exp(a) - math.Exp(b))
			if got := LogSubExp(a, b); !close(got, want, 1e-9, 1e-15) {
				t.Errorf("LogSubExp(%g,%g)=%g want %g", a, b, got, want)
			}
		}
	}
	// Near-equal arguments: ln(eᵃ − e^{a−h}) = a + ln h − h/2 + O(h²).
	b := 5 - 1e-9
	h := 5 - b // exact (Sterbenz)
	if got, want := LogSubExp(5, b), 5+math.Log(h)-h/2; !close(got, want, 1e-12, 0) {
		t.Errorf("logSubExp near-equal: %.17g want %.17g", got, want)
	}
	if LogAddExp(math.Inf(-1), 3) != 3 || LogSubExp(3, math.Inf(-1)) != 3 || !math.IsInf(LogSubExp(2, 2), -1) {
		t.Error("log-space special values")
	}
	if got := LogAddExp(1e6, 1e6); !close(got, 1e6+math.Ln2, 1e-15, 0) {
		t.Errorf("logAddExp overflow: %g", got)
	}
	if got, want := Softplus(-40), math.Exp(-40); !close(got, want, 1e-14, 0) {
		t.Errorf("Softplus(-40) = %g want %g", got, want)
	}
	if got := Softplus(800); got != 800 {
		t.Errorf("Softplus(800) = %g", got)
	}
	if got, want := LogExpm1(1e-10), math.Log(1e-10)+0.5e-10; !close(got, want, 1e-14, 0) {
		t.Errorf("LogExpm1(1e-10) = %.17g want %.17g", got, want)
	}
	if got := LogExpm1(1000); got != 1000 {
		t.Errorf("LogExpm1(1000) = %g", got)
	}
}

func TestBisectDecreasing(t *testing.T) {
	f := func(x float64) float64 { return 2 - x*x*x }
	x := BisectDecreasing(f, 0, 10, 1e-13)
	if f(x) > 0 || math.Abs(x-math.Cbrt(2)) > 1e-12 {
		t.Errorf("root %.16g, want %.16g on the f ≤ 0 side", x, math.Cbrt(2))
	}
}

// close reports |got − want| ≤ abs + rel·|want|.
func close(got, want, rel, abs float64) bool {
	return math.Abs(got-want) <= abs+rel*math.Abs(want)
}

// TestBisect: both searches find the threshold of a step predicate, pass
// errors through, and the geometric one rounds up within its tolerance.
func TestBisect(t *testing.T) {
	const x0 = 0.7379
	x, err := BisectGeometric(func(x float64) (bool, error) { return x >= x0, nil }, 0.01, 100, 1e-6)
	if err != nil || x < x0 || x > x0*(1+1e-6) {
		t.Errorf("BisectGeometric = %.10g, %v; want in [%g, %g]", x, err, x0, x0*(1+1e-6))
	}
	for _, n0 := range []int{1, 2, 7, 1000, 12345} {
		n, err := BisectInt(func(n int) (bool, error) { return n >= n0, nil }, 0, 1<<20)
		if err != nil || n != n0 {
			t.Errorf("BisectInt = %d, %v; want %d", n, err, n0)
		}
	}
	boom := errors.New("boom")
	if _, err := BisectInt(func(int) (bool, error) { return false, boom }, 0, 10); !errors.Is(err, boom) {
		t.Errorf("error not passed through: %v", err)
	}
	if _, err := BisectGeometric(func(float64) (bool, error) { return false, boom }, 1, 10, 1e-3); !errors.Is(err, boom) {
		t.Errorf("error not passed through: %v", err)
	}
	if got := FastFFTLen(1001); got != 1024 {
		t.Errorf("FastFFTLen(1001) = %d, want 1024 (1000 < 1001, 1024 = 2^10)", got)
	}
	if got := FastFFTLen(721); got != 729 {
		t.Errorf("FastFFTLen(721) = %d, want 729", got)
	}
	if d := distuv.UnitNormal.CDF(1.3) + NormSF(1.3) - 1; math.Abs(d) > 1e-15 {
		t.Errorf("Φ + (1−Φ) − 1 = %g", d)
	}
	// The upper tail keeps its relative precision (1 − Φ(10) and 1 − Φ(37.5) from mpmath at
	// 30 digits), where distuv's Survival, 1 − erf, has already rounded to 0.
	for _, tc := range []struct{ x, want float64 }{{10, 7.619853024160526e-24}, {37.5, 4.605353009581955e-308}} {
		if got := NormSF(tc.x); !close(got, tc.want, 1e-12, 0) {
			t.Errorf("NormSF(%g) = %g, want %g", tc.x, got, tc.want)
		}
	}
}

// TestBracket: doubling from 1 brackets the threshold n0 of a step predicate
// as (lo, hi] = (2^(k−1), 2^k] with the fewest probes, a cap on the moves ends
// the search with found = false at the last point tried, ok holding at once
// keeps the lo given, and an error stops the search.
func TestBracket(t *testing.T) {
	double := func(_, h int) (int, bool) { return 2 * h, true }
	for _, n0 := range []int{1, 2, 3, 7, 8, 9, 1000, 12345} {
		probes := 0
		ok := func(n int) (bool, error) { probes++; return n >= n0, nil }
		lo, hi, found, err := Bracket(ok, 0, 1, double)
		if err != nil || !found || lo >= n0 || hi < n0 || (lo > 0 && hi != 2*lo) {
			t.Errorf("n0 = %d: Bracket = (%d, %d], found %v, %v; want 2^(k−1) < %d ≤ 2^k", n0, lo, hi, found, err, n0)
		}
		if want := 1 + bits.Len(uint(n0-1)); probes != want {
			t.Errorf("n0 = %d: %d probes, want %d", n0, probes, want)
		}
		if n, err := BisectInt(ok, lo, hi); err != nil || n != n0 {
			t.Errorf("n0 = %d: BisectInt on the bracket = %d, %v", n0, n, err)
		}
	}
	// At most 3 moves: 1 → 1.5 → 2.25 → 3.375, none reaching 10.
	lo, hi, found, err := Bracket(func(x float64) (bool, error) { return x >= 10, nil }, 0, 1,
		func(i int, h float64) (float64, bool) { return 1.5 * h, i < 3 })
	if err != nil || found || hi != 3.375 || lo != 2.25 {
		t.Errorf("capped: (%g, %g], found %v, %v; want (2.25, 3.375], not found", lo, hi, found, err)
	}
	if lo, hi, found, err := Bracket(func(x float64) (bool, error) { return true, nil }, 0.5, 4, nil); err != nil || !found || lo != 0.5 || hi != 4 {
		t.Errorf("holding at once: (%g, %g], found %v, %v; want (0.5, 4], found", lo, hi, found, err)
	}
	boom := errors.New("boom")
	if _, _, found, err := Bracket(func(int) (bool, error) { return false, boom }, 0, 1, double); found || !errors.Is(err, boom) {
		t.Errorf("error not passed through: found %v, %v", found, err)
	}
}

// FastFFTLen's lengths are ones gonum's FFT can build (at most 13 radix passes: a longer
// factorization panics in fourier.NewFFT), and the smallest such 5-smooth length ≥ n, by
// brute force for small n.
func TestFastFFTLenBuildsInGonum(t *testing.T) {
	passes := func(m int) (int, bool) {
		k := 0
		for m%4 == 0 {
			m /= 4
			k++
		}
		for _, f := range []int{2, 3, 5} {
			for m%f == 0 {
				m /= f
				k++
			}
		}
		return k, m == 1
	}
	for n := 1; n <= 5000; n++ {
		want := n
		for {
			if k, smooth := passes(want); smooth && k <= 13 {
				break
			}
			want++
		}
		if got := FastFFTLen(n); got != want {
			t.Fatalf("FastFFTLen(%d) = %d, want %d", n, got, want)
		}
	}
	for x := 1.0; x < 1<<29; x *= 1.37 {
		n := int(x)
		m := FastFFTLen(n)
		if k, smooth := passes(m); m < n || !smooth || k > 13 {
			t.Fatalf("FastFFTLen(%d) = %d: %d passes, 5-smooth %v", n, m, k, smooth)
		}
	}
	// The lengths that used to panic: 2^27 needs 14 passes; 2^13·3^6·5^3 needs 16.
	for _, n := range []int{1 << 27, 1<<13*729*125 - 5} {
		if k, _ := passes(FastFFTLen(n)); k > 13 {
			t.Errorf("FastFFTLen(%d) = %d needs %d passes", n, FastFFTLen(n), k)
		}
	}
	fourier.NewFFT(FastFFTLen(1 << 20)) // must not panic
}
