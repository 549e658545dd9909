//go:build !noasm && !purego

package kernels

import (
	"math"
	"os"
	"regexp"
	"strconv"
	"testing"
)

// The #define offsets in laplace_amd64.s must be the Go slot indices × 32
// (slotNames lists the slots in order).
func TestLaplaceSlotOffsets(t *testing.T) {
	src, err := os.ReadFile("laplace_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	index := map[string]int{}
	for i, name := range slotNames {
		index[name] = i
	}
	defs := regexp.MustCompile(`(?m)^#define ([A-Z0-9]+) (\d+)$`).FindAllStringSubmatch(string(src), -1)
	if len(defs) < 19 {
		t.Fatalf("only %d #defines", len(defs))
	}
	for _, m := range defs {
		off, _ := strconv.Atoi(m[2])
		if i, ok := index[m[1]]; !ok || off != 32*i {
			t.Errorf("%s: #define %d, slot %d (known %v)", m[1], off, i, ok)
		}
	}
}

// The AVX2 Laplace kernel equals the pure-Go block-by-block path bit for bit,
// for many keys, at the start and the very end of the counter range.
func TestLaplaceAVXMatchesGo(t *testing.T) {
	if !useAVX2 {
		t.Skip("CPU without AVX2 and FMA")
	}
	checkAVXMatchesGo(t, "laplacesFast", laplacesFast, func(w0, w1, w2, w3 uint32) (float64, float64) {
		m1, m2 := mantissas(w0, w1, w2, w3)
		return laplaceUnit(m1), laplaceUnit(m2)
	}, 91)
	// The end points of the map, through the vector code: m₁ and m₂ are
	// not chosen here, so run the kernel on a hand-made buffer.
	ms := []uint64{0, 1 << 52, 1<<52 - 1, 1<<53 - 1, 1, 1<<53 - 2, 1 << 51, 12345}
	buf := make([]float64, 8)
	for g := 0; g+8 <= 2*len(ms); g += 8 {
		var words [8]uint64
		for l := range 4 {
			words[l] = ms[(g/2+l)%len(ms)] + 1 // v = m₁+1
			words[4+l] = ms[(g/2+l+3)%len(ms)] // m₂
		}
		for l, w := range words {
			buf[l] = math.Float64frombits(w)
		}
		s := NoiseKey{}.stream()
		laplaceAVX2(newAVXParams(&s), &buf[0], 1)
		lane := []int{0, 2, 1, 3} // block of each lane
		for l := range 4 {
			b := lane[l]
			if w0, w1 := laplaceUnit(words[l]-1), laplaceUnit(words[4+l]); math.Float64bits(buf[2*b]) != math.Float64bits(w0) || math.Float64bits(buf[2*b+1]) != math.Float64bits(w1) {
				t.Errorf("lane %d (m₁ %#x, m₂ %#x): AVX2 (%v, %v), Go (%v, %v)", l, words[l]-1, words[4+l], buf[2*b], buf[2*b+1], w0, w1)
			}
		}
	}
}
