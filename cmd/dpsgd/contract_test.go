package main

import (
	"regexp"
	"strings"
	"testing"
)

// contractFlags are the flags scripts rely on, per command (the stable part of the command
// line: add freely, rename or drop nothing).
var contractFlags = map[string][]string{
	"train": {"dataset", "data-dir", "model", "hidden", "sampler", "batch-size", "epochs", "sigma", "clip", "lr",
		"optimizer", "seed", "delta", "target-epsilon", "non-private", "device", "noise", "radius", "checkpoint",
		"checkpoint-every", "resume", "quiet", "json"},
	"account": {"sampler", "accountant", "dataset-size", "batch-size", "sample-rate", "steps", "rounds", "epochs",
		"sigma", "delta", "epsilon", "tv", "solve", "json"},
	"account --mechanism personalized": {"epsilon", "delta-prime", "delta-tail", "sample-rate", "draws", "clip",
		"local-examples", "sensitivity-factor", "local-steps", "k", "json"},
	"account --mechanism ball": {"dim", "distance", "radius", "dataset-size", "steps", "json"},
	"ageaware tv":              {"p", "q", "max-age", "json"},
	"bench samplers":           {"quick", "out"},
}

// TestFlagsContract: every contract flag is listed by its command's --help (so it exists:
// the help lists the flag set's flags).
func TestFlagsContract(t *testing.T) {
	for cmd, flags := range contractFlags {
		args := append(strings.Fields(cmd), "--help")
		code, out, errOut := runCmd(t, args...)
		if code != 0 {
			t.Errorf("%s --help: exit %d: %s", cmd, code, errOut)
			continue
		}
		for _, f := range flags {
			if !regexp.MustCompile(`(?m)^\s+--` + regexp.QuoteMeta(f) + `\b`).MatchString(out) {
				t.Errorf("%s: flag --%s missing from --help", cmd, f)
			}
		}
	}
}
