package main

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// commandLineParsers are the flag parsers of every subcommand that has one: they turn a command
// line into flags and must answer any input with flags or a usage error.
var commandLineParsers = map[string]func([]string, io.Writer) error{
	"train":     func(a []string, w io.Writer) error { _, err := parseTrainFlags(a, w); return err },
	"account":   func(a []string, w io.Writer) error { _, err := parseAccountFlags(a, w); return err },
	"ball":      func(a []string, w io.Writer) error { _, err := parseBallFlags(a, w); return err },
	"plot":      func(a []string, w io.Writer) error { _, err := parsePlotFlags(a, w); return err },
	"federated": func(a []string, w io.Writer) error { _, err := fedParseFlags(a, w); return err },
	"ageaware":  func(a []string, w io.Writer) error { _, err := ageParseSimFlags(a, w); return err },
	"audit":     func(a []string, w io.Writer) error { _, err := parseAuditFlags(a, w); return err },
	"bench":     func(a []string, w io.Writer) error { _, err := parseBenchSamplerFlags(a, w); return err },
	"eval":      func(a []string, w io.Writer) error { _, err := parseEvalFlags(a, w); return err },
	"predict":   func(a []string, w io.Writer) error { _, err := parsePredictFlags(a, w); return err },
	"models":    func(a []string, w io.Writer) error { _, err := parseModelsFlags(a, w); return err },
}

// FuzzCommandLines: every subcommand's flag parser, given any command line (arguments separated
// by newlines), returns flags, --help, or a usage error (exit 2) on one line; it never panics.
func FuzzCommandLines(f *testing.F) {
	for _, s := range []string{
		"--sigma\n1.1\n--epochs\n3",
		"--sampler=poisson\n--sample-rate=0.01\n--steps=100\n--json",
		"--batch-size\n-1",
		"--epochs=NaN",
		"--sigma=Inf\n--delta=2",
		"--help",
		"--unknown",
		"stray",
		"--hidden\n128,,64",
		"--epsilon=1e400",
		"-epochs\n3",
		"-hidden\n64",
		"-h",
		"--dataset\nmnist\n--help",
		"--json=maybe",
		"--quiet\n--\n--epochs",
		"---x",
		"--epochs\n--help",
		"--steps=9007199254740993",
		"--blas\nnonsense",
		"--blas=go",
		"--blas",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		var args []string
		if line != "" {
			args = strings.Split(line, "\n")
		}
		for name, parse := range commandLineParsers {
			err := parse(args, io.Discard)
			if err == nil || errors.Is(err, pflag.ErrHelp) {
				continue
			}
			var ue usageError
			if !errors.As(err, &ue) {
				t.Fatalf("%s %q: error %q is not a usage error (exit 2)", name, args, err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("%s %q: multi-line error %q", name, args, err)
			}
		}
	})
}
