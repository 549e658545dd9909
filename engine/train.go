// Package engine runs DP-SGD: it builds the model's Gorgonia graphs, draws batches from a
// sampler, forms per-example clipped gradient sums without materializing dense per-example
// gradients, adds Gaussian noise from a counter-based stream, normalizes by the expected batch
// size, updates the parameters, and asks the accountant of the sampler in use, before every
// epoch, whether the epoch still fits the privacy budget (docs/design.md, "One step").
//
// Reliability: Train writes checkpoints (package engine/checkpoint) atomically every
// CheckpointOptions.Every steps, before the first step and when the run ends or stops, and
// resumes from one bit for bit (CheckpointOptions documents the ledger invariant and the
// exceptions). Numerical guards: an example whose gradient norm is not finite gets clipping
// coefficient 0 and is counted (EpochStats.NonFinite), and its loss and prediction are left out
// of the step's statistics (so one hostile record cannot make them NaN); a step whose summed
// loss is still not finite (a finite gradient with an infinite loss) is counted
// (EpochStats.NonFiniteLoss) and left out of the mean loss; a run whose parameters
// (or moving average) become non-finite or whose noisy gradient overflows stops with an error
// wrapping ErrDiverged, without writing a checkpoint, so the last good one stays intact; a
// step whose every example is non-finite does not stop the run (that stop would reveal a
// hostile record: only released values decide). Config.Secure draws the noise from a
// cryptographically secure source (kernels.AddSecureGaussian).
//
// One step: run.dpStep (backend.go) is the DP step for every backend — the CPU's replicas
// (cpuBackend) or a CUDA device (cudaBackend, backend_cuda.go; Config.Device runs dense
// float32 models there, device.go) — with the same sampler, noise keys, schedule, guards, ledger and
// checkpoints; DeviceAuto falls back to the CPU, saying why, when the device cannot take the run.
package engine

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"runtime"
	"time"

	"github.com/dpsgd/dpsgd/cuda"
	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/checkpoint"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/engine/sampler"
	"github.com/dpsgd/dpsgd/internal/seedmix"
	"github.com/dpsgd/dpsgd/kernels"
	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/accounting"
	"gorgonia.org/tensor"
)

// Config is one training run's configuration.
type Config struct {
	Arch          nn.Arch
	Dtype         tensor.Dtype // tensor.Float32 (default) or tensor.Float64
	PhysicalBatch int          // rows of every compiled graph (padding is masked)
	Replicas      int          // graphs run concurrently; 0 = GOMAXPROCS
	Epochs        int
	Clip          float64 // per-example ℓ2 clip norm C
	Sigma         float64 // noise multiplier: noise std is Sigma·Clip (Noise = NoiseGaussian)
	// Noise is the mechanism: NoiseGaussian (default) or NoiseBall, noise
	// uniform in the ball of radius Radius over all parameters at once
	// (Tholeti's perturbed gradient descent; docs/accounting.md, "Uniform-ball noise").
	Noise      string
	Radius     float64 // ball radius, in the units of the clipped gradient sum (NoiseBall)
	NonPrivate bool    // no clipping and no noise (the same code path otherwise)
	Seed       uint64  // parameter initialization, sampling and noise derive from it
	Optimizer  OptimizerConfig
	EvalBatch  int // rows of the evaluation graphs; 0 = 500
	// Checkpoint writes checkpoints and resumes from one (zero value: neither).
	Checkpoint CheckpointOptions
	// Secure draws the Gaussian noise from a cryptographically secure source keyed by the
	// operating system (kernels.AddSecureGaussian: a discrete Gaussian on a power-of-two grid,
	// which resists the floating-point attacks on the low bits) instead of the seeded stream;
	// Seed then only initializes the parameters. Only Noise = NoiseGaussian is provided. The
	// sampler is the caller's: wrap it with sampler.Secure for secure sampling. The
	// accountant must account for the secure sampler (build it with SecureAccounting; Train
	// refuses one that does not). A secure run is not reproducible, and its resume continues
	// correctly but not bitwise.
	Secure bool
	// Device chooses where the steps run: DeviceCPU ("" too), DeviceCUDA or DeviceAuto
	// (device.go; CUDASupport says which runs the device takes). On the device the steps run
	// on the CUDA backend; evaluation, the moving average, the guards, the ledger and the
	// checkpoints stay on the host, with the parameters and optimizer state brought back for
	// them. Results equal the CPU's to float32 rounding, not bitwise (the GEMMs sum in another
	// order); a device run is reproducible and resumes bit for bit on the device.
	Device string
	// Precision of the forward and backward GEMMs on the CUDA device: PrecisionFP32 ("" too)
	// or PrecisionBF16 (device.go; the per-example gradients, norms, clipping, sums and noise
	// stay exact either way). The CPU computes in Dtype only: bf16 needs DeviceCUDA or DeviceAuto.
	Precision string
	// CUDA opens the device (zero value: the default device and libraries, DPSGD_LIBCUDA and
	// DPSGD_LIBCUBLAS honoured).
	CUDA cuda.Options
	// OnDeviceFallback, if set, is told once why a DeviceAuto run does not use the device.
	OnDeviceFallback func(why string)
	// UserLevel makes the user the unit of privacy (users.go): the sampler draws users (its
	// N is the training set's Users), each drawn user's records go into the step together,
	// and the user's summed gradient is clipped to Clip. The training set needs Dataset.User.
	// CPU only; checkpoints are refused.
	UserLevel bool
	// MaxUserRecords caps the records one user brings to a step (a seeded uniform subset of a
	// user that owns more), in [1, PhysicalBatch]; 0 is PhysicalBatch. The sensitivity is one
	// user's clipped gradient whatever the cap; the cap bounds a step's cost. UserLevel only.
	MaxUserRecords int
	// AugMult is the augmentation multiplicity K (augment.go): each sampled example runs as K
	// views (augmentations of the record, Augment), and the mean of the views' gradients is
	// clipped as the example's gradient; the accounting is unchanged. In [1, MaxAugMult]; 0
	// and 1 are off (the record-level step bit for bit, unless Augment is set: then one
	// augmented view per example). At most PhysicalBatch. Image data only (the training set's
	// Shape [C, H, W]; any model); CPU only; not with UserLevel; checkpoints are refused.
	AugMult int
	// Augment is the augmentation of the views (the zero value: none).
	Augment Augment
}

