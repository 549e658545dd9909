package kernels

import (
	"crypto/rand"
	"fmt"
	"math"
	"math/bits"
	mrand "math/rand/v2"
	"runtime"
	"sync"
)

// SecureSource is the random source of the secure noise mode: a ChaCha8
// generator (math/rand/v2.ChaCha8, documented as a cryptographically strong
// generator: ChaCha with 8 rounds, with fast key erasure every 992 bytes of
// output, so a state captured later does not reveal earlier output) keyed
// with 32 bytes from the operating system (crypto/rand) and rekeyed from
// crypto/rand every SecureReseedWords outputs, so a state captured at some
// point stops predicting the output after the next rekey. No seed can be
// given: two sources never share a stream, and a run in secure mode is not
// reproducible by design.
//
// Why not crypto/rand alone: it reads the kernel generator through a system
// call, so it must sit behind a buffer (64 KiB in Google's DP library), and
// it was still slower per word than ChaCha8 in user space in
// BenchmarkSecureSource (29 against 18 ns per 64-bit word in one run on a
// loaded 2-core machine). ChaCha8 keyed from crypto/rand keeps the
// cryptographic strength at the cost of one system call per
// SecureReseedWords outputs, and needs no buffer.
//
// A SecureSource is not safe for concurrent use: one goroutine draws from it
// at a time (the engine calls it once per step from its step goroutine). The
// noise functions split long tensors over goroutines themselves, each piece
// drawing from a child ChaCha8 keyed from this source's output.
type SecureSource struct {
	c     mrand.ChaCha8
	drawn uint64 // outputs since the last rekey
}

// SecureReseedWords is the number of 64-bit outputs after which a
// SecureSource rekeys itself from crypto/rand (8 MiB of output).
const SecureReseedWords = 1 << 20

// NewSecureSource returns a source keyed from crypto/rand. The error is that
// of crypto/rand.Read (which, since Go 1.24, does not return on failure but
// aborts the program; the error is kept for other platforms' sake).
func NewSecureSource() (*SecureSource, error) {
	s := new(SecureSource)
	if err := s.rekey(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *SecureSource) rekey() error {
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return fmt.Errorf("kernels: secure source: reading the OS generator: %w", err)
	}
	s.c.Seed(seed)
	clear(seed[:])
	s.drawn = 0
	return nil
}

// Uint64 returns 64 uniform random bits (SecureSource implements
// math/rand/v2.Source).
func (s *SecureSource) Uint64() uint64 {
	s.drawn++
	if s.drawn > SecureReseedWords {
		if err := s.rekey(); err != nil {
			// crypto/rand.Read cannot fail on supported platforms since
			// Go 1.24 (it aborts instead); continuing with the current,
			// still cryptographically strong, stream is the safe fallback.
			s.drawn = 0
		}
	}
	return s.c.Uint64()
}

// child returns a ChaCha8 generator keyed with 32 bytes of s's output, for one
// piece of a tensor drawn on another goroutine.
func (s *SecureSource) child() *mrand.ChaCha8 {
	var seed [32]byte
	for i := 0; i < 4; i++ {
		w := s.Uint64()
		for j := 0; j < 8; j++ {
			seed[8*i+j] = byte(w >> (8 * j))
		}
	}
	c := mrand.NewChaCha8(seed)
	clear(seed[:])
	return c
}

// Secure Gaussian: discrete Gaussian on a power-of-two grid.

// The grid: for std in [2^e, 2^(e+1)) the grid step is g = 2^(e−secureGridBits),
// so the noise in grid units has scale s = std/g ∈ [2^45, 2^46).
const (
	secureGridBits = 45
	// secureBlockBits: proposal blocks have width w = 2^45 grid units, so
	// w/s ∈ (1/2, 1].
	secureBlockBits = 45
	// secureMaxBlock bounds the proposal block index: blocks beyond it start
	// at |m| ≥ 91·2^45 > 45·s (ideal mass below 10⁻⁴⁴⁰) and are never
	// accepted, so |m| < 2^52 always.
	secureMaxBlock = 90
)

