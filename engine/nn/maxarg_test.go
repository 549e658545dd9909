package nn

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestMaxArg32Kernel: maxArg32 (the AVX-512 kernel where the CPU has it) leaves o and a bit
// for bit as the Go loop does, on every length up to 70 and on values that test the compare:
// NaN on either side, ±0, ±Inf, subnormals, ties.
func TestMaxArg32Kernel(t *testing.T) {
	if !maxArgAVX512 {
		t.Log("no AVX-512 kernel here: the Go loop is checked against itself")
	}
	rng := rand.New(rand.NewPCG(17, 19))
	special := []float32{float32(math.NaN()), 0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), 1e-45, -1e-45, 1, 1, 1e30}
	pick := func() float32 {
		if rng.IntN(3) == 0 {
			return special[rng.IntN(len(special))]
		}
		return float32(rng.NormFloat64())
	}
	for n := range 71 {
		for range 20 {
			o, a, src := make([]float32, n+3), make([]int32, n+3), make([]float32, n)
			for i := range o {
				o[i], a[i] = pick(), int32(rng.IntN(1000))
			}
			for i := range src {
				src[i] = pick()
			}
			at := int32(rng.IntN(1 << 20))
			wo, wa := append([]float32(nil), o...), append([]int32(nil), a...)
			maxArg32Go(wo, wa, src, at)
			maxArg32(o, a, src, at)
			for i := range o {
				if math.Float32bits(o[i]) != math.Float32bits(wo[i]) || a[i] != wa[i] {
					t.Fatalf("n %d, element %d: o %v a %d, Go loop o %v a %d", n, i, o[i], a[i], wo[i], wa[i])
				}
			}
		}
	}
}

// TestMaxArg32KernelIndexWraps: at + j wraps around int32 the same way in the kernel's
// vector adds as in the Go loop, for at at both ends of int32's range.
func TestMaxArg32KernelIndexWraps(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 29))
	for _, at := range []int32{math.MaxInt32, math.MaxInt32 - 5, math.MaxInt32 - 16, math.MinInt32, -1, -17} {
		for _, n := range []int{1, 15, 16, 17, 33, 48} {
			o, a, src := make([]float32, n), make([]int32, n), make([]float32, n)
			for i := range src {
				o[i], src[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())+1
			}
			wo, wa := append([]float32(nil), o...), append([]int32(nil), a...)
			maxArg32Go(wo, wa, src, at)
			maxArg32(o, a, src, at)
			for i := range o {
				if math.Float32bits(o[i]) != math.Float32bits(wo[i]) || a[i] != wa[i] {
					t.Fatalf("at %d, n %d, element %d: o %v a %d, Go loop o %v a %d", at, n, i, o[i], a[i], wo[i], wa[i])
				}
			}
		}
	}
}
