package bench

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dpsgd/dpsgd/internal/atomicfile"
	"github.com/dpsgd/dpsgd/plots"
)

// ErrUnwritable is wrapped when the output directory cannot be created or written.
var ErrUnwritable = errors.New("bench: output directory not writable")

// Files written by WriteReport into the output directory (figures as .png and .svg).
const (
	ReportFile  = "report.md"
	JSONFile    = "results.json"
	CSVFile     = "results.csv"
	FigAccuracy = "accuracy_vs_epsilon"
	FigPrivacy  = "epsilon_vs_epochs"
	FigSpeed    = "throughput"
)

// ReportFiles returns the names of every file WriteReport writes.
func ReportFiles() []string {
	out := []string{ReportFile, JSONFile, CSVFile}
	for _, f := range []string{FigAccuracy, FigPrivacy, FigSpeed} {
		out = append(out, f+".png", f+".svg")
	}
	return out
}

// CheckWritable creates dir if needed and checks that a file can be created, written, synced
// and removed in it. Call it before any long work so that an unwritable directory fails at once.
func CheckWritable(dir string) error {
	if dir == "" {
		return fmt.Errorf("%w: empty path, want a directory", ErrUnwritable)
	}
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", ErrUnwritable, dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%w: %v", ErrUnwritable, err)
	}
	f, err := os.CreateTemp(dir, ".bench-probe-*")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnwritable, err)
	}
	name := f.Name()
	_, werr := f.Write([]byte("probe\n"))
	serr := f.Sync()
	cerr := f.Close()
	rerr := os.Remove(name)
	if err := errors.Join(werr, serr, cerr, rerr); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUnwritable, dir, err)
	}
	return nil
}

// Round rounds every reported number of r once, so that report.md, results.json and
// results.csv show the same values: accuracies and their standard deviations to 4 decimals,
// everything else to 4 significant digits (times to 3), privacy curves to 4 significant digits.
func Round(r *SamplersResult) {
	for i := range r.Runs {
		x := &r.Runs[i]
		x.Sigma = sig(x.Sigma, 4)
		x.Epsilon = sigPtr(x.Epsilon, 4)
		x.TestAccuracy = dec(x.TestAccuracy, 4)
		x.ExamplesPerSecond, x.WallExamplesPerSecond = sig(x.ExamplesPerSecond, 4), sig(x.WallExamplesPerSecond, 4)
		x.SecondsPerEpoch = sig(x.SecondsPerEpoch, 3)
		x.Seconds = sig(x.Seconds, 3)
	}
	for i := range r.Cells {
		c := &r.Cells[i]
		c.Sigma = sig(c.Sigma, 4)
		c.CalibrationSeconds = sig(c.CalibrationSeconds, 3)
		c.EpsilonSpent = sigPtr(c.EpsilonSpent, 4)
		c.AccuracyMean, c.AccuracySD = dec(c.AccuracyMean, 4), dec(c.AccuracySD, 4)
		c.ExamplesPerSecond, c.ExamplesPerSecSD = sig(c.ExamplesPerSecond, 4), sig(c.ExamplesPerSecSD, 4)
		c.WallExamplesPerSecond = sig(c.WallExamplesPerSecond, 4)
		c.SecondsPerEpoch = sig(c.SecondsPerEpoch, 3)
	}
	for i := range r.Privacy.Curves {
		c := &r.Privacy.Curves[i]
		for j := range c.Epsilon {
			c.Epsilon[j] = sigPtr(c.Epsilon[j], 4)
			c.TV[j] = sigPtr(c.TV[j], 4)
		}
	}
	r.Seconds = sig(r.Seconds, 3)
}

// sig rounds x to n significant digits (the shortest decimal of the result is what is shown).
func sig(x float64, n int) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', n, 64), 64)
	return v
}

// dec rounds x to n decimals.
func dec(x float64, n int) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', n, 64), 64)
	return v
}

func sigPtr(p *float64, n int) *float64 {
	if p == nil {
		return nil
	}
	v := sig(*p, n)
	return &v
}

