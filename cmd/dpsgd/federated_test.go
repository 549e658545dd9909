package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fedRunCmd calls cmdFederated and maps its error to the exit status as main does.
func fedRunCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	err := cmdFederated(context.Background(), args, &o, &e)
	code = report(err, "federated", &e)
	return code, o.String(), e.String()
}

// TestFederatedJSON: a tiny synthetic run ends stdout with the report: per-client epsilon,
// delta, sigma, selections, rounds_bound, retired (and the ε spent, within the budget), plus
// test_accuracy, rounds and utility_cost.
func TestFederatedJSON(t *testing.T) {
	code, out, errOut := fedRunCmd(t, "--clients", "6", "--epsilons", "1,4", "--rounds", "6", "--k", "3",
		"--local-steps", "2", "--local-batch", "0", "--quiet", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	m := lastJSON(t, out)
	for _, k := range []string{"test_accuracy", "rounds", "utility_cost", "clients", "mode", "calibration"} {
		if _, ok := m[k]; !ok {
			t.Errorf("key %q missing", k)
		}
	}
	if m["rounds"].(float64) != 6 || m["mode"] != "gradient" || m["calibration"] != "gdp" {
		t.Errorf("rounds %v mode %v calibration %v", m["rounds"], m["mode"], m["calibration"])
	}
	if acc := m["test_accuracy"].(float64); acc < 0.3 {
		t.Errorf("test accuracy %v (chance 0.1)", acc)
	}
	if uc, ok := m["utility_cost"].(float64); !ok || !(uc > 0) {
		t.Errorf("utility_cost %v: want a positive number", m["utility_cost"])
	}
	clients := m["clients"].([]any)
	if len(clients) != 6 {
		t.Fatalf("%d clients, want 6", len(clients))
	}
	sigmas := map[float64]float64{}
	for _, c := range clients {
		c := c.(map[string]any)
		for _, k := range []string{"id", "epsilon", "delta", "sigma", "selections", "rounds_bound", "retired", "epsilon_spent"} {
			if _, ok := c[k]; !ok {
				t.Errorf("client key %q missing", k)
			}
		}
		eps, spent := c["epsilon"].(float64), c["epsilon_spent"].(float64)
		if spent < 0 || spent > eps*(1+1e-9) {
			t.Errorf("client %v spent %v of ε = %v", c["id"], spent, eps)
		}
		if c["delta"].(float64) != 1e-5 {
			t.Errorf("client %v: δ %v, want 1e-5", c["id"], c["delta"])
		}
		sigmas[eps] = c["sigma"].(float64)
	}
	if !(sigmas[4] < sigmas[1]) {
		t.Errorf("σ at ε = 4 is %v, at ε = 1 %v: want less noise for the larger budget", sigmas[4], sigmas[1])
	}
}

// TestFederatedClientsFile: clients from a CSV file, output perturbation and the appendix's
// calibration, text output with one line per client.
func TestFederatedClientsFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "clients.csv")
	csv := "id,epsilon,delta,sample_rate,share\nalice,1,1e-5,0.5,0.5\nbob,2,1e-6,0.25,0.25\ncarol,0.5,1e-5,0.25,0.25\n"
	if err := os.WriteFile(file, []byte(csv), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := fedRunCmd(t, "--clients-file", file, "--rounds", "3", "--k", "2", "--mode", "output",
		"--calibration", "seed", "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, id := range []string{"alice", "bob", "carol"} {
		if !strings.Contains(out, id) {
			t.Errorf("summary lacks client %s:\n%s", id, out)
		}
	}
	if !strings.Contains(out, "test accuracy") {
		t.Errorf("no accuracy line:\n%s", out)
	}
}

