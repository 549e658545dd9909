package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/dpsgd/dpsgd/audit"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// auditFlags are the flags of dpsgd audit.
type auditFlags struct {
	samplers              string
	runs, epochs, steps   int
	n, batch, workers     int
	sigma, targetEps      float64
	delta, confidence     float64
	threat                string
	canary, canaryRow     string
	float32               bool
	seed                  uint64
	quick, jsonOut, quiet bool
	set                   map[string]bool
}

// auditResultJSON is one sampler's audit in the --json output; +Inf and NaN are null.
type auditResultJSON struct {
	Sampler              string   `json:"sampler"`
	Accountant           string   `json:"accountant"`
	Canary               string   `json:"canary"`
	CanaryRow            string   `json:"canary_row,omitempty"`
	Dtype                string   `json:"dtype"`
	N                    int      `json:"n"`
	Batch                int      `json:"batch_size"`
	Threat               string   `json:"threat"`
	Sigma                float64  `json:"sigma"`
	Delta                float64  `json:"delta"`
	Epochs               int      `json:"epochs"`
	Steps                int      `json:"steps"`
	StepsPerEpoch        int      `json:"steps_per_epoch"`
	Runs                 int      `json:"runs"`
	Confidence           float64  `json:"confidence"`
	EpsilonAccountant    *float64 `json:"epsilon_accountant"`
	EpsilonEmpirical     *float64 `json:"epsilon_empirical"`
	EpsilonEmpiricalLow  *float64 `json:"epsilon_empirical_low"`
	EpsilonEmpiricalHigh *float64 `json:"epsilon_empirical_high"`
	EpsilonLowerBound    *float64 `json:"epsilon_lower_bound"`
	Threshold            float64  `json:"threshold"`
	FPR                  float64  `json:"fpr"`
	FNR                  float64  `json:"fnr"`
	Unclipped            int      `json:"unclipped_steps"`
	Collateral           int      `json:"collateral"`
	RunsPerSecond        float64  `json:"runs_per_second"`
	Violation            bool     `json:"violation"`
}

func parseAuditFlags(args []string, stdout io.Writer) (*auditFlags, error) {
	f := &auditFlags{runs: 5000, epochs: 1, n: 16, batch: 4, delta: 1e-5, confidence: 0.95, threat: audit.ThreatIterates, seed: 1}
	fs := newFlagSet("dpsgd audit")
	fs.StringVar(&f.samplers, "sampler", strings.Join(audit.Samplers(), ","), "samplers to audit, comma-separated: shuffle, poisson, poisson-truncated, allocation")
	fs.Var(countFlag{&f.runs, 4}, "runs", "trainings per world (with and without the canary), ≥ 4 (default 5000; 500 with --quick)")
	fs.Var(realFlag{&f.sigma}, "sigma", "noise multiplier σ of every training (default 1 unless --target-epsilon)")
	fs.Var(realFlag{&f.targetEps}, "target-epsilon", "calibrate σ per sampler so that its accountant claims this ε at --delta")
	fs.Var(realFlag{&f.delta}, "delta", "δ of the ε comparison, in (0, 1) (default 1e-5)")
	fs.Var(countFlag{&f.epochs, 1}, "epochs", "epochs per training (default 1)")
	fs.Var(countFlag{&f.steps, 1}, "steps", "steps per training instead of --epochs (the last epoch may be partial)")
	fs.Var(countFlag{&f.n, 2}, "n", "dataset size including the canary's slot (default 16; 64 with an adversarial --canary)")
	fs.Var(countFlag{&f.batch, 1}, "batch-size", "batch size (shuffle) or expected batch size, and the physical batch size (default 4; n/4 with an adversarial --canary)")
	fs.StringVar(&f.canary, "canary", "", "canary design: isolated, opposed (shuffle only), or an adversarial one: "+strings.Join(audit.AdversarialCanaries(), ", ")+"\n"+
		"(default: opposed for shuffle, isolated otherwise). An adversarial canary holds one float-edge feature\n"+
		"(nan: NaN; inf: −Inf; huge-logit: −3.4e38, a logit of about 1e34) beside ordinary examples that all push\n"+
		"the canary coordinates, so that a record reaching the other rows of its physical batch shows as a missing shift")
	fs.StringVar(&f.canaryRow, "canary-row", "", "where an adversarial canary sits: first (index 0: row 0 of the first physical batch whenever drawn)\n"+
		"or random (a uniform index per training) (default: first; random for shuffle, whose batches are in permutation order)")
	fs.BoolVar(&f.float32, "float32", false, "train in float32, the dtype of dpsgd train, instead of float64")
	fs.Var(realFlag{&f.confidence}, "confidence", "confidence of the empirical ε interval, in (0, 1) (default 0.95)")
	fs.StringVar(&f.threat, "threat", audit.ThreatIterates, "what the adversary sees: iterates (every step's model, what the accountants bound) or final (the last model)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of every training's sampling and noise")
	fs.Var(countFlag{&f.workers, 0}, "workers", "trainings run at once (default: one per CPU)")
	fs.BoolVar(&f.quick, "quick", false, "a fast audit: 500 runs per world unless --runs is given")
	fs.BoolVar(&f.jsonOut, "json", false, "print the result as one JSON object on the last line of stdout")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress output")
	var err error
	if f.set, err = parseFlags(fs, args, stdout, "Usage: dpsgd audit [flags]\n\nTrains a tiny logistic regression many times with and without a canary (the real engine,\nsamplers and noise), runs the likelihood-ratio test on the released parameters and reports\nthe empirical ε lower bound with its confidence interval next to the accountant's ε.\nExit status 1 when the empirical lower bound exceeds the accountant's claim, or when the\nengine zeroed an example other than the canary as non-finite (a record reaching across rows)."); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q", fs.Arg(0))
	}
	return f, nil
}

