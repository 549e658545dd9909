package fastblas

import (
	"github.com/dpsgd/dpsgd/internal/avxgemm"

	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// openOrSkip loads library n, skipping the test when it is not installed.
func openOrSkip(t testing.TB, n Name) *Library {
	t.Helper()
	lib, err := Open(n)
	if errors.Is(err, ErrNotInstalled) {
		t.Skipf("%s is not installed: %v", n, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return lib
}

// eachLibrary runs f on every installed library, each in its own subtest (skipped when absent).
func eachLibrary(t *testing.T, f func(t *testing.T, lib *Library)) {
	for _, n := range Libraries() {
		t.Run(string(n), func(t *testing.T) {
			lib := openOrSkip(t, n)
			defer lib.SetThreads(lib.Threads())
			f(t, lib)
		})
	}
}

// gemmCase is one GEMM call's arguments: sizes, transposes, strides, scalars, and the lengths
// of A, B and C as given (a short slice is a bad argument).
type gemmCase struct {
	tA, tB           blas.Transpose
	m, n, k          int
	lda, ldb, ldc    int
	alpha, beta      float64
	lenA, lenB, lenC int
}

func (g gemmCase) String() string {
	return fmt.Sprintf("%c%c m=%d n=%d k=%d lda=%d ldb=%d ldc=%d α=%g β=%g len=%d,%d,%d",
		g.tA, g.tB, g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.alpha, g.beta, g.lenA, g.lenB, g.lenC)
}

// stored is the stored shape (rows, columns) of op(X) = rows×cols when t transposes.
func stored(t blas.Transpose, rows, cols int) (int, int) {
	if t == blas.NoTrans {
		return rows, cols
	}
	return cols, rows
}

// needed is gonum's minimum slice length for a rows×cols matrix with stride ld (it asks for
// (rows−1)·ld + cols even when cols is 0).
func needed(rows, cols, ld int) int {
	if rows == 0 {
		return 0
	}
	return (rows-1)*ld + cols
}

// randomValidCase draws a valid GEMM: sizes 0–40 (sometimes up to 300, past the libraries'
// blocking and thread splits), any transposes, odd strides, and α, β among the special values
// (0, ±1) and random ones.
func randomValidCase(rng *rand.Rand) gemmCase {
	trans := []blas.Transpose{blas.NoTrans, blas.Trans, blas.ConjTrans}
	size := func() int {
		switch rng.IntN(10) {
		case 0:
			return 0
		case 1:
			return 1 + rng.IntN(300)
		}
		return 1 + rng.IntN(40)
	}
	scalar := func() float64 {
		return []float64{0, 1, -1, 0.5, 2*rng.Float64() - 1, 3 * rng.NormFloat64()}[rng.IntN(6)]
	}
	g := gemmCase{tA: trans[rng.IntN(3)], tB: trans[rng.IntN(3)], m: size(), n: size(), k: size(), alpha: scalar(), beta: scalar()}
	ar, ac := stored(g.tA, g.m, g.k)
	br, bc := stored(g.tB, g.k, g.n)
	g.lda = max(1, ac) + rng.IntN(4)
	g.ldb = max(1, bc) + rng.IntN(4)
	g.ldc = max(1, g.n) + rng.IntN(4)
	g.lenA = needed(ar, ac, g.lda) + rng.IntN(3)
	g.lenB = needed(br, bc, g.ldb) + rng.IntN(3)
	g.lenC = needed(g.m, g.n, g.ldc) + rng.IntN(3)
	return g
}

// fill returns n values of a standard normal, and NaN with probability pNaN (a NaN in C with
// β = 0 must not be read).
func fill(rng *rand.Rand, n int, pNaN float64) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = rng.NormFloat64()
		if rng.Float64() < pNaN {
			x[i] = math.NaN()
		}
	}
	return x
}

func to32(x []float64) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(v)
	}
	return y
}

