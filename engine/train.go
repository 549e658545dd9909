// Package engine runs DP-SGD: it builds the model's Gorgonia graphs, draws batches from a
// sampler, forms per-example clipped gradient sums without materializing dense per-example
// gradients, adds Gaussian noise from a counter-based stream, normalizes by the expected batch
// size, updates the parameters, and asks the accountant of the sampler in use, before every
// epoch, whether the epoch still fits the privacy budget (DESIGN.md, "One training step").
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

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/engine/sampler"
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
	// (seed 004's perturbed gradient descent; privacy-math.md §13).
	Noise      string
	Radius     float64 // ball radius, in the units of the clipped gradient sum (NoiseBall)
	NonPrivate bool    // no clipping and no noise (the same code path otherwise)
	Seed       uint64  // parameter initialization, sampling and noise derive from it
	Optimizer  OptimizerConfig
	EvalBatch  int // rows of the evaluation graphs; 0 = 500
}

// Noise mechanisms of Config.Noise.
const (
	NoiseGaussian = "gaussian"
	NoiseBall     = "ball"
)

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
	if c.Epochs < 1 {
		return fmt.Errorf("epochs %d: want ≥ 1", c.Epochs)
	}
	if !c.NonPrivate {
		if !(c.Clip > 0) || math.IsInf(c.Clip, 0) {
			return fmt.Errorf("clip %v: want a finite value > 0", c.Clip)
		}
		switch c.Noise {
		case "", NoiseGaussian:
			c.Noise = NoiseGaussian
			if !(c.Sigma > 0) || math.IsInf(c.Sigma, 0) {
				return fmt.Errorf("sigma %v: want a finite value > 0", c.Sigma)
			}
		case NoiseBall:
			if !(c.Radius > 0 && c.Radius <= kernels.MaxBallRadius) {
				return fmt.Errorf("radius %v: want a value in (0, %g]", c.Radius, kernels.MaxBallRadius)
			}
		default:
			return fmt.Errorf("noise %q: want %s or %s", c.Noise, NoiseGaussian, NoiseBall)
		}
	}
	if c.EvalBatch == 0 {
		c.EvalBatch = 500
	}
	if c.EvalBatch < 1 {
		return fmt.Errorf("eval batch %d: want ≥ 1", c.EvalBatch)
	}
	return c.Optimizer.Validate()
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

// EpochStats is what the loop reports after each epoch.
type EpochStats struct {
	Epoch        int     `json:"epoch"`
	Steps        int     `json:"steps"`
	TrainLoss    float64 `json:"train_loss"`
	TrainAcc     float64 `json:"train_accuracy"`
	TestAcc      float64 `json:"test_accuracy"`
	Epsilon      float64 `json:"epsilon"`
	NonFinite    int     `json:"non_finite_examples"`
	ClippedFrac  float64 `json:"clipped_fraction"`
	Seconds      float64 `json:"seconds"`
	ExamplesSeen int     `json:"examples"`
}

// Result summarizes a run.
type Result struct {
	TestAccuracy      float64
	Epsilon           float64 // spent; NaN for non-private runs
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
	if smp.DatasetSize() != train.N {
		return nil, fmt.Errorf("sampler is for %d examples, dataset has %d", smp.DatasetSize(), train.N)
	}
	if !cfg.NonPrivate && pv.Accountant == nil {
		return nil, fmt.Errorf("a private run needs an accountant")
	}
	if cfg.Dtype == tensor.Float64 {
		return trainT[float64](ctx, cfg, train, test, smp, pv, prog)
	}
	return trainT[float32](ctx, cfg, train, test, smp, pv, prog)
}

// run holds a training run's state.
type run[T kernels.Float] struct {
	cfg    Config
	params *nn.Params
	ema    *nn.Params
	reps   []*replica[T]
	evals  []*evaluator[T]
	grads  [][]T
	opt    *optimizer[T]
	rows   []int
	mask   []float64
	idx    []int
	noise  uint64
}