// auditConfigs validates the flags and returns one audit.Config per sampler, σ calibrated
// to --target-epsilon when given (ctx stops the calibration).
func (f *auditFlags) auditConfigs(ctx context.Context) ([]audit.Config, error) {
	if f.quick && !f.set["runs"] {
		f.runs = 500
	}
	if f.set["sigma"] && f.set["target-epsilon"] {
		return nil, usagef("--sigma and --target-epsilon: give one of them")
	}
	if f.set["steps"] && f.set["epochs"] {
		return nil, usagef("--steps and --epochs: give one of them")
	}
	if f.set["sigma"] && !(f.sigma > 0) {
		return nil, usagef("--sigma %v: want a finite value > 0", f.sigma)
	}
	if !f.set["sigma"] && !f.set["target-epsilon"] {
		f.sigma = 1
	}
	if f.set["target-epsilon"] && !(f.targetEps > 0) {
		return nil, usagef("--target-epsilon %v: want a finite value > 0", f.targetEps)
	}
	if !(f.delta > 0 && f.delta < 1) {
		return nil, usagef("--delta %v: want a value in (0, 1)", f.delta)
	}
	if !(f.confidence > 0 && f.confidence < 1) {
		return nil, usagef("--confidence %v: want a value in (0, 1)", f.confidence)
	}
	adversarial := audit.IsAdversarial(f.canary)
	switch {
	case f.canary == "" || adversarial || f.canary == audit.CanaryIsolated:
	case f.canary == audit.CanaryOpposed:
		for _, s := range strings.Split(f.samplers, ",") {
			if s = strings.TrimSpace(s); s != "shuffle" {
				return nil, usagef("--canary opposed: the shuffle design, not for --sampler %s: give --sampler shuffle, or want one of isolated, %s", s, strings.Join(audit.AdversarialCanaries(), ", "))
			}
		}
	default:
		return nil, usagef("--canary %q: want one of %s", f.canary, strings.Join(audit.Canaries(), ", "))
	}
	if f.set["canary-row"] {
		if !adversarial {
			return nil, usagef("--canary-row %s: only with an adversarial --canary (%s)", f.canaryRow, strings.Join(audit.AdversarialCanaries(), ", "))
		}
		if f.canaryRow != audit.RowFirst && f.canaryRow != audit.RowRandom {
			return nil, usagef("--canary-row %q: want %s", f.canaryRow, strings.Join(audit.CanaryRows(), " or "))
		}
	}
	if !f.set["n"] {
		f.n = 16
		if adversarial {
			f.n = 64
		}
	}
	if !f.set["batch-size"] {
		f.batch = 4
		if adversarial {
			f.batch = max(1, f.n/4)
		}
	}
	if f.n > 1<<20 {
		return nil, usagef("--n %d: want a value in [2, %d]", f.n, 1<<20)
	}
	if adversarial && f.n > audit.MaxAdversarialN {
		return nil, usagef("--n %d: want a value in [2, %d] with an adversarial --canary", f.n, audit.MaxAdversarialN)
	}
	if f.batch > f.n {
		return nil, usagef("--batch-size %d: want a value in [1, --n = %d]", f.batch, f.n)
	}
	if f.steps > 1<<20 {
		return nil, usagef("--steps %d: want a value in [1, %d]", f.steps, 1<<20)
	}
	if f.threat != audit.ThreatIterates && f.threat != audit.ThreatFinal {
		return nil, usagef("--threat %q: want %s or %s", f.threat, audit.ThreatIterates, audit.ThreatFinal)
	}
	var cfgs []audit.Config
	seen := map[string]bool{}
	for _, s := range strings.Split(f.samplers, ",") {
		s = strings.TrimSpace(s)
		ok := false
		for _, k := range audit.Samplers() {
			ok = ok || s == k
		}
		if !ok {
			return nil, usagef("--sampler %q: want a comma-separated list of %s", s, strings.Join(audit.Samplers(), ", "))
		}
		if seen[s] {
			continue
		}
		if f.canaryRow == audit.RowFirst && s == "shuffle" {
			return nil, usagef("--canary-row first: shuffle batches are in permutation order, so its canary's row is random: drop shuffle from --sampler or give --canary-row random")
		}
		seen[s] = true
		cfg := audit.Config{Sampler: s, Sigma: f.sigma, Delta: f.delta, Epochs: f.epochs, Steps: f.steps,
			N: f.n, Batch: f.batch, Runs: f.runs, Confidence: f.confidence, Threat: f.threat,
			Canary: f.canary, CanaryRow: f.canaryRow, Float32: f.float32, Seed: f.seed, Workers: f.workers}
		// The front door's sampler and claim (σ 0 with --target-epsilon: calibrated next).
		if _, _, err := audit.AccountantSpec(cfg); err != nil {
			return nil, usagef("--sampler %s: %v", s, err)
		}
		if f.set["target-epsilon"] {
			sigma, err := audit.SolveSigma(ctx, cfg, f.targetEps)
			if err != nil && ctx.Err() != nil {
				return nil, err
			}
			if err != nil {
				return nil, usagef("--target-epsilon %v for --sampler %s: %v", f.targetEps, s, err)
			}
			cfg.Sigma = sigma
		}
		cfgs = append(cfgs, cfg)
	}
	return cfgs, nil
}

