package audit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dpsgd/dpsgd"
	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/engine/sampler"
	"github.com/dpsgd/dpsgd/internal/numeric"
	"github.com/dpsgd/dpsgd/internal/seedmix"
	"github.com/dpsgd/dpsgd/kernels"
	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/accounting"
	"github.com/dpsgd/dpsgd/privacy/shuffle"
	"gorgonia.org/tensor"
)

// Threat models: what the adversary sees.
const (
	// ThreatIterates releases every iterate θ_1, …, θ_T: the adversary that DP-SGD's
	// accountants bound (each noisy gradient is one composed mechanism).
	ThreatIterates = "iterates"
	// ThreatFinal releases only the final parameters θ_T.
	ThreatFinal = "final"
)

// Canary designs.
const (
	// CanaryIsolated: the canary alone uses the canary feature; the ordinary examples are
	// a learnable synthetic task on the other features.
	CanaryIsolated = "isolated"
	// CanaryOpposed (shuffle only): every ordinary example is a·e_{D−1} with label 1 and
	// pushes the canary coordinates the other way, the shuffle instance of Chua et
	// al. 2024.
	CanaryOpposed = "opposed"
)

// Samplers lists the samplers Run audits, as named by engine/sampler and the accountants.
func Samplers() []string {
	return []string{sampler.NameShuffle, sampler.NamePoisson, sampler.NameTruncatedPoisson, sampler.NameAllocation}
}

// Config is one audit: one sampler, one σ, Runs trainings per world.
type Config struct {
	Sampler string  // shuffle, poisson, poisson-truncated or allocation
	Sigma   float64 // noise multiplier the training uses (noise std σ·C), > 0
	Delta   float64 // δ of the ε comparison, in (0, 1); 0 = 1e-5
	Epochs  int     // epochs per training; 0 = 1
	Steps   int     // steps per training, when > 0 (the last epoch may be partial); 0 = Epochs·M
	// N is the dataset size including the canary's slot; 0 = 16, or 64 for the adversarial
	// designs (their signal, the ordinary examples missing from the canary's physical batch,
	// grows with the batch).
	N int
	// Batch is the batch size (shuffle) or expected batch size, and the engine's physical
	// batch size; 0 = 4, or N/4 for the adversarial designs (q = 1/4 either way).
	Batch      int
	Runs       int     // trainings per world (with and without the canary), ≥ 4; 0 = 1000
	Confidence float64 // confidence of the interval, in (0, 1); 0 = 0.95
	Threat     string  // ThreatIterates (default) or ThreatFinal
	// Canary is one of Canaries(): CanaryIsolated or CanaryOpposed, or an adversarial design
	// (CanaryNaN, CanaryInf, CanaryHugeLogit); "" is CanaryOpposed for shuffle and
	// CanaryIsolated otherwise.
	Canary string
	// CanaryRow places an adversarial canary (RowFirst or RowRandom); "" is RowRandom for
	// shuffle and RowFirst otherwise. It must be "" for the benign designs.
	CanaryRow string
	// Float32 trains in float32 (the engine's default dtype for `dpsgd train`) instead of
	// float64.
	Float32 bool
	Seed    uint64 // every run's sampler and noise streams derive from it
	Workers int    // trainings run at once, each an engine.Learner with one replica; 0 = GOMAXPROCS
	// Features is the number of ordinary features (the model has Features + 1 inputs); 0 = 4.
	Features int
	// Scale is a, the canary feature's value; 0 = 100. ρ = a/√(a²+1) of the clipped
	// gradient lies in the canary coordinates.
	Scale float64
	LR    float64 // SGD learning rate, constant; 0 = 1e-4 (small, so that the canary stays clipped)
	Clip  float64 // clip norm C; 0 = 1
	// Accountant, when set, replaces the sampler's default guarantee accountant at Sigma as
	// the claim the audit checks (for example the same accountant at another σ).
	Accountant privacy.Accountant
	// Progress, when set, is called after every training with the number done and the
	// total (2·Runs), from the worker goroutines one at a time.
	Progress func(done, total int)
}

