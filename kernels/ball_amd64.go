//go:build !noasm && !purego

package kernels

import "unsafe"

// radiiFast writes, for as many whole groups of eight blocks j, j+1, … as out
// holds (two words per block), philoxAVX2's words with each group's four
// m₁+1 replaced by the Box–Muller radii r = √(−2 ln u₁) (radiusAVX2), lanes in
// block order 4i, 4i+2, 4i+1, 4i+3 of the group, and returns the number of
// blocks written.
func radiiFast(p *avxParams, out []float64, j uint32) int {
	pairs := len(out) / 16
	if p == nil || pairs == 0 {
		return 0
	}
	d := unsafe.SliceData(out)
	philoxAVX2(p, (*uint64)(unsafe.Pointer(d)), pairs, j)
	radiusAVX2(p, d, 2*pairs)
	return 8 * pairs
}
