package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dpsgd/dpsgd/engine/sampler"
	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/accounting"
)

// accountFlags are the flags of dpsgd account.
type accountFlags struct {
	sampler, method, solve, mechanism string
	datasetSize, batchSize, maxBatch  int
	rounds, steps, epochs             int
	sampleRate, sigma                 float64
	delta, epsilon, tv                float64
	jsonOut, compare, quiet           bool
	set                               map[string]bool
}

// countFlag is an integer flag that accepts only whole numbers ≥ min and says so.
type countFlag struct {
	dst *int
	min int
}

// String is "": the defaults of these flags are in their usage text, often with a condition
// ("default 5000; 500 with --quick"), so the help shows none of its own.
func (c countFlag) String() string { return "" }

// Type names the value in the help: --epochs int.
func (c countFlag) Type() string { return "int" }

func (c countFlag) Set(s string) error {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || v < int64(c.min) || v > 1<<53 {
		return fmt.Errorf("want a whole number in [%d, 2^53]", c.min)
	}
	*c.dst = int(v)
	return nil
}

// realFlag is a float flag that refuses NaN and ±Inf.
type realFlag struct{ dst *float64 }

// String is "", as countFlag's.
func (r realFlag) String() string { return "" }

// Type names the value in the help: --sigma float.
func (r realFlag) Type() string { return "float" }

func (r realFlag) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return errors.New("want a finite number")
	}
	*r.dst = v
	return nil
}

func parseAccountFlags(args []string, stdout io.Writer) (*accountFlags, error) {
	f := &accountFlags{}
	fs := newFlagSet("dpsgd account")
	fs.StringVar(&f.sampler, "sampler", "poisson", "shuffle, poisson, poisson-truncated or allocation")
	fs.StringVar(&f.method, "accountant", "", "rdp, pld, gdp, exact, chisq, berry-esseen, lower or deterministic (default: the tightest proven one for the sampler)")
	fs.StringVar(&f.mechanism, "mechanism", "gaussian", "noise mechanism: gaussian, personalized or ball (dpsgd account --mechanism M --help lists the flags of M)")
	fs.Var(countFlag{&f.datasetSize, 1}, "dataset-size", "N, the number of records")
	fs.Var(countFlag{&f.batchSize, 1}, "batch-size", "expected batch size B (with --dataset-size: q = B/N, M = N/B)")
	fs.Var(countFlag{&f.maxBatch, 1}, "max-batch", "poisson-truncated: largest batch (default: expected + 10 standard deviations + 10)")
	fs.Var(realFlag{&f.sampleRate}, "sample-rate", "Poisson sampling rate q in (0, 1]")
	fs.Var(countFlag{&f.rounds, 1}, "rounds", "M, steps per epoch (shuffle, allocation): an alternative to --dataset-size and --batch-size")
	fs.Var(countFlag{&f.steps, 0}, "steps", "steps taken")
	fs.Var(countFlag{&f.epochs, 0}, "epochs", "epochs taken (steps = epochs × steps per epoch)")
	fs.Var(realFlag{&f.sigma}, "sigma", "noise multiplier σ > 0")
	fs.Var(realFlag{&f.delta}, "delta", "δ in (0, 1) (default 1e-5)")
	fs.Var(realFlag{&f.epsilon}, "epsilon", "ε ≥ 0: report δ(ε), or the target of --solve")
	fs.Var(realFlag{&f.tv}, "tv", "total-variation target in (0, 1) for --solve (the same as ε = 0, δ = tv)")
	fs.StringVar(&f.solve, "solve", "", "sigma, rounds or epochs: the value that meets the target (--epsilon with --delta, or --tv)")
	fs.BoolVar(&f.compare, "compare", false, "also report every other method available for the sampler")
	fs.BoolVar(&f.jsonOut, "json", false, "print one JSON object on stdout (no progress on stderr)")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress on stderr (--solve sigma prints each σ it probes)")
	var err error
	if f.set, err = parseFlags(fs, args, stdout, "Usage: dpsgd account [flags]\n\nReports the privacy of a DP-SGD run for the sampler used, or solves for σ, rounds or epochs."); err != nil {
		return nil, err
	}
	return f, nil
}

