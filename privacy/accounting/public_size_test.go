package accounting

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/dpsgd/dpsgd/privacy"
)

// TestPublicSize: a Spec with PublicSize states a Poisson guarantee for zero-out adjacency
// with the same numbers as add/remove, keeps approximations approximations, leaves the
// zero-out samplers as they are, and its ledger rebuilds the same accountant.
func TestPublicSize(t *testing.T) {
	for _, sp := range []Spec{
		{Sampler: privacy.SamplerPoisson, Method: MethodPLD, Sigma: 1.1, SampleRate: 0.01},
		{Sampler: privacy.SamplerPoisson, Method: MethodRDP, Sigma: 1.1, SampleRate: 0.01},
		{Sampler: privacy.SamplerPoisson, Method: MethodGDP, Sigma: 1.1, SampleRate: 0.01},
		{Sampler: privacy.SamplerPoissonTruncated, Method: MethodRDP, Sigma: 1.1, SampleRate: 0.01, DatasetSize: 10000, MaxBatch: 200},
		{Sampler: privacy.SamplerShuffle, Method: MethodGDP, Sigma: 1.1, Rounds: 100, SampleRate: 0.01},
	} {
		base, err := sp.New()
		if err != nil {
			t.Fatal(err)
		}
		pub := sp
		pub.PublicSize = true
		acc, err := pub.New()
		if err != nil {
			t.Fatal(err)
		}
		if acc.Adjacency() != privacy.AdjacencyZeroOut {
			t.Errorf("%s/%s: adjacency %q, want zero-out", sp.Sampler, sp.Method, acc.Adjacency())
		}
		if privacy.IsApproximate(acc) != privacy.IsApproximate(base) || acc.Name() != base.Name() || acc.Sampler() != base.Sampler() {
			t.Errorf("%s/%s: approximate %v/%v, name %s/%s", sp.Sampler, sp.Method, privacy.IsApproximate(acc), privacy.IsApproximate(base), acc.Name(), base.Name())
		}
		for _, steps := range []int{1, 100, 3000} {
			e0, err0 := base.Epsilon(steps, 1e-5)
			e1, err1 := acc.Epsilon(steps, 1e-5)
			if e0 != e1 || (err0 == nil) != (err1 == nil) {
				t.Errorf("%s/%s: ε(%d) %v (%v) against %v (%v)", sp.Sampler, sp.Method, steps, e1, err1, e0, err0)
			}
		}
		led, err := NewLedger(pub, 1e-5, nil)
		if err != nil {
			t.Fatal(err)
		}
		if led.Adjacency != privacy.AdjacencyZeroOut {
			t.Errorf("%s/%s: ledger adjacency %q", sp.Sampler, sp.Method, led.Adjacency)
		}
		raw, err := json.Marshal(led)
		if err != nil {
			t.Fatal(err)
		}
		read, err := ReadLedger(bytes.NewReader(raw))
		if err != nil || !read.PublicSize || read.Adjacency != privacy.AdjacencyZeroOut {
			t.Errorf("%s/%s: ledger round trip %s: %+v, %v", sp.Sampler, sp.Method, raw, read, err)
		}
		back, err := led.Accountant()
		if err != nil || back.Adjacency() != privacy.AdjacencyZeroOut {
			t.Errorf("%s/%s: rebuilt accountant %v, %v", sp.Sampler, sp.Method, back, err)
		}
	}
}

// TestPublicSizeAgainstQuadrature: the numbers a PublicSize Poisson accountant states for
// zero-out adjacency are at least the exact δ(ε) of one zero-out step, computed independently
// by quadrature: the record, present with probability q, is replaced by a ghost whose clipped
// gradient is zero, so one step's output is P = (1 − q)·N(0, σ²) + q·N(1, σ²) (unit
// sensitivity) against Q = N(0, σ²), in both orders. The PLD accountant is also tight: within
// 2% of the exact value.
func TestPublicSizeAgainstQuadrature(t *testing.T) {
	for _, tc := range []struct{ q, sigma float64 }{{0.01, 0.8}, {0.1, 1.5}, {0.05, 0.6}} {
		for _, eps := range []float64{0.5, 1, 2} {
			exact := zeroOutDelta(tc.q, tc.sigma, eps)
			for _, m := range []string{MethodPLD, MethodRDP} {
				acc, err := Spec{Sampler: privacy.SamplerPoisson, Method: m, Sigma: tc.sigma, SampleRate: tc.q, PublicSize: true}.New()
				if err != nil {
					t.Fatal(err)
				}
				d, err := acc.Delta(1, eps)
				if err != nil {
					t.Fatal(err)
				}
				if d < exact*(1-1e-6)-1e-15 { // the quadrature is accurate to about 1e-8 relative
					t.Errorf("q %v σ %v ε %v %s: δ = %.6g below the exact zero-out δ = %.10g", tc.q, tc.sigma, eps, m, d, exact)
				}
				if m == MethodPLD && exact > 1e-9 && d > exact*1.02+1e-12 {
					t.Errorf("q %v σ %v ε %v pld: δ = %.6g, exact %.6g: not tight", tc.q, tc.sigma, eps, d, exact)
				}
			}
		}
	}
}

// zeroOutDelta is max over both orders of ∫ max(0, p − e^ε·q) for the zero-out pair of one
// Poisson-subsampled Gaussian step, by the trapezoid rule on a fine grid.
func zeroOutDelta(q, sigma, eps float64) float64 {
	norm := func(x, mu float64) float64 {
		z := (x - mu) / sigma
		return math.Exp(-z*z/2) / (sigma * math.Sqrt(2*math.Pi))
	}
	lo, hi, n := -30*sigma, 1+30*sigma, 400000
	h := (hi - lo) / float64(n)
	var d1, d2 float64
	for i := 0; i <= n; i++ {
		x := lo + float64(i)*h
		p := (1-q)*norm(x, 0) + q*norm(x, 1)
		r := norm(x, 0)
		w := h
		if i == 0 || i == n {
			w = h / 2
		}
		d1 += w * math.Max(0, p-math.Exp(eps)*r)
		d2 += w * math.Max(0, r-math.Exp(eps)*p)
	}
	return math.Max(d1, d2)
}