// checkGemm compares got (the library's C) with want (gonum's C) for the case g with inputs a,
// b and c0 (C before the call): every entry of the m×n window within eps·(|α|·Σₗ|aᵢₗ||bₗⱼ| +
// |β·c0ᵢⱼ|) + tiny, NaN where gonum has NaN, and everything outside the window untouched.
func checkGemm(t *testing.T, g gemmCase, a, b, c0, got, want []float64, eps float64) {
	t.Helper()
	at := func(x []float64, tr blas.Transpose, i, j, ld int) float64 {
		if tr == blas.NoTrans {
			return x[i*ld+j]
		}
		return x[j*ld+i]
	}
	inWindow := make([]bool, len(got))
	for i := range g.m {
		for j := range g.n {
			p := i*g.ldc + j
			inWindow[p] = true
			scale := 0.0
			for l := range g.k {
				scale += math.Abs(at(a, g.tA, i, l, g.lda) * at(b, g.tB, l, j, g.ldb))
			}
			scale = math.Abs(g.alpha)*scale + math.Abs(g.beta*c0[p])
			w, v := want[p], got[p]
			if math.IsNaN(w) || math.IsNaN(v) {
				if math.IsNaN(w) != math.IsNaN(v) {
					t.Fatalf("%v: C[%d,%d] = %v, gonum %v", g, i, j, v, w)
				}
				continue
			}
			if math.Abs(v-w) > eps*float64(g.k+2)*scale+1e-30 {
				t.Fatalf("%v: C[%d,%d] = %v, gonum %v (bound %g)", g, i, j, v, w, eps*float64(g.k+2)*scale)
			}
		}
	}
	for p := range got {
		if !inWindow[p] && math.Float64bits(got[p]) != math.Float64bits(c0[p]) {
			t.Fatalf("%v: C[%d] outside the m×n window changed from %v to %v", g, p, c0[p], got[p])
		}
	}
}

// TestGemmMatchesGonum: on random valid calls (transposes, odd strides, zero sizes, α and β
// among 0, ±1 and random values, NaN in C that β = 0 must not read) the library's Sgemm and
// Dgemm equal gonum's within the float rounding of the products, and leave C outside the m×n
// window alone; with 1 and 2 library threads.
func TestGemmMatchesGonum(t *testing.T) {
	eachLibrary(t, func(t *testing.T, lib *Library) {
		im := lib.Implementation()
		var ref gonum.Implementation
		rng := rand.New(rand.NewPCG(1, 2))
		// Two threads on fewer calls: on a loaded machine a library's threads wait for each
		// other at every call (BLIS spins at its barriers).
		for _, run := range []struct{ threads, calls int }{{1, 300}, {2, 40}} {
			lib.SetThreads(run.threads)
			for range run.calls {
				g := randomValidCase(rng)
				a, b := fill(rng, g.lenA, 0), fill(rng, g.lenB, 0)
				pNaN := 0.0
				if g.beta == 0 {
					pNaN = 0.3
				}
				c0 := fill(rng, g.lenC, pNaN)

				want, got := slices.Clone(c0), slices.Clone(c0)
				ref.Dgemm(g.tA, g.tB, g.m, g.n, g.k, g.alpha, a, g.lda, b, g.ldb, g.beta, want, g.ldc)
				im.Dgemm(g.tA, g.tB, g.m, g.n, g.k, g.alpha, a, g.lda, b, g.ldb, g.beta, got, g.ldc)
				checkGemm(t, g, a, b, c0, got, want, 0x1p-52)

				// float32: the same values rounded to float32, compared in float64.
				a32, b32, c32 := to32(a), to32(b), to32(c0)
				w32, g32 := slices.Clone(c32), slices.Clone(c32)
				ref.Sgemm(g.tA, g.tB, g.m, g.n, g.k, float32(g.alpha), a32, g.lda, b32, g.ldb, float32(g.beta), w32, g.ldc)
				im.Sgemm(g.tA, g.tB, g.m, g.n, g.k, float32(g.alpha), a32, g.lda, b32, g.ldb, float32(g.beta), g32, g.ldc)
				widen := func(x []float32) []float64 {
					y := make([]float64, len(x))
					for i, v := range x {
						y[i] = float64(v)
					}
					return y
				}
				checkGemm(t, g, widen(a32), widen(b32), widen(c32), widen(g32), widen(w32), 0x1p-23)
			}
		}
	})
}

