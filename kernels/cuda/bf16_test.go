package cuda_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// bf16Ref rounds x to bfloat16 by its definition: the nearest value with an 8-bit significand
// (ties to even) in float32's exponent range, overflow to ±Inf, computed in float64 from the
// value rather than by bit tricks; returned as the bfloat16's 16 bits.
func bf16Ref(x float32) uint16 {
	if x != x {
		return 0x7fc0
	}
	v := float64(x)
	if v == 0 || math.IsInf(v, 0) {
		return uint16(math.Float32bits(x) >> 16)
	}
	e := math.Floor(math.Log2(math.Abs(v)))
	e = max(e, -126)               // subnormals share the smallest normal's spacing
	q := math.Ldexp(1, int(e)-7)   // the spacing of bf16 values at |v|
	r := math.RoundToEven(v/q) * q // exact: v/q has at most 24 significant bits
	if math.Abs(r) >= 0x1.ff8p127 || math.IsInf(r, 0) {
		r = math.Copysign(math.Inf(1), v)
	}
	return uint16(math.Float32bits(float32(r)) >> 16)
}

// TestToBF16: the to_bf16 kernel gives bf16Ref's bits on random values, ties (even and odd),
// subnormals, values that round up to the next binade or overflow to Inf, ±0, ±Inf and NaN.
func TestToBF16(t *testing.T) {
	d := openFake(t)
	rng := rand.New(rand.NewPCG(21, 22))
	x := randF32(rng, 4096, 10)
	x = append(x, 0, float32(math.Copysign(0, -1)), 1, -1, 1.00390625, 1.01171875, 1.0078125+0x1p-9, 0x1.fffffep0, 0x1p-130, -0x1.7p-140,
		math.MaxFloat32, 0x1.fefp127, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()))
	for i := range 512 { // exact ties: the 16 low bits 0x8000
		x = append(x, math.Float32frombits(rng.Uint32()&0x7f7f0000|0x8000|uint32(i%2)<<16))
	}
	X, H := upload(t, d, x), mustAlloc(t, d, len(x)*2)
	if err := d.ToBF16(H, X, len(x)); err != nil {
		t.Fatal(err)
	}
	got := download[uint16](t, d, H, len(x))
	for i, v := range x {
		want := bf16Ref(v)
		if v != v {
			if got[i]&0x7f80 != 0x7f80 || got[i]&0x7f == 0 {
				t.Fatalf("bf16(NaN) = %#04x, want a NaN", got[i])
			}
			continue
		}
		if got[i] != want {
			t.Fatalf("bf16(%g = %#08x) = %#04x, want %#04x", v, math.Float32bits(v), got[i], want)
		}
	}
}

