package fastblas

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/blas"
)

// BenchmarkSgemm1024: C = A·B for 1024×1024 float32 matrices (2·1024³ flops), gonum's pure Go
// against dpsgd's AVX kernels (when the CPU has them) and each installed library on all
// CPU cores, in GFLOP/s. `make bench-blas` runs it
// interleaved with the step benchmarks and PyTorch's SGEMM (docs/benchmarks.md).
func BenchmarkSgemm1024(b *testing.B) {
	const n = 1024
	rng := rand.New(rand.NewPCG(1, 2))
	x, y := make([]float32, n*n), make([]float32, n*n)
	for i := range x {
		x[i], y[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	z := make([]float32, n*n)
	for _, name := range append([]Name{Go, Asm}, Libraries()...) {
		b.Run(string(name), func(b *testing.B) {
			c, err := Select(name, ThreadsFor(runtime.NumCPU(), 1))
			if errors.Is(err, ErrNotInstalled) {
				b.Skipf("%s is not installed: %v", name, err)
			}
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("%s", c.Describe())
			for b.Loop() {
				c.Impl.Sgemm(blas.NoTrans, blas.NoTrans, n, n, n, 1, x, n, y, n, 0, z, n)
			}
			b.ReportMetric(2*n*n*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