func newRun[T kernels.Float](cfg Config) (*run[T], error) {
	params, err := nn.NewParams(cfg.Arch, cfg.Dtype, mix(cfg.Seed, 1))
	if err != nil {
		return nil, err
	}
	r := &run[T]{cfg: cfg, params: params, noise: mix(cfg.Seed, 3)}
	for range cfg.Replicas {
		rep, err := newReplica[T](cfg.Arch, params, cfg.PhysicalBatch)
		if err != nil {
			return nil, err
		}
		r.reps = append(r.reps, rep)
	}
	evalParams := params
	if cfg.Optimizer.EMA > 0 {
		r.ema = params.Clone()
		evalParams = r.ema
	}
	for range cfg.Replicas {
		ev, err := newEvaluator[T](cfg.Arch, evalParams, cfg.EvalBatch)
		if err != nil {
			return nil, err
		}
		r.evals = append(r.evals, ev)
	}
	var sizes []int
	for _, p := range params.List {
		n := p.Value.Shape().TotalSize()
		sizes = append(sizes, n)
		r.grads = append(r.grads, make([]T, n))
	}
	r.opt = newOptimizer[T](cfg.Optimizer, sizes)
	return r, nil
}

// step performs one logical DP-SGD step on the batch idx (DESIGN.md steps 2–8).
func (r *run[T]) step(ds *datasets.Dataset, idx []int, step, total int, expectedBatch float64) (StepStats, error) {
	st, err := r.clippedSum(ds, idx)
	if err != nil {
		return st, err
	}
	switch {
	case r.cfg.NonPrivate:
	case r.cfg.Noise == NoiseBall:
		// One draw uniform in the ball over all parameters together: the
		// mechanism's d is the total parameter count.
		kernels.AddBall(r.grads, r.cfg.Radius, kernels.NoiseKey{Seed: r.noise, Step: uint64(step)})
	default:
		std := r.cfg.Sigma * r.cfg.Clip
		for p, g := range r.grads {
			kernels.AddGaussian(g, std, kernels.NoiseKey{Seed: r.noise, Step: uint64(step), Tensor: uint32(p)})
		}
	}
	if err := r.update(expectedBatch, r.cfg.Optimizer.rate(step, total)); err != nil {
		return st, err
	}
	if r.ema != nil {
		emaUpdate(paramSlices[T](r.ema), paramSlices[T](r.params), r.cfg.Optimizer.EMA)
	}
	return st, nil
}

// clippedSum computes the batch idx's clipped per-example gradient sum into r.grads (DESIGN.md
// steps 2–5); a non-private run does not clip.
func (r *run[T]) clippedSum(ds *datasets.Dataset, idx []int) (StepStats, error) {
	clip := r.cfg.Clip
	if r.cfg.NonPrivate {
		clip = math.Inf(1)
	}
	return gradStep(r.reps, ds, idx, r.cfg.PhysicalBatch, clip, r.grads, r.rows, r.mask)
}

// update divides the noisy sum in r.grads by the expected (public) batch size, never the
// realized one, checks that it is finite, and takes an optimizer step at rate lr (DESIGN.md
// steps 7–8).
func (r *run[T]) update(expectedBatch, lr float64) error {
	inv := T(1 / expectedBatch)
	for _, g := range r.grads {
		for j := range g {
			g[j] *= inv
		}
	}
	if err := checkFinite(r.grads); err != nil {
		return err
	}
	r.opt.step(paramSlices[T](r.params), r.grads, lr)
	return nil
}

func paramSlices[T kernels.Float](p *nn.Params) [][]T {
	out := make([][]T, len(p.List))
	for i, q := range p.List {
		out[i] = q.Value.Data().([]T)
	}
	return out
}

