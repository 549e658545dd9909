package main

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/privacy/ball"
	"github.com/spf13/pflag"
)

// ballJSON runs accountBall with args plus --json and decodes the object.
func ballJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	var out bytes.Buffer
	if err := accountBall(append(append([]string{"--mechanism", "ball"}, args...), "--json"), &out); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return lastJSON(t, out.String())
}

// num returns m[key] as a number, failing the test when it is not one.
func ballNum(t *testing.T, m map[string]any, key string) float64 {
	t.Helper()
	v, ok := m[key].(float64)
	if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
		t.Fatalf("key %q = %v, want a number", key, m[key])
	}
	return v
}

// TestAccountBallContract: the contract keys are present and equal what
// privacy/ball computes: Tholeti's setting by default.
func TestAccountBallContract(t *testing.T) {
	m := ballJSON(t, "--dim", "100", "--distance", "0.01", "--radius", "2", "--dataset-size", "500", "--steps", "3000")
	step, _ := ball.StepDelta(100, 0.01, 2)
	unit, _ := ball.Amplify(step, 500)
	exact, _ := ball.ComposeExact(unit, 3000)
	sum, _ := ball.ComposeSum(unit, 3000)
	for key, want := range map[string]float64{
		"delta_step": step, "delta_step_amplified": unit, "delta_total": exact, "delta_total_sum": sum,
		"dim": 100, "distance": 0.01, "radius": 2, "dataset_size": 500, "steps": 3000, "compositions": 3000,
		"epsilon": 0, "delta": exact,
	} {
		if got := ballNum(t, m, key); got != want {
			t.Errorf("%s = %.17g, want %.17g", key, got, want)
		}
	}
	if m["sampler"] != "uniform" || m["accountant"] != "ball-tv" || m["valid"] != true || m["adjacency"] != ball.AdjacencyReplaceOne {
		t.Errorf("sampler %v accountant %v valid %v adjacency %v", m["sampler"], m["accountant"], m["valid"], m["adjacency"])
	}
	if note, _ := m["note"].(string); !strings.Contains(note, "exact composition") {
		t.Errorf("note does not say which composition: %q", note)
	}
	// Defaults: r = 1, N = 1, T = 1: δ_total = δ_step.
	m = ballJSON(t, "--dim", "3", "--distance", "1")
	if ballNum(t, m, "delta_total") != 0.6875 || ballNum(t, m, "delta_step") != 0.6875 || ballNum(t, m, "delta_total_sum") != 0.6875 {
		t.Errorf("d = 3, Δ = r = 1: %v, want 11/16 everywhere", m)
	}
}

// TestAccountBallSamplers: shuffle composes epochs, poisson scales by q, and
// --clip gives Δ = C (2C for Tholeti's replace-one sampling).
func TestAccountBallSamplers(t *testing.T) {
	m := ballJSON(t, "--sampler", "shuffle", "--dim", "10", "--clip", "1", "--radius", "40", "--dataset-size", "1000", "--batch-size", "100", "--steps", "25")
	cfg := ball.Config{Sampler: "shuffle", Dim: 10, Distance: 1, Radius: 40, StepsPerEpoch: 10}
	acc, _ := ball.NewAccountant(cfg)
	want, _ := acc.DeltaTotal(25)
	if got := ballNum(t, m, "delta_total"); got != want || ballNum(t, m, "compositions") != 3 || ballNum(t, m, "rounds") != 10 {
		t.Errorf("shuffle: δ = %g (want %g), compositions %v, rounds %v", got, want, m["compositions"], m["rounds"])
	}
	m = ballJSON(t, "--sampler", "poisson", "--dim", "10", "--clip", "1", "--radius", "40", "--sample-rate", "0.01", "--steps", "500")
	step, _ := ball.StepDelta(10, 1, 40)
	want, _ = ball.ComposeExact(0.01*step, 500)
	if got := ballNum(t, m, "delta_total"); got != want || m["adjacency"] != "add/remove one" {
		t.Errorf("poisson: δ = %g, want %g (%v)", got, want, m["adjacency"])
	}
	m = ballJSON(t, "--dim", "10", "--clip", "1")
	if ballNum(t, m, "distance") != 2 || ballNum(t, m, "clip") != 1 {
		t.Errorf("uniform with --clip 1: distance %v, clip %v; want 2, 1", m["distance"], m["clip"])
	}
}

