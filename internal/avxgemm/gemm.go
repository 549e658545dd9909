// Run in this directory: go run asmgen/main.go > gemm_amd64.s (TestAsmIsGenerated checks it).
//go:generate sh -c "go run asmgen/main.go > gemm_amd64.s"

package avxgemm

import (
	"fmt"
	"sync"

	"gonum.org/v1/gonum/blas"
)

// Available reports whether the kernels run on this machine: an amd64 CPU with AVX-512F, or
// with AVX2 and FMA, that the operating system enables, in a build without the noasm or purego
// tags.
func Available() bool { return hasAVX512 || hasAVX2 }

// Missing says why the kernels cannot run here; it is empty when they are Available.
func Missing() string {
	if Available() {
		return ""
	}
	return missing
}

const (
	// kcMax is the block of k summed in registers before C is updated; it depends on nothing
	// but k, so neither does any row's result.
	kcMax = 256
	// ncMax is the columns of B packed at once (a multiple of both panel widths).
	ncMax = 1024
	// parallelWork is the least m·n·k for which a product is split over threads.
	parallelWork = 1 << 21
)

type float interface{ float32 | float64 }

// kernelSet is one precision's micro-kernels and panel width.
type kernelSet[T float] struct {
	mr             int // rows of a tile: 16 (AVX-512) or 6 (AVX2)
	nr             int // columns of a panel: 64 bytes
	direct, packed func(kc int, a *T, stride int, b *T, c *T, ldc int, rows int, mask uint64, alpha, beta T, mode int)
	pool           *sync.Pool
}

// Impl computes products with the kernels; Threads (at least 1) is how many goroutines one
// large product may use. The zero value is not usable: use New.
type Impl struct {
	isa     string
	threads int
	// parallelWork is the least m·n·k for which a product is split over threads.
	parallelWork int
	s            kernelSet[float32]
	d            kernelSet[float64]
}

// New returns an Impl whose large products use up to threads goroutines (at least 1), with
// the AVX-512 kernels where the CPU has them, else the AVX2 ones. It panics when neither is
// Available.
func New(threads int) *Impl {
	switch {
	case hasAVX512:
		return newISA(ISAAVX512, threads)
	case hasAVX2:
		return newISA(ISAAVX2, threads)
	}
	panic("avxgemm: " + missing)
}

// The instruction sets of the kernels. Both compute every element with the same operations in
// the same order, so they give the same bits (TestAVX2EqualsAVX512).
const (
	ISAAVX512 = "AVX-512"
	ISAAVX2   = "AVX2"
)

// newISA is New with the kernels of isa, which the CPU must support.
func newISA(isa string, threads int) *Impl {
	im := &Impl{isa: isa, threads: max(1, threads), parallelWork: parallelWork}
	if isa == ISAAVX512 {
		im.s = kernelSet[float32]{mr: 16, nr: 16, direct: sgemmDirect, packed: sgemmPacked, pool: new(sync.Pool)}
		im.d = kernelSet[float64]{mr: 16, nr: 8, direct: dgemmDirect, packed: dgemmPacked, pool: new(sync.Pool)}
		return im
	}
	im.s = kernelSet[float32]{mr: 6, nr: 16, direct: sgemmDirectAVX2, packed: sgemmPackedAVX2, pool: new(sync.Pool)}
	im.d = kernelSet[float64]{mr: 6, nr: 8, direct: dgemmDirectAVX2, packed: dgemmPackedAVX2, pool: new(sync.Pool)}
	return im
}

// ISA is the instruction set of the kernels: ISAAVX512 or ISAAVX2.
func (im *Impl) ISA() string { return im.isa }

// Threads is the goroutines one large product may use.
func (im *Impl) Threads() int { return im.threads }

