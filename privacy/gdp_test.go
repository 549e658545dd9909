package privacy

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/integrate/quad"
	"gonum.org/v1/gonum/stat/distuv"
)

// TestGaussianEpsilonPublished: Dong, Roth & Su's δ(ε) solved independently, μ = 0.5, 1, 2 →
// ε(1e-5) = 1.9931, 4.3772, 9.9973.
func TestGaussianEpsilonPublished(t *testing.T) {
	for _, c := range [][2]float64{{0.5, 1.9931}, {1, 4.3772}, {2, 9.9973}} {
		eps, err := GaussianEpsilon(c[0], 1e-5)
		if err != nil || math.Abs(eps-c[1]) > 5e-5 {
			t.Errorf("μ=%g: ε = %.6f (%v), want %.4f", c[0], eps, err, c[1])
		}
	}
}

// TestGaussianDeltaQuadrature: δ(ε) = ∫ (q(x) − e^ε p(x))₊ dx for
// P = N(0,1), Q = N(μ,1), integrated with gonum Gauss–Legendre from the
// crossing x* = ε/μ + μ/2, where the integrand changes sign.
func TestGaussianDeltaQuadrature(t *testing.T) {
	p, q := distuv.UnitNormal, distuv.Normal{Mu: 0, Sigma: 1}
	for _, mu := range []float64{0.1, 0.5, 1, 2, 4} {
		q.Mu = mu
		for _, eps := range []float64{0, 0.1, 0.5, 1, 3, 8} {
			xs := eps/mu + mu/2
			f := func(x float64) float64 { return q.Prob(x) - math.Exp(eps)*p.Prob(x) }
			want := 0.0
			for a := xs; a < xs+40; a += 0.5 {
				want += quad.Fixed(f, a, a+0.5, 20, quad.Legendre{}, 0)
			}
			got, err := GaussianDelta(mu, eps)
			if err != nil || !close(got, want, 1e-9, 1e-300) {
				t.Errorf("μ=%g ε=%g: δ = %.12g (%v), quadrature %.12g", mu, eps, got, err, want)
			}
		}
	}
}

// TestGaussianDeltaMonteCarlo: δ(ε) = E_{X∼N(μ,1)}[(1 − e^{ε−L(X)})₊] with
// privacy loss L(x) = μx − μ²/2, fixed seed, within 5 standard errors.
func TestGaussianDeltaMonteCarlo(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 200000
	for _, c := range [][2]float64{{1, 0.5}, {2, 2}, {0.5, 0.2}} {
		mu, eps := c[0], c[1]
		var s, s2 float64
		for i := 0; i < n; i++ {
			x := mu + rng.NormFloat64()
			v := math.Max(0, 1-math.Exp(eps-(mu*x-mu*mu/2)))
			s += v
			s2 += v * v
		}
		mean := s / n
		se := math.Sqrt((s2/n - mean*mean) / n)
		got, _ := GaussianDelta(mu, eps)
		if math.Abs(got-mean) > 5*se {
			t.Errorf("μ=%g ε=%g: δ = %.6g, Monte Carlo %.6g ± %.2g", mu, eps, got, mean, se)
		}
	}
}

// TestGaussianDeltaTV: at ε = 0, δ is the total variation 2Φ(μ/2) − 1.
func TestGaussianDeltaTV(t *testing.T) {
	for _, mu := range []float64{0.01, 0.3, 1, 5} {
		got, _ := GaussianDelta(mu, 0)
		want := 1 - math.Erfc(mu/2/math.Sqrt2)
		if !close(got, want, 1e-12, 0) {
			t.Errorf("μ=%g: δ(0) = %.15g, want %.15g", mu, got, want)
		}
	}
}

// TestGaussianEpsilonInverts: δ(ε(δ)) = δ, on the safe side, including large μ
// where δ(ε) must be taken in log space.
func TestGaussianEpsilonInverts(t *testing.T) {
	for _, mu := range []float64{1e-3, 0.2, 1, 3, 10, 40} {
		for _, delta := range []float64{0.5, 1e-3, 1e-5, 1e-10, 1e-15} {
			eps, err := GaussianEpsilon(mu, delta)
			if err != nil {
				t.Fatal(err)
			}
			if eps == 0 {
				if d0, _ := GaussianDelta(mu, 0); d0 > delta {
					t.Errorf("μ=%g δ=%g: ε = 0 but δ(0) = %g", mu, delta, d0)
				}
				continue
			}
			ld := logGaussianDelta(mu, eps)
			if ld > math.Log(delta)+1e-12 || ld < math.Log(delta)-1e-7 {
				t.Errorf("μ=%g δ=%g: ε = %g gives ln δ = %.12g, want %.12g", mu, delta, eps, ld, math.Log(delta))
			}
		}
	}
	if e, _ := GaussianEpsilon(0, 1e-5); e != 0 {
		t.Errorf("μ=0: ε = %g", e)
	}
	if e, _ := GaussianEpsilon(math.Inf(1), 1e-5); !math.IsInf(e, 1) {
		t.Errorf("μ=Inf: ε = %g", e)
	}
}