// SecureStdMin and SecureStdMax bound the std that AddSecureGaussian and
// AddSecureGaussianSum4 accept: the grid step must be a normal float64 and
// the noise must not overflow.
const (
	SecureStdMin = 0x1p-960
	SecureStdMax = 0x1p960
)

// SecureGrid returns the grid step g of AddSecureGaussian for std: the power
// of two 2^(⌊log₂ std⌋ − 45), so std/g ∈ [2^45, 2^46). The released values are
// (rounded) multiples of g. It panics on a std AddSecureGaussian refuses.
func SecureGrid(std float64) float64 {
	checkSecureStd(std)
	_, e := math.Frexp(std) // std = f·2^e, f ∈ [1/2, 1)
	return math.Ldexp(1, e-1-secureGridBits)
}

func checkSecureStd(std float64) {
	if !(std >= SecureStdMin && std <= SecureStdMax) { // also NaN, ±Inf, ≤ 0
		panic(fmt.Sprintf("kernels: secure Gaussian std = %v, need a value in [2^-960, 2^960]", std))
	}
}

// gridSampler draws the integer noise m (in grid units) of AddSecureGaussian.
type gridSampler struct {
	g, invG float64 // grid step and its inverse (powers of two)
	invS    float64 // 1/s, s = std/g
	lnK     float64 // ln of the envelope constant (see next)
}

func newGridSampler(std float64) gridSampler {
	g := SecureGrid(std)
	s := std / g // exact: g is a power of two
	alpha := math.Ldexp(1, secureBlockBits) / s
	// K = max over blocks G of 2^G·exp(−(G·w)²/(2s²)): the largest ratio of
	// the target exp(−m²/2s²) to the proposal weight 2^−G on block G (whose
	// point nearest 0 is G·w). The maximum is at G ≤ 3 for α ∈ (1/2, 1].
	lnK := math.Inf(-1)
	for G := 0; G <= 8; G++ {
		t := float64(G) * alpha
		lnK = max(lnK, float64(G)*math.Ln2-t*t/2)
	}
	return gridSampler{g: g, invG: 1 / g, invS: 1 / s, lnK: lnK}
}

// next returns one draw m of the discrete Gaussian on Z with scale s,
// P(m) ∝ exp(−m²/(2s²)), by rejection from an exact proposal: a sign, a
// block index G ~ Geometric(1/2) (P(G) = 2^−(G+1), counted in trailing zero
// bits), and a uniform offset U in [0, w), w = 2^45; m = G·w + U or
// −(G·w + U) − 1. The proposal's pmf, 2^−(G+2)/w, is exact because every
// piece is made of fair bits; m is accepted with probability
// a(m) = exp(−m²/(2s²) + G·ln 2 − ln K) ≤ 1, drawn by acceptExp, which is
// exact for the float64 value of a(m).
// About half the proposals are accepted: the acceptance rate is
// s√(2π)/(4wK) ∈ [0.48, 0.59].
func (gs *gridSampler) next(src mrand.Source) int64 {
	for {
		w := src.Uint64()
		neg := w >> 63
		u := (w >> 18) & (1<<secureBlockBits - 1)
		low := w & (1<<18 - 1)
		var G int
		if low != 0 {
			G = bits.TrailingZeros64(low)
		} else {
			G = 18
			for {
				v := src.Uint64()
				if v != 0 {
					G += bits.TrailingZeros64(v)
					break
				}
				G += 64
				if G > secureMaxBlock {
					break
				}
			}
		}
		if G > secureMaxBlock {
			continue // truncation beyond 45·s
		}
		m := int64(G)<<secureBlockBits | int64(u)
		if neg != 0 {
			m = -m - 1
		}
		t := float64(m) * gs.invS
		if acceptExp(src, float64(G)*math.Ln2-gs.lnK-t*t/2) {
			return m
		}
	}
}

