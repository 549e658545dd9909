package kernels

import (
	"fmt"
	"math"
	"runtime"
	"sync"
)

// MaxStreamLen is the number of values in one noise stream: 2³² Philox blocks
// of two normals each. A tensor (or offset plus length) beyond it is a
// programmer error and panics.
const MaxStreamLen = 1 << 33

// NoiseKey names one stream of the counter-based Gaussian generator: the same
// (Seed, Step, Tensor) always gives the same numbers, on any machine, in any
// order of evaluation, on any number of goroutines. The CUDA backend
// reproduces the same stream, so this comment is its specification.
//
// Stream layout. Block j (0 ≤ j < 2³²) of the stream is
//
//	(w₀, w₁, w₂, w₃) = Philox4x32-10(ctr = [j, Tensor, lo(Step), hi(Step)],
//	                                 key = [lo(Seed), hi(Seed)])
//
// where lo and hi are the low and high 32-bit halves of a uint64. The block
// gives two uniforms with 53 random bits each, word 0 (resp. 2) being the
// high half:
//
//	m₁ = ⌊(2³²·w₀ + w₁) / 2¹¹⌋,   u₁ = (m₁ + 1)·2⁻⁵³ ∈ (0, 1]   (never 0, so ln u₁ is finite)
//	m₂ = ⌊(2³²·w₂ + w₃) / 2¹¹⌋,   u₂ = m₂·2⁻⁵³      ∈ [0, 1)
//
// and, by Box–Muller (Box and Muller 1958), the values 2j and 2j+1 of the
// stream are
//
//	z₂ⱼ = r·cos(2πu₂),   z₂ⱼ₊₁ = r·sin(2πu₂),   r = √(−2 ln u₁).
//
// These are exactly standard normal up to the 2⁻⁵³ discretization of u₁ and u₂
// (|z| ≤ √(106 ln 2) ≈ 8.57, so the tails beyond 8.57σ, of mass ~10⁻¹⁷, are
// cut). The CPU code evaluates ln, sin and cos with its own polynomial
// kernels (logUnit, sinCos2Pi) to within about an ulp of the exact values,
// using only correctly rounded IEEE-754 operations and explicit FMAs, so its
// numbers are bit-identical on every platform and with every kernel (pure
// Go, AVX2, AVX-512; TestGaussianKernelsAgree). The CUDA kernels
// (kernels/cuda/dpsgd.cu) carry the same polynomials and constants with
// explicitly rounded operations and give the same float64 values bit for bit
// (cuda's tests check it through the fake driver). Another
// implementation (math.Log and math.Sincos, or CUDA's own log and sincospi)
// agrees to rounding, not bit for bit: the stream is defined by the uniforms
// above, and the tests hold the CPU values within 4·10⁻¹⁵·max(1, r) of such a
// reference.
//
// Floating-point caveat (Mironov 2012, "On significance of the least
// significant bits for differential privacy"): like every floating-point
// Gaussian sampler, this one does not hide the low-order bits of its output
// perfectly; the privacy analysis assumes ideal real-valued noise.
type NoiseKey struct {
	Seed   uint64
	Step   uint64
	Tensor uint32
}

func (k NoiseKey) stream() philoxStream {
	return newPhiloxStream(k.Tensor, uint32(k.Step), uint32(k.Step>>32),
		[2]uint32{uint32(k.Seed), uint32(k.Seed >> 32)})
}

// Block returns the four Philox words of block j of the stream.
func (k NoiseKey) Block(j uint32) [4]uint32 {
	return Philox4x32([4]uint32{j, k.Tensor, uint32(k.Step), uint32(k.Step >> 32)},
		[2]uint32{uint32(k.Seed), uint32(k.Seed >> 32)})
}

// Uniforms returns the two uniforms u₁ ∈ (0, 1] and u₂ ∈ [0, 1) of block j,
// from which values 2j and 2j+1 of the stream are made (see NoiseKey).
func (k NoiseKey) Uniforms(j uint32) (u1, u2 float64) {
	w := k.Block(j)
	m1, m2 := mantissas(w[0], w[1], w[2], w[3])
	return float64(m1+1) * 0x1p-53, float64(m2) * 0x1p-53
}

// Normal returns value i of the stream, z_i (see NoiseKey). It panics if
// i ≥ MaxStreamLen.
func (k NoiseKey) Normal(i uint64) float64 {
	if i >= MaxStreamLen {
		panic(fmt.Sprintf("kernels: stream index %d ≥ MaxStreamLen", i))
	}
	s := k.stream()
	z0, z1 := boxMuller(s.block(uint32(i >> 1)))
	if i&1 == 0 {
		return z0
	}
	return z1
}

