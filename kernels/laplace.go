package kernels

import (
	"fmt"
	"math"
)

// LaplaceMax is the largest magnitude of a value of the unit Laplace stream,
// 52·ln 2 ≈ 36.04 (see NoiseKey.Laplace): the tails beyond it, of mass
// e^{−52 ln 2} = 2⁻⁵² ≈ 2.2·10⁻¹⁶, are cut.
const LaplaceMax = 52 * math.Ln2

// Laplace returns value i of the unit Laplace stream of the key, x_i, a draw
// of the density ½·e^{−|x|} (the Laplace mechanism with
// η = 1). It panics if i ≥ MaxStreamLen. The CUDA backend reproduces the same
// stream, so this comment is its specification.
//
// Stream layout. The Laplace stream of a key uses the Philox blocks of its
// Gaussian stream (see NoiseKey): block j gives the same two 53-bit integers
// m₁ = ⌊(2³²·w₀ + w₁)/2¹¹⌋ and m₂ = ⌊(2³²·w₂ + w₃)/2¹¹⌋, and values 2j and
// 2j+1 of the stream are made from m₁ and m₂ respectively. For one such m,
// its top bit is the sign and its other 52 bits the magnitude:
//
//	s = ⌊m / 2⁵²⌋ ∈ {0, 1},   u = (m mod 2⁵² + 1)·2⁻⁵² ∈ (0, 1]   (never 0, so ln u is finite)
//	x = (−1)ˢ·E,   E = −ln u ≥ 0.
//
// s is a fair sign and E an exponential with mean 1 (P(E > t) = e^{−t} up to
// the 2⁻⁵² grid of u), independent of s since they come from disjoint bits; so
// x has the Laplace density ½·e^{−|x|}. |x| ≤ LaplaceMax = 52·ln 2 ≈ 36.04
// (at u = 2⁻⁵²), so the tails of mass 2⁻⁵² beyond it are cut. As for the
// Gaussian stream, ln is the polynomial kernel logUnit (within 1 ulp,
// bit-identical on every platform, with or without the AVX2 kernel), and x is
// ln u with its sign bit flipped where s = 0 (so E = −ln u exactly; u = 1
// gives x = −0 for s = 0 and +0 for s = 1). Another implementation of ln
// (math.Log, CUDA's log) agrees to rounding, not bit for bit.
//
// A key's Laplace and Gaussian streams share their Philox blocks and so are
// not independent: noise a tensor with one or the other, or give the two
// different keys (Tensor or Step).
//
// Floating-point caveat: Mironov (2012, "On significance of the least
// significant bits for differential privacy") showed that a textbook
// floating-point Laplace sampler reveals its input through the low-order bits
// of its output; this one is no exception (see NoiseKey), and the privacy
// analysis assumes ideal real-valued noise.
func (k NoiseKey) Laplace(i uint64) float64 {
	if i >= MaxStreamLen {
		panic(fmt.Sprintf("kernels: stream index %d ≥ MaxStreamLen", i))
	}
	s := k.stream()
	m1, m2 := mantissas(s.block(uint32(i >> 1)))
	if i&1 == 0 {
		return laplaceUnit(m1)
	}
	return laplaceUnit(m2)
}

// laplaceUnit maps a 53-bit integer m to its unit Laplace value (see
// NoiseKey.Laplace).
func laplaceUnit(m uint64) float64 {
	u := float64(m&(1<<52-1)+1) * 0x1p-52
	flip := (m>>52 ^ 1) << 63 // the sign bit of ln u ≤ 0 is flipped where s = 0
	return math.Float64frombits(math.Float64bits(logUnit(u)) ^ flip)
}

// AddLaplace adds scale·x_k to dst[k], where x_k is the k-th value of the
// unit Laplace stream of key (see NoiseKey.Laplace): the Laplace mechanism's
// noise of density (1/(2η))·e^{−|x|/η} per coordinate with η = scale
// (the Laplace mechanism: η = s/ε_c, s the ℓ1-sensitivity).
// Each element is T(FMA(scale, x_k, float64(dst[k]))): one float64 rounding,
// then one to T. Long slices are split over goroutines; the result does not
// depend on the split. scale must be finite and ≥ 0 (scale = 0 leaves dst
// unchanged); otherwise AddLaplace panics, as does a slice longer than
// MaxStreamLen.
func AddLaplace[T Float](dst []T, scale float64, key NoiseKey) {
	AddLaplaceAt(dst, scale, key, 0)
}

// AddLaplaceAt adds scale·x_{offset+k} to dst[k]: dst is the window
// [offset, offset+len(dst)) of a longer tensor, so a tensor may be noised in
// pieces (or on several devices) with the same result as in one call.
func AddLaplaceAt[T Float](dst []T, scale float64, key NoiseKey, offset uint64) {
	if !(scale >= 0) || math.IsInf(scale, 0) {
		panic(fmt.Sprintf("kernels: AddLaplace scale = %v, need a finite value ≥ 0", scale))
	}
	n := uint64(len(dst))
	checkWindow(offset, n)
	if n == 0 {
		return
	}
	g := generator{s: key.stream()}
	g.p = fastParams(&g.s, n/2)
	splitWindow(n, offset, func(lo, hi uint64) {
		laplaceRange(dst[lo:hi], scale, &g, offset+lo)
	})
}

// laplaces sets out[2i], out[2i+1] to the unit Laplace values of block j+i,
// for len(out)/2 blocks (len(out) is even).
func (g *generator) laplaces(out []float64, j uint32) {
	done := laplacesFast(g.p, out, j)
	j += uint32(done)
	for i := 2 * done; i < len(out); i += 2 {
		m1, m2 := mantissas(g.s.block(j))
		out[i], out[i+1] = laplaceUnit(m1), laplaceUnit(m2)
		j++
	}
}

// laplaceRange adds scale·x_{off+k} to dst[k] on the calling goroutine.
func laplaceRange[T Float](dst []T, scale float64, g *generator, off uint64) {
	var buf [bufLen]float64
	for len(dst) > 0 {
		j := uint32(off >> 1)
		skip := int(off & 1) // an odd start uses the second value of its block
		m := min(len(dst), bufLen-skip)
		g.laplaces(buf[:(skip+m+1)&^1], j)
		apply(bestKernel, dst[:m], buf[skip:skip+m], scale, false)
		dst = dst[m:]
		off += uint64(m)
	}
}
