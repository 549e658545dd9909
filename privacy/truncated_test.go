package privacy

import (
	"errors"
	"math"
	"math/big"
	"testing"
)

// bigLogBinomialSurvival is the oracle: ln Σ_{m>k} C(n,m) q^m (1−q)^{n−m}
// summed term by term in 256-bit big.Float (exact binomial coefficient for
// the first term, then the ratio recurrence; q is exact in big.Float).
func bigLogBinomialSurvival(n int, q float64, k int) float64 {
	const prec = 256
	bq := new(big.Float).SetPrec(prec).SetFloat64(q)
	b1q := new(big.Float).SetPrec(prec).Sub(new(big.Float).SetPrec(prec).SetInt64(1), bq)
	pow := func(x *big.Float, e int) *big.Float {
		r := new(big.Float).SetPrec(prec).SetInt64(1)
		for i := 0; i < e; i++ {
			r.Mul(r, x)
		}
		return r
	}
	m := k + 1
	term := new(big.Float).SetPrec(prec).SetInt(new(big.Int).Binomial(int64(n), int64(m)))
	term.Mul(term, pow(bq, m))
	term.Mul(term, pow(b1q, n-m))
	ratio := new(big.Float).SetPrec(prec).Quo(bq, b1q)
	sum := new(big.Float).SetPrec(prec).Set(term)
	// Beyond the mode the terms fall geometrically; stop once they are below
	// 2^-300 of the sum (the rest is far below float64 resolution).
	mode := float64(n) * q
	tiny := new(big.Float).SetPrec(prec)
	for ; m < n; m++ {
		if float64(m) > mode+1 {
			tiny.SetMantExp(sum, -300)
			if term.Cmp(tiny) < 0 {
				break
			}
		}
		term.Mul(term, new(big.Float).SetPrec(prec).SetInt64(int64(n-m)))
		term.Quo(term, new(big.Float).SetPrec(prec).SetInt64(int64(m+1)))
		term.Mul(term, ratio)
		sum.Add(sum, term)
	}
	mant := new(big.Float)
	e := sum.MantExp(mant)
	f, _ := mant.Float64()
	return math.Log(f) + float64(e)*math.Ln2
}

// TestLogBinomialSurvival checks both paths (incomplete beta and the
// log-space tail sum below 1e-280) against the big.Float sum.
func TestLogBinomialSurvival(t *testing.T) {
	cases := []struct {
		n int
		q float64
		k int
	}{
		{100, 0.1, 5}, {100, 0.1, 10}, {100, 0.1, 30}, {100, 0.5, 99},
		{1000, 0.01, 5}, {1000, 0.01, 50}, {1000, 0.01, 200}, {1000, 0.3, 900},
		{2001, 0.05, 400}, {2001, 0.5, 1990}, {3000, 0.9, 2990},
		{60001, 256.0 / 60000, 230}, {60001, 256.0 / 60000, 300},
		{60001, 256.0 / 60000, 400}, {60001, 256.0 / 60000, 1000},
	}
	for _, c := range cases {
		got := logBinomialSurvival(c.n, c.q, c.k)
		want := bigLogBinomialSurvival(c.n, c.q, c.k)
		if !close(got, want, 1e-10, 1e-9) {
			t.Errorf("n=%d q=%g k=%d: ln p = %.12g, exact %.12g", c.n, c.q, c.k, got, want)
		}
	}
	if logBinomialSurvival(10, 0.5, -1) != 0 || !math.IsInf(logBinomialSurvival(10, 0.5, 10), -1) {
		t.Error("edge cases k < 0 and k ≥ n")
	}
}

