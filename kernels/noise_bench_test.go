package kernels

import (
	"math"
	"strconv"
	"testing"
)

// benchNoiseSizes are the tensor lengths of the noise benchmarks (float32).
var benchNoiseSizes = []int{1e5, 1e6}

// BenchmarkNoise compares, in one run, the Gaussian, Laplace and ball noise
// on float32 tensors of 10⁵ and 10⁶ elements, so that their ratios can be
// read off. BallScratch is the alternative to AddBall's two passes over the
// stream: the normals stored once in a caller's float64 buffer (see
// addBallScratch).
func BenchmarkNoise(b *testing.B) {
	for _, n := range benchNoiseSizes {
		dst := make([]float32, n)
		key := NoiseKey{Seed: 1, Step: 2, Tensor: 3}
		run := func(name string, f func(i int)) {
			b.Run(name+"/n="+strconv.Itoa(n), func(b *testing.B) {
				b.SetBytes(4 * int64(n))
				for i := 0; b.Loop(); i++ {
					f(i)
				}
				reportPerElem(b, n)
			})
		}
		run("Gaussian", func(i int) { key.Step = uint64(i); AddGaussian(dst, 1.1, key) })
		run("Laplace", func(i int) { key.Step = uint64(i); AddLaplace(dst, 1.1, key) })
		run("Ball", func(i int) { key.Step = uint64(i); AddBall([][]float32{dst}, 1.1, key) })
		scratch := make([]float64, n)
		run("BallScratch", func(i int) { key.Step = uint64(i); addBallScratch([][]float32{dst}, 1.1, key, scratch) })
	}
}

// BenchmarkGaussianKernels compares, in one run, the kernels of the Gaussian
// stream (pure Go, AVX2, AVX-512; those the CPU runs) through the path of
// FillGaussianAt and AddGaussianAt: "serial" windows of 4096 values at
// varying offsets stay on one goroutine (ns/elem is then per core), windows
// of 10⁶ values (not for the slow pure-Go kernel) are split over GOMAXPROCS
// goroutines.
func BenchmarkGaussianKernels(b *testing.B) {
	key := NoiseKey{Seed: 1, Step: 2, Tensor: 3}
	for _, k := range supportedKernels() {
		for _, n := range []int{parMin / 2, 1e6} {
			size := "n=" + strconv.Itoa(n)
			if n < parMin {
				size = "serial"
			} else if k == kernelGo {
				continue
			}
			f64, f32 := make([]float64, n), make([]float32, n)
			run := func(name string, f func(off uint64)) {
				b.Run(kernelNames[k]+"/"+name+"/"+size, func(b *testing.B) {
					for i := 0; b.Loop(); i++ {
						f(uint64(i%1000) * uint64(n+1))
					}
					reportPerElem(b, n)
				})
			}
			run("Fill64", func(off uint64) { gaussianWith(k, f64, 0, key, off, true) })
			run("Add64", func(off uint64) { gaussianWith(k, f64, 1.1, key, off, false) })
			run("Add32", func(off uint64) { gaussianWith(k, f32, 1.1, key, off, false) })
		}
	}
}

// BenchmarkAddBallMLP is ball noise on the parameter tensors of the
// MLP 784-256-10 of the step benchmarks (four tensors), as the engine calls it.
func BenchmarkAddBallMLP(b *testing.B) {
	dsts := [][]float32{make([]float32, 784*256), make([]float32, 256), make([]float32, 256*10), make([]float32, 10)}
	key := NoiseKey{Seed: 1, Step: 2, Tensor: 3}
	for i := 0; b.Loop(); i++ {
		key.Step = uint64(i)
		AddBall(dsts, 0.5, key)
	}
	reportPerElem(b, benchNoiseLen)
}

// addBallScratch is the same noise as AddBall up to the summation order of
// ‖g‖², made by storing the d normals in scratch (len ≥ d) instead of
// generating them twice. It exists to measure whether such an API would pay.
func addBallScratch[T Float](dsts [][]T, radius float64, key NoiseKey, scratch []float64) {
	d := 0
	for p, dst := range dsts {
		FillGaussian(scratch[d:d+len(dst)], ballKey(key, p))
		d += len(dst)
	}
	if d == 0 {
		return
	}
	z := scratch[:d]
	sums := make([]float64, (d+ballChunk-1)/ballChunk)
	splitWindow(uint64(len(sums)), 0, func(lo, hi uint64) {
		for c := lo; c < hi; c++ {
			var acc [4]float64
			part := z[c*ballChunk : min((c+1)*ballChunk, uint64(d))]
			for i, v := range part {
				acc[i&3] += float64(v * v)
			}
			sums[c] = (acc[0] + acc[1]) + (acc[2] + acc[3])
		}
	})
	sq := 0.0
	for _, s := range sums {
		sq += s
	}
	c := float64(radius*expNeg(logUnit(ballUniform(key))/float64(d))) / math.Sqrt(sq)
	d = 0
	for _, dst := range dsts {
		zp := z[d : d+len(dst)]
		splitWindow(uint64(len(dst)), 0, func(lo, hi uint64) { apply(bestKernel, dst[lo:hi], zp[lo:hi], c, false) })
		d += len(dst)
	}
}
