//go:build !noasm && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// The AVX-512 kernel equals the pure-Go block-by-block path bit for bit, for
// many keys, group counts that exercise the four- and two-group loops and
// their remainders, counters at the start, inside and at the very end of the
// range (where a group wraps past 2³²−1), and it writes nothing past its
// groups.
func TestAVX512MatchesGo(t *testing.T) {
	if !useAVX512 {
		t.Skip("CPU without AVX-512 F and DQ")
	}
	rng := rand.New(rand.NewPCG(71, 72))
	for k := range 100 {
		key := NoiseKey{Seed: rng.Uint64(), Step: rng.Uint64(), Tensor: rng.Uint32()}
		switch k {
		case 0:
			key = NoiseKey{}
		case 1:
			key = NoiseKey{Seed: ^uint64(0), Step: ^uint64(0), Tensor: ^uint32(0)}
		}
		s := key.stream()
		var q avx512Params
		q.setStream(&s)
		groups := 1 + k%11
		for _, j := range []uint32{0, rng.Uint32(), ^uint32(0) - 8*uint32(groups) + 1, ^uint32(0) - 3} {
			const canary = -12345.0
			out := make([]float64, 16*groups+16)
			for i := range out {
				out[i] = canary
			}
			if got := normals512(&q, out[:16*groups-1], j); got != 8*groups {
				t.Fatalf("normals512 did %d blocks, want %d", got, 8*groups)
			}
			for i := range 8 * groups {
				b := j + uint32(i) // wraps like the kernel's counters
				z0, z1 := boxMuller(s.block(b))
				if math.Float64bits(z0) != math.Float64bits(out[2*i]) || math.Float64bits(z1) != math.Float64bits(out[2*i+1]) {
					t.Fatalf("key %+v block %d: AVX-512 (%v, %v), Go (%v, %v)", key, b, out[2*i], out[2*i+1], z0, z1)
				}
			}
			for i := 16 * groups; i < len(out); i++ {
				if out[i] != canary {
					t.Fatalf("key %+v, %d groups: wrote out[%d]", key, groups, i)
				}
			}
		}
	}
}

// normals512 writes whole groups only where out's capacity holds them.
func TestNormals512Capacity(t *testing.T) {
	if !useAVX512 {
		t.Skip("CPU without AVX-512 F and DQ")
	}
	s := NoiseKey{Seed: 4}.stream()
	var q avx512Params
	q.setStream(&s)
	buf := make([]float64, 64)
	for _, c := range []struct{ n, cap, want int }{{0, 64, 0}, {2, 64, 8}, {16, 16, 8}, {18, 20, 8}, {18, 32, 16}, {40, 48, 24}, {40, 40, 16}} {
		if got := normals512(&q, buf[:c.n:c.cap], 0); got != c.want {
			t.Errorf("len %d cap %d: %d blocks, want %d", c.n, c.cap, got, c.want)
		}
	}
}

// The Box–Muller passes of the AVX-512 kernel at the extremes of their
// inputs, with random bits below the 53 that are read: m₁ from 0 to 2⁵³−1
// (u₁ from 2⁻⁵³ to 1, where −2 ln u₁ is −0 and the normals are signed
// zeros), around the √2 split of logUnit, and m₂ at and next to every octant
// boundary.
func TestAVX512BoxMullerEdges(t *testing.T) {
	if !useAVX512 {
		t.Skip("CPU without AVX-512 F and DQ")
	}
	m1s := []uint64{0, 1, 2, 1<<20 - 1, 1<<32 - 1, 1 << 32, 1<<51 - 1, 1 << 51, 1<<52 - 1, 1 << 52, 1<<53 - 2, 1<<53 - 1,
		0x6a09e667f3bcc, 0x6a09e667f3bcd, 0x16a09e667f3bcc, 0x16a09e667f3bcd}
	var m2s []uint64
	for o := uint64(0); o < 8; o++ {
		m2s = append(m2s, o<<50, o<<50+1, (o+1)<<50-1, o<<50+1<<49)
	}
	rng := rand.New(rand.NewPCG(73, 74))
	for range 256 {
		m1s = append(m1s, rng.Uint64N(1<<53))
		m2s = append(m2s, rng.Uint64N(1<<53))
	}
	var pairs [][2]uint64
	for _, a := range m1s {
		for _, b := range m2s {
			pairs = append(pairs, [2]uint64{a, b})
		}
	}
	for len(pairs)%8 != 0 {
		pairs = append(pairs, [2]uint64{0, 0})
	}
	groups := len(pairs) / 8
	buf := make([]uint64, 16*groups)
	for g := range groups {
		for l := range 8 {
			m := pairs[8*g+l]
			buf[16*g+l] = m[0]<<11 | rng.Uint64N(1<<11)
			buf[16*g+8+l] = m[1]<<11 | rng.Uint64N(1<<11)
		}
	}
	var s philoxStream
	var q avx512Params
	q.setStream(&s)
	f := unsafe.Slice((*float64)(unsafe.Pointer(&buf[0])), len(buf))
	boxMullerAVX512(&q, &f[0], groups)
	for g := range groups {
		for l, b := range q.ctr { // lane l holds block b of the group
			m := pairs[8*g+l]
			r := math.Sqrt(-2 * logUnit(float64(m[0]+1)*0x1p-53))
			sin, cos := sinCos2Pi(m[1])
			z0, z1 := r*cos, r*sin
			got0, got1 := f[16*g+2*int(b)], f[16*g+2*int(b)+1]
			if math.Float64bits(z0) != math.Float64bits(got0) || math.Float64bits(z1) != math.Float64bits(got1) {
				t.Fatalf("m₁=%#x m₂=%#x: AVX-512 (%v, %v), Go (%v, %v)", m[0], m[1], got0, got1, z0, z1)
			}
		}
	}
}

// BenchmarkAVX512Passes times the passes of the AVX-512 kernel on one
// 512-value buffer (per normal): Philox, Box–Muller (radii and rotations),
// and the float32 add of AddGaussian, to show where the time of a draw goes.
func BenchmarkAVX512Passes(b *testing.B) {
	if !useAVX512 {
		b.Skip("CPU without AVX-512 F and DQ")
	}
	s := NoiseKey{Seed: 1, Step: 2, Tensor: 3}.stream()
	var q avx512Params
	q.setStream(&s)
	buf := make([]float64, bufLen)
	words := make([]uint64, bufLen)
	dst := make([]float32, bufLen)
	const groups = bufLen / 16
	b.Run("philox", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			philoxAVX512(&q, &words[0], groups, uint32(i*groups*8))
		}
		reportPerElem(b, bufLen)
	})
	b.Run("boxmuller", func(b *testing.B) {
		philoxAVX512(&q, &words[0], groups, 0)
		for b.Loop() {
			copy(buf, unsafe.Slice((*float64)(unsafe.Pointer(&words[0])), bufLen))
			boxMullerAVX512(&q, &buf[0], groups)
		}
		reportPerElem(b, bufLen)
	})
	b.Run("copy", func(b *testing.B) { // the copy inside "boxmuller"
		for b.Loop() {
			copy(buf, unsafe.Slice((*float64)(unsafe.Pointer(&words[0])), bufLen))
		}
		reportPerElem(b, bufLen)
	})
	b.Run("add32", func(b *testing.B) {
		normals512(&q, buf, 0)
		for b.Loop() {
			apply(kernelAVX512, dst, buf, 1.1, false)
		}
		reportPerElem(b, bufLen)
	})
}
