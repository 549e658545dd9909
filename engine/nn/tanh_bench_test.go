package nn

import (
	"math/rand/v2"
	"testing"

	"github.com/chewxy/math32"
)

// BenchmarkTanh32: the float32 tanh per element, the AVX-512 kernel (tanhSlice32 where the CPU
// has it), tanh32's Go loop, and chewxy/math32's Tanh that the nets used before.
func BenchmarkTanh32(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	src := make([]float32, 4096)
	for i := range src {
		src[i] = float32(rng.NormFloat64() * 2)
	}
	dst := make([]float32, len(src))
	b.Run("asm", func(b *testing.B) {
		for b.Loop() {
			tanhSlice32(dst, src)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(src)), "ns/elem")
	})
	b.Run("go", func(b *testing.B) {
		for b.Loop() {
			for i, v := range src {
				dst[i] = tanh32(v)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(src)), "ns/elem")
	})
	b.Run("math32", func(b *testing.B) {
		for b.Loop() {
			for i, v := range src {
				dst[i] = math32.Tanh(v)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(src)), "ns/elem")
	})
}
