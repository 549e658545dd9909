package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"gorgonia.org/tensor"
)

// BenchmarkStep compares one DP-SGD step with one non-private step of the same model (MLP
// 784-256-10, batch 256, float32) in one run; the non-private step is the same code path
// without clipping and noise. `make bench-step` runs it; docs/benchmarks.md has the ratios.
func BenchmarkStep(b *testing.B) {
	arch := nn.MLP([]int{784}, 10, []int{256}, nn.Tanh)
	ds := randomDataset(arch, 4096, 1)
	for _, mode := range []struct {
		name       string
		nonPrivate bool
	}{{"dp", false}, {"nonprivate", true}} {
		b.Run(mode.name, func(b *testing.B) {
			cfg := Config{Arch: arch, Dtype: tensor.Float32, PhysicalBatch: 256, Epochs: 1, Clip: 1, Sigma: 1,
				NonPrivate: mode.nonPrivate, Optimizer: OptimizerConfig{Name: "sgd", LR: 0.1}}
			benchSteps(b, cfg, ds, 256)
		})
	}
}

// benchSteps times steps of cfg's run on batches of `batch` indices drawn uniformly from ds,
// and reports examples per second.
func benchSteps(b *testing.B, cfg Config, ds *datasets.Dataset, batch int) {
	b.Helper()
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	r, err := newRun[float32](cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer r.close()
	rng := rand.New(rand.NewPCG(1, 2))
	idx := make([]int, batch)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range idx {
			idx[j] = rng.IntN(ds.N)
		}
		if _, err := r.step(ds, idx, i, b.N, float64(batch)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "examples/s")
}

// BenchmarkStepCNNBatch: DP and non-private steps of the MNIST CNN (ReLU, float32) at logical
// batches 256 and 1024 with physical batch min(256, B), as `dpsgd bench step` and
// scripts/opacus_cpu.py run them; the BLAS is DPSGD_BLAS's (blas_test.go). The profile of the
// CNN step in docs/benchmarks.md comes from it.
func BenchmarkStepCNNBatch(b *testing.B) {
	arch := nn.CNN([]int{1, 28, 28}, 10, nil, nn.ReLU)
	ds := randomDataset(arch, 4096, 1)
	for _, batch := range []int{256, 1024} {
		for _, mode := range []struct {
			name       string
			nonPrivate bool
		}{{"dp", false}, {"nonprivate", true}} {
			b.Run(fmt.Sprintf("%d/%s", batch, mode.name), func(b *testing.B) {
				cfg := Config{Arch: arch, Dtype: tensor.Float32, PhysicalBatch: min(256, batch), Epochs: 1, Clip: 1, Sigma: 1,
					NonPrivate: mode.nonPrivate, Optimizer: OptimizerConfig{Name: "sgd", LR: 0.01}}
				benchSteps(b, cfg, ds, batch)
			})
		}
	}
}
