package main

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/privacy/personalized"
	"github.com/spf13/pflag"
)

// persRun calls accountPersonalized with args after "--mechanism personalized".
func persRun(args ...string) (string, error) {
	var out bytes.Buffer
	err := accountPersonalized(append([]string{"--mechanism", "personalized"}, args...), &out)
	return out.String(), err
}

// persJSON runs with --json and decodes the object.
func persJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	out, err := persRun(append(args, "--json")...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return lastJSON(t, out)
}

// TestAccountPersonalizedContract: the contract keys are there and equal
// the package's values for the same client; the worked example of the
// package tests (R = 32, σ_seed = 1.0962543, σ_GDP = 0.7955604).
func TestAccountPersonalizedContract(t *testing.T) {
	m := persJSON(t, "--epsilon", "0.5", "--delta-prime", "1e-5", "--delta-tail", "1e-5", "--sample-rate", "0.01",
		"--draws", "1000", "--clip", "1", "--local-examples", "100")
	for _, k := range []string{"rounds_bound", "rounds_bound_logistic", "rounds_bound_exact", "sigma_seed", "sigma_gdp",
		"delta_total", "mu", "multiplier", "sensitivity", "seed_valid", "note", "default"} {
		if _, ok := m[k]; !ok {
			t.Errorf("key %q missing", k)
		}
	}
	cal, err := personalized.Calibrate(
		personalized.Client{Epsilon: 0.5, DeltaPrime: 1e-5, DeltaTail: 1e-5, SampleRate: 0.01},
		personalized.Setting{Draws: 1000, Clip: 1, LocalExamples: 100, LocalSteps: 1})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]float64{
		"rounds_bound": float64(cal.Rounds.Used), "rounds_bound_logistic": cal.Rounds.Logistic,
		"rounds_bound_exact": float64(cal.Rounds.Exact), "sigma_seed": cal.SigmaSeed, "sigma_gdp": cal.SigmaGDP,
		"delta_total": cal.DeltaTotal, "mu": cal.Mu, "multiplier": cal.Multiplier, "sensitivity": cal.Sensitivity,
		"sigma": cal.SigmaGDP,
	} {
		if got, ok := m[k].(float64); !ok || got != want {
			t.Errorf("%s = %v, package %v", k, m[k], want)
		}
	}
	if m["rounds_bound"] != 32.0 || math.Abs(m["sigma_seed"].(float64)-1.0962543) > 1e-6 || math.Abs(m["sigma_gdp"].(float64)-0.7955604) > 1e-6 {
		t.Errorf("worked example: %v", m)
	}
	if m["seed_valid"] != true || m["default"] != "gdp" || !strings.Contains(m["note"].(string), "default: sigma_gdp") {
		t.Errorf("seed_valid %v, default %v, note %q", m["seed_valid"], m["default"], m["note"])
	}
}

// TestAccountPersonalizedOptions: defaults, output perturbation, local
// steps, the appendix's validity and the logistic undershoot are reported.
func TestAccountPersonalizedOptions(t *testing.T) {
	base := []string{"--epsilon", "2", "--sample-rate", "0.05", "--draws", "400", "--local-examples", "32"}
	m := persJSON(t, base...)
	if m["delta_prime"] != 1e-5 || m["delta_tail"] != 1e-5 || m["clip"] != 1.0 || m["k"] != 1.702 ||
		m["local_steps"] != 1.0 || m["sensitivity_factor"] != 1.0 || m["perturbation"] != "gradient" {
		t.Errorf("defaults: %v", m)
	}
	if m["seed_valid"] != false || !strings.Contains(m["note"].(string), "NOT proven") {
		t.Errorf("ε = 2: seed_valid %v, note %q", m["seed_valid"], m["note"])
	}
	g := persJSON(t, append(base, "--local-steps", "4")...)
	o := persJSON(t, append(base, "--local-steps", "4", "--perturbation", "output")...)
	if g["releases_per_selection"] != 4.0 || o["releases_per_selection"] != 1.0 ||
		math.Abs(g["multiplier"].(float64)/o["multiplier"].(float64)-2) > 1e-9 || o["multiplier"] != m["multiplier"] {
		t.Errorf("gradient I=4 multiplier %v, output %v, I=1 %v", g["multiplier"], o["multiplier"], m["multiplier"])
	}
	u := persJSON(t, "--epsilon", "1", "--sample-rate", "0.001", "--draws", "30", "--delta-tail", "1.5e-4", "--local-examples", "1")
	if u["logistic_undershoots"] != true || u["rounds_bound"] != 2.0 || !strings.Contains(u["note"].(string), "undershoots") {
		t.Errorf("T=30 q=0.001 δ‴=1.5e-4: %v", u)
	}
	out, err := persRun(base...)
	if err != nil || !strings.Contains(out, "[default]") || !strings.Contains(out, "selections  R = ") {
		t.Errorf("text output (%v):\n%s", err, out)
	}
	// --help prints the help and passes pflag.ErrHelp up, which report maps to exit 0.
	out, err = persRun("--help")
	if !errors.Is(err, pflag.ErrHelp) || !strings.Contains(out, "--delta-tail") || !strings.Contains(out, "Required:") {
		t.Errorf("--help (%v):\n%s", err, out)
	}
	if code := report(err, "account", io.Discard); code != 0 {
		t.Errorf("--help: exit %d, want 0", code)
	}
}

