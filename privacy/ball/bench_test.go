package ball

import (
	"fmt"
	"testing"
)

// mnistMLP is the parameter count of the MLP 784-128-10 (with biases).
const mnistMLP = 784*128 + 128 + 128*10 + 10

// BenchmarkStepDelta: one evaluation in each regime: the power series (tiny
// δ, large d), the bound that δ rounds to 1 (d = mlp, a = 0.1), quadrature
// (large d, b·x between 1 and ~36) and the positive series (d < 999; longest
// just below).
func BenchmarkStepDelta(b *testing.B) {
	for _, c := range []struct {
		name string
		dim  int
		a    float64
	}{
		{"d=1000/a=0.1", 1000, 0.1},
		{"d=mlp/a=1e-6", mnistMLP, 1e-6},
		{"d=mlp/a=0.1", mnistMLP, 0.1},
		{"d=mlp/a=0.005", mnistMLP, 0.005},
		{"d=1e6/a=0.002", 1000000, 0.002},
		{"d=997/bx=2", 997, 0.0632}, // the longest positive series
		{"d=2^30/bx=10", MaxDim, 1.365e-4},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := StepDelta(c.dim, 2*c.a, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSolveRadius: the radius for a total δ of 1e-5 after 60 epochs of
// MNIST, Tholeti's sampling (60000 points, one per step) and Poisson.
func BenchmarkSolveRadius(b *testing.B) {
	for _, dim := range []int{100, mnistMLP} {
		b.Run(fmt.Sprintf("uniform/d=%d", dim), func(b *testing.B) {
			for b.Loop() {
				if _, err := SolveRadius(dim, 2, 60000, 60*60000, 1e-5, Exact); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("poisson/d=%d", dim), func(b *testing.B) {
			cfg := Config{Sampler: "poisson", Dim: dim, Distance: 1, SampleRate: 256.0 / 60000}
			for b.Loop() {
				if _, err := SolveRadiusFor(cfg, 60*234, 1e-5); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
