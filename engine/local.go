package engine

import (
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/kernels"
	"gorgonia.org/tensor"
)

// Learner runs single DP-SGD steps on batches that the caller chooses, with a noise multiplier,
// a noise stream and a learning rate given per call. It is the engine's step (docs/design.md, steps
// 2–7: per-example clipping with ghost norms, the clipped sum, Gaussian noise of std σ·C on the
// sum from the counter-based stream kernels.AddGaussian, normalization by the expected batch
// size, the optimizer) without a sampler, an epoch loop or an accountant: the caller does the
// sampling and the privacy accounting. Package federated uses it for the clients' local
// training, where σ differs from client to client and the model is reset to the global one
// before every participation.
//
// A Learner built from a NonPrivate Config takes the same code path with no clipping and no
// noise (σ must then be 0), which is the baseline of the DP-overhead benchmarks.
//
// The parameters are read and written as one flat float64 vector (Params, SetParams) in the
// order of nn.Params.List, each tensor row-major. A Learner is not safe for concurrent use; run
// several Learners to train in parallel.
type Learner struct {
	impl learnerImpl
	cfg  Config
}

// learnerImpl is run[T] seen through a dtype-free interface.
type learnerImpl interface {
	numParams() int
	getParams(dst []float64) error
	setParams(src []float64) error
	localStep(ds *datasets.Dataset, idx []int, std float64, key kernels.NoiseKey, lr, expected float64) (StepStats, error)
	resetOptimizer() error
	evaluateCurrent(ds *datasets.Dataset) (float64, error)
	close()
}

// NewLearner compiles the training and evaluation graphs of cfg.Arch. Of cfg it uses Arch,
// Dtype, PhysicalBatch, Replicas, Clip, NonPrivate, Seed (parameter initialization), Optimizer
// (its name, momentum, Adam constants and weight decay; the learning rate is given per step, so
// Optimizer.Schedule is not used) and EvalBatch; Epochs and Sigma are not used (σ is given per
// step). Optimizer.EMA must be 0: the Learner's parameters are set from outside, which an
// average of past weights would contradict. With Device DeviceCUDA or DeviceAuto (and CUDA,
// OnDeviceFallback) the steps run on the CUDA backend when it can take the model: the device
// opens, and the dataset is uploaded, at the first Step (again when a Step names another
// *Dataset: a dataset changed in place between steps must be passed as a new *Dataset, or the
// device keeps training on the uploaded copy); a DeviceCUDA Learner whose device cannot take
// it fails at that Step.
func NewLearner(cfg Config) (*Learner, error) {
	if cfg.Epochs == 0 {
		cfg.Epochs = 1
	}
	if cfg.Sigma == 0 {
		cfg.Sigma = 1 // per step; Validate wants a value
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("engine: learner: %w", err)
	}
	if cfg.Secure {
		return nil, fmt.Errorf("engine: learner: secure mode: not provided (the caller gives each step's noise stream)")
	}
	if cfg.Checkpoint.active() {
		return nil, fmt.Errorf("engine: learner: checkpoint options: not used by a Learner, want none")
	}
	if cfg.augmenting() {
		return nil, fmt.Errorf("engine: learner: augmentation multiplicity %d, augment %+v: not provided by a Learner, want neither", cfg.AugMult, cfg.Augment)
	}
	if cfg.Optimizer.EMA != 0 {
		return nil, fmt.Errorf("engine: learner: ema %v: want 0 (a Learner's parameters are set from outside)", cfg.Optimizer.EMA)
	}
	var impl learnerImpl
	var err error
	if cfg.Dtype == tensor.Float64 {
		impl, err = newRun[float64](cfg)
	} else {
		impl, err = newRun[float32](cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("engine: learner: %w", err)
	}
	return &Learner{impl: impl, cfg: cfg}, nil
}

// Config returns the validated configuration (defaults filled in).
func (l *Learner) Config() Config { return l.cfg }

// NumParams is the length of the flat parameter vector.
func (l *Learner) NumParams() int { return l.impl.numParams() }

// Params copies the parameters into dst (grown if short) and returns it. It fails only for a
// Learner on a CUDA device whose download fails.
func (l *Learner) Params(dst []float64) ([]float64, error) {
	n := l.impl.numParams()
	if cap(dst) < n {
		dst = make([]float64, n)
	}
	dst = dst[:n]
	if err := l.impl.getParams(dst); err != nil {
		return nil, fmt.Errorf("engine: learner: %w", err)
	}
	return dst, nil
}

// SetParams sets the parameters from src, rounded to the Learner's dtype. src must have
// NumParams finite values.
func (l *Learner) SetParams(src []float64) error {
	if n := l.impl.numParams(); len(src) != n {
		return fmt.Errorf("engine: learner: %d parameters given, want %d", len(src), n)
	}
	for i, v := range src {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("engine: learner: parameter %d = %v, want a finite value", i, v)
		}
	}
	if err := l.impl.setParams(src); err != nil {
		return fmt.Errorf("engine: learner: %w", err)
	}
	return nil
}