// Result is one audit's outcome.
type Result struct {
	Sampler, Threat, Canary string
	CanaryRow               string // "" for the benign designs
	Dtype                   string // float64 or float32
	Accountant              string // the accountant's name
	Sigma, Delta            float64
	Epochs, StepsPerEpoch   int
	Steps                   int // T = Epochs · StepsPerEpoch
	N, Batch                int
	Runs                    int // per world
	Confidence              float64
	// EpsilonAccountant is the accountant's ε after Steps steps at Delta (+Inf where it
	// certifies none).
	EpsilonAccountant float64
	// Empirical is the measured test: Point, the interval [Low, High], the threshold and
	// the error counts on the evaluation half.
	Empirical Estimate
	// EpsilonLowerBound is, for shuffle, Chua et al.'s lower bound (2024,
	// privacy/shuffle) at (σ, M, Steps, Delta); NaN for the other samplers.
	EpsilonLowerBound float64
	// Violation is true when Empirical.Low > EpsilonAccountant: at the stated confidence
	// the mechanism is less private than the accountant claims, a bug.
	Violation bool
	// Unclipped counts the (run, step) pairs in which an example of the design was not
	// clipped, so that its push on the canary coordinates was below ρC: such steps weaken
	// the test, never its validity.
	Unclipped int
	// Collateral counts the examples other than the canary whose gradient the engine found
	// non-finite and zeroed (StepStats.NonFinite, less the canary's own), over all runs
	// and steps: records reaching across rows. A correct engine gives 0 with every design.
	Collateral int
	Seconds    float64
	// RunsPerSecond is trainings (both worlds) per second of wall time.
	RunsPerSecond float64
}