// auditProgress returns a progress callback: a bar on a terminal, nothing otherwise.
func auditProgress(w io.Writer, quiet bool, sampler string, total int) (func(done, total int), func()) {
	f, ok := w.(*os.File)
	if quiet || !ok || !term.IsTerminal(int(f.Fd())) {
		return nil, func() {}
	}
	bar := progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("audit "+sampler),
		progressbar.OptionShowCount(),
		progressbar.OptionSetItsString("runs"),
		progressbar.OptionShowIts(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100_000_000),
		progressbar.OptionClearOnFinish(),
	)
	return func(done, _ int) { _ = bar.Set(done) }, func() { _ = bar.Finish() }
}

// cmdAudit is `dpsgd audit`: the empirical privacy audit of every sampler asked for.
func cmdAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseAuditFlags(args, stdout)
	if err != nil {
		return err // pflag.ErrHelp after --help: report exits 0
	}
	cfgs, err := f.auditConfigs(ctx)
	if err != nil {
		return err
	}
	var results []*audit.Result
	for _, cfg := range cfgs {
		var finish func()
		cfg.Progress, finish = auditProgress(stderr, f.quiet || f.jsonOut, cfg.Sampler, 2*cfg.Runs)
		r, err := audit.Run(ctx, cfg)
		finish()
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	var bad, fault []string
	for _, r := range results {
		if r.Violation {
			bad = append(bad, fmt.Sprintf("%s (empirical ε ≥ %.4g at %.0f%% confidence > %s's claim %.4g)",
				r.Sampler, r.Empirical.Low, 100*r.Confidence, r.Accountant, r.EpsilonAccountant))
		}
		if r.Collateral > 0 {
			fault = append(fault, fmt.Sprintf("%s (%d examples beside the %s canary)", r.Sampler, r.Collateral, r.Canary))
		}
	}
	if f.jsonOut {
		out := struct {
			Results    []auditResultJSON `json:"results"`
			Violations int               `json:"violations"`
		}{Violations: len(bad)}
		for _, r := range results {
			e := r.Empirical
			out.Results = append(out.Results, auditResultJSON{
				Sampler: r.Sampler, Accountant: r.Accountant, Canary: r.Canary, CanaryRow: r.CanaryRow,
				Dtype: r.Dtype, N: r.N, Batch: r.Batch, Threat: r.Threat,
				Sigma: r.Sigma, Delta: r.Delta, Epochs: r.Epochs, Steps: r.Steps, StepsPerEpoch: r.StepsPerEpoch,
				Runs: r.Runs, Confidence: r.Confidence,
				EpsilonAccountant: num(r.EpsilonAccountant), EpsilonEmpirical: num(e.Point),
				EpsilonEmpiricalLow: num(e.Low), EpsilonEmpiricalHigh: num(e.High),
				EpsilonLowerBound: num(r.EpsilonLowerBound),
				Threshold:         e.Threshold, FPR: e.FPR(), FNR: e.FNR(), Unclipped: r.Unclipped, Collateral: r.Collateral,
				RunsPerSecond: r.RunsPerSecond, Violation: r.Violation,
			})
		}
		if err := printJSON(stdout, out); err != nil {
			return err
		}
	} else {
		auditTable(stdout, results)
	}
	var msgs []string
	if len(bad) > 0 {
		msgs = append(msgs, fmt.Sprintf("PRIVACY VIOLATION: the audit measured more leakage than the accountant allows for %s; this is a bug in the engine, the sampler or the accountant", strings.Join(bad, "; ")))
	}
	if len(fault) > 0 {
		msgs = append(msgs, fmt.Sprintf("ENGINE FAULT: the engine zeroed examples other than the canary as non-finite for %s: one record reached the other rows of its physical batch, so it moves the clipped sum by more than the clip norm", strings.Join(fault, "; ")))
	}
	if len(msgs) > 0 {
		return errors.New(strings.Join(msgs, ". "))
	}
	return nil
}

