//go:build !noasm && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"testing"
	"unsafe"
)

// slotNames lists the avxParams slots in the order of the slot constants.
var slotNames = []string{"CTRINIT", "FOUR", "EIGHT", "M0", "M1", "R0X0", "R0X1", "R0C3",
	"K1A", "K1B", "K2A", "K2B", "K3A", "K3B", "K4A", "K4B", "K5A", "K5B", "K6A", "K6B", "K7A", "K7B", "K8A", "K8B", "K9A", "K9B",
	"MASK32", "ONE64", "TWO64", "EXP52", "EXP84", "P2M53", "FRACMASK", "SQRT2ADJ", "BIT52", "EXP3FF", "K1023",
	"TWOF", "HALF", "MINUS2", "MHALF", "L1", "L2", "L3", "L4", "L5", "L6", "L7", "LN2HI", "LN2LO",
	"MASK50", "BIT50", "PI4U50", "S0", "S1", "S2", "S3", "S4", "S5", "C0", "C1", "C2", "C3", "C4", "C5"}

// The #define offsets in the assembly must be the Go slot indices × 32.
func TestAVXSlotOffsets(t *testing.T) {
	src, err := os.ReadFile("gauss_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^#define ([A-Z0-9]+) (\d+)$`).FindAllStringSubmatch(string(src), -1) {
		v, _ := strconv.Atoi(m[2])
		defs[m[1]] = v
	}
	if len(slotNames) != numSlots || len(defs) != numSlots {
		t.Fatalf("%d names, %d slots, %d #defines", len(slotNames), numSlots, len(defs))
	}
	for i, name := range slotNames {
		if off, ok := defs[name]; !ok || off != 32*i {
			t.Errorf("%s: #define %d (present %v), want %d", name, off, ok, 32*i)
		}
	}
	// Spot checks that the Go constants are in the same order.
	for _, c := range []struct {
		name string
		slot int
	}{{"EIGHT", slotEIGHT}, {"K9B", slotK9B}, {"MASK32", slotMASK32}, {"LN2LO", slotLN2LO}, {"PI4U50", slotPI4U50}, {"C5", slotC5}} {
		if defs[c.name] != 32*c.slot {
			t.Errorf("slot%s = %d, #define %d", c.name, c.slot, defs[c.name])
		}
	}
}

// The AVX2 kernels equal the pure-Go block-by-block path bit for bit, for
// many keys, at the start and the very end of the counter range.
func TestAVXMatchesGo(t *testing.T) {
	checkAVXMatchesGo(t, "normalsAVX2", normalsAVX2, func(w0, w1, w2, w3 uint32) (float64, float64) {
		return boxMuller(w0, w1, w2, w3)
	}, 61)
}

// checkAVXMatchesGo checks that the AVX2 kernel fast (64 blocks from block j
// into out) gives, bit for bit, the two values ref makes of each Philox block,
// for 50 keys, at the start and the very end of the counter range.
func checkAVXMatchesGo(t *testing.T, name string, fast func(*avxParams, []float64, uint32) int, ref func(w0, w1, w2, w3 uint32) (float64, float64), seed uint64) {
	t.Helper()
	if !useAVX2 {
		t.Skip("CPU without AVX2 and FMA")
	}
	rng := rand.New(rand.NewPCG(seed, seed+1))
	for k := range 50 {
		key := NoiseKey{Seed: rng.Uint64(), Step: rng.Uint64(), Tensor: rng.Uint32()}
		if k == 0 {
			key = NoiseKey{}
		}
		s := key.stream()
		p := newAVXParams(&s)
		for _, j := range []uint32{0, rng.Uint32() &^ 7, ^uint32(0) - 63} {
			out := make([]float64, 128)
			if got := fast(p, out, j); got != 64 {
				t.Fatalf("%s did %d blocks, want 64", name, got)
			}
			for i := range 64 {
				x0, x1 := ref(s.block(j + uint32(i)))
				if math.Float64bits(x0) != math.Float64bits(out[2*i]) || math.Float64bits(x1) != math.Float64bits(out[2*i+1]) {
					t.Fatalf("%s: key %+v block %d: AVX2 (%v, %v), Go (%v, %v)", name, key, j+uint32(i), out[2*i], out[2*i+1], x0, x1)
				}
			}
		}
	}
}

// The Box–Muller passes at the extremes of their inputs: v = m₁+1 ∈ {1, 2,
// 2⁵², 2⁵³, …} (u₁ from 2⁻⁵³ to 1) and m₂ at and next to every octant
// boundary.
func TestAVXBoxMullerEdges(t *testing.T) {
	if !useAVX2 {
		t.Skip("CPU without AVX2 and FMA")
	}
	vs := []uint64{1, 2, 3, 1 << 20, 1<<32 - 1, 1 << 32, 1<<32 + 1, 1 << 52, 1<<52 + 1, 1<<53 - 1, 1 << 53, 0x5a827999fcef3 << 1}
	var ms []uint64
	for o := uint64(0); o < 8; o++ {
		ms = append(ms, o<<50, o<<50+1, (o+1)<<50-1, o<<50+1<<49)
	}
	var s philoxStream
	p := newAVXParams(&s)
	var vv, mm []uint64
	for _, v := range vs {
		for _, m := range ms {
			vv, mm = append(vv, v), append(mm, m)
		}
	}
	for len(vv)%4 != 0 {
		vv, mm = append(vv, 1), append(mm, 0)
	}
	groups := len(vv) / 4
	buf := make([]uint64, 8*groups)
	for g := range groups {
		copy(buf[8*g:], vv[4*g:4*g+4])
		copy(buf[8*g+4:], mm[4*g:4*g+4])
	}
	f := unsafe.Slice((*float64)(unsafe.Pointer(&buf[0])), len(buf))
	radiusAVX2(p, &f[0], groups)
	rotateAVX2(p, &f[0], groups)
	lane := [4]int{0, 2, 1, 3} // output pair q comes from lane lane[q]
	for g := range groups {
		for q := range 4 {
			i := 4*g + lane[q]
			r := math.Sqrt(-2 * logUnit(float64(vv[i])*0x1p-53))
			sin, cos := sinCos2Pi(mm[i])
			z0, z1 := r*cos, r*sin
			if math.Float64bits(z0) != math.Float64bits(f[8*g+2*q]) || math.Float64bits(z1) != math.Float64bits(f[8*g+2*q+1]) {
				t.Errorf("v=%d m2=%d: AVX2 (%v, %v), Go (%v, %v)", vv[i], mm[i], f[8*g+2*q], f[8*g+2*q+1], z0, z1)
			}
		}
	}
}
