package kernels

import (
	"math/rand/v2"
	"testing"
)

// reportPerElem adds an ns/elem metric (nanoseconds per element per call).
func reportPerElem(b *testing.B, n int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/elem")
}

// benchNoiseLen is the parameter count of the MLP 784-256-10 of the step benchmarks
// (docs/benchmarks.md).
const benchNoiseLen = 784*256 + 256 + 256*10 + 10

func BenchmarkAddGaussianFloat32(b *testing.B) {
	dst := make([]float32, benchNoiseLen)
	key := NoiseKey{Seed: 1, Step: 2, Tensor: 3}
	b.SetBytes(4 * benchNoiseLen)
	for i := 0; b.Loop(); i++ {
		key.Step = uint64(i)
		AddGaussian(dst, 1.1, key)
	}
	reportPerElem(b, benchNoiseLen)
}

func BenchmarkAddGaussianFloat64(b *testing.B) {
	dst := make([]float64, benchNoiseLen)
	key := NoiseKey{Seed: 1, Step: 2, Tensor: 3}
	b.SetBytes(8 * benchNoiseLen)
	for i := 0; b.Loop(); i++ {
		key.Step = uint64(i)
		AddGaussian(dst, 1.1, key)
	}
	reportPerElem(b, benchNoiseLen)
}

// BenchmarkAddGaussianSerial is the one-goroutine path (a window shorter than
// parMin, repeated), to separate the per-draw cost from the parallel speedup.
func BenchmarkAddGaussianSerial(b *testing.B) {
	const n = parMin / 2
	dst := make([]float64, n)
	key := NoiseKey{Seed: 1, Step: 2, Tensor: 3}
	for i := 0; b.Loop(); i++ {
		AddGaussianAt(dst, 1.1, key, uint64(i%1000)*n)
	}
	reportPerElem(b, n)
}

func benchRowSqNorms[T Float](b *testing.B) {
	const rows, cols = 256, 784
	rng := rand.New(rand.NewPCG(1, 2))
	a := make([]T, rows*cols)
	for i := range a {
		a[i] = T(rng.NormFloat64())
	}
	dst := make([]float64, rows)
	for b.Loop() {
		RowSqNorms(dst, a, rows, cols)
	}
	reportPerElem(b, rows*cols)
}

func BenchmarkRowSqNormsFloat32(b *testing.B) { benchRowSqNorms[float32](b) }
func BenchmarkRowSqNormsFloat64(b *testing.B) { benchRowSqNorms[float64](b) }

func benchClippedSum[T Float](b *testing.B) {
	const bs, d, h = 256, 784, 256
	rng := rand.New(rand.NewPCG(3, 4))
	a := make([]T, bs*d)
	e := make([]T, bs*h)
	for i := range a {
		a[i] = T(rng.NormFloat64())
	}
	for i := range e {
		e[i] = T(rng.NormFloat64())
	}
	c := make([]float64, bs)
	for i := range c {
		c[i] = rng.Float64()
	}
	dstW, dstB, scratch := make([]T, d*h), make([]T, h), make([]T, bs*h)
	for b.Loop() {
		ClippedSum(dstW, dstB, a, e, bs, d, h, c, scratch)
	}
	b.ReportMetric(2*bs*d*h*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	reportPerElem(b, d*h)
}

func BenchmarkClippedSumFloat32(b *testing.B) { benchClippedSum[float32](b) }
func BenchmarkClippedSumFloat64(b *testing.B) { benchClippedSum[float64](b) }

func BenchmarkClipCoefs(b *testing.B) {
	const n = 2048
	rng := rand.New(rand.NewPCG(5, 6))
	norm2, mask, coef := make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range norm2 {
		norm2[i] = 4 * rng.Float64()
		mask[i] = float64(rng.IntN(2))
	}
	for b.Loop() {
		ClipCoefs(coef, norm2, mask, 1)
	}
	reportPerElem(b, n)
}

func BenchmarkGhostAccum(b *testing.B) {
	const n = 2048
	norm2, asq, esq := make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range asq {
		asq[i], esq[i] = float64(i), 1/float64(i+1)
	}
	for b.Loop() {
		GhostAccum(norm2, asq, esq, true)
	}
	reportPerElem(b, n)
}

func BenchmarkScaleRowsFloat32(b *testing.B) {
	const rows, cols = 256, 784
	a := make([]float32, rows*cols)
	c := make([]float64, rows)
	for i := range c {
		c[i] = 1 - float64(i)/rows
	}
	for b.Loop() {
		ScaleRows(a, rows, cols, c)
	}
	reportPerElem(b, rows*cols)
}

func BenchmarkPhilox4x32(b *testing.B) {
	var ctr [4]uint32
	key := [2]uint32{1, 2}
	for b.Loop() {
		ctr = Philox4x32(ctr, key)
	}
	if ctr == [4]uint32{} {
		b.Fatal("zero output")
	}
}
