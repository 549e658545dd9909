//go:build linux

package avxgemm

import (
	"math"
	"math/rand/v2"
	"syscall"
	"testing"
	"unsafe"

	"gonum.org/v1/gonum/blas"
)

// guarded returns n elements that end exactly where a PROT_NONE page begins, and a page
// before them that is PROT_NONE too: a read or write past either end faults. free unmaps it.
func guarded[T float](t testing.TB, n int) (s []T, free func()) {
	page := syscall.Getpagesize()
	size := int(unsafe.Sizeof(T(0)))
	body := (n*size + page - 1) / page * page
	mem, err := syscall.Mmap(-1, 0, body+2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	if err := syscall.Mprotect(mem[:page], syscall.PROT_NONE); err != nil {
		t.Fatalf("mprotect: %v", err)
	}
	if err := syscall.Mprotect(mem[page+body:], syscall.PROT_NONE); err != nil {
		t.Fatalf("mprotect: %v", err)
	}
	end := page + body
	if n == 0 {
		return nil, func() { _ = syscall.Munmap(mem) }
	}
	s = unsafe.Slice((*T)(unsafe.Pointer(&mem[end-n*size])), n)
	return s, func() { _ = syscall.Munmap(mem) }
}

// TestNoOverreadAtPageEnd puts A, B and C each at the very end of a mapping followed (and
// preceded) by a PROT_NONE page, exactly as long as their shapes and strides allow, and
// computes every small shape: an out-of-bounds read or write of any operand faults (the test
// binary dies). The results are checked against the reference, and with β = 0 C starts as
// NaN, which must not show.
func TestNoOverreadAtPageEnd(t *testing.T) {
	needKernels(t)
	ms := []int{1, 2, 15, 16, 17, 33}
	ns := []int{1, 7, 8, 9, 16, 17, 33}
	ks := []int{1, 3, 4, 5, 257}
	if !testing.Short() {
		ms = append(ms, 3, 32, 49)
		ns = append(ns, 2, 24, 65)
		ks = append(ks, 8, 513)
	}
	rng := rand.New(rand.NewPCG(21, 23))
	for _, isa := range isas() {
		im := newISA(isa, 2) // products of more than one tile of rows split over 2 goroutines
		im.parallelWork = 1
		for _, m := range ms {
			for _, n := range ns {
				for _, k := range ks {
					for tr := range 4 {
						tc := gemmCase{tA: tr&1 != 0, tB: tr&2 != 0, m: m, n: n, k: k, pad: (m*7 + n*3 + k) % 4, alpha: 1}
						if tr == 3 {
							tc.alpha, tc.beta = -0.5, 0.75
						}
						guardedCase[float32](t, rng, im, tc, fma32, (*Impl).Sgemm)
						guardedCase[float64](t, rng, im, tc, fma64, (*Impl).Dgemm)
					}
				}
			}
		}
	}
}

func guardedCase[T float](t *testing.T, rng *rand.Rand, im *Impl, tc gemmCase, fma func(x, y, z T) T, gemm func(im *Impl, tA, tB blas.Transpose, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int)) {
	t.Helper()
	a0, lda, b0, ldb, c0, ldc := operands[T](rng, tc, 777)
	a, fa := guarded[T](t, len(a0))
	defer fa()
	b, fb := guarded[T](t, len(b0))
	defer fb()
	c, fc := guarded[T](t, len(c0))
	defer fc()
	copy(a, a0)
	copy(b, b0)
	copy(c, c0)
	if tc.beta == 0 {
		for i := range c {
			if i%ldc < tc.n {
				c[i] = T(math.NaN())
			}
		}
	}
	want := c0
	ref(fma, tc.tA, tc.tB, tc.m, tc.n, tc.k, T(tc.alpha), a0, lda, b0, ldb, T(tc.beta), want, ldc)
	gemm(im, trans(tc.tA), trans(tc.tB), tc.m, tc.n, tc.k, T(tc.alpha), a, lda, b, ldb, T(tc.beta), c, ldc)
	for i := range c {
		if math.Float64bits(float64(c[i])) != math.Float64bits(float64(want[i])) {
			t.Fatalf("%s, threads %d, %+v: C[%d,%d] = %v, want %v", im.isa, im.threads, tc, i/ldc, i%ldc, c[i], want[i])
		}
	}
}

// TestStrideOverflowPanics: strides so large that the length check's (rows−1)·ld + cols wraps
// around int must panic like any short matrix, not reach the kernels, which address rows
// through raw pointers at ld·size bytes: with ldc = MaxInt, row 1 of C would be written one
// element before C.
func TestStrideOverflowPanics(t *testing.T) {
	needKernels(t)
	im := New(1)
	const big = math.MaxInt
	// 15·wrap15 = 2⁶⁴ − 1: (16−1)·lda + 1 wraps to 0.
	const wrap15 = math.MaxUint64 / 15
	backing := make([]float32, 4)
	backing[0] = 42
	cases := map[string]func(){
		"ldc wraps, C written before its start": func() {
			im.Sgemm(blas.NoTrans, blas.NoTrans, 2, 1, 1, 1, []float32{1, 2}, 1, []float32{3}, 1, 0, backing[1:2], big)
		},
		// Each below is valid but for one stride whose (rows−1)·ld + cols wraps to 0.
		"lda wraps": func() { check(blas.NoTrans, blas.NoTrans, 16, 1, 1, 1, wrap15, 1, 1, 16, 1) },
		"lda wraps, A transposed": func() {
			check(blas.Trans, blas.NoTrans, 1, 1, 16, 1, wrap15, 16, 1, 1, 1)
		},
		"ldb wraps": func() { check(blas.NoTrans, blas.NoTrans, 1, 1, 16, 16, 16, 1, wrap15, 1, 1) },
		"ldb wraps, B transposed": func() {
			check(blas.NoTrans, blas.Trans, 1, 16, 1, 1, 1, 1, wrap15, 16, 16)
		},
		"ldc wraps": func() { check(blas.NoTrans, blas.NoTrans, 16, 1, 1, 16, 1, 1, 1, 1, wrap15) },
	}
	for name, f := range cases {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
	if backing[0] != 42 {
		t.Errorf("the element before C was overwritten: %v", backing[0])
	}
}

// TestRowsIndependentBeta extends TestRowsIndependent to float64, to β ≠ 0 with hostile values
// in the other rows of C as well as of A, and to strides with padding: row i of C, computed
// alone (m = 1, no padding) and computed at every position of a bigger product among hostile
// rows, is the same bits.
func TestRowsIndependentBeta(t *testing.T) {
	needKernels(t)
	rowsIndependentBeta[float32](t, (*Impl).Sgemm)
	rowsIndependentBeta[float64](t, (*Impl).Dgemm)
}

func rowsIndependentBeta[T float](t *testing.T, gemm func(im *Impl, tA, tB blas.Transpose, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int)) {
	rng := rand.New(rand.NewPCG(31, 37))
	hostile := []T{T(math.NaN()), T(math.Inf(1)), T(math.Inf(-1)), 1e30, -1e30, T(math.SmallestNonzeroFloat32), T(math.Copysign(0, -1)), 1e-300}
	const n, k, m2, pad = 13, 261, 35, 3
	for tr := range 4 {
		tA, tB := tr&1 != 0, tr&2 != 0
		for _, beta := range []T{0, 0.5, 1} {
			b, ldb := make([]T, n*k), n
			if tB {
				ldb = k
			}
			for i := range b {
				b[i] = T(rng.NormFloat64())
			}
			// The big product: m2 rows, every one hostile but the row under test.
			lda, ldc := k+pad, n+pad
			if tA {
				lda = m2 + pad
			}
			at := func(x []T, ld, i, kk int) *T {
				if tA {
					return &x[kk*ld+i]
				}
				return &x[i*ld+kk]
			}
			row, c1 := make([]T, k), make([]T, n)
			for kk := range row {
				row[kk] = T(rng.NormFloat64())
			}
			for j := range c1 {
				c1[j] = T(rng.NormFloat64())
			}
			alone, lda1 := append([]T(nil), c1...), k
			if tA {
				lda1 = 1 // op(A) = row is stored as a k×1 column
			}
			gemm(New(1), trans(tA), trans(tB), 1, n, k, -1.5, row, lda1, b, ldb, beta, alone, n)
			for _, pos := range []int{0, 1, 15, 16, 17, 31, 32, m2 - 1} {
				a := make([]T, max(m2*lda, k*lda))
				c := make([]T, m2*ldc)
				for i := range a {
					a[i] = hostile[(i*7)%len(hostile)]
				}
				for i := range c {
					c[i] = hostile[(i*5)%len(hostile)]
				}
				for kk := range k {
					*at(a, lda, pos, kk) = row[kk]
				}
				copy(c[pos*ldc:pos*ldc+n], c1)
				im := New(1 + pos%3)
				im.parallelWork = 1
				gemm(im, trans(tA), trans(tB), m2, n, k, -1.5, a, lda, b, ldb, beta, c, ldc)
				for j := range n {
					if math.Float64bits(float64(c[pos*ldc+j])) != math.Float64bits(float64(alone[j])) {
						t.Fatalf("%T tA %v tB %v β %v: row at %d, C[%d] = %v, alone %v", beta, tA, tB, beta, pos, j, c[pos*ldc+j], alone[j])
					}
				}
				for i := range c {
					if i%ldc >= n && math.Float64bits(float64(c[i])) != math.Float64bits(float64(hostile[(i*5)%len(hostile)])) {
						t.Fatalf("%T tA %v tB %v β %v: C's padding at %d written", beta, tA, tB, beta, i)
					}
				}
			}
		}
	}
}

// TestConcurrentCalls: one Impl called from several goroutines at once (the graph replicas
// share it), each product split over threads too, gives every caller the bits it gets alone:
// the packing buffers from the pool are never shared between calls.
func TestConcurrentCalls(t *testing.T) {
	needKernels(t)
	im := New(3)
	im.parallelWork = 1
	rng := rand.New(rand.NewPCG(41, 43))
	const callers = 6
	type job struct {
		m, n, k   int
		a, b      []float32
		want, got []float32
	}
	jobs := make([]job, callers)
	for i := range jobs {
		m, n, k := 17+9*i, 33-3*i, 257+40*i
		j := job{m: m, n: n, k: k, a: make([]float32, m*k), b: make([]float32, k*n), want: make([]float32, m*n), got: make([]float32, m*n)}
		for x := range j.a {
			j.a[x] = float32(rng.NormFloat64())
		}
		for x := range j.b {
			j.b[x] = float32(rng.NormFloat64())
		}
		New(1).Sgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, j.a, k, j.b, n, 0, j.want, n)
		jobs[i] = j
	}
	done := make(chan int)
	for i := range jobs {
		go func() {
			j := jobs[i]
			for range 20 {
				im.Sgemm(blas.NoTrans, blas.NoTrans, j.m, j.n, j.k, 1, j.a, j.k, j.b, j.n, 0, j.got, j.n)
				for x := range j.got {
					if math.Float32bits(j.got[x]) != math.Float32bits(j.want[x]) {
						t.Errorf("caller %d: C[%d] = %v, alone %v", i, x, j.got[x], j.want[x])
						done <- i
						return
					}
				}
			}
			done <- i
		}()
	}
	for range jobs {
		<-done
	}
}
