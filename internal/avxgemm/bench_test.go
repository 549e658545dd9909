package avxgemm

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// BenchmarkSgemm: the package's kernels (each instruction set the CPU runs) against gonum's pure-Go Sgemm on the products of the
// training graphs (one replica's, on one goroutine: the MNIST CNN's convolutions at a
// physical batch of 152, forward and backward, and the MLP's layer) and on 1024³ with every
// core, in GFLOP/s; and one row, where the kernels are slower than gonum.
func BenchmarkSgemm(b *testing.B) {
	needKernels(b)
	type shape struct {
		name    string
		tB      bool
		m, n, k int
		threads int
	}
	shapes := []shape{
		{"cnn-conv1", false, 152 * 196, 16, 64, 1},
		{"cnn-conv2", false, 152 * 25, 32, 256, 1},
		{"cnn-conv2-backward", true, 152 * 25, 256, 32, 1},
		{"mlp-784x64", false, 152, 64, 784, 1},
		{"1024", false, 1024, 1024, 1024, runtime.NumCPU()},
		// Where the 16-row tiles lose to gonum: one row (15 of the tile's 16 rows are zero
		// padding, and packing B costs as much as the product).
		{"one-row-1024x1024", false, 1, 1024, 1024, 1},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range shapes {
		a, bm, c := make([]float32, s.m*s.k), make([]float32, s.k*s.n), make([]float32, s.m*s.n)
		for i := range a {
			a[i] = float32(rng.NormFloat64())
		}
		for i := range bm {
			bm[i] = float32(rng.NormFloat64())
		}
		ldb := s.n
		tB := blas.NoTrans
		if s.tB {
			ldb, tB = s.k, blas.Trans
		}
		flops := 2 * float64(s.m) * float64(s.n) * float64(s.k)
		var g gonum.Implementation
		impls := []struct {
			name string
			f    func()
		}{{"gonum", func() { g.Sgemm(blas.NoTrans, tB, s.m, s.n, s.k, 1, a, s.k, bm, ldb, 0, c, s.n) }}}
		for _, isa := range isas() {
			im := newISA(isa, s.threads)
			impls = append(impls, struct {
				name string
				f    func()
			}{isa, func() { im.Sgemm(blas.NoTrans, tB, s.m, s.n, s.k, 1, a, s.k, bm, ldb, 0, c, s.n) }})
		}
		for _, impl := range impls {
			b.Run(fmt.Sprintf("%s/%s", s.name, impl.name), func(b *testing.B) {
				if impl.name == "gonum" && s.threads == 1 {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
				}
				for b.Loop() {
					impl.f()
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
