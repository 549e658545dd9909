package ball

import (
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/privacy"
)

// Name is the accountant's method name (Accountant.Name).
const Name = "ball-tv"

// SamplerUniform is Tholeti's Algorithm 1: each step uses one example drawn
// uniformly (with replacement) from the N. The engine's shuffle sampler with
// batch size 1 is not this sampler (it is a permutation: see Accountant).
const SamplerUniform = "uniform"

// AdjacencyReplaceOne is the neighbouring relation of Tholeti's paper: the datasets
// have the same size and differ in one record.
const AdjacencyReplaceOne = "replace one"

// Samplers returns the samplers the Accountant is proven for.
func Samplers() []string {
	return []string{privacy.SamplerAllocation, privacy.SamplerPoisson, privacy.SamplerShuffle, SamplerUniform}
}

// Adjacency returns the neighbouring relation the Accountant uses for
// sampler: zero-out for shuffle and allocation, add/remove one for Poisson,
// replace one for uniform; "" for any other sampler.
func Adjacency(sampler string) string {
	switch sampler {
	case privacy.SamplerShuffle, privacy.SamplerAllocation:
		return privacy.AdjacencyZeroOut
	case privacy.SamplerPoisson:
		return privacy.AdjacencyAddRemove
	case SamplerUniform:
		return AdjacencyReplaceOne
	}
	return ""
}

// DistanceFor returns the distance Δ between the noised sums of neighbouring
// datasets when per-example gradients are clipped to norm clip = C, under the
// sampler's adjacency: C for zero-out (the record against a ghost with a zero
// gradient) and add/remove one (the record present or absent), 2C for replace
// one (two clipped gradients, each of norm ≤ C).
func DistanceFor(sampler string, clip float64) (float64, error) {
	if !(clip > 0) || math.IsInf(clip, 1) {
		return 0, fmt.Errorf("ball: clip = %g out of range (0, +Inf): %w", clip, privacy.ErrInvalidArgument)
	}
	switch Adjacency(sampler) {
	case privacy.AdjacencyZeroOut, privacy.AdjacencyAddRemove:
		return clip, nil
	case AdjacencyReplaceOne:
		return 2 * clip, nil
	}
	return 0, fmt.Errorf("ball: sampler = %q, want one of %v: %w", sampler, Samplers(), privacy.ErrInvalidArgument)
}

// Config describes a DP-SGD run with ball noise.
type Config struct {
	// Sampler is shuffle, allocation, poisson or uniform (Samplers).
	Sampler string
	// Dim is d, the dimension of the noise (the number of parameters).
	Dim int
	// Distance is Δ, the largest ℓ2 distance between the noised sums of two
	// neighbouring datasets under the sampler's adjacency (DistanceFor), and
	// Radius is r, in the same units.
	Distance, Radius float64
	// StepsPerEpoch is M, the steps of one epoch (shuffle, allocation).
	StepsPerEpoch int
	// SampleRate is q in (0, 1] (poisson).
	SampleRate float64
	// DatasetSize is N, the points one example is drawn from (uniform).
	DatasetSize int
}

// Validate checks the sampler and the parameters it needs.
func (c Config) Validate() error {
	if err := checkGeometry(c.Dim, c.Distance, c.Radius); err != nil {
		return err
	}
	return c.validateSampler()
}

// validateSampler checks the sampler and its geometry.
func (c Config) validateSampler() error {
	switch c.Sampler {
	case privacy.SamplerShuffle, privacy.SamplerAllocation:
		if c.StepsPerEpoch < 1 {
			return fmt.Errorf("ball: steps per epoch = %d out of range [1, +Inf) for sampler %s: %w", c.StepsPerEpoch, c.Sampler, privacy.ErrInvalidArgument)
		}
	case privacy.SamplerPoisson:
		if !(c.SampleRate > 0 && c.SampleRate <= 1) {
			return fmt.Errorf("ball: sample rate = %g out of range (0, 1] for sampler poisson: %w", c.SampleRate, privacy.ErrInvalidArgument)
		}
	case SamplerUniform:
		if c.DatasetSize < 1 {
			return fmt.Errorf("ball: dataset size = %d out of range [1, +Inf) for sampler uniform: %w", c.DatasetSize, privacy.ErrInvalidArgument)
		}
	default:
		return fmt.Errorf("ball: sampler = %q, want one of %v: %w", c.Sampler, Samplers(), privacy.ErrInvalidArgument)
	}
	return nil
}

