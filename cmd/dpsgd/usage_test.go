package main

import (
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// helpCommands are every command and subcommand that has flags, as typed before --help.
var helpCommands = [][]string{
	{"train"}, {"account"}, {"account", "--mechanism", "ball"}, {"account", "--mechanism", "personalized"},
	{"plot"}, {"ageaware", "tv"}, {"ageaware", "simulate"}, {"federated"}, {"audit"},
	{"bench", "samplers"}, {"bench", "step"}, {"selftest"}, {"eval"}, {"predict"}, {"models"},
}

// singleDashFlag matches a flag written with one dash at the start of a help line.
var singleDashFlag = regexp.MustCompile(`(?m)^\s+-[a-z]`)

// TestUsageErrorsExit2: a flag value the engine refuses is a usage error (exit 2, one line
// naming the value and the valid range), and --help and -h of every command print the help
// on stdout, flags written --name, and exit 0.
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
	for _, cmd := range []string{"train", "models", "eval", "predict", "account", "plot", "ageaware", "federated", "audit", "bench", "selftest"} {
		if code, _, errOut := runCmd(t, cmd, "--help"); code != 0 {
			t.Errorf("%s --help: exit %d: %s", cmd, code, errOut)
		}
	}
	for _, cmd := range helpCommands {
		for _, help := range []string{"--help", "-h"} {
			code, out, errOut := runCmd(t, append(cmd, help)...)
			if code != 0 || errOut != "" {
				t.Errorf("%v %s: exit %d, stderr %q; want 0 and nothing", cmd, help, code, errOut)
			}
			if !strings.Contains(out, "Usage: dpsgd "+cmd[0]) || !strings.Contains(out, "\nFlags:\n  --") {
				t.Errorf("%v %s: no usage line or flags on stdout:\n%s", cmd, help, out)
			}
			if singleDashFlag.MatchString(out) {
				t.Errorf("%v %s: a flag written with one dash:\n%s", cmd, help, out)
			}
		}
	}
}

// TestBadFlagsOneLine: a bad command line exits 2 with one line on stderr, nothing on stdout,
// naming the flag --name; a long flag written with one dash is refused (never read as -h, the
// help, which would exit 0 without running), with the two-dash spelling.
func TestBadFlagsOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--no-such-flag"}, "unknown flag --no-such-flag"},
		{[]string{"train", "--epoch", "3"}, "unknown flag --epoch (did you mean --epochs?)"},
		{[]string{"train", "-epochs", "3"}, "flag -epochs: flags take two dashes: --epochs"},
		{[]string{"train", "-hidden", "64"}, "flags take two dashes: --hidden"},
		{[]string{"train", "-json"}, "flags take two dashes: --json"},
		{[]string{"train", "--quiet", "-x"}, "unknown flag -x"},
		{[]string{"train", "--epochs"}, "flag --epochs needs a value"},
		{[]string{"train", "--epochs", "abc"}, `invalid value "abc" for flag --epochs: must be an integer`},
		{[]string{"train", "--sigma=x"}, `invalid value "x" for flag --sigma: must be a number`},
		{[]string{"train", "--seed", "-1"}, `invalid value "-1" for flag --seed`},
		{[]string{"train", "--json=maybe"}, `invalid value "maybe" for flag --json: must be true or false`},
		{[]string{"train", "---epochs", "3"}, "bad flag syntax: ---epochs"},
		{[]string{"train", "--quiet", "stray"}, `unexpected argument "stray"`},
		{[]string{"train", "--", "--epochs"}, `unexpected argument "--epochs"`},
		{[]string{"train", "--no-such\nflag"}, `unknown flag --"no-such\nflag"`},
		{[]string{"account", "--steps", "-1"}, `invalid value "-1" for flag --steps: want a whole number in [0, 2^53]`},
		{[]string{"account", "--sigma", "NaN"}, `invalid value "NaN" for flag --sigma: want a finite number`},
		{[]string{"account", "-sigma", "1"}, "--sigma"},
		{[]string{"account", "--mechanism", "ball", "--dim"}, "flag --dim needs a value"},
		{[]string{"plot", "-figure", "fig1"}, "--figure"},
		{[]string{"ageaware", "tv", "--p"}, "flag --p needs a value"},
		{[]string{"ageaware", "simulate", "--trials", "1"}, "--trials: want a whole number in [2, 2^53]"},
		{[]string{"federated", "--clients", "x"}, "--clients"},
		{[]string{"audit", "-runs", "5"}, "--runs"},
		{[]string{"bench", "samplers", "--nope"}, "unknown flag --nope"},
		{[]string{"bench", "step", "--min-time", "inf"}, "--min-time"},
		{[]string{"selftest", "--draws", "10"}, "--draws: want a whole number in [1000, 2^53]"},
	} {
		code, out, errOut := runCmd(t, tc.args...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2, nothing, and one line naming %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// helpEntry returns the help of flag --name in out (its lines joined), "" when absent.
func helpEntry(out, name string) string {
	var entry []string
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "  --"+name+" "):
			entry = append(entry, line)
		case len(entry) > 0 && strings.HasPrefix(line, "    "):
			entry = append(entry, strings.TrimSpace(line))
		case len(entry) > 0:
			return strings.Join(entry, " ")
		}
	}
	return strings.Join(entry, " ")
}

