// Package seedmix derives independent 64-bit seeds from one seed with SplitMix64 (Steele, Lea
// & Flood 2014; the finalizer is Stafford's variant 13). It is the one home of the seed mixing
// of the module: the engine's parameter and noise seeds, the samplers' stream keys, the
// federated and age-aware simulations' streams and the audit's run seeds all go through it.
// Its values must never change: every seeded run, checkpoint resume and reproducibility test
// depends on them bit for bit.
package seedmix

// Golden is SplitMix64's Weyl increment, 2⁶⁴/φ rounded to an odd integer.
const Golden uint64 = 0x9e3779b97f4a7c15

// Finalize is SplitMix64's output function: a bijection of uint64 with full avalanche.
// Finalize(0) = 0.
func Finalize(x uint64) uint64 {
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Next returns Finalize(x + Golden): the first output of a SplitMix64 generator whose state
// is x (and, applied to the state, each following one).
func Next(x uint64) uint64 { return Finalize(x + Golden) }

// Mix returns the seed of stream derived from seed: Finalize(seed + stream·Golden), the
// stream-th output (from 1) of a SplitMix64 generator whose state is seed. Mix(x, 1) =
// Next(x).
func Mix(seed, stream uint64) uint64 { return Finalize(seed + stream*Golden) }
