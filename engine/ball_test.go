package engine

import (
	"math"
	"testing"

	"github.com/dpsgd/dpsgd/kernels"
	"gorgonia.org/tensor"
)

// TestBallNoiseStep: a step with Noise = NoiseBall adds to the clipped sum exactly the
// uniform-ball draw of kernels.AddBall keyed by (noise seed, step), over all parameters at
// once, and its norm is within the radius.
func TestBallNoiseStep(t *testing.T) {
	train, _ := smallProblem(t)
	cfg := smallConfig(train)
	cfg.Dtype, cfg.Noise, cfg.Radius = tensor.Float64, NoiseBall, 3
	cfg.Optimizer = OptimizerConfig{Name: "sgd", LR: 0.1, Schedule: "constant"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	r, err := newRun[float64](cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	idx := make([]int, 100)
	for i := range idx {
		idx[i] = 3 * i
	}
	// The clean clipped sum, then the noisy step on the same batch and parameters.
	cb := r.be.(*cpuBackend[float64])
	clean := make([][]float64, len(cb.sums))
	if _, err := cb.clippedSum(train, idx, kernels.ClipBound[float64](cfg.Clip)); err != nil {
		t.Fatal(err)
	}
	for p, g := range cb.sums {
		clean[p] = append([]float64(nil), g...)
	}
	const step, batch = 5, 100.0
	if _, err := r.step(train, idx, step, 10, batch); err != nil {
		t.Fatal(err)
	}
	want := make([][]float64, len(cb.grads))
	for p, g := range cb.grads {
		want[p] = make([]float64, len(g))
	}
	kernels.AddBall(want, cfg.Radius, kernels.NoiseKey{Seed: r.noise, Step: step})
	var norm2, d float64
	for p, g := range cb.grads {
		for j, v := range g {
			got := v*batch - clean[p][j]
			if math.Abs(got-want[p][j]) > 1e-9*(1+math.Abs(clean[p][j])) {
				t.Fatalf("param %d[%d]: noise %v, want %v", p, j, got, want[p][j])
			}
			norm2 += want[p][j] * want[p][j]
			d++
		}
	}
	if n := math.Sqrt(norm2); !(n > 0 && n <= cfg.Radius) {
		t.Errorf("noise norm %v: want in (0, %v]", n, cfg.Radius)
	}
}

// TestBallConfigValidate: the ball mechanism needs a radius and no σ.
func TestBallConfigValidate(t *testing.T) {
	train, _ := smallProblem(t)
	for _, c := range []struct {
		noise         string
		radius, sigma float64
		ok            bool
	}{
		{NoiseBall, 1, 0, true},
		{NoiseBall, 0, 1, false},
		{NoiseBall, math.Inf(1), 1, false},
		{NoiseBall, math.NaN(), 1, false},
		{"laplace", 1, 1, false},
		{"", 0, 1, true},
		{NoiseGaussian, 1, 0, false},
	} {
		cfg := smallConfig(train)
		cfg.Noise, cfg.Radius, cfg.Sigma = c.noise, c.radius, c.sigma
		if err := cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("noise %q radius %v sigma %v: err = %v, want ok = %v", c.noise, c.radius, c.sigma, err, c.ok)
		}
	}
}