func TestFederatedNonPrivate(t *testing.T) {
	code, out, errOut := fedRunCmd(t, "--clients", "4", "--rounds", "2", "--k", "2", "--local-steps", "1",
		"--non-private", "--partition", "label", "--quiet", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	m := lastJSON(t, out)
	if m["non_private"] != true || m["utility_cost"] != nil {
		t.Errorf("non_private %v utility_cost %v", m["non_private"], m["utility_cost"])
	}
	for _, c := range m["clients"].([]any) {
		if c.(map[string]any)["epsilon_spent"] != nil {
			t.Errorf("non-private client with epsilon_spent %v", c.(map[string]any)["epsilon_spent"])
		}
	}
}

// TestFederatedBadInput: bad flags and bad clients files exit 2 with one line naming the flag
// or the file's line and field.
func TestFederatedBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dup := write("dup.csv", "id,epsilon,delta\na,1,1e-5\na,2,1e-5\n")
	shares := write("shares.csv", "id,epsilon,delta,share\na,1,1e-5,0.5\nb,2,1e-5,0.6\n")
	negEps := write("neg.json", `[{"id":"a","epsilon":-1,"delta":1e-5}]`)
	rates := write("rates.csv", "id,epsilon,delta,sample_rate\na,1,1e-5,0.2\nb,2,1e-5,0.2\n")
	bad := write("bad.json", `[{"id":"a",`)
	cases := []struct {
		args []string
		has  string
	}{
		{[]string{"--clients", "3", "--k", "4"}, "--k 4: want a value in [1, N = 3]"},
		{[]string{"--clients", "0"}, "--clients"},
		{[]string{"--epsilons", "1,-2"}, "--epsilons"},
		{[]string{"--epsilons", "1,x"}, "--epsilons"},
		{[]string{"--delta", "1"}, "--delta 1: want a value in (0, 1)"},
		{[]string{"--delta", "0"}, "--delta 0: want a value in (0, 1)"},
		{[]string{"--delta-tail", "1e-4"}, "--delta-tail"},
		{[]string{"--delta-tail", "0"}, "--delta-tail 0"},
		{[]string{"--epsilons", "1,0"}, "--epsilons 0: want a finite value > 0"},
		{[]string{"--clip", "0"}, "--clip 0: want a finite value"},
		{[]string{"--rounds", "1099511627776", "--clients", "2", "--k", "2"}, "--rounds 1099511627776 with K = 2: want K·R at most 2^40"},
		{[]string{"--sample-rate", "0"}, "--sample-rate 0: want a value in (0, 1]"},
		{[]string{"--sample-rate", "1.5"}, "--sample-rate 1.5: want a value in (0, 1]"},
		{[]string{"--sample-rate", "NaN"}, "--sample-rate"},
		{[]string{"--mode", "input"}, "--mode"},
		{[]string{"--calibration", "rdp"}, "--calibration"},
		{[]string{"--partition", "dirichlet"}, "--partition"},
		{[]string{"--sampling", "poisson"}, "--sampling"},
		{[]string{"--optimizer", "adam"}, "--optimizer"},
		{[]string{"--lr", "0"}, "--lr"},
		{[]string{"--clip", "-1"}, "--clip"},
		{[]string{"--rounds", "0"}, "--rounds"},
		{[]string{"--local-steps", "0"}, "--local-steps"},
		{[]string{"--dataset", "cifar"}, "--dataset"},
		{[]string{"--clients", "30000", "--partition", "label"}, "--partition label"},
		{[]string{"--clients-file", dup}, ":3: id"},
		{[]string{"--clients-file", shares}, "share"},
		{[]string{"--clients-file", negEps}, ":1: epsilon"},
		{[]string{"--clients-file", bad}, "malformed JSON"},
		{[]string{"--clients-file", rates, "--sampling", "categorical"}, "sum to 0.4"},
		{[]string{"--clients-file", filepath.Join(dir, "missing.csv")}, "--clients-file"},
		{[]string{"--clients-file", dup, "--clients", "3"}, "--clients: not with --clients-file"},
		{[]string{"extra"}, "unexpected argument"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
	}
	for _, c := range cases {
		code, _, errOut := fedRunCmd(t, append(c.args, "--quiet", "--rounds", "1")...)
		if c.args[0] == "--rounds" {
			code, _, errOut = fedRunCmd(t, append(c.args, "--quiet")...)
		}
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", c.args, code, errOut)
			continue
		}
		if !strings.Contains(errOut, c.has) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: stderr %q, want one line containing %q", c.args, errOut, c.has)
		}
	}
}

func TestFederatedHelp(t *testing.T) {
	code, out, _ := fedRunCmd(t, "--help")
	if code != 0 || !strings.Contains(out, "--clients-file") || !strings.Contains(out, "eq. 15") {
		t.Errorf("exit %d, help:\n%s", code, out)
	}
}

// TestFederatedPrivateStats: a private run's report holds no statistic of the clients' data
// computed without noise (every history[].train_loss is null, the progress prints no loss),
// says what its guarantee does not cover and that the seed must stay secret; --private-stats
// adds the training loss and lists it as not covered.
func TestFederatedPrivateStats(t *testing.T) {
	for _, stats := range []bool{false, true} {
		args := []string{"--clients", "4", "--rounds", "4", "--k", "2", "--eval-every", "2", "--json", "--seed", "5"}
		if stats {
			args = append(args, "--private-stats")
		}
		code, out, errOut := fedRunCmd(t, args...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		m := lastJSON(t, out)
		reported := 0
		for _, h := range m["history"].([]any) {
			h := h.(map[string]any)
			if _, ok := h["train_loss"]; !ok {
				t.Fatalf("history key train_loss missing: %v", h)
			}
			if h["train_loss"] != nil {
				reported++
			}
		}
		if (reported > 0) != stats {
			t.Errorf("--private-stats %v: %d rounds report a training loss", stats, reported)
		}
		if strings.Contains(errOut, "loss") != stats {
			t.Errorf("--private-stats %v: progress %q", stats, errOut)
		}
		nc := strings.Join(toStrings(m["not_covered_by_guarantee"]), ",")
		if !strings.Contains(nc, "test_accuracy") || strings.Contains(nc, "history[].train_loss") != stats {
			t.Errorf("--private-stats %v: not_covered_by_guarantee %q", stats, nc)
		}
		if g := m["guarantee"].(string); !strings.Contains(g, "seed 5") || !strings.Contains(g, "secret") {
			t.Errorf("guarantee %q: want the seed's scope", g)
		}
		for _, c := range m["clients"].([]any) {
			g, _ := c.(map[string]any)["guarantee"].(string)
			if !strings.Contains(g, "participations") || !strings.Contains(g, "seed 5") {
				t.Errorf("client guarantee %q", g)
			}
		}
	}
}
