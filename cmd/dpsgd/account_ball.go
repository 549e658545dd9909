package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/dpsgd/dpsgd/engine/sampler"
	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/accounting"
	"github.com/dpsgd/dpsgd/privacy/ball"
)

// ballHeader is the --help text of dpsgd account --mechanism ball.
const ballHeader = `Usage: dpsgd account --mechanism ball [flags]

Noise drawn uniformly from the volume of a d-ball of radius r (perturbed gradient descent:
Tholeti, "On the differentially private nature of perturbed gradient descent") gives (0, δ)-DP
only: a step that uses the record has δ_step = I_{(Δ/2r)²}(1/2, (d+1)/2), Δ the distance
between the noised sums of neighbouring datasets. Without --sampler, Tholeti's Algorithm 1: one of N points (--dataset-size) drawn
per step, δ' = δ_step/N, T steps (--steps). With --sampler shuffle or allocation each epoch
is one (0, δ_step) mechanism; with poisson each step is (0, q·δ_step). delta_total composes
δ' exactly, 1 − (1 − δ')^k; delta_total_sum is Tholeti's k·δ'.

Required: --dim, and --distance or --clip.`

// ballFlags are the flags of dpsgd account --mechanism ball.
type ballFlags struct {
	mechanism, sampler, solve         string
	dim, datasetSize, batchSize       int
	steps, rounds                     int
	distance, clip, radius, delta, sr float64
	jsonOut                           bool
	set                               map[string]bool
}

// ballReport is the JSON object of dpsgd account --mechanism ball. The keys
// delta_step, delta_total and delta_total_sum are a contract
// (TestAccountBallContract); epsilon and delta give the statement, (0, delta_total).
type ballReport struct {
	Mechanism          string   `json:"mechanism"`
	Accountant         string   `json:"accountant"`
	Kind               string   `json:"kind"`
	Valid              bool     `json:"valid"`
	Sampler            string   `json:"sampler"`
	Adjacency          string   `json:"adjacency"`
	Dim                int      `json:"dim"`
	Distance           float64  `json:"distance"`
	Clip               *float64 `json:"clip,omitempty"`
	Radius             float64  `json:"radius"`
	DatasetSize        int      `json:"dataset_size"`
	Rounds             int      `json:"rounds,omitempty"`
	SampleRate         float64  `json:"sample_rate,omitempty"`
	Steps              int      `json:"steps"`
	Compositions       int      `json:"compositions"`
	DeltaStep          float64  `json:"delta_step"`
	DeltaStepAmplified float64  `json:"delta_step_amplified"`
	DeltaTotal         float64  `json:"delta_total"`
	DeltaTotalSum      float64  `json:"delta_total_sum"`
	Composition        string   `json:"composition"`
	Epsilon            float64  `json:"epsilon"`
	Delta              float64  `json:"delta"`
	Target             *float64 `json:"delta_target,omitempty"`
	Within             *bool    `json:"within_target,omitempty"`
	Solved             string   `json:"solved,omitempty"`
	Note               string   `json:"note"`
}

// accountBall runs dpsgd account --mechanism ball; args are the arguments
// after "account", --mechanism ball included.
func accountBall(args []string, stdout io.Writer) error {
	f, err := parseBallFlags(args, stdout)
	if err != nil {
		return err // pflag.ErrHelp after --help: report exits 0
	}
	cfg, err := f.config()
	if err != nil {
		return err
	}
	rep, err := f.report(cfg)
	if err != nil {
		return err
	}
	if f.jsonOut {
		return printJSON(stdout, rep)
	}
	printBall(stdout, rep)
	return nil
}

