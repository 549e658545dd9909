package main

import (
	"math"
	"strings"
	"testing"
)

// TestTrainSecureAccounting: --secure accounts for what the secure sampler releases — the
// accountant is the near-ideal wrapper, the calibrated σ is a hair above the seeded run's
// (the grid's sensitivity growth), ε stays within the target, and a given σ reports a hair
// more ε than the same σ seeded (the 2Tdη term).
func TestTrainSecureAccounting(t *testing.T) {
	args := append(append([]string(nil), ckptArgs...), "--epochs", "2", "--target-epsilon", "2", "--delta", "1e-5")
	code, seededOut, errOut := runCmd(t, args...)
	if code != 0 {
		t.Fatalf("seeded run: exit %d: %s", code, errOut)
	}
	code, out, errOut := runCmd(t, append(args, "--secure")...)
	if code != 0 {
		t.Fatalf("secure run: exit %d: %s", code, errOut)
	}
	s, m := lastJSON(t, seededOut), lastJSON(t, out)
	if !strings.HasSuffix(m["accountant"].(string), "+near-ideal") || strings.Contains(s["accountant"].(string), "near-ideal") {
		t.Errorf("accountants: secure %v, seeded %v", m["accountant"], s["accountant"])
	}
	ss, ms := s["sigma"].(float64), m["sigma"].(float64)
	if !(ms > ss) || ms > ss*(1+1e-6) {
		t.Errorf("σ secure %v against seeded %v: want slightly larger", ms, ss)
	}
	if e := m["epsilon"].(float64); !(e <= 2) || math.Abs(e-2) > 1e-3 {
		t.Errorf("secure ε = %v, want ≤ 2 and about 2", e)
	}
	given := append(append([]string(nil), ckptArgs...), "--epochs", "2", "--sigma", "1.5")
	_, a, _ := runCmd(t, given...)
	_, b, _ := runCmd(t, append(given, "--secure")...)
	ea, eb := lastJSON(t, a)["epsilon"].(float64), lastJSON(t, b)["epsilon"].(float64)
	if !(eb > ea) || eb-ea > 1e-3 {
		t.Errorf("ε at σ = 1.5: secure %v, seeded %v: want a hair more", eb, ea)
	}
}
