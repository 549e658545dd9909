package audit

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpsgd/dpsgd/privacy"
)

// binomCDF is P(Bin(n, p) ≤ k) by the exact sum of the probability mass function in log
// space: the oracle independent of the incomplete beta function.
func binomCDF(k, n int, p float64) float64 {
	if p <= 0 {
		return 1
	}
	if p >= 1 {
		if k >= n {
			return 1
		}
		return 0
	}
	s := 0.0
	for i := 0; i <= k; i++ {
		ln, _ := math.Lgamma(float64(n + 1))
		li, _ := math.Lgamma(float64(i + 1))
		lr, _ := math.Lgamma(float64(n - i + 1))
		s += math.Exp(ln - li - lr + float64(i)*math.Log(p) + float64(n-i)*math.Log1p(-p))
	}
	return s
}

// TestClopperPearsonExactBinomial: the upper bound hi solves P(Bin(n, hi) ≤ k) = α and the
// lower bound lo solves P(Bin(n, lo) ≥ k) = α, checked by exact binomial sums; k = 0 has
// the closed form hi = 1 − α^{1/n}.
func TestClopperPearsonExactBinomial(t *testing.T) {
	for _, c := range []struct {
		k, n  int
		alpha float64
	}{{0, 10, 0.05}, {3, 10, 0.05}, {10, 10, 0.025}, {1, 250, 0.0125}, {17, 500, 0.0125}, {250, 500, 0.05}, {499, 500, 0.01}, {40, 4000, 0.0125}} {
		lo, hi, err := ClopperPearson(c.k, c.n, c.alpha)
		if err != nil {
			t.Fatal(err)
		}
		if !(lo <= float64(c.k)/float64(c.n) && float64(c.k)/float64(c.n) <= hi) {
			t.Errorf("k=%d n=%d: [%g, %g] misses the estimate", c.k, c.n, lo, hi)
		}
		if c.k < c.n {
			if got := binomCDF(c.k, c.n, hi); math.Abs(got-c.alpha) > 1e-6*c.alpha+1e-12 {
				t.Errorf("k=%d n=%d: P(Bin(n, hi=%g) ≤ k) = %g, want α = %g", c.k, c.n, hi, got, c.alpha)
			}
		} else if hi != 1 {
			t.Errorf("k = n = %d: hi = %g, want 1", c.n, hi)
		}
		if c.k > 0 {
			if got := 1 - binomCDF(c.k-1, c.n, lo); math.Abs(got-c.alpha) > 1e-6*c.alpha+1e-12 {
				t.Errorf("k=%d n=%d: P(Bin(n, lo=%g) ≥ k) = %g, want α = %g", c.k, c.n, lo, got, c.alpha)
			}
		} else {
			if lo != 0 {
				t.Errorf("k = 0: lo = %g, want 0", lo)
			}
			if want := 1 - math.Pow(c.alpha, 1/float64(c.n)); math.Abs(hi-want) > 1e-10 {
				t.Errorf("k = 0, n = %d: hi = %.12g, want 1 − α^{1/n} = %.12g", c.n, hi, want)
			}
		}
	}
	for _, bad := range []struct {
		k, n  int
		alpha float64
	}{{0, 0, 0.05}, {-1, 5, 0.05}, {6, 5, 0.05}, {1, 5, 0}, {1, 5, 1}, {1, 5, math.NaN()}} {
		if _, _, err := ClopperPearson(bad.k, bad.n, bad.alpha); err == nil {
			t.Errorf("ClopperPearson(%d, %d, %v): no error", bad.k, bad.n, bad.alpha)
		}
	}
}

