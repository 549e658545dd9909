package avxgemm

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
)

func needKernels(t testing.TB) {
	t.Helper()
	if !Available() {
		t.Skip(missing)
	}
}

// isas lists the kernels this machine runs (an AVX-512 CPU runs both).
func isas() []string {
	var l []string
	if hasAVX512 {
		l = append(l, ISAAVX512)
	}
	if hasAVX2 {
		l = append(l, ISAAVX2)
	}
	return l
}

// ref is the product computed the way the package documents it, element by element in
// scalar Go: per block of kcMax values of k, s accumulated from +0 by fused multiply-adds, k
// ascending; then C = α·s (β = 0, first block), α·s + β·C (first block), α·s + C (later).
// fma is the precision's fused multiply-add.
func ref[T float](fma func(x, y, z T) T, tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	at := func(i, kk int) T {
		if tA {
			return a[kk*lda+i]
		}
		return a[i*lda+kk]
	}
	bt := func(kk, j int) T {
		if tB {
			return b[j*ldb+kk]
		}
		return b[kk*ldb+j]
	}
	for i := range m {
		for j := range n {
			for pc := 0; pc < k; pc += kcMax {
				var s T
				for kk := pc; kk < min(k, pc+kcMax); kk++ {
					s = fma(at(i, kk), bt(kk, j), s)
				}
				switch {
				case pc == 0 && beta == 0:
					c[i*ldc+j] = alpha * s
				case pc == 0:
					c[i*ldc+j] = fma(beta, c[i*ldc+j], alpha*s)
				default:
					c[i*ldc+j] = fma(1, c[i*ldc+j], alpha*s)
				}
			}
		}
	}
}

func fma64(x, y, z float64) float64 { return math.FMA(x, y, z) }

// fma32 is float32's fused multiply-add through float64: x·y is exact in float64, so the
// only error is the double rounding of x·y + z, which happens for no input of these tests
// (they compare bit for bit and would fail).
func fma32(x, y, z float32) float32 { return float32(math.FMA(float64(x), float64(y), float64(z))) }

type gemmCase struct {
	tA, tB      bool
	m, n, k     int
	pad         int // extra stride of every matrix
	alpha, beta float64
}

func cases() []gemmCase {
	var cs []gemmCase
	for _, m := range []int{1, 15, 16, 17, 40} {
		for _, n := range []int{1, 7, 8, 9, 16, 17, 40} {
			for _, k := range []int{1, 3, 4, 5, 9, 300} {
				for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
					cs = append(cs, gemmCase{tA: tr[0], tB: tr[1], m: m, n: n, k: k, pad: (m + n + k) % 3, alpha: 1, beta: 0})
				}
			}
		}
	}
	for _, ab := range [][2]float64{{0.5, 0}, {1, 1}, {-1.25, -0.75}, {2, 1}} {
		cs = append(cs,
			gemmCase{m: 33, n: 21, k: 517, pad: 1, alpha: ab[0], beta: ab[1]},
			gemmCase{tA: true, tB: true, m: 19, n: 35, k: 260, pad: 2, alpha: ab[0], beta: ab[1]})
	}
	return cs
}

// operands returns random A, B and C of the case's shapes and strides; C's padding holds a
// sentinel that must survive.
func operands[T float](rng *rand.Rand, tc gemmCase, sentinel T) (a []T, lda int, b []T, ldb int, c []T, ldc int) {
	aRows, aCols := tc.m, tc.k
	if tc.tA {
		aRows, aCols = tc.k, tc.m
	}
	bRows, bCols := tc.k, tc.n
	if tc.tB {
		bRows, bCols = tc.n, tc.k
	}
	lda, ldb, ldc = aCols+tc.pad, bCols+tc.pad, tc.n+tc.pad
	a, b, c = make([]T, (aRows-1)*lda+aCols), make([]T, (bRows-1)*ldb+bCols), make([]T, (tc.m-1)*ldc+tc.n)
	for i := range a {
		a[i] = T(rng.NormFloat64())
	}
	for i := range b {
		b[i] = T(rng.NormFloat64())
	}
	for i := range c {
		if i%ldc < tc.n {
			c[i] = T(rng.NormFloat64())
		} else {
			c[i] = sentinel
		}
	}
	return
}