// AddGaussian adds std·z_k to dst[k], where z_k is the k-th standard normal of
// the stream key: the Gaussian mechanism's noise N(0, std²) per coordinate
// (docs/design.md step 6: noise N(0, σ²C²I) per step, so std = σ·C). Each
// element is T(FMA(std, z_k, float64(dst[k]))): one float64 rounding, then one
// to T. Long slices are split over goroutines; the result does not depend on
// the split. std must be finite (a negative std gives the same distribution);
// otherwise AddGaussian panics. A slice longer than MaxStreamLen panics.
func AddGaussian[T Float](dst []T, std float64, key NoiseKey) {
	AddGaussianAt(dst, std, key, 0)
}

// FillGaussian sets dst[k] = z_k, the k-th standard normal of the stream key
// rounded to T.
func FillGaussian[T Float](dst []T, key NoiseKey) {
	FillGaussianAt(dst, key, 0)
}

// AddGaussianAt adds std·z_{offset+k} to dst[k]: dst is the window
// [offset, offset+len(dst)) of a longer tensor, so a tensor may be noised in
// pieces (or on several devices) with the same result as in one call.
func AddGaussianAt[T Float](dst []T, std float64, key NoiseKey, offset uint64) {
	if math.IsNaN(std) || math.IsInf(std, 0) {
		panic(fmt.Sprintf("kernels: AddGaussian std = %v, need a finite value", std))
	}
	gaussian(dst, std, key, offset, false)
}

// FillGaussianAt sets dst[k] = z_{offset+k}.
func FillGaussianAt[T Float](dst []T, key NoiseKey, offset uint64) {
	gaussian(dst, 0, key, offset, true)
}

const (
	// parMin is the length from which the noise is split over goroutines
	// (about 30 µs of work for one core).
	parMin = 1 << 13
	// parGrain is the smallest piece handed to one goroutine.
	parGrain = 1 << 12
)

// checkWindow panics if the window [off, off+n) of a stream exceeds
// MaxStreamLen.
func checkWindow(off, n uint64) {
	if off > MaxStreamLen || n > MaxStreamLen-off {
		panic(fmt.Sprintf("kernels: noise window [%d, %d) exceeds MaxStreamLen = 2³³", off, off+n))
	}
}

// splitWindow calls f(lo, hi) on pieces [lo, hi) that cover [0, n) of a
// window that starts at stream index off: once on the calling goroutine for
// short windows or one core, else concurrently, a few pieces per worker
// (which balances the load when cores are shared). Piece boundaries fall on
// even stream indices, so no Philox block is computed twice; the noise does
// not depend on the boundaries.
func splitWindow(n, off uint64, f func(lo, hi uint64)) {
	if serialWindow(n) {
		f(0, n)
		return
	}
	workers := runtime.GOMAXPROCS(0)
	pieces := min(uint64(4*workers), n/parGrain)
	per := (n/pieces + 1) &^ 1
	var wg sync.WaitGroup
	for lo := uint64(0); lo < n; {
		hi := min((off+lo+per)&^1-off, n)
		start := lo
		wg.Go(func() { f(start, hi) })
		lo = hi
	}
	wg.Wait()
}

// serialWindow reports whether splitWindow runs a window of n values on the
// calling goroutine alone.
func serialWindow(n uint64) bool {
	return n < parMin || runtime.GOMAXPROCS(0) < 2
}

// kernel names an implementation of the stream's normals. They all give the
// same values bit for bit; bestKernel is the fastest the CPU runs.
type kernel uint8

const (
	kernelGo     kernel = iota // pure Go, block by block
	kernelAVX2                 // amd64 with AVX2 and FMA (gauss_amd64.s)
	kernelAVX512               // amd64 with AVX-512 F and DQ (gauss_avx512_amd64.s)
)

func gaussian[T Float](dst []T, std float64, key NoiseKey, off uint64, fill bool) {
	gaussianWith(bestKernel, dst, std, key, off, fill)
}

// gaussianWith is gaussian with a given kernel, which must be supported
// (kernelSupported); the tests run every kernel through it.
func gaussianWith[T Float](k kernel, dst []T, std float64, key NoiseKey, off uint64, fill bool) {
	n := uint64(len(dst))
	checkWindow(off, n)
	if n == 0 {
		return
	}
	var g generator // on the stack where one goroutine does the work
	g.s = key.stream()
	g.useKernel(k, n/2)
	if serialWindow(n) {
		gaussRange(dst, std, &g, off, fill)
		return
	}
	shared := g
	splitWindow(n, off, func(lo, hi uint64) {
		gaussRange(dst[lo:hi], std, &shared, off+lo, fill)
	})
}

