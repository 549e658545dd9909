package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/personalized"
)

// persHeader is the --help text of dpsgd account --mechanism personalized.
const persHeader = `Usage: dpsgd account --mechanism personalized [flags]

Per-client noise for a personal budget (the personalized-DP FL appendix; docs/accounting.md).
A run makes T = K·R draws (--draws); the client is chosen with probability q (--sample-rate)
per draw. Lemma 1 bounds how often it is chosen, exceeded with probability at most δ'''
(--delta-tail): the appendix's logistic approximation and the exact binomial quantile, the
larger of the two used. Two calibrations are reported: the appendix's classic-Gaussian one
(proven only for ε < 1 and one noisy release per participation) and the tight GDP one, the
default (valid at every ε). The run must retire the client after rounds_bound selections;
δ_total = δ' + δ''' − δ'·δ''' is the δ when that is not enforced.

Required: --epsilon, --sample-rate, --draws, --local-examples.`

// persFlags are the flags of dpsgd account --mechanism personalized.
type persFlags struct {
	mechanism, perturbation      string
	epsilon, deltaPrime, delta3  float64
	sampleRate, clip, sens, k    float64
	draws, localExamples, locals int
	jsonOut                      bool
	set                          map[string]bool
}

// persReport is the JSON object of dpsgd account --mechanism personalized.
// The keys rounds_bound, rounds_bound_logistic, rounds_bound_exact,
// sigma_seed, sigma_gdp and delta_total are a contract
// (TestAccountPersonalizedContract).
type persReport struct {
	Mechanism          string  `json:"mechanism"`
	Epsilon            float64 `json:"epsilon"`
	DeltaPrime         float64 `json:"delta_prime"`
	DeltaTail          float64 `json:"delta_tail"`
	SampleRate         float64 `json:"sample_rate"`
	Draws              int     `json:"draws"`
	Clip               float64 `json:"clip"`
	LocalExamples      int     `json:"local_examples"`
	SensitivityFactor  float64 `json:"sensitivity_factor"`
	LocalSteps         int     `json:"local_steps"`
	K                  float64 `json:"k"`
	Perturbation       string  `json:"perturbation"`
	Releases           int     `json:"releases_per_selection"`
	RoundsBound        int     `json:"rounds_bound"`
	RoundsBoundLogist  float64 `json:"rounds_bound_logistic"`
	RoundsBoundExact   int     `json:"rounds_bound_exact"`
	Sensitivity        float64 `json:"sensitivity"`
	SigmaSeed          float64 `json:"sigma_seed"`
	SeedValid          bool    `json:"seed_valid"`
	SeedDelta          float64 `json:"seed_delta"`
	SigmaGDP           float64 `json:"sigma_gdp"`
	Multiplier         float64 `json:"multiplier"`
	Mu                 float64 `json:"mu"`
	Sigma              float64 `json:"sigma"`
	Default            string  `json:"default"`
	DeltaTotal         float64 `json:"delta_total"`
	LogisticUndershoot bool    `json:"logistic_undershoots"`
	Note               string  `json:"note"`
}