// accountReport is the JSON object of dpsgd account. The keys sampler,
// accountant, sigma, steps, epochs, epsilon, delta, tv, valid, rounds and
// sample_rate are a contract (TestAccountContract). A value an accountant cannot
// give (ε at a δ below a chi-square TV bound) is null, never NaN or Inf.
type accountReport struct {
	Sampler    string   `json:"sampler"`
	Accountant string   `json:"accountant"`
	Name       string   `json:"name"`
	Kind       string   `json:"kind"`
	Valid      bool     `json:"valid"`
	Adjacency  string   `json:"adjacency"`
	Sigma      float64  `json:"sigma"`
	Steps      int      `json:"steps"`
	Epochs     float64  `json:"epochs"`
	Rounds     int      `json:"rounds,omitempty"`
	SampleRate float64  `json:"sample_rate,omitempty"`
	Epsilon    *float64 `json:"epsilon"`
	Delta      *float64 `json:"delta"`
	TV         *float64 `json:"tv"`
	MIA        *float64 `json:"mia_accuracy_bound,omitempty"`
	Solved     string   `json:"solved,omitempty"`
	Note       string   `json:"note,omitempty"`
	// Compare holds the other methods for the sampler (--compare).
	Compare []accountReport `json:"compare,omitempty"`
}

// accountSetup is the resolved geometry of an account query.
type accountSetup struct {
	spec          accounting.Spec
	stepsPerEpoch int
	steps, epochs int // epochs == 0: given as steps
	target        *privacy.Budget
}