// Num formats a rounded value exactly as results.json holds it (shortest decimal, no
// exponent); the report's tables use it, and a reader parses it back with strconv.ParseFloat.
func Num(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// NumPtr is Num, or "—" for a missing value.
func NumPtr(p *float64) string {
	if p == nil {
		return "—"
	}
	return Num(*p)
}

// WriteReport writes r into dir (created if needed): report.md, results.json, results.csv and
// the figures (PNG and SVG). Every file is first written to a temporary file in dir and
// synced; only when all are written are they renamed into place, so a failure leaves no
// partial file behind (internal/atomicfile.CommitAll). r should be rounded (Samplers does it).
func WriteReport(dir string, r *SamplersResult) (err error) {
	if err := CheckWritable(dir); err != nil {
		return err
	}
	var files []*atomicfile.Pending // committed together at the end
	defer func() {
		if err != nil {
			for _, f := range files {
				f.Abort()
			}
		}
	}()
	add := func(name string, data []byte) error {
		f, err := atomicfile.Create(filepath.Join(dir, name), 0o644)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnwritable, err)
		}
		files = append(files, f)
		if _, err := f.Write(data); err != nil {
			return fmt.Errorf("bench: writing %s: %w", name, err)
		}
		return nil
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: encoding %s: %w", JSONFile, err)
	}
	if err := add(JSONFile, append(js, '\n')); err != nil {
		return err
	}
	cs, err := CSV(r)
	if err != nil {
		return err
	}
	if err := add(CSVFile, cs); err != nil {
		return err
	}
	if err := add(ReportFile, []byte(Markdown(r))); err != nil {
		return err
	}
	for name, fig := range map[string]plots.Figure{FigAccuracy: accuracyFigure(r), FigPrivacy: privacyFigure(r), FigSpeed: speedFigure(r)} {
		tmp, err := os.MkdirTemp(dir, "."+name+".tmp-*")
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnwritable, err)
		}
		err = fig.Save(filepath.Join(tmp, name))
		for _, ext := range []string{".png", ".svg"} {
			b, rerr := os.ReadFile(filepath.Join(tmp, name+ext))
			if err == nil && rerr == nil {
				err = add(name+ext, b)
			}
		}
		os.RemoveAll(tmp)
		if err != nil {
			return fmt.Errorf("bench: figure %s: %w", name, err)
		}
	}
	if err := atomicfile.CommitAll(files...); err != nil {
		return fmt.Errorf("bench: writing the report: %w", err)
	}
	return nil
}

// CSVHeader is the header row of results.csv.
func CSVHeader() []string {
	return []string{"sampler", "accountant", "adjacency", "target_epsilon", "delta", "seed", "sigma", "epsilon",
		"test_accuracy", "examples_per_second", "wall_examples_per_second", "seconds_per_epoch", "seconds", "epochs_run", "steps", "stopped_by_budget"}
}

// CSV returns results.csv: one row per training run, the values of results.json.
func CSV(r *SamplersResult) ([]byte, error) {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	rows := [][]string{CSVHeader()}
	for _, x := range r.Runs {
		eps := ""
		if x.Epsilon != nil {
			eps = Num(*x.Epsilon)
		}
		rows = append(rows, []string{x.Sampler, x.Accountant, x.Adjacency, Num(x.TargetEpsilon), Num(x.Delta),
			strconv.FormatUint(x.Seed, 10), Num(x.Sigma), eps, Num(x.TestAccuracy), Num(x.ExamplesPerSecond),
			Num(x.WallExamplesPerSecond), Num(x.SecondsPerEpoch), Num(x.Seconds), strconv.Itoa(x.EpochsRun), strconv.Itoa(x.Steps), strconv.FormatBool(x.StoppedByBudget)})
	}
	if err := w.WriteAll(rows); err != nil {
		return nil, fmt.Errorf("bench: encoding %s: %w", CSVFile, err)
	}
	return b.Bytes(), nil
}

// Table headers of report.md; tests find the tables by them.
const (
	CellsHeader   = "| sampler | accountant | target ε | σ | ε spent | accuracy (mean) | accuracy (sd) | runs | examples/s | wall examples/s | s/epoch | calibration s |"
	PrivacyHeader = "| curve | sampler | accountant | statement | valid for the sampler |"
)