// withDefaults fills in the zero fields and validates every field, naming it and its range.
func (c Config) withDefaults() (Config, error) {
	setInt := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	setF := func(p *float64, v float64) {
		if *p == 0 {
			*p = v
		}
	}
	setF(&c.Delta, 1e-5)
	setInt(&c.Epochs, 1)
	if IsAdversarial(c.Canary) {
		setInt(&c.N, 64)
		setInt(&c.Batch, max(1, c.N/4))
	}
	setInt(&c.N, 16)
	setInt(&c.Batch, 4)
	setInt(&c.Runs, 1000)
	setF(&c.Confidence, 0.95)
	setInt(&c.Features, 4)
	setF(&c.Scale, 100)
	setF(&c.LR, 1e-4)
	setF(&c.Clip, 1)
	if c.Threat == "" {
		c.Threat = ThreatIterates
	}
	if c.Workers == 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	switch c.Sampler {
	case sampler.NameShuffle, sampler.NamePoisson, sampler.NameTruncatedPoisson, sampler.NameAllocation:
	default:
		return c, fmt.Errorf("audit: sampler %q: want one of %v", c.Sampler, Samplers())
	}
	if c.Canary == "" {
		c.Canary = CanaryIsolated
		if c.Sampler == sampler.NameShuffle {
			c.Canary = CanaryOpposed
		}
	}
	finitePos := func(name string, v float64) error {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("audit: %s = %v: want a finite value > 0", name, v)
		}
		return nil
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"sigma", c.Sigma}, {"scale", c.Scale}, {"lr", c.LR}, {"clip", c.Clip}} {
		if err := finitePos(f.name, f.v); err != nil {
			return c, err
		}
	}
	switch {
	case !(c.Delta > 0 && c.Delta < 1):
		return c, fmt.Errorf("audit: delta = %v: want a value in (0, 1)", c.Delta)
	case !(c.Confidence > 0 && c.Confidence < 1):
		return c, fmt.Errorf("audit: confidence = %v: want a value in (0, 1)", c.Confidence)
	case c.Epochs < 1:
		return c, fmt.Errorf("audit: epochs = %d: want ≥ 1", c.Epochs)
	case c.Steps < 0 || c.Steps > 1<<20:
		return c, fmt.Errorf("audit: steps = %d: want a value in [0, %d] (0: epochs × steps per epoch)", c.Steps, 1<<20)
	case c.N < 2 || c.N > 1<<20:
		return c, fmt.Errorf("audit: n = %d: want a dataset size in [2, %d]", c.N, 1<<20)
	case c.Batch < 1 || c.Batch > c.N:
		return c, fmt.Errorf("audit: batch = %d: want a value in [1, n = %d]", c.Batch, c.N)
	case c.Runs < 4:
		return c, fmt.Errorf("audit: runs = %d: want ≥ 4 per world (half select the threshold, half measure it)", c.Runs)
	case c.Features < 1 || c.Features > 1024:
		return c, fmt.Errorf("audit: features = %d: want a value in [1, 1024]", c.Features)
	case c.Workers < 1:
		return c, fmt.Errorf("audit: workers = %d: want ≥ 1 (0 = GOMAXPROCS)", c.Workers)
	}
	switch c.Threat {
	case ThreatIterates, ThreatFinal:
	default:
		return c, fmt.Errorf("audit: threat %q: want %s or %s", c.Threat, ThreatIterates, ThreatFinal)
	}
	switch c.Canary {
	case CanaryIsolated:
	case CanaryOpposed:
		if c.Sampler != sampler.NameShuffle {
			return c, fmt.Errorf("audit: canary %q is for the shuffle sampler, not %s: want %s", c.Canary, c.Sampler, CanaryIsolated)
		}
	case CanaryNaN, CanaryInf, CanaryHugeLogit:
	default:
		return c, fmt.Errorf("audit: canary %q: want one of %s", c.Canary, strings.Join(Canaries(), ", "))
	}
	if !IsAdversarial(c.Canary) {
		if c.CanaryRow != "" {
			return c, fmt.Errorf("audit: canary row %q: only the adversarial canaries (%s) take a row", c.CanaryRow, strings.Join(AdversarialCanaries(), ", "))
		}
		return c, nil
	}
	if c.CanaryRow == "" {
		c.CanaryRow = RowFirst
		if !sortedSampler(c.Sampler) {
			c.CanaryRow = RowRandom
		}
	}
	switch c.CanaryRow {
	case RowFirst:
		if !sortedSampler(c.Sampler) {
			return c, fmt.Errorf("audit: canary row %q: the shuffle sampler orders each batch by its permutation, so the canary's row is uniform: want %s", c.CanaryRow, RowRandom)
		}
	case RowRandom:
	default:
		return c, fmt.Errorf("audit: canary row %q: want %s or %s", c.CanaryRow, RowFirst, RowRandom)
	}
	if c.N > MaxAdversarialN {
		return c, fmt.Errorf("audit: n = %d: the adversarial canary %s wants n ≤ %d (its score sums over the ordinary examples' batch counts)", c.N, c.Canary, MaxAdversarialN)
	}
	if c.Sampler == sampler.NameAllocation {
		m := sampler.AllocationSteps(c.N, c.Batch)
		if work := float64(m) * float64(c.N-1) * float64(c.N-1); work > maxAllocationWork {
			return c, fmt.Errorf("audit: n = %d, batch = %d: the adversarial allocation score costs M·(n−1)² = %.3g per epoch, want ≤ %d: a smaller n or a larger batch", c.N, c.Batch, work, maxAllocationWork)
		}
	}
	return c, nil
}

// newSampler builds the sampler of one training, seeded by seed, and the accounting spec of
// the claim the audit checks (σ left 0), through the front door as `dpsgd train` builds them
// for (N, Batch): dpsgd.Plan.NewSampler with the sampler's default guarantee accountant
// (accounting.DefaultMethod). Shuffle cuts batches of Batch, Poisson samples at q = Batch/N
// (truncated at sampler.DefaultMaxBatch), allocation spreads over sampler.AllocationSteps(N,
// Batch) rounds. The spec has PublicSize set: N is public and the claim is stated for
// zero-out adjacency, the neighbour the ghost world is (doc.go, "The canary and the two
// worlds"); for Poisson its numbers are those of add/remove.
func (c Config) newSampler(seed uint64) (sampler.Sampler, accounting.Spec, error) {
	smp, spec, err := dpsgd.Plan{Sampler: dpsgd.Sampler(c.Sampler), BatchSize: c.Batch, Seed: seed}.NewSampler(c.N)
	if err != nil {
		return nil, spec, fmt.Errorf("audit: %w", err)
	}
	return smp, spec, nil
}

