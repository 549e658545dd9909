package nn

import "math"

// tanh32 is the float32 tanh of the training and evaluation nets: computed in float64 and
// rounded once, so it is within one unit in the last place of the exact value (the float64
// result is within about 2⁻⁴² of it, relatively), and most often the correctly rounded one
// (TestTanh32Accuracy measures how often not). tanhSlice32 computes it 8 lanes at a time with
// AVX-512 where the CPU has it, with the same operations in the same order, so the same bits
// (TestTanh32Kernel): a run's result does not depend on the CPU.
//
// With a = |x|:
//
//   - a < 2⁻¹¹: tanh a = a − a³/3 + O(a⁵), taken as fma(a·a·a, −1/3, a);
//   - otherwise, with z = min(2a, 40): tanh a = 1 − 2/(eᶻ + 1), eᶻ = 2ᵏ·p(r) with k the integer
//     nearest z·log₂e, r = z − k·ln 2 (ln 2 in two parts, by fused multiply-adds), |r| ≤ ln 2/2,
//     and p the degree-12 Taylor polynomial of eʳ in Horner form (truncation below 2⁻⁵²). Past
//     z = 40, 2/(eᶻ + 1) < 2⁻⁵⁶ and the float32 result is 1 either way.
//
// The sign of x is put back last (tanh is odd, tanh(−0) = −0); NaN returns x itself.
func tanh32(x float32) float32 {
	if x != x {
		return x
	}
	xd := float64(x)
	a := math.Abs(xd)
	var t float64
	if a < tanhSmall {
		a3 := a * a * a
		t = math.FMA(a3, -1.0/3, a)
	} else {
		z := a + a
		if z > tanhZMax {
			z = tanhZMax
		}
		k := math.RoundToEven(z * math.Log2E)
		r := math.FMA(k, -tanhLn2Hi, z)
		r = math.FMA(k, -tanhLn2Lo, r)
		p := expTaylor[len(expTaylor)-1]
		for i := len(expTaylor) - 2; i >= 0; i-- {
			p = math.FMA(p, r, expTaylor[i])
		}
		// The conversion rounds the product on its own: no fusion with the + 1 below.
		e := float64(math.Float64frombits(uint64(int64(k)+1023)<<52) * p)
		t = 1 - 2/(e+1)
	}
	return float32(math.Copysign(t, xd))
}

// tanhSlice32 sets dst[i] = tanh32(src[i]) for every i of src.
func tanhSlice32(dst, src []float32) {
	dst = dst[:len(src)]
	if tanhAVX512 && len(src) > 0 {
		tanh32AVX512(&dst[0], &src[0], len(src), &tanhConsts)
		return
	}
	for i, v := range src {
		dst[i] = tanh32(v)
	}
}

const (
	tanhSmall = 0x1p-11 // below it, the odd Taylor polynomial of degree 3
	tanhZMax  = 40      // z = 2|x| is clamped there
	// ln 2 = tanhLn2Hi + tanhLn2Lo, the high part with 33 significant bits.
	tanhLn2Hi = 6.93147180369123816490e-01 // 0x3fe62e42fee00000
	tanhLn2Lo = 1.90821492927058770002e-10 // 0x3dea39ef35793c76
)

// expTaylor holds 1/i! for i = 0 … 12, the coefficients of p.
var expTaylor = [13]float64{1, 1, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040,
	1.0 / 40320, 1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800, 1.0 / 479001600}

// tanhConstants is what the assembly reads, each broadcast to the 8 lanes (field offsets
// fixed: see tanh_amd64.s).
type tanhConstants struct {
	absMask, signMask         uint64
	small, zMax               float64
	log2e, negLn2Hi, negLn2Lo float64
	negThird, one, two        float64
	bias                      uint64 // 1023
	taylor                    [13]float64
}

// tanhConsts is read-only after initialization.
var tanhConsts = tanhConstants{
	absMask: 1<<63 - 1, signMask: 1 << 63,
	small: tanhSmall, zMax: tanhZMax,
	log2e: math.Log2E, negLn2Hi: -tanhLn2Hi, negLn2Lo: -tanhLn2Lo,
	negThird: -1.0 / 3, one: 1, two: 2,
	bias:   1023,
	taylor: expTaylor,
}