// accountPersonalized runs dpsgd account --mechanism personalized; args are
// the arguments after "account", --mechanism personalized included.
func accountPersonalized(args []string, stdout io.Writer) error {
	f := &persFlags{}
	fs := newFlagSet("dpsgd account --mechanism personalized")
	fs.StringVar(&f.mechanism, "mechanism", "personalized", "noise mechanism: personalized")
	fs.Var(realFlag{&f.epsilon}, "epsilon", "the client's ε > 0 (required)")
	f.deltaPrime, f.delta3 = 1e-5, 1e-5
	fs.Var(realFlag{&f.deltaPrime}, "delta-prime", "δ' in (0, 1): the Gaussian mechanism's δ (default 1e-5)")
	fs.Var(realFlag{&f.delta3}, "delta-tail", "δ''' in (0, 1): probability that the client is chosen more than the bound (default 1e-5)")
	fs.Var(realFlag{&f.sampleRate}, "sample-rate", "q in (0, 1]: probability that one draw chooses the client (required)")
	fs.Var(countFlag{&f.draws, 1}, "draws", "T = K·R ≥ 1: draws in the whole run, K clients in each of R rounds (required; at most 2^40)")
	f.clip = 1
	fs.Var(realFlag{&f.clip}, "clip", "clipping norm C > 0 (default 1)")
	fs.Var(countFlag{&f.localExamples, 1}, "local-examples", "m ≥ 1: examples averaged in one client update; sensitivity 2·C·s/m (required)")
	f.sens = 1
	fs.Var(realFlag{&f.sens}, "sensitivity-factor", "the client's sensitivity factor s > 0 (default 1)")
	f.locals = 1
	fs.Var(countFlag{&f.locals, 1}, "local-steps", "I ≥ 1 local steps per selection (default 1)")
	f.k = personalized.DefaultK
	fs.Var(realFlag{&f.k}, "k", "k > 0, the constant of the logistic approximation of Φ in Lemma 1 (default 1.702)")
	fs.StringVar(&f.perturbation, "perturbation", "gradient", "gradient (noise on each of the I local steps) or output (noise once on the update)")
	fs.BoolVar(&f.jsonOut, "json", false, "print one JSON object on stdout")
	var err error
	if f.set, err = parseFlags(fs, args, stdout, persHeader); err != nil {
		return err // pflag.ErrHelp after --help: report exits 0
	}
	client, setting, err := f.resolve()
	if err != nil {
		return err
	}
	rb, err := personalized.SelectionBound(setting.Draws, client.SampleRate, client.DeltaTail, setting.K)
	if err != nil {
		return usageError{err}
	}
	if rb.Used == 0 {
		return usagef("--delta-tail %v: with --sample-rate %v and --draws %d the selection bound is 0 (the client would never take part); want a smaller --delta-tail",
			f.delta3, f.sampleRate, f.draws)
	}
	cal, err := personalized.Calibrate(client, setting)
	if err != nil {
		if errors.Is(err, privacy.ErrInvalidArgument) || errors.Is(err, privacy.ErrUnreachable) {
			return usageError{err}
		}
		return err
	}
	rep := persMakeReport(f, setting, cal)
	if f.jsonOut {
		return printJSON(stdout, rep)
	}
	persPrint(stdout, rep)
	return nil
}