func parseBallFlags(args []string, stdout io.Writer) (*ballFlags, error) {
	f := &ballFlags{}
	fs := newFlagSet("dpsgd account --mechanism ball")
	fs.StringVar(&f.mechanism, "mechanism", "ball", "noise mechanism: ball")
	fs.Var(countFlag{&f.dim, 1}, "dim", "d, the dimension of the noise (the number of parameters)")
	fs.Var(realFlag{&f.distance}, "distance", "Δ ≥ 0, the largest distance between the noised sums of neighbouring datasets")
	fs.Var(realFlag{&f.clip}, "clip", "clipping norm C > 0 instead of --distance: Δ = C (shuffle, allocation, poisson) or 2C (Tholeti's sampling, replace one)")
	fs.Var(realFlag{&f.radius}, "radius", "r > 0, the radius of the ball, in the units of Δ (default 1)")
	fs.Var(countFlag{&f.datasetSize, 1}, "dataset-size", "N, the number of records (default 1: no amplification)")
	fs.Var(countFlag{&f.steps, 1}, "steps", "T, the steps taken (default 1)")
	fs.StringVar(&f.sampler, "sampler", "", "shuffle, allocation or poisson (default: Tholeti's one uniformly drawn example per step, \"uniform\")")
	fs.Var(countFlag{&f.batchSize, 1}, "batch-size", "shuffle, allocation, poisson: the (expected) batch size B, with --dataset-size")
	fs.Var(countFlag{&f.rounds, 1}, "rounds", "shuffle, allocation: M, steps per epoch (instead of --batch-size)")
	fs.Var(realFlag{&f.sr}, "sample-rate", "poisson: q in (0, 1] (instead of --batch-size)")
	fs.Var(realFlag{&f.delta}, "delta", "target total δ in (0, 1): report whether it is met, or the target of --solve radius")
	fs.StringVar(&f.solve, "solve", "", "radius: the smallest radius meeting --delta")
	fs.BoolVar(&f.jsonOut, "json", false, "print one JSON object on stdout")
	var err error
	if f.set, err = parseFlags(fs, args, stdout, ballHeader); err != nil {
		return nil, err
	}
	return f, nil
}

