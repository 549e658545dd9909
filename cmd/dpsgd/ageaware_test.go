package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ageRun calls cmdAgeAware and maps its error to an exit status as run does.
func ageRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	err := cmdAgeAware(context.Background(), args, &o, &e)
	return report(err, "ageaware", &e), o.String(), e.String()
}

// TestAgeTVJSONContract: --json ends stdout with an array of {age, tv,
// tv_bound} for t = 0…max-age; for a two-state chain Δ(t) = |1 − p − q|ᵗ and the
// bound is min{1, max(√(p/q), √(q/p))·|1 − p − q|ᵗ} (closed forms).
func TestAgeTVJSONContract(t *testing.T) {
	code, out, errOut := ageRun(t, "tv", "--p", "0.1", "--q", "0.2", "--max-age", "20", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rows); err != nil {
		t.Fatalf("last line is not a JSON array: %v\n%s", err, out)
	}
	if len(rows) != 21 {
		t.Fatalf("%d rows, want 21", len(rows))
	}
	prev := 2.0
	for i, r := range rows {
		for _, k := range []string{"age", "tv", "tv_bound"} {
			if _, ok := r[k]; !ok {
				t.Fatalf("row %d: key %q missing", i, k)
			}
		}
		tv, bound := r["tv"].(float64), r["tv_bound"].(float64)
		if int(r["age"].(float64)) != i || tv > bound+1e-12 || tv > prev+1e-12 {
			t.Errorf("row %d: %v", i, r)
		}
		prev = tv
	}
	if rows[0]["tv"].(float64) != 1 {
		t.Errorf("Δ(0) = %v, want 1", rows[0]["tv"])
	}
	code, out, _ = ageRun(t, "tv", "--chain", "0.7,0.3; 0.6,0.4", "--max-age", "5", "--json")
	if code != 0 {
		t.Fatal(out)
	}
	var two []ageTVRow
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &two); err != nil {
		t.Fatal(err)
	}
	for _, r := range two {
		want := math.Pow(0.1, float64(r.Age))
		wantB := math.Min(1, math.Sqrt(0.6/0.3)*want)
		if math.Abs(*r.TV-want) > 1e-12*want || math.Abs(*r.TVBound-wantB) > 1e-9*wantB {
			t.Errorf("age %d: tv %g bound %g, want %g and %g", r.Age, *r.TV, *r.TVBound, want, wantB)
		}
	}
}

// TestAgeTVChains: a non-reversible chain from a file gives tv_bound null; the
// table form names the chain; --init adds tv_posterior.
func TestAgeTVChains(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "chain.txt")
	if err := os.WriteFile(file, []byte("# a cyclic chain\n0.1 0.6 0.3\n0.2, 0.1, 0.7\n\n0.5 0.3 0.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := ageRun(t, "tv", "--matrix", file, "--max-age", "3", "--json", "--init", "1,0,0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &rows); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if v, ok := r["tv_bound"]; !ok || v != nil {
			t.Errorf("non-reversible chain: tv_bound = %v, want null", v)
		}
		if _, ok := r["tv_posterior"]; !ok {
			t.Errorf("--init: tv_posterior missing in %v", r)
		}
	}
	code, out, _ = ageRun(t, "tv", "--max-age", "4")
	if code != 0 || !strings.Contains(out, "π = [0.2857 0.4286 0.2143 0.07143]") || !strings.Contains(out, "γ*") || strings.Count(out, "\n") != 8 {
		t.Errorf("table: exit %d\n%s", code, out)
	}
}

