package federated

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dpsgd/dpsgd"
	"gonum.org/v1/gonum/stat/distuv"
)

func TestPartitionIID(t *testing.T) {
	labels := make([]int, 1003)
	parts, err := PartitionIndices(PartitionIID, labels, 10, 0, 5)
	if err != nil {
		t.Fatal(err)
	}
	checkCover(t, parts, len(labels))
	for _, p := range parts {
		if len(p) != 100 && len(p) != 101 {
			t.Errorf("part of %d examples, want 100 or 101", len(p))
		}
	}
	again, _ := PartitionIndices(PartitionIID, labels, 10, 0, 5)
	other, _ := PartitionIndices(PartitionIID, labels, 10, 0, 6)
	if !slices.Equal(parts[3], again[3]) {
		t.Error("same seed, different partition")
	}
	if slices.Equal(parts[3], other[3]) {
		t.Error("different seeds, same partition")
	}
	if _, err := PartitionIndices(PartitionIID, labels[:5], 10, 0, 1); err == nil {
		t.Error("5 examples over 10 clients accepted")
	}
	if _, err := PartitionIndices("dirichlet", labels, 10, 0, 1); err == nil {
		t.Error("unknown partition accepted")
	}
}

// TestPartitionLabel: 10 classes of 600 examples over 100 clients × 2 shards of 30: shards never
// straddle a class, so every client holds exactly one or two labels, 60 examples.
func TestPartitionLabel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	labels := make([]int, 6000)
	for i := range labels {
		labels[i] = i % 10
	}
	rng.Shuffle(len(labels), func(i, j int) { labels[i], labels[j] = labels[j], labels[i] })
	parts, err := PartitionIndices(PartitionLabel, labels, 100, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	checkCover(t, parts, len(labels))
	two := 0
	for c, p := range parts {
		if len(p) != 60 {
			t.Errorf("client %d: %d examples, want 60", c, len(p))
		}
		seen := map[int]bool{}
		for _, i := range p {
			seen[labels[i]] = true
		}
		if len(seen) > 2 {
			t.Errorf("client %d holds %d labels, want at most 2", c, len(seen))
		}
		if len(seen) == 2 {
			two++
		}
	}
	// Each client's two shards come from 200 shards, 20 per class: the chance that both are of
	// the same class is 19/199, so about 90 clients hold two labels.
	if two < 75 {
		t.Errorf("%d clients with two labels, want about 90", two)
	}
	if _, err := PartitionIndices(PartitionLabel, labels, 4000, 2, 3); err == nil {
		t.Error("8000 shards of 6000 examples accepted")
	}
}

func checkCover(t *testing.T, parts [][]int, n int) {
	t.Helper()
	seen := make([]bool, n)
	for c, p := range parts {
		if len(p) == 0 {
			t.Errorf("client %d has no examples", c)
		}
		for _, i := range p {
			if seen[i] {
				t.Fatalf("example %d in two parts", i)
			}
			seen[i] = true
		}
	}
	for i, s := range seen {
		if !s {
			t.Fatalf("example %d in no part", i)
		}
	}
}

