package kernels

import (
	"math/bits"
	"math/rand/v2"
	"testing"
)

// Known-answer vectors from Random123, file tests/kat_vectors of
// https://github.com/DEShawResearch/random123 (commit 9545ff6413f2, lines
// 24–29). Columns: CTR (4 words), KEY (2 words), EXPECTED (4 words). Line 1
// of the file explains the inputs: zeros, all ones, and hex digits of π.
var philoxKAT = []struct {
	rounds int
	ctr    [4]uint32
	key    [2]uint32
	want   [4]uint32
}{
	{7, [4]uint32{0, 0, 0, 0}, [2]uint32{0, 0}, [4]uint32{0x5f6fb709, 0x0d893f64, 0x4f121f81, 0x4f730a48}},
	{7, [4]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, [2]uint32{0xffffffff, 0xffffffff}, [4]uint32{0x5207ddc2, 0x45165e59, 0x4d8ee751, 0x8c52f662}},
	{7, [4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0}, [4]uint32{0x4dfccaba, 0x190a87f0, 0xc47362ba, 0xb6b5242a}},
	{10, [4]uint32{0, 0, 0, 0}, [2]uint32{0, 0}, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
	{10, [4]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, [2]uint32{0xffffffff, 0xffffffff}, [4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
	{10, [4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0}, [4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
}

func TestPhilox4x32KnownAnswers(t *testing.T) {
	for _, c := range philoxKAT {
		got := philoxRounds(c.ctr, c.key, c.rounds)
		if got != c.want {
			t.Errorf("philox4x32 %d ctr=%08x key=%08x: got %08x, want %08x", c.rounds, c.ctr, c.key, got, c.want)
		}
		if c.rounds == 10 {
			if got := Philox4x32(c.ctr, c.key); got != c.want {
				t.Errorf("Philox4x32 ctr=%08x key=%08x: got %08x, want %08x", c.ctr, c.key, got, c.want)
			}
		}
	}
}

// The unrolled stream evaluation (hoisted first round, precomputed key
// schedule) must equal the plain block function for every counter.
func TestPhiloxStreamMatchesBlockFunction(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	keys := []NoiseKey{
		{},
		{Seed: ^uint64(0), Step: ^uint64(0), Tensor: ^uint32(0)},
		{Seed: 0xa4093822299f31d0, Step: 0x0370734413198a2e, Tensor: 0x85a308d3},
	}
	for range 20 {
		keys = append(keys, NoiseKey{Seed: rng.Uint64(), Step: rng.Uint64(), Tensor: rng.Uint32()})
	}
	for _, k := range keys {
		s := k.stream()
		for _, j := range []uint32{0, 1, 2, 1 << 31, ^uint32(0) - 1, ^uint32(0), rng.Uint32(), rng.Uint32()} {
			x0, x1, x2, x3 := s.block(j)
			got := [4]uint32{x0, x1, x2, x3}
			want := Philox4x32([4]uint32{j, k.Tensor, uint32(k.Step), uint32(k.Step >> 32)}, [2]uint32{uint32(k.Seed), uint32(k.Seed >> 32)})
			if got != want {
				t.Fatalf("key %+v block %d: stream %08x, Philox4x32 %08x", k, j, got, want)
			}
			if b := k.Block(j); b != want {
				t.Fatalf("key %+v: Block(%d) = %08x, want %08x", k, j, b, want)
			}
		}
	}
}

// Philox is a bijection of the counter for a fixed key; as a weak check of
// the round wiring, no two of many consecutive counters may collide, and a
// one-bit change of the counter or key changes about half the output bits.
func TestPhiloxAvalanche(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	const trials = 4000
	total := 0
	for range trials {
		ctr := [4]uint32{rng.Uint32(), rng.Uint32(), rng.Uint32(), rng.Uint32()}
		key := [2]uint32{rng.Uint32(), rng.Uint32()}
		base := Philox4x32(ctr, key)
		bit := rng.IntN(192)
		c2, k2 := ctr, key
		if bit < 128 {
			c2[bit/32] ^= 1 << (bit % 32)
		} else {
			k2[(bit-128)/32] ^= 1 << (bit % 32)
		}
		out := Philox4x32(c2, k2)
		for w := range out {
			total += bits.OnesCount32(out[w] ^ base[w])
		}
	}
	// Each flip changes Binomial(128, 1/2) bits: mean 64, sd 5.66 per trial.
	mean := float64(total) / trials
	if sd := 5.66 / 63.2; mean < 64-5*sd || mean > 64+5*sd {
		t.Errorf("avalanche: mean %.3f changed bits, want 64 ± %.3f", mean, 5*sd)
	}
}
