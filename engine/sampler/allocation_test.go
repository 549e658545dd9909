package sampler

import (
	"math"
	"slices"
	"testing"
)

// TestAllocationOncePerEpoch: across the M steps of an epoch every example
// appears exactly once, each round in increasing order.
func TestAllocationOncePerEpoch(t *testing.T) {
	for _, c := range []struct{ n, m int }{{1, 1}, {10, 10}, {1000, 7}, {5000, 250}, {97, 1}} {
		forModes(t, must(NewAllocation(c.n, c.m, 31)), func(t *testing.T, s Sampler) {
			for e := 0; e < 3; e++ {
				var all []int
				for st := 0; st < c.m; st++ {
					b := s.Batch(e, st, nil)
					if !slices.IsSorted(b) {
						t.Fatalf("n=%d m=%d: round %d not increasing", c.n, c.m, st)
					}
					all = append(all, b...)
				}
				slices.Sort(all)
				if !slices.Equal(all, seq(c.n)) {
					t.Fatalf("n=%d m=%d epoch %d: rounds do not partition [0, n)", c.n, c.m, e)
				}
			}
		})
	}
}

// TestAllocationRoundSizes: round sizes are Binomial(N, 1/M) (mean,
// variance, chi-square against gonum's pmf). Sizes within an epoch are
// multinomial, hence slightly negatively correlated; pooled over epochs their
// marginal law is still Binomial(N, 1/M).
func TestAllocationRoundSizes(t *testing.T) {
	for _, c := range []struct{ n, m int }{{500, 10}, {60000, 235}, {50, 40}} {
		forModes(t, must(NewAllocation(c.n, c.m, 64)), func(t *testing.T, s Sampler) {
			sizes := batchSizes(s, 20000)
			requireBinomialMoments(t, "allocation round size", sizes, c.n, 1/float64(c.m))
			requireBinomialSizes(t, "allocation round size distribution", sizes, c.n, 1/float64(c.m))
		})
	}
}

// TestAllocationRoundUniform: each example's round is uniform on [0, M):
// the rows of the example × round table are independent Multinomial(E,
// 1/M), so Pearson's statistic is χ² with N(M−1) degrees of freedom.
func TestAllocationRoundUniform(t *testing.T) {
	const n, m, epochs = 40, 5, 4000
	forModes(t, must(NewAllocation(n, m, 17)), func(t *testing.T, s Sampler) {
		obs := make([]float64, n*m)
		for e := 0; e < epochs; e++ {
			for st := 0; st < m; st++ {
				for _, v := range s.Batch(e, st, nil) {
					obs[v*m+st]++
				}
			}
		}
		exp := make([]float64, n*m)
		for i := range exp {
			exp[i] = epochs / float64(m)
		}
		var stat float64
		for i := range obs {
			d := obs[i] - exp[i]
			stat += d * d / exp[i]
		}
		requireChiSquareDF(t, "allocation example×round", stat, n*(m-1))
	})
}

// TestAllocationJointLaw: for N = 3 examples and M = 3 rounds, the 27
// assignments (round of example 0, 1, 2) are equally likely: rounds are
// independent across examples.
func TestAllocationJointLaw(t *testing.T) {
	const n, m, epochs = 3, 3, 27000
	forModes(t, must(NewAllocation(n, m, 3)), func(t *testing.T, s Sampler) {
		obs := make([]float64, 27)
		for e := 0; e < epochs; e++ {
			var round [n]int
			for st := 0; st < m; st++ {
				for _, v := range s.Batch(e, st, nil) {
					round[v] = st
				}
			}
			obs[round[0]*9+round[1]*3+round[2]]++
		}
		exp := make([]float64, 27)
		for i := range exp {
			exp[i] = epochs / 27.0
		}
		requireChiSquare(t, "allocation N=3 M=3 assignments", obs, exp)
	})
}

// TestAllocationPairwise: two examples share a round with probability 1/M.
func TestAllocationPairwise(t *testing.T) {
	const n, m, epochs = 10, 4, 8000
	forModes(t, must(NewAllocation(n, m, 1)), func(t *testing.T, s Sampler) {
		var same [n][n]float64
		for e := 0; e < epochs; e++ {
			for st := 0; st < m; st++ {
				b := s.Batch(e, st, nil)
				for i := range b {
					for j := i + 1; j < len(b); j++ {
						same[b[i]][b[j]]++
					}
				}
			}
		}
		p := 1 / float64(m)
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				requireZQuiet(t, "allocation pair", same[i][j]/epochs, p, math.Sqrt(p*(1-p)/epochs))
			}
		}
	})
}