// AccountantSpec returns the spec of the accountant whose claim the audit checks by default,
// built by the front door as `dpsgd train` builds it (dpsgd.Plan.NewSampler: the sampler's
// default guarantee accountant, PublicSize set), at cfg.Sigma, and the number of steps the
// audit takes: cfg.Steps, or Epochs whole epochs. The step count stays the audit's own input
// to the accountant, apart from the plan, because it may end inside an epoch while a
// dpsgd.Plan trains whole epochs. With Sigma = 0 it returns the spec with Sigma 0
// (SolveSigma).
func AccountantSpec(cfg Config) (spec accounting.Spec, steps int, err error) {
	_, spec, steps, err = cfg.claim()
	return spec, steps, err
}

// claim returns cfg with its defaults, the spec of its default claim at cfg.Sigma (0 allowed)
// and its step count: AccountantSpec.
func (c Config) claim() (Config, accounting.Spec, int, error) {
	sigma := c.Sigma
	if sigma == 0 {
		c.Sigma = 1 // validated below; the spec gets 0 back
	}
	c, err := c.withDefaults()
	if err != nil {
		return c, accounting.Spec{}, 0, err
	}
	c.Sigma = sigma
	smp, spec, err := c.newSampler(0)
	if err != nil {
		return c, spec, 0, err
	}
	spec.Sigma = sigma
	return c, spec, totalSteps(c, smp.StepsPerEpoch()), nil
}

// SolveSigma returns the noise multiplier at which cfg's default claim (AccountantSpec) is ε =
// epsilon at cfg.Delta after the audit's steps, rounded up: the calibration of
// dpsgd.Plan.Resolve (accounting.SolveSigmaCtx at its default tolerance on the plan's spec),
// over the audit's step count instead of whole epochs. cfg.Sigma is ignored. A target no σ in
// range meets is an error wrapping privacy.ErrUnreachable; ctx stops the search.
func SolveSigma(ctx context.Context, cfg Config, epsilon float64) (float64, error) {
	cfg.Sigma = 0
	cfg, spec, steps, err := cfg.claim()
	if err != nil {
		return 0, err
	}
	sigma, err := accounting.SolveSigmaCtx(ctx, spec, steps, privacy.Budget{Epsilon: epsilon, Delta: cfg.Delta}, 0, nil)
	if err != nil {
		return 0, fmt.Errorf("audit: calibrating σ: %w", err)
	}
	return sigma, nil
}

// totalSteps is cfg.Steps, or cfg.Epochs·m when it is 0.
func totalSteps(cfg Config, m int) int {
	if cfg.Steps > 0 {
		return cfg.Steps
	}
	return cfg.Epochs * m
}

// design is what every run of one audit shares.
type design struct {
	cfg        Config
	ds         *datasets.Dataset
	canary     int // index of the canary's slot: N − 1
	c0, c1     int // flat indices of W[cf, 0] and W[cf, 1]
	b0, b1     int // flat indices of the biases
	m, steps   int
	divisor    float64 // the sampler's public expected batch size
	q          float64 // sample rate (Poisson kinds)
	s          float64 // ρ/σ: the canary's push in noise units
	gradScale  float64 // √(a²+1)·√2: gradient norm per unit of the wrong-class probability
	engineConf engine.Config

	// The adversarial designs.
	adv    bool
	own    float64 // the canary's own push on y in noise units under a correct engine
	selfNF int     // 1 when a correct engine finds the canary's own gradient non-finite
	// fault, set by tests only, emulates the cross-row fault in the canary world: when the
	// canary is row 0 of a physical batch, the other rows of that batch are dropped before
	// the engine's step.
	fault bool
}

// opposedLike reports whether every ordinary example is a·e_cf with label 1.
func (d *design) opposedLike() bool { return d.cfg.Canary == CanaryOpposed || d.adv }

