package accounting

import (
	"context"
	"testing"

	"github.com/dpsgd/dpsgd/privacy"
)

// BenchmarkTrainPLD is the accounting of the default MNIST MLP run at
// batch 2048 (q = 2048/60000, 29 steps per epoch, 3 epochs, target ε = 3 at
// δ = 1e-5), as dpsgd train does it: calibrate runs the σ search with a
// progress callback (so each probe also reports ε); epochs builds the
// accountant at the calibrated σ and makes the per-epoch check, the budget
// check and ε after each epoch.
func BenchmarkTrainPLD(b *testing.B) {
	const perEpoch, epochs = 29, 3
	spec := Spec{Sampler: privacy.SamplerPoisson, Method: MethodPLD, SampleRate: 2048.0 / 60000, PublicSize: true}
	budget := privacy.Budget{Epsilon: 3, Delta: 1e-5}
	calibrate := func(b *testing.B) float64 {
		sigma, err := SolveSigmaCtx(context.Background(), spec, perEpoch*epochs, budget, 0, func(Probe) {})
		if err != nil {
			b.Fatal(err)
		}
		return sigma
	}
	b.Run("calibrate", func(b *testing.B) {
		for b.Loop() {
			calibrate(b)
		}
	})
	b.Run("epochs", func(b *testing.B) {
		s := spec
		s.Sigma = calibrate(b)
		for b.Loop() {
			acc, err := s.New()
			if err != nil {
				b.Fatal(err)
			}
			for e := 1; e <= epochs; e++ {
				if _, err := budget.Within(acc, e*perEpoch); err != nil {
					b.Fatal(err)
				}
				if _, err := acc.Epsilon(e*perEpoch, budget.Delta); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
