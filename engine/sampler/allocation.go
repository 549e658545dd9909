package sampler

import (
	"fmt"
	"math/rand/v2"
	"sync"
)

// Allocation is the random-allocation (balls-in-bins) sampler: each epoch,
// every example is assigned to one uniform round in [0, M), independently of
// the others, and step s returns the examples of round s in increasing order.
// Each example is used exactly once per epoch; round sizes are Binomial(N,
// 1/M) (jointly multinomial) and may be zero.
//
// Accounting (docs/accounting.md, "Which statement for which sampler"): the
// Gaussian-pair bounds of van Dijk & Ertan (arXiv 2605.06259) and Ertan & van
// Dijk 2026 (package privacy/allocation) hold for this sampler, not for
// fixed-size shuffling.
type Allocation struct {
	n, m int
	seed uint64
	key  *[32]byte // nil: PCG streams from seed; else ChaCha8 streams (Secure)

	mu         sync.Mutex
	cacheEpoch int     // epoch whose assignment is cached; -1 when none
	order      []int32 // the n examples grouped by round, increasing within a round
	start      []int   // round s is order[start[s]:start[s+1]]; len m+1
}

// NewAllocation returns the random-allocation sampler for n examples and
// steps rounds per epoch. It needs 1 ≤ n ≤ MaxDatasetSize and 1 ≤ steps ≤ n.
// It keeps the assignment of the latest epoch used (4n + 8(steps+1) bytes).
func NewAllocation(n, steps int, seed uint64) (Sampler, error) {
	if err := checkN(n, MaxDatasetSize); err != nil {
		return nil, fmt.Errorf("allocation: %w", err)
	}
	if steps < 1 || steps > n {
		return nil, fmt.Errorf("allocation: %w: steps per epoch %d, must be in [1, n=%d]", ErrInvalid, steps, n)
	}
	return &Allocation{n: n, m: steps, seed: seed, cacheEpoch: -1}, nil
}

// Name returns "allocation".
func (a *Allocation) Name() string { return NameAllocation }

// DatasetSize returns N.
func (a *Allocation) DatasetSize() int { return a.n }

// StepsPerEpoch returns M.
func (a *Allocation) StepsPerEpoch() int { return a.m }

// ExpectedBatchSize returns N/M.
func (a *Allocation) ExpectedBatchSize() float64 { return float64(a.n) / float64(a.m) }

// MaxBatchSize returns N: one round may receive every example.
func (a *Allocation) MaxBatchSize() int { return a.n }

// SampleRate returns 1/M, the probability that a given example is in a given
// round.
func (a *Allocation) SampleRate() float64 { return 1 / float64(a.m) }

// Batch returns the examples of round `step` of epoch `epoch`, in increasing
// order. Building an epoch's assignment costs O(N + M) once; other steps of
// the same epoch cost O(batch size).
func (a *Allocation) Batch(epoch, step int, dst []int) []int {
	checkStep(NameAllocation, epoch, step, a.m)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cacheEpoch != epoch {
		a.assign(epoch)
		a.cacheEpoch = epoch
	}
	dst = dst[:0]
	for _, v := range a.order[a.start[step]:a.start[step+1]] {
		dst = append(dst, int(v))
	}
	return dst
}

// assign fills order and start for the epoch: a counting sort of the
// examples by their uniform round. The epoch's stream is replayed twice
// (count, then place) instead of storing the n rounds.
func (a *Allocation) assign(epoch int) {
	m := uint32(a.m)
	a.start = grow(a.start, a.m+1)
	clear(a.start)
	r := rand.New(newSource(a.seed, a.key, domainAllocation, epoch, 0))
	for i := 0; i < a.n; i++ {
		a.start[r.Uint32N(m)+1]++
	}
	for s := 1; s <= a.m; s++ {
		a.start[s] += a.start[s-1]
	}
	// next[s] is where the next example of round s goes.
	a.order = grow(a.order, a.n)
	next := make([]int, a.m)
	copy(next, a.start[:a.m])
	r = rand.New(newSource(a.seed, a.key, domainAllocation, epoch, 0))
	for i := 0; i < a.n; i++ {
		s := r.Uint32N(m)
		a.order[next[s]] = int32(i)
		next[s]++
	}
}
