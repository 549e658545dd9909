package federated

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/dpsgd/dpsgd"
)

// The client sampling kinds are the front door's (dpsgd.ClientSampling). Under both, client
// i's count Cᵢᵗ in one round is Binomial(K, qᵢ), so its count over the run, Σₜ Cᵢᵗ, is
// Binomial(T, qᵢ) with T = K·R, as Lemma 1 of the personalized-DP FL appendix assumes, and
// E[Cᵢᵗ] = K·qᵢ, which makes the aggregation of eq. 15 unbiased (see Aggregate). Categorical:
// each of the K draws picks one client, client i with probability qᵢ (the counts of one round
// are Multinomial(K, q), whose marginals are Binomial(K, qᵢ)). Bernoulli: each client is tried
// K times per round, each trial independently successful with probability qᵢ.

// sampleStream keeps the client sampling's random numbers apart from other uses of the seed.
const sampleStream = 0xbb67_ae85_84ca_a73b

// sampler draws the clients of each round.
type sampler struct {
	kind  dpsgd.ClientSampling
	rates []float64
	cum   []float64 // categorical: cumulative rates, last forced to 1
	k     int
	seed  uint64
}

func newSampler(kind dpsgd.ClientSampling, rates []float64, k int, seed uint64) (*sampler, error) {
	if k < 1 {
		return nil, fmt.Errorf("federated: draws per round K = %d, want ≥ 1", k)
	}
	var sum float64
	for i, q := range rates {
		if !(q > 0 && q <= 1) {
			return nil, fmt.Errorf("federated: sample rate of client %d = %v, want a value in (0, 1]", i, q)
		}
		sum += q
	}
	s := &sampler{kind: kind, rates: rates, k: k, seed: seed}
	switch kind {
	case dpsgd.SamplingCategorical:
		if math.Abs(sum-1) > dpsgd.ShareTolerance {
			return nil, fmt.Errorf("federated: categorical sampling: the sample rates sum to %.9g, want 1 (within %g); use bernoulli sampling for rates that do not", sum, dpsgd.ShareTolerance)
		}
		s.cum = make([]float64, len(rates))
		var c float64
		for i, q := range rates {
			c += q / sum
			s.cum[i] = c
		}
		s.cum[len(s.cum)-1] = 1
	case dpsgd.SamplingBernoulli:
	default:
		return nil, fmt.Errorf("federated: sampling %q: want categorical or bernoulli", kind)
	}
	return s, nil
}

// counts fills c (len N) with the number of times each client is selected in round t. The
// numbers depend only on (seed, t), not on what happened in earlier rounds.
func (s *sampler) counts(t int, c []int) {
	clear(c)
	rng := rand.New(rand.NewPCG(s.seed^sampleStream, uint64(t)))
	switch s.kind {
	case dpsgd.SamplingCategorical:
		for range s.k {
			u := rng.Float64()
			i := sort.SearchFloat64s(s.cum, u)
			// SearchFloat64s returns the first i with cum[i] ≥ u; u < cum[i] is wanted, so
			// step over an exact tie (and over clients whose interval is empty).
			for i < len(s.cum)-1 && s.cum[i] <= u {
				i++
			}
			c[i]++
		}
	case dpsgd.SamplingBernoulli:
		for i, q := range s.rates {
			if q == 1 {
				c[i] = s.k
				continue
			}
			for range s.k {
				if rng.Float64() < q {
					c[i]++
				}
			}
		}
	}
}

// Aggregate adds to dst the server update of eq. 15–16 of the personalized-DP FL appendix,
//
//	Δx = (1/K)·Σₙ Cₙᵗ·(pₙ/qₙ)·Δₙ,
//
// where Cₙᵗ = counts[n] is the number of times client n was drawn this round, pₙ = shares[n]
// its data share, qₙ = rates[n] its sample rate, and Δₙ = updates[n] its (noisy) local update
// y_{t,I} − y_{t,0}; clients with counts[n] = 0 are skipped (their update may be nil).
//
// Normalization: eq. 15 is printed with 1/N in front, eq. 16 (the same quantity expanded) with
// γ/K. Since E[Cₙᵗ] = K·qₙ, the factor 1/K makes E[Δx] = Σₙ pₙ·Δₙ, the update of full
// participation, for any N; 1/N would scale it by K/N. The appendix's convergence proof uses
// E[Cₙᵗ] = K·qₙ with the 1/K form, so 1/K is implemented (TestAggregateUnbiased checks it by
// Monte Carlo).
//
// Updates are added client by client in index order, so the result is deterministic. It
// panics if the slices' lengths disagree, which is a programming error.
func Aggregate(dst []float64, updates [][]float64, counts []int, shares, rates []float64, k int) {
	if len(updates) != len(counts) || len(shares) != len(counts) || len(rates) != len(counts) {
		panic(fmt.Sprintf("federated: Aggregate: %d updates, %d counts, %d shares, %d rates", len(updates), len(counts), len(shares), len(rates)))
	}
	for n, c := range counts {
		if c == 0 {
			continue
		}
		u := updates[n]
		if len(u) != len(dst) {
			panic(fmt.Sprintf("federated: Aggregate: update %d has %d values, want %d", n, len(u), len(dst)))
		}
		w := float64(c) * shares[n] / (rates[n] * float64(k))
		for j, v := range u {
			dst[j] += w * v
		}
	}
}