// MinClip is the smallest clip norm C a private run takes (2⁻¹⁰⁰ ≈ 7.9e-31). Below it the
// float64 products c·ĝ of the clipped sums could fall into the subnormal range, where the
// clip bound's relative margin (kernels.ClipBound) no longer absorbs their rounding; no
// model's gradients live at such scales.
const MinClip = 0x1p-100

// MaxStepBytes bounds the memory a configuration's training step asks for on the CPU, about
// Replicas × (PhysicalBatch × nn.Arch.StepValues × the dtype's size + the replica's float64
// gradient sums, two per parameter, three in a user-level run): 64 GiB. A model file within
// the per-layer limits (nn.MaxActivation, nn.MaxStackParams) could otherwise ask for
// terabytes at the default physical batch (a convolution's per-example gradients alone: up to
// 2²⁸ values per example), and fail in the allocator (a fatal error, not an error the CLI can
// report) instead of being refused.
const MaxStepBytes = 1 << 36

// Noise mechanisms of Config.Noise: the accounting's names (one home for the name set).
const (
	NoiseGaussian = accounting.MechanismGaussian
	NoiseBall     = accounting.MechanismBall
)

// checkStepMemory refuses a configuration whose step would hold more than MaxStepBytes.
func (c *Config) checkStepMemory() error {
	v, err := c.Arch.StepValues()
	if err != nil {
		return err
	}
	size := 4.0
	if c.Dtype == tensor.Float64 {
		size = 8
	}
	sums := 16.0 // the replica's float64 gradient sums, two per parameter
	if c.UserLevel || c.augmenting() {
		sums += 8 // and one user's (or example's) gradient (users.go)
	}
	need := float64(c.Replicas) * (float64(c.PhysicalBatch)*v*size + sums*float64(c.Arch.NumParams()))
	if need > MaxStepBytes {
		return fmt.Errorf("a training step of this model (%d parameters, about %.3g values per example) at physical batch %d with %d replicas holds about %.3g GiB: want at most %d GiB (lower the physical batch or the replicas, or shrink the model)",
			c.Arch.NumParams(), v, c.PhysicalBatch, c.Replicas, need/(1<<30), MaxStepBytes>>30)
	}
	return nil
}

