package privacy

import (
	"errors"
	"math"
	"testing"
)

// TestEpochsOf: E = EpochsOf(steps, M) is the least E with E·M ≥ steps, so the
// last of E epochs of M steps is begun but the E-th is needed: (E−1)·M < steps
// ≤ E·M; no steps begin no epoch.
func TestEpochsOf(t *testing.T) {
	for m := 1; m <= 9; m++ {
		for steps := -3; steps <= 50; steps++ {
			e := EpochsOf(steps, m)
			if steps <= 0 {
				if e != 0 {
					t.Errorf("EpochsOf(%d, %d) = %d, want 0", steps, m, e)
				}
				continue
			}
			if !((e-1)*m < steps && steps <= e*m) {
				t.Errorf("EpochsOf(%d, %d) = %d: want (E−1)·M < steps ≤ E·M", steps, m, e)
			}
		}
	}
}

// TestComposeRDP: n compositions add the curve n times (by repeated addition,
// exact for these dyadic values), and zero compositions give zeros even where
// the curve is infinite.
func TestComposeRDP(t *testing.T) {
	curve := []float64{0.125, 1.5, 0, math.Inf(1)}
	for n := 0; n <= 6; n++ {
		got := ComposeRDP(curve, n)
		if len(got) != len(curve) {
			t.Fatalf("n = %d: %d orders, want %d", n, len(got), len(curve))
		}
		for i, r := range curve {
			want := 0.0
			for k := 0; k < n; k++ {
				want += r
			}
			if got[i] != want {
				t.Errorf("n = %d, order %d: %g, want %g", n, i, got[i], want)
			}
		}
	}
}

// TestMuGDP: a μ(steps) curve answers with the Gaussian pair's ε and δ at that
// μ, and refuses a negative step count before evaluating μ.
func TestMuGDP(t *testing.T) {
	mu := MuGDP(func(steps int) float64 {
		if steps < 0 {
			t.Fatalf("μ evaluated at steps = %d", steps)
		}
		return math.Sqrt(float64(steps)) / 2
	})
	for _, steps := range []int{0, 1, 4, 100} {
		m := math.Sqrt(float64(steps)) / 2
		e, err := mu.Epsilon(steps, 1e-5)
		we, werr := GaussianEpsilon(m, 1e-5)
		if e != we || err != werr {
			t.Errorf("steps %d: Epsilon = %g, %v; want %g, %v", steps, e, err, we, werr)
		}
		d, err := mu.Delta(steps, 1)
		wd, werr := GaussianDelta(m, 1)
		if d != wd || err != werr {
			t.Errorf("steps %d: Delta = %g, %v; want %g, %v", steps, d, err, wd, werr)
		}
	}
	if _, err := mu.Epsilon(-1, 1e-5); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Epsilon(-1): %v, want ErrInvalidArgument", err)
	}
	if _, err := mu.Delta(-1, 1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Delta(-1): %v, want ErrInvalidArgument", err)
	}
}
