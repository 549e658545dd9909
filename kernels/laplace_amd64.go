//go:build !noasm && !purego

package kernels

import "unsafe"

// laplaceAVX2 replaces, in place, each group of eight words written by
// philoxAVX2 (four m₁+1, then four m₂, lanes in block order j, j+2, j+1, j+3)
// with the eight unit Laplace values of its four blocks in stream order (see
// NoiseKey.Laplace), with the same operations, in the same order and with the
// same FMAs as laplaceUnit, so bit for bit the pure-Go values.
//
//go:noescape
func laplaceAVX2(p *avxParams, buf *float64, groups int)

// laplacesFast writes the unit Laplace values of blocks j, j+1, … to out (two
// per block) with the AVX2 kernels, for as many whole groups of eight blocks
// as out holds, and returns the number of blocks written.
func laplacesFast(p *avxParams, out []float64, j uint32) int {
	pairs := len(out) / 16
	if p == nil || pairs == 0 {
		return 0
	}
	d := unsafe.SliceData(out)
	philoxAVX2(p, (*uint64)(unsafe.Pointer(d)), pairs, j)
	laplaceAVX2(p, d, 2*pairs)
	return 8 * pairs
}