// Validate checks every field against its valid range.
func (c *Config) Validate() error {
	if err := c.Arch.Validate(); err != nil {
		return err
	}
	if c.Dtype == (tensor.Dtype{}) {
		c.Dtype = tensor.Float32
	}
	if c.Dtype != tensor.Float32 && c.Dtype != tensor.Float64 {
		return fmt.Errorf("dtype %v: want float32 or float64", c.Dtype)
	}
	if c.PhysicalBatch < 1 {
		return fmt.Errorf("physical batch %d: want ≥ 1", c.PhysicalBatch)
	}
	if c.Replicas < 0 {
		return fmt.Errorf("replicas %d: want ≥ 0", c.Replicas)
	}
	if c.Replicas == 0 {
		c.Replicas = runtime.GOMAXPROCS(0)
	}
	if err := c.checkStepMemory(); err != nil {
		return err
	}
	if c.Epochs < 1 {
		return fmt.Errorf("epochs %d: want ≥ 1", c.Epochs)
	}
	if !c.NonPrivate {
		if !(c.Clip >= MinClip) || math.IsInf(c.Clip, 0) {
			return fmt.Errorf("clip %v: want a finite value ≥ %g", c.Clip, MinClip)
		}
		switch c.Noise {
		case "", NoiseGaussian:
			c.Noise = NoiseGaussian
			if !(c.Sigma > 0) || math.IsInf(c.Sigma, 0) {
				return fmt.Errorf("sigma %v: want a finite value > 0", c.Sigma)
			}
			if std := c.Sigma * c.Clip; c.Secure && !(std >= kernels.SecureStdMin && std <= kernels.SecureStdMax) {
				return fmt.Errorf("noise std σ·C = %v with secure mode: want a value in [%g, %g]", std, kernels.SecureStdMin, kernels.SecureStdMax)
			}
		case NoiseBall:
			if c.Secure {
				return fmt.Errorf("noise %q with secure mode: secure mode provides %s noise only", c.Noise, NoiseGaussian)
			}
			if !(c.Radius > 0 && c.Radius <= kernels.MaxBallRadius) {
				return fmt.Errorf("radius %v: want a value in (0, %g]", c.Radius, kernels.MaxBallRadius)
			}
		default:
			return fmt.Errorf("noise %q: want %s or %s", c.Noise, NoiseGaussian, NoiseBall)
		}
	}
	if c.EvalBatch == 0 {
		c.EvalBatch = DefaultEvalBatch
	}
	if c.EvalBatch < 1 {
		return fmt.Errorf("eval batch %d: want ≥ 1", c.EvalBatch)
	}
	if err := c.Checkpoint.validate(); err != nil {
		return err
	}
	if err := c.validateUsers(); err != nil {
		return err
	}
	if err := c.validateAugMult(); err != nil {
		return err
	}
	if err := c.validateDevice(); err != nil {
		return err
	}
	return c.Optimizer.Validate()
}

// validateUsers checks UserLevel and MaxUserRecords and sets MaxUserRecords' default.
func (c *Config) validateUsers() error {
	if !c.UserLevel {
		if c.MaxUserRecords != 0 {
			return fmt.Errorf("max user records %d: for a user-level run only", c.MaxUserRecords)
		}
		return nil
	}
	if c.MaxUserRecords == 0 {
		c.MaxUserRecords = c.PhysicalBatch
	}
	if c.MaxUserRecords < 1 || c.MaxUserRecords > c.PhysicalBatch {
		return fmt.Errorf("max user records %d: want a value in [1, %d] (the physical batch: one user's records of a step run in one physical batch)", c.MaxUserRecords, c.PhysicalBatch)
	}
	if c.Checkpoint.active() {
		return fmt.Errorf("checkpoints of a user-level run are not supported: the checkpoint does not record the user index and the records cap; run without checkpoints")
	}
	return nil
}

// Privacy is the accounting side of a run: the accountant proven for the sampler in use and
// the budget that training must not exceed.
type Privacy struct {
	Accountant privacy.Accountant
	Delta      float64         // δ at which ε is reported
	Budget     *privacy.Budget // nil: no budget, ε is only reported
	// Ledger, when set, records what each epoch spent; a checkpoint carries it.
	Ledger *accounting.Ledger
}

// EpochStats is what the loop reports after each epoch; a checkpoint carries the same record
// (one type, defined with the checkpoint format).
type EpochStats = checkpoint.EpochStats

// Result summarizes a run.
type Result struct {
	TestAccuracy float64
	Epsilon      float64 // spent; NaN for non-private runs
	// EpsilonSteps is the number of steps Epsilon covers: every step taken, and the rest of
	// the epoch in progress when the run stopped mid-epoch (each epoch is charged before its
	// first step).
	EpsilonSteps      int
	Delta             float64
	EpochsRun         int
	Steps             int
	StoppedByBudget   bool
	Interrupted       bool
	ExamplesPerSecond float64
	Seconds           float64
	NonFinite         int
	History           []EpochStats
	ParamsDigest      string // SHA-256 of the final parameters' bits: equal runs, equal digests
	// Model is a copy of the parameters the run ended with, as it evaluates them (their moving
	// average with Optimizer.EMA). It is set when the run finishes, stops for the budget, is
	// interrupted or diverges, and is nil when they are not finite or after any other error.
	Model *nn.Params

	// Numerical guards. NonFiniteLoss counts the steps whose loss was not finite; Diverged
	// says the run stopped (with an error wrapping ErrDiverged) because its parameters or
	// loss became non-finite, at step DivergedAt (1-based; 0 if it did not).
	NonFiniteLoss int
	Diverged      bool
	DivergedAt    int

	// Checkpoints. ResumedFromStep is the step of the checkpoint the run resumed from (-1:
	// started afresh); Checkpoints counts the checkpoints written and LastCheckpointStep is
	// the step of the last one (-1: none).
	ResumedFromStep    int
	Checkpoints        int
	LastCheckpointStep int

	// Device is where the steps ran: DeviceCPU or DeviceCUDA; DeviceName describes the GPU.
	Device     string
	DeviceName string
	// Precision is that of the steps' forward and backward GEMMs: PrecisionBF16 only on the
	// device when Config.Precision asked for it, else the run's Dtype, PrecisionFP32 or
	// PrecisionFP64.
	Precision string
}