func trans(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

func testAgainstRef[T float](t *testing.T, fma func(x, y, z T) T, gemm func(im *Impl, tA, tB blas.Transpose, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int)) {
	rng := rand.New(rand.NewPCG(7, 11))
	const sentinel = 12345
	for _, isa := range isas() {
		for _, threads := range []int{1, 3} {
			im := newISA(isa, threads)
			im.parallelWork = 1 // split every product that has more than one block of rows
			for _, tc := range cases() {
				a, lda, b, ldb, c, ldc := operands[T](rng, tc, sentinel)
				want := append([]T(nil), c...)
				if tc.beta == 0 {
					for i := range c { // β = 0: C is not read, so its NaN must not show
						if i%ldc < tc.n {
							c[i] = T(math.NaN())
						}
					}
				}
				ref(fma, tc.tA, tc.tB, tc.m, tc.n, tc.k, T(tc.alpha), a, lda, b, ldb, T(tc.beta), want, ldc)
				gemm(im, trans(tc.tA), trans(tc.tB), tc.m, tc.n, tc.k, T(tc.alpha), a, lda, b, ldb, T(tc.beta), c, ldc)
				for i := range c {
					if math.Float64bits(float64(c[i])) != math.Float64bits(float64(want[i])) {
						t.Fatalf("%s, threads %d, %+v: C[%d,%d] = %v, want %v (bit for bit)", isa, threads, tc, i/ldc, i%ldc, c[i], want[i])
					}
				}
			}
		}
	}
}

func TestSgemmEqualsReference(t *testing.T) {
	needKernels(t)
	testAgainstRef(t, fma32, (*Impl).Sgemm)
}

func TestDgemmEqualsReference(t *testing.T) {
	needKernels(t)
	testAgainstRef(t, fma64, (*Impl).Dgemm)
}

// TestAVX2EqualsAVX512: on a CPU that runs both, the two kernel sets give the same bits on
// every case (the reference tests check each against the scalar model too; this compares
// them directly, NaN payloads included).
func TestAVX2EqualsAVX512(t *testing.T) {
	if !hasAVX512 || !hasAVX2 {
		t.Skip("needs a CPU with both AVX-512F and AVX2")
	}
	rng := rand.New(rand.NewPCG(23, 29))
	wide, narrow := newISA(ISAAVX512, 2), newISA(ISAAVX2, 2)
	wide.parallelWork, narrow.parallelWork = 1, 1
	for _, tc := range cases() {
		a, lda, b, ldb, c, ldc := operands[float64](rng, tc, 7)
		a[0] = math.NaN()
		c2 := append([]float64(nil), c...)
		wide.Dgemm(trans(tc.tA), trans(tc.tB), tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, c, ldc)
		narrow.Dgemm(trans(tc.tA), trans(tc.tB), tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, c2, ldc)
		for i := range c {
			if math.Float64bits(c[i]) != math.Float64bits(c2[i]) {
				t.Fatalf("%+v: C[%d]: AVX-512 %v, AVX2 %v", tc, i, c[i], c2[i])
			}
		}
	}
}

// TestRowsIndependent: reordering the rows of op(A), adding rows around them, changing the
// threads, or putting hostile values (NaN, ±Inf, 1e30, subnormals, −0) in another row leaves
// every row of C the same, bit for bit.
func TestRowsIndependent(t *testing.T) {
	needKernels(t)
	rng := rand.New(rand.NewPCG(3, 5))
	hostile := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 1e30, -1e30, 1e-45, float32(math.Copysign(0, -1))}
	for _, tA := range []bool{false, true} {
		for _, tB := range []bool{false, true} {
			const m, n, k = 37, 19, 270
			tc := gemmCase{tA: tA, tB: tB, m: m, n: n, k: k, alpha: 1}
			a, lda, b, ldb, c, ldc := operands[float32](rng, tc, 0)
			New(1).Sgemm(trans(tA), trans(tB), m, n, k, 1, a, lda, b, ldb, 0, c, ldc)
			for _, isa := range isas() {
				// Row i of A goes to row perm[i] of a bigger A2 whose other rows are hostile.
				m2 := m + 30
				perm := rng.Perm(m2)[:m]
				get := func(x []float32, ld, i, kk int) *float32 {
					if tA {
						return &x[kk*ld+i]
					}
					return &x[i*ld+kk]
				}
				lda2 := k
				if tA {
					lda2 = m2
				}
				a2 := make([]float32, m2*k)
				for i := range m2 {
					for kk := range k {
						*get(a2, lda2, i, kk) = hostile[(i+kk)%len(hostile)]
					}
				}
				for i := range m {
					for kk := range k {
						*get(a2, lda2, perm[i], kk) = *get(a, lda, i, kk)
					}
				}
				for _, threads := range []int{1, 2, 5} {
					im := newISA(isa, threads)
					im.parallelWork = 1
					c2 := make([]float32, m2*n)
					im.Sgemm(trans(tA), trans(tB), m2, n, k, 1, a2, lda2, b, ldb, 0, c2, n)
					for i := range m {
						for j := range n {
							if math.Float32bits(c2[perm[i]*n+j]) != math.Float32bits(c[i*ldc+j]) {
								t.Fatalf("%s, tA %v tB %v threads %d: row %d at %d: C[%d] = %v, alone %v", isa, tA, tB, threads, i, perm[i], j, c2[perm[i]*n+j], c[i*ldc+j])
							}
						}
					}
				}
			}
		}
	}
}

func TestBadArgumentsPanic(t *testing.T) {
	needKernels(t)
	im := New(1)
	for name, f := range map[string]func(){
		"short A": func() {
			im.Sgemm(blas.NoTrans, blas.NoTrans, 2, 2, 2, 1, make([]float32, 3), 2, make([]float32, 4), 2, 0, make([]float32, 4), 2)
		},
		"small ldc": func() {
			im.Sgemm(blas.NoTrans, blas.NoTrans, 2, 2, 2, 1, make([]float32, 4), 2, make([]float32, 4), 2, 0, make([]float32, 4), 1)
		},
		"zero k": func() { im.Dgemm(blas.NoTrans, blas.NoTrans, 2, 2, 0, 1, nil, 1, nil, 2, 0, make([]float64, 4), 2) },
		"bad flag": func() {
			im.Dgemm(blas.Transpose('x'), blas.NoTrans, 1, 1, 1, 1, []float64{1}, 1, []float64{1}, 1, 0, []float64{0}, 1)
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