// config checks the flags and returns the accountant's configuration
// (Radius 0 when it is to be solved).
func (f *ballFlags) config() (ball.Config, error) {
	var cfg ball.Config
	if f.mechanism != accounting.MechanismBall {
		return cfg, usagef("--mechanism %q: want ball", f.mechanism)
	}
	if !f.set["dim"] {
		return cfg, usagef("give --dim (the dimension of the noise, in [1, %d])", ball.MaxDim)
	}
	if f.dim > ball.MaxDim {
		return cfg, usagef("--dim %d: out of range [1, %d]", f.dim, ball.MaxDim)
	}
	s := f.sampler
	if s == "" {
		s = ball.SamplerUniform
	}
	if ball.Adjacency(s) == "" {
		return cfg, usagef("--sampler %q: want one of %s", f.sampler, strings.Join(ball.Samplers(), ", "))
	}
	cfg = ball.Config{Sampler: s, Dim: f.dim, Radius: 1}
	switch {
	case f.set["distance"] && f.set["clip"]:
		return cfg, usagef("give --distance or --clip, not both")
	case f.set["distance"]:
		if !(f.distance >= 0) {
			return cfg, usagef("--distance %v: out of range [0, +Inf)", f.distance)
		}
		cfg.Distance = f.distance
	case f.set["clip"]:
		if !(f.clip > 0) {
			return cfg, usagef("--clip %v: out of range (0, +Inf)", f.clip)
		}
		d, err := ball.DistanceFor(s, f.clip)
		if err != nil {
			return cfg, usageError{err}
		}
		cfg.Distance = d
	default:
		return cfg, usagef("give --distance (Δ, in [0, +Inf)) or --clip (C, in (0, +Inf))")
	}
	if f.set["radius"] && !(f.radius > 0) {
		return cfg, usagef("--radius %v: out of range (0, +Inf)", f.radius)
	}
	if f.set["radius"] {
		cfg.Radius = f.radius
	}
	if f.set["delta"] && !(f.delta > 0 && f.delta < 1) {
		return cfg, usagef("--delta %v: out of range (0, 1)", f.delta)
	}
	switch f.solve {
	case "":
	case "radius":
		if !f.set["delta"] {
			return cfg, usagef("--solve radius needs a target --delta in (0, 1)")
		}
		if f.set["radius"] {
			return cfg, usagef("--solve radius: do not give --radius")
		}
		cfg.Radius = 0
	default:
		return cfg, usagef("--solve %q: want radius", f.solve)
	}
	n := 1
	if f.set["dataset-size"] {
		n = f.datasetSize
	}
	cfg.DatasetSize = n
	if err := f.geometry(&cfg, n); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// geometry sets the steps per epoch or the sampling rate of cfg's sampler.
func (f *ballFlags) geometry(cfg *ball.Config, n int) error {
	if f.set["batch-size"] && f.batchSize > n {
		return usagef("--batch-size %d: out of range [1, --dataset-size = %d]", f.batchSize, n)
	}
	switch cfg.Sampler {
	case ball.SamplerUniform:
		for _, name := range []string{"batch-size", "rounds", "sample-rate"} {
			if f.set[name] {
				return usagef("--%s applies to --sampler shuffle, allocation or poisson; Tholeti's sampling draws one example per step", name)
			}
		}
	case privacy.SamplerPoisson:
		switch {
		case f.set["rounds"]:
			return usagef("--rounds applies to shuffle and allocation; Poisson sampling uses --sample-rate or --batch-size")
		case f.set["sample-rate"] && f.set["batch-size"]:
			return usagef("give either --sample-rate or --batch-size with --dataset-size, not both")
		case f.set["sample-rate"]:
			if !(f.sr > 0 && f.sr <= 1) {
				return usagef("--sample-rate %v: out of range (0, 1]", f.sr)
			}
			cfg.SampleRate = f.sr
		case f.set["batch-size"] && f.set["dataset-size"]:
			cfg.SampleRate = float64(f.batchSize) / float64(n)
		default:
			return usagef("--sampler poisson needs --sample-rate, or --batch-size with --dataset-size")
		}
	default: // shuffle, allocation
		switch {
		case f.set["sample-rate"]:
			return usagef("--sample-rate applies to Poisson sampling; --sampler %s uses --rounds or --batch-size", cfg.Sampler)
		case f.set["rounds"] && f.set["batch-size"]:
			return usagef("give either --rounds or --batch-size with --dataset-size, not both")
		case f.set["rounds"]:
			cfg.StepsPerEpoch = f.rounds
		case f.set["batch-size"] && f.set["dataset-size"] && cfg.Sampler == privacy.SamplerShuffle:
			cfg.StepsPerEpoch = sampler.ShuffleSteps(n, f.batchSize)
		case f.set["batch-size"] && f.set["dataset-size"]:
			cfg.StepsPerEpoch = sampler.AllocationSteps(n, f.batchSize)
		default:
			return usagef("--sampler %s needs --rounds, or --batch-size with --dataset-size", cfg.Sampler)
		}
	}
	return nil
}

// report evaluates the accountant of cfg (solving the radius first when
// cfg.Radius is 0).
func (f *ballFlags) report(cfg ball.Config) (*ballReport, error) {
	steps := 1
	if f.set["steps"] {
		steps = f.steps
	}
	rep := &ballReport{Mechanism: accounting.MechanismBall, Accountant: ball.Name, Kind: "guarantee", Valid: true,
		Sampler: cfg.Sampler, Adjacency: ball.Adjacency(cfg.Sampler), Dim: cfg.Dim, Distance: cfg.Distance,
		DatasetSize: cfg.DatasetSize, Steps: steps, Composition: ball.Exact.String()}
	if f.set["clip"] {
		rep.Clip = &f.clip
	}
	var notes []string
	eval := cfg
	if cfg.Radius == 0 {
		r, err := ball.SolveRadiusFor(cfg, steps, f.delta)
		if err != nil {
			return nil, ballError(err)
		}
		rep.Solved = "radius"
		cfg.Radius, eval.Radius = r, r
		if r == 0 {
			// Every radius meets the target; evaluate where the step δ is
			// largest (r ≤ Δ/2, or any r when Δ = 0).
			eval.Radius = 1
			if cfg.Distance > 0 {
				eval.Radius = cfg.Distance / 2
			}
			notes = append(notes, "every radius > 0 meets the target (radius 0 reported): the numbers are those of the smallest radii")
		}
	}
	rep.Radius = cfg.Radius
	acc, err := ball.NewAccountant(eval)
	if err != nil {
		return nil, ballError(err)
	}
	switch cfg.Sampler {
	case privacy.SamplerShuffle, privacy.SamplerAllocation:
		rep.Rounds = cfg.StepsPerEpoch
		notes = append(notes, fmt.Sprintf("each epoch (M = %d steps) is one (0, delta_step) mechanism: the record is in at most one step of it; a started epoch counts whole; no amplification claimed", cfg.StepsPerEpoch))
	case privacy.SamplerPoisson:
		rep.SampleRate = cfg.SampleRate
		notes = append(notes, "each step is (0, q·delta_step): the record is in it with probability q")
	default:
		notes = append(notes, "Tholeti's Algorithm 1: one of N points per step, delta_step_amplified = delta_step/N")
	}
	rep.DeltaStep = acc.StepDelta()
	rep.DeltaStepAmplified = acc.UnitDelta()
	rep.Compositions = acc.Units(steps)
	if rep.DeltaTotal, err = acc.DeltaTotal(steps); err != nil {
		return nil, ballError(err)
	}
	if rep.DeltaTotalSum, err = acc.DeltaTotalSum(steps); err != nil {
		return nil, ballError(err)
	}
	rep.Delta = rep.DeltaTotal
	notes = append(notes, "delta_total = 1 − (1 − delta_step_amplified)^compositions, the exact composition of (0, δ') mechanisms (Kairouz, Oh & Viswanath 2017, Thm 3.3 at ε = 0); delta_total_sum = min(1, compositions·delta_step_amplified) is Tholeti's Eq. 7",
		"the run is (0, delta_total)-DP and nothing more: with bounded noise no ε > 0 lowers δ")
	if f.set["delta"] {
		t := f.delta
		within := rep.DeltaTotal <= t
		rep.Target, rep.Within = &t, &within
	}
	rep.Note = strings.Join(notes, "; ")
	return rep, nil
}

// ballError maps bad input and unreachable targets to usage errors (exit 2).
func ballError(err error) error {
	if errors.Is(err, privacy.ErrInvalidArgument) || errors.Is(err, privacy.ErrUnreachable) {
		return usageError{err}
	}
	return err
}

func printBall(w io.Writer, r *ballReport) {
	fmt.Fprintf(w, "mechanism   ball (uniform in a d-ball), accountant %s: %s\n", r.Accountant, r.Kind)
	switch {
	case r.Rounds > 0:
		fmt.Fprintf(w, "sampler     %s, M = %d steps per epoch; %s adjacency\n", r.Sampler, r.Rounds, r.Adjacency)
	case r.SampleRate > 0:
		fmt.Fprintf(w, "sampler     %s, q = %.6g; %s adjacency\n", r.Sampler, r.SampleRate, r.Adjacency)
	default:
		fmt.Fprintf(w, "sampler     %s (one of N = %d points per step); %s adjacency\n", r.Sampler, r.DatasetSize, r.Adjacency)
	}
	fmt.Fprintf(w, "d = %d, Δ = %.6g, r = %.10g", r.Dim, r.Distance, r.Radius)
	if r.Solved != "" {
		fmt.Fprintf(w, "   [solved: %s]", r.Solved)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "δ per step = %.6g, per composed unit δ' = %.6g, %d units over %d steps\n", r.DeltaStep, r.DeltaStepAmplified, r.Compositions, r.Steps)
	fmt.Fprintf(w, "δ total = %.6g (exact composition); Tholeti's sum = %.6g\n", r.DeltaTotal, r.DeltaTotalSum)
	fmt.Fprintf(w, "the run is (0, %.6g)-DP", r.DeltaTotal)
	if r.Target != nil {
		verdict := "meets"
		if !*r.Within {
			verdict = "does NOT meet"
		}
		fmt.Fprintf(w, "; it %s the target δ = %.3g", verdict, *r.Target)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "note: %s\n", r.Note)
}