// TestSamplingBinomial: under both samplings, client i's count in a round is Binomial(K, qᵢ)
// (chi-square goodness of fit over 20000 rounds), so its total over R rounds is
// Binomial(K·R, qᵢ); categorical rounds always have exactly K draws.
func TestSamplingBinomial(t *testing.T) {
	rates := []float64{0.05, 0.15, 0.3, 0.5}
	const k, rounds = 6, 20000
	for _, kind := range []dpsgd.ClientSampling{dpsgd.SamplingCategorical, dpsgd.SamplingBernoulli} {
		rs := rates
		if kind == dpsgd.SamplingBernoulli {
			rs = []float64{0.05, 0.9, 0.3, 1} // need not sum to 1
		}
		s, err := newSampler(kind, rs, k, 42)
		if err != nil {
			t.Fatal(err)
		}
		hist := make([][]float64, len(rs))
		for i := range hist {
			hist[i] = make([]float64, k+1)
		}
		c := make([]int, len(rs))
		for r := range rounds {
			s.counts(r, c)
			sum := 0
			for i, v := range c {
				hist[i][v]++
				sum += v
			}
			if kind == dpsgd.SamplingCategorical && sum != k {
				t.Fatalf("categorical round with %d draws, want %d", sum, k)
			}
		}
		for i, q := range rs {
			if q == 1 {
				if hist[i][k] != rounds {
					t.Errorf("%s: rate 1 not drawn K times every round", kind)
				}
				continue
			}
			b := distuv.Binomial{N: k, P: q}
			// Pool the cells with expected count < 5 into their neighbour.
			var chi2, expAcc, obsAcc float64
			df := -1
			for v := 0; v <= k; v++ {
				expAcc += rounds * b.Prob(float64(v))
				obsAcc += hist[i][v]
				if expAcc >= 5 || v == k {
					chi2 += (obsAcc - expAcc) * (obsAcc - expAcc) / expAcc
					df++
					expAcc, obsAcc = 0, 0
				}
			}
			crit := distuv.ChiSquared{K: float64(df)}.Quantile(1 - 1e-4)
			if chi2 > crit {
				t.Errorf("%s: client %d (q = %v): chi-square %.1f with %d df, above the 1e-4 critical value %.1f", kind, i, q, chi2, df, crit)
			}
		}
	}
	if _, err := newSampler(dpsgd.SamplingCategorical, []float64{0.5, 0.4}, 2, 1); err == nil {
		t.Error("categorical sampling accepted rates summing to 0.9")
	}
	if _, err := newSampler(dpsgd.SamplingBernoulli, []float64{0.5, 0}, 2, 1); err == nil {
		t.Error("rate 0 accepted")
	}
}

// TestAggregateUnbiased: for a toy linear update (each client's update a fixed vector Δₙ), the
// Monte Carlo mean of eq. 15's aggregate over many rounds equals the full-participation update
// Σₙ pₙ·Δₙ within 4 standard errors, for both samplings and unequal rates and shares; with
// the 1/N normalization printed in eq. 15 instead of 1/K it would be off by K/N, far outside.
func TestAggregateUnbiased(t *testing.T) {
	const n, k, dim, rounds = 5, 3, 4, 200000
	rng := rand.New(rand.NewPCG(9, 9))
	updates := make([][]float64, n)
	for i := range updates {
		updates[i] = make([]float64, dim)
		for j := range updates[i] {
			updates[i][j] = rng.NormFloat64()
		}
	}
	shares := []float64{0.1, 0.2, 0.3, 0.25, 0.15}
	for _, tc := range []struct {
		kind  dpsgd.ClientSampling
		rates []float64
	}{
		{dpsgd.SamplingCategorical, []float64{0.3, 0.1, 0.2, 0.25, 0.15}},
		{dpsgd.SamplingBernoulli, []float64{0.3, 0.7, 0.05, 1, 0.5}},
	} {
		s, err := newSampler(tc.kind, tc.rates, k, 3)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float64, dim)
		for i := range n {
			for j := range dim {
				want[j] += shares[i] * updates[i][j]
			}
		}
		sum := make([]float64, dim)
		sumSq := make([]float64, dim)
		c := make([]int, n)
		agg := make([]float64, dim)
		for r := range rounds {
			s.counts(r, c)
			clear(agg)
			Aggregate(agg, updates, c, shares, tc.rates, k)
			for j, v := range agg {
				sum[j] += v
				sumSq[j] += v * v
			}
		}
		for j := range dim {
			mean := sum[j] / rounds
			se := math.Sqrt((sumSq[j]/rounds - mean*mean) / rounds)
			if math.Abs(mean-want[j]) > 4*se {
				t.Errorf("%s: coordinate %d: mean aggregate %.5f, full participation %.5f (se %.5f)", tc.kind, j, mean, want[j], se)
			}
			if wrong := mean * k / n; math.Abs(wrong-want[j]) < 4*se && math.Abs(want[j]) > 20*se {
				t.Errorf("%s: coordinate %d: the 1/N normalization would also pass; the test cannot tell them apart", tc.kind, j)
			}
		}
	}
}

func BenchmarkSamplerCounts(b *testing.B) {
	rates := make([]float64, 1000)
	for i := range rates {
		rates[i] = 1.0 / 1000
	}
	s, _ := newSampler(dpsgd.SamplingCategorical, rates, 100, 1)
	c := make([]int, len(rates))
	for i := 0; b.Loop(); i++ {
		s.counts(i, c)
	}
}
