package dpsgd

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/engine/sampler"
	"github.com/dpsgd/dpsgd/kernels"
	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/accounting"
	"github.com/dpsgd/dpsgd/privacy/ball"
)

// Sampler names how the batches are drawn. Each sampler has its own accountants
// (docs/accounting.md): a guarantee proven for one is never used for another.
type Sampler string

// The samplers.
const (
	// Shuffle cuts a fresh random permutation into ⌊N/BatchSize⌋ fixed batches each epoch.
	// Its accountant treats each epoch as one Gaussian mechanism and claims no amplification.
	Shuffle Sampler = privacy.SamplerShuffle
	// Poisson takes each example independently with probability q = BatchSize/N at each step.
	Poisson Sampler = privacy.SamplerPoisson
	// PoissonTruncated is Poisson sampling with every batch cut at MaxBatch examples; the
	// probability of a cut is added to δ.
	PoissonTruncated Sampler = privacy.SamplerPoissonTruncated
	// Allocation (random allocation) puts each example in one uniformly chosen step of each
	// epoch of round(N/BatchSize) steps.
	Allocation Sampler = privacy.SamplerAllocation
)

// Plan is the privacy side of a training run, stated once. Its zero value is not a valid plan:
// Sampler, BatchSize, Epochs, Clip, Delta and one of Sigma and TargetEpsilon are needed (only
// Sampler, BatchSize and Epochs for a non-private run).
type Plan struct {
	Sampler Sampler
	// BatchSize is the expected (logical) batch size B, in [1, N]. The clipped gradient sum
	// is divided by the expected batch size, never by the realized one.
	BatchSize int
	// MaxBatch is PoissonTruncated's largest batch, ≥ 1; 0 is sampler.DefaultMaxBatch (the
	// expected size plus ten standard deviations plus ten). The other samplers ignore it.
	MaxBatch int
	// Epochs is the number of epochs planned, ≥ 1 (the budget may stop the run earlier).
	Epochs int
	// Clip is the per-example ℓ2 clip norm C, finite and ≥ engine.MinClip.
	Clip float64
	// Sigma is the noise multiplier σ (noise std σ·C per coordinate), finite and > 0; 0
	// calibrates σ so that Epochs epochs spend exactly TargetEpsilon.
	Sigma float64
	// TargetEpsilon is the budget ε, finite and > 0: training stops before an epoch that
	// would exceed it. 0 is no budget (then Sigma must be given).
	TargetEpsilon float64
	// Delta is δ of the reported (ε, δ) guarantee, in (0, 1). With ball noise it is the total
	// δ that the run may spend.
	Delta float64
	// Accountant is the accounting method, one proven for the sampler (accounting.Methods);
	// "" is the sampler's tightest guarantee (accounting.DefaultMethod).
	Accountant string
	// Noise is the mechanism: engine.NoiseGaussian ("" too) or engine.NoiseBall, one draw
	// uniform in a ball over all parameters per step, whose only statement is (0, δ)
	// (perturbed gradient descent with bounded noise; docs/accounting.md). Ball noise takes
	// Radius instead of Sigma and TargetEpsilon.
	Noise string
	// Radius is ball noise's radius as a multiple of Clip (the noise radius is Radius·Clip),
	// in (0, kernels.MaxBallRadius]; 0 calibrates it so that Epochs epochs spend exactly
	// Delta. Gaussian noise needs 0.
	Radius float64
	// Secure draws the noise (an exact discrete Gaussian) and the batches from a
	// cryptographically secure generator seeded by the operating system instead of from
	// Seed, and accounts for the secure sampler's deviation from the ideal Gaussian
	// (engine.SecureAccounting). Gaussian noise only. Seed then only initializes the
	// parameters.
	Secure bool
	// Seed seeds the parameters' initialization and, unless Secure, the batches and the
	// noise: whoever knows it can regenerate the noise, and the guarantee sentence says so.
	Seed uint64
	// NonPrivate trains without clipping and noise (the same code path), as a baseline.
	NonPrivate bool
	// UserLevel makes the user, not the record, the unit of privacy (engine.Config.UserLevel):
	// Resolve's n is then the number of users, BatchSize the expected users per step, the
	// sampler draws users, each drawn user's records go into the step together and the user's
	// summed gradient is clipped to Clip; the guarantee is user-level (neighbouring datasets
	// differ in all records of one user). The training set needs user ids (Dataset.User).
	UserLevel bool
	// MaxUserRecords caps the records one user brings to a step (a seeded subset of a user
	// that owns more), ≥ 0; 0 is the engine's default, the physical batch. UserLevel only. The
	// guarantee does not depend on it: a user's clipped gradient is bounded by Clip whatever
	// the cap.
	MaxUserRecords int
}