// Progress receives the loop's events; all methods are called from the training goroutine.
type Progress interface {
	Start(totalSteps int)
	Step(step int, st StepStats, epsilon float64)
	Epoch(e EpochStats)
	Finish()
}

// NopProgress ignores every event.
type NopProgress struct{}

func (NopProgress) Start(int)                    {}
func (NopProgress) Step(int, StepStats, float64) {}
func (NopProgress) Epoch(EpochStats)             {}
func (NopProgress) Finish()                      {}

// ErrInterrupted is returned (wrapped, with where it stopped) when ctx is cancelled.
var ErrInterrupted = errors.New("training interrupted")

// Train runs DP-SGD on train, evaluating on test after every epoch.
func Train(ctx context.Context, cfg Config, train, test *datasets.Dataset, smp sampler.Sampler, pv Privacy, prog Progress) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if prog == nil {
		prog = NopProgress{}
	}
	if train.D != cfg.Arch.InputSize() || train.Classes != cfg.Arch.Classes {
		return nil, fmt.Errorf("dataset has %d features and %d classes, model wants %d and %d", train.D, train.Classes, cfg.Arch.InputSize(), cfg.Arch.Classes)
	}
	if cfg.UserLevel {
		if err := checkUserLevel(train, smp.DatasetSize()); err != nil {
			return nil, err
		}
	} else if smp.DatasetSize() != train.N {
		return nil, fmt.Errorf("sampler is for %d examples, dataset has %d", smp.DatasetSize(), train.N)
	}
	if cfg.augmenting() {
		if err := checkAugment(&cfg, train); err != nil {
			return nil, err
		}
	}
	if !cfg.NonPrivate && pv.Accountant == nil {
		return nil, fmt.Errorf("a private run needs an accountant")
	}
	if err := checkRange(&cfg, train.N, smp.StepsPerEpoch()); err != nil {
		return nil, err
	}
	if err := checkSecureAccountant(&cfg, pv.Accountant); err != nil {
		return nil, err
	}
	if cfg.Dtype == tensor.Float64 {
		return trainT[float64](ctx, cfg, train, test, smp, pv, prog)
	}
	return trainT[float32](ctx, cfg, train, test, smp, pv, prog)
}

// MaxSteps bounds a run's total number of steps (epochs × steps per epoch), far beyond any
// run that can finish, so that step counts never overflow in the loop, the schedules or the
// accountants.
const MaxSteps = 1 << 40

// checkRange refuses, before any step, a run whose numbers could overflow: more than MaxSteps
// steps, or a clip norm and noise so large that the clipped sum of n examples plus its noise
// (at most n·C + 64·σ·C per coordinate; the ball's radius for ball noise) could leave the
// range of the dtype, with a margin of 2²⁰ for the division and the update. Overflow there
// would depend on the data (whether a record is present), and a stop it caused would reveal
// it; refusing up front depends on public numbers only.
func checkRange(cfg *Config, n, perEpoch int) error {
	if perEpoch > 0 && cfg.Epochs > MaxSteps/perEpoch {
		return fmt.Errorf("epochs %d: with %d steps per epoch, more than %d steps in all", cfg.Epochs, perEpoch, MaxSteps)
	}
	if cfg.NonPrivate {
		return nil
	}
	limit, name := float64(math.MaxFloat32), "float32"
	if cfg.Dtype == tensor.Float64 {
		limit, name = math.MaxFloat64, "float64"
	}
	noise := 64 * cfg.Sigma * cfg.Clip
	if cfg.Noise == NoiseBall {
		noise = cfg.Radius
	}
	if bound := float64(n)*cfg.Clip + noise; !(bound <= limit/(1<<20)) {
		return fmt.Errorf("clip %g, σ %g over %d examples: the clipped sum and its noise could reach %.3g, beyond the safe %s range (%.3g); want a smaller clip norm or σ",
			cfg.Clip, cfg.Sigma, n, bound, name, limit/(1<<20))
	}
	return nil
}

// run holds a training run's state.
type run[T kernels.Float] struct {
	cfg    Config
	params *nn.Params
	ema    *nn.Params
	evals  []*evaluator[T]
	sizes  []int // each parameter tensor's length
	opt    *optimizer[T]
	idx    []int
	noise  uint64
	secure *kernels.SecureSource // Config.Secure: the noise source
	// be runs the DP step's numbers (backend): the CPU's replicas, or the CUDA device when
	// dev is set. nil until initBackend (a Learner on a device binds its first dataset).
	be         backend
	dev        *cuda.Device
	deviceName string
	// users indexes the training set's users in a user-level run (nil otherwise); ub is the
	// step's users' records.
	users *userIndex
	ub    userBatch
	// aug makes the views of an augmented run (nil otherwise); view is the current step's.
	aug  *augmenter
	view viewStep
	// feats holds the datasets' features when the model's first layer is a scatter layer
	// (nil otherwise): computed once per dataset, shared by the replicas and evaluators.
	feats *nn.FeatureCache
}

