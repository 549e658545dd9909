//go:build !noasm && !purego

package kernels

import "unsafe"

// The AVX-512 Gaussian kernel (gauss_avx512_amd64.s) makes the normals of
// eight Philox blocks per 512-bit vector, one block per 64-bit lane, in
// three passes over an L1-resident buffer: Philox4x32-10 (four vectors
// interleaved), the Box–Muller radii and the rotations (two each), which
// leave the normals in stream order. Its values equal boxMuller's bit for
// bit, not merely to rounding, with fewer instructions than a literal
// translation, by three rewritings that are exact in IEEE-754 arithmetic:
//
//   - Philox: the first round's x₀ and x₁, and hence M₀·x₀ of the second
//     round, do not depend on the block counter, so they are constants of the
//     stream; and the last round's words come out already paired,
//     2³²·x₀ + x₁ = (M₁·x₂) ⊕ ((x₁ ⊕ k₀)·2³²) as 64-bit integers.
//   - logUnit: the result is needed only as −2·ln u₁, so the polynomial and
//     the ln 2 constants are taken doubled (2·hfsq is f·f) and −2·ln u₁ is
//     formed as (−2k·ln2Hi) − ((2lo − 2hfsq) + 2f). Scaling by 2 commutes
//     with rounding (no intermediate is subnormal) and round-to-nearest is
//     symmetric, so every intermediate is exactly 2 or −2 times logUnit's,
//     and at u₁ = 1 the result is −0 = −2·(+0) as in boxMuller. k comes from
//     the exponent of the bits of u₁ plus the √2 adjustment (VGETEXPPD), y
//     from one three-way bit select.
//   - sinCos2Pi: the octant and the position in it are read from the
//     unshifted 64-bit word, whose low 11 bits are masked off: the position
//     then converts to ρ·2¹¹ exactly and is scaled by (π/4)·2⁻⁶¹ instead of
//     ρ by (π/4)·2⁻⁵⁰, the same real product.
//
// The tests compare the kernel with boxMuller over many keys, counters and
// the extreme inputs of each step.

// avx512Ops holds a generator's AVX-512 operands.
type avx512Ops struct{ q avx512Params }

// avx512Params holds the operands of the AVX-512 kernel: the Philox round keys and
// the hoisted parts of the first two rounds of one stream, and the
// Box–Muller constants. The assembly reads the fields by the offsets in
// go_asm.h, each broadcast to the eight lanes.
type avx512Params struct {
	ctr [8]uint64 // lane l starts at block j+ctr[l]: the order that makes the output interleave lane-local
	inc uint64    // 8: blocks per vector
	m0  uint64    // Philox multipliers
	m1  uint64
	// Rounds 0–2 with the shared counter words folded in (see philoxStream):
	// after round 0, x₀ = r0x0 and x₁ = r0x1 for every block.
	r0c3 uint64 // round 0: x₂ = hi(M₀·j) ⊕ r0c3
	c1a  uint64 // round 1: x₀ = hi(M₁·x₂) ⊕ r0x1 ⊕ k₀
	c1b  uint64 // round 1: x₂ = lo(M₀·j) ⊕ hi(M₀·r0x0) ⊕ k₁ (x₃ = lo(M₀·r0x0))
	k2a  uint64 // round 2: k₀
	c2b  uint64 // round 2: x₂ = hi(M₀·x₀) ⊕ lo(M₀·r0x0) ⊕ k₁
	k3a  uint64 // rounds 3–8: the key
	k3b  uint64
	k4a  uint64
	k4b  uint64
	k5a  uint64
	k5b  uint64
	k6a  uint64
	k6b  uint64
	k7a  uint64
	k7b  uint64
	k8a  uint64
	k8b  uint64
	k9a  uint64 // round 9: the key times 2³²
	k9b  uint64
	// logUnit, doubled where noted.
	p2m53    float64 // 2⁻⁵³
	fracMask uint64
	sqrt2Adj uint64
	one      float64
	two      float64
	l1       float64 // 2·L₁ … 2·L₇
	l2       float64
	l3       float64
	l4       float64
	l5       float64
	l6       float64
	l7       float64
	ln2Lo    float64 // 2·ln2Lo
	ln2Hi    float64 // −2·ln2Hi
	// sinCos2Pi.
	posMask uint64  // bits 11–60: the position in the octant, times 2¹¹
	bit61   uint64  // the low bit of the octant; 2⁶¹ = 2⁵⁰·2¹¹, an eighth turn
	bit62   uint64  // the middle bit of the octant
	sign    uint64  // the sign bit
	pi4u61  float64 // (π/4)·2⁻⁶¹
	mhalf   float64 // −0.5
	s0      float64
	s1      float64
	s2      float64
	s3      float64
	s4      float64
	s5      float64
	c0      float64
	c1      float64
	c2      float64
	c3      float64
	c4      float64
	c5      float64
}

