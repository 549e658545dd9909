package kernels

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
)

// BallRadiusTensor is the tensor id reserved for the radius uniforms of
// AddBall: block t of the stream NoiseKey{Seed, Step, Tensor:
// BallRadiusTensor} gives the radius of the ball noise whose first tensor is
// t. No tensor may be noised under this id.
const BallRadiusTensor = ^uint32(0)

// MaxBallRadius is the largest radius AddBall accepts, far beyond any
// meaningful one; it keeps the scale radius·U^{1/d}/‖g‖ finite however small
// ‖g‖ is (every nonzero value of the Gaussian stream exceeds 10⁻²⁴ in
// magnitude: r ≥ 1.4·10⁻⁸ and a nonzero sine or cosine ≥ 6.9·10⁻¹⁶).
const MaxBallRadius = 1e270

// ballChunk is the number of values of one tensor whose squares are summed as
// one partial sum of ‖g‖² (see AddBall); it is even and a multiple of 16, so
// chunks start on groups of eight Philox blocks.
const ballChunk = 1 << 12

// AddBall adds to the tensors dsts, which together form one vector of
// dimension d = Σ len(dsts[p]), one draw n of the uniform distribution on the
// d-dimensional ball of the given radius (the volume, not the sphere):
// direction g/‖g‖ with
// g ~ N(0, I_d), radius r·U^{1/d} with U ~ Uniform(0, 1]. The CUDA backend
// reproduces the same noise, so this comment is its specification.
//
// Layout. Coordinate k of tensor p is g_{p,k} = z_k of the Gaussian stream
// (see NoiseKey) of the key NoiseKey{Seed: key.Seed, Step: key.Step,
// Tensor: key.Tensor + p}; so ball noise on one tensor uses the stream that
// AddGaussian would, and the ids key.Tensor … key.Tensor+len(dsts)−1 must be
// below BallRadiusTensor. The uniform is U = u₁ ∈ (0, 1] (see NoiseKey) of
// block key.Tensor of the stream NoiseKey{Seed: key.Seed, Step: key.Step,
// Tensor: BallRadiusTensor}, so calls with different first tensors draw
// different radii. With
//
//	‖g‖² = Σ_p Σ_j r_{p,j}²,   ρ = exp(ln(U)/d),   c = (radius·ρ)/‖g‖,
//
// where r_{p,j} = √(−2 ln u₁) is the Box–Muller radius of block j of tensor p
// (so r² = z₂ⱼ² + z₂ⱼ₊₁², and for a tensor of odd length its last block
// contributes z² of its one value instead), each element becomes
// T(FMA(c, z, float64(dst[k]))): exactly AddGaussian with std = c on each
// tensor's stream. If ‖g‖ = 0 (probability at most 3·2⁻⁵³, at d = 1) the
// noise is 0.
//
// The CPU evaluates ln with logUnit, exp with expNeg (polynomial kernels
// within about an ulp, bit-identical on every platform) and sums ‖g‖² in
// float64 in a fixed order: each tensor is cut into chunks of 4096 values
// (2048 blocks); in a chunk, four sums collect the rounded r² of the blocks
// whose index in the chunk is 0, 1, 2, 3 mod 4, in increasing order, and the
// chunk's sum is (s₀ + s₁) + (s₂ + s₃); the chunk sums are added in order of
// tensor, then chunk. So the result does not depend on the number of
// goroutines or on GOMAXPROCS. Another implementation (other summation
// order, math.Log, math.Pow) agrees to rounding, not bit for bit.
//
// AddBall makes the stream twice (first ‖g‖², then the noise) rather than
// storing d normals, and splits long tensors over goroutines. d = 0 (no
// tensors, or all empty) does nothing. radius must be finite, ≥ 0 and at
// most MaxBallRadius (radius = 0 leaves the tensors unchanged); otherwise, or
// if a tensor id would reach BallRadiusTensor, or a tensor is longer than
// MaxStreamLen, AddBall panics.
//
// As with every floating-point sampler, the privacy analysis assumes the
// ideal real-valued distribution (see the caveat at NoiseKey).
func AddBall[T Float](dsts [][]T, radius float64, key NoiseKey) {
	if !(radius >= 0 && radius <= MaxBallRadius) {
		panic(fmt.Sprintf("kernels: AddBall radius = %v, need a finite value in [0, %g]", radius, MaxBallRadius))
	}
	if uint64(key.Tensor)+uint64(len(dsts)) > uint64(BallRadiusTensor) {
		panic(fmt.Sprintf("kernels: AddBall tensor ids %d…%d reach BallRadiusTensor", key.Tensor, uint64(key.Tensor)+uint64(len(dsts))-1))
	}
	lens := make([]uint64, len(dsts))
	for p, dst := range dsts {
		lens[p] = uint64(len(dst))
		checkWindow(0, lens[p])
	}
	c := ballScale(lens, radius, key)
	if c == 0 {
		return
	}
	for p, dst := range dsts {
		if len(dst) > 0 {
			gaussian(dst, c, ballKey(key, p), 0, false)
		}
	}
}

// ballKey is the key of tensor p of the ball noise keyed by key.
func ballKey(key NoiseKey, p int) NoiseKey {
	return NoiseKey{Seed: key.Seed, Step: key.Step, Tensor: key.Tensor + uint32(p)}
}

// ballUniform returns the radius uniform U ∈ (0, 1] of the ball noise keyed by
// key (see AddBall).
func ballUniform(key NoiseKey) float64 {
	u1, _ := NoiseKey{Seed: key.Seed, Step: key.Step, Tensor: BallRadiusTensor}.Uniforms(key.Tensor)
	return u1
}

