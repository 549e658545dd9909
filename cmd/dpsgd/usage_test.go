package main

import (
	"strings"
	"testing"
)

// TestUsageErrorsExit2: a flag value the engine refuses is a usage error (exit 2, one line
// naming the value and the valid range), and --help of every command exits 0.
func TestUsageErrorsExit2(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--optimizer", "adagrad"}, "sgd, momentum or adam"},
		{[]string{"train", "--ema", "1.5"}, "[0, 1)"},
		{[]string{"train", "--momentum", "2"}, "[0, 1)"},
		{[]string{"train", "--schedule", "linear"}, "constant or cosine"},
	} {
		code, _, errOut := runCmd(t, append(tc.args, "--epochs", "1", "--quiet")...)
		if code != 2 || strings.Count(strings.TrimSpace(errOut), "\n") > 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line naming %q", tc.args, code, errOut, tc.want)
		}
	}
	for _, cmd := range []string{"train", "account", "plot", "ageaware", "federated", "audit", "bench", "selftest"} {
		if code, _, errOut := runCmd(t, cmd, "--help"); code != 0 {
			t.Errorf("%s --help: exit %d: %s", cmd, code, errOut)
		}
	}
}
