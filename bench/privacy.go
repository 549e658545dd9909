package bench

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/accounting"
	"github.com/dpsgd/dpsgd/privacy/shuffle"
)

// PrivacyConfig is the privacy-only comparison: ε at δ after each epoch at one σ, without
// training.
type PrivacyConfig struct {
	Samplers    []string          // nil: DefaultSamplers()
	Accountants map[string]string // sampler → method; missing: the default
	// DatasetSize and BatchSize shape the samplers (NewSampler): their steps per epoch and
	// accounting specs.
	DatasetSize, BatchSize int
	Sigma, Delta           float64
	Epochs                 int // epochs 1..Epochs
}

// Curve is ε (or, where an accountant certifies no ε at δ, the total variation) after each
// epoch for one sampler and accountant.
type Curve struct {
	Sampler    string `json:"sampler"`
	Accountant string `json:"accountant"`
	// Kind is the statement the numbers make: "guarantee" (a proven upper bound for this
	// sampler), "lower bound" (the true ε is at least this) or "assumes poisson" (what
	// Poisson accounting would claim for a sampler that is not Poisson: NOT a guarantee).
	Kind  string `json:"kind"`
	Valid bool   `json:"valid"` // a proven guarantee for the sampler
	Label string `json:"label"`
	// Epochs are 1..E; Epsilon[i] is ε at δ after Epochs[i] epochs, null where the
	// accountant certifies no finite ε at δ; TV[i] is then the total variation it certifies
	// (null where ε was given).
	Epochs  []int      `json:"epochs"`
	Epsilon []*float64 `json:"epsilon"`
	TV      []*float64 `json:"tv"`
	Note    string     `json:"note,omitempty"`
}

// PrivacyComparison is the result of PrivacyCurves.
type PrivacyComparison struct {
	Sigma       float64 `json:"sigma"`
	Delta       float64 `json:"delta"`
	DatasetSize int     `json:"dataset_size"`
	BatchSize   int     `json:"batch_size"`
	Curves      []Curve `json:"curves"`
}

// Curve kinds beyond accounting's.
const (
	labelInvalid = "NOT a valid guarantee for shuffling"
)

// PrivacyCurves returns ε at δ after epochs 1..E at σ for each sampler with its proven
// accountant, plus two curves for shuffling that are not guarantees: Chua et al.'s lower bound
// (2024; the true ε of shuffled DP-SGD is at least this) and what Poisson
// accounting (PLD with q = 1/M) would claim for shuffling, which is NOT a valid guarantee
// for shuffling (Chua et al. 2024): the lower bound can exceed it. An accountant that certifies only a total variation at δ gets its TV instead of ε.
func PrivacyCurves(cfg PrivacyConfig) (*PrivacyComparison, error) {
	if len(cfg.Samplers) == 0 {
		cfg.Samplers = DefaultSamplers()
	}
	if !(cfg.Sigma > 0) || math.IsInf(cfg.Sigma, 0) {
		return nil, fmt.Errorf("bench: privacy σ %v: want a finite value > 0: %w", cfg.Sigma, ErrInvalid)
	}
	if !(cfg.Delta > 0 && cfg.Delta < 1) {
		return nil, fmt.Errorf("bench: privacy δ %v: want a value in (0, 1): %w", cfg.Delta, ErrInvalid)
	}
	if cfg.Epochs < 1 || cfg.Epochs > 10000 {
		return nil, fmt.Errorf("bench: privacy epochs %d: want a value in [1, 10000]: %w", cfg.Epochs, ErrInvalid)
	}
	out := &PrivacyComparison{Sigma: cfg.Sigma, Delta: cfg.Delta, DatasetSize: cfg.DatasetSize, BatchSize: cfg.BatchSize}
	type line struct {
		spec     accounting.Spec
		perEpoch int
		label    string
	}
	var lines []line
	for _, name := range cfg.Samplers {
		smp, spec, err := NewSampler(name, cfg.Accountants[name], cfg.DatasetSize, cfg.BatchSize, 0)
		if err != nil {
			return nil, err
		}
		lines = append(lines, line{spec, smp.StepsPerEpoch(), fmt.Sprintf("%s (%s): guarantee", name, spec.Method)})
	}
	// The two shuffle curves that are not guarantees, drawn whatever the samplers compared.
	smp, spec, err := NewSampler(privacy.SamplerShuffle, "", cfg.DatasetSize, cfg.BatchSize, 0)
	if err != nil {
		return nil, err
	}
	lower, asPoisson := spec, spec
	lower.Method, asPoisson.Method = accounting.MethodLower, accounting.MethodPLD
	lines = append(lines,
		line{lower, smp.StepsPerEpoch(), "shuffle: lower bound (Chua et al. 2024), true ε ≥ this"},
		line{asPoisson, smp.StepsPerEpoch(), "shuffle accounted as if Poisson (pld): " + labelInvalid})
	for _, l := range lines {
		s := l.spec
		s.Sigma = cfg.Sigma
		kind, err := s.Kind()
		if err != nil {
			return nil, fmt.Errorf("bench: sampler %s with accountant %s: %v: %w", s.Sampler, s.Method, err, ErrInvalid)
		}
		c := Curve{Sampler: s.Sampler, Accountant: s.Method, Kind: string(kind), Valid: kind == accounting.KindGuarantee, Label: l.label}
		acc, err := s.New()
		if err != nil {
			return nil, fmt.Errorf("bench: sampler %s with accountant %s at σ = %g: %w", s.Sampler, s.Method, cfg.Sigma, err)
		}
		fillCurve(&c, acc, l.perEpoch, cfg.Epochs, cfg.Delta)
		out.Curves = append(out.Curves, c)
	}
	return out, nil
}