// bernoulli returns true with probability exactly a (for the float64 a;
// a ≥ 1 is always true, a ≤ 0 never). For a ≥ 2^−12, a·2^64 is an integer and
// the test is U < a·2^64 with U a uniform 64-bit word; smaller a first pass a
// Bernoulli(2^−52) test (52 zero bits) and are scaled by 2^52, exactly.
func bernoulli(src mrand.Source, a float64) bool {
	if a >= 1 {
		return true
	}
	for a < 0x1p-12 {
		if !(a > 0) {
			return false
		}
		if src.Uint64()>>12 != 0 {
			return false
		}
		a *= 0x1p52
	}
	return src.Uint64() < uint64(a*0x1p64)
}

// acceptExp returns true with probability â = fl(exp(A)), A ≤ 0, exactly:
// for A ≥ −8 (so â > 2⁻¹²) it is the event U < â·2⁶⁴ for one uniform word U,
// decided without exp whenever U lies outside [lo, hi], bounds of â·2⁶⁴ from
// e^A = 2^−j·e^r, r = A + j·ln 2 ∈ (−ln 2, 0], and the Taylor bounds
// 1 + r + r²/2 + r³/6 ≤ e^r ≤ 1 + r + r²/2 (r ≤ 0), widened by a relative
// 2⁻⁴⁰ that exceeds every rounding error involved (≤ 2⁻⁴⁸), so the squeeze
// never decides differently from the comparison with â itself (the gap
// between the bounds is below r³/6 ≤ 0.056 of the scale, so few draws need
// exp). For A < −8 it is bernoulliExp.
func acceptExp(src mrand.Source, A float64) bool {
	if A < -8 {
		return bernoulliExp(src, A)
	}
	u := src.Uint64()
	j := math.Floor(-A * (1 / math.Ln2))
	r := math.FMA(j, math.Ln2, A)
	p2 := 1 + r*(1+r*0.5)
	p3 := p2 + r*r*r*(1.0/6)
	scale := math.Ldexp(1, 64-int(j))
	if lo := p3 * (1 - 0x1p-40) * scale; lo > 0 && u < uint64(lo) {
		return true
	}
	if hi := p2 * (1 + 0x1p-40) * scale; hi < 0x1p64 && u >= uint64(math.Ceil(hi)) {
		return false
	}
	a := math.Exp(A)
	if a >= 1 {
		return true
	}
	return u < uint64(a*0x1p64)
}

// ln2x52 is 52·ln 2, the log of the probability 2^−52 of 52 zero bits.
const ln2x52 = 52 * math.Ln2

// bernoulliExp returns true with probability e^A (A ≤ 0). For A < −36, k
// Bernoulli(2^−52) draws (52 zero bits each) first take out 2^−52k, with k
// chosen so that A + 52k·ln 2 ∈ (−36.1, 0] (one FMA), so exp never returns a
// subnormal, whose few significant bits would make the probability inexact.
func bernoulliExp(src mrand.Source, A float64) bool {
	if A < -36 {
		k := math.Floor(-A / ln2x52)
		A = math.FMA(k, ln2x52, A)
		for ; k > 0; k-- {
			if src.Uint64()>>12 != 0 {
				return false
			}
		}
	}
	return bernoulli(src, math.Exp(A))
}

// roundToGrid returns x rounded to the nearest multiple of g (ties to even);
// x is returned unchanged when |x| ≥ 2^52·g (it is already a multiple of g)
// or not finite. Every step is exact in float64.
func (gs *gridSampler) roundToGrid(x float64) float64 {
	if math.Abs(x) < 0x1p52*gs.g {
		return math.RoundToEven(x*gs.invG) * gs.g
	}
	return x
}