// TestAccountPersonalizedUsage: bad input is a usage error naming the flag
// and its range, never a panic.
func TestAccountPersonalizedUsage(t *testing.T) {
	base := map[string]string{"epsilon": "1", "sample-rate": "0.1", "draws": "100", "local-examples": "10"}
	args := func(over map[string]string, drop string) []string {
		var a []string
		for k, v := range base {
			if k != drop {
				a = append(a, "--"+k, v)
			}
		}
		for k, v := range over {
			a = append(a, "--"+k, v)
		}
		return a
	}
	for _, c := range []struct {
		over map[string]string
		drop string
		want string
	}{
		{nil, "epsilon", "--epsilon"},
		{nil, "draws", "--draws"},
		{nil, "local-examples", "--local-examples"},
		{nil, "sample-rate", "--sample-rate"},
		{map[string]string{"epsilon": "0"}, "", "--epsilon 0: out of range (0, +Inf)"},
		{map[string]string{"epsilon": "-1"}, "", "--epsilon -1: out of range"},
		{map[string]string{"epsilon": "NaN"}, "", "--epsilon"},
		{map[string]string{"delta-prime": "0"}, "", "--delta-prime 0: out of range (0, 1)"},
		{map[string]string{"delta-prime": "1"}, "", "--delta-prime 1: out of range (0, 1)"},
		{map[string]string{"delta-tail": "1.5"}, "", "--delta-tail 1.5: out of range (0, 1)"},
		{map[string]string{"sample-rate": "0"}, "", "--sample-rate 0: out of range (0, 1]"},
		{map[string]string{"sample-rate": "1.01"}, "", "--sample-rate 1.01: out of range (0, 1]"},
		{map[string]string{"draws": "0"}, "", "--draws"},
		{map[string]string{"draws": "2e3"}, "", "--draws"},
		{map[string]string{"draws": "2000000000000"}, "", "--draws 2000000000000: out of range [1, 2^40]"},
		{map[string]string{"local-examples": "0"}, "", "--local-examples"},
		{map[string]string{"local-steps": "0"}, "", "--local-steps"},
		{map[string]string{"clip": "0"}, "", "--clip 0: out of range (0, +Inf)"},
		{map[string]string{"sensitivity-factor": "-2"}, "", "--sensitivity-factor -2: out of range (0, +Inf)"},
		{map[string]string{"k": "0"}, "", "--k 0: out of range (0, +Inf)"},
		{map[string]string{"k": "-1.7"}, "", "--k -1.7: out of range (0, +Inf)"},
		{map[string]string{"perturbation": "both"}, "", "--perturbation"},
		{map[string]string{"mechanism": "gaussian"}, "", "--mechanism"},
		{map[string]string{"sample-rate": "0.001", "draws": "1", "delta-tail": "0.9"}, "", "--delta-tail 0.9: with --sample-rate"},
		{map[string]string{"bogus": "1"}, "", "bogus"},
	} {
		var out bytes.Buffer
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%v: panic %v", c, p)
				}
			}()
			err = accountPersonalized(append([]string{"--mechanism", "personalized"}, args(c.over, c.drop)...), &out)
		}()
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v drop %q: err = %v, want a usage error containing %q", c.over, c.drop, err, c.want)
		}
	}
	// Several missing flags are named together.
	_, err := persRun("--epsilon", "1")
	if err == nil || !strings.Contains(err.Error(), "--draws, --local-examples, --sample-rate") {
		t.Errorf("missing flags: %v", err)
	}
}
