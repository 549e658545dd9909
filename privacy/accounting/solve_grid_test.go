package accounting

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dpsgd/dpsgd/privacy"
)

// solveGridEnv selects the full grid of TestSolveSigmaGrid when set to "full".
const solveGridEnv = "DPSGD_SOLVE_GRID"

// gridCell is one calibration: Poisson sampling at rate q for steps steps, target ε
// at δ = 1e-5.
type gridCell struct {
	q     float64
	steps int
	eps   float64
}

// solveGrid returns the cells to run: with DPSGD_SOLVE_GRID=full every combination of
// q ∈ {1e-4, 0.0042667, 0.05, 0.5}, steps ∈ {1, 100, 14063, 10⁵} and ε ∈ {0.1, 1, 10}
// (48 cells); otherwise 16 of them, each q, step count and ε at least three times and
// five of the cube's eight corners, leaving out the slowest cells (the PLD accountant
// takes seconds per σ below about 0.5, that is for a large ε with a small q or few
// steps, and the RDP accountant for σ in the thousands at q = 0.5); with -short four
// cheap cells, among them the long run that used to fail.
func solveGrid(t *testing.T) []gridCell {
	qs := []float64{1e-4, 0.004266666666666667, 0.05, 0.5}
	if os.Getenv(solveGridEnv) == "full" {
		var cells []gridCell
		for _, q := range qs {
			for _, steps := range []int{1, 100, 14063, 100000} {
				for _, eps := range []float64{0.1, 1, 10} {
					cells = append(cells, gridCell{q, steps, eps})
				}
			}
		}
		return cells
	}
	cells := []gridCell{
		{qs[1], 14063, 1}, // the long run that used to fail
		{qs[0], 100000, 0.1},
		{qs[3], 1, 1},
		{qs[2], 100000, 10},
	}
	if testing.Short() {
		return cells
	}
	return append(cells,
		gridCell{qs[0], 1, 0.1}, // PLD's σ a sixth of RDP's
		gridCell{qs[0], 1, 10},  // the smallest σ of the grid
		gridCell{qs[0], 14063, 1},
		gridCell{qs[1], 100, 0.1},
		gridCell{qs[1], 100000, 10},
		gridCell{qs[2], 1, 0.1},
		gridCell{qs[2], 100, 1},
		gridCell{qs[2], 14063, 10},
		gridCell{qs[3], 1, 0.1},
		gridCell{qs[3], 100, 10},
		gridCell{qs[3], 100000, 10},
		gridCell{qs[1], 1, 1},
	)
}

// TestSolveSigmaGrid: calibration succeeds for Poisson sampling with the PLD and the
// RDP accountant over q ∈ [1e-4, 0.5], up to 10⁵ steps and ε ∈ [0.1, 10] (δ = 1e-5).
// Each σ is checked by the accountant itself (it meets the target, in δ and in ε, and
// σ·(1 − 2e-4) does not), and PLD's σ against RDP's: RDP's conversion is looser, so
// PLD never needs more noise.
func TestSolveSigmaGrid(t *testing.T) {
	start := time.Now()
	for _, c := range solveGrid(t) {
		t.Run(fmt.Sprintf("q=%.3g/T=%d/eps=%g", c.q, c.steps, c.eps), func(t *testing.T) {
			t.Parallel()
			target := privacy.Budget{Epsilon: c.eps, Delta: 1e-5}
			sigma := map[string]float64{}
			var took []string
			for _, m := range []string{MethodPLD, MethodRDP} {
				spec := Spec{Sampler: privacy.SamplerPoisson, Method: m, SampleRate: c.q}
				t0 := time.Now()
				s, err := SolveSigma(spec, c.steps, target)
				if err != nil {
					t.Fatalf("%s: %v", m, err)
				}
				took = append(took, fmt.Sprintf("%s σ = %.6g in %.2f s", m, s, time.Since(t0).Seconds()))
				checkSolved(t, spec, c.steps, target, s)
				sigma[m] = s
			}
			if sigma[MethodPLD] > sigma[MethodRDP] {
				t.Errorf("PLD σ %.8g above RDP's %.8g", sigma[MethodPLD], sigma[MethodRDP])
			}
			t.Logf("%s, %s; PLD/RDP = %.4f", took[0], took[1], sigma[MethodPLD]/sigma[MethodRDP])
		})
	}
	t.Cleanup(func() { t.Logf("grid: %.1f s", time.Since(start).Seconds()) })
}
