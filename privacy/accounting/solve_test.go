package accounting

import (
	"errors"
	"math"
	"testing"

	"github.com/dpsgd/dpsgd/privacy"
)

// TestSolveSigmaAnchor: dp_accounting's get_smallest_subsampled_gaussian_noise
// (ε = 1, δ = 1e-5, q = 0.01, one step) = 0.67379294682. PLD
// is tight to its discretization; RDP, loose for a single step, needs more
// noise (never less).
func TestSolveSigmaAnchor(t *testing.T) {
	const want = 0.67379294682
	target := privacy.Budget{Epsilon: 1, Delta: 1e-5}
	for _, c := range []struct {
		method string
		rel    float64
	}{{MethodPLD, 2e-3}, {MethodRDP, 0.6}} {
		spec := Spec{Sampler: privacy.SamplerPoisson, Method: c.method, SampleRate: 0.01}
		got, err := SolveSigma(spec, 1, target)
		if err != nil {
			t.Fatal(err)
		}
		if got < want*(1-2e-4) || got > want*(1+c.rel) {
			t.Errorf("%s: σ = %.8g, want %.8g (at most %g relative above)", c.method, got, want, c.rel)
		}
	}
}

// TestSolveSigmaBracket: the solved σ meets the target and 0.9998σ does not.
func TestSolveSigmaBracket(t *testing.T) {
	for _, c := range []struct {
		spec   Spec
		steps  int
		target privacy.Budget
	}{
		{Spec{Sampler: privacy.SamplerShuffle, Method: MethodGDP, Rounds: 100}, 500, privacy.Budget{Epsilon: 2, Delta: 1e-5}},
		{Spec{Sampler: privacy.SamplerAllocation, Method: MethodChiSquare, Rounds: 1000}, 3000, privacy.Budget{Epsilon: 0, Delta: 0.05}},
		{Spec{Sampler: privacy.SamplerPoisson, Method: MethodRDP, SampleRate: 0.01}, 1000, privacy.Budget{Epsilon: 1, Delta: 1e-6}},
	} {
		sigma, err := SolveSigma(c.spec, c.steps, c.target)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []struct {
			sigma float64
			want  bool
		}{{sigma, true}, {sigma * (1 - 2e-4), false}} {
			sp := c.spec
			sp.Sigma = s.sigma
			ok, err := within(sp, c.steps, c.target)
			if err != nil || ok != s.want {
				t.Errorf("%s/%s: at σ = %.8g within = %v (%v), want %v", c.spec.Sampler, c.spec.Method, s.sigma, ok, err, s.want)
			}
		}
	}
}

// TestSolveRoundsWorkedExample reproduces van Dijk & Ertan's worked example and
// independently computed values: at σ = 1 and
// a TV target of 0.01 over one epoch, Berry–Esseen needs M ≈ 1.1401·10⁶, the
// chi-square bound M = 4,296 (the closed form ⌈(e−1)/(4·0.01²)⌉), the exact
// TV M = 2,730.
func TestSolveRoundsWorkedExample(t *testing.T) {
	target := privacy.Budget{Epsilon: 0, Delta: 0.01}
	for _, c := range []struct {
		method string
		lo, hi int
	}{
		{MethodChiSquare, int(math.Ceil((math.E - 1) / (4 * 1e-4))), int(math.Ceil((math.E - 1) / (4 * 1e-4)))},
		{MethodBerryEsseen, 1139000, 1141200},
		{MethodExact, 2720, 2740},
	} {
		spec := Spec{Sampler: privacy.SamplerAllocation, Method: c.method, Sigma: 1}
		m, err := SolveRounds(spec, 1, target)
		if err != nil {
			t.Fatalf("%s: %v", c.method, err)
		}
		if m < c.lo || m > c.hi {
			t.Errorf("%s: M = %d, want in [%d, %d]", c.method, m, c.lo, c.hi)
		}
	}
	// The amplification-free shuffle bound does not improve with M: unreachable.
	_, err := SolveRounds(Spec{Sampler: privacy.SamplerShuffle, Method: MethodGDP, Sigma: 1}, 1, target)
	if !errors.Is(err, privacy.ErrUnreachable) {
		t.Errorf("shuffle gdp rounds: %v, want ErrUnreachable", err)
	}
}

// TestSolveEpochs: the answer E fits and E+1 does not, checked against the
// closed form of the shuffle bound (μ = √E/σ).
func TestSolveEpochs(t *testing.T) {
	spec := Spec{Sampler: privacy.SamplerShuffle, Method: MethodGDP, Sigma: 2, Rounds: 50}
	target := privacy.Budget{Epsilon: 3, Delta: 1e-5}
	e, err := SolveEpochs(spec, 50, target)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		epochs int
		fits   bool
	}{{e, true}, {e + 1, false}} {
		d, err := privacy.GaussianDelta(math.Sqrt(float64(c.epochs))/2, 3)
		if err != nil {
			t.Fatal(err)
		}
		if (d <= 1e-5) != c.fits {
			t.Errorf("E = %d: δ = %g, fits = %v", c.epochs, d, c.fits)
		}
	}
	spec.Sigma = 0.05
	if _, err := SolveEpochs(spec, 50, target); !errors.Is(err, privacy.ErrUnreachable) {
		t.Errorf("one epoch too many: %v, want ErrUnreachable", err)
	}
}
