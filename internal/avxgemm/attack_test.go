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
	threads := []int{2}
	if !testing.Short() {
		threads = []int{1, 2}
		ms = append(ms, 3, 4, 5, 31, 32, 47, 48, 49)
		ns = append(ns, 2, 3, 4, 5, 6, 15, 24, 31, 32, 63, 64, 65)
		ks = append(ks, 2, 6, 7, 8, 9, 255, 256, 511, 512, 513)
	}
	rng := rand.New(rand.NewPCG(21, 23))
	for _, th := range threads {
		im := New(th)
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
			t.Fatalf("threads %d, %+v: C[%d,%d] = %v, want %v", im.threads, tc, i/ldc, i%ldc, c[i], want[i])
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
