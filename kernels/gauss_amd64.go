//go:build !noasm && !purego

package kernels

import (
	"math"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The AVX2 noise kernels work in three passes over an L1-resident buffer of
// 512 values. The first evaluates Philox blocks four at a time, one per
// 64-bit lane (32-bit words in the low halves, so VPMULUDQ gives the full
// 32×32→64 products), two groups interleaved. The second (radius) and third
// (rotation) apply Box–Muller to four lanes in float64 with the same
// operations, in the same order and with the same FMAs as boxMuller, so the
// output equals the pure-Go path bit for bit (the tests check this); short
// loops with independent iterations let the core overlap the long latencies
// of division, square root and the polynomials. Small kernels then add the
// buffer to float32 or float64 tensors.

// philoxAVX2 evaluates the Philox blocks j, j+1, …, j+8·pairs−1 and writes,
// for each group of four blocks, their four m₁+1 and four m₂ (see NoiseKey)
// to dst, 16·pairs words in all. p holds the broadcast constants and round
// keys.
//
//go:noescape
func philoxAVX2(p *avxParams, dst *uint64, pairs int, j uint32)

// radiusAVX2 replaces, in place, the four m₁+1 of each group of eight words
// written by philoxAVX2 with the Box–Muller radii r = √(−2 ln u₁).
//
//go:noescape
func radiusAVX2(p *avxParams, buf *float64, groups int)

// rotateAVX2 replaces, in place, each group of four radii and four m₂ with
// the eight normals of its four blocks in stream order.
//
//go:noescape
func rotateAVX2(p *avxParams, buf *float64, groups int)

// useAVX2 and useAVX512 are set once at package initialization from the
// CPU's features (golang.org/x/sys/cpu also checks that the OS saves the
// vector registers) and never change afterwards.
var (
	useAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasFMA
	useAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ
)

// bestKernel is the fastest kernel for the normals on this CPU.
var bestKernel = func() kernel {
	switch {
	case useAVX512:
		return kernelAVX512
	case useAVX2:
		return kernelAVX2
	}
	return kernelGo
}()

// kernelSupported reports whether k runs on this CPU.
func kernelSupported(k kernel) bool {
	switch k {
	case kernelAVX512:
		return useAVX512
	case kernelAVX2:
		return useAVX2
	}
	return k == kernelGo
}

// useKernel builds the operands of kernel k for a window of the given
// number of blocks of g's stream.
func (g *generator) useKernel(k kernel, blocks uint64) {
	g.k = k
	switch k {
	case kernelAVX512:
		g.q.setStream(&g.s)
	case kernelAVX2:
		g.p = fastParams(&g.s, blocks)
	}
}

// Slots of avxParams, in units of one 32-byte vector; the #defines in
// gauss_amd64.s are these indices times 32 (a test checks them).
const (
	slotCTRINIT = iota
	slotFOUR
	slotEIGHT
	slotM0
	slotM1
	slotR0X0
	slotR0X1
	slotR0C3
	slotK1A
	slotK1B
	slotK2A
	slotK2B
	slotK3A
	slotK3B
	slotK4A
	slotK4B
	slotK5A
	slotK5B
	slotK6A
	slotK6B
	slotK7A
	slotK7B
	slotK8A
	slotK8B
	slotK9A
	slotK9B
	slotMASK32
	slotONE64
	slotTWO64
	slotEXP52
	slotEXP84
	slotP2M53
	slotFRACMASK
	slotSQRT2ADJ
	slotBIT52
	slotEXP3FF
	slotK1023
	slotTWOF
	slotHALF
	slotMINUS2
	slotMHALF
	slotL1
	slotL2
	slotL3
	slotL4
	slotL5
	slotL6
	slotL7
	slotLN2HI
	slotLN2LO
	slotMASK50
	slotBIT50
	slotPI4U50
	slotS0
	slotS1
	slotS2
	slotS3
	slotS4
	slotS5
	slotC0
	slotC1
	slotC2
	slotC3
	slotC4
	slotC5
	numSlots
)

// avxParams holds every operand of the AVX2 kernel broadcast to four 64-bit
// lanes: the Philox multipliers, the key schedule and hoisted first round of
// one stream, and the Box–Muller constants.
type avxParams [numSlots][4]uint64

func bcast(v uint64) [4]uint64   { return [4]uint64{v, v, v, v} }
func bcastF(v float64) [4]uint64 { return bcast(math.Float64bits(v)) }

func newAVXParams(s *philoxStream) *avxParams {
	p := new(avxParams)
	p[slotCTRINIT] = [4]uint64{0, 2, 1, 3} // lane order that makes the output interleave lane-local
	p[slotFOUR] = bcast(4)
	p[slotEIGHT] = bcast(8)
	p[slotM0] = bcast(philoxM0)
	p[slotM1] = bcast(philoxM1)
	p[slotR0X0] = bcast(uint64(s.r0x0))
	p[slotR0X1] = bcast(uint64(s.r0x1))
	p[slotR0C3] = bcast(uint64(s.r0c3))
	for r := 1; r < 10; r++ {
		p[slotK1A+2*(r-1)] = bcast(uint64(s.k[r][0]))
		p[slotK1B+2*(r-1)] = bcast(uint64(s.k[r][1]))
	}
	p[slotMASK32] = bcast(1<<32 - 1)
	p[slotONE64] = bcast(1)
	p[slotTWO64] = bcast(2)
	p[slotEXP52] = bcastF(1 << 52)
	p[slotEXP84] = bcastF(1 << 84)
	p[slotP2M53] = bcastF(0x1p-53)
	p[slotFRACMASK] = bcast(1<<52 - 1)
	p[slotSQRT2ADJ] = bcast(0x95f619980c433)
	p[slotBIT52] = bcast(1 << 52)
	p[slotEXP3FF] = bcastF(1)
	p[slotK1023] = bcastF(1<<52 + 1023)
	p[slotTWOF] = bcastF(2)
	p[slotHALF] = bcastF(0.5)
	p[slotMINUS2] = bcastF(-2)
	p[slotMHALF] = bcastF(-0.5)
	for i, v := range [...]float64{logL1, logL2, logL3, logL4, logL5, logL6, logL7, ln2Hi, ln2Lo} {
		p[slotL1+i] = bcastF(v)
	}
	p[slotMASK50] = bcast(1<<50 - 1)
	p[slotBIT50] = bcast(1 << 50)
	p[slotPI4U50] = bcastF(pi4Ulp50)
	for i, v := range [...]float64{sinS0, sinS1, sinS2, sinS3, sinS4, sinS5, cosC0, cosC1, cosC2, cosC3, cosC4, cosC5} {
		p[slotS0+i] = bcastF(v)
	}
	return p
}

// fastParams returns the AVX2 operands for s, or nil where the kernel cannot
// run or would not pay for building them.
func fastParams(s *philoxStream, blocks uint64) *avxParams {
	if !useAVX2 || blocks < 4*avxMinGroups {
		return nil
	}
	return newAVXParams(s)
}

// avxMinGroups is the fewest 4-block groups worth building avxParams for.
const avxMinGroups = 4

// normalsFast writes the normals of blocks j, j+1, … to out (two per block)
// with g's assembly kernel and returns the number of blocks written, which
// may pass len(out)/2 into out's capacity (normals512).
func normalsFast(g *generator, out []float64, j uint32) int {
	if g.k == kernelAVX512 {
		return normals512(&g.q, out, j)
	}
	return normalsAVX2(g.p, out, j)
}

// normalsAVX2 writes the normals of blocks j, j+1, … to out (two per block)
// with the AVX2 kernels, for as many whole groups of eight blocks as out
// holds, and returns the number of blocks written.
func normalsAVX2(p *avxParams, out []float64, j uint32) int {
	pairs := len(out) / 16
	if p == nil || pairs == 0 {
		return 0
	}
	d := unsafe.SliceData(out)
	philoxAVX2(p, (*uint64)(unsafe.Pointer(d)), pairs, j)
	radiusAVX2(p, d, 2*pairs)
	rotateAVX2(p, d, 2*pairs)
	return 8 * pairs
}

// axpyF64AVX2 sets dst[i] = FMA(std, z[i], dst[i]) for i < n (n % 4 == 0).
//
//go:noescape
func axpyF64AVX2(dst *float64, z *float64, n int, std float64)

// axpyF32AVX2 sets dst[i] = float32(FMA(std, z[i], float64(dst[i]))) for
// i < n (n % 4 == 0).
//
//go:noescape
func axpyF32AVX2(dst *float32, z *float64, n int, std float64)

// cvtF32AVX2 sets dst[i] = float32(z[i]) for i < n (n % 4 == 0).
//
//go:noescape
func cvtF32AVX2(dst *float32, z *float64, n int)

// applyFast does the first elements of apply with the AVX-512 or AVX2
// instructions of kernel k and returns how many it did. (Go's scalar
// CVTSS2SD and CVTSD2SS merge into their destination register, which chains
// the iterations of the float32 loop; the vector conversions do not.)
func applyFast[T Float](k kernel, d []T, z []float64, std float64, fill bool) int {
	n := len(d)
	if k == kernelAVX512 && n > 0 {
		zp := unsafe.SliceData(z)
		switch {
		case is32[T]() && fill:
			cvtF32AVX512(unsafe.SliceData(asF32(d)), zp, n)
		case is32[T]():
			axpyF32AVX512(unsafe.SliceData(asF32(d)), zp, n, std)
		case fill:
			copy(asF64(d), z)
		default:
			axpyF64AVX512(unsafe.SliceData(asF64(d)), zp, n, std)
		}
		return n
	}
	n &^= 3
	if k != kernelAVX2 || n == 0 {
		return 0
	}
	zp := unsafe.SliceData(z)
	switch {
	case is32[T]() && fill:
		cvtF32AVX2(unsafe.SliceData(asF32(d)), zp, n)
	case is32[T]():
		axpyF32AVX2(unsafe.SliceData(asF32(d)), zp, n, std)
	case fill:
		copy(asF64(d), z)
		return len(d)
	default:
		axpyF64AVX2(unsafe.SliceData(asF64(d)), zp, n, std)
	}
	return n
}