// TestTruncatedDeltaAddsUp: δ = δ_Poisson + (1 + e^ε)·(1 − (1−p)^T), with p
// the binomial tail of N+1 records, and τ ≤ T·p.
func TestTruncatedDeltaAddsUp(t *testing.T) {
	const n, b, q, sigma = 60000, 300, 256.0 / 60000, 1.1
	tr, err := NewTruncatedPoisson(q, sigma, n, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := math.Exp(bigLogBinomialSurvival(n+1, q, b))
	if !close(tr.TruncationProbability(), p, 1e-9, 0) {
		t.Errorf("p = %g, want %g", tr.TruncationProbability(), p)
	}
	base, _ := NewPoissonRDP(q, sigma, nil)
	for _, T := range []int{1, 234, 2340, 23400} {
		tau, _ := tr.TruncationMass(T)
		if wantTau := 1 - math.Pow(1-p, float64(T)); !close(tau, wantTau, 1e-8, 0) || tau > float64(T)*p {
			t.Errorf("T=%d: τ = %g, want %g ≤ T·p = %g", T, tau, wantTau, float64(T)*p)
		}
		for _, eps := range []float64{0.5, 1, 3} {
			d, _ := tr.Delta(T, eps)
			dp, _ := base.Delta(T, eps)
			if want := dp + (1+math.Exp(eps))*tau; !close(d, math.Min(1, want), 1e-14, 0) {
				t.Errorf("T=%d ε=%g: δ = %g, want %g + %g", T, eps, d, dp, (1+math.Exp(eps))*tau)
			}
		}
	}
}

// TestTruncatedEpsilon: ε is the smallest with total δ ≤ target: the total at
// ε meets δ, just below ε it does not, and ε is at least the Poisson ε.
func TestTruncatedEpsilon(t *testing.T) {
	const n, q, sigma = 60000, 256.0 / 60000, 1.1
	base, _ := NewPoissonRDP(q, sigma, nil)
	feasible, positive := 0, 0
	for _, b := range []int{330, 370, 400, 450} {
		tr, err := NewTruncatedPoisson(q, sigma, n, b, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, T := range []int{234, 2340, 14040} {
			for _, delta := range []float64{1e-3, 1e-5} {
				eps, err := tr.Epsilon(T, delta)
				if errors.Is(err, ErrUnreachable) {
					if tau, _ := tr.TruncationMass(T); 2*tau < delta*0.5 {
						t.Errorf("B=%d T=%d δ=%g: unreachable with τ = %g", b, T, delta, tau)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				feasible++
				d, _ := tr.Delta(T, eps)
				if d > delta*(1+1e-9) {
					t.Errorf("B=%d T=%d δ=%g: ε = %g gives δ = %g", b, T, delta, eps, d)
				}
				if eps > 0 {
					positive++
					below := eps - 1e-6*math.Max(1, eps)
					if d2, _ := tr.Delta(T, below); d2 <= delta {
						t.Errorf("B=%d T=%d δ=%g: ε = %g not minimal (δ(%g) = %g)", b, T, delta, eps, below, d2)
					}
				}
				if ep, _ := base.Epsilon(T, delta); eps < ep {
					t.Errorf("B=%d T=%d: truncated ε %g below Poisson ε %g", b, T, eps, ep)
				}
			}
		}
	}
	if feasible < 10 || positive < 10 {
		t.Errorf("only %d feasible cases (%d with ε > 0)", feasible, positive)
	}
}

func TestTruncatedLimits(t *testing.T) {
	// A physical batch above N+1 never truncates: the Poisson accountant.
	tr, _ := NewTruncatedPoisson(0.01, 1, 1000, 1001, nil)
	base, _ := NewPoissonRDP(0.01, 1, nil)
	e1, _ := tr.Epsilon(500, 1e-5)
	e2, _ := base.Epsilon(500, 1e-5)
	if tr.TruncationProbability() != 0 || e1 != e2 {
		t.Errorf("no truncation: p = %g, ε %g vs %g", tr.TruncationProbability(), e1, e2)
	}
	// A batch cut at the expected size truncates about half the time.
	tr, _ = NewTruncatedPoisson(0.01, 1, 1000, 10, nil)
	if _, err := tr.Epsilon(10, 1e-5); !errors.Is(err, ErrUnreachable) {
		t.Errorf("2τ ≥ δ: err = %v", err)
	}
	if d, _ := tr.Delta(10, 1); d > 1 {
		t.Errorf("δ = %g > 1", d)
	}
	if _, err := tr.TruncationMass(-1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("TruncationMass(-1): err = %v", err)
	}
	if tr.Sampler() != SamplerPoissonTruncated || tr.Name() != "rdp+truncation" {
		t.Errorf("name %q sampler %q", tr.Name(), tr.Sampler())
	}
	for _, bad := range [][2]int{{0, 10}, {100, 0}, {-5, 10}} {
		if _, err := NewTruncatedPoisson(0.1, 1, bad[0], bad[1], nil); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("N=%d B=%d: err = %v", bad[0], bad[1], err)
		}
	}
	if _, err := NewTruncatedPoisson(0.1, -1, 100, 10, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("σ<0: err = %v", err)
	}
}
