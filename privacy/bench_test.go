package privacy

import (
	"fmt"
	"testing"
)

// BenchmarkPoissonRDPEpsilon is the per-epoch budget check: ε over the
// default orders at T = 10⁵ from the cached per-step curve.
func BenchmarkPoissonRDPEpsilon(b *testing.B) {
	p, err := NewPoissonRDP(256.0/60000, 1.1, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Epsilon(100000, 1e-5); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPoissonRDPDelta(b *testing.B) {
	p, _ := NewPoissonRDP(256.0/60000, 1.1, nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Delta(100000, 2); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewPoissonRDP is the cost of one σ trial in calibration: the
// per-step RDP curve over the default orders.
func BenchmarkNewPoissonRDP(b *testing.B) {
	for _, c := range []struct{ q, sigma float64 }{{256.0 / 60000, 1.1}, {0.01, 0.3}, {0.1, 5}, {0.5, 1}, {0.8, 100}} {
		b.Run(fmt.Sprintf("q=%g/sigma=%g", c.q, c.sigma), func(b *testing.B) {
			for b.Loop() {
				if _, err := NewPoissonRDP(c.q, c.sigma, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkTruncatedPoissonEpsilon(b *testing.B) {
	tr, _ := NewTruncatedPoisson(256.0/60000, 1.1, 60000, 400, nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tr.Epsilon(14040, 1e-5); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGaussianEpsilon(b *testing.B) {
	for b.Loop() {
		if _, err := GaussianEpsilon(1.3, 1e-5); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGaussianEpochsEpsilon(b *testing.B) {
	g, _ := NewGaussianEpochs(1.1, 234, SamplerShuffle)
	for b.Loop() {
		if _, err := g.Epsilon(14040, 1e-5); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCalibrateSigmaPoisson(b *testing.B) {
	newAcc := func(s float64) (Accountant, error) { return NewPoissonRDP(256.0/60000, s, nil) }
	for b.Loop() {
		if _, err := CalibrateSigma(newAcc, 14040, Budget{3, 1e-5}, 0.3, 30); err != nil {
			b.Fatal(err)
		}
	}
}
