package allocation

import (
	"errors"
	"math"
	"testing"

	"github.com/dpsgd/dpsgd/privacy"
)

// TestExactTVVectors checks the test vectors of Ertan & van Dijk 2026
// (E = 1, TV = 0.10 at the exact σ given to 4 digits): the exact σ lies
// within half a unit of the last digit, i.e. TV(σ−5e-5) ≥ 0.1 ≥ TV(σ+5e-5).
func TestExactTVVectors(t *testing.T) {
	for _, c := range []struct {
		m     int
		sigma float64
	}{{100, 0.6770}, {1000, 0.4520}, {10000, 0.3532}} {
		lo, err := ExactTVEpoch(c.sigma-5e-5, c.m)
		if err != nil {
			t.Fatal(err)
		}
		hi, err := ExactTVEpoch(c.sigma+5e-5, c.m)
		if err != nil {
			t.Fatal(err)
		}
		if !(lo >= 0.1 && hi <= 0.1) {
			t.Errorf("M=%d: TV(σ∓5e-5) = %.6g, %.6g do not bracket 0.1", c.m, lo, hi)
		}
	}
}

// TestExactTVTable checks an independently computed exact column (values
// printed to 5 significant digits) and that the chi-square bound ½√(b/M)
// (computed here) is above the exact value by the printed ratio.
func TestExactTVTable(t *testing.T) {
	for _, c := range []struct {
		sigma float64
		m     int
		want  float64
		ratio float64
	}{
		{0.75, 16384, 6.8956e-3, 1.2561},
		{1.0, 16384, 4.0848e-3, 1.2535},
		{1.5, 65536, 1.16578e-3, 1.2533},
		{1.0, 1140000, 4.8978e-4, 1.2533},
	} {
		got, err := ExactTVEpoch(c.sigma, c.m)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-c.want) > 6e-5*c.want {
			t.Errorf("σ=%g M=%d: TV = %.6g, want %.5g", c.sigma, c.m, got, c.want)
		}
		chi := 0.5 * math.Sqrt(math.Expm1(1/(c.sigma*c.sigma))/float64(c.m))
		if chi < got || math.Abs(chi/got-c.ratio) > 2e-4 {
			t.Errorf("σ=%g M=%d: chi-square/exact = %.5f, want %.4f", c.sigma, c.m, chi/got, c.ratio)
		}
	}
}

// TestExactMonteCarlo compares both directions with Monte Carlo (fixed
// seeds, 5 standard errors) at a few (M, σ, ε), and checks the chi-square
// upper bound ½√(b/M) ≥ TV.
func TestExactMonteCarlo(t *testing.T) {
	n := 100000
	for i, c := range []struct {
		sigma float64
		m     int
		eps   float64
	}{{1.5, 3, 0}, {0.8, 20, 0}, {1.2, 50, 0.3}} {
		d1, se1, d2, se2 := exactMCEpochs(c.sigma, c.m, 1, n, c.eps, uint64(i+1))
		got, err := ExactDeltaEpoch(c.sigma, c.m, c.eps)
		if err != nil {
			t.Fatal(err)
		}
		want := math.Max(d1, d2)
		se := math.Max(se1, se2)
		if math.Abs(got-want) > 5*se+1e-9 {
			t.Errorf("σ=%g M=%d ε=%g: exact %.6g, Monte Carlo %.6g ± %.2g", c.sigma, c.m, c.eps, got, want, se)
		}
		if c.eps == 0 {
			tv, err := ExactTVEpoch(c.sigma, c.m)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(tv-got) > 1e-12 {
				t.Errorf("ExactDeltaEpoch(ε=0) = %.12g ≠ ExactTVEpoch = %.12g", got, tv)
			}
			if chi := 0.5 * math.Sqrt(math.Expm1(1/(c.sigma*c.sigma))/float64(c.m)); chi < tv {
				t.Errorf("chi-square bound %.6g below exact TV %.6g", chi, tv)
			}
		}
	}
}

// TestExactGaussianM1 checks M = 1 against privacy.GaussianDelta (the
// Gaussian mechanism with sensitivity 1 and noise σ) and M = 2 against M = 1
// (TV decreases in M).
func TestExactGaussianM1(t *testing.T) {
	for _, s := range []float64{0.5, 1, 3} {
		for _, e := range []float64{0, 0.5, 2} {
			got, err := ExactDeltaEpoch(s, 1, e)
			if err != nil {
				t.Fatal(err)
			}
			want, err := privacy.GaussianDelta(1/s, e)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got-want) > 1e-12 {
				t.Errorf("σ=%g ε=%g: %.12g, GaussianDelta %.12g", s, e, got, want)
			}
		}
	}
}

// TestExactMonotone: TV decreases in σ and in M, and δ(ε) decreases in ε.
func TestExactMonotone(t *testing.T) {
	prev := 1.0
	for _, s := range []float64{0.6, 0.8, 1, 1.5, 3} {
		v, err := ExactTVEpoch(s, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if !(v < prev) {
			t.Errorf("TV not decreasing in σ at σ=%g: %g ≥ %g", s, v, prev)
		}
		prev = v
	}
	prev = 1
	for _, m := range []int{1, 100, 10000, 1000000} {
		v, err := ExactTVEpoch(1, m)
		if err != nil {
			t.Fatal(err)
		}
		if !(v < prev) {
			t.Errorf("TV not decreasing in M at M=%d: %g ≥ %g", m, v, prev)
		}
		prev = v
	}
	prev = 1
	for _, e := range []float64{0, 0.01, 0.05, 0.1, 0.3} {
		v, err := ExactDeltaEpoch(1, 1000, e)
		if err != nil {
			t.Fatal(err)
		}
		if !(v < prev) || v < 0 {
			t.Errorf("δ not decreasing in ε at ε=%g: %g ≥ %g", e, v, prev)
		}
		prev = v
	}
}

// TestExactQuadratureRefinement: a finer u-rule (more panels) changes TV by
// less than the stated tolerance.
func TestExactQuadratureRefinement(t *testing.T) {
	for _, c := range []struct {
		sigma float64
		m     int
	}{{1, 1000}, {0.75, 16384}} {
		p := exactNewPair(c.sigma, c.m, 0)
		coarse := p.hk(0) + p.trunc
		q := exactNewPair(c.sigma, c.m, 50*p.sZ) // 12× more u-panels
		fine := q.hk(0)
		if math.Abs(coarse-fine) > exactTolerance || coarse < fine-exactTolerance {
			t.Errorf("σ=%g M=%d: coarse %.15g, fine %.15g", c.sigma, c.m, coarse, fine)
		}
	}
}

func TestExactBadInput(t *testing.T) {
	for _, c := range []struct {
		s float64
		m int
		e float64
	}{{0, 10, 0}, {-1, 10, 0}, {math.NaN(), 10, 0}, {math.Inf(1), 10, 0}, {1, 0, 0}, {1, 10, -1}, {1, 10, math.NaN()}, {1, 10, math.Inf(1)}} {
		if _, err := ExactDeltaEpoch(c.s, c.m, c.e); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("ExactDeltaEpoch(%g, %d, %g): err = %v", c.s, c.m, c.e, err)
		}
	}
	if _, err := ExactTVEpoch(1, -3); !errors.Is(err, privacy.ErrInvalidArgument) {
		t.Errorf("ExactTVEpoch(1, -3): err = %v", err)
	}
}