// auditTable prints the human table.
func auditTable(w io.Writer, results []*audit.Result) {
	if len(results) == 0 {
		return
	}
	r0 := results[0]
	fmt.Fprintf(w, "Empirical privacy audit: %d trainings per world, threat %s, n = %d, batch %d, %s, δ = %g, %.0f%% confidence\n\n", r0.Runs, r0.Threat, r0.N, r0.Batch, r0.Dtype, r0.Delta, 100*r0.Confidence)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "sampler\tcanary\tσ\tsteps\taccountant\tε accountant\tε empirical\tinterval\tlower bound (Chua et al.)\truns/s\tstatus")
	num := func(v float64) string {
		switch {
		case math.IsNaN(v):
			return "-"
		case math.IsInf(v, 1):
			return "∞"
		}
		return fmt.Sprintf("%.3f", v)
	}
	for _, r := range results {
		status := "ok"
		if r.Violation {
			status = "VIOLATION"
		}
		if r.Unclipped > 0 {
			status += fmt.Sprintf(" (%d unclipped steps)", r.Unclipped)
		}
		if r.Collateral > 0 {
			status += fmt.Sprintf(" (ENGINE FAULT: %d collateral)", r.Collateral)
		}
		canary := r.Canary
		if r.CanaryRow != "" {
			canary += "/" + r.CanaryRow
		}
		fmt.Fprintf(tw, "%s\t%s\t%.4g\t%d\t%s\t%s\t%s\t[%s, %s]\t%s\t%.0f\t%s\n", r.Sampler, canary, r.Sigma, r.Steps, r.Accountant,
			num(r.EpsilonAccountant), num(r.Empirical.Point), num(r.Empirical.Low), num(r.Empirical.High), num(r.EpsilonLowerBound), r.RunsPerSecond, status)
	}
	_ = tw.Flush()
	for _, r := range results {
		if r.Sampler == "shuffle" && !audit.IsAdversarial(r.Canary) && r.EpsilonLowerBound > 0 && !math.IsInf(r.EpsilonLowerBound, 0) {
			fmt.Fprintf(w, "\nshuffle: the empirical ε is %.0f%% of Chua et al.'s lower bound (its interval's lower end %.0f%%); the true ε lies between the lower bound and the accountant's.\n",
				100*r.Empirical.Point/r.EpsilonLowerBound, 100*r.Empirical.Low/r.EpsilonLowerBound)
		}
	}
}
