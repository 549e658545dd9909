package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

// accountJSON runs dpsgd account --json with args and decodes the object.
func accountJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	code, out, errOut := runCmd(t, append(append([]string{"account"}, args...), "--json")...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errOut)
	}
	return lastJSON(t, out)
}

// TestAccountContract: every key of the account contract is present, for every sampler.
func TestAccountContract(t *testing.T) {
	for _, args := range [][]string{
		{"--sampler", "poisson", "--sample-rate", "0.01", "--sigma", "1", "--steps", "1000"},
		{"--sampler", "shuffle", "--dataset-size", "60000", "--batch-size", "600", "--sigma", "1", "--epochs", "3"},
		{"--sampler", "allocation", "--rounds", "100", "--sigma", "1", "--epochs", "2"},
	} {
		m := accountJSON(t, args...)
		keys := []string{"sampler", "accountant", "sigma", "steps", "epochs", "epsilon", "delta", "tv", "valid", "sample_rate"}
		if m["sampler"] != "poisson" {
			keys = append(keys, "rounds")
		}
		for _, k := range keys {
			v, ok := m[k]
			if !ok {
				t.Errorf("%v: key %q missing", args, k)
			}
			if f, isNum := v.(float64); isNum && (math.IsNaN(f) || math.IsInf(f, 0)) {
				t.Errorf("%v: %s = %v", args, k, v)
			}
		}
		if m["valid"] != true {
			t.Errorf("%v: default accountant %v not valid", args, m["accountant"])
		}
	}
}

// TestAccountOpacusAnchor: Opacus's RDP unit test, q = 0.04, σ = 1.5, 2250 steps,
// δ = 1e-5 → ε = 7.32911117143; PLD must not exceed it.
func TestAccountOpacusAnchor(t *testing.T) {
	base := []string{"--sampler", "poisson", "--sample-rate", "0.04", "--sigma", "1.5", "--steps", "2250", "--delta", "1e-5"}
	rdp := accountJSON(t, append(base, "--accountant", "rdp")...)
	if eps := rdp["epsilon"].(float64); math.Abs(eps-7.32911117143) > 1e-6 {
		t.Errorf("rdp ε = %.11g, want 7.32911117143", eps)
	}
	pld := accountJSON(t, base...)
	if pld["accountant"] != "pld" {
		t.Errorf("default Poisson accountant %v, want pld", pld["accountant"])
	}
	if eps := pld["epsilon"].(float64); !(eps < 7.32911117143 && eps > 6.7) {
		t.Errorf("pld ε = %g: want in (6.7, 7.329)", eps)
	}
}

// TestAccountShuffleLabels: shuffle's Poisson numbers are labelled as not valid,
// the lower bound as a lower bound, and the certified bound is at least the lower one.
func TestAccountShuffleLabels(t *testing.T) {
	base := []string{"--sampler", "shuffle", "--rounds", "100", "--sigma", "1", "--epochs", "1"}
	cert := accountJSON(t, base...)
	lower := accountJSON(t, append(base, "--accountant", "lower")...)
	pois := accountJSON(t, append(base, "--accountant", "rdp")...)
	if cert["valid"] != true || lower["valid"] != false || pois["valid"] != false {
		t.Errorf("valid: certified %v, lower %v, assumed Poisson %v", cert["valid"], lower["valid"], pois["valid"])
	}
	if !strings.Contains(pois["note"].(string), "NOT valid") {
		t.Errorf("assumed-Poisson note %q", pois["note"])
	}
	if lower["epsilon"].(float64) > cert["epsilon"].(float64) {
		t.Errorf("lower bound ε %v above the certified ε %v", lower["epsilon"], cert["epsilon"])
	}
	if cert["adjacency"] != "zero-out" {
		t.Errorf("shuffle adjacency %v", cert["adjacency"])
	}
}

// TestAccountSolve: van Dijk & Ertan's worked example through the command line, and
// σ/epochs solves whose answers the same command confirms.
func TestAccountSolve(t *testing.T) {
	m := accountJSON(t, "--sampler", "allocation", "--accountant", "berry-esseen", "--sigma", "1", "--epochs", "1", "--tv", "0.01", "--solve", "rounds")
	if r := m["rounds"].(float64); r < 1.139e6 || r > 1.1412e6 {
		t.Errorf("Berry–Esseen rounds %v, want ≈ 1.14e6", r)
	}
	if m["solved"] != "rounds" {
		t.Errorf("solved %v", m["solved"])
	}
	s := accountJSON(t, "--sampler", "poisson", "--accountant", "rdp", "--sample-rate", "0.01", "--steps", "1000", "--epsilon", "2", "--delta", "1e-5", "--solve", "sigma")
	sigma := s["sigma"].(float64)
	back := accountJSON(t, "--sampler", "poisson", "--accountant", "rdp", "--sample-rate", "0.01", "--steps", "1000", "--delta", "1e-5", "--sigma", jsonNum(sigma))
	if eps := back["epsilon"].(float64); eps > 2 || eps < 1.99 {
		t.Errorf("σ = %v solved for ε = 2 gives ε = %v", sigma, eps)
	}
	e := accountJSON(t, "--sampler", "shuffle", "--rounds", "100", "--sigma", "4", "--epsilon", "2", "--solve", "epochs")
	if ep := e["epochs"].(float64); ep < 1 || e["epsilon"].(float64) > 2 {
		t.Errorf("epochs %v at ε %v", ep, e["epsilon"])
	}
}