// The units of privacy, Private.Unit: what a neighbouring dataset adds or removes.
const (
	UnitRecord = "record"
	UnitUser   = "user"
)

// unitsName names what the plan's n counts, for messages.
func (p Plan) unitsName() string {
	if p.UserLevel {
		return "users"
	}
	return "training examples"
}

// Options are Resolve's hooks; the zero value (or nil) is the default.
type Options struct {
	// Solve, if set, calibrates σ in place of accounting.SolveSigmaCtx(ctx, spec, steps,
	// budget, 0, nil): it returns the noise multiplier (rounded up) at which spec's accountant
	// meets budget after steps steps. A caller sets it to report the search's progress
	// (SolveSigmaCtx's onProbe) or to trade precision for speed (its tolerance). It is given
	// the ideal Gaussian mechanism's spec; in secure mode the budget is what the secure
	// sampler's deviation leaves of the target (engine.SecureAccounting).
	Solve func(ctx context.Context, spec accounting.Spec, steps int, budget privacy.Budget) (float64, error)
	// SamplerKey, if set, returns a secure run's sampler key (sampler.Secure); nil draws one
	// from the operating system. Resolve calls it once, after σ is calibrated and the ledger
	// made, so that a caller that keeps the key (a checkpoint key store) keeps one only for a
	// run that starts. Its error is returned as it is.
	SamplerKey func() ([32]byte, error)
}

// bad returns the FieldError of field.
func bad(field string, cause error, format string, args ...any) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...), Err: cause}
}

// oneOf checks that *v, the value of field, is one of valid (at least two values), and sets
// an empty *v to valid[0], the default; otherwise the FieldError lists the valid values.
func oneOf[T ~string](field string, v *T, valid ...T) error {
	if *v == "" {
		*v = valid[0]
		return nil
	}
	if slices.Contains(valid, *v) {
		return nil
	}
	names := make([]string, len(valid))
	for i, x := range valid {
		names[i] = string(x)
	}
	last := len(names) - 1
	return bad(field, nil, "%q: want %s or %s", *v, strings.Join(names[:last], ", "), names[last])
}

// ball reports whether the plan's noise is ball noise.
func (p Plan) ball() bool { return p.Noise == engine.NoiseBall }

// validate checks every field against its valid range for a run over n examples. The sampler
// and the accountant are checked where they are built (newSampler, checkGuarantee).
func (p *Plan) validate(n int) error {
	if n < 1 {
		return fmt.Errorf("dpsgd: dataset size N = %d: want ≥ 1: %w", n, ErrInvalid)
	}
	switch p.Sampler {
	case Shuffle, Poisson, PoissonTruncated, Allocation:
	default:
		return bad("Sampler", nil, "%q: want %s", p.Sampler, samplerList())
	}
	if p.BatchSize < 1 || p.BatchSize > n {
		return bad("BatchSize", nil, "%d: want a value in [1, %d] (the %s)", p.BatchSize, n, p.unitsName())
	}
	if p.MaxUserRecords < 0 {
		return bad("MaxUserRecords", nil, "%d: want ≥ 1 (0: the physical batch)", p.MaxUserRecords)
	}
	if p.MaxUserRecords != 0 && !p.UserLevel {
		return bad("MaxUserRecords", nil, "%d: for a user-level plan only (UserLevel)", p.MaxUserRecords)
	}
	if p.Epochs < 1 {
		return bad("Epochs", nil, "%d: want ≥ 1", p.Epochs)
	}
	if err := oneOf("Noise", &p.Noise, engine.NoiseGaussian, engine.NoiseBall); err != nil {
		return err
	}
	if !(p.Sigma >= 0) || math.IsInf(p.Sigma, 0) {
		return bad("Sigma", nil, "%v: want a finite value > 0 (0: calibrated to TargetEpsilon)", p.Sigma)
	}
	if !(p.TargetEpsilon >= 0) || math.IsInf(p.TargetEpsilon, 0) {
		return bad("TargetEpsilon", nil, "%v: want a finite value > 0 (0: no budget)", p.TargetEpsilon)
	}
	if !(p.Radius >= 0 && p.Radius <= kernels.MaxBallRadius) {
		return bad("Radius", nil, "%v: want a value in (0, %g] (0: calibrated to spend Delta)", p.Radius, kernels.MaxBallRadius)
	}
	if p.ball() {
		if p.Sigma != 0 {
			return bad("Sigma", nil, "%v with ball noise: ball noise gives (0, δ) guarantees only; give Radius and/or Delta (the total δ)", p.Sigma)
		}
		if p.TargetEpsilon != 0 {
			return bad("TargetEpsilon", nil, "%v with ball noise: ball noise gives (0, δ) guarantees only; give Radius and/or Delta (the total δ)", p.TargetEpsilon)
		}
	} else if p.Radius != 0 {
		return bad("Radius", nil, "%v: for ball noise only (Gaussian noise takes Sigma)", p.Radius)
	}
	if p.Secure {
		if p.NonPrivate {
			return bad("Secure", nil, "with NonPrivate: a non-private run has no noise to secure")
		}
		if p.ball() {
			return bad("Secure", nil, "with ball noise: secure mode provides %s noise only", engine.NoiseGaussian)
		}
	}
	if p.NonPrivate {
		return nil
	}
	if !(p.Clip >= engine.MinClip) || math.IsInf(p.Clip, 0) {
		return bad("Clip", nil, "%v: want a finite value ≥ %g", p.Clip, engine.MinClip)
	}
	if !(p.Delta > 0 && p.Delta < 1) {
		return bad("Delta", nil, "%v: want a value in (0, 1)", p.Delta)
	}
	if !p.ball() && p.Sigma == 0 && p.TargetEpsilon == 0 {
		return bad("TargetEpsilon", nil, "0 with Sigma 0: give σ, or a budget ε to calibrate σ to")
	}
	return nil
}