// panicOf runs f and returns what it panicked with (nil if it returned).
func panicOf(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// TestGemmPanicsLikeGonum: for random calls with bad arguments (unknown transposes, negative
// sizes, strides below the minimum, short slices) and valid ones, the library-backed Sgemm and
// Dgemm panic exactly when gonum's do, with gonum's message.
func TestGemmPanicsLikeGonum(t *testing.T) {
	eachLibrary(t, func(t *testing.T, lib *Library) { panicsLikeGonum(t, lib.Implementation()) })
	t.Run("asm", func(t *testing.T) {
		kern := newAsm(2)
		if kern == nil {
			t.Skip("no AVX-512 kernels here")
		}
		panicsLikeGonum(t, Implementation{asm: kern})
	})
}

// panicsLikeGonum is TestGemmPanicsLikeGonum on im.
func panicsLikeGonum(t *testing.T, im Implementation) {
	var ref gonum.Implementation
	rng := rand.New(rand.NewPCG(3, 4))
	bad := 0
	for range 2000 {
		g := randomValidCase(rng)
		g.m, g.n, g.k = min(g.m, 20), min(g.n, 20), min(g.k, 20)
		switch rng.IntN(8) {
		case 0:
			g.tA = blas.Transpose([]byte{'n', 'X', 0, 'c'}[rng.IntN(4)])
		case 1:
			g.tB = blas.Transpose([]byte{'t', 'Y', 0}[rng.IntN(3)])
		case 2:
			*[]*int{&g.m, &g.n, &g.k}[rng.IntN(3)] = -1 - rng.IntN(3)
		case 3:
			*[]*int{&g.lda, &g.ldb, &g.ldc}[rng.IntN(3)] = rng.IntN(3)
		case 4:
			*[]*int{&g.lenA, &g.lenB, &g.lenC}[rng.IntN(3)] = rng.IntN(4)
		}
		// Bad strides and sizes change the lengths gonum needs; keep the slices at least as
		// long as the valid case's unless the case above shortened one.
		a, b, c := fill(rng, max(g.lenA, 0), 0), fill(rng, max(g.lenB, 0), 0), fill(rng, max(g.lenC, 0), 0)
		call := func(impl blas.Float64, c []float64) func() {
			return func() {
				impl.Dgemm(g.tA, g.tB, g.m, g.n, g.k, g.alpha, a, g.lda, b, g.ldb, g.beta, c, g.ldc)
			}
		}
		want, got := slices.Clone(c), slices.Clone(c)
		pw, pg := panicOf(call(ref, want)), panicOf(call(im, got))
		if pw != pg {
			t.Fatalf("Dgemm %v: panicked with %v, gonum with %v", g, pg, pw)
		}
		a32, b32, c32 := to32(a), to32(b), to32(c)
		call32 := func(impl blas.Float32, c []float32) func() {
			return func() {
				impl.Sgemm(g.tA, g.tB, g.m, g.n, g.k, float32(g.alpha), a32, g.lda, b32, g.ldb, float32(g.beta), c, g.ldc)
			}
		}
		if pw, pg := panicOf(call32(ref, slices.Clone(c32))), panicOf(call32(im, slices.Clone(c32))); pw != pg {
			t.Fatalf("Sgemm %v: panicked with %v, gonum with %v", g, pg, pw)
		}
		if pw != nil {
			bad++
			continue
		}
		checkGemm(t, g, a, b, c, got, want, 0x1p-52)
	}
	if bad < 300 {
		t.Fatalf("only %d of 2000 calls had bad arguments: the test does not test", bad)
	}
}

// TestGraphRowIndependence: the engine's audit of the per-example path (engine/nn's xentOp
// documentation) needs each row of Z = A·W and of ∂L/∂A = E·Wᵀ to depend on its own row only,
// bit for bit, whatever its position in the batch and whatever the other rows hold. The
// products that Select gives the graphs (Choice.Graph: the library's where its probe found its
// rows independent, gonum's elsewhere) are checked for that on the shapes of the models
// (physical batches of 64 and 256 rows, MNIST's 784 inputs, a convolution's patch matrix),
// with 1 and 2 library threads.
func TestGraphRowIndependence(t *testing.T) {
	t.Run("auto", func(t *testing.T) {
		c, err := Select(Auto, 1)
		if err != nil {
			t.Fatal(err)
		}
		if c.Impl.Library() == nil {
			t.Skipf("no library installed: %s", c.Note)
		}
		t.Logf("%s", c.Describe())
		rng := rand.New(rand.NewPCG(9, 10))
		checkRows(t, rng, 1, c.Graph.Sgemm)
		checkRows(t, rng, 1, c.Graph.Dgemm)
	})
	t.Run("asm", func(t *testing.T) {
		if !avxgemm.Available() {
			t.Skip(avxgemm.Missing())
		}
		rng := rand.New(rand.NewPCG(11, 12))
		for _, threads := range []int{1, 2} {
			im := Implementation{asm: avxgemm.New(threads)}
			checkRows(t, rng, threads, im.Sgemm)
			checkRows(t, rng, threads, im.Dgemm)
		}
	})
	eachLibrary(t, func(t *testing.T, lib *Library) {
		rng := rand.New(rand.NewPCG(5, 6))
		for _, threads := range []int{1, 2} {
			c := choose([]*Library{lib}, threads, nil)
			t.Logf("%d threads: %s", threads, c.Describe())
			checkRows(t, rng, threads, c.Graph.Sgemm)
			checkRows(t, rng, threads, c.Graph.Dgemm)
		}
	})
}

// checkRows runs gemm on a batch A and on a batch holding A's rows in another order, half of
// the other rows hostile (huge values and a NaN), and requires every row of A to give the same
// bits in both.
func checkRows[T float32 | float64](t *testing.T, rng *rand.Rand, threads int, gemm func(tA, tB blas.Transpose, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int)) {
	t.Helper()
	for _, sh := range []struct {
		tB      blas.Transpose
		m, n, k int
	}{
		{blas.NoTrans, 256, 128, 784}, {blas.Trans, 256, 784, 128}, {blas.NoTrans, 256, 10, 256},
		{blas.NoTrans, 16 * 169, 32, 9}, {blas.Trans, 64, 10, 33}, {blas.NoTrans, 37, 19, 23},
	} {
		m, n, k := sh.m, sh.n, sh.k
		ldb := n
		if sh.tB == blas.Trans {
			ldb = k
		}
		a, b := make([]T, m*k), make([]T, k*n)
		for i := range a {
			a[i] = T(rng.NormFloat64())
		}
		for i := range b {
			b[i] = T(rng.NormFloat64())
		}
		c := make([]T, m*n)
		gemm(blas.NoTrans, sh.tB, m, n, k, 1, a, k, b, ldb, 0, c, n)
		// A's rows at random positions of a batch of 2m rows; the other rows hostile.
		m2 := 2 * m
		pos := rng.Perm(m2)[:m]
		a2 := make([]T, m2*k)
		for i := range a2 {
			a2[i] = T(rng.NormFloat64() * 1e30)
		}
		for i := range m2 {
			a2[i*k] = T(math.NaN())
		}
		for i, p := range pos {
			copy(a2[p*k:(p+1)*k], a[i*k:(i+1)*k])
		}
		c2 := make([]T, m2*n)
		gemm(blas.NoTrans, sh.tB, m2, n, k, 1, a2, k, b, ldb, 0, c2, n)
		for i, p := range pos {
			for j := range n {
				if c2[p*n+j] != c[i*n+j] {
					t.Fatalf("%T, %d threads, %c m=%d n=%d k=%d: row %d moved to %d: C[·,%d] = %v, was %v",
						c[0], threads, sh.tB, m, n, k, i, p, j, c2[p*n+j], c[i*n+j])
				}
			}
		}
	}
}

// TestProbeFindsPositionDependence: the probe behind Choice.Graph says no to a product whose
// rows depend on their position (gonum's, with the last bit of every odd row's results
// flipped) and yes to gonum's own.
func TestProbeFindsPositionDependence(t *testing.T) {
	var g gonum.Implementation
	if s, d := rowsIndependent(Implementation{}); !s || !d {
		t.Fatalf("gonum's products: probe says float32 %v, float64 %v; want true, true", s, d)
	}
	odd := func(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
		g.Dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		for i := 1; i < m; i += 2 {
			for j := range n {
				c[i*ldc+j] = math.Float64frombits(math.Float64bits(c[i*ldc+j]) ^ 1)
			}
		}
	}
	if probeRows(odd) {
		t.Fatal("probe accepted a product whose odd rows round differently")
	}
	if !probeRows(g.Dgemm) {
		t.Fatal("probe refused gonum's Dgemm")
	}
}

// TestGoImplementation: the zero Implementation is gonum's BLAS, bit for bit.
func TestGoImplementation(t *testing.T) {
	var im Implementation
	var ref gonum.Implementation
	rng := rand.New(rand.NewPCG(7, 8))
	for range 50 {
		g := randomValidCase(rng)
		a, b, c := fill(rng, g.lenA, 0), fill(rng, g.lenB, 0), fill(rng, g.lenC, 0)
		want, got := slices.Clone(c), slices.Clone(c)
		ref.Dgemm(g.tA, g.tB, g.m, g.n, g.k, g.alpha, a, g.lda, b, g.ldb, g.beta, want, g.ldc)
		im.Dgemm(g.tA, g.tB, g.m, g.n, g.k, g.alpha, a, g.lda, b, g.ldb, g.beta, got, g.ldc)
		for i := range want {
			if math.Float64bits(want[i]) != math.Float64bits(got[i]) {
				t.Fatalf("%v: C[%d] = %v, gonum %v", g, i, got[i], want[i])
			}
		}
	}
	if im.Library() != nil {
		t.Fatal("zero Implementation has a library")
	}
}

// TestGemmHugeStridePanics: a stride so large that (rows − 1)·ld + cols wraps around int
// passes gonum's length check, and gonum's assembly then addresses rows far outside the slice
// (it faulted); Implementation's Sgemm and Dgemm, whatever computes them (gonum, the AVX-512
// kernels, a library), must instead panic with gonum's message for a short matrix exactly when
// the matrix is short, which the test decides in exact integer arithmetic (math/big).
func TestGemmHugeStridePanics(t *testing.T) {
	impls := map[string]Implementation{"go": {}}
	if kern := newAsm(2); kern != nil {
		impls["asm"] = Implementation{asm: kern}
	}
	for _, n := range Libraries() {
		if lib, err := Open(n); err == nil {
			impls[string(n)] = lib.Implementation()
		}
	}
	huge := []int{math.MaxInt, math.MaxInt / 3, math.MaxUint64 / 15, math.MaxUint64/19 + 1}
	rng := rand.New(rand.NewPCG(5, 6))
	for name, im := range impls {
		for range 300 {
			g := randomValidCase(rng)
			g.m, g.n, g.k = 1+rng.IntN(20), 1+rng.IntN(20), 1+rng.IntN(20)
			aRows, aCols := stored(g.tA, g.m, g.k)
			bRows, bCols := stored(g.tB, g.k, g.n)
			g.lda, g.ldb, g.ldc = aCols, bCols, g.n
			*[]*int{&g.lda, &g.ldb, &g.ldc}[rng.IntN(3)] = huge[rng.IntN(len(huge))]
			short := func(length, rows, cols, ld int) bool {
				need := new(big.Int).Mul(big.NewInt(int64(rows-1)), big.NewInt(int64(ld)))
				need.Add(need, big.NewInt(int64(cols)))
				return big.NewInt(int64(length)).Cmp(need) < 0
			}
			// Slices as long as a valid case with the minimal strides needs.
			lenA, lenB, lenC := needed(aRows, aCols, aCols), needed(bRows, bCols, bCols), needed(g.m, g.n, g.n)
			g.lenA, g.lenB, g.lenC = lenA, lenB, lenC
			want := ""
			switch {
			case short(lenA, aRows, aCols, g.lda):
				want = "blas: insufficient length of a"
			case short(lenB, bRows, bCols, g.ldb):
				want = "blas: insufficient length of b"
			case short(lenC, g.m, g.n, g.ldc):
				want = "blas: insufficient length of c"
			}
			a, b, c := fill(rng, g.lenA, 0), fill(rng, g.lenB, 0), fill(rng, g.lenC, 0)
			p := panicOf(func() { im.Dgemm(g.tA, g.tB, g.m, g.n, g.k, g.alpha, a, g.lda, b, g.ldb, g.beta, c, g.ldc) })
			p32 := panicOf(func() {
				im.Sgemm(g.tA, g.tB, g.m, g.n, g.k, float32(g.alpha), to32(a), g.lda, to32(b), g.ldb, float32(g.beta), to32(c), g.ldc)
			})
			for _, got := range []any{p, p32} {
				if want == "" && got != nil || want != "" && got != want {
					t.Fatalf("%s: %v: panicked with %v, want %q", name, g, got, want)
				}
			}
		}
	}
}
