// Command dpsgd trains models with differentially private SGD and reports, for the sampler
// actually used, the privacy guarantee spent.
//
//	dpsgd train [flags]    train a model (see dpsgd train --help); --save FILE keeps it
//	dpsgd schema [flags]   draft the public schema that training on your own CSV or IDX data needs
//	dpsgd models [flags]   the model presets, their layers and parameter counts on a dataset
//	dpsgd eval [flags]     a saved model's accuracy, loss and confusion matrix on its test set
//	dpsgd predict [flags]  a saved model's predictions for rows of a file
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
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/spf13/pflag"
)

const usage = `dpsgd: differentially private SGD with a guarantee checked every epoch

Usage:
  dpsgd train [flags]    train a model with DP-SGD (dpsgd train --help); --save FILE keeps the model
  dpsgd schema [flags]   draft the public schema of your own data (CSV or IDX) for dpsgd train --data
  dpsgd models [flags]   list the model presets (--model) with their layers and parameter counts
  dpsgd eval [flags]     evaluate a saved model on its dataset's test set (JSON: accuracy, loss, confusion matrix)
  dpsgd predict [flags]  predict the class of every row of a CSV or IDX file with a saved model
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
	case "schema":
		err = cmdSchema(ctx, args[1:], stdout, stderr)
	case "models":
		err = cmdModels(ctx, args[1:], stdout, stderr)
	case "eval":
		err = cmdEval(ctx, args[1:], stdout, stderr)
	case "predict":
		err = cmdPredict(ctx, args[1:], stdout, stderr)
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
		err = usagef("unknown command %q (want train, schema, models, eval, predict, account, plot, ageaware, federated, audit, bench, selftest or version)", args[0])
	}
	return report(err, args[0], stderr)
}

// report prints err on one line and maps it to an exit status; pflag.ErrHelp (the help was
// printed) is a success, so a command passes it up like any other error.
func report(err error, cmd string, stderr io.Writer) int {
	if err == nil || errors.Is(err, pflag.ErrHelp) {
		return 0 // --help printed the help: a success, whichever command asked
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

// helpWidth is the width the flags' help is wrapped to.
const helpWidth = 100

// newFlagSet returns the flag set of a subcommand: long flags only (--name value, --name=value,
// a boolean alone is true), listed in the help in the order they are defined.
func newFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args into fs and returns the names of the flags given. --help or -h
// among the flags prints header and the flags on stdout and returns pflag.ErrHelp; a bad
// flag is a usage error on one line that writes flags the way the help does (--name).
func parseFlags(fs *pflag.FlagSet, args []string, stdout io.Writer, header string) (map[string]bool, error) {
	return parseFlagsHelp(fs, args, stdout, header, nil)
}

// parseFlagsHelp is parseFlags with defaults, called before the help is printed with fs
// parsed from the other arguments, so that it can set the defaults the help shows (the
// flags' DefValue) from the flags that decide them (dpsgd train's --dataset and --model);
// the text it returns is added to the header.
func parseFlagsHelp(fs *pflag.FlagSet, args []string, stdout io.Writer, header string, defaults func() string) (map[string]bool, error) {
	help, rest, err := scanFlags(fs, args)
	if err == nil && !help {
		if err = fs.Parse(args); errors.Is(err, pflag.ErrHelp) {
			help, rest = true, nil
		}
	}
	if help {
		if defaults != nil {
			_ = fs.Parse(rest) // best effort: the help is printed whatever the other flags say
			header += "\n\n" + defaults()
		}
		fmt.Fprintf(stdout, "%s\n\nFlags:\n%s", header, flagUsages(fs))
		return nil, pflag.ErrHelp
	}
	if err != nil {
		return nil, flagError(fs, err)
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(fl *pflag.Flag) { set[fl.Name] = true })
	return set, nil
}

// flagUsages lists the flags of fs for the help in the order they are defined: each flag with
// its value's type (none for a boolean: --json alone is true), then its usage wrapped to
// helpWidth, and its default unless it is the zero value (the flag's DefValue, which a help
// hook may have set: see parseFlagsHelp).
func flagUsages(fs *pflag.FlagSet) string {
	type entry struct {
		left  string
		words []string // the usage, then the default as one word
	}
	var entries []entry
	col := 0
	fs.VisitAll(func(fl *pflag.Flag) {
		if fl.Hidden {
			return
		}
		typ, usage := pflag.UnquoteUsage(fl)
		e := entry{left: "  --" + fl.Name, words: strings.Fields(usage)}
		if typ != "" {
			e.left += " " + typ
		}
		switch {
		case fl.DefValue == "" || fl.DefValue == "0" || fl.DefValue == "false":
		case fl.Value.Type() == "string":
			e.words = append(e.words, fmt.Sprintf("(default %q)", fl.DefValue))
		default:
			e.words = append(e.words, "(default "+fl.DefValue+")")
		}
		entries = append(entries, e)
		col = max(col, utf8.RuneCountInString(e.left)+3)
	})
	var b strings.Builder
	for _, e := range entries {
		b.WriteString(e.left)
		n := utf8.RuneCountInString(e.left)
		for i, word := range e.words {
			w := utf8.RuneCountInString(word)
			switch {
			case i == 0:
				b.WriteString(strings.Repeat(" ", col-n))
				n = col
			case n+1+w > helpWidth:
				b.WriteString("\n" + strings.Repeat(" ", col))
				n = col
			default:
				b.WriteByte(' ')
				n++
			}
			b.WriteString(word)
			n += w
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// scanFlags walks args the way pflag parses them, up to "--": help tells whether --help or -h
// is among the flags, rest is args without them, and err refuses the first argument written
// with one dash (pflag would read "-epochs" as the shorthands -e -p …, and "-hidden" as -h:
// the help).
func scanFlags(fs *pflag.FlagSet, args []string) (help bool, rest []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		switch {
		case a == "--":
			return help, append(rest, args[i:]...), err
		case a == "-h" || strings.HasPrefix(a, "--") && name == "help":
			help = true
		case strings.HasPrefix(a, "--"):
			rest = append(rest, a)
			// A flag that needs a value takes the next argument, whatever it looks like.
			if fl := fs.Lookup(name); fl != nil && !hasValue && fl.NoOptDefVal == "" && i+1 < len(args) {
				i++
				rest = append(rest, args[i])
			}
		case len(a) > 1 && a[0] == '-':
			rest = append(rest, a)
			if err == nil {
				err = singleDash(fs, a)
			}
		default:
			rest = append(rest, a)
		}
	}
	return help, rest, err
}

// singleDash is the usage error of an argument a written with one dash (other than -h).
func singleDash(fs *pflag.FlagSet, a string) error {
	name, _, _ := strings.Cut(a[1:], "=")
	if fs.Lookup(name) != nil {
		return usagef("flag %s: flags take two dashes: --%s", quoteArg(a), quoteArg(a[1:]))
	}
	return usagef("unknown flag %s%s (flags take two dashes; --help lists them)", quoteArg(a), suggestFlag(fs, name))
}

// flagError rewrites an error of pflag as a usage error on one line, naming flags --name.
func flagError(fs *pflag.FlagSet, err error) error {
	var (
		notExist *pflag.NotExistError
		noValue  *pflag.ValueRequiredError
		invalid  *pflag.InvalidValueError
		syntax   *pflag.InvalidSyntaxError
	)
	switch {
	case errors.As(err, &notExist):
		name := notExist.GetSpecifiedName()
		return usagef("unknown flag --%s%s", quoteArg(name), suggestFlag(fs, name))
	case errors.As(err, &noValue):
		return usagef("flag --%s needs a value", noValue.GetFlag().Name)
	case errors.As(err, &invalid):
		// The cause says what the flag takes: pflag's "must be an integer", countFlag's range.
		return usagef("invalid value %q for flag --%s: %v", invalid.GetValue(), invalid.GetFlag().Name, invalid.Unwrap())
	case errors.As(err, &syntax):
		return usagef("bad flag syntax: %s", quoteArg(syntax.GetSpecifiedFlag()))
	}
	return usageError{errors.New(strings.ReplaceAll(err.Error(), "\n", " "))}
}

// quoteArg returns s as it is, or quoted when it holds characters a terminal would not show
// on one line.
func quoteArg(s string) string {
	if q := strconv.Quote(s); q[1:len(q)-1] != s {
		return q
	}
	return s
}

// suggestFlag returns " (did you mean --name?)" for the flag of fs closest to name by edit
// distance, when it is within two edits and they change less than half of it, else "".
func suggestFlag(fs *pflag.FlagSet, name string) string {
	best, bestDist := "", 3
	fs.VisitAll(func(fl *pflag.Flag) {
		if d := editDistance(name, fl.Name); d < bestDist && 2*d < len(fl.Name) {
			best, bestDist = fl.Name, d
		}
	})
	if best == "" {
		return ""
	}
	return " (did you mean --" + best + "?)"
}

// editDistance is the Levenshtein distance between a and b (bytes; long strings are not
// compared: they are no typo of a flag name).
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return max(len(a), len(b))
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