// TestEpsilonFromRates: hand-computed values and the monotonicity the confidence bound
// relies on.
func TestEpsilonFromRates(t *testing.T) {
	for _, c := range []struct{ fpr, fnr, delta, want float64 }{
		{0.01, 0.5, 0, math.Log(50)},
		{0.5, 0.01, 0, math.Log(50)},
		{0.01, 0.5, 0.1, math.Log(40)}, // max(ln(0.89/0.5), ln(0.4/0.01))
		{0.5, 0.5, 0, 0},
		{0.7, 0.7, 0, 0},
		{0, 0.5, 0, math.Inf(1)},
	} {
		if got := EpsilonFromRates(c.fpr, c.fnr, c.delta); math.Abs(got-c.want) > 1e-12 && !(math.IsInf(got, 1) && math.IsInf(c.want, 1)) {
			t.Errorf("EpsilonFromRates(%g, %g, %g) = %g, want %g", c.fpr, c.fnr, c.delta, got, c.want)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		a, b, d := r.Float64()*0.5, r.Float64()*0.5, r.Float64()*0.01
		e := EpsilonFromRates(a, b, d)
		if EpsilonFromRates(a+0.01, b, d) > e || EpsilonFromRates(a, b+0.01, d) > e {
			t.Fatalf("not non-increasing at (%g, %g, %g)", a, b, d)
		}
	}
}

// gaussScores draws n scores N(0,1) and n scores N(mu,1).
func gaussScores(r *rand.Rand, n int, mu float64) (s0, s1 []float64) {
	s0, s1 = make([]float64, n), make([]float64, n)
	for i := range n {
		s0[i] = r.NormFloat64()
		s1[i] = mu + r.NormFloat64()
	}
	return s0, s1
}

// TestEmpiricalEpsilonCoverage: on the Gaussian shift N(0,1) against N(μ,1), whose rates at
// any threshold τ are known in closed form (FPR = Φ(−τ), FNR = Φ(τ − μ)), the interval
// [Low, High] covers the chosen test's true ε at least as often as the confidence says
// (Monte Carlo over 400 audits), and Low never exceeds the mechanism's true ε
// (privacy.GaussianEpsilon) more often than that either.
func TestEmpiricalEpsilonCoverage(t *testing.T) {
	const (
		mu, delta, conf = 2.0, 1e-5, 0.9
		trials, n       = 400, 300
	)
	phi := func(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }
	trueEps, err := privacy.GaussianEpsilon(mu, delta)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 8))
	miss, above := 0, 0
	for range trials {
		s0, s1 := gaussScores(r, n, mu)
		est, err := EmpiricalEpsilon(s0, s1, delta, conf)
		if err != nil {
			t.Fatal(err)
		}
		tau := est.Threshold
		epsTau := EpsilonFromRates(phi(-tau), phi(tau-mu), delta)
		if epsTau < est.Low || epsTau > est.High {
			miss++
		}
		if est.Low > trueEps {
			above++
		}
		if !(est.Low <= est.Point && est.Point <= est.High) {
			t.Fatalf("point %g outside [%g, %g]", est.Point, est.Low, est.High)
		}
	}
	// Binomial(400, 0.1) has standard deviation 6: allow three.
	if limit := int((1-conf)*trials + 18); miss > limit {
		t.Errorf("interval missed the test's true ε %d times of %d, want ≤ %d", miss, trials, limit)
	}
	if above > 0 {
		t.Errorf("lower bound above the true ε %g in %d audits of %d", trueEps, above, trials)
	}
}

// TestEmpiricalEpsilonPower: with many scores of a strong shift the lower bound comes
// within reach of the Gaussian mechanism's true ε, and with no shift it stays near 0.
func TestEmpiricalEpsilonPower(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	s0, s1 := gaussScores(r, 20000, 2)
	est, err := EmpiricalEpsilon(s0, s1, 1e-5, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	trueEps, _ := privacy.GaussianEpsilon(2, 1e-5)
	if !(est.Low > 0.4*trueEps && est.Low < trueEps) {
		t.Errorf("μ = 2, 20000 runs: lower bound %g, want in (%g, %g)", est.Low, 0.4*trueEps, trueEps)
	}
	s0, s1 = gaussScores(r, 20000, 0)
	if est, _ = EmpiricalEpsilon(s0, s1, 1e-5, 0.95); est.Low > 0 {
		t.Errorf("μ = 0: lower bound %g, want 0", est.Low)
	}
	if _, err := EmpiricalEpsilon([]float64{1}, []float64{1, 2}, 1e-5, 0.95); err == nil {
		t.Error("one score: no error")
	}
	if _, err := EmpiricalEpsilon([]float64{1, math.NaN()}, []float64{1, 2}, 1e-5, 0.95); err == nil {
		t.Error("NaN score: no error")
	}
	if _, err := EmpiricalEpsilon([]float64{1, 2}, []float64{1, 2}, 1e-5, 1); err == nil {
		t.Error("confidence 1: no error")
	}
}

func BenchmarkEmpiricalEpsilon(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	s0, s1 := gaussScores(r, 10000, 1)
	for b.Loop() {
		if _, err := EmpiricalEpsilon(s0, s1, 1e-5, 0.95); err != nil {
			b.Fatal(err)
		}
	}
}
