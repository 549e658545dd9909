//go:build !noasm && !purego

package kernels

import (
	"math"
	"testing"
)

// radiiFast gives the Box–Muller radii of boxMuller in the documented lanes.
func TestRadiiAVXMatchesGo(t *testing.T) {
	if !useAVX2 {
		t.Skip("CPU without AVX2 and FMA")
	}
	key := NoiseKey{Seed: 5, Step: 6, Tensor: 7}
	s := key.stream()
	p := newAVXParams(&s)
	out := make([]float64, 64)
	j := uint32(1 << 20)
	if got := radiiFast(p, out, j); got != 32 {
		t.Fatalf("radiiFast did %d blocks", got)
	}
	lane := []int{0, 2, 1, 3}
	for g := range 8 {
		for l := range 4 {
			m1, _ := mantissas(s.block(j + uint32(4*g+lane[l])))
			if r := boxMullerRadius(m1); math.Float64bits(out[8*g+l]) != math.Float64bits(r) {
				t.Fatalf("group %d lane %d: %v, Go %v", g, l, out[8*g+l], r)
			}
		}
	}
}