func jsonNum(v float64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestAccountUsageErrors: one line naming the value, exit status 2.
func TestAccountUsageErrors(t *testing.T) {
	cases := map[string][]string{
		"--sigma":       {"account", "--sigma", "-1", "--sample-rate", "0.1", "--steps", "10"},
		"--sigma NaN":   {"account", "--sigma", "NaN", "--sample-rate", "0.1", "--steps", "10"},
		"--delta":       {"account", "--sigma", "1", "--sample-rate", "0.1", "--steps", "10", "--delta", "1"},
		"--tv":          {"account", "--sampler", "allocation", "--rounds", "10", "--sigma", "1", "--epochs", "1", "--tv", "0", "--solve", "sigma"},
		"--sample-rate": {"account", "--sigma", "1", "--sample-rate", "1.5", "--steps", "10"},
		"--rounds":      {"account", "--sampler", "shuffle", "--rounds", "0", "--sigma", "1", "--steps", "10"},
		"--steps":       {"account", "--sigma", "1", "--sample-rate", "0.1", "--steps", "1.5"},
		"--epochs":      {"account", "--sigma", "1", "--sample-rate", "0.1", "--epochs", "Inf"},
		"--accountant":  {"account", "--sampler", "poisson", "--accountant", "exact", "--sigma", "1", "--sample-rate", "0.1", "--steps", "10"},
		"--solve":       {"account", "--sigma", "1", "--sample-rate", "0.1", "--steps", "10", "--solve", "magic"},
		"sqrt(3/ln M)":  {"account", "--sampler", "allocation", "--accountant", "berry-esseen", "--rounds", "100", "--sigma", "0.5", "--epochs", "1"},
		"unreachable":   {"account", "--sampler", "shuffle", "--accountant", "gdp", "--sigma", "1", "--epochs", "1", "--tv", "0.01", "--solve", "rounds"},
	}
	for want, args := range cases {
		code, _, errOut := runCmd(t, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, errOut)
		}
		if strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, strings.Fields(want)[0]) {
			t.Errorf("%v: stderr %q: want one line naming %q", args, errOut, want)
		}
	}
}

// longRunArgs is a long Poisson run whose σ calibration used to fail: the search
// probed σ = 0.01 first, where the PLD accountant refuses (its composition window
// outgrows the grid), and took the refusal as fatal.
var longRunArgs = []string{"account", "--sampler", "poisson", "--accountant", "pld", "--sample-rate", "0.004266666666666667",
	"--steps", "14063", "--delta", "1e-5", "--epsilon", "1", "--solve", "sigma"}

// TestAccountSolveSigmaLongRun: --solve sigma succeeds there (σ ≈ 2.02, as
// dp_accounting's PLD accountant gives), and --json prints no progress.
func TestAccountSolveSigmaLongRun(t *testing.T) {
	code, out, errOut := runCmd(t, append(longRunArgs, "--json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if errOut != "" {
		t.Errorf("--json: stderr %q, want none", errOut)
	}
	m := lastJSON(t, out)
	if s := m["sigma"].(float64); s < 1.95 || s > 2.1 {
		t.Errorf("σ = %v, want about 2.02", s)
	}
	if e := m["epsilon"].(float64); e > 1 || e < 0.999 {
		t.Errorf("ε = %v at the solved σ, want just below 1", e)
	}
}

// TestAccountSolveSigmaProgress: without --json, --solve sigma says at once what it
// calibrates, then each σ it probes with its ε, then the result; --quiet silences it.
func TestAccountSolveSigmaProgress(t *testing.T) {
	code, out, errOut := runCmd(t, longRunArgs...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	first := "dpsgd account: calibrating σ for poisson (q = 0.00426667, 14063 steps) to ε = 1 at δ = 1e-05 (accountant pld)"
	if len(lines) < 4 || lines[0] != first {
		t.Fatalf("stderr:\n%s\nwant first %q", errOut, first)
	}
	probes := 0
	for _, l := range lines[1 : len(lines)-1] {
		if strings.HasPrefix(l, "dpsgd account: calibrating σ (accountant pld): probe σ = ") && strings.Contains(l, ": ε = ") {
			probes++
		}
	}
	if probes == 0 || !strings.HasPrefix(lines[len(lines)-1], "dpsgd account: calibrated σ = ") {
		t.Errorf("stderr:\n%s\nwant probe lines with ε and a last line with σ", errOut)
	}
	if !strings.Contains(out, "[solved: sigma]") {
		t.Errorf("stdout %q", out)
	}
	if code, _, errOut := runCmd(t, append(longRunArgs, "--quiet")...); code != 0 || errOut != "" {
		t.Errorf("--quiet: exit %d, stderr %q", code, errOut)
	}
}

// TestAccountSolveSigmaInterrupted: a cancelled context (Ctrl-C) stops --solve sigma
// with a message saying so, and exit status 130.
func TestAccountSolveSigmaInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut bytes.Buffer
	err := cmdAccount(ctx, longRunArgs[1:], &out, &errOut)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	var msg bytes.Buffer
	if code := report(err, "account", &msg); code != 130 || !strings.Contains(msg.String(), "--solve sigma interrupted") {
		t.Errorf("exit %d, message %q", code, msg.String())
	}
	if out.Len() != 0 {
		t.Errorf("stdout %q, want nothing", out.String())
	}
}