func newRun[T kernels.Float](cfg Config) (*run[T], error) {
	r, err := newRunParams[T](cfg)
	if err != nil {
		return nil, err
	}
	return r, r.build(nil)
}

// newRunParams makes the run's initial parameters; build completes the run.
func newRunParams[T kernels.Float](cfg Config) (*run[T], error) {
	params, err := nn.NewParams(cfg.Arch, cfg.Dtype, seedmix.Mix(cfg.Seed, 1))
	if err != nil {
		return nil, err
	}
	return &run[T]{cfg: cfg, params: params, noise: seedmix.Mix(cfg.Seed, 3)}, nil
}

// build makes the noise source, the evaluation graphs and the optimizer, then the backend
// (initBackend) — unless the run asks for a device and has no training set yet (a Learner:
// its first step binds the backend to the step's dataset).
func (r *run[T]) build(train *datasets.Dataset) error {
	cfg, params := r.cfg, r.params
	var err error
	if cfg.Secure && !cfg.NonPrivate {
		if r.secure, err = kernels.NewSecureSource(); err != nil {
			return err
		}
	}
	evalParams := params
	if cfg.Optimizer.EMA > 0 {
		r.ema = params.Clone()
		evalParams = r.ema
	}
	if r.feats, err = nn.NewFeatureCache(cfg.Arch); err != nil {
		return err
	}
	for range cfg.Replicas {
		ev, err := newEvaluator[T](cfg.Arch, evalParams, cfg.EvalBatch)
		if err != nil {
			return err
		}
		ev.useFeatures(r.feats)
		r.evals = append(r.evals, ev)
	}
	for _, p := range params.List {
		r.sizes = append(r.sizes, p.Value.Shape().TotalSize())
	}
	r.opt = newOptimizer[T](cfg.Optimizer, r.sizes)
	if train == nil && cfg.Device != DeviceCPU && cfg.Device != "" {
		return nil
	}
	return r.initBackend(train)
}

// initBackend puts the run on the CUDA device when it asks for one and the device can take
// it (attachDevice), else on the CPU: Replicas graphs at the physical batch size.
func (r *run[T]) initBackend(train *datasets.Dataset) error {
	if train != nil {
		if err := r.attachDevice(train); err != nil {
			return err
		}
		if r.be != nil {
			return nil
		}
	}
	cb := &cpuBackend[T]{phys: r.cfg.PhysicalBatch, params: paramSlices[T](r.params), opt: r.opt}
	r.be = cb
	for range r.cfg.Replicas {
		rep, err := newReplica[T](r.cfg.Arch, r.params, r.cfg.PhysicalBatch)
		if err != nil {
			return err
		}
		// An augmented run's rows are views, not the dataset's images: its replicas compute
		// the features of each batch from the views (nn.Net.Run) instead of reading the cache.
		if !r.cfg.augmenting() {
			rep.useFeatures(r.feats)
		}
		cb.reps = append(cb.reps, rep)
	}
	for _, n := range r.sizes {
		cb.grads = append(cb.grads, make([]T, n))
		cb.sums = append(cb.sums, make([]float64, n))
	}
	return nil
}

// step performs logical step number step of total on the batch idx (docs/design.md steps
// 2–7): dpStep with the run's noise — Gaussian of std σ·C keyed (run's key, step, tensor),
// one ball draw, or the secure source — and the schedule's learning rate.
func (r *run[T]) step(ds *datasets.Dataset, idx []int, step, total int, expectedBatch float64) (StepStats, error) {
	noise := stepNoise{key: kernels.NoiseKey{Seed: r.noise, Step: uint64(step)}}
	if r.users != nil {
		r.users.batch(idx, step, &r.ub)
	}
	if r.aug != nil {
		r.aug.batch(idx, &r.ub)
		r.view = viewStep{a: r.aug, step: step}
	}
	switch {
	case r.cfg.NonPrivate:
	case r.cfg.Noise == NoiseBall:
		// One draw uniform in the ball over all parameters together: the
		// mechanism's d is the total parameter count.
		noise.kind, noise.radius = noiseBall, r.cfg.Radius
	case r.secure != nil:
		noise.kind, noise.std = noiseSecure, r.cfg.Sigma*r.cfg.Clip
	default:
		noise.kind, noise.std = noiseGaussian, r.cfg.Sigma*r.cfg.Clip
	}
	return r.dpStep(ds, idx, noise, r.cfg.Optimizer.rate(step, total), expectedBatch)
}

func paramSlices[T kernels.Float](p *nn.Params) [][]T {
	out := make([][]T, len(p.List))
	for i, q := range p.List {
		out[i] = q.Value.Data().([]T)
	}
	return out
}

