package fastblas

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// TestSerialGemmBitwise: gonum's products computed panel by panel on the calling goroutine
// (what Implementation does for the products it leaves to gonum) have gonum's own bits, for
// products large enough that gonum would go parallel: every transpose, odd strides, α and β
// among 0, ±1 and random values, NaN in C under β = 0, zeros in A (which gonum skips), and the
// shapes of the MNIST models' graphs.
func TestSerialGemmBitwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	var ref gonum.Implementation
	trans := []blas.Transpose{blas.NoTrans, blas.Trans, blas.ConjTrans}
	shapes := [][3]int{{187, 128, 784}, {187, 10, 128}, {187 * 196, 16, 25}, {187 * 25, 32, 400}, {65, 193, 1}, {64, 192, 70}, {1, 500, 3}}
	for c := range 60 {
		g := gemmCase{tA: trans[rng.IntN(3)], tB: trans[rng.IntN(3)], m: 1 + rng.IntN(400), n: 1 + rng.IntN(500), k: 1 + rng.IntN(200)}
		if c < len(shapes) {
			g.m, g.n, g.k = shapes[c][0], shapes[c][1], shapes[c][2]
		}
		scalar := func() float64 { return []float64{0, 1, -1, 2*rng.Float64() - 1}[rng.IntN(4)] }
		g.alpha, g.beta = scalar(), scalar()
		ar, ac := stored(g.tA, g.m, g.k)
		br, bc := stored(g.tB, g.k, g.n)
		g.lda, g.ldb, g.ldc = ac+rng.IntN(3), bc+rng.IntN(3), g.n+rng.IntN(3)
		a, b := fill(rng, needed(ar, ac, g.lda), 0), fill(rng, needed(br, bc, g.ldb), 0)
		for i := range a {
			if rng.IntN(4) != 0 {
				a[i] = 0 // sparse like MNIST pixels
			}
		}
		pNaN := 0.0
		if g.beta == 0 {
			pNaN = 0.2
		}
		c0 := fill(rng, needed(g.m, g.n, g.ldc), pNaN)

		want, got := slices.Clone(c0), slices.Clone(c0)
		ref.Dgemm(g.tA, g.tB, g.m, g.n, g.k, g.alpha, a, g.lda, b, g.ldb, g.beta, want, g.ldc)
		serialGemm(ref.Dgemm, g.tA, g.tB, g.m, g.n, g.k, g.alpha, a, g.lda, b, g.ldb, g.beta, got, g.ldc)
		for i := range want {
			if math.Float64bits(want[i]) != math.Float64bits(got[i]) && !(math.IsNaN(want[i]) && math.IsNaN(got[i])) {
				t.Fatalf("Dgemm %+v: C[%d] = %v, gonum %v", g, i, got[i], want[i])
			}
		}
		a32, b32, c32 := to32(a), to32(b), to32(c0)
		w32, g32 := slices.Clone(c32), slices.Clone(c32)
		ref.Sgemm(g.tA, g.tB, g.m, g.n, g.k, float32(g.alpha), a32, g.lda, b32, g.ldb, float32(g.beta), w32, g.ldc)
		serialGemm(ref.Sgemm, g.tA, g.tB, g.m, g.n, g.k, float32(g.alpha), a32, g.lda, b32, g.ldb, float32(g.beta), g32, g.ldc)
		for i := range w32 {
			if math.Float32bits(w32[i]) != math.Float32bits(g32[i]) && !(w32[i] != w32[i] && g32[i] != g32[i]) {
				t.Fatalf("Sgemm %+v: C[%d] = %v, gonum %v", g, i, g32[i], w32[i])
			}
		}
	}
}