// setStream sets q to the operands for the stream s.
func (q *avx512Params) setStream(s *philoxStream) {
	q0 := uint64(philoxM0) * uint64(s.r0x0) // round 1's M₀·x₀, the same for every block
	*q = avx512Params{
		ctr:  [8]uint64{0, 4, 1, 5, 2, 6, 3, 7},
		inc:  8,
		m0:   philoxM0,
		m1:   philoxM1,
		r0c3: uint64(s.r0c3),
		c1a:  uint64(s.r0x1 ^ s.k[1][0]),
		c1b:  uint64(uint32(q0>>32) ^ s.k[1][1]),
		k2a:  uint64(s.k[2][0]),
		c2b:  uint64(uint32(q0) ^ s.k[2][1]),
		k3a:  uint64(s.k[3][0]), k3b: uint64(s.k[3][1]),
		k4a: uint64(s.k[4][0]), k4b: uint64(s.k[4][1]),
		k5a: uint64(s.k[5][0]), k5b: uint64(s.k[5][1]),
		k6a: uint64(s.k[6][0]), k6b: uint64(s.k[6][1]),
		k7a: uint64(s.k[7][0]), k7b: uint64(s.k[7][1]),
		k8a: uint64(s.k[8][0]), k8b: uint64(s.k[8][1]),
		k9a: uint64(s.k[9][0]) << 32, k9b: uint64(s.k[9][1]) << 32,

		p2m53:    0x1p-53,
		fracMask: 1<<52 - 1,
		sqrt2Adj: 0x95f619980c433,
		one:      1,
		two:      2,
		l1:       2 * logL1, l2: 2 * logL2, l3: 2 * logL3, l4: 2 * logL4,
		l5: 2 * logL5, l6: 2 * logL6, l7: 2 * logL7,
		ln2Lo: 2 * ln2Lo,
		ln2Hi: -2 * ln2Hi,

		posMask: (1<<50 - 1) << 11,
		bit61:   1 << 61,
		bit62:   1 << 62,
		sign:    1 << 63,
		pi4u61:  pi4Ulp50 * 0x1p-11,
		mhalf:   -0.5,
		s0:      sinS0, s1: sinS1, s2: sinS2, s3: sinS3, s4: sinS4, s5: sinS5,
		c0: cosC0, c1: cosC1, c2: cosC2, c3: cosC3, c4: cosC4, c5: cosC5,
	}
}

// philoxAVX512 evaluates the Philox blocks j, j+1, …, j+8·groups−1 and
// writes, for each group of eight, the words 2³²·x₀ + x₁ of its blocks, then
// their words 2³²·x₂ + x₃, lanes in block order 0, 4, 1, 5, 2, 6, 3, 7 of the
// group: 16·groups words in all. Counters past 2³²−1 wrap.
//
//go:noescape
func philoxAVX512(p *avx512Params, buf *uint64, groups int, j uint32)

// boxMullerAVX512 replaces, in place, each group of sixteen words written by
// philoxAVX512 with the sixteen normals of its eight blocks in stream order
// (boxMuller). Only the top 53 bits of each word are read.
//
//go:noescape
func boxMullerAVX512(p *avx512Params, buf *float64, groups int)

// normals512 writes the normals of blocks j, j+1, … to out (two per block)
// for ⌈len(out)/16⌉ groups of eight blocks where out's capacity holds them,
// else for the whole groups in len(out), and returns the number of blocks
// written (which may pass len(out)/2, into out's capacity).
func normals512(q *avx512Params, out []float64, j uint32) int {
	groups := (len(out) + 15) / 16
	if 16*groups > cap(out) {
		groups = len(out) / 16
	}
	if q == nil || groups == 0 {
		return 0
	}
	d := unsafe.SliceData(out)
	philoxAVX512(q, (*uint64)(unsafe.Pointer(d)), groups, j)
	boxMullerAVX512(q, d, groups)
	return 8 * groups
}

// axpyF64AVX512 sets dst[i] = FMA(std, z[i], dst[i]) for i < n.
//
//go:noescape
func axpyF64AVX512(dst *float64, z *float64, n int, std float64)

// axpyF32AVX512 sets dst[i] = float32(FMA(std, z[i], float64(dst[i]))) for
// i < n.
//
//go:noescape
func axpyF32AVX512(dst *float32, z *float64, n int, std float64)

// cvtF32AVX512 sets dst[i] = float32(z[i]) for i < n.
//
//go:noescape
func cvtF32AVX512(dst *float32, z *float64, n int)