// ResetOptimizer clears the optimizer's state (momentum, Adam moments and step count), as at
// the start of a run. It fails only for a Learner on a CUDA device whose transfer fails.
func (l *Learner) ResetOptimizer() error {
	if err := l.impl.resetOptimizer(); err != nil {
		return fmt.Errorf("engine: learner: %w", err)
	}
	return nil
}

// Step performs one logical step on the examples idx of ds (indices may repeat): per-example
// gradients clipped to norm C (Config.Clip), summed, plus Gaussian noise of std sigma·C per
// coordinate from the stream key (key.Tensor is replaced by the parameter's index, so one key
// serves all tensors), divided by expectedBatch (public, never the realized size), then one
// optimizer update at learning rate lr. sigma = 0 adds no noise (the clipping still applies);
// a NonPrivate Learner neither clips nor adds noise and wants sigma = 0.
//
// Bad arguments (an index outside [0, ds.N), a dataset that does not fit the model, sigma < 0,
// lr or expectedBatch ≤ 0, non-finite values) give an error and change nothing.
func (l *Learner) Step(ds *datasets.Dataset, idx []int, sigma float64, key kernels.NoiseKey, lr, expectedBatch float64) (StepStats, error) {
	if ds == nil {
		return StepStats{}, fmt.Errorf("engine: learner step: nil dataset")
	}
	if ds.D != l.cfg.Arch.InputSize() || ds.Classes != l.cfg.Arch.Classes {
		return StepStats{}, fmt.Errorf("engine: learner step: dataset has %d features and %d classes, model wants %d and %d", ds.D, ds.Classes, l.cfg.Arch.InputSize(), l.cfg.Arch.Classes)
	}
	if len(ds.X) != ds.N*ds.D || len(ds.Y) != ds.N {
		return StepStats{}, fmt.Errorf("engine: learner step: dataset %q has inconsistent sizes (N = %d, D = %d, len(X) = %d, len(Y) = %d)", ds.Name, ds.N, ds.D, len(ds.X), len(ds.Y))
	}
	for k, i := range idx {
		if i < 0 || i >= ds.N {
			return StepStats{}, fmt.Errorf("engine: learner step: index %d (position %d) out of range [0, %d)", i, k, ds.N)
		}
		if y := ds.Y[i]; y < 0 || y >= ds.Classes {
			return StepStats{}, fmt.Errorf("engine: learner step: label %d of example %d out of range [0, %d)", y, i, ds.Classes)
		}
	}
	if !(sigma >= 0) || math.IsInf(sigma, 0) {
		return StepStats{}, fmt.Errorf("engine: learner step: sigma %v: want a finite value ≥ 0", sigma)
	}
	if l.cfg.NonPrivate && sigma != 0 {
		return StepStats{}, fmt.Errorf("engine: learner step: sigma %v on a non-private learner: want 0", sigma)
	}
	if !(lr > 0) || math.IsInf(lr, 0) {
		return StepStats{}, fmt.Errorf("engine: learner step: learning rate %v: want a finite value > 0", lr)
	}
	if !(expectedBatch > 0) || math.IsInf(expectedBatch, 0) {
		return StepStats{}, fmt.Errorf("engine: learner step: expected batch %v: want a finite value > 0", expectedBatch)
	}
	return l.impl.localStep(ds, idx, sigma*l.cfg.Clip, key, lr, expectedBatch)
}