func newDesign(cfg Config) (*design, error) {
	smp, _, err := cfg.newSampler(0)
	if err != nil {
		return nil, err
	}
	d := cfg.Features + 1
	cf := d - 1
	ds := &datasets.Dataset{Name: "audit", N: cfg.N, D: d, Classes: 2, Shape: []int{d},
		X: make([]float32, cfg.N*d), Y: make([]int, cfg.N)}
	// The ordinary examples: a fixed synthetic task (isolated) or all at a·e_cf with
	// label 1 (opposed and adversarial). They are public parts of both worlds.
	adv := IsAdversarial(cfg.Canary)
	canary := cfg.N - 1
	if adv && cfg.CanaryRow == RowFirst {
		canary = 0
	}
	x := uint64(cfg.Seed) ^ 0x5eed
	for i := 0; i < cfg.N; i++ {
		if i == canary {
			continue
		}
		row := ds.X[i*d : (i+1)*d]
		if cfg.Canary == CanaryOpposed || adv {
			row[cf] = float32(cfg.Scale)
			ds.Y[i] = 1
			continue
		}
		sum := 0.0
		for j := 0; j < cf; j++ {
			x = seedmix.Next(x)
			v := 2*float64(x>>11)/(1<<53) - 1
			row[j] = float32(v)
			sum += v * float64(j+1)
		}
		if sum > 0 {
			ds.Y[i] = 1
		}
	}
	ds.X[canary*d+cf] = float32(cfg.Scale)
	ds.Y[canary] = 0
	selfNF := 0
	if adv {
		ds.X[canary*d+cf] = canaryValue(cfg.Canary)
		ds.Y[canary] = 1
		if cfg.Canary != CanaryHugeLogit {
			selfNF = 1
		}
	}
	dtype := tensor.Float64
	if cfg.Float32 {
		dtype = tensor.Float32
	}
	rho := cfg.Scale / math.Hypot(cfg.Scale, 1)
	steps := totalSteps(cfg, smp.StepsPerEpoch())
	return &design{
		adv: adv, own: ownPush(cfg.Canary, cfg.Sigma), selfNF: selfNF,
		cfg: cfg, ds: ds, canary: canary,
		c0: cf * 2, c1: cf*2 + 1, b0: d * 2, b1: d*2 + 1,
		m: smp.StepsPerEpoch(), steps: steps, divisor: smp.ExpectedBatchSize(), q: smp.SampleRate(),
		s:         rho / cfg.Sigma,
		gradScale: math.Hypot(cfg.Scale, 1) * math.Sqrt2,
		engineConf: engine.Config{
			Arch: nn.LogReg([]int{d}, 2), Dtype: dtype,
			PhysicalBatch: cfg.Batch, Replicas: 1, Clip: cfg.Clip, Sigma: cfg.Sigma,
			Optimizer: engine.OptimizerConfig{Name: engine.OptimizerSGD, LR: cfg.LR, Schedule: "constant"},
			EvalBatch: 1,
		},
	}, nil
}

// runSeed derives run i of world w's seed.
func runSeed(seed uint64, world, i int) uint64 {
	return seedmix.Next(seedmix.Next(seed^0xa0d17) ^ uint64(world)<<40 ^ uint64(i))
}

// worker is one goroutine's Learner and buffers.
type worker struct {
	d          *design
	l          *engine.Learner
	ds         *datasets.Dataset // d.ds, or a copy whose canary moves (RowRandom)
	j          int               // the canary's index in ds
	zero       []float64
	prev       []float64
	cur        []float64
	idx        []int
	ys         []float64
	unclips    int
	collateral int
	// The adversarial scores' tables, per canary index.
	pw map[int]*poissonWeights
	at map[int]*allocationTables
}

func (d *design) newWorker() (*worker, error) {
	l, err := engine.NewLearner(d.engineConf)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	n := l.NumParams()
	wk := &worker{d: d, l: l, ds: d.ds, j: d.canary, zero: make([]float64, n), prev: make([]float64, n), cur: make([]float64, n), ys: make([]float64, 0, d.m),
		pw: map[int]*poissonWeights{}, at: map[int]*allocationTables{}}
	if d.movesCanary() {
		c := *d.ds
		c.X, c.Y = append([]float32(nil), d.ds.X...), append([]int(nil), d.ds.Y...)
		wk.ds = &c
	}
	return wk, nil
}

// movesCanary reports whether every training draws the canary's index (RowRandom under a
// sampler whose batches are in index order).
func (d *design) movesCanary() bool {
	return d.adv && d.cfg.CanaryRow == RowRandom && sortedSampler(d.cfg.Sampler)
}