// Resolve checks the plan for a run over n training examples (n users for a UserLevel plan:
// every statement below then counts users) of the model arch, builds its
// sampler and accountant, calibrates σ (or ball noise's radius) where the plan leaves it 0,
// and starts the ledger. Every error about the plan wraps ErrInvalid (a *FieldError names the
// field); a calibration stopped by ctx returns ctx's error, wrapped. opt may be nil.
//
// The accountant is the sampler's tightest proven guarantee unless Plan.Accountant names
// another one proven for it; an accountant that is not an (ε, δ) guarantee for the sampler
// is refused. The accounting spec has PublicSize set: q and the steps per epoch come from n,
// so n is public and the guarantee is stated for zero-out adjacency. The model matters only
// through its parameter count: ball noise's dimension and secure noise's grid.
func (p Plan) Resolve(ctx context.Context, n int, arch nn.Arch, opt *Options) (*Private, error) {
	if opt == nil {
		opt = &Options{}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if err := p.validate(n); err != nil {
		return nil, err
	}
	if err := arch.Validate(); err != nil {
		return nil, fmt.Errorf("dpsgd: model: %v: %w", err, ErrInvalid)
	}
	priv := &Private{Plan: p, N: n}
	if p.ball() && !p.NonPrivate {
		if err := p.resolveBall(priv, n, arch.NumParams()); err != nil {
			return nil, err
		}
		return priv, nil
	}
	smp, spec, err := p.NewSampler(n)
	if err != nil {
		return nil, err
	}
	if m := smp.StepsPerEpoch(); p.Epochs > MaxSteps/m {
		return nil, bad("Epochs", nil, "%d: %d steps per epoch make more than %d steps in all", p.Epochs, m, MaxSteps)
	}
	priv.Sampler, priv.Spec = smp, spec
	if p.NonPrivate {
		return priv, nil
	}

	// σ: given, or calibrated so that the planned epochs spend exactly the budget.
	newAcc := func(sigma float64) (privacy.Accountant, error) {
		s := spec
		s.Sigma = sigma
		return s.New()
	}
	solve := func(steps int, b privacy.Budget) (float64, error) {
		if opt.Solve != nil {
			return opt.Solve(ctx, spec, steps, b)
		}
		return accounting.SolveSigmaCtx(ctx, spec, steps, b, 0, nil)
	}
	if p.Secure {
		// The secure sampler's output is near, not equal to, the ideal Gaussian's: account for
		// the difference.
		newAcc, solve = engine.SecureAccounting(engine.Config{Arch: arch, Clip: p.Clip}, newAcc, solve)
	}
	priv.Sigma, priv.SigmaSource = p.Sigma, "given"
	if p.Sigma == 0 {
		steps := p.Epochs * smp.StepsPerEpoch()
		sigma, err := solve(steps, privacy.Budget{Epsilon: p.TargetEpsilon, Delta: p.Delta})
		if err != nil && ctx.Err() != nil {
			return nil, fmt.Errorf("dpsgd: calibrating σ: %w", err)
		}
		if err != nil {
			return nil, bad("TargetEpsilon", err, "%v over %d epochs: %v", p.TargetEpsilon, p.Epochs, err)
		}
		priv.Sigma = sigma
		priv.SigmaSource = fmt.Sprintf("calibrated to ε = %g over %d epochs", p.TargetEpsilon, p.Epochs)
	}
	if priv.Accountant, err = newAcc(priv.Sigma); err != nil {
		return nil, bad("Sigma", err, "%v: %v", priv.Sigma, err)
	}
	if p.TargetEpsilon > 0 {
		priv.Budget = &privacy.Budget{Epsilon: p.TargetEpsilon, Delta: p.Delta}
	}
	priv.Spec.Sigma = priv.Sigma
	if priv.Ledger, err = accounting.NewLedger(priv.Spec, p.Delta, priv.Budget); err != nil {
		return nil, fmt.Errorf("dpsgd: ledger: %v: %w", err, ErrInvalid)
	}
	if p.Secure {
		key, err := secureKey(opt)
		if err != nil {
			return nil, err
		}
		if priv.Sampler, err = sampler.Secure(smp, key); err != nil {
			return nil, bad("Secure", err, "with sampler %s: %v", p.Sampler, err)
		}
	}
	return priv, nil
}

// secureKey returns the secure sampler's key: opt.SamplerKey's, or one from the OS.
func secureKey(opt *Options) ([32]byte, error) {
	if opt.SamplerKey != nil {
		return opt.SamplerKey()
	}
	key, err := sampler.NewSecureKey()
	if err != nil {
		return key, fmt.Errorf("dpsgd: secure sampler key: %w", err)
	}
	return key, nil
}

// NewSampler builds the plan's sampler over n examples and the accounting spec of its
// Gaussian accountant, σ left 0: Plan.Accountant, or the sampler's default, refused unless it
// is a proven (ε, δ) guarantee for the sampler. It reads Sampler, BatchSize, MaxBatch,
// Accountant and Seed only. The spec has PublicSize set (zero-out adjacency: n is public).
func (p Plan) NewSampler(n int) (sampler.Sampler, accounting.Spec, error) {
	smp, spec, err := p.newSampler(n)
	if err != nil {
		return nil, spec, err
	}
	spec.Method = p.Accountant
	if spec.Method == "" {
		spec.Method = accounting.DefaultMethod(spec.Sampler)
	}
	if err := checkGuarantee(spec); err != nil {
		return nil, spec, err
	}
	return smp, spec, nil
}

// newSampler builds the sampler and the geometry of its accounting spec (no method).
func (p Plan) newSampler(n int) (sampler.Sampler, accounting.Spec, error) {
	// The run derives q = B/N (and the steps per epoch) from the dataset size, so N is
	// public: the guarantee is stated for zero-out adjacency (PublicSize).
	spec := accounting.Spec{Sampler: string(p.Sampler), PublicSize: true}
	if n < 1 {
		return nil, spec, fmt.Errorf("dpsgd: dataset size N = %d: want ≥ 1: %w", n, ErrInvalid)
	}
	if p.BatchSize < 1 || p.BatchSize > n {
		return nil, spec, bad("BatchSize", nil, "%d: want a value in [1, %d] (the %s)", p.BatchSize, n, p.unitsName())
	}
	var smp sampler.Sampler
	var err error
	q := float64(p.BatchSize) / float64(n)
	switch p.Sampler {
	case Shuffle:
		smp, err = sampler.NewShuffle(n, p.BatchSize, p.Seed)
	case Allocation:
		smp, err = sampler.NewAllocation(n, sampler.AllocationSteps(n, p.BatchSize), p.Seed)
	case Poisson:
		smp, err = sampler.NewPoisson(n, q, p.Seed)
		spec.SampleRate = q
	case PoissonTruncated:
		maxB := p.MaxBatch
		if maxB == 0 {
			maxB = sampler.DefaultMaxBatch(n, q)
		}
		if maxB < 1 {
			return nil, spec, bad("MaxBatch", nil, "%d: want ≥ 1", maxB)
		}
		smp, err = sampler.NewTruncatedPoisson(n, q, maxB, p.Seed)
		spec.SampleRate, spec.DatasetSize, spec.MaxBatch = q, n, maxB
	default:
		return nil, spec, bad("Sampler", nil, "%q: want %s", p.Sampler, samplerList())
	}
	if err != nil {
		return nil, spec, bad("Sampler", err, "%s: %v", p.Sampler, err)
	}
	if p.Sampler == Shuffle || p.Sampler == Allocation {
		spec.Rounds = smp.StepsPerEpoch()
		spec.SampleRate = 1 / float64(spec.Rounds)
	}
	return smp, spec, nil
}

// checkGuarantee refuses a spec whose method is not a proven (ε, δ) guarantee for its sampler.
func checkGuarantee(spec accounting.Spec) error {
	kind, err := spec.Kind()
	if err != nil {
		return bad("Accountant", err, "%q: not available for sampler %s; want one of %s",
			spec.Method, spec.Sampler, strings.Join(accounting.Methods(spec.Sampler), ", "))
	}
	if spec.Method == accounting.MethodChiSquare || spec.Method == accounting.MethodBerryEsseen {
		return bad("Accountant", nil, "%s certifies only a total variation; training reports (ε, δ): use exact, rdp or deterministic", spec.Method)
	}
	if kind != accounting.KindGuarantee {
		return bad("Accountant", nil, "%s for sampler %s is %s, not a guarantee; training needs a guarantee (see dpsgd account to compare)",
			spec.Method, spec.Sampler, kind)
	}
	return nil
}

// resolveBall resolves a ball-noise plan: the accountant of the uniform-ball mechanism for the
// sampler's geometry (d = params, Δ the clipped sum's sensitivity under the sampler's
// adjacency), the radius (given, or calibrated to spend Delta over the planned epochs) and a
// budget of (0, Delta): the run stops before an epoch that would take the total δ above it.
func (p Plan) resolveBall(priv *Private, n, params int) error {
	smp, spec, err := p.newSampler(n)
	if err != nil {
		return err
	}
	if p.Accountant != "" && p.Accountant != accounting.MethodBallTV {
		return bad("Accountant", nil, "%q: ball noise has one accountant, %s", p.Accountant, accounting.MethodBallTV)
	}
	dist, err := ball.DistanceFor(spec.Sampler, p.Clip)
	if err != nil {
		return bad("Sampler", err, "%s with ball noise: want one of %v", p.Sampler, accounting.SamplersFor(accounting.MechanismBall))
	}
	spec.Mechanism, spec.Method = accounting.MechanismBall, accounting.MethodBallTV
	spec.Dim, spec.Distance = params, dist
	spec.DatasetSize, spec.MaxBatch = 0, 0
	probe := spec
	probe.Radius = 1
	if err := probe.Validate(); err != nil {
		return bad("Sampler", err, "%s with ball noise: %v", p.Sampler, err)
	}

	budget := privacy.Budget{Epsilon: 0, Delta: p.Delta}
	r := p.Radius * p.Clip
	priv.SigmaSource = "radius given"
	if p.Radius == 0 {
		steps := p.Epochs * smp.StepsPerEpoch()
		if r, err = accounting.SolveRadius(spec, steps, budget); err != nil {
			return bad("Delta", err, "%v over %d epochs with ball noise: %v", p.Delta, p.Epochs, err)
		}
		priv.SigmaSource = fmt.Sprintf("radius calibrated to a total δ = %g over %d epochs", p.Delta, p.Epochs)
	}
	if !(r > 0 && r <= kernels.MaxBallRadius) {
		return bad("Radius", nil, "r·C = %v (%s) out of range (0, %g]", r, priv.SigmaSource, kernels.MaxBallRadius)
	}
	spec.Radius = r
	acc, err := spec.New()
	if err != nil {
		return bad("Radius", err, "r·C = %v: %v", r, err)
	}
	ledger, err := accounting.NewLedger(spec, p.Delta, &budget)
	if err != nil {
		return fmt.Errorf("dpsgd: ledger: %v: %w", err, ErrInvalid)
	}
	priv.Sampler, priv.Spec, priv.Accountant, priv.Ledger = smp, spec, acc, ledger
	priv.Budget, priv.Radius = &budget, r
	return nil
}