// AddSecureGaussian adds to every dst[k] Gaussian noise of standard deviation
// std drawn from src, by a method that the floating-point attacks on the least
// significant bits (Mironov, CCS 2012; Jin et al., arXiv 2107.10138) cannot
// exploit: a discrete Gaussian on a power-of-two grid, the approach of
// Google's differential-privacy library (there a binomial
// approximation, here a rejection sampler exact up to float64 rounding of the
// acceptance exponent).
//
// Method. Let g = SecureGrid(std) = 2^(⌊log₂ std⌋−45), so s = std/g ∈
// [2^45, 2^46). Each element x = dst[k] (converted to float64, exactly) is
// rounded to the grid, x̄ = g·k with k = round(x/g) an integer (exact in
// float64); an integer m is drawn with P(m) ∝ exp(−m²/(2s²)), |m| < 2^52
// (gridSampler.next: a proposal made of fair bits, accepted by an exact
// Bernoulli draw of a float64 probability); and dst[k] = T(x̄ + g·m). Both
// terms are exact float64 multiples of g, so the float64 addition returns
// RN(g·(k+m)), the correctly rounded value of the exact grid point: the
// released value is a fixed function (rounding to float64, then to T) of the
// integer k+m alone. The output is therefore always a multiple of g, or of
// the coarser float spacing where |x̄ + g·m| ≥ 2^53·g.
//
// Why that defeats the attacks: they work because, for a floating-point
// sampler, the set of floats that x + noise can produce (and their
// probabilities) depends on the low bits of x, so one output can be possible
// under one neighbouring dataset and impossible under the other: an infinite
// privacy loss. Here the output is a function of k+m, so it carries no
// information about x beyond k, and k+m has a smooth law on the integers (no
// holes: every m in range has probability within a factor e^{±η} of the
// ideal). A float32 destination rounds RN(g·(k+m)) once more, to 24 bits:
// that is again a fixed function of k+m, i.e. post-processing, so the defence
// and the guarantee below are unchanged (the float32 output is coarser, not
// leakier). Non-finite x stays non-finite (the engine guards those).
//
// Privacy of what is released (d coordinates, L2 sensitivity Δ, σ = std/Δ).
// (1) The rounded Gaussian round(s·Z), Z ~ N(0, 1), has a pmf within a factor
// e^{±(t²+1)/(8s²)} ≤ e^{±2^−78} (t = m/s, |t| ≤ 40) of the discrete Gaussian
// above (Jensen and Hoeffding's lemma on the integral over the unit cell; the
// normalizers differ by e^{−2π²s²}, Poisson summation), and k + round(s·Z) =
// round(k + s·Z) is post-processing of the continuous Gaussian mechanism
// N(k, s²) on the rounded query k(D), the mechanism that every accountant of
// package privacy analyses. (2) Rounding moves each coordinate by at
// most g/2, so g·k(D) has L2 sensitivity at most Δ + g√d, and the noise
// multiplier to account is std/(Δ + g√d) = σ/(1 + g√d/Δ) ≥
// σ/(1 + 2^−45·σ·√d), since g ≤ 2^−45·std: a relative change below 3·10⁻¹¹
// for σ = 1, d = 10⁶ (SecureGrid gives g to account it exactly). (3) The
// sampler's pmf p̂ matches the ideal within e^{±η} for |t| ≤ 40, with
// η ≤ 2^−50·(t²/2 + G·ln 2 + 1) < 10⁻¹² (the float64 error of the acceptance
// exponent and of exp; the proposal and the Bernoulli draws are exact), and
// it is 0 beyond |t| > 45.5; the ideal mass beyond |t| = 40 is below 10⁻³⁴⁸.
// Splitting off that event, an (ε, δ) guarantee of the continuous Gaussian
// mechanism at noise multiplier std/(Δ + g√d) holds for the released tensor
// as (ε + 2dη, e^{dη}·δ + 3d·10⁻³⁴⁸): ε grows by at most 2·10⁻⁶ for d = 10⁶.
// Canonne, Kamath and Steinke ("The Discrete Gaussian for Differential
// Privacy", NeurIPS 2020) give the discrete Gaussian's own analysis, with the
// same concentrated-DP bound Δ²/(2σ²) as the continuous one at this s.
//
// The noise is not reproducible (src is keyed by the OS). Tensors of 8192
// elements or more are split over goroutines, each drawing from a ChaCha8
// keyed from src. std must lie in [SecureStdMin, SecureStdMax]; std ≤ 0, NaN
// or ±Inf panic (a programmer error: the engine validates σ and C before
// training). Cost: about two proposals per element, each of two ChaCha8
// words and a polynomial squeeze (exp only when the squeeze cannot decide);
// BenchmarkSecureNoise measures the ratio to AddGaussian.
func AddSecureGaussian[T Float](src *SecureSource, dst []T, std float64) {
	gs := newGridSampler(std)
	secureSplit(src, len(dst), func(r mrand.Source, lo, hi int) { gridNoise(r, &gs, dst[lo:hi]) })
}

