package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"time"

	"github.com/dpsgd/dpsgd"
	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/engine/sampler"
	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/accounting"
	"gonum.org/v1/gonum/stat"
)

// ErrInvalid is wrapped by every error about a configuration outside its valid range, and by
// a sampler paired with an accountant that is not a proven (ε, δ) guarantee for it. An
// unreachable target wraps privacy.ErrUnreachable instead.
var ErrInvalid = errors.New("bench: invalid configuration")

// DefaultSamplers returns the four samplers a comparison runs by default, in report order.
func DefaultSamplers() []string {
	return []string{privacy.SamplerShuffle, privacy.SamplerPoisson, privacy.SamplerPoissonTruncated, privacy.SamplerAllocation}
}

// NewSampler builds the sampler name over n examples with expected batch size batch and the
// accounting.Spec (σ left 0) of its accountant method ("" is the sampler's default), exactly
// as `dpsgd train --sampler name --accountant method` does: dpsgd.Plan.NewSampler, the front
// door's. The method must be a guarantee giving (ε, δ) for the sampler: total-variation-only
// accountants (chisq, berry-esseen), approximations, lower bounds and Poisson accounting
// applied to another sampler are refused with an error wrapping ErrInvalid.
func NewSampler(name, method string, n, batch int, seed uint64) (sampler.Sampler, accounting.Spec, error) {
	smp, spec, err := dpsgd.Plan{Sampler: dpsgd.Sampler(name), BatchSize: batch, Accountant: method, Seed: seed}.NewSampler(n)
	if err != nil {
		return nil, spec, planErr(fmt.Sprintf("sampler %s with accountant %s", name, method), err)
	}
	return smp, spec, nil
}

// planErr is err of the front door about what, made bench's: a refused plan wraps ErrInvalid.
func planErr(what string, err error) error {
	if errors.Is(err, dpsgd.ErrInvalid) {
		return fmt.Errorf("bench: %s: %w: %w", what, err, ErrInvalid)
	}
	return fmt.Errorf("bench: %s: %w", what, err)
}

// SamplersConfig is one sampler comparison.
type SamplersConfig struct {
	Dataset, Model string // names, for the report
	Train, Test    *datasets.Dataset
	// Engine is the training configuration shared by every run (Arch, Dtype, PhysicalBatch,
	// Replicas, Epochs, Clip, Optimizer, ...); Sigma, Seed and NonPrivate are set per run.
	Engine    engine.Config
	BatchSize int // expected (logical) batch size
	// Samplers to compare; nil: DefaultSamplers(). Accountants maps a sampler to its accountant
	// method; a sampler not in it gets its default (the tightest proven one).
	Samplers    []string
	Accountants map[string]string
	Targets     []float64 // target ε of each cell, each > 0
	Delta       float64   // δ of every target and of the reported ε, in (0, 1)
	Seeds       []uint64  // one training run per seed and cell
	// PrivacyEpochs and PrivacySigma set the privacy-only comparison: ε after epochs
	// 1..PrivacyEpochs at noise multiplier PrivacySigma, without training.
	PrivacyEpochs int
	PrivacySigma  float64
	// SigmaTolerance is the relative tolerance of the σ calibration: 0 is
	// accounting.SolveSigma's (1e-4), exactly what dpsgd train does; a larger value (for
	// example 1e-2, for quick runs) needs fewer accountant evaluations. σ is always rounded up,
	// so the target is met either way.
	SigmaTolerance float64
	// Command and Quick are recorded in the report.
	Command string
	Quick   bool
}

// Progress receives the comparison's events, all from the calling goroutine.
type Progress interface {
	// Calibrated is called after σ of a cell is known, before any training.
	Calibrated(c Cell)
	// RunStart is called before training run i (1-based) of total; the returned
	// engine.Progress receives that run's steps and epochs (nil: none).
	RunStart(i, total int, r Run) engine.Progress
	// RunDone is called after the run.
	RunDone(r Run)
}

// NopProgress ignores every event.
type NopProgress struct{}

// Calibrated does nothing.
func (NopProgress) Calibrated(Cell) {}

// RunStart returns engine.NopProgress.
func (NopProgress) RunStart(int, int, Run) engine.Progress { return engine.NopProgress{} }

// RunDone does nothing.
func (NopProgress) RunDone(Run) {}

