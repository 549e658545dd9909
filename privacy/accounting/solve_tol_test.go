package accounting

import (
	"errors"
	"testing"

	"github.com/dpsgd/dpsgd/privacy"
)

// SolveSigmaTol at a coarse tolerance meets the target, is at least SolveSigma's σ and within
// the tolerance of it; out-of-range tolerances are refused.
func TestSolveSigmaTol(t *testing.T) {
	spec := Spec{Sampler: privacy.SamplerPoisson, Method: MethodRDP, SampleRate: 0.01}
	target := privacy.Budget{Epsilon: 2, Delta: 1e-5}
	fine, err := SolveSigma(spec, 1000, target)
	if err != nil {
		t.Fatal(err)
	}
	coarse, err := SolveSigmaTol(spec, 1000, target, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	if coarse < fine*(1-sigmaRel) || coarse > fine*1.05*(1+sigmaRel) {
		t.Errorf("coarse σ %v against %v", coarse, fine)
	}
	s := spec
	s.Sigma = coarse
	if ok, err := within(s, 1000, target); !ok || err != nil {
		t.Errorf("coarse σ %v does not meet the target: %v %v", coarse, ok, err)
	}
	for _, rel := range []float64{0, -1, 0.2} {
		if _, err := SolveSigmaTol(spec, 1000, target, rel); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("rel %v: %v", rel, err)
		}
	}
}
