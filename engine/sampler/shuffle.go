package sampler

import (
	"fmt"
	"math/rand/v2"
	"sync"
)

// Shuffle is the fixed-size shuffling sampler: each epoch a fresh uniform
// permutation of [0, N) cut into M = ⌊N/B⌋ batches of exactly B indices,
// batch s being positions [s·B, (s+1)·B) of the permutation. The N − M·B
// examples at the end of the permutation sit out that epoch, so each example
// is used at most once per epoch. Within a batch the indices are in
// permutation order.
//
// Accounting (docs/accounting.md): no amplification is proven for
// fixed-size shuffling; each epoch is one Gaussian mechanism
// (the deterministic-batches case of Chua et al. 2024).
type Shuffle struct {
	n, b, m int
	seed    uint64
	key     *[32]byte // nil: PCG streams from seed; else ChaCha8 streams (Secure)

	mu         sync.Mutex
	cacheEpoch int     // epoch whose permutation is in perm; -1 when none
	perm       []int32 // permutation of [0, n) for cacheEpoch
}

// NewShuffle returns the shuffling sampler for n examples and batch size
// batchSize. It needs 1 ≤ n ≤ MaxDatasetSize and 1 ≤ batchSize ≤ n. It keeps
// the permutation of the latest epoch used (4n bytes).
func NewShuffle(n, batchSize int, seed uint64) (Sampler, error) {
	if err := checkN(n, MaxDatasetSize); err != nil {
		return nil, fmt.Errorf("shuffle: %w", err)
	}
	if batchSize < 1 || batchSize > n {
		return nil, fmt.Errorf("shuffle: %w: batch size %d, must be in [1, n=%d]", ErrInvalid, batchSize, n)
	}
	return &Shuffle{n: n, b: batchSize, m: ShuffleSteps(n, batchSize), seed: seed, cacheEpoch: -1}, nil
}

// Name returns "shuffle".
func (s *Shuffle) Name() string { return NameShuffle }

// DatasetSize returns N.
func (s *Shuffle) DatasetSize() int { return s.n }

// StepsPerEpoch returns M = ⌊N/B⌋.
func (s *Shuffle) StepsPerEpoch() int { return s.m }

// ExpectedBatchSize returns B (every batch has exactly B examples).
func (s *Shuffle) ExpectedBatchSize() float64 { return float64(s.b) }

// MaxBatchSize returns B.
func (s *Shuffle) MaxBatchSize() int { return s.b }

// SampleRate returns B/N (informational: shuffling is not subsampling).
func (s *Shuffle) SampleRate() float64 { return float64(s.b) / float64(s.n) }

// Batch returns the B indices of step `step` of epoch `epoch`. Building an
// epoch's permutation costs O(N) once; other steps of the same epoch cost
// O(B).
func (s *Shuffle) Batch(epoch, step int, dst []int) []int {
	checkStep(NameShuffle, epoch, step, s.m)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cacheEpoch != epoch {
		s.perm = permutation(s.n, newSource(s.seed, s.key, domainShuffle, epoch, 0), s.perm)
		s.cacheEpoch = epoch
	}
	dst = dst[:0]
	for _, v := range s.perm[step*s.b : (step+1)*s.b] {
		dst = append(dst, int(v))
	}
	return dst
}

// permutation returns a uniform permutation of [0, n) drawn from src (the
// epoch's stream), by a Fisher–Yates shuffle of the identity (reusing buf when
// large enough).
func permutation(n int, src rand.Source, buf []int32) []int32 {
	buf = grow(buf, n)
	for i := range buf {
		buf[i] = int32(i)
	}
	r := rand.New(src)
	for i := n - 1; i > 0; i-- {
		j := r.Uint32N(uint32(i + 1))
		buf[i], buf[j] = buf[j], buf[i]
	}
	return buf
}
