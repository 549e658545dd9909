package engine

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/internal/fastblas"
	"gonum.org/v1/gonum/blas/gonum"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// init installs the BLAS that DPSGD_BLAS names (internal/fastblas), so that the whole engine
// suite can be run against a library: DPSGD_BLAS=openblas go test ./engine. Unset, the tests
// run on gonum's BLAS.
func init() {
	v := os.Getenv(fastblas.EnvVar)
	if v == "" {
		return
	}
	n, err := fastblas.ParseName(v)
	if err != nil {
		panic(fmt.Sprintf("%s=%q: %v", fastblas.EnvVar, v, err))
	}
	c, err := fastblas.Select(n, fastblas.ThreadsFor(runtime.NumCPU(), runtime.GOMAXPROCS(0)))
	if err != nil {
		panic(fmt.Sprintf("%s=%q: %v", fastblas.EnvVar, v, err))
	}
	fastblas.Install(c)
	fmt.Fprintf(os.Stderr, "engine tests: BLAS %s\n", c.Describe())
}

// BenchmarkStepBLAS: DP-SGD steps of the MLP of BenchmarkStep (784-256-10, batch 256) and of
// the MNIST CNN of BenchmarkStepCNN (physical batch 64, logical 256) on gonum's BLAS, on each
// installed library and on auto's choice (library threads × replicas ≤ cores,
// fastblas.ThreadsFor), in examples/s. With -count=N the runs interleave (mlp/go, mlp/openblas, …, then again);
// `make bench-blas` runs it so (docs/benchmarks.md).
func BenchmarkStepBLAS(b *testing.B) {
	defer fastblas.Install(fastblas.Choice{})
	mlp := nn.MLP([]int{784}, 10, []int{256}, nn.Tanh)
	cnn := nn.CNN([]int{1, 28, 28}, 10, nil, nn.Tanh)
	for _, m := range []struct {
		name string
		arch nn.Arch
		phys int
		ds   *datasets.Dataset
	}{
		{"mlp", mlp, 256, randomDataset(mlp, 4096, 1)},
		{"cnn", cnn, 64, randomDataset(cnn, 2048, 1)},
	} {
		for _, n := range append(append([]fastblas.Name{fastblas.Go, fastblas.Asm}, fastblas.Libraries()...), fastblas.Auto) {
			b.Run(m.name+"/"+string(n), func(b *testing.B) {
				c, err := fastblas.Select(n, fastblas.ThreadsFor(runtime.NumCPU(), runtime.GOMAXPROCS(0)))
				if errors.Is(err, fastblas.ErrNotInstalled) {
					b.Skipf("%s is not installed: %v", n, err)
				}
				if c.Note != "" {
					b.Skip(c.Note)
				}
				if err != nil {
					b.Fatal(err)
				}
				fastblas.Install(c)
				b.Logf("%s", c.Describe())
				cfg := Config{Arch: m.arch, Dtype: tensor.Float32, PhysicalBatch: m.phys, Epochs: 1, Clip: 1, Sigma: 1,
					Optimizer: OptimizerConfig{Name: "sgd", LR: 0.1}}
				benchSteps(b, cfg, m.ds, 256)
			})
		}
	}
}

// graphsOnGonum reports whether the training graphs' products run on gonum's BLAS (the
// suite's default), whose roundings the fake CUDA device's products share.
func graphsOnGonum() bool {
	var g gonum.Implementation
	return gorgonia.WhichBLAS() == g
}