// Run is one training run. Values are rounded by Round.
type Run struct {
	Sampler       string   `json:"sampler"`
	Accountant    string   `json:"accountant"`
	Adjacency     string   `json:"adjacency"`
	TargetEpsilon float64  `json:"target_epsilon"`
	Delta         float64  `json:"delta"`
	Seed          uint64   `json:"seed"`
	Sigma         float64  `json:"sigma"`
	Epsilon       *float64 `json:"epsilon"` // spent, from the accountant; null if none
	TestAccuracy  float64  `json:"test_accuracy"`
	// ExamplesPerSecond is the training throughput: examples over the time spent in training
	// steps (the per-epoch privacy check and the evaluation excluded); WallExamplesPerSecond
	// is engine.Result's, over the whole run.
	ExamplesPerSecond     float64 `json:"examples_per_second"`
	WallExamplesPerSecond float64 `json:"wall_examples_per_second"`
	// SecondsPerEpoch is the wall time of an epoch, privacy check and evaluation included.
	SecondsPerEpoch float64 `json:"seconds_per_epoch"`
	Seconds         float64 `json:"seconds"`
	EpochsRun       int     `json:"epochs_run"`
	Steps           int     `json:"steps"`
	StoppedByBudget bool    `json:"stopped_by_budget"`
}

// Cell aggregates the runs of one sampler at one target. Values are rounded by Round.
type Cell struct {
	Sampler            string   `json:"sampler"`
	Accountant         string   `json:"accountant"`
	Adjacency          string   `json:"adjacency"`
	TargetEpsilon      float64  `json:"target_epsilon"`
	Delta              float64  `json:"delta"`
	Sigma              float64  `json:"sigma"`
	CalibrationSeconds float64  `json:"calibration_seconds"`
	Runs               int      `json:"runs"`
	EpsilonSpent       *float64 `json:"epsilon_spent"` // largest over the runs
	AccuracyMean       float64  `json:"accuracy_mean"`
	AccuracySD         float64  `json:"accuracy_sd"` // sample standard deviation; 0 for one run
	ExamplesPerSecond  float64  `json:"examples_per_second"`
	ExamplesPerSecSD   float64  `json:"examples_per_second_sd"`
	// WallExamplesPerSecond is the mean of the runs' WallExamplesPerSecond.
	WallExamplesPerSecond float64 `json:"wall_examples_per_second"`
	SecondsPerEpoch       float64 `json:"seconds_per_epoch"`
}

// SamplersResult is everything a comparison measured.
type SamplersResult struct {
	Dataset       string            `json:"dataset"`
	Model         string            `json:"model"`
	Arch          string            `json:"arch"`
	Params        int               `json:"params"`
	TrainExamples int               `json:"train_examples"`
	TestExamples  int               `json:"test_examples"`
	BatchSize     int               `json:"batch_size"`
	Epochs        int               `json:"epochs"`
	Clip          float64           `json:"clip"`
	Optimizer     string            `json:"optimizer"`
	LR            float64           `json:"lr"`
	Delta         float64           `json:"delta"`
	Targets       []float64         `json:"targets"`
	Seeds         []uint64          `json:"seeds"`
	Samplers      []string          `json:"samplers"`
	Quick         bool              `json:"quick"`
	Command       string            `json:"command,omitempty"`
	Date          string            `json:"date"`
	Machine       string            `json:"machine"`
	Seconds       float64           `json:"seconds"`
	Cells         []Cell            `json:"cells"`
	Runs          []Run             `json:"runs"`
	Privacy       PrivacyComparison `json:"privacy"`
}

