package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// naiveGemm is the textbook triple loop, in float64, for row-major matrices
// with strides.
func naiveGemm[T Float](tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) []float64 {
	at := func(i, l int) float64 {
		if tA {
			return float64(a[l*lda+i])
		}
		return float64(a[i*lda+l])
	}
	bt := func(l, j int) float64 {
		if tB {
			return float64(b[j*ldb+l])
		}
		return float64(b[l*ldb+j])
	}
	out := make([]float64, m*n)
	for i := range m {
		for j := range n {
			s := 0.0
			for l := range k {
				s += at(i, l) * bt(l, j)
			}
			out[i*n+j] = float64(alpha)*s + float64(beta)*float64(c[i*ldc+j])
		}
	}
	return out
}

func randSlice[T Float](rng *rand.Rand, n int) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = T(rng.NormFloat64())
	}
	return s
}

func checkGemm[T Float](t *testing.T, tol float64) {
	rng := rand.New(rand.NewPCG(71, 72))
	shapes := [][3]int{{1, 1, 1}, {3, 5, 7}, {17, 9, 33}, {64, 70, 65}, {130, 3, 200}, {0, 4, 5}, {4, 0, 5}, {4, 5, 0}}
	for _, sh := range shapes {
		m, n, k := sh[0], sh[1], sh[2]
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				for _, pad := range []int{0, 3} {
					t.Run(fmt.Sprintf("m%d_n%d_k%d_tA%v_tB%v_pad%d", m, n, k, tA, tB, pad), func(t *testing.T) {
						ar, ac := m, k
						if tA {
							ar, ac = k, m
						}
						br, bc := k, n
						if tB {
							br, bc = n, k
						}
						lda, ldb, ldc := max(ac, 1)+pad, max(bc, 1)+pad, max(n, 1)+pad
						a := randSlice[T](rng, max(ar*lda, 1))
						b := randSlice[T](rng, max(br*ldb, 1))
						c := randSlice[T](rng, max(m*ldc, 1))
						alpha, beta := T(0.75), T(-1.5)
						want := naiveGemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
						// Scale of the terms, for a relative bound.
						absA, absB := make([]T, len(a)), make([]T, len(b))
						for i := range a {
							absA[i] = T(math.Abs(float64(a[i])))
						}
						for i := range b {
							absB[i] = T(math.Abs(float64(b[i])))
						}
						absC := make([]T, len(c))
						for i := range c {
							absC[i] = T(math.Abs(float64(c[i])))
						}
						scale := naiveGemm(tA, tB, m, n, k, T(0.75), absA, lda, absB, ldb, T(1.5), absC, ldc)
						got := append([]T(nil), c...)
						Gemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, got, ldc)
						for i := range m {
							for j := range n {
								g, w := float64(got[i*ldc+j]), want[i*n+j]
								if math.Abs(g-w) > tol*(scale[i*n+j]+1e-300) {
									t.Fatalf("C[%d,%d] = %v, naive %v", i, j, g, w)
								}
							}
							for j := n; j < ldc && i*ldc+j < len(c); j++ {
								if got[i*ldc+j] != c[i*ldc+j] {
									t.Fatalf("padding C[%d,%d] changed", i, j)
								}
							}
						}
					})
				}
			}
		}
	}
}

func TestGemm(t *testing.T) {
	t.Run("float64", func(t *testing.T) { checkGemm[float64](t, 1e-13) })
	t.Run("float32", func(t *testing.T) { checkGemm[float32](t, 2e-5) })
}

// β = 0 overwrites C without reading it: NaN already in C must not survive.
func TestGemmBetaZeroIgnoresC(t *testing.T) {
	a := []float64{1, 2, 3, 4}
	b := []float64{5, 6, 7, 8}
	c := []float64{math.NaN(), math.Inf(1), math.NaN(), math.NaN()}
	Gemm(false, false, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2)
	want := []float64{19, 22, 43, 50}
	for i := range c {
		if c[i] != want[i] {
			t.Fatalf("C = %v, want %v", c, want)
		}
	}
}
