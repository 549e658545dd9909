// Package sampler chooses which dataset examples each DP-SGD step uses
// (docs/design.md, "One step", step 1) and cuts the chosen logical batch
// into physical batches of a fixed shape with a padding mask.
//
// Four samplers are provided, matching the samplers table of docs/accounting.md:
//
//   - "shuffle" (NewShuffle): a fresh uniform permutation per epoch cut into
//     ⌊N/B⌋ batches of exactly B examples; the N mod B leftover examples sit
//     out that epoch.
//   - "poisson" (NewPoisson): every example independently with probability q;
//     round(1/q) steps per epoch.
//   - "poisson-truncated" (NewTruncatedPoisson): Poisson, then, when more than
//     maxBatch examples were drawn, a uniform subset of exactly maxBatch of them.
//   - "allocation" (NewAllocation): random allocation (balls in bins): each
//     epoch every example goes to one uniform round of the M rounds.
//
// Every batch is a pure function of (seed, epoch, step): the random stream of a
// batch (or of an epoch, for the two samplers that build an epoch at once) is a
// PCG generator (math/rand/v2) keyed by a hash of the seed, the sampler family,
// the epoch and the step. A sampler's whole state is therefore its constructor
// arguments; calls may come in any order and give the same batches. The
// shuffle and allocation samplers cache the epoch they built last (O(N)
// memory); that cache is never part of the state. All samplers are safe for
// concurrent use.
//
// Secure mode (Secure): the same four samplers, with the same laws, whose
// streams come from ChaCha8 (a CSPRNG) keyed by SHA-256 of a 256-bit key and
// the stream's (family, epoch, step) instead of from PCG keyed by the 64-bit
// seed, so that nobody without the key can predict or reconstruct the batches.
// Batches remain pure functions of (key, epoch, step); SecureKey returns the
// key for a checkpoint, NewSecureKey draws one from the operating system.
//
// The privacy guarantee that may be claimed for each sampler is the
// accountant's business (docs/accounting.md, "Which statement for which sampler");
// this package only guarantees that the batches have exactly the law that each
// sampler's documentation states.
package sampler

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dpsgd/dpsgd/internal/seedmix"
)

// Sampler picks the dataset indices of every logical step of every epoch.
type Sampler interface {
	// Name is "shuffle", "poisson", "poisson-truncated" or "allocation".
	Name() string
	// DatasetSize is N, the number of examples indices are drawn from.
	DatasetSize() int
	// StepsPerEpoch is M, the number of logical steps in one epoch.
	StepsPerEpoch() int
	// ExpectedBatchSize is the public normalizer the engine divides the
	// noisy gradient sum by: B for shuffle, N·q for both Poisson kinds,
	// N/M for allocation. It never depends on the data or on the draw.
	ExpectedBatchSize() float64
	// MaxBatchSize is the largest logical batch Batch can return: B for
	// shuffle, min(maxBatch, N) for truncated Poisson, N for allocation and
	// 0 (unbounded, that is up to N) for Poisson.
	MaxBatchSize() int
	// SampleRate is q for the Poisson kinds, 1/M for allocation and B/N
	// for shuffle (informational only for shuffle).
	SampleRate() float64
	// Batch appends to dst[:0] the dataset indices of logical step `step`
	// (0 ≤ step < M) of epoch `epoch` (0-based, epoch ≥ 0) and returns it.
	// The result is deterministic in (seed, epoch, step) and holds distinct
	// indices in [0, N). It may be empty for the Poisson kinds and for
	// allocation. Out-of-range epoch or step is a programming error and
	// panics.
	Batch(epoch, step int, dst []int) []int
}

// ErrInvalid is wrapped by every error a constructor returns for an invalid
// argument; use errors.Is(err, ErrInvalid).
var ErrInvalid = errors.New("sampler: invalid argument")

// MaxDatasetSize is the largest N the shuffle and allocation samplers accept:
// their per-epoch caches store indices as 32-bit integers.
const MaxDatasetSize = math.MaxInt32

// MinSampleRate is the smallest q the Poisson samplers accept, so that
// StepsPerEpoch = round(1/q) is an exactly representable integer.
const MinSampleRate = 1e-12

// Names of the samplers, as returned by Sampler.Name.
const (
	NameShuffle          = "shuffle"
	NamePoisson          = "poisson"
	NameTruncatedPoisson = "poisson-truncated"
	NameAllocation       = "allocation"
)