// Validate checks every field against its valid range.
func (c *SamplersConfig) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("bench: "+format+": %w", append(args, ErrInvalid)...)
	}
	if c.Train == nil || c.Train.N < 1 {
		return bad("training set: want at least one example")
	}
	if c.Test == nil {
		return bad("test set: want a dataset (it may be empty)")
	}
	if c.BatchSize < 1 || c.BatchSize > c.Train.N {
		return bad("batch size %d: want a value in [1, %d] (the training examples)", c.BatchSize, c.Train.N)
	}
	if c.Engine.Epochs < 1 {
		return bad("epochs %d: want ≥ 1", c.Engine.Epochs)
	}
	if len(c.Targets) == 0 {
		return bad("targets: want at least one ε")
	}
	for _, t := range c.Targets {
		if !(t > 0) || math.IsInf(t, 0) {
			return bad("target ε %v: want a finite value > 0", t)
		}
	}
	if !(c.Delta > 0 && c.Delta < 1) {
		return bad("delta %v: want a value in (0, 1)", c.Delta)
	}
	if len(c.Seeds) == 0 {
		return bad("seeds: want at least one")
	}
	seen := map[uint64]bool{}
	for _, s := range c.Seeds {
		if seen[s] {
			return bad("seed %d given twice: want distinct seeds", s)
		}
		seen[s] = true
	}
	if len(c.Samplers) == 0 {
		c.Samplers = DefaultSamplers()
	}
	names := map[string]bool{}
	for _, s := range c.Samplers {
		if names[s] {
			return bad("sampler %s given twice", s)
		}
		names[s] = true
	}
	for s := range c.Accountants {
		if !names[s] {
			return bad("accountant given for sampler %q, which is not compared (samplers: %s)", s, strings.Join(c.Samplers, ", "))
		}
	}
	if c.PrivacyEpochs < 1 || c.PrivacyEpochs > 10000 {
		return bad("privacy epochs %d: want a value in [1, 10000]", c.PrivacyEpochs)
	}
	if !(c.PrivacySigma > 0) || math.IsInf(c.PrivacySigma, 0) {
		return bad("privacy σ %v: want a finite value > 0", c.PrivacySigma)
	}
	if !(c.SigmaTolerance >= 0 && c.SigmaTolerance <= 0.1) {
		return bad("σ tolerance %v: want a value in [0, 0.1]", c.SigmaTolerance)
	}
	return nil
}

// safe runs f, turning a panic inside an accountant (or inside training, where the engine asks
// the accountant before every epoch) into an error naming what was run, so that the comparison
// stops with a message instead of a crash.
func safe[T any](what string, f func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("bench: %s: internal error (panic): %v", what, r)
		}
	}()
	return f()
}

// solveSigma is accounting.SolveSigma for rel = 0, otherwise accounting.SolveSigmaTol; ctx
// stops it.
func solveSigma(ctx context.Context, spec accounting.Spec, steps int, target privacy.Budget, rel float64) (float64, error) {
	return accounting.SolveSigmaCtx(ctx, spec, steps, target, rel, nil)
}

// plan is the front door's plan of one run of the comparison: sampler name at target ε with
// σ (0: calibrated to the target) and seed.
func (cfg *SamplersConfig) plan(name string, target, sigma float64, seed uint64) dpsgd.Plan {
	return dpsgd.Plan{Sampler: dpsgd.Sampler(name), BatchSize: cfg.BatchSize, Epochs: cfg.Engine.Epochs, Clip: cfg.Engine.Clip,
		Sigma: sigma, TargetEpsilon: target, Delta: cfg.Delta, Accountant: cfg.Accountants[name], Seed: seed}
}

// calibrate returns σ for each sampler and target of cfg, from the sampler's own accountant
// (the front door's calibration over Epochs × StepsPerEpoch steps, to cfg.SigmaTolerance),
// without training. An unreachable target is an error wrapping privacy.ErrUnreachable that
// names the target and the sampler.
func calibrate(ctx context.Context, cfg *SamplersConfig, prog Progress) ([]Cell, error) {
	opt := &dpsgd.Options{Solve: func(ctx context.Context, spec accounting.Spec, steps int, b privacy.Budget) (float64, error) {
		return solveSigma(ctx, spec, steps, b, cfg.SigmaTolerance)
	}}
	var cells []Cell
	for _, name := range cfg.Samplers {
		method := cfg.Accountants[name]
		if method == "" {
			method = accounting.DefaultMethod(name)
		}
		if _, _, err := NewSampler(name, cfg.Accountants[name], cfg.Train.N, cfg.BatchSize, cfg.Seeds[0]); err != nil {
			return nil, err
		}
		for _, target := range cfg.Targets {
			t0 := time.Now()
			what := fmt.Sprintf("sampler %s with accountant %s, target (ε = %g, δ = %g) over %d epochs", name, method, target, cfg.Delta, cfg.Engine.Epochs)
			priv, err := safe(what, func() (*dpsgd.Private, error) {
				return cfg.plan(name, target, 0, cfg.Seeds[0]).Resolve(ctx, cfg.Train.N, cfg.Engine.Arch, opt)
			})
			if err != nil {
				if errors.Is(err, privacy.ErrUnreachable) {
					return nil, fmt.Errorf("bench: target ε = %g (δ = %g) unreachable for sampler %s (accountant %s) over %d epochs: no σ in [%g, %g] meets it: %w",
						target, cfg.Delta, name, method, cfg.Engine.Epochs, accounting.SigmaMin, accounting.SigmaMax, err)
				}
				return nil, planErr("calibrating "+what, err)
			}
			c := Cell{Sampler: name, Accountant: priv.Spec.Method, Adjacency: priv.Accountant.Adjacency(), TargetEpsilon: target,
				Delta: cfg.Delta, Sigma: priv.Sigma, CalibrationSeconds: time.Since(t0).Seconds()}
			prog.Calibrated(c)
			cells = append(cells, c)
		}
	}
	return cells, nil
}

