package kernels

import (
	"crypto/rand"
	"runtime"
	"strconv"
	"testing"
)

// BenchmarkSecureNoise compares, in one run, the default Philox AddGaussian
// with the secure grid Gaussian (AddSecureGaussian) and the 4-draw sum
// (AddSecureGaussianSum4) on float32 tensors of 10⁵ and 10⁶ elements; the
// ns/elem columns give the cost ratios of secure mode's noise.
func BenchmarkSecureNoise(b *testing.B) {
	src, err := NewSecureSource()
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range benchNoiseSizes {
		dst := make([]float32, n)
		run := func(name string, f func(i int)) {
			b.Run(name+"/n="+strconv.Itoa(n), func(b *testing.B) {
				b.SetBytes(4 * int64(n))
				for i := 0; b.Loop(); i++ {
					f(i)
				}
				reportPerElem(b, n)
			})
		}
		key := NoiseKey{Seed: 1, Step: 2, Tensor: 3}
		run("Philox", func(i int) { key.Step = uint64(i); AddGaussian(dst, 1.1, key) })
		run("SecureGrid", func(int) { AddSecureGaussian(src, dst, 1.1) })
		run("SecureSum4", func(int) { AddSecureGaussianSum4(src, dst, 1.1) })
	}
}

// BenchmarkSecureSource compares the cost of one 64-bit word from a
// SecureSource (ChaCha8 keyed and rekeyed from crypto/rand) with reading
// crypto/rand directly behind a 64 KiB buffer (Google's DP library's choice).
func BenchmarkSecureSource(b *testing.B) {
	b.Run("ChaCha8", func(b *testing.B) {
		src, err := NewSecureSource()
		if err != nil {
			b.Fatal(err)
		}
		var x uint64
		for b.Loop() {
			x += src.Uint64()
		}
		runtime.KeepAlive(x)
	})
	b.Run("CryptoRandBuffered", func(b *testing.B) {
		buf := make([]byte, 64<<10)
		pos := len(buf)
		var x uint64
		for b.Loop() {
			if pos == len(buf) {
				if _, err := rand.Read(buf); err != nil {
					b.Fatal(err)
				}
				pos = 0
			}
			x += uint64(buf[pos]) | uint64(buf[pos+1])<<8 | uint64(buf[pos+2])<<16 | uint64(buf[pos+3])<<24 |
				uint64(buf[pos+4])<<32 | uint64(buf[pos+5])<<40 | uint64(buf[pos+6])<<48 | uint64(buf[pos+7])<<56
			pos += 8
		}
		runtime.KeepAlive(x)
	})
}
