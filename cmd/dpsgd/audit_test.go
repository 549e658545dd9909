package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// auditRunCmd runs cmdAudit as main's dispatch would and returns the exit status.
func auditRunCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = report(cmdAudit(context.Background(), args, &o, &e), "audit", &e)
	return code, o.String(), e.String()
}

// TestAuditQuickJSON: --quick --json audits every sampler end to end; the last line holds
// the contract's keys per sampler, the empirical interval is ordered and below the
// accountant's ε, and shuffle carries Chua et al.'s lower bound.
func TestAuditQuickJSON(t *testing.T) {
	code, out, errOut := auditRunCmd(t, "--quick", "--runs", "200", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	m := lastJSON(t, out)
	res, ok := m["results"].([]any)
	if !ok || len(res) != 4 {
		t.Fatalf("results = %v, want 4 samplers", m["results"])
	}
	samplers := map[string]bool{}
	for _, x := range res {
		r := x.(map[string]any)
		for _, k := range []string{"sampler", "accountant", "epsilon_accountant", "epsilon_empirical", "epsilon_empirical_low", "epsilon_empirical_high", "runs", "confidence", "epsilon_lower_bound", "violation", "runs_per_second"} {
			if _, ok := r[k]; !ok {
				t.Errorf("%v: key %q missing", r["sampler"], k)
			}
		}
		s := r["sampler"].(string)
		samplers[s] = true
		acc, _ := r["epsilon_accountant"].(float64)
		low, _ := r["epsilon_empirical_low"].(float64)
		if !(low <= acc) || r["violation"] != false {
			t.Errorf("%s: empirical low %v vs accountant %v, violation %v", s, low, acc, r["violation"])
		}
		if r["runs"].(float64) != 200 || r["confidence"].(float64) != 0.95 {
			t.Errorf("%s: runs %v confidence %v", s, r["runs"], r["confidence"])
		}
		if pt, ok := r["epsilon_empirical"].(float64); ok && pt < low {
			t.Errorf("%s: point %v below the low end %v", s, pt, low)
		}
		lb, isNum := r["epsilon_lower_bound"].(float64)
		if s == "shuffle" && !(isNum && lb > 0 && lb <= acc*1.001) {
			t.Errorf("shuffle: lower bound %v, want in (0, %v]", r["epsilon_lower_bound"], acc)
		}
		if s != "shuffle" && r["epsilon_lower_bound"] != nil {
			t.Errorf("%s: lower bound %v, want null", s, r["epsilon_lower_bound"])
		}
	}
	for _, s := range []string{"shuffle", "poisson", "poisson-truncated", "allocation"} {
		if !samplers[s] {
			t.Errorf("sampler %s missing", s)
		}
	}
}

// TestAuditTableAndTarget: the human table, with σ calibrated per sampler to a target ε.
func TestAuditTableAndTarget(t *testing.T) {
	code, out, errOut := auditRunCmd(t, "--sampler", "shuffle,allocation", "--runs", "100", "--target-epsilon", "2", "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"sampler", "ε accountant", "shuffle", "allocation", "lower bound", "ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// TestAuditBadFlags: bad input exits 2 with a message naming the flag.
func TestAuditBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--sampler", "uniform"}, "--sampler"},
		{[]string{"--runs", "3"}, "--runs"},
		{[]string{"--sigma", "-1"}, "--sigma"},
		{[]string{"--sigma", "1", "--target-epsilon", "2"}, "--target-epsilon"},
		{[]string{"--delta", "1"}, "--delta"},
		{[]string{"--confidence", "0"}, "--confidence"},
		{[]string{"--batch-size", "17"}, "--batch-size"},
		{[]string{"--steps", "3", "--epochs", "2"}, "--steps"},
		{[]string{"--threat", "all"}, "--threat"},
		{[]string{"--target-epsilon", "1e-9"}, "--target-epsilon"},
		{[]string{"--canary", "zero"}, "--canary \"zero\": want one of isolated, opposed, nan, inf, huge-logit"},
		{[]string{"--canary", "opposed", "--sampler", "poisson"}, "--canary opposed"},
		{[]string{"--canary", "nan", "--canary-row", "last"}, "--canary-row \"last\": want first or random"},
		{[]string{"--canary-row", "first", "--sampler", "poisson"}, "--canary-row first: only with an adversarial --canary"},
		{[]string{"--canary", "inf", "--canary-row", "first"}, "--canary-row first: shuffle"},
		{[]string{"--canary", "nan", "--sampler", "poisson", "--n", "4096"}, "--n 4096"},
		{[]string{"extra"}, "extra"},
	} {
		code, _, errOut := auditRunCmd(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.flag) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line naming %s", c.args, code, errOut, c.flag)
		}
	}
}

// TestAuditCancelled: a cancelled context stops the audit with status 130.
func TestAuditCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var o, e bytes.Buffer
	if code := report(cmdAudit(ctx, []string{"--runs", "100000", "--quiet"}, &o, &e), "audit", &e); code != 130 {
		t.Errorf("exit %d, want 130: %s", code, e.String())
	}
}

// TestAuditAdversarialJSON: the adversarial canaries end to end, on the samplers whose
// batches put the canary in row 0 of a physical batch: with a correct engine no other
// example is zeroed, the empirical lower bound stays at or below the claim, and the JSON
// names the design, its row, the dtype and the geometry (n = 64, batch 16 by default).
func TestAuditAdversarialJSON(t *testing.T) {
	for _, c := range []struct {
		canary string
		extra  []string
	}{
		{"nan", nil},
		{"huge-logit", []string{"--float32"}},
	} {
		args := append([]string{"--canary", c.canary, "--sampler", "poisson,allocation", "--runs", "100", "--json"}, c.extra...)
		code, out, errOut := auditRunCmd(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		m := lastJSON(t, out)
		res, ok := m["results"].([]any)
		if !ok || len(res) != 2 {
			t.Fatalf("results = %v, want 2 samplers", m["results"])
		}
		for _, x := range res {
			r := x.(map[string]any)
			dtype := "float64"
			if len(c.extra) > 0 {
				dtype = "float32"
			}
			if r["canary"] != c.canary || r["canary_row"] != "first" || r["dtype"] != dtype || r["n"] != 64.0 || r["batch_size"] != 16.0 {
				t.Errorf("%s: canary %v row %v dtype %v n %v batch %v", r["sampler"], r["canary"], r["canary_row"], r["dtype"], r["n"], r["batch_size"])
			}
			if r["collateral"] != 0.0 || r["violation"] != false {
				t.Errorf("%s %s: collateral %v, violation %v (empirical low %v, accountant %v)", r["sampler"], c.canary, r["collateral"], r["violation"], r["epsilon_empirical_low"], r["epsilon_accountant"])
			}
		}
	}
}

// TestAuditHelpListsCanaries: --help names every canary design and both rows.
func TestAuditHelpListsCanaries(t *testing.T) {
	code, out, _ := auditRunCmd(t, "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--canary string", "isolated, opposed", "nan, inf, huge-logit", "--canary-row string", "first", "random", "--float32"} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q:\n%s", want, out)
		}
	}
}