// generator evaluates one stream: the scalar Philox state and the broadcast
// operands of the assembly kernel that runs, if any. It is read-only once
// built, so goroutines share it.
type generator struct {
	s         philoxStream
	k         kernel     // the kernel of the Gaussian normals (useKernel)
	p         *avxParams // AVX2 operands (Gaussian, Laplace and ball noise), or nil
	avx512Ops            // AVX-512 operands (Gaussian noise), where k is kernelAVX512
}

// normals sets out[2i], out[2i+1] to the normals of block j+i, for
// len(out)/2 blocks (len(out) is even). The assembly kernels may write
// further normals of the stream into out's capacity, up to a multiple of 16.
func (g *generator) normals(out []float64, j uint32) {
	done := 0
	if g.k != kernelGo {
		done = normalsFast(g, out, j)
	}
	j += uint32(done)
	for i := 2 * done; i < len(out); i += 2 {
		out[i], out[i+1] = boxMuller(g.s.block(j))
		j++
	}
}

// bufLen is the number of normals made per pass into a stack buffer (4 KiB,
// which stays in L1).
const bufLen = 512

// gaussRange sets dst[k] = z_{off+k} (fill) or adds std·z_{off+k} to it,
// on the calling goroutine.
func gaussRange[T Float](dst []T, std float64, g *generator, off uint64, fill bool) {
	var buf [bufLen]float64
	for len(dst) > 0 {
		j := uint32(off >> 1)
		skip := int(off & 1) // an odd start uses the second normal of its block
		m := min(len(dst), bufLen-skip)
		g.normals(buf[:(skip+m+1)&^1], j)
		apply(g.k, dst[:m], buf[skip:skip+m], std, fill)
		dst = dst[m:]
		off += uint64(m)
	}
}

// apply sets d[i] = T(z[i]) (fill) or T(FMA(std, z[i], float64(d[i]))),
// with the vector instructions of kernel k where there are any.
func apply[T Float](k kernel, d []T, z []float64, std float64, fill bool) {
	z = z[:len(d)]
	done := applyFast(k, d, z, std, fill)
	d, z = d[done:], z[done:]
	if fill {
		for i, v := range z {
			d[i] = T(v)
		}
		return
	}
	for i, v := range z {
		d[i] = T(math.FMA(std, v, float64(d[i])))
	}
}

// mantissas returns the two 53-bit integers m₁, m₂ of a block (see NoiseKey).
func mantissas(w0, w1, w2, w3 uint32) (m1, m2 uint64) {
	return (uint64(w0)<<32 | uint64(w1)) >> 11, (uint64(w2)<<32 | uint64(w3)) >> 11
}

// boxMuller maps one Philox block to its two normals (see NoiseKey).
func boxMuller(w0, w1, w2, w3 uint32) (z0, z1 float64) {
	m1, m2 := mantissas(w0, w1, w2, w3)
	u1 := float64(m1+1) * 0x1p-53
	r := math.Sqrt(-2 * logUnit(u1))
	sin, cos := sinCos2Pi(m2)
	return r * cos, r * sin
}

// Coefficients of the log kernel (FreeBSD e_log.c; the same as Go's
// math.Log): ln(1+f) = 2s + s·(L₁s² + … + L₇s¹⁴) with s = f/(2+f).
const (
	ln2Hi = 6.93147180369123816490e-01 // 0x3fe62e42fee00000
	ln2Lo = 1.90821492927058770002e-10 // 0x3dea39ef35793c76
	logL1 = 6.666666666666735130e-01   // 0x3FE5555555555593
	logL2 = 3.999999999940941908e-01   // 0x3FD999999997FA04
	logL3 = 2.857142874366239149e-01   // 0x3FD2492494229359
	logL4 = 2.222219843214978396e-01   // 0x3FCC71C51D8E78AF
	logL5 = 1.818357216161805012e-01   // 0x3FC7466496CB03DE
	logL6 = 1.531383769920937332e-01   // 0x3FC39A09D078C69F
	logL7 = 1.479819860511658591e-01   // 0x3FC2F112DF3E5244
)