// moveCanary swaps the canary's record at wk.j with the ordinary record at j (all ordinary
// records of the adversarial designs are equal).
func (wk *worker) moveCanary(j int) {
	if j == wk.j {
		return
	}
	d := wk.ds.D
	a, b := wk.ds.X[wk.j*d:(wk.j+1)*d], wk.ds.X[j*d:(j+1)*d]
	for k := range a {
		a[k], b[k] = b[k], a[k]
	}
	wk.ds.Y[wk.j], wk.ds.Y[j] = wk.ds.Y[j], wk.ds.Y[wk.j]
	wk.j = j
}

func (wk *worker) poissonWeights(j int) *poissonWeights {
	w := wk.pw[j]
	if w == nil {
		w = newPoissonWeights(wk.d.cfg.N, j, wk.d.cfg.Batch, wk.d.q)
		wk.pw[j] = w
	}
	return w
}

func (wk *worker) allocationTables(j int) *allocationTables {
	t := wk.at[j]
	if t == nil {
		t = newAllocationTables(wk.d.cfg.N, j)
		wk.at[j] = t
	}
	return t
}

// epochLogLR is one shuffle or allocation epoch's score for the design.
func (wk *worker) epochLogLR(ys []float64) float64 {
	d := wk.d
	switch {
	case !d.adv:
		return d.epochLogLR(ys)
	case d.cfg.Sampler == sampler.NameShuffle:
		return d.advShuffleEpochLogLR(ys)
	}
	return d.advAllocationEpochLogLR(ys, wk.allocationTables(wk.j))
}

// run trains once in world w (1: with the canary) and returns the score.
func (wk *worker) run(ctx context.Context, world, i int) (float64, error) {
	d, cfg := wk.d, wk.d.cfg
	seed := runSeed(cfg.Seed, world, i)
	smp, _, err := cfg.newSampler(seedmix.Next(seed ^ 1))
	if err != nil {
		return 0, err
	}
	noise := seedmix.Next(seed ^ 2)
	if d.movesCanary() {
		wk.moveCanary(int(seedmix.Next(seed^3) % uint64(cfg.N)))
	}
	canary := wk.j
	if err := wk.l.SetParams(wk.zero); err != nil {
		return 0, err
	}
	if err := wk.l.ResetOptimizer(); err != nil {
		return 0, err
	}
	copy(wk.prev, wk.zero)
	unit := d.divisor / (cfg.LR * cfg.Sigma * cfg.Clip) // parameter change → noise units
	score := 0.0
	poisson := cfg.Sampler == sampler.NamePoisson || cfg.Sampler == sampler.NameTruncatedPoisson
	wk.ys = wk.ys[:0]
	for step := range d.steps {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		t := step % d.m
		wk.idx = smp.Batch(step/d.m, t, wk.idx)
		has, k, pos := false, 0, 0
		for p, j := range wk.idx {
			if j == canary {
				has, pos = true, p
				if world == 0 {
					continue // the ghost: zero gradient
				}
			}
			wk.idx[k] = j
			k++
		}
		wk.idx = wk.idx[:k]
		if d.fault && world == 1 && has && pos%cfg.Batch == 0 {
			// The emulated cross-row fault: the other rows of the canary's physical batch are
			// dropped, and the canary goes last, so that an engine with the real fault finds
			// nothing more to drop.
			end := min(pos+cfg.Batch, len(wk.idx))
			wk.idx = append(wk.idx[:pos], wk.idx[end:]...)
			wk.idx = append(wk.idx, canary)
		}
		wk.countUnclipped(world == 1 && has && !d.adv, len(wk.idx) > 0)
		st, err := wk.l.Step(wk.ds, wk.idx, cfg.Sigma, kernels.NoiseKey{Seed: noise, Step: uint64(step)}, cfg.LR, d.divisor)
		if err != nil {
			return 0, fmt.Errorf("audit: world %d run %d step %d: %w", world, i, step, err)
		}
		own := 0
		if world == 1 && has {
			own = d.selfNF
		}
		if st.NonFinite > own {
			wk.collateral += st.NonFinite - own
		}
		if wk.cur, err = wk.l.Params(wk.cur); err != nil {
			return 0, fmt.Errorf("audit: world %d run %d step %d: %w", world, i, step, err)
		}
		y := ((wk.cur[d.c0] - wk.prev[d.c0]) - (wk.cur[d.c1] - wk.prev[d.c1])) / math.Sqrt2 * unit
		wk.prev, wk.cur = wk.cur, wk.prev
		switch {
		case cfg.Threat != ThreatIterates:
		case poisson && d.adv:
			score += d.advPoissonLogLR(y, wk.poissonWeights(canary))
		case poisson:
			score += poissonLogLR(y, d.s, d.q)
		default:
			wk.ys = append(wk.ys, y)
			if t == d.m-1 || step == d.steps-1 {
				score += wk.epochLogLR(wk.ys)
				wk.ys = wk.ys[:0]
			}
		}
	}
	if cfg.Threat == ThreatFinal {
		// The final parameters only (θ_0 = 0): Z = Σ_t y_t.
		score = (wk.prev[d.c0] - wk.prev[d.c1]) / math.Sqrt2 * unit
	}
	return score, nil
}