// resolve checks the flags and builds the client and the setting.
func (f *persFlags) resolve() (personalized.Client, personalized.Setting, error) {
	var c personalized.Client
	var s personalized.Setting
	if f.mechanism != "personalized" {
		return c, s, usagef("--mechanism %q: this subcommand handles personalized", f.mechanism)
	}
	var missing []string
	for _, name := range []string{"epsilon", "sample-rate", "draws", "local-examples"} {
		if !f.set[name] {
			missing = append(missing, "--"+name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return c, s, usagef("--mechanism personalized needs %s", strings.Join(missing, ", "))
	}
	switch {
	case !(f.epsilon > 0):
		return c, s, usagef("--epsilon %v: out of range (0, +Inf)", f.epsilon)
	case !(f.deltaPrime > 0 && f.deltaPrime < 1):
		return c, s, usagef("--delta-prime %v: out of range (0, 1)", f.deltaPrime)
	case !(f.delta3 > 0 && f.delta3 < 1):
		return c, s, usagef("--delta-tail %v: out of range (0, 1)", f.delta3)
	case !(f.sampleRate > 0 && f.sampleRate <= 1):
		return c, s, usagef("--sample-rate %v: out of range (0, 1]", f.sampleRate)
	case f.draws > personalized.MaxDraws:
		return c, s, usagef("--draws %d: out of range [1, 2^40]", f.draws)
	case !(f.clip > 0):
		return c, s, usagef("--clip %v: out of range (0, +Inf)", f.clip)
	case !(f.sens > 0):
		return c, s, usagef("--sensitivity-factor %v: out of range (0, +Inf)", f.sens)
	case !(f.k > 0):
		return c, s, usagef("--k %v: out of range (0, +Inf)", f.k)
	}
	switch f.perturbation {
	case "gradient":
		s.Perturbation = personalized.Gradient
	case "output":
		s.Perturbation = personalized.Output
	default:
		return c, s, usagef("--perturbation %q: want gradient or output", f.perturbation)
	}
	c = personalized.Client{Epsilon: f.epsilon, DeltaPrime: f.deltaPrime, DeltaTail: f.delta3, SampleRate: f.sampleRate, Sensitivity: f.sens}
	s.Draws, s.Clip, s.LocalExamples, s.LocalSteps, s.K = f.draws, f.clip, f.localExamples, f.locals, f.k
	return c, s, nil
}

// persMakeReport assembles the report of one calibration.
func persMakeReport(f *persFlags, s personalized.Setting, cal personalized.Calibration) *persReport {
	r := &persReport{
		Mechanism: "personalized", Epsilon: f.epsilon, DeltaPrime: f.deltaPrime, DeltaTail: f.delta3,
		SampleRate: f.sampleRate, Draws: f.draws, Clip: f.clip, LocalExamples: f.localExamples,
		SensitivityFactor: f.sens, LocalSteps: f.locals, K: f.k, Perturbation: s.Perturbation.String(),
		Releases:    cal.Releases,
		RoundsBound: cal.Rounds.Used, RoundsBoundLogist: cal.Rounds.Logistic, RoundsBoundExact: cal.Rounds.Exact,
		Sensitivity: cal.Sensitivity, SigmaSeed: cal.SigmaSeed, SeedValid: cal.SeedValid, SeedDelta: cal.SeedDelta,
		SigmaGDP: cal.SigmaGDP, Multiplier: cal.Multiplier, Mu: cal.Mu, Sigma: cal.SigmaGDP, Default: "gdp",
		DeltaTotal:         cal.DeltaTotal,
		LogisticUndershoot: math.Ceil(cal.Rounds.Logistic) < float64(cal.Rounds.Exact),
	}
	notes := []string{"default: sigma_gdp (tight, exact GDP composition of rounds_bound × releases Gaussian releases; valid at every ε)"}
	if r.SeedValid {
		notes = append(notes, "sigma_seed is proven here (ε < 1, one release per selection) but larger")
	} else {
		why := "ε ≥ 1"
		if cal.Releases > 1 {
			why = fmt.Sprintf("%d noisy releases per selection, the appendix's formula counts one", cal.Releases)
		}
		notes = append(notes, fmt.Sprintf("sigma_seed is NOT proven here (%s); its exact δ at ε is %.3g", why, cal.SeedDelta))
	}
	if r.LogisticUndershoot {
		notes = append(notes, "the appendix's logistic bound alone undershoots the exact quantile here")
	}
	notes = append(notes, fmt.Sprintf("retire the client after %d selections; delta_total applies only if that is not enforced", cal.Rounds.Used))
	r.Note = strings.Join(notes, "; ")
	return r
}

// persPrint writes the text report.
func persPrint(w io.Writer, r *persReport) {
	fmt.Fprintf(w, "client      ε = %g, δ' = %.3g, δ''' = %.3g, q = %.6g, s = %g\n", r.Epsilon, r.DeltaPrime, r.DeltaTail, r.SampleRate, r.SensitivityFactor)
	fmt.Fprintf(w, "run         T = %d draws, C = %g, m = %d, %s perturbation, I = %d local steps (%d noisy releases per selection)\n",
		r.Draws, r.Clip, r.LocalExamples, r.Perturbation, r.LocalSteps, r.Releases)
	fmt.Fprintf(w, "selections  R = %d (logistic %.6g with k = %g, exact binomial quantile %d)\n", r.RoundsBound, r.RoundsBoundLogist, r.K, r.RoundsBoundExact)
	fmt.Fprintf(w, "sensitivity S = 2·C·s/m = %.6g\n", r.Sensitivity)
	fmt.Fprintf(w, "σ (GDP)     %.6g = %.6g·S, μ = %.6g   [default]\n", r.SigmaGDP, r.Multiplier, r.Mu)
	valid := "proven"
	if !r.SeedValid {
		valid = "NOT proven"
	}
	fmt.Fprintf(w, "σ (seed)    %.6g, %s (exact δ at ε: %.3g)\n", r.SigmaSeed, valid, r.SeedDelta)
	fmt.Fprintf(w, "δ total     δ' + δ''' − δ'·δ''' = %.6g\n", r.DeltaTotal)
	fmt.Fprintf(w, "note: %s\n", r.Note)
}
