// Package accounting maps a sampler and an accounting method to the accountant
// proven for that sampler, says what kind of statement each one makes (a
// guarantee, an approximation, a lower bound, or a number that assumes another
// sampler), and keeps a run's accounting state as a small JSON ledger that
// checkpoints carry and from which the accountant is rebuilt.
//
// What may be claimed for which sampler follows docs/accounting.md ("Which
// statement for which sampler"):
//
//	sampler            method          statement
//	poisson            pld (default)   guarantee (add/remove), pessimistic PLD
//	poisson            rdp             guarantee (add/remove)
//	poisson            gdp             approximation (central limit theorem)
//	poisson-truncated  rdp (default)   guarantee, plus the truncation probability
//	shuffle            gdp (default)   guarantee (zero-out): each epoch one Gaussian mechanism
//	shuffle            lower           lower bound (Chua et al. 2024): the true ε is at least this
//	shuffle            rdp, pld        what Poisson accounting would claim: NOT valid for shuffling
//	allocation         exact (default) guarantee (zero-out), van Dijk & Ertan's Gaussian pair
//	allocation         chisq           guarantee, total variation only
//	allocation         berry-esseen    guarantee in its regime (σ ≥ √(3/ln M), M ≥ 3), loose
//	allocation         rdp             guarantee, Rényi DP of the Gaussian pair
//	allocation         deterministic   guarantee, amplification-free (as shuffle's gdp)
//	allocation         gdp             asymptotic μ-GDP of van Dijk & Ertan's Thm 5.2: approximation
//
// With Spec.Mechanism = "ball" (noise drawn uniformly from a d-ball, Tholeti's
// perturbed gradient descent) the one method is ball-tv, a (0, δ) guarantee, for the
// samplers shuffle and allocation (zero-out), poisson (add/remove) and uniform
// (Tholeti's one example drawn per step, replace one); see ball.Accountant.
// An empty Mechanism is "gaussian", and a Gaussian Spec's JSON is unchanged.
package accounting

import (
	"fmt"
	"math"
	"sort"

	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/allocation"
	"github.com/dpsgd/dpsgd/privacy/ball"
	"github.com/dpsgd/dpsgd/privacy/pld"
	"github.com/dpsgd/dpsgd/privacy/shuffle"
)

// Method names, as given to --accountant.
const (
	MethodRDP           = "rdp"
	MethodPLD           = "pld"
	MethodGDP           = "gdp"
	MethodExact         = "exact"
	MethodChiSquare     = "chisq"
	MethodBerryEsseen   = "berry-esseen"
	MethodLower         = "lower"
	MethodDeterministic = "deterministic"
	// MethodBallTV is the total-variation accountant of ball noise
	// (ball.Accountant), the one method of MechanismBall.
	MethodBallTV = ball.Name
)

// Noise mechanisms (Spec.Mechanism).
const (
	MechanismGaussian = "gaussian" // the default; also written as ""
	MechanismBall     = "ball"     // uniform in a d-ball (Tholeti)
)

// Kind is the kind of statement an accountant makes.
type Kind string

// The kinds of statement. Only KindGuarantee may be used for a budget.
const (
	KindGuarantee      Kind = "guarantee"       // a proven upper bound for the sampler used
	KindApproximation  Kind = "approximation"   // an asymptotic estimate, not a bound
	KindLowerBound     Kind = "lower bound"     // the true value is at least this
	KindAssumesPoisson Kind = "assumes poisson" // valid only if the sampler were Poisson
)

// methods lists, per sampler, the methods and the kind of statement each makes.
// The first entry is the default.
var methods = map[string][]struct {
	name string
	kind Kind
}{
	privacy.SamplerPoisson: {
		{MethodPLD, KindGuarantee}, {MethodRDP, KindGuarantee}, {MethodGDP, KindApproximation},
	},
	privacy.SamplerPoissonTruncated: {
		{MethodRDP, KindGuarantee},
	},
	privacy.SamplerShuffle: {
		{MethodGDP, KindGuarantee}, {MethodDeterministic, KindGuarantee}, {MethodLower, KindLowerBound},
		{MethodRDP, KindAssumesPoisson}, {MethodPLD, KindAssumesPoisson},
	},
	privacy.SamplerAllocation: {
		{MethodExact, KindGuarantee}, {MethodChiSquare, KindGuarantee}, {MethodBerryEsseen, KindGuarantee},
		{MethodRDP, KindGuarantee}, {MethodDeterministic, KindGuarantee}, {MethodGDP, KindApproximation},
	},
}