// countUnclipped checks, before a step, whether the examples that push the canary
// coordinates will be clipped: the canary (when present) has gradient norm
// √(a²+1)·√2·p₁ and every opposed example √(a²+1)·√2·p₀, with p the softmax of
// a·W[cf,:] + b.
func (wk *worker) countUnclipped(canary, opposed bool) {
	d := wk.d
	a := d.cfg.Scale
	z := a*(wk.prev[d.c1]-wk.prev[d.c0]) + wk.prev[d.b1] - wk.prev[d.b0] // z₁ − z₀
	p1 := 1 / (1 + math.Exp(-z))
	if canary && d.gradScale*p1 <= d.cfg.Clip {
		wk.unclips++
	}
	if opposed && d.opposedLike() && d.gradScale*(1-p1) <= d.cfg.Clip {
		wk.unclips++
	}
}

// poissonLogLR is one step's log-likelihood ratio ln(1 − q + q·e^{s y − s²/2}) of
// the Poisson-subsampled Gaussian (the pair of Mironov, Talwar & Zhang 2019, in noise units).
func poissonLogLR(y, s, q float64) float64 {
	l := s*y - s*s/2
	// ln(1 − q + q e^l) = logaddexp(ln(1−q), ln q + l)
	return numeric.LogAddExp(math.Log1p(-q), math.Log(q)+l)
}

// epochLogLR is one epoch's log-likelihood ratio for shuffle and allocation, from the
// epoch's observed steps ys (all M of them, or the first ones of a partial last epoch, the
// unobserved steps each contributing a likelihood ratio of 1): with the isolated canary the
// Gaussian pair of package privacy/allocation, ln (1/M) Σ_t e^{s y_t − s²/2}; with the opposed
// canary Chua et al.'s MoG(2) against MoG(1) (Chua et al. 2024) after the shift y'_t = y_t + B·s:
// ln Σ_t e^{2s y'_t − 2s²} − ln Σ_t e^{s y'_t − s²/2}.
func (d *design) epochLogLR(ys []float64) float64 {
	s := d.s
	rest := math.Inf(-1) // ln(M − len(ys))
	if len(ys) < d.m {
		rest = math.Log(float64(d.m - len(ys)))
	}
	if d.cfg.Canary == CanaryOpposed {
		shift := d.divisor * s
		num, den := rest, rest
		for _, y := range ys {
			y += shift
			num = numeric.LogAddExp(num, 2*s*y-2*s*s)
			den = numeric.LogAddExp(den, s*y-s*s/2)
		}
		return num - den
	}
	acc := rest
	for _, y := range ys {
		acc = numeric.LogAddExp(acc, s*y-s*s/2)
	}
	return acc - math.Log(float64(d.m))
}

// Run audits cfg: 2·Runs trainings on cfg.Workers goroutines, the test, the empirical ε
// and the accountant's claim. ctx cancellation stops the trainings and returns an error
// wrapping ctx.Err(). A Violation is a result, not an error: the caller reports it.
func Run(ctx context.Context, cfg Config) (*Result, error) { return run(ctx, cfg, nil) }