// logUnit returns ln x for x ∈ [2⁻⁵³, 1], a normal positive number, to
// within 1 ulp and without branches: x = 2ᵏ·y with y ∈ [√2/2, √2), f = y−1,
// s = f/(2+f), ln y = f − f²/2 + s·(f²/2 + R(s²)) (FreeBSD e_log.c, as in
// Go's math.Log). Every product that feeds a sum is either an explicit FMA
// or rounded by a conversion, so the result is the same on every platform
// and equals the assembly kernels bit for bit (the AVX-512 kernel forms
// −2·ln x from doubled operands, which is exact: gauss_avx512_amd64.go).
func logUnit(x float64) float64 {
	bits := math.Float64bits(x)
	frac := bits & (1<<52 - 1)
	// i = 2⁵² exactly when 1+frac/2⁵² ≥ √2 (0x6a09e667f3bcd = frac(√2)); then
	// y is halved and k incremented.
	i := (frac + 0x95f619980c433) & (1 << 52)
	y := math.Float64frombits(frac | (0x3ff0000000000000 ^ i))
	k := float64(int64(bits>>52) - 1023 + int64(i>>52))
	f := y - 1
	s := f / (2 + f)
	s2 := s * s
	s4 := s2 * s2
	p1 := math.FMA(math.FMA(math.FMA(logL7, s4, logL5), s4, logL3), s4, logL1)
	p2 := math.FMA(math.FMA(logL6, s4, logL4), s4, logL2)
	R := math.FMA(s2, p1, float64(s4*p2))
	hfsq := float64(0.5 * f * f)
	lo := math.FMA(s, hfsq+R, float64(k*ln2Lo))
	return float64(k*ln2Hi) - ((hfsq - lo) - f)
}

// Coefficients of the sine and cosine kernels on [0, π/4] (Cephes sin.c, the
// same as Go's math.Sin): sin x = x + x³·S(x²), cos x = 1 − x²/2 + x⁴·C(x²).
const (
	sinS0 = 1.58962301576546568060e-10  // 0x3de5d8fd1fd19ccd
	sinS1 = -2.50507477628578072866e-8  // 0xbe5ae5e5a9291f5d
	sinS2 = 2.75573136213857245213e-6   // 0x3ec71de3567d48a1
	sinS3 = -1.98412698295895385996e-4  // 0xbf2a01a019bfdf03
	sinS4 = 8.33333333332211858878e-3   // 0x3f8111111110f7d0
	sinS5 = -1.66666666666666307295e-1  // 0xbfc5555555555548
	cosC0 = -1.13585365213876817300e-11 // 0xbda8fa49a0861a9b
	cosC1 = 2.08757008419747316778e-9   // 0x3e21ee9d7b4e3f05
	cosC2 = -2.75573141792967388112e-7  // 0xbe927e4f7eac4bc6
	cosC3 = 2.48015872888517045348e-5   // 0x3efa01a019c844f5
	cosC4 = -1.38888888888730564116e-3  // 0xbf56c16c16c14f91
	cosC5 = 4.16666666666665929218e-2   // 0x3fa555555555554b
	// pi4Ulp50 is (π/4)·2⁻⁵⁰.
	pi4Ulp50 = math.Pi / 4 / (1 << 50)
)

// sinCos2Pi returns sin(2πu) and cos(2πu) for u = m·2⁻⁵³, m < 2⁵³, without
// branches. The reduction is exact in integers: the top three bits of m are
// the octant o of the angle and the other 50 its position inside; odd octants
// are measured from their far end, so the polynomial argument lies in
// [0, π/4], and the octant then swaps sin and cos and sets their signs.
func sinCos2Pi(m uint64) (sin, cos float64) {
	o := m >> 50
	r := m & (1<<50 - 1)
	odd := -(o & 1) // all ones in odd octants
	r = (r ^ odd) - odd + (1<<50)&odd
	x := float64(r) * pi4Ulp50
	zz := x * x
	ps := math.FMA(math.FMA(math.FMA(math.FMA(math.FMA(sinS0, zz, sinS1), zz, sinS2), zz, sinS3), zz, sinS4), zz, sinS5)
	s := math.FMA(float64(x*zz), ps, x)
	pc := math.FMA(math.FMA(math.FMA(math.FMA(math.FMA(cosC0, zz, cosC1), zz, cosC2), zz, cosC3), zz, cosC4), zz, cosC5)
	c := math.FMA(float64(zz*zz), pc, math.FMA(-0.5, zz, 1))
	sb, cb := math.Float64bits(s), math.Float64bits(c)
	swap := -(((o >> 1) ^ o) & 1) // octants 1, 2, 5, 6
	t := (sb ^ cb) & swap
	sb ^= t
	cb ^= t
	sb ^= (o >> 2) << 63           // sin < 0 in octants 4–7
	cb ^= ((o + 2) >> 2 & 1) << 63 // cos < 0 in octants 2–5
	return math.Float64frombits(sb), math.Float64frombits(cb)
}