// Markdown returns report.md.
func Markdown(r *SamplersResult) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# dpsgd bench samplers: %s, %s\n\n", r.Dataset, r.Model)
	if r.Quick {
		p("**Quick run** (`--quick`): a small version for tests; the numbers say little about the samplers.\n\n")
	}
	p("- Date: %s; machine: %s; total time %s s.\n", r.Date, r.Machine, Num(r.Seconds))
	if r.Command != "" {
		p("- Command: `%s`\n", r.Command)
	}
	p("- Data: %s, %d training and %d test examples. Model: %s (%d parameters).\n", r.Dataset, r.TrainExamples, r.TestExamples, r.Arch, r.Params)
	p("- Training: %d epochs, expected batch size %d, clip norm C = %s, optimizer %s at learning rate %s; seeds %s.\n",
		r.Epochs, r.BatchSize, Num(r.Clip), r.Optimizer, Num(r.LR), joinSeeds(r.Seeds))
	p("- Privacy: every σ is calibrated with the sampler's own proven accountant (the one `dpsgd train` uses) so that ")
	p("the planned epochs spend at most the target ε at δ = %s; ε spent is what that accountant reports after training.\n\n", Num(r.Delta))

	p("## Accuracy and speed at each target (ε, δ = %s)\n\n", Num(r.Delta))
	p("%s\n", CellsHeader)
	p("|%s\n", strings.Repeat(" --- |", 12))
	for _, c := range r.Cells {
		p("| %s | %s | %s | %s | %s | %s | %s | %d | %s | %s | %s | %s |\n", c.Sampler, c.Accountant, Num(c.TargetEpsilon), Num(c.Sigma),
			NumPtr(c.EpsilonSpent), Num(c.AccuracyMean), Num(c.AccuracySD), c.Runs, Num(c.ExamplesPerSecond), Num(c.WallExamplesPerSecond),
			Num(c.SecondsPerEpoch), Num(c.CalibrationSeconds))
	}
	p("\nAccuracy is the test accuracy after the last epoch, mean and sample standard deviation over the seeds. ")
	p("examples/s is the training throughput (time in training steps only); wall examples/s and s/epoch include the ")
	p("accountant's check before every epoch and the evaluation after it. Both are means over the seeds. ")
	p("Calibration s is the time the accountant took to find σ. Each run is a row of `%s`.\n\n", CSVFile)
	p("![test accuracy against ε](%s.png)\n\n([SVG](%s.svg)) Test accuracy against the target ε, error bars ± one standard deviation over the seeds (points slightly offset sideways so that the bars do not overlap).\n\n", FigAccuracy, FigAccuracy)
	p("![throughput](%s.png)\n\n([SVG](%s.svg)) Training throughput (examples/s, mean ± sd over the seeds) of each sampler at each target.\n\n", FigSpeed, FigSpeed)

	pc := r.Privacy
	p("## Privacy without training: ε at δ = %s over epochs, σ = %s\n\n", Num(pc.Delta), Num(pc.Sigma))
	p("N = %d examples, expected batch size %d. Each sampler with its own proven accountant; for shuffling also ", pc.DatasetSize, pc.BatchSize)
	p("the lower bound of Chua et al. (2024): no valid accountant for shuffling can report less than it, ")
	p("and what Poisson accounting would claim for shuffling: **that row is NOT a valid guarantee for shuffling** ")
	p("(shuffled training is often reported this way; the lower bound shows it can understate ε).\n\n")
	epochs := TableEpochs(len(firstEpochs(pc)))
	hdr := PrivacyHeader
	for _, e := range epochs {
		hdr += fmt.Sprintf(" ε after %d |", e)
	}
	p("%s\n|%s\n", hdr, strings.Repeat(" --- |", 5+len(epochs)))
	anyTV := false
	for _, c := range pc.Curves {
		valid := "yes"
		if !c.Valid {
			valid = "NO"
			if c.Kind == "lower bound" {
				valid = "NO (lower bound)"
			}
		}
		p("| %s | %s | %s | %s | %s |", c.Label, c.Sampler, c.Accountant, c.Kind, valid)
		for _, e := range epochs {
			i := e - 1
			switch {
			case i < len(c.Epsilon) && c.Epsilon[i] != nil:
				p(" %s |", Num(*c.Epsilon[i]))
			case i < len(c.TV) && c.TV[i] != nil:
				p(" TV %s |", Num(*c.TV[i]))
				anyTV = true
			default:
				p(" — |")
			}
		}
		p("\n")
	}
	p("\n")
	if anyTV {
		p("\"TV x\": the accountant certifies no finite ε at this δ there, only a total variation x (a (0, x) guarantee).\n\n")
	}
	for _, c := range pc.Curves {
		if c.Note != "" {
			p("- %s/%s: %s\n", c.Sampler, c.Accountant, c.Note)
		}
	}
	p("![ε over epochs](%s.png)\n\n([SVG](%s.svg)) ε at δ = %s after each epoch at σ = %s: solid lines are guarantees for their sampler, ",
		FigPrivacy, FigPrivacy, Num(pc.Delta), Num(pc.Sigma))
	p("the dotted line is the shuffle lower bound, the dashed grey line is Poisson accounting applied to shuffling (not valid).\n")
	return b.String()
}

func firstEpochs(pc PrivacyComparison) []int {
	if len(pc.Curves) == 0 {
		return nil
	}
	return pc.Curves[0].Epochs
}

func joinSeeds(s []uint64) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = strconv.FormatUint(v, 10)
	}
	return strings.Join(parts, ", ")
}