func trainT[T kernels.Float](ctx context.Context, cfg Config, train, test *datasets.Dataset, smp sampler.Sampler, pv Privacy, prog Progress) (res *Result, err error) {
	// charged is the number of steps the privacy already charged covers: each epoch is
	// charged before its first step, so charged ≥ the steps taken. Whatever ends the run
	// (finished, budget, interrupt, divergence, an error after some steps), the reported ε is
	// the ε of the charged steps, never NaN or 0 for a run that took steps (finalEpsilon).
	charged, step := 0, 0
	defer func() {
		if res == nil {
			return
		}
		res.Steps = max(res.Steps, step) // an error return after some steps says how many
		if cfg.NonPrivate || pv.Accountant == nil {
			return
		}
		if eerr := res.finalEpsilon(pv, charged); eerr != nil {
			err = errors.Join(err, eerr)
		}
	}()
	r, err := newRunParams[T](cfg)
	if err != nil {
		return nil, err
	}
	defer r.close()
	// The noise key: from the seed and the trajectory's fingerprint, forked on a resume that
	// changes the trajectory (CheckpointOptions, "The noise key"); set before the device opens.
	ckr, err := newCkptRun(&cfg, smp)
	if err != nil {
		return nil, err
	}
	r.noise = ckr.noiseKey
	if err := r.build(train); err != nil {
		return nil, err
	}
	if cfg.UserLevel {
		r.users = newUserIndex(train, cfg.MaxUserRecords, seedmix.Mix(cfg.Seed, 5))
	}
	if cfg.augmenting() {
		r.aug = newAugmenter(&cfg, train, seedmix.Mix(cfg.Seed, 6))
	}
	m := smp.StepsPerEpoch()
	total := cfg.Epochs * m
	expected := smp.ExpectedBatchSize()
	res = &Result{Delta: pv.Delta, Epsilon: math.NaN(), ResumedFromStep: -1, LastCheckpointStep: -1, Device: DeviceCPU, Precision: PrecisionFP32}
	if cfg.Dtype == tensor.Float64 {
		res.Precision = PrecisionFP64
	}
	if r.dev != nil {
		res.Device, res.DeviceName, res.Precision = DeviceCUDA, r.deviceName, cfg.Precision
	}
	epsAt := func(steps int) (float64, error) {
		if cfg.NonPrivate || pv.Accountant == nil {
			return math.NaN(), nil
		}
		return pv.Accountant.Epsilon(steps, pv.Delta)
	}
	ck := &cfg.Checkpoint
	var cc checkpoint.Config
	if ck.active() {
		if !cfg.NonPrivate && pv.Ledger == nil {
			return nil, fmt.Errorf("checkpoints of a private run need Privacy.Ledger: every checkpoint carries the ledger")
		}
		if cc, err = ckr.open(&cfg, train, smp, &pv); err != nil {
			return nil, err
		}
	}

	// The position: step = epoch0·m + s0 steps done; es and correct accumulate the epoch in
	// progress.
	epoch0, s0, examples := 0, 0, 0
	var es EpochStats
	correct := 0
	if c := ck.Resume; c != nil {
		if err := c.Config.Compare(&cc); err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
		if c.State.Step > total {
			return nil, fmt.Errorf("resume: epochs %d (%d steps): the checkpoint is at step %d (epoch %d), want a total of at least %d epochs",
				cfg.Epochs, total, c.State.Step, c.State.Epoch+1, (c.State.Step+m-1)/m)
		}
		if err := r.restore(c); err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
		if err := r.be.push(); err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
		if !cfg.NonPrivate {
			if err := resumeLedger(c, &pv); err != nil {
				return nil, fmt.Errorf("resume: %w", err)
			}
		}
		// Last, once nothing else refuses the resume: a secure one claims the next generation.
		if err := ckr.resume(c); err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
		st := c.State
		step, epoch0, s0, examples = st.Step, st.Epoch, st.StepInEpoch, st.Examples
		for _, h := range st.History {
			e := fromCheckpointStats(h, cfg.NonPrivate)
			res.History = append(res.History, e)
			res.NonFinite += e.NonFinite
			res.NonFiniteLoss += e.NonFiniteLoss
		}
		res.EpochsRun = len(res.History)
		if s0 > 0 {
			es = fromCheckpointStats(st.Partial, cfg.NonPrivate)
			correct, es.TrainAcc = int(st.Partial.TrainAcc), 0
		}
		res.ResumedFromStep = step
		charged = step
		if pv.Ledger != nil && pv.Ledger.Steps > charged {
			charged = pv.Ledger.Steps // the epoch in progress was charged whole
		}
	}
	// save writes a checkpoint at the current position (nothing without a path). It never
	// writes non-finite parameters: checkpoint.Write refuses them.
	save := func(final bool) error {
		if ck.Path == "" {
			return nil
		}
		st := checkpoint.State{Step: step, Epoch: step / m, StepInEpoch: step % m, TotalSteps: total, Examples: examples,
			Final: final, StoppedByBudget: res.StoppedByBudget, Generation: ckr.gen, Noise: ckr.noise}
		for _, h := range res.History {
			st.History = append(st.History, toCheckpointStats(h))
		}
		if st.StepInEpoch > 0 {
			st.Partial = toCheckpointStats(es)
			st.Partial.TrainAcc = float64(correct)
		}
		if err := r.be.pull(true); err != nil {
			return fmt.Errorf("checkpoint at step %d: %w", step, err)
		}
		if err := ckr.current(); err != nil {
			return fmt.Errorf("checkpoint at step %d: %w", step, err)
		}
		if err := checkpoint.Write(ck.Path, r.snapshot(cc, st, &pv)); err != nil {
			return fmt.Errorf("checkpoint at step %d: %w", step, err)
		}
		res.Checkpoints++
		res.LastCheckpointStep = step
		return nil
	}
	due := func() bool { return ck.Every > 0 && step%ck.Every == 0 }
	// stopped ends the run early (interrupted or diverged): the epoch in progress counts in
	// the guards' totals.
	start := time.Now()
	startExamples := examples
	stopped := func() error {
		res.NonFinite += es.NonFinite
		res.NonFiniteLoss += es.NonFiniteLoss
		ferr := r.finish(res, test, step)
		res.finishRate(start, examples-startExamples)
		return ferr
	}
	// A first checkpoint before any step: an unwritable path fails now, not after the run, and
	// a resume's checkpoint carries its generation and noise segments at once.
	if err := save(false); err != nil {
		return res, err
	}
	prog.Start(total)
	defer prog.Finish()
	for epoch := epoch0; epoch < cfg.Epochs; epoch++ {
		first := 0
		if epoch == epoch0 {
			first = s0
		}
		t0 := time.Now()
		if first == 0 {
			// The per-epoch privacy check: the next epoch runs only if, after it, the run is
			// still within the budget.
			if pv.Budget != nil && !cfg.NonPrivate {
				within, err := pv.Budget.Within(pv.Accountant, step+m)
				if err != nil {
					return res, fmt.Errorf("privacy check before epoch %d: %w", epoch+1, err)
				}
				if !within {
					res.StoppedByBudget = true
					break
				}
			}
			es = EpochStats{Epoch: epoch + 1}
			correct = 0
			if es.Epsilon, err = epsAt(step + m); err != nil {
				return res, err
			}
			// Charge the epoch before its first step (the ledger invariant, CheckpointOptions).
			if pv.Ledger != nil && !cfg.NonPrivate && pv.Ledger.Steps < step+m {
				if err := pv.Ledger.Record(es.Epoch, step+m, es.Epsilon); err != nil {
					return res, fmt.Errorf("privacy ledger before epoch %d: %w", es.Epoch, err)
				}
			}
			charged = step + m
		} else {
			t0 = t0.Add(-time.Duration(es.Seconds * float64(time.Second)))
		}
		for s := first; s < m; s++ {
			if err := ctx.Err(); err != nil {
				res.Interrupted = true
				es.Seconds = time.Since(t0).Seconds()
				werr := save(true)
				ferr := stopped()
				return res, errors.Join(fmt.Errorf("%w at epoch %d, step %d of %d (%d steps done): %w", ErrInterrupted, epoch+1, s+1, m, step, err), werr, ferr)
			}
			r.idx = smp.Batch(epoch, s, r.idx)
			st, err := r.step(train, r.idx, step, total, expected)
			if err != nil {
				if errors.Is(err, ErrDiverged) {
					res.Diverged, res.DivergedAt = true, step+1
					step++
					ferr := stopped()
					return res, errors.Join(fmt.Errorf("epoch %d step %d: %w; %s", epoch+1, s+1, err, lastGood(res)), ferr)
				}
				return res, fmt.Errorf("epoch %d step %d: %w", epoch+1, s+1, err)
			}
			step++
			examples += st.BatchSize
			es.ExamplesSeen += st.BatchSize
			if math.IsNaN(st.Loss) || math.IsInf(st.Loss, 0) {
				es.NonFiniteLoss++
			} else {
				es.TrainLoss += st.Loss
			}
			correct += st.Correct
			es.NonFinite += st.NonFinite
			es.ClippedFrac += float64(st.Clipped)
			why, err := r.diverged()
			if err != nil {
				return res, fmt.Errorf("epoch %d step %d: %w", epoch+1, s+1, err)
			}
			if why != "" {
				res.Diverged, res.DivergedAt = true, step
				ferr := stopped()
				return res, errors.Join(fmt.Errorf("%w at epoch %d, step %d: %s; %s", ErrDiverged, epoch+1, s+1, why, lastGood(res)), ferr)
			}
			eps := math.NaN()
			if s == m-1 { // ε once per epoch: it is the epoch's record too
				eps = es.Epsilon
			}
			prog.Step(step, st, eps)
			if s < m-1 && due() {
				es.Seconds = time.Since(t0).Seconds()
				if err := save(false); err != nil {
					return res, err
				}
			}
		}
		if es.ExamplesSeen > 0 {
			es.TrainLoss /= float64(es.ExamplesSeen)
			es.TrainAcc = float64(correct) / float64(es.ExamplesSeen)
			es.ClippedFrac /= float64(es.ExamplesSeen)
		}
		es.Steps = step
		if err := r.be.pull(false); err != nil {
			return res, fmt.Errorf("epoch %d: %w", epoch+1, err)
		}
		if es.TestAcc, err = r.evaluate(test); err != nil {
			return res, err
		}
		es.Seconds = time.Since(t0).Seconds()
		res.History = append(res.History, es)
		res.NonFinite += es.NonFinite
		res.NonFiniteLoss += es.NonFiniteLoss
		res.EpochsRun = epoch + 1
		prog.Epoch(es)
		es = EpochStats{}
		if due() && epoch < cfg.Epochs-1 {
			if err := save(false); err != nil {
				return res, err
			}
		}
	}
	if err := save(true); err != nil {
		return res, err
	}
	if err := r.finish(res, test, step); err != nil {
		return res, err
	}
	res.finishRate(start, examples-startExamples)
	if res.EpochsRun > 0 {
		res.TestAccuracy = res.History[len(res.History)-1].TestAcc
	}
	return res, nil
}

