// Command dpsgd trains models with differentially private SGD and reports, for the sampler
// actually used, the privacy guarantee spent.
//
//	dpsgd train [flags]    train a model (see dpsgd train --help)
//	dpsgd account [flags]  the privacy of a run, or σ/rounds/epochs for a target
//	dpsgd plot [flags]     figures: van Dijk & Ertan's bounds, trade-off curves, samplers compared
//	dpsgd ageaware tv|simulate  Lin et al.: age-dependent DP and age-aware scheduling
//	dpsgd federated [flags]     federated DP training with per-client σ (the personalized-DP FL appendix)
//	dpsgd audit [flags]    empirical ε lower bounds from many trainings with and without a canary
//	dpsgd bench samplers|step   samplers compared (privacy, accuracy, speed) with a report; DP step speed
//	dpsgd selftest [flags] check every CUDA kernel against the CPU backend, then benchmark
//
// Usage errors print one line on stderr and exit with status 2; --json makes the last line of
// stdout one JSON object (the *Contract and *JSON tests check the stable keys).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

const usage = `dpsgd: differentially private SGD with a guarantee checked every epoch

Usage:
  dpsgd train [flags]    train a model with DP-SGD (dpsgd train --help)
  dpsgd account [flags]  privacy of a run for its sampler, or solve for σ, rounds or epochs
  dpsgd plot [flags]     draw figures (PNG and SVG) of the accountants
  dpsgd ageaware tv|simulate  age-dependent DP of Markov data (Lin et al.): TV by age, scheduling simulation
  dpsgd federated [flags]     federated DP training, each client with its own budget (personalized-DP FL appendix)
  dpsgd audit [flags]    empirical privacy audit: ε lower bound with its interval against the accountant's ε
  dpsgd bench samplers|step   shuffle vs Poisson vs allocation (report dir: Markdown, plots, JSON, CSV); DP step speed
  dpsgd selftest [flags] GPU: every CUDA kernel against the CPU backend on random inputs, then a benchmark
  dpsgd version          print the version
`

// version is the command's version string.
const version = "0.1.0"

// usageError marks an error in the command line: exit status 2.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "train":
		err = cmdTrain(ctx, args[1:], stdout, stderr)
	case "account":
		err = cmdAccount(ctx, args[1:], stdout, stderr)
	case "plot":
		err = cmdPlot(ctx, args[1:], stdout, stderr)
	case "ageaware":
		err = cmdAgeAware(ctx, args[1:], stdout, stderr)
	case "federated":
		err = cmdFederated(ctx, args[1:], stdout, stderr)
	case "audit":
		err = cmdAudit(ctx, args[1:], stdout, stderr)
	case "bench":
		err = cmdBench(ctx, args[1:], stdout, stderr)
	case "selftest":
		err = cmdSelftest(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "dpsgd", version)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		err = usagef("unknown command %q (want train, account, plot, ageaware, federated, audit, bench, selftest or version)", args[0])
	}
	return report(err, args[0], stderr)
}

// report prints err on one line and maps it to an exit status.
func report(err error, cmd string, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "dpsgd %s: %v\n", cmd, err)
		return 2
	}
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "dpsgd %s: %v\n", cmd, err)
		return 130
	}
	fmt.Fprintf(stderr, "dpsgd %s: %v\n", cmd, err)
	return 1
}

// printJSON writes v as one JSON object on one line: the --json output of every command.
func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding the JSON output: %w", err)
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// parseFlags parses args into fs and returns the names of the flags given.
// --help prints header and the flags on stdout and returns flag.ErrHelp; a
// bad flag is a usage error that writes flags the way the help does (--name).
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer, header string) (map[string]bool, error) {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stdout, header+"\n\nFlags:")
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return nil, flag.ErrHelp
		}
		msg := strings.ReplaceAll(err.Error(), "flag -", "flag --")
		msg = strings.ReplaceAll(msg, "defined: -", "defined: --")
		return nil, usageError{errors.New(msg)}
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	return set, nil
}