// Sgemm computes C = α·op(A)·op(B) + β·C for row-major float32 matrices, with the arguments
// of gonum's blas.Float32 Sgemm: op(A) is m×k, op(B) k×n, C m×n, and m, n, k ≥ 1. When β = 0
// C is not read. Arguments that gonum would refuse panic.
func (im *Impl) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	check(tA, tB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	run(im.s, im.workers(m, n, k), tA != blas.NoTrans, tB != blas.NoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// Dgemm is Sgemm for float64 matrices.
func (im *Impl) Dgemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	check(tA, tB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	run(im.d, im.workers(m, n, k), tA != blas.NoTrans, tB != blas.NoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// workers is the goroutines an m×n×k product uses: one for small products.
func (im *Impl) workers(m, n, k int) int {
	if im.threads > 1 && float64(m)*float64(n)*float64(k) >= float64(im.parallelWork) {
		return min(im.threads, (m+im.s.mr-1)/im.s.mr)
	}
	return 1
}

// check panics unless the arguments describe valid matrices with m, n, k ≥ 1: the kernels
// read and write through raw pointers, so nothing out of bounds may reach them.
func check(tA, tB blas.Transpose, m, n, k, lenA, lda, lenB, ldb, lenC, ldc int) {
	valid := func(t blas.Transpose) bool { return t == blas.NoTrans || t == blas.Trans || t == blas.ConjTrans }
	if !valid(tA) || !valid(tB) {
		panic("avxgemm: bad transpose flag")
	}
	if m < 1 || n < 1 || k < 1 {
		panic(fmt.Sprintf("avxgemm: m, n, k = %d, %d, %d: want each ≥ 1", m, n, k))
	}
	aRows, aCols := m, k
	if tA != blas.NoTrans {
		aRows, aCols = k, m
	}
	bRows, bCols := k, n
	if tB != blas.NoTrans {
		bRows, bCols = n, k
	}
	if lda < aCols || ldb < bCols || ldc < n {
		panic(fmt.Sprintf("avxgemm: strides %d, %d, %d below the rows' lengths %d, %d, %d", lda, ldb, ldc, aCols, bCols, n))
	}
	if !fits(lenA, aRows, aCols, lda) || !fits(lenB, bRows, bCols, ldb) || !fits(lenC, m, n, ldc) {
		panic("avxgemm: a matrix is shorter than its shape and stride")
	}
}

// fits reports whether length ≥ (rows−1)·ld + cols for rows, cols ≥ 1, without computing the
// product, which wraps around int for huge strides (and a wrapped check would let the kernels
// address rows far outside the slice).
func fits(length, rows, cols, ld int) bool {
	if length < cols {
		return false
	}
	return rows == 1 || ld <= (length-cols)/(rows-1)
}

// run is the product, by blocks of ncMax columns and kcMax values of k: each block of B is
// packed into panels of nr columns (zero-padded), then every block of mr rows of A is multiplied
// with every panel by one kernel call.
func run[T float](ks kernelSet[T], workers int, tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	nr := ks.nr
	panelsMax := (min(n, ncMax) + nr - 1) / nr
	bp := getBuf[T](ks.pool, min(k, kcMax)*panelsMax*nr)
	defer ks.pool.Put(bp)
	blocks := (m + ks.mr - 1) / ks.mr
	for jc := 0; jc < n; jc += ncMax {
		ncur := min(ncMax, n-jc)
		panels := (ncur + nr - 1) / nr
		for pc := 0; pc < k; pc += kcMax {
			kcur := min(kcMax, k-pc)
			packB(*bp, b, ldb, tB, pc, kcur, jc, ncur, nr)
			mode, bet := 1, beta
			if pc > 0 {
				bet = 1
			} else if beta == 0 {
				mode = 0
			}
			blk := tileBlock[T]{ks: ks, tA: tA, a: a, lda: lda, bp: *bp, c: c, ldc: ldc, m: m, n: n,
				pc: pc, kcur: kcur, jc: jc, panels: panels, alpha: alpha, beta: bet, mode: mode}
			if workers == 1 {
				blk.rows(0, blocks)
				continue
			}
			var wg sync.WaitGroup
			for w := range workers {
				b0, b1 := w*blocks/workers, (w+1)*blocks/workers
				wg.Go(func() { blk.rows(b0, b1) })
			}
			wg.Wait()
		}
	}
}

// tileBlock is one (columns, k) block of a product, ready for its rows to be computed.
type tileBlock[T float] struct {
	ks           kernelSet[T]
	tA           bool
	a            []T
	lda          int
	bp           []T
	c            []T
	ldc, m, n    int
	pc, kcur, jc int
	panels       int
	alpha, beta  T
	mode         int
}

// rows computes the blocks of mr rows b0 … b1−1 of the block against all its panels.
func (t *tileBlock[T]) rows(b0, b1 int) {
	var edge *[]T
	nr := t.ks.nr
	for ib := b0; ib < b1; ib++ {
		mr := t.ks.mr
		i0 := ib * mr
		rows := min(mr, t.m-i0)
		var (
			ap     *T
			stride int
			direct bool
		)
		switch {
		case rows == mr && !t.tA:
			ap, stride, direct = &t.a[i0*t.lda+t.pc], t.lda, true
		case rows == mr:
			ap, stride = &t.a[t.pc*t.lda+i0], t.lda
		default:
			if edge == nil {
				edge = getBuf[T](t.ks.pool, t.kcur*mr)
				defer t.ks.pool.Put(edge)
			}
			packA(*edge, t.a, t.lda, t.tA, i0, rows, mr, t.pc, t.kcur)
			ap, stride = &(*edge)[0], mr
		}
		for p := range t.panels {
			j0 := t.jc + p*nr
			cols := min(nr, t.n-j0)
			mask := uint64(1)<<cols - 1
			bpp := &t.bp[p*t.kcur*nr]
			cp := &t.c[i0*t.ldc+j0]
			if direct {
				t.ks.direct(t.kcur, ap, stride, bpp, cp, t.ldc, rows, mask, t.alpha, t.beta, t.mode)
			} else {
				t.ks.packed(t.kcur, ap, stride, bpp, cp, t.ldc, rows, mask, t.alpha, t.beta, t.mode)
			}
		}
	}
}

// packB writes rows pc … pc+kcur−1 and columns jc … jc+ncur−1 of op(B) into panels of nr
// columns: panel p holds element (kk, jj) at dst[p·kcur·nr + kk·nr + jj], zero past column n.
func packB[T float](dst, b []T, ldb int, tB bool, pc, kcur, jc, ncur, nr int) {
	for p := range (ncur + nr - 1) / nr {
		j0 := jc + p*nr
		cols := min(nr, jc+ncur-j0)
		panel := dst[p*kcur*nr : (p+1)*kcur*nr]
		if cols < nr {
			clear(panel)
		}
		if !tB {
			for kk := range kcur {
				copy(panel[kk*nr:kk*nr+cols], b[(pc+kk)*ldb+j0:])
			}
			continue
		}
		for jj := range cols {
			row := b[(j0+jj)*ldb+pc : (j0+jj)*ldb+pc+kcur]
			for kk, v := range row {
				panel[kk*nr+jj] = v
			}
		}
	}
}

// packA writes rows i0 … i0+rows−1 of op(A), columns pc … pc+kcur−1, as dst[kk·mr + ii],
// zero past the last row.
func packA[T float](dst, a []T, lda int, tA bool, i0, rows, mr, pc, kcur int) {
	dst = dst[:kcur*mr]
	clear(dst)
	if tA {
		for kk := range kcur {
			copy(dst[kk*mr:kk*mr+rows], a[(pc+kk)*lda+i0:])
		}
		return
	}
	for ii := range rows {
		row := a[(i0+ii)*lda+pc : (i0+ii)*lda+pc+kcur]
		for kk, v := range row {
			dst[kk*mr+ii] = v
		}
	}
}

// getBuf takes a buffer of at least n elements from pool.
func getBuf[T float](pool *sync.Pool, n int) *[]T {
	if v, ok := pool.Get().(*[]T); ok && cap(*v) >= n {
		*v = (*v)[:n]
		return v
	}
	s := make([]T, n)
	return &s
}
