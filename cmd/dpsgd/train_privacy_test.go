package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/accounting"
)

// TestTrainOutputReleasesNothingUnlabelled reads every line `dpsgd train` prints, as an
// adversary would: by default no statistic of the training data appears beside the
// guarantee, the seed is drawn at random (never a constant that regenerates the noise) and
// the guarantee says the noise is reproducible from it, the adjacency is zero-out with the
// dataset size public; --private-stats adds the training statistics, each labelled.
func TestTrainOutputReleasesNothingUnlabelled(t *testing.T) {
	base := []string{"train", "--model", "logreg", "--epochs", "2", "--json"}
	seeds := map[any]bool{}
	for range 2 {
		code, out, errOut := runCmd(t, base...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		m := lastJSON(t, out)
		if m["seed_source"] != "random" {
			t.Fatalf("seed_source %v, want random", m["seed_source"])
		}
		seeds[m["seed"]] = true
		g, _ := m["guarantee"].(string)
		for _, want := range []string{"zero-out adjacency", "N = ", "is public", "pseudorandom from seed", "secret"} {
			if !strings.Contains(g, want) {
				t.Errorf("guarantee %q lacks %q", g, want)
			}
		}
		if m["adjacency"] != "zero-out" {
			t.Errorf("adjacency %v", m["adjacency"])
		}
		if led := m["ledger"].(map[string]any); led["adjacency"] != "zero-out" || led["public_size"] != true {
			t.Errorf("ledger adjacency %v public_size %v", led["adjacency"], led["public_size"])
		}
		for _, e := range m["history"].([]any) {
			ep := e.(map[string]any)
			for _, k := range []string{"train_loss", "train_accuracy", "clipped_fraction", "examples", "non_finite_examples"} {
				if _, ok := ep[k]; ok {
					t.Errorf("history holds %s without --private-stats: %v", k, ep)
				}
			}
		}
		for _, line := range strings.Split(errOut, "\n") {
			if strings.HasPrefix(line, "epoch") && (strings.Contains(line, "loss") || strings.Contains(line, "train acc") || strings.Contains(line, "clipped")) {
				t.Errorf("progress line shows a training statistic: %q", line)
			}
		}
		nc, _ := m["not_covered_by_guarantee"].([]any)
		if len(nc) == 0 {
			t.Errorf("not_covered_by_guarantee is empty")
		}
	}
	if len(seeds) != 2 {
		t.Errorf("two default runs drew the same seed: %v", seeds)
	}

	code, out, errOut := runCmd(t, append(base, "--seed", "5", "--private-stats")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	m := lastJSON(t, out)
	if m["seed"] != 5.0 || m["seed_source"] != "given" || !strings.Contains(m["guarantee"].(string), "seed 5,") {
		t.Errorf("seed %v source %v guarantee %q", m["seed"], m["seed_source"], m["guarantee"])
	}
	ep := m["history"].([]any)[0].(map[string]any)
	for _, k := range []string{"train_loss", "train_accuracy", "clipped_fraction", "examples", "non_finite_examples"} {
		if _, ok := ep[k]; !ok {
			t.Errorf("--private-stats: history lacks %s: %v", k, ep)
		}
	}
	if !strings.Contains(strings.Join(toStrings(m["not_covered_by_guarantee"]), ","), "history[].train_loss") {
		t.Errorf("not_covered_by_guarantee %v lacks the history's statistics", m["not_covered_by_guarantee"])
	}
	labelled := false
	for _, line := range strings.Split(errOut, "\n") {
		if strings.HasPrefix(line, "epoch") {
			if !strings.Contains(line, "[not private:") {
				t.Errorf("--private-stats line without its label: %q", line)
			}
			labelled = true
		}
	}
	if !labelled {
		t.Errorf("no epoch line: %s", errOut)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// TestTrainCalibrationProgressAndCancel: σ calibration says what it does on stderr before it
// starts, and a cancelled context (Ctrl-C) stops it with exit 130, not a usage error.
func TestTrainCalibrationProgressAndCancel(t *testing.T) {
	var errOut bytes.Buffer
	c := calibration{ctx: context.Background(), w: &errOut}
	spec := accounting.Spec{Sampler: "poisson", Method: accounting.MethodPLD, SampleRate: 0.01}
	sigma, err := c.solve(spec, 1000, privacy.Budget{Epsilon: 2, Delta: 1e-5})
	if err != nil || !(sigma > 0) || !strings.HasPrefix(errOut.String(), "dpsgd train: calibrating σ to ε = 2") {
		t.Fatalf("σ = %v, err %v, stderr %q", sigma, err, errOut.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (calibration{ctx: ctx}).solve(spec, 1000, privacy.Budget{Epsilon: 2, Delta: 1e-5}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled calibration: %v", err)
	}
	var out, stderr bytes.Buffer
	if code := run(ctx, []string{"train", "--model", "logreg", "--epochs", "2", "--json"}, &out, &stderr); code != 130 {
		t.Fatalf("exit %d, want 130: %s", code, stderr.String())
	}
}

// TestTrainInfiniteEpsilonJSON: a σ so small that no finite ε exists at δ still gives a valid
// JSON report: epsilon is null (never a number that looks like a guarantee), in the history too.
func TestTrainInfiniteEpsilonJSON(t *testing.T) {
	code, out, errOut := runCmd(t, "train", "--model", "logreg", "--epochs", "1", "--sigma", "1e-300", "--sampler", "allocation", "--json", "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	m := lastJSON(t, out)
	if m["epsilon"] != nil || m["history"].([]any)[0].(map[string]any)["epsilon"] != nil {
		t.Fatalf("epsilon %v, history %v: want null", m["epsilon"], m["history"])
	}
}