// ballMethods lists, per sampler, the methods of MechanismBall.
var ballMethods = map[string][]struct {
	name string
	kind Kind
}{
	privacy.SamplerShuffle:    {{MethodBallTV, KindGuarantee}},
	privacy.SamplerAllocation: {{MethodBallTV, KindGuarantee}},
	privacy.SamplerPoisson:    {{MethodBallTV, KindGuarantee}},
	ball.SamplerUniform:       {{MethodBallTV, KindGuarantee}},
}

// Mechanisms returns the noise mechanisms this package knows.
func Mechanisms() []string { return []string{MechanismGaussian, MechanismBall} }

// registry returns the method table of mechanism ("" is Gaussian), nil for an
// unknown one.
func registry(mechanism string) map[string][]struct {
	name string
	kind Kind
} {
	switch mechanism {
	case "", MechanismGaussian:
		return methods
	case MechanismBall:
		return ballMethods
	}
	return nil
}

// SamplersFor returns the samplers mechanism is accounted for, sorted; nil for
// an unknown mechanism.
func SamplersFor(mechanism string) []string {
	reg := registry(mechanism)
	if reg == nil {
		return nil
	}
	out := make([]string, 0, len(reg))
	for s := range reg {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// MethodsFor returns the methods of mechanism for sampler, the default first;
// nil for an unknown pair.
func MethodsFor(mechanism, sampler string) []string {
	ms := registry(mechanism)[sampler]
	if ms == nil {
		return nil
	}
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.name
	}
	return out
}

// Samplers returns the sampler names this package knows for Gaussian noise,
// sorted (SamplersFor for other mechanisms).
func Samplers() []string {
	out := make([]string, 0, len(methods))
	for s := range methods {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Methods returns the methods available for sampler with Gaussian noise, the
// default first; nil for an unknown sampler.
func Methods(sampler string) []string { return MethodsFor(MechanismGaussian, sampler) }

// DefaultMethod returns the default (tightest proven) method for sampler with
// Gaussian noise, "" for an unknown one.
func DefaultMethod(sampler string) string {
	if ms := methods[sampler]; len(ms) > 0 {
		return ms[0].name
	}
	return ""
}

// Spec names an accountant and its parameters. It is the part of a Ledger that
// rebuilds the accountant.
type Spec struct {
	Sampler string  `json:"sampler"`
	Method  string  `json:"accountant"`
	Sigma   float64 `json:"sigma"`
	// SampleRate is q for Poisson sampling; for shuffle and allocation it is
	// informational (1/Rounds).
	SampleRate float64 `json:"sample_rate,omitempty"`
	// Rounds is M, the steps per epoch; required for shuffle and allocation.
	Rounds int `json:"rounds,omitempty"`
	// DatasetSize and MaxBatch describe truncated Poisson sampling; DatasetSize
	// is also N, the points Tholeti's uniform sampler draws from (ball).
	DatasetSize int `json:"dataset_size,omitempty"`
	MaxBatch    int `json:"max_batch,omitempty"`
	// Mechanism is the noise: "" or "gaussian" (σ), or "ball" (uniform in a
	// d-ball of radius Radius; Dim is d and Distance the distance Δ between
	// the noised sums of neighbouring datasets, C for zero-out and add/remove
	// with clipping norm C, 2C for replace one: ball.DistanceFor). A ball Spec
	// has Sigma = 0; a Gaussian one has Radius, Dim and Distance 0.
	Mechanism string  `json:"mechanism,omitempty"`
	Radius    float64 `json:"radius,omitempty"`
	Dim       int     `json:"dim,omitempty"`
	Distance  float64 `json:"distance,omitempty"`
	// PublicSize says the run derives q or its divisor from the dataset size, which is
	// therefore public: the guarantee of a Poisson sampler is then stated for zero-out
	// adjacency (privacy.WithPublicSize; the numbers are those of add/remove). Samplers
	// that are zero-out already are unaffected.
	PublicSize bool `json:"public_size,omitempty"`
}

// IsBall reports whether s is ball noise.
func (s Spec) IsBall() bool { return s.Mechanism == MechanismBall }

// Kind returns the kind of statement s's accountant makes, and an error for an
// unknown mechanism or sampler or a method the sampler does not offer.
func (s Spec) Kind() (Kind, error) {
	reg := registry(s.Mechanism)
	if reg == nil {
		return "", fmt.Errorf("accounting: mechanism = %q, want one of %v: %w", s.Mechanism, Mechanisms(), privacy.ErrInvalidArgument)
	}
	ms, ok := reg[s.Sampler]
	if !ok {
		return "", fmt.Errorf("accounting: sampler = %q, want one of %v for mechanism %s: %w", s.Sampler, SamplersFor(s.Mechanism), s.mechanism(), privacy.ErrInvalidArgument)
	}
	for _, m := range ms {
		if m.name == s.Method {
			return m.kind, nil
		}
	}
	return "", fmt.Errorf("accounting: accountant = %q is not available for sampler %q, want one of %v: %w",
		s.Method, s.Sampler, MethodsFor(s.Mechanism, s.Sampler), privacy.ErrInvalidArgument)
}

// mechanism returns the mechanism's name, "gaussian" for "".
func (s Spec) mechanism() string {
	if s.Mechanism == "" {
		return MechanismGaussian
	}
	return s.Mechanism
}

// BallConfig returns the ball.Config of a ball Spec.
func (s Spec) BallConfig() ball.Config {
	return ball.Config{Sampler: s.Sampler, Dim: s.Dim, Distance: s.Distance, Radius: s.Radius,
		StepsPerEpoch: s.Rounds, SampleRate: s.SampleRate, DatasetSize: s.DatasetSize}
}

// validateBall checks a ball Spec whose Kind is known.
func (s Spec) validateBall() error {
	if s.Sigma != 0 {
		return fmt.Errorf("accounting: sigma = %g with mechanism ball, want 0 (ball noise has a radius, not σ): %w", s.Sigma, privacy.ErrInvalidArgument)
	}
	if s.MaxBatch != 0 {
		return fmt.Errorf("accounting: max_batch = %d with mechanism ball, want 0 (truncated batches are not covered): %w", s.MaxBatch, privacy.ErrInvalidArgument)
	}
	if err := s.BallConfig().Validate(); err != nil {
		return fmt.Errorf("accounting: %w", err)
	}
	return nil
}

// Validate checks the mechanism, the sampler, the method and the parameters
// the method needs.
func (s Spec) Validate() error {
	if _, err := s.Kind(); err != nil {
		return err
	}
	if s.IsBall() {
		return s.validateBall()
	}
	if s.Radius != 0 || s.Dim != 0 || s.Distance != 0 {
		return fmt.Errorf("accounting: radius = %g, dim = %d, distance = %g with mechanism gaussian, want 0 (they describe ball noise): %w",
			s.Radius, s.Dim, s.Distance, privacy.ErrInvalidArgument)
	}
	if !(s.Sigma > 0) || math.IsInf(s.Sigma, 1) {
		return fmt.Errorf("accounting: sigma = %g out of range (0, +Inf): %w", s.Sigma, privacy.ErrInvalidArgument)
	}
	switch s.Sampler {
	case privacy.SamplerPoisson, privacy.SamplerPoissonTruncated:
		if !(s.SampleRate > 0 && s.SampleRate <= 1) {
			return fmt.Errorf("accounting: sample_rate = %g out of range (0, 1]: %w", s.SampleRate, privacy.ErrInvalidArgument)
		}
		if s.Sampler == privacy.SamplerPoissonTruncated {
			if s.DatasetSize < 1 {
				return fmt.Errorf("accounting: dataset_size = %d out of range [1, +Inf): %w", s.DatasetSize, privacy.ErrInvalidArgument)
			}
			if s.MaxBatch < 1 || s.MaxBatch > s.DatasetSize {
				return fmt.Errorf("accounting: max_batch = %d out of range [1, dataset_size = %d]: %w", s.MaxBatch, s.DatasetSize, privacy.ErrInvalidArgument)
			}
		}
	default:
		if s.Rounds < 1 {
			return fmt.Errorf("accounting: rounds = %d out of range [1, +Inf): %w", s.Rounds, privacy.ErrInvalidArgument)
		}
	}
	return nil
}

// New builds the accountant s names. Accountants whose Kind is not
// KindGuarantee report themselves as approximations or lower bounds, so that
// privacy.Budget.Check refuses them.
func (s Spec) New() (privacy.Accountant, error) {
	acc, err := s.newAccountant()
	if err != nil || !s.PublicSize {
		return acc, err
	}
	return privacy.WithPublicSize(acc), nil
}

// newAccountant builds the accountant s names, with the adjacency of its proof.
func (s Spec) newAccountant() (privacy.Accountant, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	kind, _ := s.Kind()
	if s.IsBall() {
		return ball.NewAccountant(s.BallConfig())
	}
	switch s.Sampler {
	case privacy.SamplerPoisson:
		switch s.Method {
		case MethodPLD:
			return pld.NewPoissonAccountant(s.SampleRate, s.Sigma)
		case MethodRDP:
			return privacy.NewPoissonRDP(s.SampleRate, s.Sigma, nil)
		case MethodGDP:
			return privacy.NewGDPCLT(s.SampleRate, s.Sigma)
		}
	case privacy.SamplerPoissonTruncated:
		return privacy.NewTruncatedPoisson(s.SampleRate, s.Sigma, s.DatasetSize, s.MaxBatch, nil)
	case privacy.SamplerShuffle:
		switch s.Method {
		case MethodGDP, MethodDeterministic:
			return privacy.NewGaussianEpochs(s.Sigma, s.Rounds, privacy.SamplerShuffle)
		case MethodLower:
			return shuffle.NewLowerBound(s.Sigma, s.Rounds)
		case MethodRDP, MethodPLD:
			// What Poisson accounting with q = 1/M would claim: reported when asked,
			// never as a guarantee for shuffling.
			q := 1 / float64(s.Rounds)
			var base privacy.Accountant
			var err error
			if s.Method == MethodRDP {
				base, err = privacy.NewPoissonRDP(q, s.Sigma, nil)
			} else {
				base, err = pld.NewPoissonAccountant(q, s.Sigma)
			}
			if err != nil {
				return nil, err
			}
			return assumedPoisson{Accountant: base, sampler: s.Sampler}, nil
		}
	case privacy.SamplerAllocation:
		switch s.Method {
		case MethodExact:
			return allocation.NewExactAccountant(s.Sigma, s.Rounds)
		case MethodChiSquare:
			return allocation.NewChiSquareAccountant(s.Sigma, s.Rounds)
		case MethodBerryEsseen:
			return allocation.NewBerryEsseenAccountant(s.Sigma, s.Rounds, allocation.RhoSimplified)
		case MethodRDP:
			return allocation.NewRDPAccountant(s.Sigma, s.Rounds, nil)
		case MethodDeterministic:
			return privacy.NewGaussianEpochs(s.Sigma, s.Rounds, privacy.SamplerAllocation)
		case MethodGDP:
			return newAsymptoticGDP(s.Sigma, s.Rounds)
		}
	}
	return nil, fmt.Errorf("accounting: no accountant for %q/%q (kind %s): %w", s.Sampler, s.Method, kind, privacy.ErrInvalidArgument)
}

// assumedPoisson is a Poisson accountant run for a sampler that is not
// Poisson: its numbers are what Poisson accounting would claim, not a
// guarantee. It reports Approximate() so that Budget.Check refuses it.
type assumedPoisson struct {
	privacy.Accountant
	sampler string
}

func (a assumedPoisson) Name() string      { return a.Accountant.Name() + " (assuming poisson)" }
func (a assumedPoisson) Sampler() string   { return a.sampler }
func (a assumedPoisson) Approximate() bool { return true }

// asymptoticGDP is van Dijk & Ertan's Theorem 5.2: after E epochs
// of M rounds, random allocation is asymptotically μ-GDP with
// μ = √(E/M)·√(e^{1/σ²} − 1) (the same μ as Poisson's central limit theorem).
// It is a limit statement, not a bound at finite M: Approximate() is true.
type asymptoticGDP struct {
	sigma  float64
	rounds int
}

func newAsymptoticGDP(sigma float64, rounds int) (*asymptoticGDP, error) {
	if !(sigma > 0) || math.IsInf(sigma, 1) {
		return nil, fmt.Errorf("accounting: sigma = %g out of range (0, +Inf): %w", sigma, privacy.ErrInvalidArgument)
	}
	if rounds < 1 {
		return nil, fmt.Errorf("accounting: rounds = %d out of range [1, +Inf): %w", rounds, privacy.ErrInvalidArgument)
	}
	return &asymptoticGDP{sigma: sigma, rounds: rounds}, nil
}

func (g *asymptoticGDP) Name() string      { return "gdp-asymptotic (approximate)" }
func (g *asymptoticGDP) Sampler() string   { return privacy.SamplerAllocation }
func (g *asymptoticGDP) Adjacency() string { return privacy.AdjacencyZeroOut }
func (g *asymptoticGDP) Approximate() bool { return true }

// Mu returns μ after steps steps, counting whole epochs.
func (g *asymptoticGDP) Mu(steps int) float64 {
	e := privacy.EpochsOf(steps, g.rounds)
	return allocation.MuAllocation(g.sigma, math.Sqrt(float64(e)/float64(g.rounds)))
}

func (g *asymptoticGDP) Epsilon(steps int, delta float64) (float64, error) {
	return privacy.MuGDP(g.Mu).Epsilon(steps, delta)
}

func (g *asymptoticGDP) Delta(steps int, eps float64) (float64, error) {
	return privacy.MuGDP(g.Mu).Delta(steps, eps)
}
