package main

import (
	"math"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/privacy/ball"
)

// TestTrainBallCalibrated: --noise ball without --radius calibrates the radius so that the
// planned epochs spend the total δ, and the reported δ equals privacy/ball's for the run's d,
// Δ = C (zero-out adjacency of shuffling) and the epochs run.
func TestTrainBallCalibrated(t *testing.T) {
	code, out, errOut := runCmd(t, "train", "--noise", "ball", "--sampler", "shuffle", "--delta", "0.3", "--epochs", "2", "--clip", "0.5", "--quiet", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	m := lastJSON(t, out)
	if m["accountant"] != ball.Name || m["noise"] != "ball" || m["epsilon"] != 0.0 {
		t.Errorf("accountant %v noise %v epsilon %v", m["accountant"], m["noise"], m["epsilon"])
	}
	r, spent := m["radius"].(float64), m["delta_spent"].(float64)
	d := int(m["params"].(float64))
	step, err := ball.StepDelta(d, 0.5, r)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ball.ComposeExact(step, 2) // one step per epoch touches the record
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(spent-want) > 1e-12 || spent > 0.3 || spent < 0.3*(1-1e-6) {
		t.Errorf("delta_spent %v, want %v (= the budget 0.3 up to the solver's tolerance)", spent, want)
	}
	if m["stopped_by_budget"] != false || m["epochs_run"] != 2.0 {
		t.Errorf("stopped %v after %v epochs", m["stopped_by_budget"], m["epochs_run"])
	}
}

// TestTrainBallBudgetStops: a given radius too small for the total δ stops training before the
// epoch that would exceed it.
func TestTrainBallBudgetStops(t *testing.T) {
	code, out, errOut := runCmd(t, "train", "--noise", "ball", "--sampler", "poisson", "--radius", "300", "--delta", "0.15", "--epochs", "3", "--quiet", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	m := lastJSON(t, out)
	spent := m["delta_spent"].(float64)
	if !(spent <= 0.15) {
		t.Errorf("delta_spent %v above the budget 0.15", spent)
	}
	if m["stopped_by_budget"] != true || m["epochs_run"].(float64) >= 3 {
		t.Errorf("stopped %v after %v epochs: want a stop before epoch 3 (budget too small for radius 300)", m["stopped_by_budget"], m["epochs_run"])
	}
}

// TestTrainBallUsageErrors: flags that do not fit ball noise are usage errors (exit 2).
func TestTrainBallUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--noise", "ball", "--sigma", "1"},
		{"--noise", "ball", "--target-epsilon", "1"},
		{"--noise", "ball", "--radius", "0"},
		{"--noise", "ball", "--radius", "-1"},
		{"--noise", "ball", "--sampler", "poisson-truncated"},
		{"--noise", "ball", "--accountant", "rdp"},
		{"--radius", "1"},
		{"--noise", "laplace"},
		{"--noise", "sphere"},
	} {
		code, _, errOut := runCmd(t, append([]string{"train", "--epochs", "1", "--quiet"}, args...)...)
		if code != 2 || !strings.Contains(errOut, "--") {
			t.Errorf("%v: exit %d, stderr %q; want 2 with a message naming the flag", args, code, errOut)
		}
	}
}
