package engine

import (
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/kernels"
)

// backend runs the numbers of one DP step (docs/design.md, "One step"): the per-example
// clipped sum, the noise added to it, the normalization and the optimizer's update. What the
// step does — the clip bound, which noise with which key, the learning rate, the guards — is
// decided once, by run.dpStep, for every backend; schedules, the ledger and checkpoints are
// the loop's. Two backends implement it: cpuBackend (Gorgonia graphs and the CPU kernels,
// replicas over physical batches) and cudaBackend (float32 models on a CUDA device).
type backend interface {
	// clippedSum sets the backend's sums to the clipped per-example gradient sum of the
	// examples idx of ds, each example's gradient scaled to norm at most clip (+Inf: no
	// clipping), and returns the batch's statistics.
	clippedSum(ds *datasets.Dataset, idx []int, clip float64) (StepStats, error)
	// addGaussian adds N(0, std²) to every coordinate of the sums, parameter p's noise drawn
	// from key with key.Tensor = p.
	addGaussian(std float64, key kernels.NoiseKey) error
	// addBall adds one draw uniform in the ball of the given radius over all the sums
	// together (kernels.AddBall's keys).
	addBall(radius float64, key kernels.NoiseKey) error
	// addSecure adds N(0, std²) from the secure source src.
	addSecure(src *kernels.SecureSource, std float64) error
	// apply divides the noisy sums by the expected (public) batch size, checks that the result
	// is finite (an error wrapping ErrDiverged otherwise, the parameters unchanged) and
	// applies the optimizer's update u to the parameters.
	apply(expected float64, u update) error
	// pull brings the host's parameters (and, with moments, the optimizer's moments) up to
	// date; push uploads them (after a restore). Both are no-ops on the CPU, whose host
	// values are the backend's.
	pull(moments bool) error
	push() error
	// paramsFinite reports whether every parameter is finite (the divergence guard).
	paramsFinite() (bool, error)
	close()
}

// noiseKind is the noise a step adds.
type noiseKind int

const (
	noiseNone     noiseKind = iota // a non-private step, or σ = 0
	noiseGaussian                  // Gaussian from the seeded counter-based stream
	noiseBall                      // one draw uniform in a ball
	noiseSecure                    // Gaussian from the secure source
)

// stepNoise is the noise of one step: its kind, std (Gaussian) or radius (ball), and the key
// of the stream it is drawn from (not used by secure noise).
type stepNoise struct {
	kind   noiseKind
	std    float64
	radius float64
	key    kernels.NoiseKey
}

// dpStep is the DP step, written once for every backend (docs/design.md steps 2–7): the
// clipped sum of the batch idx, its noise, the division by the expected batch size, the
// finiteness check and the optimizer's update at rate lr, then the moving average. Each
// example's gradient is clipped to kernels.ClipBound(C) — C less T's rounding margin — so that
// it stays within C once rounded; a non-private run does not clip.
func (r *run[T]) dpStep(ds *datasets.Dataset, idx []int, noise stepNoise, lr, expected float64) (StepStats, error) {
	clip := kernels.ClipBound[T](r.cfg.Clip)
	if r.cfg.NonPrivate {
		clip = math.Inf(1)
	}
	if cb, ok := r.be.(*cpuBackend[T]); ok {
		cb.setDropoutStep(noise.key)
	}
	var st StepStats
	var err error
	if r.users != nil || r.aug != nil {
		// A user-level step (users.go): idx are users, r.ub their records; or an augmented
		// step (augment.go): r.ub the examples' views.
		us, ok := r.be.(userSummer)
		if !ok {
			return st, fmt.Errorf("engine: a user-level or augmented step needs the CPU backend")
		}
		var views *viewStep
		if r.aug != nil {
			views = &r.view
		}
		st, err = us.clippedSumUsers(ds, &r.ub, clip, views)
	} else {
		st, err = r.be.clippedSum(ds, idx, clip)
	}
	if err != nil {
		return st, r.deviceErr(err)
	}
	switch noise.kind {
	case noiseGaussian:
		err = r.be.addGaussian(noise.std, noise.key)
	case noiseBall:
		err = r.be.addBall(noise.radius, noise.key)
	case noiseSecure:
		err = r.be.addSecure(r.secure, noise.std)
	}
	if err != nil {
		return st, r.deviceErr(err)
	}
	// The step count moves only when the update is applied: a diverged step leaves the
	// optimizer as it was.
	u := r.opt.kind.update(&r.opt.cfg, r.opt.t+1, lr)
	if err := r.be.apply(expected, u); err != nil {
		return st, r.deviceErr(err)
	}
	r.opt.t++
	if r.ema != nil {
		if err := r.be.pull(false); err != nil {
			return st, err
		}
		emaUpdate(paramSlices[T](r.ema), paramSlices[T](r.params), r.cfg.Optimizer.EMA)
	}
	return st, nil
}

// cpuBackend is the CPU backend of the DP step: the replicas' Gorgonia graphs and the CPU
// kernels, the sums in float64 (gradStep says why), the parameters and optimizer state the
// run's own.
type cpuBackend[T kernels.Float] struct {
	reps   []*replica[T]
	phys   int
	sums   [][]float64 // the clipped sum and its noise, in float64 (see gradStep)
	grads  [][]T       // the noisy sum over the expected batch, rounded to T
	rows   []int
	mask   []float64
	params [][]T
	opt    *optimizer[T]
	uc     userChunkBufs // a user-level step's physical batches
}

func (b *cpuBackend[T]) clippedSum(ds *datasets.Dataset, idx []int, clip float64) (StepStats, error) {
	return gradStep(b.reps, ds, idx, b.phys, clip, b.sums, b.rows, b.mask)
}

func (b *cpuBackend[T]) addGaussian(std float64, key kernels.NoiseKey) error {
	for p, g := range b.sums {
		k := key
		k.Tensor = uint32(p)
		kernels.AddGaussian(g, std, k)
	}
	return nil
}

func (b *cpuBackend[T]) addBall(radius float64, key kernels.NoiseKey) error {
	kernels.AddBall(b.sums, radius, key)
	return nil
}

func (b *cpuBackend[T]) addSecure(src *kernels.SecureSource, std float64) error {
	for _, g := range b.sums {
		kernels.AddSecureGaussian(src, g, std)
	}
	return nil
}

// apply rounds the noisy float64 sums over the expected batch size to T (after the noise:
// post-processing; for a float64 T this is g·(1/expected) bit for bit), checks them and
// updates the parameters.
func (b *cpuBackend[T]) apply(expected float64, u update) error {
	inv := 1 / expected
	for p, g := range b.grads {
		for j, v := range b.sums[p] {
			g[j] = T(v * inv)
		}
	}
	if err := checkFinite(b.grads); err != nil {
		return err
	}
	applyUpdate(u, b.params, b.grads, b.opt.m, b.opt.v)
	return nil
}

func (b *cpuBackend[T]) pull(bool) error { return nil }
func (b *cpuBackend[T]) push() error     { return nil }

func (b *cpuBackend[T]) paramsFinite() (bool, error) { return finite(b.params), nil }

func (b *cpuBackend[T]) close() {
	for _, rep := range b.reps {
		_ = rep.net.Close()
	}
}