// TestAgeUsageErrors: bad input gives exit 2 and one line naming the problem.
func TestAgeUsageErrors(t *testing.T) {
	cases := map[string][]string{
		"sums to 1.1":       {"tv", "--chain", "0.5,0.6;0.5,0.5"},
		"entry (0, 1) = -0": {"tv", "--chain", "1.2,-0.2;0.5,0.5"},
		"reducible":         {"tv", "--chain", "1,0;0,1"},
		"p + q <= 1":        {"tv", "--p", "0.7", "--q", "0.6"},
		"--max-age":         {"tv", "--max-age", "-1"},
		"not several":       {"tv", "--p", "0.1", "--chain", "1"},
		"row 1 has 1":       {"tv", "--chain", "0.5,0.5;1"},
		"want a finite":     {"tv", "--chain", "0.5,abc;0.5,0.5"},
		"--init":            {"tv", "--init", "0.5,0.6,0,0"},
		"--eps-min":         {"simulate", "--eps-min", "0"},
		"--eps-max":         {"simulate", "--eps-min", "1", "--eps-max", "-2"},
		"--schemes":         {"simulate", "--schemes", "random+magic"},
		"--delta":           {"simulate", "--delta", "magic"},
		"--search":          {"simulate", "--search", "magic"},
		"--trials":          {"simulate", "--trials", "1"},
		"subcommand":        {"magic"},
		"want a subcommand": {},
		"--t-agg":           {"simulate", "--t-agg", "-3"},
	}
	for want, args := range cases {
		code, _, errOut := ageRun(t, args...)
		if code != 2 || !strings.Contains(errOut, want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q, want exit 2 naming %q", args, code, errOut, want)
		}
	}
}

// TestAgeSimulateQuick: --quick finishes fast, prints every scheme at every
// ε̄ with finite numbers, writes a Fig. 3-like PNG and SVG, and the JSON
// form holds the same points.
func TestAgeSimulateQuick(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := ageRun(t, "simulate", "--quick", "--out", dir, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var rep ageSimReport
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); err != nil {
		t.Fatalf("last line is not JSON: %v", err)
	}
	if rep.Clients != 3 || rep.AggTime != 15 || rep.Delta != "spectral" || len(rep.Points) != 18 {
		t.Fatalf("report %+v", rep)
	}
	for _, p := range rep.Points {
		if p.Loss == nil || p.NoisePower == nil || *p.Loss < 0 || (p.Scheduling != "random") != (p.Schedule != nil) {
			t.Errorf("point %+v", p)
		}
		if p.Scheduling == "proposed" && (p.Bound == nil || *p.Bound < *p.ExactLoss) {
			t.Errorf("proposed point: bound %v below exact %v", p.Bound, p.ExactLoss)
		}
	}
	if len(rep.Findings) != 10 {
		t.Errorf("%d findings, want 10", len(rep.Findings))
	}
	f, err := os.Open(filepath.Join(dir, "ageaware_fig3.png"))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil || img.Bounds().Dx() < 1000 {
		t.Errorf("png: %v", err)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "ageaware_fig3.svg"))
	if err != nil || !strings.Contains(string(svg), "proposed+adaptive") {
		t.Errorf("svg: %v", err)
	}
	// Table form, a subset of schemes, another Δ source.
	code, out, errOut = ageRun(t, "simulate", "--quick", "--out", "", "--schemes", "proposed+adaptive,optimal+adaptive", "--delta", "posterior", "--eps-points", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Count(out, "proposed+adaptive") < 2 || strings.Contains(out, "random+") || !strings.Contains(out, "Δ by posterior") {
		t.Errorf("table:\n%s", out)
	}
}

// TestAgeSimulateCancel: a cancelled context stops the run.
func TestAgeSimulateCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var o, e bytes.Buffer
	err := cmdAgeAware(ctx, []string{"simulate", "--quick", "--out", ""}, &o, &e)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

// FuzzAgeParseRows: the --chain parser never panics, and what it accepts has
// only finite entries.
func FuzzAgeParseRows(f *testing.F) {
	f.Add("0.5,0.5;0.5,0.5")
	f.Add("# c\n1 0\n0 1\n")
	f.Add(";;,,")
	f.Fuzz(func(t *testing.T, s string) {
		rows, err := ageParseRows(s, "--chain")
		if err != nil {
			return
		}
		for _, r := range rows {
			for _, v := range r {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("accepted %v", v)
				}
			}
		}
	})
}