func trainT[T kernels.Float](ctx context.Context, cfg Config, train, test *datasets.Dataset, smp sampler.Sampler, pv Privacy, prog Progress) (*Result, error) {
	r, err := newRun[T](cfg)
	if err != nil {
		return nil, err
	}
	defer r.close()
	m := smp.StepsPerEpoch()
	total := cfg.Epochs * m
	expected := smp.ExpectedBatchSize()
	res := &Result{Delta: pv.Delta, Epsilon: math.NaN()}
	epsAt := func(steps int) (float64, error) {
		if cfg.NonPrivate || pv.Accountant == nil {
			return math.NaN(), nil
		}
		return pv.Accountant.Epsilon(steps, pv.Delta)
	}
	start := time.Now()
	examples := 0
	prog.Start(total)
	defer prog.Finish()
	step := 0
	for epoch := range cfg.Epochs {
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
		t0 := time.Now()
		var es EpochStats
		es.Epoch = epoch + 1
		correct := 0
		for s := range m {
			if err := ctx.Err(); err != nil {
				res.Interrupted = true
				r.finish(res, test, start, examples, step)
				return res, fmt.Errorf("%w at epoch %d, step %d of %d (%d steps done): %w", ErrInterrupted, epoch+1, s+1, m, step, err)
			}
			r.idx = smp.Batch(epoch, s, r.idx)
			st, err := r.step(train, r.idx, step, total, expected)
			if err != nil {
				return res, fmt.Errorf("epoch %d step %d: %w", epoch+1, s+1, err)
			}
			step++
			examples += st.BatchSize
			es.ExamplesSeen += st.BatchSize
			es.TrainLoss += st.Loss
			correct += st.Correct
			es.NonFinite += st.NonFinite
			es.ClippedFrac += float64(st.Clipped)
			eps := math.NaN()
			if s == m-1 { // ε once per epoch: it is the epoch's record too
				if es.Epsilon, err = epsAt(step); err != nil {
					return res, err
				}
				eps = es.Epsilon
			}
			prog.Step(step, st, eps)
		}
		if es.ExamplesSeen > 0 {
			es.TrainLoss /= float64(es.ExamplesSeen)
			es.TrainAcc = float64(correct) / float64(es.ExamplesSeen)
			es.ClippedFrac /= float64(es.ExamplesSeen)
		}
		es.Steps = step
		if es.TestAcc, err = r.evaluate(test); err != nil {
			return res, err
		}
		es.Seconds = time.Since(t0).Seconds()
		if pv.Ledger != nil && !cfg.NonPrivate {
			if err := pv.Ledger.Record(es.Epoch, step, es.Epsilon); err != nil {
				return res, fmt.Errorf("privacy ledger after epoch %d: %w", es.Epoch, err)
			}
		}
		res.History = append(res.History, es)
		res.NonFinite += es.NonFinite
		res.EpochsRun = epoch + 1
		prog.Epoch(es)
	}
	r.finish(res, test, start, examples, step)
	if res.EpochsRun > 0 {
		res.TestAccuracy = res.History[len(res.History)-1].TestAcc
	}
	if !cfg.NonPrivate && pv.Accountant != nil {
		if n := len(res.History); n > 0 && res.History[n-1].Steps == step {
			res.Epsilon = res.History[n-1].Epsilon // already accounted at the epoch's end
		} else if res.Epsilon, err = epsAt(step); err != nil {
			return res, err
		}
	}
	return res, nil
}

func (r *run[T]) finish(res *Result, test *datasets.Dataset, start time.Time, examples, steps int) {
	res.Steps = steps
	res.ParamsDigest = digest(paramSlices[T](r.params))
	res.Seconds = time.Since(start).Seconds()
	if res.Seconds > 0 {
		res.ExamplesPerSecond = float64(examples) / res.Seconds
	}
	if res.Interrupted && test != nil {
		res.TestAccuracy, _ = r.evaluate(test)
	}
}

func (r *run[T]) close() {
	for _, rep := range r.reps {
		_ = rep.net.Close()
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

// mix derives independent 64-bit seeds from one seed (splitmix64 finalizer).
func mix(seed, stream uint64) uint64 {
	z := seed + stream*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