// ballScale returns the scale c = (radius·ρ)/‖g‖ of AddBall for tensors of
// the given lengths, or 0 where d = 0, radius = 0 or ‖g‖ = 0.
func ballScale(lens []uint64, radius float64, key NoiseKey) float64 {
	d := uint64(0)
	for _, n := range lens {
		d += n
	}
	if d == 0 || radius == 0 {
		return 0
	}
	sq := ballSqNorm(lens, key)
	if sq == 0 {
		return 0
	}
	rho := expNeg(logUnit(ballUniform(key)) / float64(d))
	return float64(radius*rho) / math.Sqrt(sq)
}

// ballPart is one chunk of the ‖g‖² sum: values [off, off+n) of the tensor
// whose stream g evaluates.
type ballPart struct {
	g      *generator
	off, n uint64
}

// ballSqNorm returns ‖g‖² of AddBall, summed in the documented order.
func ballSqNorm(lens []uint64, key NoiseKey) float64 {
	gens := make([]generator, len(lens))
	var parts []ballPart
	total := uint64(0)
	for p, n := range lens {
		if n == 0 {
			continue
		}
		g := &gens[p]
		g.s = ballKey(key, p).stream()
		g.p = fastParams(&g.s, min(n, ballChunk)/2)
		for off := uint64(0); off < n; off += ballChunk {
			parts = append(parts, ballPart{g, off, min(ballChunk, n-off)})
		}
		total += n
	}
	sums := make([]float64, len(parts))
	workers := min(runtime.GOMAXPROCS(0), len(parts))
	if total < parMin || workers < 2 {
		for i, pt := range parts {
			sums[i] = pt.g.sqNorm(pt.off, pt.n)
		}
	} else {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for i := int(next.Add(1) - 1); i < len(parts); i = int(next.Add(1) - 1) {
					sums[i] = parts[i].g.sqNorm(parts[i].off, parts[i].n)
				}
			})
		}
		wg.Wait()
	}
	sq := 0.0
	for _, s := range sums {
		sq += s
	}
	return sq
}

// sqNorm returns the sum of squares of the chunk of n ≤ ballChunk values of
// the stream that starts at the even index off (see AddBall): the rounded r²
// of each whole block and z² of a last unpaired value, in four sums by block
// index mod 4.
func (g *generator) sqNorm(off, n uint64) float64 {
	var acc [4]float64
	var buf [bufLen]float64
	j := uint32(off >> 1)
	b := 0 // block index in the chunk
	for left := int(n / 2); left > 0; {
		m := min(left, bufLen/2)
		done := radiiFast(g.p, buf[:2*m], j)
		// philoxAVX2's lanes hold blocks 4i, 4i+2, 4i+1, 4i+3 of the pass.
		for k := 0; k < 2*done; k += 8 {
			acc[0] += float64(buf[k] * buf[k])
			acc[2] += float64(buf[k+1] * buf[k+1])
			acc[1] += float64(buf[k+2] * buf[k+2])
			acc[3] += float64(buf[k+3] * buf[k+3])
		}
		for i := done; i < m; i++ {
			m1, _ := mantissas(g.s.block(j + uint32(i)))
			r := boxMullerRadius(m1)
			acc[(b+i)&3] += float64(r * r)
		}
		j += uint32(m)
		b += m
		left -= m
	}
	if n&1 == 1 {
		z, _ := boxMuller(g.s.block(j))
		acc[b&3] += float64(z * z)
	}
	return (acc[0] + acc[1]) + (acc[2] + acc[3])
}

// boxMullerRadius returns r = √(−2 ln u₁) of a block from its m₁, as
// boxMuller computes it.
func boxMullerRadius(m1 uint64) float64 {
	return math.Sqrt(-2 * logUnit(float64(m1+1)*0x1p-53))
}

// Coefficients of the exp kernel (FreeBSD e_exp.c, the same as Go's
// math.Exp): exp(r) = 1 + 2r/(2 − R(r)), R(r) = r − r²·(P₁ + P₂r² + … + P₅r⁸).
const (
	log2e = 1 / math.Ln2
	expP1 = 1.66666666666666657415e-01  // 0x3FC5555555555555
	expP2 = -2.77777777770155933842e-03 // 0xBF66C16C16BEBD93
	expP3 = 6.61375632143793436117e-05  // 0x3F11566AAF25DE2C
	expP4 = -1.65339022054652515390e-06 // 0xBEBBBD41C5D26BF1
	expP5 = 4.13813679705723846039e-08  // 0x3E66376972BEA4D0
)

// expNeg returns eˣ for x ∈ [−53·ln 2, 0] to within 1 ulp: x = k·ln 2 + r
// with |r| ≤ ln 2 / 2 (ln 2 split in ln2Hi + ln2Lo, k·ln2Hi exact), then
// e^r = 1 − ((lo − r·R/(2 − R)) − hi) (FreeBSD e_exp.c, as in Go's math.Exp)
// and the exact scaling by 2ᵏ. Every product that feeds a sum is an explicit
// FMA or rounded by a conversion, so the result is the same on every
// platform.
func expNeg(x float64) float64 {
	k := math.Trunc(float64(x*log2e) - 0.5) // nearest integer to x/ln 2, x ≤ 0
	hi := x - float64(k*ln2Hi)              // exact
	lo := float64(k * ln2Lo)
	r := hi - lo
	t := float64(r * r)
	p := math.FMA(math.FMA(math.FMA(math.FMA(expP5, t, expP4), t, expP3), t, expP2), t, expP1)
	c := r - float64(t*p)
	y := 1 - ((lo - float64(r*c)/(2-c)) - hi)
	return y * math.Float64frombits(uint64(1023+int64(k))<<52)
}
