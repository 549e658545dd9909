//go:build linux

package nn

import (
	"math"
	"syscall"
	"testing"
	"unsafe"
)

// pageEnd returns n 4-byte elements that end exactly where a PROT_NONE page begins: a read or
// write past the end faults.
func pageEnd[T float32 | int32](t *testing.T, n int) []T {
	page := syscall.Getpagesize()
	body := (4*n + page - 1) / page * page
	mem, err := syscall.Mmap(-1, 0, body+page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Munmap(mem) })
	if err := syscall.Mprotect(mem[body:], syscall.PROT_NONE); err != nil {
		t.Fatalf("mprotect: %v", err)
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&mem[body-4*n])), n)
}

// TestMaxArg32KernelPageEnd: o, a and src each end at a PROT_NONE page, for every length up
// to 40: the kernel's masked tail neither reads nor writes past them (the test would fault),
// and the result is the Go loop's.
func TestMaxArg32KernelPageEnd(t *testing.T) {
	for n := 1; n <= 40; n++ {
		o, a, src := pageEnd[float32](t, n), pageEnd[int32](t, n), pageEnd[float32](t, n)
		for i := range n {
			o[i], src[i] = float32(i%5), float32((i*7)%5)
			if i%6 == 0 {
				src[i] = float32(math.NaN())
			}
		}
		wo, wa := append([]float32(nil), o...), append([]int32(nil), a...)
		maxArg32Go(wo, wa, src, 3)
		maxArg32(o, a, src, 3)
		for i := range o {
			if math.Float32bits(o[i]) != math.Float32bits(wo[i]) || a[i] != wa[i] {
				t.Fatalf("n %d, element %d: o %v a %d, Go loop o %v a %d", n, i, o[i], a[i], wo[i], wa[i])
			}
		}
	}
}