// gridNoise sets dst[i] = T(round_g(dst[i]) + g·m_i) with m_i drawn from r
// (the loop of AddSecureGaussian).
func gridNoise[T Float](r mrand.Source, gs *gridSampler, dst []T) {
	for i, v := range dst {
		x := gs.roundToGrid(float64(v))
		m := gs.next(r)
		dst[i] = T(x + float64(m)*gs.g)
	}
}

// AddSecureGaussianSum4 adds to every dst[k] the noise std·(z₁+z₂+z₃+z₄)/2,
// with z₁…z₄ independent standard normals made by Box–Muller (the function
// NoiseKey documents) from src's words: the defence of Holohan and Braghin
// ("Secure Random Sampling in Differential Privacy", arXiv 2112.05307) that
// Opacus uses in secure_mode (Opacus also discards one draw
// first, for a quirk of its generator that does not apply here). The sum of
// four normals has the same law N(0, std²) but its floating-point value can
// land on far more floats than one Box–Muller output, which defeats the
// attack of Jin et al. (arXiv 2107.10138) in their experiments. It is a
// heuristic defence: unlike AddSecureGaussian it has no exact argument, and
// the privacy analysis assumes ideal real-valued noise (as for AddGaussian).
// It is cheaper than AddSecureGaussian. A float32 destination rounds the
// float64 sum once more (to 24 bits), which only coarsens the output. std
// must lie in [SecureStdMin, SecureStdMax]; otherwise it panics.
func AddSecureGaussianSum4[T Float](src *SecureSource, dst []T, std float64) {
	checkSecureStd(std)
	secureSplit(src, len(dst), func(r mrand.Source, lo, hi int) { sum4Noise(r, std, dst[lo:hi]) })
}

// sum4Noise adds std·(z₁+z₂+z₃+z₄)/2 to every dst[i], the normals made from
// r's words (the loop of AddSecureGaussianSum4).
func sum4Noise[T Float](r mrand.Source, std float64, dst []T) {
	for i, v := range dst {
		a, b := r.Uint64(), r.Uint64()
		z1, z2 := boxMuller(uint32(a>>32), uint32(a), uint32(b>>32), uint32(b))
		a, b = r.Uint64(), r.Uint64()
		z3, z4 := boxMuller(uint32(a>>32), uint32(a), uint32(b>>32), uint32(b))
		z := ((z1 + z2) + (z3 + z4)) * 0.5
		dst[i] = T(math.FMA(std, z, float64(v)))
	}
}

// secureSplit runs f over [0, n) on the calling goroutine with src, or, for
// n ≥ parMin on several cores, in pieces on goroutines, each with its own
// ChaCha8 keyed from src (the children are keyed before any goroutine
// starts, so src is only used by the caller's goroutine).
func secureSplit(src *SecureSource, n int, f func(r mrand.Source, lo, hi int)) {
	workers := runtime.GOMAXPROCS(0)
	if n < parMin || workers < 2 {
		f(src, 0, n)
		return
	}
	pieces := min(4*workers, n/parGrain)
	per := (n + pieces - 1) / pieces
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += per {
		hi := min(lo+per, n)
		c := src.child()
		wg.Go(func() { f(c, lo, hi) })
	}
	wg.Wait()
}
