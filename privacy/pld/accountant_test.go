package pld

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/privacy"
)

// TestPoissonAccountantTinySigma: a σ so small that the loss range alone needs an interval
// above 1 is refused with ErrGridTooLarge and a readable message, never a nil cause.
func TestPoissonAccountantTinySigma(t *testing.T) {
	acc, err := NewPoissonAccountant(0.01, 1e-9)
	if err != nil {
		t.Fatal(err)
	}
	_, err = acc.Epsilon(10, 1e-5)
	if !errors.Is(err, ErrGridTooLarge) || strings.Contains(err.Error(), "%!") {
		t.Fatalf("err = %v, want ErrGridTooLarge with a readable message", err)
	}
}

// TestPoissonAccountantHugeSigma: a σ far beyond any training (σ² overflowing
// included) gives a loss distribution concentrated at 0, ε = 0 and no mass at
// +∞, not a panic or a spurious mass at infinity.
func TestPoissonAccountantHugeSigma(t *testing.T) {
	for _, sigma := range []float64{1e8, 1e20, 1e160, 1e200, 1e300} {
		acc, err := NewPoissonAccountant(0.01, sigma)
		if err != nil {
			t.Fatal(err)
		}
		eps, err := acc.Epsilon(10, 1e-5)
		if err != nil || eps != 0 {
			t.Errorf("σ = %g: Epsilon = %g, %v; want 0", sigma, eps, err)
		}
		rem, add, err := acc.PLDs(10)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []*PMF{rem, add} {
			if p.InfinityMass() > 1e-20 || math.Abs(p.Mass()-1) > 1e-12 {
				t.Errorf("σ = %g: mass at +∞ %g, total %g", sigma, p.InfinityMass(), p.Mass())
			}
		}
		// δ(0) is the total variation, at most 10·q·(2Φ(1/(2σ)) − 1) ≤ 10·q·0.4/σ.
		if tv, err := acc.Delta(10, 0); err != nil || tv > 0.04/sigma+1e-12 {
			t.Errorf("σ = %g: TV = %g, %v", sigma, tv, err)
		}
	}
}

// TestSelfComposeHugeSteps: a step count whose grid indices overflow int
// returns an error instead of panicking in the FFT. Error bounds that reach 1
// are an invalid argument no σ fixes (not ErrGridTooLarge, which the σ search
// reads as "σ too small"); a support that outgrows the grid is ErrGridTooLarge.
func TestSelfComposeHugeSteps(t *testing.T) {
	const n = 120_000_000_000_000_000
	g, err := PoissonGaussian(0.01, 1, Remove, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.SelfCompose(n)
	if !errors.Is(err, privacy.ErrInvalidArgument) || errors.Is(err, ErrGridTooLarge) {
		t.Errorf("Gaussian step: err = %v, want an invalid argument other than ErrGridTooLarge", err)
	}
	exact, err := FromLosses([]float64{-1e-3, 1e-3}, []float64{0.5, 0.5}, 0, DefaultInterval, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exact.SelfCompose(n); !errors.Is(err, ErrGridTooLarge) {
		t.Errorf("exact PMF: err = %v, want ErrGridTooLarge", err)
	}
	for _, sigma := range []float64{1, 1e4, 1e300} {
		acc, err := NewPoissonAccountant(0.01, sigma)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := acc.Epsilon(n, 1e-5); err == nil || errors.Is(err, ErrGridTooLarge) {
			t.Errorf("σ = %g: err = %v, want an error other than ErrGridTooLarge", sigma, err)
		}
	}
}