// Stream domains: one per family of random streams, so that different
// samplers built from the same seed draw from unrelated streams. The
// truncated Poisson sampler deliberately shares the Poisson domain: with the
// same seed its batch is a subset of the Poisson batch, and equal to it
// whenever no truncation happens.
const (
	domainShuffle    uint64 = 0x73687566666c65 // "shuffle"
	domainPoisson    uint64 = 0x706f6973736f6e // "poisson"
	domainAllocation uint64 = 0x616c6c6f63     // "alloc"
)

// streamKey returns the PCG seed of the stream (seed, domain, epoch, step).
// Each word is absorbed through the bijection seedmix.Finalize (the splitmix64
// finalizer), so for a fixed prefix distinct words give distinct keys.
func streamKey(seed, domain uint64, epoch, step int) (uint64, uint64) {
	h := seedmix.Next(seed)
	h = seedmix.Finalize(h ^ domain)
	h = seedmix.Finalize(h ^ uint64(epoch))
	h = seedmix.Finalize(h ^ uint64(step) ^ seedmix.Golden)
	return h, seedmix.Next(h)
}

// newStream returns the generator of the stream (seed, domain, epoch, step).
func newStream(seed, domain uint64, epoch, step int) *rand.Rand {
	return rand.New(rand.NewPCG(streamKey(seed, domain, epoch, step)))
}

// checkStep panics when (epoch, step) is outside [0, ∞) × [0, m).
func checkStep(name string, epoch, step, m int) {
	if epoch < 0 {
		panic(fmt.Sprintf("sampler: %s: epoch %d is negative", name, epoch))
	}
	if step < 0 || step >= m {
		panic(fmt.Sprintf("sampler: %s: step %d out of range [0, %d)", name, step, m))
	}
}

func checkN(n int, max int) error {
	if n < 1 || n > max {
		return fmt.Errorf("%w: dataset size n = %d, must be in [1, %d]", ErrInvalid, n, max)
	}
	return nil
}

func checkQ(q float64) error {
	if !(q >= MinSampleRate && q <= 1) { // also rejects NaN
		return fmt.Errorf("%w: sample rate q = %v, must be in [%g, 1]", ErrInvalid, q, MinSampleRate)
	}
	return nil
}

// Chunks cuts a logical batch into physical batches of exactly phys rows.
//
// It returns the number of physical batches k = max(1, ⌈len(idx)/phys⌉), and
// rows and mask resliced (grown only when their capacity is short) to k·phys
// entries: for physical batch j, rows[j*phys:(j+1)*phys] holds the indices
// idx[j*phys:] in order and mask[j*phys:(j+1)*phys] holds 1 for a real row
// and 0 for a padding row. Padding rows, all at the end of the last physical
// batch, point at dataset index 0 and must be masked out. An empty logical
// batch gives one physical batch of padding only: the step still happens and
// its noise is still added.
//
// phys < 1 is a programming error and panics.
func Chunks(idx []int, phys int, rows []int, mask []float64) (rows2 []int, mask2 []float64, k int) {
	if phys < 1 {
		panic(fmt.Sprintf("sampler: Chunks: physical batch size %d < 1", phys))
	}
	k = (len(idx) + phys - 1) / phys
	if k == 0 {
		k = 1
	}
	total := k * phys
	rows = grow(rows, total)
	mask = grow(mask, total)
	copy(rows, idx)
	for i := range idx {
		mask[i] = 1
	}
	for i := len(idx); i < total; i++ {
		rows[i] = 0
		mask[i] = 0
	}
	return rows, mask, k
}

// grow returns s resliced to length n, reallocated when cap(s) < n.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// ShuffleSteps returns the steps per epoch of NewShuffle for n records and
// batch size b: ⌊n/b⌋ (the remainder of the permutation is dropped).
func ShuffleSteps(n, b int) int { return n / b }

// AllocationSteps returns the rounds per epoch the command gives random
// allocation for n records and expected batch size b: max(1, round(n/b)).
func AllocationSteps(n, b int) int { return max(1, int(math.Round(float64(n)/float64(b)))) }

// PoissonSteps returns the steps per epoch of Poisson sampling at rate q:
// round(1/q), at least 1.
func PoissonSteps(q float64) int { return max(1, int(math.Round(1/q))) }

// DefaultMaxBatch returns the batch cap of truncated Poisson sampling when
// none is given: the expected size plus ten standard deviations plus ten, at
// most n — far enough in the tail that the accountant's truncation term is
// negligible next to δ.
func DefaultMaxBatch(n int, q float64) int {
	nf := float64(n)
	return min(n, int(math.Ceil(nf*q+10*math.Sqrt(nf*q*(1-q))+10)))
}