// run is Run with tweak, when set, applied to the design before the trainings (tests).
func run(ctx context.Context, cfg Config, tweak func(*design)) (*Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	d, err := newDesign(cfg)
	if err != nil {
		return nil, err
	}
	if tweak != nil {
		tweak(d)
	}
	acc := cfg.Accountant
	if acc == nil {
		spec, _, err := AccountantSpec(cfg)
		if err != nil {
			return nil, err
		}
		if acc, err = spec.New(); err != nil {
			return nil, fmt.Errorf("audit: accountant: %w", err)
		}
	}
	res := &Result{Sampler: cfg.Sampler, Threat: cfg.Threat, Canary: cfg.Canary, CanaryRow: cfg.CanaryRow,
		Dtype: d.engineConf.Dtype.String(), Accountant: acc.Name(),
		Sigma: cfg.Sigma, Delta: cfg.Delta, Epochs: (d.steps + d.m - 1) / d.m, StepsPerEpoch: d.m, Steps: d.steps,
		N: cfg.N, Batch: cfg.Batch, Runs: cfg.Runs, Confidence: cfg.Confidence, EpsilonLowerBound: math.NaN()}
	if res.EpsilonAccountant, err = acc.Epsilon(d.steps, cfg.Delta); errors.Is(err, privacy.ErrUnreachable) {
		res.EpsilonAccountant = math.Inf(1)
	} else if err != nil {
		return nil, fmt.Errorf("audit: accountant %s: %w", acc.Name(), err)
	}
	if cfg.Sampler == sampler.NameShuffle {
		lb, err := shuffle.NewLowerBound(cfg.Sigma, d.m)
		if err != nil {
			return nil, fmt.Errorf("audit: shuffle lower bound: %w", err)
		}
		if res.EpsilonLowerBound, err = lb.Epsilon(d.steps, cfg.Delta); err != nil {
			return nil, fmt.Errorf("audit: shuffle lower bound: %w", err)
		}
	}

	start := time.Now()
	scores, cnt, err := d.collect(ctx)
	if err != nil {
		return nil, err
	}
	res.Seconds = time.Since(start).Seconds()
	if res.Seconds > 0 {
		res.RunsPerSecond = float64(2*cfg.Runs) / res.Seconds
	}
	res.Unclipped, res.Collateral = cnt.unclipped, cnt.collateral
	if res.Empirical, err = EmpiricalEpsilon(scores[0], scores[1], cfg.Delta, cfg.Confidence); err != nil {
		return nil, err
	}
	res.Violation = res.Empirical.Low > res.EpsilonAccountant
	return res, nil
}

// counts are the diagnostics that collect sums over the trainings.
type counts struct {
	unclipped  int // design steps in which an example of the design was not clipped
	collateral int // examples other than the canary zeroed as non-finite
}

// collect runs the Runs trainings of both worlds on cfg.Workers goroutines and returns
// their scores (index 0: without the canary) and the diagnostic counts. Run i of world w
// has its own seeds, so the scores do not depend on the number of workers.
func (d *design) collect(ctx context.Context) (scores [2][]float64, cnt counts, err error) {
	cfg := d.cfg
	scores = [2][]float64{make([]float64, cfg.Runs), make([]float64, cfg.Runs)}
	total := 2 * cfg.Runs
	var next, done atomic.Int64
	var mu sync.Mutex
	var firstErr error
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel()
	}
	var wg sync.WaitGroup
	for range min(cfg.Workers, total) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wk, err := d.newWorker()
			if err != nil {
				fail(err)
				return
			}
			defer wk.l.Close()
			for {
				j := int(next.Add(1) - 1)
				if j >= total {
					break
				}
				world, i := j%2, j/2
				v, err := wk.run(ctx, world, i)
				if err != nil {
					fail(err)
					return
				}
				scores[world][i] = v
				n := int(done.Add(1))
				if cfg.Progress != nil {
					mu.Lock()
					cfg.Progress(n, total)
					mu.Unlock()
				}
			}
			mu.Lock()
			cnt.unclipped += wk.unclips
			cnt.collateral += wk.collateral
			mu.Unlock()
		}()
	}
	wg.Wait()
	if firstErr != nil {
		if errors.Is(firstErr, context.Canceled) || errors.Is(firstErr, context.DeadlineExceeded) {
			return scores, counts{}, fmt.Errorf("audit: %s interrupted after %d of %d trainings: %w", cfg.Sampler, done.Load(), total, firstErr)
		}
		return scores, counts{}, firstErr
	}
	return scores, cnt, nil
}
