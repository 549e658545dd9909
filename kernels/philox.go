package kernels

// Philox4x32-10 constants (Salmon, Moraes, Dror, Shaw, "Parallel random
// numbers: as easy as 1, 2, 3", SC'11, §4; Random123 philox.h).
const (
	philoxM0 = 0xD2511F53 // multiplier applied to counter word 0
	philoxM1 = 0xCD9E8D57 // multiplier applied to counter word 2
	philoxW0 = 0x9E3779B9 // Weyl key increment, word 0 (golden ratio)
	philoxW1 = 0xBB67AE85 // Weyl key increment, word 1 (√3 − 1)
)

// Philox4x32 is the Philox4x32-10 block function (Salmon et al., SC'11;
// Random123): ten rounds of
//
//	(x₀, x₁, x₂, x₃) ← (hi(M₁·x₂) ⊕ x₁ ⊕ k₀, lo(M₁·x₂), hi(M₀·x₀) ⊕ x₃ ⊕ k₁, lo(M₀·x₀))
//
// with M₀ = 0xD2511F53, M₁ = 0xCD9E8D57, hi/lo the halves of the 64-bit
// product, and the key bumped by (0x9E3779B9, 0xBB67AE85) between rounds.
// It is a bijection of the 128-bit counter for each 64-bit key, and its
// output passes BigCrush for any counter sequence.
func Philox4x32(ctr [4]uint32, key [2]uint32) [4]uint32 {
	return philoxRounds(ctr, key, 10)
}

// philoxRounds is Philox4x32 with a given number of rounds; it exists so that
// tests can check the round structure against Random123's 7-round vectors.
func philoxRounds(ctr [4]uint32, key [2]uint32, rounds int) [4]uint32 {
	x0, x1, x2, x3 := ctr[0], ctr[1], ctr[2], ctr[3]
	k0, k1 := key[0], key[1]
	for r := range rounds {
		if r > 0 {
			k0 += philoxW0
			k1 += philoxW1
		}
		p0 := uint64(philoxM0) * uint64(x0)
		p1 := uint64(philoxM1) * uint64(x2)
		x0, x1, x2, x3 = uint32(p1>>32)^x1^k0, uint32(p1), uint32(p0>>32)^x3^k1, uint32(p0)
	}
	return [4]uint32{x0, x1, x2, x3}
}

// philoxStream evaluates Philox4x32-10 for many counters that share the words
// 1–3 and the key, as in a noise stream; its key schedule is precomputed and
// the first half-round that depends only on the shared words is hoisted.
type philoxStream struct {
	k  [10][2]uint32 // round keys
	c1 uint32        // counter word 1 (Tensor)
	// First round: word 2 is constant, so M₁·x₂ is too.
	r0x0 uint32 // hi(M₁·x₂) ⊕ x₁ ⊕ k₀
	r0x1 uint32 // lo(M₁·x₂)
	r0c3 uint32 // x₃ ⊕ k₁, to be xored with hi(M₀·j)
}

func newPhiloxStream(c1, c2, c3 uint32, key [2]uint32) philoxStream {
	var s philoxStream
	k0, k1 := key[0], key[1]
	for r := range s.k {
		s.k[r] = [2]uint32{k0, k1}
		k0 += philoxW0
		k1 += philoxW1
	}
	s.c1 = c1
	p1 := uint64(philoxM1) * uint64(c2)
	s.r0x0 = uint32(p1>>32) ^ c1 ^ key[0]
	s.r0x1 = uint32(p1)
	s.r0c3 = c3 ^ key[1]
	return s
}

// block returns Philox4x32(ctr = [j, c1, c2, c3], key), fully unrolled.
func (s *philoxStream) block(j uint32) (x0, x1, x2, x3 uint32) {
	p0 := uint64(philoxM0) * uint64(j)
	x0, x1, x2, x3 = s.r0x0, s.r0x1, uint32(p0>>32)^s.r0c3, uint32(p0)
	k := &s.k
	var p1 uint64
	p0, p1 = uint64(philoxM0)*uint64(x0), uint64(philoxM1)*uint64(x2)
	x0, x1, x2, x3 = uint32(p1>>32)^x1^k[1][0], uint32(p1), uint32(p0>>32)^x3^k[1][1], uint32(p0)
	p0, p1 = uint64(philoxM0)*uint64(x0), uint64(philoxM1)*uint64(x2)
	x0, x1, x2, x3 = uint32(p1>>32)^x1^k[2][0], uint32(p1), uint32(p0>>32)^x3^k[2][1], uint32(p0)
	p0, p1 = uint64(philoxM0)*uint64(x0), uint64(philoxM1)*uint64(x2)
	x0, x1, x2, x3 = uint32(p1>>32)^x1^k[3][0], uint32(p1), uint32(p0>>32)^x3^k[3][1], uint32(p0)
	p0, p1 = uint64(philoxM0)*uint64(x0), uint64(philoxM1)*uint64(x2)
	x0, x1, x2, x3 = uint32(p1>>32)^x1^k[4][0], uint32(p1), uint32(p0>>32)^x3^k[4][1], uint32(p0)
	p0, p1 = uint64(philoxM0)*uint64(x0), uint64(philoxM1)*uint64(x2)
	x0, x1, x2, x3 = uint32(p1>>32)^x1^k[5][0], uint32(p1), uint32(p0>>32)^x3^k[5][1], uint32(p0)
	p0, p1 = uint64(philoxM0)*uint64(x0), uint64(philoxM1)*uint64(x2)
	x0, x1, x2, x3 = uint32(p1>>32)^x1^k[6][0], uint32(p1), uint32(p0>>32)^x3^k[6][1], uint32(p0)
	p0, p1 = uint64(philoxM0)*uint64(x0), uint64(philoxM1)*uint64(x2)
	x0, x1, x2, x3 = uint32(p1>>32)^x1^k[7][0], uint32(p1), uint32(p0>>32)^x3^k[7][1], uint32(p0)
	p0, p1 = uint64(philoxM0)*uint64(x0), uint64(philoxM1)*uint64(x2)
	x0, x1, x2, x3 = uint32(p1>>32)^x1^k[8][0], uint32(p1), uint32(p0>>32)^x3^k[8][1], uint32(p0)
	p0, p1 = uint64(philoxM0)*uint64(x0), uint64(philoxM1)*uint64(x2)
	x0, x1, x2, x3 = uint32(p1>>32)^x1^k[9][0], uint32(p1), uint32(p0>>32)^x3^k[9][1], uint32(p0)
	return x0, x1, x2, x3
}