// TestTrainHelpShowsPreset: dpsgd train --help shows the defaults of the preset of --dataset
// and --model, given before or after --help, that a run uses when no other flag is given.
func TestTrainHelpShowsPreset(t *testing.T) {
	// The docs' example, literally: MNIST's CNN trains 15 epochs of batches of 1024.
	_, out, _ := runCmd(t, "train", "--dataset", "mnist", "--model", "cnn", "--help")
	for name, want := range map[string]string{
		"batch-size": "(default 1024)", "epochs": "(default 15)", "lr": "(default 0.5)",
		"optimizer": `(default "momentum")`, "schedule": `(default "cosine")`, "target-epsilon": "(default 3)",
		"ema": "(default 0.99)", "hidden": `(default "32")`, "model": `(default "cnn")`,
	} {
		if e := helpEntry(out, name); !strings.Contains(e, want) {
			t.Errorf("mnist/cnn --%s: %q lacks %q", name, e, want)
		}
	}
	if !strings.Contains(out, "preset of --dataset mnist --model cnn") {
		t.Errorf("the help does not name the preset:\n%s", out)
	}
	for _, tc := range []struct {
		args           []string
		dataset, model string // the preset the help shows
	}{
		{[]string{"--help"}, "synthetic", "mlp"},
		{[]string{"--dataset", "mnist", "--help"}, "mnist", "cnn"},
		{[]string{"--help", "--dataset", "adult"}, "adult", "logreg"},
		{[]string{"--dataset=adult", "--model=mlp", "-h"}, "adult", "mlp"},
		{[]string{"--model", "logreg", "--help", "--dataset", "mnist"}, "mnist", "logreg"},
		{[]string{"--dataset", "mnist", "--model", "mlp", "--epochs", "3", "--help"}, "mnist", "mlp"},
		{[]string{"--dataset", "mnist", "--epochs", "abc", "--help"}, "mnist", "cnn"}, // a bad flag does not hide the help
	} {
		args, dataset, model := tc.args, tc.dataset, tc.model
		code, out, _ := runCmd(t, append([]string{"train"}, args...)...)
		if code != 0 {
			t.Fatalf("train %v: exit %d", args, code)
		}
		p := presetFor(dataset, model)
		for name, v := range map[string]string{
			"batch-size": strconv.Itoa(p.batch), "epochs": strconv.Itoa(p.epochs),
			"lr": fmt.Sprint(p.lr), "optimizer": strconv.Quote(p.optimizer), "schedule": strconv.Quote(p.schedule),
			"target-epsilon": fmt.Sprint(p.targetEps), "model": strconv.Quote(model), "clip": fmt.Sprint(p.clip),
		} {
			if e := helpEntry(out, name); !strings.Contains(e, "(default "+v+")") {
				t.Errorf("train %v, preset %s/%s: --%s: %q lacks (default %s)", args, dataset, model, name, e, v)
			}
		}
		// Sentinels of the parser (-1: not given) never show as defaults.
		if strings.Contains(out, "(default -1)") {
			t.Errorf("train %v: a sentinel shows as a default:\n%s", args, out)
		}
	}
}

// TestTrainFlagsParse: booleans alone are true (and take =false), numbers are read as Go
// literals as before (0x10, 1_000), a value may start with a dash, and the names given are
// those set.
func TestTrainFlagsParse(t *testing.T) {
	f, err := parseTrainFlags([]string{"--json", "--quiet", "--epochs", "0x10", "--batch-size=1_000",
		"--sigma", "-0.5", "--float64=false", "--hidden", "--x", "--seed", "7"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !f.jsonOut || !f.quiet || f.float64 || f.epochs != 16 || f.batch != 1000 || f.sigma != -0.5 || f.hidden != "--x" || f.seed != 7 {
		t.Errorf("parsed %+v", f)
	}
	for _, name := range []string{"json", "quiet", "epochs", "batch-size", "sigma", "float64", "hidden", "seed"} {
		if !f.set[name] {
			t.Errorf("--%s given but not in set %v", name, f.set)
		}
	}
	if len(f.set) != 8 {
		t.Errorf("set %v: want the 8 flags given", f.set)
	}
}

// TestTrainFlagsRoundTrip: every flag of dpsgd train reads back what its Value.String()
// writes, which checkpoints rely on (ckptMeta stores the flags given as strings, a resume
// sets them again with FlagSet.Set).
func TestTrainFlagsRoundTrip(t *testing.T) {
	src, err := parseTrainFlags([]string{"--dataset", "mnist", "--model", "cnn", "--hidden", "16,8",
		"--batch-size", "300", "--epochs", "7", "--sigma", "1.1000000000000001", "--clip", "0.7", "--lr", "1e-3",
		"--momentum", "0.5", "--weight-decay", "5e-05", "--ema", "0.9", "--delta", "3e-06", "--target-epsilon", "2.5",
		"--radius", "0.3", "--replicas", "2", "--non-private", "--float64", "--private-stats", "--secure",
		"--sampler", "shuffle", "--checkpoint-every", "4", "--max-batch", "400"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := parseTrainFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	src.fs.VisitAll(func(fl *pflag.Flag) {
		s := fl.Value.String()
		if err := dst.fs.Set(fl.Name, s); err != nil {
			t.Errorf("--%s: Set(%q): %v", fl.Name, s, err)
		} else if got := dst.fs.Lookup(fl.Name).Value.String(); got != s {
			t.Errorf("--%s: wrote %q, read back %q", fl.Name, s, got)
		}
		if src.set[fl.Name] && s == fl.DefValue {
			t.Errorf("--%s given but its value %q is the default", fl.Name, s)
		}
	})
	if dst.sigma != 1.1000000000000001 || dst.delta != 3e-06 || !dst.secure || dst.checkpointEvery != 4 {
		t.Errorf("round trip lost values: %+v", dst)
	}
}
