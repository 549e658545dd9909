package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

// lastJSON decodes the last line of out, which --json makes one JSON object.
func lastJSON(t *testing.T, out string) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		t.Fatalf("last line is not JSON: %v\n%s", err, out)
	}
	return m
}

// TestTrainJSONContract: --json ends stdout with one JSON object holding every key of the
// train contract, with plain numbers.
func TestTrainJSONContract(t *testing.T) {
	code, out, errOut := runCmd(t, "train", "--epochs", "2", "--quiet", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		t.Fatalf("last line is not JSON: %v\n%s", err, out)
	}
	for _, k := range []string{"test_accuracy", "epsilon", "delta", "epochs_run", "steps", "stopped_by_budget", "examples_per_second", "sampler", "accountant"} {
		if _, ok := m[k]; !ok {
			t.Errorf("key %q missing", k)
		}
	}
	if m["sampler"] != "poisson" || m["accountant"] != "pld" {
		t.Errorf("sampler %v accountant %v", m["sampler"], m["accountant"])
	}
	if eps, ok := m["epsilon"].(float64); !ok || eps <= 0 || eps > 3 {
		t.Errorf("epsilon %v: want in (0, 3]", m["epsilon"])
	}
	if acc := m["test_accuracy"].(float64); acc < 0.5 {
		t.Errorf("test accuracy %v on the synthetic problem", acc)
	}
}

// TestSamplersReportTheirOwnAccountant: shuffle and allocation are never accounted as Poisson.
func TestSamplersReportTheirOwnAccountant(t *testing.T) {
	for _, s := range []string{"shuffle", "allocation", "poisson-truncated"} {
		code, out, errOut := runCmd(t, "train", "--sampler", s, "--epochs", "1", "--quiet", "--json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", s, code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var m map[string]any
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
			t.Fatal(err)
		}
		if m["sampler"] != s {
			t.Errorf("sampler %v, want %s", m["sampler"], s)
		}
		if g, _ := m["guarantee"].(string); !strings.Contains(g, s) {
			t.Errorf("%s: guarantee %q does not name the sampler", s, g)
		}
	}
}

// TestUsageErrors: bad input gets one line on stderr naming the problem, and exit status 2.
func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	if err := os.MkdirAll(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, "train-images-idx3-ubyte"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string][]string{
		"--sigma":          {"train", "--sigma", "-1"},
		"--clip":           {"train", "--clip", "0"},
		"--batch-size":     {"train", "--batch-size", "0"},
		"--epochs":         {"train", "--epochs", "0"},
		"--lr":             {"train", "--lr", "-0.1"},
		"--delta":          {"train", "--delta", "2"},
		"--dataset":        {"train", "--dataset", "cifar"},
		"--model":          {"train", "--model", "resnet"},
		"--sampler":        {"train", "--sampler", "magic"},
		"unknown flag":     {"train", "--no-such-flag"},
		"--target-epsilon": {"train", "--target-epsilon", "-3"},
		"--data-dir":       {"train", "--dataset", "mnist", "--data-dir", filepath.Join(dir, "missing")},
		"mnist":            {"train", "--dataset", "mnist", "--data-dir", bad},
		"unknown command":  {"frobnicate"},
	}
	for want, args := range cases {
		code, _, errOut := runCmd(t, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, errOut)
		}
		if strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, want) {
			t.Errorf("%v: stderr %q: want one line naming %q", args, errOut, want)
		}
	}
}

func TestHelp(t *testing.T) {
	code, out, _ := runCmd(t, "train", "--help")
	if code != 0 || !strings.Contains(out, "--target-epsilon") {
		t.Fatalf("exit %d, help %q", code, out)
	}
}