// Accountant is the privacy.Accountant of DP-SGD with noise drawn uniformly
// from the volume of a d-ball of radius r added to the clipped gradient sum
// (Tholeti; docs/accounting.md). It only makes (0, δ) statements (see
// Epsilon and Delta). With δ_s = StepDelta(d, Δ, r), one composition unit is a
// (0, δ')-DP mechanism and k units compose exactly to 1 − (1 − δ')ᵏ
// (ComposeExact, valid under adaptive composition: each unit's guarantee holds
// given any history, which is what the coupling argument there needs):
//
//   - shuffle, allocation (zero-out adjacency, Δ = C): in every epoch the
//     record is in at most one step (a permutation cut into batches, or one
//     uniform round per epoch); the batch assignment does not depend on the
//     data (a zero-out ghost keeps its slot), so release it to the adversary.
//     Given it and the same history, the steps without the record have the
//     same distribution on both datasets and the one with it has d_TV ≤ δ_s
//     (the sums differ by the clipped gradient, norm ≤ C = Δ; d_TV increases
//     with the distance, Tholeti Eq. 10). So an epoch is (0, δ_s)-DP: δ' = δ_s,
//     k = E = ⌈steps/M⌉, a started epoch counting as a whole one. No
//     amplification by the record's random position is claimed. Shuffle with
//     batch size 1 is this case, not Tholeti's sampling with replacement.
//   - poisson (add/remove one, Δ = C): each step includes the record with
//     probability q independently of everything else, so given the history the
//     step's output on the larger dataset is (1 − q)·P + q·Q where P is its
//     output on the smaller one, and d_TV((1−q)P + qQ, P) = q·d_TV(Q, P) ≤ q·δ_s
//     (the other records' inclusion is the same on both sides; mix over it).
//     δ' = q·δ_s, k = steps.
//   - uniform, Tholeti's Algorithm 1 (replace one, Δ = 2C): a step reads the
//     differing record with probability 1/N, so δ' = δ_s/N (Amplify), k = steps.
//     The paper's own total, min(1, steps·δ_s/N), is DeltaTotalSum.
//
// Truncated Poisson sampling is not covered (a truncated batch can drop
// another record when one is added, moving the sum by up to 2C).
type Accountant struct {
	cfg  Config
	step float64 // δ_s
	unit float64 // δ'
}

var _ privacy.Accountant = (*Accountant)(nil)

// NewAccountant returns the accountant of cfg.
func NewAccountant(cfg Config) (*Accountant, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	step, err := StepDelta(cfg.Dim, cfg.Distance, cfg.Radius)
	if err != nil {
		return nil, err
	}
	return &Accountant{cfg: cfg, step: step, unit: unitDelta(cfg, step)}, nil
}

// unitDelta returns δ' of one composition unit for step δ s.
func unitDelta(cfg Config, s float64) float64 {
	switch cfg.Sampler {
	case privacy.SamplerPoisson:
		return cfg.SampleRate * s
	case SamplerUniform:
		return s / float64(cfg.DatasetSize)
	}
	return s
}

// units returns the composition units after steps ≥ 0 steps.
func units(cfg Config, steps int) int {
	if steps <= 0 {
		return 0
	}
	switch cfg.Sampler {
	case privacy.SamplerShuffle, privacy.SamplerAllocation:
		return privacy.EpochsOf(steps, cfg.StepsPerEpoch)
	}
	return steps
}

// Name returns "ball-tv".
func (a *Accountant) Name() string { return Name }

// Sampler returns the sampler of the configuration.
func (a *Accountant) Sampler() string { return a.cfg.Sampler }

// Adjacency returns the sampler's neighbouring relation (see Adjacency).
func (a *Accountant) Adjacency() string { return Adjacency(a.cfg.Sampler) }

