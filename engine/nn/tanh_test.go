package nn

import (
	"math"
	"math/rand/v2"
	"os"
	"testing"
)

// tanhSpecials are the inputs where a tanh goes wrong first: signed zeros, subnormals, the
// branch point 2⁻¹¹ and its neighbours, the clamp z = 40 and where float32 tanh reaches 1,
// infinities, NaNs with payloads, the largest floats.
func tanhSpecials() []float32 {
	s := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 1.1754942e-38, 0x1p-11, 0x1p-11 * (1 - 0x1p-24), 0x1p-11 * (1 + 0x1p-23),
		20, 9.01, 9.02, 8.5, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.Float32frombits(0x7fa00001), math.Float32frombits(0xffc00002), math.MaxFloat32, -math.MaxFloat32, 1, -1, 0.5}
	return s
}

// TestTanh32Kernel: tanhSlice32 (the AVX-512 kernel where the CPU has it) equals tanh32 bit
// for bit, on every length up to 40 (the tails) and on random and special inputs, NaN
// payloads included; and a hostile value at any position leaves the others' bits alone.
func TestTanh32Kernel(t *testing.T) {
	if !tanhAVX512 {
		t.Log("no AVX-512 kernel here: tanhSlice32 is tanh32's loop")
	}
	rng := rand.New(rand.NewPCG(41, 43))
	sp := tanhSpecials()
	pick := func() float32 {
		switch rng.IntN(4) {
		case 0:
			return sp[rng.IntN(len(sp))]
		case 1:
			return math.Float32frombits(rng.Uint32()) // any bit pattern
		}
		return float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(8)-5)))
	}
	for n := range 41 {
		for range 50 {
			src := make([]float32, n)
			for i := range src {
				src[i] = pick()
			}
			dst := make([]float32, n+1)
			dst[n] = 7
			tanhSlice32(dst, src)
			for i, v := range src {
				if w := tanh32(v); math.Float32bits(dst[i]) != math.Float32bits(w) {
					t.Fatalf("n %d, tanh(%v) [bits %#x]: kernel %v [%#x], tanh32 %v [%#x]", n, v, math.Float32bits(v), dst[i], math.Float32bits(dst[i]), w, math.Float32bits(w))
				}
			}
			if dst[n] != 7 {
				t.Fatalf("n %d: wrote past the end", n)
			}
		}
	}
	src := make([]float32, 19)
	for i := range src {
		src[i] = float32(rng.NormFloat64())
	}
	want := make([]float32, len(src))
	tanhSlice32(want, src)
	for pos := range src {
		for _, h := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 1e30, float32(math.Copysign(0, -1)), 1e-45} {
			x := append([]float32(nil), src...)
			x[pos] = h
			got := make([]float32, len(x))
			tanhSlice32(got, x)
			for i := range got {
				if i != pos && math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("hostile %v at %d moved element %d: %v, was %v", h, pos, i, got[i], want[i])
				}
			}
		}
	}
}

// ulpDiff is the distance between two finite float32 of the same sign in units of the last
// place.
func ulpDiff(a, b float32) int64 {
	d := int64(math.Float32bits(a)) - int64(math.Float32bits(b))
	if d < 0 {
		d = -d
	}
	return d
}

// TestTanh32Accuracy: tanh32 is within one ulp of float32(math.Tanh(x)) (math.Tanh's own
// error, below an ulp of float64, cannot move the float32 rounding by more than that), odd bit
// for bit, exact at the special values, and non-decreasing; over a sample of float32 in
// [−12, 12] by default, over every float32 in [0, 12] with DPSGD_TANH_SWEEP=1 (about a
// minute), which reports how many are not the correctly rounded value.
func TestTanh32Accuracy(t *testing.T) {
	check := func(x float32) bool { // reports whether tanh32(x) differs from the reference
		got, want := tanh32(x), float32(math.Tanh(float64(x)))
		if d := ulpDiff(got, want); d > 1 {
			t.Fatalf("tanh32(%v) = %v, math.Tanh %v: %d ulp", x, got, want, d)
		}
		if neg := tanh32(-x); math.Float32bits(neg) != math.Float32bits(-got) {
			t.Fatalf("tanh32(−%v) = %v, not −tanh32(%v) = %v", x, neg, x, -got)
		}
		return got != want
	}
	for _, x := range tanhSpecials() {
		got := tanh32(x)
		switch {
		case x != x:
			if math.Float32bits(got) != math.Float32bits(x) {
				t.Errorf("tanh32(NaN %#x) = %#x", math.Float32bits(x), math.Float32bits(got))
			}
		case math.IsInf(float64(x), 0) || math.Abs(float64(x)) >= 9.1:
			if got != float32(math.Copysign(1, float64(x))) {
				t.Errorf("tanh32(%v) = %v, want ±1", x, got)
			}
		case math.Abs(float64(x)) < 1e-30:
			if math.Float32bits(got) != math.Float32bits(x) {
				t.Errorf("tanh32(%v) = %v, want x itself", x, got)
			}
		default:
			check(x)
		}
	}
	lo, hi := math.Float32bits(0), math.Float32bits(12)
	step := uint32(997)
	if os.Getenv("DPSGD_TANH_SWEEP") != "" {
		step = 1
	}
	var off, n int
	prev := float32(0)
	for b := lo; b <= hi; b += step {
		x := math.Float32frombits(b)
		if check(x) {
			off++
		}
		n++
		if y := tanh32(x); y < prev {
			t.Fatalf("tanh32 decreases at %v: %v after %v", x, y, prev)
		} else {
			prev = y
		}
	}
	t.Logf("%d of %d float32 in [0, 12] (every %d-th) not correctly rounded (1 ulp off)", off, n, step)
}