// fillCurve evaluates acc after each epoch. Failures do not stop the comparison: the point is
// null and the curve's note says why.
func fillCurve(c *Curve, acc privacy.Accountant, perEpoch, epochs int, delta float64) {
	var notes []string
	note := func(s string) {
		for _, n := range notes {
			if n == s {
				return
			}
		}
		notes = append(notes, s)
	}
	if lb, ok := acc.(*shuffle.LowerBound); ok && lb.Rounds() != perEpoch {
		note(fmt.Sprintf("lower bound built for %d rounds, sampler has %d", lb.Rounds(), perEpoch))
	}
	for e := 1; e <= epochs; e++ {
		steps := e * perEpoch
		c.Epochs = append(c.Epochs, e)
		what := fmt.Sprintf("%s/%s after %d epochs", c.Sampler, c.Accountant, e)
		eps, err := safe(what, func() (float64, error) { return acc.Epsilon(steps, delta) })
		if err == nil && !math.IsNaN(eps) && !math.IsInf(eps, 0) {
			c.Epsilon, c.TV = append(c.Epsilon, &eps), append(c.TV, nil)
			continue
		}
		c.Epsilon = append(c.Epsilon, nil)
		if err == nil || errors.Is(err, privacy.ErrUnreachable) {
			tv, err := safe(what, func() (float64, error) { return acc.Delta(steps, 0) })
			if err == nil && !math.IsNaN(tv) {
				c.TV = append(c.TV, &tv)
				note(fmt.Sprintf("no finite ε at δ = %g from some epoch on: total variation (δ at ε = 0) given instead", delta))
				continue
			}
		}
		c.TV = append(c.TV, nil)
		note(fmt.Sprintf("%v", err))
	}
	c.Note = strings.Join(notes, "; ")
}

// TableEpochs returns the epochs shown in the privacy table's columns: all of 1..e up to ten,
// else 1 and nine roughly even steps up to e.
func TableEpochs(e int) []int {
	if e <= 10 {
		out := make([]int, e)
		for i := range out {
			out[i] = i + 1
		}
		return out
	}
	out := []int{1}
	for i := 1; i <= 9; i++ {
		v := int(math.Round(float64(i) * float64(e) / 9))
		if v > out[len(out)-1] {
			out = append(out, v)
		}
	}
	return out
}