// Evaluate returns the accuracy of the current parameters on ds (0 for an empty or nil ds).
func (l *Learner) Evaluate(ds *datasets.Dataset) (float64, error) {
	if ds != nil && ds.N > 0 && (ds.D != l.cfg.Arch.InputSize() || len(ds.X) != ds.N*ds.D || len(ds.Y) != ds.N) {
		return 0, fmt.Errorf("engine: learner evaluate: dataset has %d features (len(X) = %d, N = %d), model wants %d", ds.D, len(ds.X), ds.N, l.cfg.Arch.InputSize())
	}
	return l.impl.evaluateCurrent(ds)
}

// Close releases the compiled graphs.
func (l *Learner) Close() { l.impl.close() }

func (r *run[T]) numParams() int {
	n := 0
	for _, k := range r.sizes {
		n += k
	}
	return n
}

// getParams copies the parameters into dst (from the device first, when the run is there).
func (r *run[T]) getParams(dst []float64) error {
	if r.be != nil {
		if err := r.be.pull(false); err != nil {
			return err
		}
	}
	k := 0
	for _, p := range paramSlices[T](r.params) {
		for _, v := range p {
			dst[k] = float64(v)
			k++
		}
	}
	return nil
}

// setParams sets the parameters from src (and on the device, when the run is there).
func (r *run[T]) setParams(src []float64) error {
	if r.be != nil {
		// The host's moments are a mirror on the device: bring them up to date before push
		// uploads them with the parameters.
		if err := r.be.pull(true); err != nil {
			return err
		}
	}
	k := 0
	for _, p := range paramSlices[T](r.params) {
		for j := range p {
			p[j] = T(src[k])
			k++
		}
	}
	if r.be != nil {
		return r.be.push()
	}
	return nil
}

// resetOptimizer clears the optimizer's moments and step count in place (the backends hold
// the same state).
func (r *run[T]) resetOptimizer() error {
	if r.be != nil {
		if err := r.be.pull(false); err != nil {
			return err
		}
	}
	for _, m := range r.opt.m {
		clear(m)
	}
	for _, v := range r.opt.v {
		clear(v)
	}
	r.opt.t = 0
	if r.be != nil {
		return r.be.push()
	}
	return nil
}

// localStep is run.step with σ·C, the noise stream and the learning rate given by the caller
// (no noise when std is 0); a Learner asking for a device binds its backend to the first
// dataset it steps on.
func (r *run[T]) localStep(ds *datasets.Dataset, idx []int, std float64, key kernels.NoiseKey, lr, expected float64) (StepStats, error) {
	if r.be == nil {
		if err := r.initBackend(ds); err != nil {
			return StepStats{}, err
		}
	}
	noise := stepNoise{key: key}
	if std > 0 {
		noise.kind, noise.std = noiseGaussian, std
	}
	return r.dpStep(ds, idx, noise, lr, expected)
}

// evaluateCurrent is evaluate on the current parameters (brought back from the device first,
// when the run is there).
func (r *run[T]) evaluateCurrent(ds *datasets.Dataset) (float64, error) {
	if r.be != nil {
		if err := r.be.pull(false); err != nil {
			return 0, err
		}
	}
	return r.evaluate(ds)
}