// TestGaussianEpochs: E = ⌈steps/stepsPerEpoch⌉, μ = √E/σ, and the exact GDP
// δ lies below the RDP bound of the same composition of Gaussian mechanisms
// (q = 1, one step per epoch).
func TestGaussianEpochs(t *testing.T) {
	g, err := NewGaussianEpochs(1.3, 100, SamplerShuffle)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]int{{0, 0}, {1, 1}, {99, 1}, {100, 1}, {101, 2}, {1000, 10}, {1001, 11}} {
		if e := g.Epochs(c[0]); e != c[1] {
			t.Errorf("Epochs(%d) = %d, want %d", c[0], e, c[1])
		}
	}
	eps, _ := g.Epsilon(1001, 1e-5)
	want, _ := GaussianEpsilon(math.Sqrt(11)/1.3, 1e-5)
	if eps != want {
		t.Errorf("Epsilon(1001) = %g, want %g", eps, want)
	}
	if e, _ := g.Epsilon(0, 1e-5); e != 0 {
		t.Errorf("Epsilon(0) = %g", e)
	}
	rdp, _ := NewPoissonRDP(1, 1.3, nil)
	for _, E := range []int{1, 10, 100} {
		for _, e := range []float64{0.5, 2, 5} {
			dg, _ := g.Delta(E*100, e)
			dr, _ := rdp.Delta(E, e)
			if dg > dr {
				t.Errorf("E=%d ε=%g: GDP δ %g above RDP bound %g", E, e, dg, dr)
			}
		}
	}
	if g.Name() != "gaussian-epochs" || g.Sampler() != SamplerShuffle {
		t.Errorf("name %q sampler %q", g.Name(), g.Sampler())
	}
	if a, _ := NewGaussianEpochs(1, 5, SamplerAllocation); a.Sampler() != SamplerAllocation {
		t.Error("allocation sampler")
	}
	for _, bad := range []struct {
		sigma   float64
		spe     int
		sampler string
	}{{0, 1, SamplerShuffle}, {1, 0, SamplerShuffle}, {1, 1, SamplerPoisson}, {1, 1, ""}} {
		if _, err := NewGaussianEpochs(bad.sigma, bad.spe, bad.sampler); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("NewGaussianEpochs(%v): err = %v", bad, err)
		}
	}
}

func TestGDPCLT(t *testing.T) {
	g, err := NewGDPCLT(0.01, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !g.Approximate() || !IsApproximate(g) || g.Sampler() != SamplerPoisson || g.Name() != "gdp-clt (approximate)" {
		t.Error("GDPCLT must declare itself an approximation for the Poisson sampler")
	}
	want := 0.01 * math.Sqrt(500*(math.E-1))
	if mu := g.Mu(500); !close(mu, want, 1e-14, 0) {
		t.Errorf("μ = %g, want %g", mu, want)
	}
	d, _ := g.Delta(500, 1)
	wd, _ := GaussianDelta(want, 1)
	if d != wd {
		t.Errorf("δ = %g, want %g", d, wd)
	}
	if _, err := NewGDPCLT(0, 1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("q=0: %v", err)
	}
	if e, err := g.Epsilon(0, 1e-5); e != 0 || err != nil {
		t.Errorf("Epsilon(0) = %g, %v", e, err)
	}
}

func TestGaussianInvalid(t *testing.T) {
	if _, err := GaussianDelta(-1, 1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("μ<0: %v", err)
	}
	if _, err := GaussianDelta(1, -1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("ε<0: %v", err)
	}
	if _, err := GaussianEpsilon(math.NaN(), 0.1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("μ=NaN: %v", err)
	}
	if _, err := GaussianEpsilon(1, 1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("δ=1: %v", err)
	}
}