// Samplers runs the comparison: calibrates σ for every cell (all before any training, so an
// unreachable target fails at once), computes the privacy-only curves, then trains one run per
// seed and cell through the front door (dpsgd.Private.Train) under the cell's budget. The
// result is rounded (Round).
func Samplers(ctx context.Context, cfg SamplersConfig, prog Progress) (*SamplersResult, error) {
	start := time.Now()
	if prog == nil {
		prog = NopProgress{}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cells, err := calibrate(ctx, &cfg, prog)
	if err != nil {
		return nil, err
	}
	pc, err := PrivacyCurves(PrivacyConfig{Samplers: cfg.Samplers, Accountants: cfg.Accountants,
		Sigma: cfg.PrivacySigma, Delta: cfg.Delta, Epochs: cfg.PrivacyEpochs, DatasetSize: cfg.Train.N, BatchSize: cfg.BatchSize})
	if err != nil {
		return nil, err
	}
	res := &SamplersResult{
		Dataset: cfg.Dataset, Model: cfg.Model, Arch: archString(cfg.Engine), Params: cfg.Engine.Arch.NumParams(),
		TrainExamples: cfg.Train.N, TestExamples: cfg.Test.N, BatchSize: cfg.BatchSize, Epochs: cfg.Engine.Epochs,
		Clip: cfg.Engine.Clip, Optimizer: cfg.Engine.Optimizer.Name, LR: cfg.Engine.Optimizer.LR,
		Delta: cfg.Delta, Targets: cfg.Targets, Seeds: cfg.Seeds, Samplers: cfg.Samplers, Quick: cfg.Quick,
		Command: cfg.Command, Date: start.UTC().Format(time.RFC3339), Machine: Machine(), Privacy: *pc,
	}
	total := len(cells) * len(cfg.Seeds)
	i := 0
	for _, c := range cells {
		var runs []Run
		for _, seed := range cfg.Seeds {
			i++
			r, err := trainOne(ctx, &cfg, c, seed, i, total, prog)
			if err != nil {
				return nil, err
			}
			runs = append(runs, r)
		}
		res.Runs = append(res.Runs, runs...)
		res.Cells = append(res.Cells, aggregate(c, runs))
	}
	res.Seconds = time.Since(start).Seconds()
	Round(res)
	return res, nil
}

// trainOne trains the run of plan p with seed.
func trainOne(ctx context.Context, cfg *SamplersConfig, c Cell, seed uint64, i, total int, prog Progress) (Run, error) {
	r := Run{Sampler: c.Sampler, Accountant: c.Accountant, Adjacency: c.Adjacency, TargetEpsilon: c.TargetEpsilon,
		Delta: c.Delta, Seed: seed, Sigma: c.Sigma}
	// The cell's σ given and its target the budget: the run the calibration planned, with this
	// seed's sampler.
	priv, err := cfg.plan(c.Sampler, c.TargetEpsilon, c.Sigma, seed).Resolve(ctx, cfg.Train.N, cfg.Engine.Arch, nil)
	if err != nil {
		return r, planErr(fmt.Sprintf("sampler %s with seed %d", c.Sampler, seed), err)
	}
	ec := cfg.Engine
	ec.PhysicalBatch = min(max(ec.PhysicalBatch, 1), cfg.BatchSize)
	ep := prog.RunStart(i, total, r)
	if ep == nil {
		ep = engine.NopProgress{}
	}
	tm := &stepTimer{inner: ep}
	what := fmt.Sprintf("training %s at ε = %g with seed %d", c.Sampler, c.TargetEpsilon, seed)
	res, err := safe(what, func() (*engine.Result, error) { return priv.Train(ctx, ec, cfg.Train, cfg.Test, tm) })
	if err != nil {
		return r, fmt.Errorf("bench: %s: %w", what, err)
	}
	if !math.IsNaN(res.Epsilon) && !math.IsInf(res.Epsilon, 0) {
		e := res.Epsilon
		r.Epsilon = &e
	}
	r.TestAccuracy, r.WallExamplesPerSecond, r.Seconds = res.TestAccuracy, res.ExamplesPerSecond, res.Seconds
	r.ExamplesPerSecond = tm.throughput(res.ExamplesPerSecond)
	r.EpochsRun, r.Steps, r.StoppedByBudget = res.EpochsRun, res.Steps, res.StoppedByBudget
	if len(res.History) > 0 {
		s := 0.0
		for _, h := range res.History {
			s += h.Seconds
		}
		r.SecondsPerEpoch = s / float64(len(res.History))
	}
	prog.RunDone(r)
	return r, nil
}

// stepTimer passes the engine's events on and times the training steps: within an epoch, the
// time between consecutive Step events is one step (the privacy check runs before the first
// step and the evaluation after the last). The first step of each epoch is charged the mean
// of the others.
type stepTimer struct {
	inner     engine.Progress
	inEpoch   bool
	last      time.Time
	dur       time.Duration // sum of the timed intervals
	intervals int           // timed intervals
	steps     int           // steps seen
	examples  int
}

func (t *stepTimer) Start(total int) { t.inner.Start(total) }

func (t *stepTimer) Step(step int, st engine.StepStats, eps float64) {
	now := time.Now()
	if t.inEpoch {
		t.dur += now.Sub(t.last)
		t.intervals++
	}
	t.inEpoch, t.last = true, now
	t.steps++
	t.examples += st.BatchSize
	t.inner.Step(step, st, eps)
}

func (t *stepTimer) Epoch(e engine.EpochStats) {
	t.inEpoch = false
	t.inner.Epoch(e)
}

func (t *stepTimer) Finish() { t.inner.Finish() }

// throughput returns examples per second of training steps, or wall when no interval was timed
// (one step per epoch).
func (t *stepTimer) throughput(wall float64) float64 {
	if t.intervals == 0 || t.dur <= 0 {
		return wall
	}
	perStep := t.dur.Seconds() / float64(t.intervals)
	return float64(t.examples) / (perStep * float64(t.steps))
}

// aggregate fills the statistics of c from its runs.
func aggregate(c Cell, runs []Run) Cell {
	c.Runs = len(runs)
	acc := make([]float64, len(runs))
	eps := make([]float64, len(runs))
	spe, wall := 0.0, 0.0
	for i, r := range runs {
		acc[i], eps[i] = r.TestAccuracy, r.ExamplesPerSecond
		spe += r.SecondsPerEpoch
		wall += r.WallExamplesPerSecond
		if r.Epsilon != nil && (c.EpsilonSpent == nil || *r.Epsilon > *c.EpsilonSpent) {
			e := *r.Epsilon
			c.EpsilonSpent = &e
		}
	}
	c.AccuracyMean, c.AccuracySD = meanSD(acc)
	c.ExamplesPerSecond, c.ExamplesPerSecSD = meanSD(eps)
	c.SecondsPerEpoch = spe / float64(len(runs))
	c.WallExamplesPerSecond = wall / float64(len(runs))
	return c
}

// meanSD returns the mean and the sample standard deviation (0 for fewer than two values).
func meanSD(x []float64) (mean, sd float64) {
	if len(x) < 2 {
		return stat.Mean(x, nil), 0
	}
	return stat.MeanStdDev(x, nil)
}

// Machine describes the machine for the report: OS, architecture, CPUs and Go version.
func Machine() string {
	return fmt.Sprintf("%s/%s, %d CPUs (GOMAXPROCS %d), %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version())
}

// archString is the layer widths of cfg's model, e.g. "784-128-10".
func archString(cfg engine.Config) string {
	ls, err := cfg.Arch.Layers()
	if err != nil {
		return cfg.Arch.Kind
	}
	parts := []string{fmt.Sprint(cfg.Arch.InputSize())}
	for _, l := range ls {
		if l.Positions > 1 {
			parts = append(parts, fmt.Sprintf("conv%d", l.Out))
		} else {
			parts = append(parts, fmt.Sprint(l.Out))
		}
	}
	return cfg.Arch.Kind + " " + strings.Join(parts, "-")
}