// finalEpsilon sets the run's ε to what the privacy charged so far covers (charged steps,
// at least the steps taken) and records those steps in EpsilonSteps. The ledger's last entry
// is used when it covers them (the value the checkpoint carries); otherwise the accountant is
// asked. A run that took no step and charged nothing has spent ε = 0. An ε that is NaN is an
// error, never reported as a number.
func (res *Result) finalEpsilon(pv Privacy, charged int) error {
	charged = max(charged, res.Steps)
	res.EpsilonSteps = charged
	if charged == 0 {
		res.Epsilon = 0
		return nil
	}
	var eps float64
	if l := pv.Ledger; l != nil && len(l.Epochs) > 0 && l.Epochs[len(l.Epochs)-1].Steps == charged {
		eps = l.Epochs[len(l.Epochs)-1].Epsilon
	} else {
		var err error
		if eps, err = pv.Accountant.Epsilon(charged, pv.Delta); err != nil {
			res.Epsilon = math.NaN()
			return fmt.Errorf("privacy: ε after %d steps: %w", charged, err)
		}
	}
	res.Epsilon = eps
	if math.IsNaN(eps) {
		return fmt.Errorf("privacy: the accountant %s gave ε = NaN after %d steps", pv.Accountant.Name(), charged)
	}
	return nil
}