// TestGemmBF16ErrorBound: the bf16 GEMM (cublasGemmEx, fp32 accumulation; the fake emulates
// the operands' rounding by running to_bf16 and accumulates the exact products in float)
// against the float64 product of the unrounded operands: each entry within
//
//	(2u + u² + γ_k)·Σₗ|aₗ||bₗ|, u = 2⁻⁸ (bf16's unit roundoff), γ_k = k·2⁻²⁴/(1 − k·2⁻²⁴),
//
// the operands' rounding (|â·b̂ − a·b| ≤ (2u + u²)|a·b|) plus float32 summation. It is not the
// float32 GEMM: the rounding is really there (the largest error exceeds 100× float32's), and
// with exactly representable operands (bf16 values) it equals the float32 GEMM.
func TestGemmBF16ErrorBound(t *testing.T) {
	d := openFake(t)
	rng := rand.New(rand.NewPCG(23, 24))
	const m, n, k = 17, 13, 300
	for _, tc := range []struct {
		name   string
		tA, tB bool
	}{{"NN", false, false}, {"NT", false, true}, {"TN", true, false}} {
		a, b := randF32(rng, m*k, 1), randF32(rng, k*n, 0.1)
		lda, ldb := k, n
		if tc.tA {
			lda = m
		}
		if tc.tB {
			ldb = k
		}
		at := func(i, l int) float64 { // op(A)[i, l]
			if tc.tA {
				return float64(a[l*m+i])
			}
			return float64(a[i*k+l])
		}
		bt := func(l, j int) float64 {
			if tc.tB {
				return float64(b[j*k+l])
			}
			return float64(b[l*n+j])
		}
		A, B := upload(t, d, a), upload(t, d, b)
		AH, BH, C, C32 := mustAlloc(t, d, m*k*2), mustAlloc(t, d, k*n*2), mustAlloc(t, d, m*n*4), mustAlloc(t, d, m*n*4)
		if err := errors.Join(d.ToBF16(AH, A, m*k), d.ToBF16(BH, B, k*n), d.GemmBF16(tc.tA, tc.tB, m, n, k, 1, AH, lda, BH, ldb, 0, C, n),
			d.Sgemm(tc.tA, tc.tB, m, n, k, 1, A, lda, B, ldb, 0, C32, n)); err != nil {
			t.Fatal(err)
		}
		c, c32 := download[float32](t, d, C, m*n), download[float32](t, d, C32, m*n)
		const u = 0x1p-8
		gamma := k * 0x1p-24 / (1 - k*0x1p-24)
		worst, worst32 := 0.0, 0.0
		for i := range m {
			for j := range n {
				ref, abs := 0.0, 0.0
				for l := range k {
					ref += at(i, l) * bt(l, j)
					abs += math.Abs(at(i, l) * bt(l, j))
				}
				bound := (2*u + u*u + gamma) * abs
				if e := math.Abs(float64(c[i*n+j]) - ref); !(e <= bound) {
					t.Fatalf("%s: c[%d,%d] = %v, exact %v: error %.3g above the bound %.3g", tc.name, i, j, c[i*n+j], ref, e, bound)
				}
				worst = max(worst, math.Abs(float64(c[i*n+j])-ref)/abs)
				worst32 = max(worst32, math.Abs(float64(c32[i*n+j])-ref)/abs)
			}
		}
		if !(worst > 100*worst32) {
			t.Fatalf("%s: bf16 error %.3g not above 100× the float32 GEMM's %.3g: no rounding emulated?", tc.name, worst, worst32)
		}
		t.Logf("%s: largest error / Σ|aᵢbᵢ|: bf16 %.3g (bound %.3g), float32 %.3g", tc.name, worst, 2*u+u*u+gamma, worst32)
	}
	// bf16 operands are exact: the same products and order as the fake's float32 GEMM.
	a, b := randF32(rng, m*k, 1), randF32(rng, k*n, 1)
	for i := range a {
		a[i] = math.Float32frombits(uint32(bf16Ref(a[i])) << 16)
	}
	for i := range b {
		b[i] = math.Float32frombits(uint32(bf16Ref(b[i])) << 16)
	}
	A, B := upload(t, d, a), upload(t, d, b)
	AH, BH, C, C32 := mustAlloc(t, d, m*k*2), mustAlloc(t, d, k*n*2), mustAlloc(t, d, m*n*4), mustAlloc(t, d, m*n*4)
	if err := errors.Join(d.ToBF16(AH, A, m*k), d.ToBF16(BH, B, k*n), d.GemmBF16(false, false, m, n, k, 1, AH, k, BH, n, 0, C, n),
		d.Sgemm(false, false, m, n, k, 1, A, k, B, n, 0, C32, n)); err != nil {
		t.Fatal(err)
	}
	c, c32 := download[float32](t, d, C, m*n), download[float32](t, d, C32, m*n)
	for i := range c {
		if math.Float32bits(c[i]) != math.Float32bits(c32[i]) {
			t.Fatalf("bf16-exact operands: c[%d] = %v, float32 GEMM %v", i, c[i], c32[i])
		}
	}
	// Operands past the end of their buffers are refused before the call.
	if err := d.GemmBF16(false, false, m, n, k+1, 1, AH, k+1, BH, n, 0, C, n); err == nil {
		t.Fatal("GemmBF16 past the end of its operands accepted")
	}
}