// mechanismArg returns the value of --mechanism in args ("" when absent), so
// that each mechanism can parse its own flags.
func mechanismArg(args []string) string {
	for i, a := range args {
		if a == "--" {
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "mechanism" {
			continue
		}
		if hasVal {
			return val
		}
		if i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// cmdAccount runs dpsgd account; a done ctx stops --solve sigma between (or
// during) the accountant's evaluations, with an error wrapping ctx.Err().
func cmdAccount(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	switch mechanismArg(args) {
	case "personalized":
		return accountPersonalized(args, stdout)
	case accounting.MechanismBall:
		return accountBall(args, stdout)
	}
	f, err := parseAccountFlags(args, stdout)
	if err != nil {
		return err // pflag.ErrHelp after --help: report exits 0
	}
	st, err := f.resolve()
	if err != nil {
		return err
	}
	rep, err := f.run(ctx, st, stderr)
	if err != nil {
		return err
	}
	if f.compare {
		for _, m := range accounting.Methods(st.spec.Sampler) {
			if m == st.spec.Method {
				continue
			}
			s := *st
			s.spec.Method = m
			r, err := report1(&s, f)
			if err != nil {
				r = &accountReport{Sampler: s.spec.Sampler, Accountant: m, Note: "error: " + err.Error()}
			}
			rep.Compare = append(rep.Compare, *r)
		}
	}
	if f.jsonOut {
		return printJSON(stdout, rep)
	}
	printAccount(stdout, rep)
	for i := range rep.Compare {
		fmt.Fprintln(stdout)
		printAccount(stdout, &rep.Compare[i])
	}
	return nil
}

// resolve turns the flags into a sampler geometry, steps and a target.
func (f *accountFlags) resolve() (*accountSetup, error) {
	if f.mechanism != accounting.MechanismGaussian {
		return nil, usagef("--mechanism %q: want gaussian, personalized or ball", f.mechanism)
	}
	st := &accountSetup{}
	s := &st.spec
	s.Sampler = f.sampler
	if accounting.Methods(f.sampler) == nil {
		return nil, usagef("--sampler %q: want shuffle, poisson, poisson-truncated or allocation", f.sampler)
	}
	s.Method = f.method
	if s.Method == "" {
		s.Method = accounting.DefaultMethod(f.sampler)
	}
	if _, err := s.Kind(); err != nil {
		return nil, usagef("--accountant %q: not available for --sampler %s; want one of %s", f.method, f.sampler, strings.Join(accounting.Methods(f.sampler), ", "))
	}
	if f.set["sigma"] && !(f.sigma > 0) {
		return nil, usagef("--sigma %v: out of range (0, +Inf)", f.sigma)
	}
	if f.set["delta"] && !(f.delta > 0 && f.delta < 1) {
		return nil, usagef("--delta %v: out of range (0, 1)", f.delta)
	}
	if f.set["epsilon"] && !(f.epsilon >= 0) {
		return nil, usagef("--epsilon %v: out of range [0, +Inf)", f.epsilon)
	}
	if f.set["tv"] && !(f.tv > 0 && f.tv < 1) {
		return nil, usagef("--tv %v: out of range (0, 1)", f.tv)
	}
	if f.set["sample-rate"] && !(f.sampleRate > 0 && f.sampleRate <= 1) {
		return nil, usagef("--sample-rate %v: out of range (0, 1]", f.sampleRate)
	}
	if f.set["batch-size"] != f.set["dataset-size"] && !(f.sampler == "poisson-truncated" && f.set["dataset-size"]) {
		return nil, usagef("--batch-size and --dataset-size go together (or use --sample-rate / --rounds)")
	}
	if f.set["batch-size"] && f.batchSize > f.datasetSize {
		return nil, usagef("--batch-size %d: out of range [1, --dataset-size = %d]", f.batchSize, f.datasetSize)
	}
	sizes := f.set["batch-size"] && f.set["dataset-size"]
	switch f.sampler {
	case privacy.SamplerPoisson, privacy.SamplerPoissonTruncated:
		switch {
		case f.set["sample-rate"] && sizes:
			return nil, usagef("give either --sample-rate or --batch-size with --dataset-size, not both")
		case f.set["sample-rate"]:
			s.SampleRate = f.sampleRate
		case sizes:
			// q from N: N is public, so the guarantee is stated for zero-out adjacency
			// (the numbers are add/remove's), as dpsgd train states it.
			s.SampleRate = float64(f.batchSize) / float64(f.datasetSize)
			s.PublicSize = true
		default:
			return nil, usagef("--sampler %s needs --sample-rate, or --batch-size with --dataset-size", f.sampler)
		}
		if f.set["rounds"] {
			return nil, usagef("--rounds applies to shuffle and allocation; Poisson sampling uses --sample-rate")
		}
		// The Poisson sampler's epoch: round(1/q) steps (engine/sampler).
		st.stepsPerEpoch = sampler.PoissonSteps(s.SampleRate)
		if f.sampler == privacy.SamplerPoissonTruncated {
			if !f.set["dataset-size"] {
				return nil, usagef("--sampler poisson-truncated needs --dataset-size")
			}
			s.DatasetSize = f.datasetSize
			s.PublicSize = true // the truncation bound uses N: public, zero-out adjacency
			s.MaxBatch = f.maxBatch
			if !f.set["max-batch"] {
				s.MaxBatch = sampler.DefaultMaxBatch(f.datasetSize, s.SampleRate)
			}
		}
	default:
		switch {
		case f.set["rounds"] && sizes:
			return nil, usagef("give either --rounds or --batch-size with --dataset-size, not both")
		case f.set["rounds"]:
			s.Rounds = f.rounds
		case sizes && f.sampler == privacy.SamplerShuffle:
			s.Rounds = sampler.ShuffleSteps(f.datasetSize, f.batchSize)
		case sizes:
			s.Rounds = sampler.AllocationSteps(f.datasetSize, f.batchSize)
		case f.solve == "rounds":
		default:
			return nil, usagef("--sampler %s needs --rounds, or --batch-size with --dataset-size", f.sampler)
		}
		if f.set["sample-rate"] {
			return nil, usagef("--sample-rate applies to Poisson sampling; --sampler %s uses --rounds", f.sampler)
		}
		if s.Rounds > 0 {
			s.SampleRate = 1 / float64(s.Rounds)
		}
		st.stepsPerEpoch = s.Rounds
	}
	switch {
	case f.set["steps"] && f.set["epochs"]:
		return nil, usagef("give either --steps or --epochs, not both")
	case f.set["steps"]:
		if f.solve == "rounds" || f.solve == "epochs" {
			return nil, usagef("--solve %s: give --epochs (steps follow from rounds × epochs)", f.solve)
		}
		st.steps = f.steps
	case f.set["epochs"]:
		if f.solve == "epochs" {
			return nil, usagef("--solve epochs: do not give --epochs")
		}
		st.epochs = f.epochs
		st.steps = f.epochs * st.stepsPerEpoch
	case f.solve == "epochs":
	default:
		return nil, usagef("give --steps or --epochs")
	}
	// The target (for --solve) or the query point.
	if f.set["tv"] && (f.set["epsilon"] || f.set["delta"]) {
		return nil, usagef("--tv is the target (ε = 0, δ = tv): do not combine it with --epsilon or --delta")
	}
	if f.solve != "" {
		switch {
		case f.set["tv"]:
			st.target = &privacy.Budget{Epsilon: 0, Delta: f.tv}
		case f.set["epsilon"]:
			d := 1e-5
			if f.set["delta"] {
				d = f.delta
			}
			st.target = &privacy.Budget{Epsilon: f.epsilon, Delta: d}
		default:
			return nil, usagef("--solve %s needs a target: --epsilon (with --delta, default 1e-5) or --tv", f.solve)
		}
	}
	switch f.solve {
	case "":
		if !f.set["sigma"] {
			return nil, usagef("give --sigma (or --solve sigma with a target)")
		}
	case "sigma":
		if f.set["sigma"] {
			return nil, usagef("--solve sigma: do not give --sigma")
		}
	case "rounds":
		if f.sampler != privacy.SamplerShuffle && f.sampler != privacy.SamplerAllocation {
			return nil, usagef("--solve rounds applies to shuffle and allocation")
		}
		if f.set["rounds"] || sizes {
			return nil, usagef("--solve rounds: do not give --rounds or the sizes")
		}
		if !f.set["epochs"] {
			return nil, usagef("--solve rounds needs --epochs")
		}
		if !f.set["sigma"] {
			return nil, usagef("--solve rounds needs --sigma")
		}
	case "epochs":
		if !f.set["sigma"] {
			return nil, usagef("--solve epochs needs --sigma")
		}
	default:
		return nil, usagef("--solve %q: want sigma, rounds or epochs", f.solve)
	}
	s.Sigma = f.sigma
	return st, nil
}

// run answers the query of f for the main method; --solve sigma reports its
// progress on stderr unless --quiet or --json.
func (f *accountFlags) run(ctx context.Context, st *accountSetup, stderr io.Writer) (*accountReport, error) {
	var err error
	switch f.solve {
	case "sigma":
		var onProbe func(accounting.Probe)
		var done func(float64, time.Duration)
		if !f.quiet && !f.jsonOut {
			onProbe, done = sigmaProgress(stderr, st)
		}
		start := time.Now()
		st.spec.Sigma, err = accounting.SolveSigmaCtx(ctx, st.spec, st.steps, *st.target, 0, onProbe)
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return nil, fmt.Errorf("--solve sigma interrupted after %.1f s, no σ found: %w", time.Since(start).Seconds(), err)
		}
		if err == nil && done != nil {
			done(st.spec.Sigma, time.Since(start))
		}
	case "rounds":
		st.spec.Rounds, err = accounting.SolveRounds(st.spec, st.epochs, *st.target)
		if err == nil {
			st.stepsPerEpoch = st.spec.Rounds
			st.spec.SampleRate = 1 / float64(st.spec.Rounds)
			st.steps = st.epochs * st.spec.Rounds
		}
	case "epochs":
		st.epochs, err = accounting.SolveEpochs(st.spec, st.stepsPerEpoch, *st.target)
		st.steps = st.epochs * st.stepsPerEpoch
	}
	if err != nil {
		return nil, accountError(err)
	}
	rep, err := report1(st, f)
	if err != nil {
		return nil, accountError(err)
	}
	rep.Solved = f.solve
	return rep, nil
}

// sigmaProgress prints what --solve sigma is doing on w (sigmaCalibrationProgress).
func sigmaProgress(w io.Writer, st *accountSetup) (onProbe func(accounting.Probe), done func(sigma float64, elapsed time.Duration)) {
	sp := st.spec
	geom := fmt.Sprintf("M = %d", sp.Rounds)
	if sp.Sampler == privacy.SamplerPoisson || sp.Sampler == privacy.SamplerPoissonTruncated {
		geom = fmt.Sprintf("q = %.6g", sp.SampleRate)
	}
	return sigmaCalibrationProgress(w, "account", fmt.Sprintf("%s (%s, %d steps)", sp.Sampler, geom, st.steps), sp.Method, *st.target)
}

// sigmaCalibrationProgress prints a σ calibration (accounting.SolveSigmaCtx) of
// command cmd on w: a line at once naming what (the sampler and its geometry),
// the target and the accountant method, then one line per σ evaluated;
// done prints the result.
func sigmaCalibrationProgress(w io.Writer, cmd, what, method string, t privacy.Budget) (onProbe func(accounting.Probe), done func(sigma float64, elapsed time.Duration)) {
	goal := fmt.Sprintf("ε = %g at δ = %g", t.Epsilon, t.Delta)
	if t.Epsilon == 0 {
		goal = fmt.Sprintf("TV = %g", t.Delta)
	}
	fmt.Fprintf(w, "dpsgd %s: calibrating σ for %s to %s (accountant %s)\n", cmd, what, goal, method)
	prefix := fmt.Sprintf("dpsgd %s: calibrating σ (accountant %s)", cmd, method)
	probes := 0
	onProbe = func(p accounting.Probe) {
		if p.N == 0 {
			fmt.Fprintf(w, "%s: start from the %s estimate σ = %.6g (%.1f s)\n", prefix, p.Accountant, p.Sigma, p.Elapsed.Seconds())
			return
		}
		probes = p.N
		if p.Err != nil {
			fmt.Fprintf(w, "%s: probe σ = %.6g: no δ there (%v), counted as above the target (%.1f s)\n",
				prefix, p.Sigma, p.Err, p.Elapsed.Seconds())
			return
		}
		got := fmt.Sprintf("ε = %.6g", p.Epsilon)
		switch {
		case t.Epsilon == 0:
			got = fmt.Sprintf("TV = %.6g", p.Delta)
		case math.IsInf(p.Epsilon, 1):
			got = fmt.Sprintf("no ε at δ = %g", t.Delta)
		case math.IsNaN(p.Epsilon):
			got = fmt.Sprintf("δ = %.6g at ε = %g", p.Delta, t.Epsilon)
		}
		verdict := "above the target"
		if p.Met {
			verdict = "meets the target"
		}
		fmt.Fprintf(w, "%s: probe σ = %.6g: %s, %s (%.1f s)\n", prefix, p.Sigma, got, verdict, p.Elapsed.Seconds())
	}
	done = func(sigma float64, elapsed time.Duration) {
		fmt.Fprintf(w, "dpsgd %s: calibrated σ = %.6g in %d probes (%.1f s)\n", cmd, sigma, probes, elapsed.Seconds())
	}
	return onProbe, done
}

// accountError maps bad input and unreachable targets to usage errors (exit 2).
func accountError(err error) error {
	if errors.Is(err, privacy.ErrInvalidArgument) || errors.Is(err, privacy.ErrUnreachable) || errors.Is(err, privacy.ErrOutOfRegime) {
		return usageError{err}
	}
	return err
}

// report1 evaluates one method at the setup's σ and steps.
func report1(st *accountSetup, f *accountFlags) (*accountReport, error) {
	spec := st.spec
	acc, err := spec.New()
	if err != nil {
		return nil, err
	}
	kind, _ := spec.Kind()
	rep := &accountReport{
		Sampler: spec.Sampler, Accountant: spec.Method, Name: acc.Name(), Kind: string(kind),
		Valid: kind == accounting.KindGuarantee, Adjacency: acc.Adjacency(), Sigma: spec.Sigma,
		Steps: st.steps, SampleRate: spec.SampleRate,
	}
	if spec.Sampler == privacy.SamplerShuffle || spec.Sampler == privacy.SamplerAllocation {
		rep.Rounds = spec.Rounds
	}
	rep.Epochs = float64(st.steps) / float64(st.stepsPerEpoch)
	if spec.Sampler == privacy.SamplerShuffle || spec.Sampler == privacy.SamplerAllocation {
		rep.Epochs = math.Ceil(rep.Epochs) // a partial epoch is accounted as a whole one
	}
	switch kind {
	case accounting.KindApproximation:
		rep.Note = "approximation (asymptotic), not a guarantee"
	case accounting.KindLowerBound:
		rep.Note = "lower bound: the true ε is at least this; not a guarantee"
	case accounting.KindAssumesPoisson:
		rep.Note = "what Poisson accounting (q = 1/M) would claim; NOT valid for " + spec.Sampler
	}
	tv, err := acc.Delta(st.steps, 0)
	if err != nil {
		return nil, err
	}
	rep.TV = num(tv)
	if kind != accounting.KindLowerBound {
		rep.MIA = num(0.5 + 0.5*tv)
	}
	delta := 1e-5
	if f.set["delta"] {
		delta = f.delta
	}
	if st.target != nil {
		delta = st.target.Delta
	}
	switch {
	case st.target != nil && st.target.Epsilon == 0:
		// A TV target: the statement is (0, tv).
		rep.Epsilon, rep.Delta = num(0), num(tv)
	case f.set["epsilon"] && !f.set["delta"] && st.target == nil:
		d, err := acc.Delta(st.steps, f.epsilon)
		if err != nil {
			return nil, err
		}
		rep.Epsilon, rep.Delta = num(f.epsilon), num(d)
	default:
		rep.Delta = num(delta)
		eps, err := acc.Epsilon(st.steps, delta)
		switch {
		case errors.Is(err, privacy.ErrUnreachable):
			rep.Note = strings.TrimPrefix(rep.Note+"; ", "; ") + "no ε at this δ: " + err.Error()
		case err != nil:
			return nil, err
		default:
			rep.Epsilon = num(eps)
		}
	}
	return rep, nil
}

// num returns a pointer to v, or nil for NaN/Inf (JSON null).
func num(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func printAccount(w io.Writer, r *accountReport) {
	geom := ""
	if r.Rounds > 0 {
		geom = fmt.Sprintf(", M = %d rounds per epoch", r.Rounds)
	} else if r.SampleRate > 0 {
		geom = fmt.Sprintf(", q = %.6g", r.SampleRate)
	}
	fmt.Fprintf(w, "sampler     %s%s; %s adjacency\n", r.Sampler, geom, r.Adjacency)
	fmt.Fprintf(w, "accountant  %s (%s): %s\n", r.Accountant, r.Name, r.Kind)
	fmt.Fprintf(w, "σ = %.6g, steps = %d (%.4g epochs)", r.Sigma, r.Steps, r.Epochs)
	if r.Solved != "" {
		fmt.Fprintf(w, "   [solved: %s]", r.Solved)
	}
	fmt.Fprintln(w)
	if r.Epsilon != nil && r.Delta != nil {
		fmt.Fprintf(w, "ε = %.6g at δ = %.3g\n", *r.Epsilon, *r.Delta)
	}
	if r.TV != nil {
		fmt.Fprintf(w, "TV = %.6g", *r.TV)
		if r.MIA != nil {
			fmt.Fprintf(w, " (membership-inference accuracy ≤ %.6g)", *r.MIA)
		}
		fmt.Fprintln(w)
	}
	if r.Note != "" {
		fmt.Fprintf(w, "note: %s\n", r.Note)
	}
}
