package personalized

import "testing"

// BenchmarkSelectionBound: the exact quantile plus the logistic bound.
func BenchmarkSelectionBound(b *testing.B) {
	for _, c := range []struct {
		name string
		n    int
		q, d float64
	}{
		{"T=1e4/q=0.01", 10_000, 0.01, 1e-5},
		{"T=1e6/q=0.01", 1_000_000, 0.01, 1e-5},
		{"T=1e6/q=0.5", 1_000_000, 0.5, 1e-5},
		{"T=1e7/q=0.5", 10_000_000, 0.5, 1e-9},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := SelectionBound(c.n, c.q, c.d, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCalibrate: one client's calibration (selection bound, both σ).
func BenchmarkCalibrate(b *testing.B) {
	c := Client{Epsilon: 2, DeltaPrime: 1e-5, DeltaTail: 1e-5, SampleRate: 0.01}
	for _, n := range []int{1000, 1_000_000} {
		s := Setting{Draws: n, Clip: 1, LocalExamples: 600, LocalSteps: 10}
		b.Run(map[int]string{1000: "T=1e3", 1_000_000: "T=1e6"}[n], func(b *testing.B) {
			for b.Loop() {
				if _, err := Calibrate(c, s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSpent: the per-round ε of one client.
func BenchmarkSpent(b *testing.B) {
	for b.Loop() {
		if _, err := Spent(37, 10, 25, 1e-5); err != nil {
			b.Fatal(err)
		}
	}
}
