package sampler

import (
	"testing"
)

// TestShuffleEpochCoverage: every batch has exactly B indices, no example
// appears twice in an epoch, and exactly M·B distinct examples are used.
func TestShuffleEpochCoverage(t *testing.T) {
	for _, c := range []struct{ n, b int }{{1, 1}, {10, 3}, {100, 100}, {1000, 7}, {1000, 1}, {257, 16}} {
		forModes(t, must(NewShuffle(c.n, c.b, 99)), func(t *testing.T, s Sampler) {
			m := s.StepsPerEpoch()
			if m != c.n/c.b {
				t.Fatalf("n=%d b=%d: M = %d, want %d", c.n, c.b, m, c.n/c.b)
			}
			for e := 0; e < 3; e++ {
				seen := make([]bool, c.n)
				distinct := 0
				for st := 0; st < m; st++ {
					b := s.Batch(e, st, nil)
					if len(b) != c.b {
						t.Fatalf("n=%d b=%d: batch size %d", c.n, c.b, len(b))
					}
					for _, v := range b {
						if seen[v] {
							t.Fatalf("n=%d b=%d epoch %d: example %d used twice", c.n, c.b, e, v)
						}
						seen[v] = true
						distinct++
					}
				}
				if distinct != m*c.b {
					t.Fatalf("n=%d b=%d: %d distinct examples, want %d", c.n, c.b, distinct, m*c.b)
				}
			}
		})
	}
}

// TestShufflePermutationUniform: with N = 4 and B = 1 an epoch is a full
// ordering of the 4 examples; each of the 24 orderings must have probability
// 1/24.
func TestShufflePermutationUniform(t *testing.T) {
	const n, epochs = 4, 24000
	forModes(t, must(NewShuffle(n, 1, 2024)), func(t *testing.T, s Sampler) {
		obs := make([]float64, 256)
		for e := 0; e < epochs; e++ {
			code := 0
			for st := 0; st < n; st++ {
				code = code*n + s.Batch(e, st, nil)[0]
			}
			obs[code]++
		}
		var o, exp []float64
		for code, c := range obs {
			digits, used := code, 0
			for i := 0; i < n; i++ {
				used |= 1 << (digits % n)
				digits /= n
			}
			if used == 1<<n-1 { // a permutation
				o = append(o, c)
				exp = append(exp, epochs/24.0)
			} else if c != 0 {
				t.Fatalf("non-permutation %d observed", code)
			}
		}
		if len(o) != 24 {
			t.Fatalf("%d permutations enumerated", len(o))
		}
		requireChiSquare(t, "shuffle N=4 orderings", o, exp)
	})
}

// TestShufflePositionUniform: over many epochs each example occupies each
// position of the permutation with probability 1/N. N = 50, B = 7: M = 7
// and one example sits out, so the example × (slot, or "sat out") table is
// a sum of E uniform N×N permutation matrices. A uniform permutation matrix
// has covariance (P⊗P)/(N−1), P the centering projection of rank N−1, so
// Pearson's statistic times (N−1)/N is asymptotically χ² with (N−1)² degrees
// of freedom.
func TestShufflePositionUniform(t *testing.T) {
	const n, b, epochs = 50, 7, 4000
	forModes(t, must(NewShuffle(n, b, 7)), func(t *testing.T, s Sampler) {
		m := s.StepsPerEpoch()
		if m*b != n-1 {
			t.Fatalf("test needs exactly one example sitting out")
		}
		obs := make([]float64, n*n) // example v, slot (n−1 = sat out)
		for e := 0; e < epochs; e++ {
			in := make([]bool, n)
			for st := 0; st < m; st++ {
				for j, v := range s.Batch(e, st, nil) {
					obs[v*n+st*b+j]++
					in[v] = true
				}
			}
			for v := range in {
				if !in[v] {
					obs[v*n+n-1]++
				}
			}
		}
		var stat float64
		for _, o := range obs {
			d := o - epochs/float64(n)
			stat += d * d / (epochs / float64(n))
		}
		requireChiSquareDF(t, "shuffle example×position", stat*(n-1)/n, (n-1)*(n-1))
	})
}

// TestShuffleLeftoverSetUniform: with N = 5, B = 2 one example sits out per
// epoch and the two batches, as sets, are disjoint pairs; each of the
// C(5,2)·C(3,2) = 30 outcomes (batch 0, batch 1) is equally likely.
func TestShuffleLeftoverSetUniform(t *testing.T) {
	const n, epochs = 5, 30000
	forModes(t, must(NewShuffle(n, 2, 31337)), func(t *testing.T, s Sampler) {
		counts := map[[2]int]float64{}
		for e := 0; e < epochs; e++ {
			var key [2]int
			for st := 0; st < 2; st++ {
				b := s.Batch(e, st, nil)
				key[st] = 1<<b[0] | 1<<b[1]
			}
			counts[key]++
		}
		// Outcomes: choose the unordered pair of batch 0 (10 ways), then of
		// batch 1 from the remaining 3 (3 ways): 30.
		if len(counts) != 30 {
			t.Fatalf("%d distinct outcomes, want 30", len(counts))
		}
		var o, exp []float64
		for _, c := range counts {
			o = append(o, c)
			exp = append(exp, epochs/30.0)
		}
		requireChiSquare(t, "shuffle N=5 B=2 outcomes", o, exp)
	})
}