// Config returns the configuration.
func (a *Accountant) Config() Config { return a.cfg }

// StepDelta returns δ_s, the δ of one noised step that uses the record.
func (a *Accountant) StepDelta() float64 { return a.step }

// UnitDelta returns δ', the δ of one composition unit: δ_s for an epoch of
// shuffle or allocation, q·δ_s for a Poisson step, δ_s/N for a uniform step.
func (a *Accountant) UnitDelta() float64 { return a.unit }

// Units returns k, the units composed after steps steps: the epochs begun,
// ⌈steps/M⌉, for shuffle and allocation; steps otherwise.
func (a *Accountant) Units(steps int) int { return units(a.cfg, steps) }

// DeltaTotal returns 1 − (1 − δ')ᵏ after steps steps (ComposeExact).
func (a *Accountant) DeltaTotal(steps int) (float64, error) {
	if err := checkSteps(steps); err != nil {
		return 0, err
	}
	return ComposeExact(a.unit, a.Units(steps))
}

// DeltaTotalSum returns min(1, k·δ') after steps steps (ComposeSum), the
// composition Tholeti uses; it is never below DeltaTotal.
func (a *Accountant) DeltaTotalSum(steps int) (float64, error) {
	if err := checkSteps(steps); err != nil {
		return 0, err
	}
	return ComposeSum(a.unit, a.Units(steps))
}

// Epsilon returns 0 when the run is (0, delta)-DP after steps steps, that is
// when DeltaTotal(steps) ≤ delta. Otherwise no ε helps: with bounded noise the
// privacy loss is 0 or ±∞ (an output outside the overlap of the balls names
// the dataset), δ(ε) is the same for every ε, and the error wraps
// privacy.ErrUnreachable. delta outside (0, 1) wraps ErrInvalidArgument.
func (a *Accountant) Epsilon(steps int, delta float64) (float64, error) {
	if !(delta > 0 && delta < 1) {
		return 0, fmt.Errorf("ball: delta = %g out of range (0, 1): %w", delta, privacy.ErrInvalidArgument)
	}
	total, err := a.DeltaTotal(steps)
	if err != nil {
		return 0, err
	}
	if total <= delta {
		return 0, nil
	}
	return 0, fmt.Errorf("ball: after %d steps the run is (0, %.6g)-DP and no ε gives δ = %g with ball noise (the privacy loss is 0 or infinite): %w",
		steps, total, delta, privacy.ErrUnreachable)
}

// Delta returns DeltaTotal(steps) for every eps ≥ 0 (+Inf included): the
// mechanism's δ(ε) does not depend on ε. A NaN or negative eps is an error
// wrapping privacy.ErrInvalidArgument.
func (a *Accountant) Delta(steps int, eps float64) (float64, error) {
	if !(eps >= 0) {
		return 0, fmt.Errorf("ball: eps = %g out of range [0, +Inf]: %w", eps, privacy.ErrInvalidArgument)
	}
	return a.DeltaTotal(steps)
}

// SolveRadiusFor returns the smallest radius (to relative tolerance 1e-10,
// rounded up) at which cfg's accountant has DeltaTotal(steps) ≤ target;
// cfg.Radius is ignored. It returns 0 when every radius meets the target (see
// SolveRadius).
func SolveRadiusFor(cfg Config, steps int, target float64) (float64, error) {
	if err := checkGeometry(cfg.Dim, cfg.Distance, 1); err != nil {
		return 0, err
	}
	if err := cfg.validateSampler(); err != nil {
		return 0, err
	}
	if err := checkSteps(steps); err != nil {
		return 0, err
	}
	k := units(cfg, steps)
	return solveRadius(cfg.Dim, cfg.Distance, target, func(s float64) (float64, error) {
		return ComposeExact(unitDelta(cfg, s), k)
	})
}

// checkSteps validates a step count (≥ 0).
func checkSteps(steps int) error {
	if steps < 0 {
		return fmt.Errorf("ball: steps = %d out of range [0, +Inf): %w", steps, privacy.ErrInvalidArgument)
	}
	return nil
}
