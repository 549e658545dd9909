// Package accounting maps a sampler and an accounting method to the accountant
// proven for that sampler, says what kind of statement each one makes (a
// guarantee, an approximation, a lower bound, or a number that assumes another
// sampler), and keeps a run's accounting state as a small JSON ledger that
// checkpoints carry and from which the accountant is rebuilt.
//
// What may be claimed for which sampler follows DESIGN.md ("Samplers and what
// may be claimed") and privacy-math.md §2, §8d and §10:
//
//	sampler            method          statement
//	poisson            pld (default)   guarantee (add/remove), pessimistic PLD
//	poisson            rdp             guarantee (add/remove)
//	poisson            gdp             approximation (central limit theorem)
//	poisson-truncated  rdp (default)   guarantee, plus the truncation probability
//	shuffle            gdp (default)   guarantee (zero-out): each epoch one Gaussian mechanism
//	shuffle            lower           lower bound (Chua et al. 2024): the true ε is at least this
//	shuffle            rdp, pld        what Poisson accounting would claim: NOT valid for shuffling
//	allocation         exact (default) guarantee (zero-out), seed 002's Gaussian pair
//	allocation         chisq           guarantee, total variation only
//	allocation         berry-esseen    guarantee in its regime (σ ≥ √(3/ln M), M ≥ 3), loose
//	allocation         rdp             guarantee, Rényi DP of the Gaussian pair
//	allocation         deterministic   guarantee, amplification-free (as shuffle's gdp)
//	allocation         gdp             asymptotic μ-GDP of seed 002 Theorem 5.2: approximation
package accounting

import (
	"fmt"
	"math"
	"sort"

	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/allocation"
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

// Samplers returns the sampler names this package knows, sorted.
func Samplers() []string {
	out := make([]string, 0, len(methods))
	for s := range methods {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Methods returns the methods available for sampler, the default first; nil
// for an unknown sampler.
func Methods(sampler string) []string {
	ms := methods[sampler]
	if ms == nil {
		return nil
	}
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.name
	}
	return out
}

// DefaultMethod returns the default (tightest proven) method for sampler, ""
// for an unknown one.
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
	// DatasetSize and MaxBatch describe truncated Poisson sampling.
	DatasetSize int `json:"dataset_size,omitempty"`
	MaxBatch    int `json:"max_batch,omitempty"`
}

// Kind returns the kind of statement s's accountant makes, and an error for an
// unknown sampler or a method the sampler does not offer.
func (s Spec) Kind() (Kind, error) {
	ms, ok := methods[s.Sampler]
	if !ok {
		return "", fmt.Errorf("accounting: sampler = %q, want one of %v: %w", s.Sampler, Samplers(), privacy.ErrInvalidArgument)
	}
	for _, m := range ms {
		if m.name == s.Method {
			return m.kind, nil
		}
	}
	return "", fmt.Errorf("accounting: accountant = %q is not available for sampler %q, want one of %v: %w",
		s.Method, s.Sampler, Methods(s.Sampler), privacy.ErrInvalidArgument)
}

// Validate checks the sampler, the method and the parameters the method needs.
func (s Spec) Validate() error {
	if _, err := s.Kind(); err != nil {
		return err
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
	if err := s.Validate(); err != nil {
		return nil, err
	}
	kind, _ := s.Kind()
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

// asymptoticGDP is seed 002's Theorem 5.2 (privacy-math.md §5): after E epochs
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
	e := 0
	if steps > 0 {
		e = (steps-1)/g.rounds + 1
	}
	return allocation.MuAllocation(g.sigma, math.Sqrt(float64(e)/float64(g.rounds)))
}

func (g *asymptoticGDP) Epsilon(steps int, delta float64) (float64, error) {
	if steps < 0 {
		return 0, fmt.Errorf("accounting: steps = %d out of range [0, +Inf): %w", steps, privacy.ErrInvalidArgument)
	}
	return privacy.GaussianEpsilon(g.Mu(steps), delta)
}

func (g *asymptoticGDP) Delta(steps int, eps float64) (float64, error) {
	if steps < 0 {
		return 0, fmt.Errorf("accounting: steps = %d out of range [0, +Inf): %w", steps, privacy.ErrInvalidArgument)
	}
	return privacy.GaussianDelta(g.Mu(steps), eps)
}