// lastGood says which checkpoint a stopped run leaves.
func lastGood(res *Result) string {
	if res.LastCheckpointStep < 0 {
		return "no checkpoint was written"
	}
	return fmt.Sprintf("the last good checkpoint (step %d) is intact", res.LastCheckpointStep)
}

// diverged returns why the run can no longer continue, or "": its parameters (or their moving
// average) are not finite. It looks at released values only.
func (r *run[T]) diverged() (string, error) {
	ok, err := r.be.paramsFinite()
	if err != nil {
		return "", err
	}
	if !ok {
		return "the parameters became non-finite", nil
	}
	if r.ema != nil && !finite(paramSlices[T](r.ema)) {
		return "the moving average of the parameters became non-finite", nil
	}
	// Nothing computed from the training data without noise may stop the run: a step whose
	// every example was non-finite (one hostile record alone in its batch) contributes zero to
	// the sum and the run goes on, or the stop itself would reveal the record. Only the
	// released values (the parameters and their average) decide.
	return "", nil
}

// finishRate sets the throughput from the examples processed in this call.
func (res *Result) finishRate(start time.Time, examples int) {
	res.Seconds = time.Since(start).Seconds()
	res.ExamplesPerSecond = 0
	if res.Seconds > 0 {
		res.ExamplesPerSecond = float64(examples) / res.Seconds
	}
}

// finish records the final position and parameters' digest (and, for an interrupted run, the
// test accuracy of the parameters it stopped with). On the device it first brings the
// parameters back; if that fails, the digest is left empty and the error returned.
func (r *run[T]) finish(res *Result, test *datasets.Dataset, steps int) error {
	res.Steps = steps
	if err := r.be.pull(false); err != nil {
		return err
	}
	res.ParamsDigest = digest(paramSlices[T](r.params))
	res.Model = r.released()
	if res.Interrupted && test != nil {
		res.TestAccuracy, _ = r.evaluate(test)
	}
	return nil
}

func (r *run[T]) close() {
	if r.be != nil {
		r.be.close()
	}
	if r.dev != nil {
		_ = r.dev.Close()
	}
	for _, ev := range r.evals {
		_ = ev.net.Close()
	}
}

// digest hashes the parameters' bit patterns.
func digest[T kernels.Float](ps [][]T) string {
	h := sha256.New()
	var buf [8]byte
	for _, p := range ps {
		for _, v := range p {
			binary.LittleEndian.PutUint64(buf[:], math.Float64bits(float64(v)))
			h.Write(buf[:])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