// TestAccountBallSolve: --solve radius gives a radius meeting --delta, and a
// radius 1e-9 smaller does not.
func TestAccountBallSolve(t *testing.T) {
	m := ballJSON(t, "--dim", "1000", "--distance", "2", "--dataset-size", "60000", "--steps", "600000", "--delta", "1e-5", "--solve", "radius")
	r := ballNum(t, m, "radius")
	if m["solved"] != "radius" || m["within_target"] != true || ballNum(t, m, "delta_total") > 1e-5 {
		t.Fatalf("solved %v within %v δ %v", m["solved"], m["within_target"], m["delta_total"])
	}
	for _, c := range []struct {
		r    float64
		meet bool
	}{{r, true}, {r * (1 - 1e-9), false}} {
		step, _ := ball.StepDelta(1000, 2, c.r)
		total, _ := ball.ComposeExact(step/60000, 600000)
		if (total <= 1e-5) != c.meet {
			t.Errorf("r = %.12g: δ = %g, want meet = %v", c.r, total, c.meet)
		}
	}
	// A target the sampling alone meets: radius 0, reported at δ_step = 1.
	m = ballJSON(t, "--dim", "5", "--distance", "1", "--dataset-size", "1000000", "--steps", "1", "--delta", "0.01", "--solve", "radius")
	if ballNum(t, m, "radius") != 0 || ballNum(t, m, "delta_step") != 1 || ballNum(t, m, "delta_total") != 1e-6 {
		t.Errorf("sampling alone: %v", m)
	}
}

// TestAccountBallText: the text output names the statement and the target.
func TestAccountBallText(t *testing.T) {
	var out bytes.Buffer
	if err := accountBall([]string{"--mechanism", "ball", "--dim", "3", "--distance", "1", "--delta", "0.5"}, &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"(0, 0.6875)-DP", "does NOT meet", "Tholeti's sum = 0.6875", "ball-tv"} {
		if !strings.Contains(s, want) {
			t.Errorf("text output lacks %q:\n%s", want, s)
		}
	}
	out.Reset()
	// --help prints the help and passes pflag.ErrHelp up, which report maps to exit 0.
	err := accountBall([]string{"--mechanism", "ball", "--help"}, &out)
	if !errors.Is(err, pflag.ErrHelp) || !strings.Contains(out.String(), "--dim") {
		t.Errorf("--help: %v\n%s", err, out.String())
	}
	if code := report(err, "account", io.Discard); code != 0 {
		t.Errorf("--help: exit %d, want 0", code)
	}
}

// TestAccountBallUsage: bad input is a usage error naming the flag, never a
// panic.
func TestAccountBallUsage(t *testing.T) {
	for want, args := range map[string][]string{
		"--dim":                          {"--dim", "0", "--distance", "1"},
		"--dim 2000000000: out of range": {"--dim", "2000000000", "--distance", "1"},
		"give --dim":                     {"--distance", "1"},
		"--distance -1":                  {"--dim", "3", "--distance", "-1"},
		"--distance (Δ":                  {"--dim", "3"},
		"--radius 0":                     {"--dim", "3", "--distance", "1", "--radius", "0"},
		"--radius -2":                    {"--dim", "3", "--distance", "1", "--radius", "-2"},
		"--radius":                       {"--dim", "3", "--distance", "1", "--radius", "NaN"},
		"--dataset-size":                 {"--dim", "3", "--distance", "1", "--dataset-size", "0"},
		"--steps":                        {"--dim", "3", "--distance", "1", "--steps", "0"},
		"--delta 1":                      {"--dim", "3", "--distance", "1", "--delta", "1"},
		"--clip 0":                       {"--dim", "3", "--clip", "0"},
		"not both":                       {"--dim", "3", "--clip", "1", "--distance", "1"},
		"--mechanism":                    {"--mechanism", "gaussian", "--dim", "3", "--distance", "1"},
		"--sampler":                      {"--dim", "3", "--distance", "1", "--sampler", "poisson-truncated"},
		"--solve radius needs":           {"--dim", "3", "--distance", "1", "--solve", "radius"},
		"--solve \"sigma\"":              {"--dim", "3", "--distance", "1", "--solve", "sigma", "--delta", "0.1"},
		"--batch-size applies":           {"--dim", "3", "--distance", "1", "--batch-size", "10", "--dataset-size", "100"},
		"--sampler poisson needs":        {"--dim", "3", "--distance", "1", "--sampler", "poisson"},
		"--sample-rate 2":                {"--dim", "3", "--distance", "1", "--sampler", "poisson", "--sample-rate", "2"},
		"--sampler shuffle needs":        {"--dim", "3", "--distance", "1", "--sampler", "shuffle"},
		"unexpected argument":            {"--dim", "3", "--distance", "1", "extra"},
	} {
		err := accountBall(append([]string{"--mechanism", "ball"}, args...), &bytes.Buffer{})
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: error %v, want a usage error containing %q", args, err, want)
		}
	}
}
