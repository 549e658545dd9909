package sampler

import (
	"math"
	"math/bits"
	"slices"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// batchSizes returns the sizes of the first `count` batches of s, taken
// epoch by epoch.
func batchSizes(s Sampler, count int) []int {
	sizes := make([]int, 0, count)
	var buf []int
	for e := 0; len(sizes) < count; e++ {
		for st := 0; st < s.StepsPerEpoch() && len(sizes) < count; st++ {
			buf = s.Batch(e, st, buf)
			sizes = append(sizes, len(buf))
		}
	}
	return sizes
}

// requireSubsetLaw draws `count` batches from s (N ≤ 16) and chi-square
// tests the frequency of every subset of [0, N) against prob(subset as a bit
// mask). Subsets of probability 0 must never appear.
func requireSubsetLaw(t *testing.T, what string, s Sampler, count int, prob func(mask uint) float64) {
	t.Helper()
	n := s.DatasetSize()
	obs := make([]float64, 1<<n)
	var buf []int
	drawn := 0
	for e := 0; drawn < count; e++ {
		for st := 0; st < s.StepsPerEpoch() && drawn < count; st++ {
			buf = s.Batch(e, st, buf)
			var mask uint
			for _, v := range buf {
				mask |= 1 << v
			}
			obs[mask]++
			drawn++
		}
	}
	// Cells with an expected count under 5 are pooled into one cell, the
	// usual validity condition of Pearson's test.
	var o, exp []float64
	var rareO, rareE float64
	for mask := range obs {
		p := prob(uint(mask))
		if p == 0 {
			if obs[mask] != 0 {
				t.Fatalf("%s: impossible subset %b drawn %g times", what, mask, obs[mask])
			}
			continue
		}
		if e := p * float64(count); e < 5 {
			rareO += obs[mask]
			rareE += e
			continue
		}
		o = append(o, obs[mask])
		exp = append(exp, p*float64(count))
	}
	if rareE >= 5 {
		o = append(o, rareO)
		exp = append(exp, rareE)
	} else if rareE > 0 {
		o[0] += rareO
		exp[0] += rareE
	}
	requireChiSquare(t, what, o, exp)
}

// TestPoissonSubsetLaw: the whole law of a batch, for N = 6: subset S has
// probability q^|S| (1−q)^(N−|S|) (independent inclusion). This covers
// sizes, per-example inclusion and all joint inclusions at once.
func TestPoissonSubsetLaw(t *testing.T) {
	for _, q := range []float64{0.3, 0.05, 0.9} {
		forModes(t, must(NewPoisson(6, q, 123)), func(t *testing.T, s Sampler) {
			requireSubsetLaw(t, "poisson N=6 subsets", s, 60000, func(mask uint) float64 {
				k := bits.OnesCount(mask)
				return math.Pow(q, float64(k)) * math.Pow(1-q, float64(6-k))
			})
		})
	}
}

// TestPoissonSizes: sizes match Binomial(N, q) in mean, variance (z-tests)
// and distribution (chi-square against gonum's Binomial pmf).
func TestPoissonSizes(t *testing.T) {
	for _, c := range []struct {
		n int
		q float64
	}{{1000, 0.03}, {60000, 256.0 / 60000}, {500, 0.5}, {40, 0.02}, {2000, 0.995}} {
		forModes(t, must(NewPoisson(c.n, c.q, 77)), func(t *testing.T, s Sampler) {
			sizes := batchSizes(s, 20000)
			requireBinomialMoments(t, "poisson size", sizes, c.n, c.q)
			requireBinomialSizes(t, "poisson size distribution", sizes, c.n, c.q)
		})
	}
}

// TestPoissonLargeN: at N = 10⁷, q = 10⁻⁴ (the benchmark's setting) and at
// N = 2⁵⁰, q = 10⁻¹² the sizes have the binomial mean and variance, and
// indices are increasing and in range.
func TestPoissonLargeN(t *testing.T) {
	for _, c := range []struct {
		n     int
		q     float64
		count int
	}{{10_000_000, 1e-4, 400}, {1 << 50, 1e-12, 400}} {
		forModes(t, must(NewPoisson(c.n, c.q, 5)), func(t *testing.T, s Sampler) {
			sizes := make([]int, c.count)
			var buf []int
			for i := range sizes {
				buf = s.Batch(i/100, i%100, buf)
				if !slices.IsSorted(buf) || (len(buf) > 0 && (buf[0] < 0 || buf[len(buf)-1] >= c.n)) {
					t.Fatalf("N=%d: batch out of range or unsorted", c.n)
				}
				sizes[i] = len(buf)
			}
			requireBinomialMoments(t, "poisson large N size", sizes, c.n, c.q)
		})
	}
}

// TestPoissonInclusionUniform: every example is included with probability
// q. The counts c_i over S batches are independent Binomial(S, q), so
// Σ (c_i − Sq)² / (Sq(1−q)) is approximately χ² with N degrees of freedom.
func TestPoissonInclusionUniform(t *testing.T) {
	const n, q, count = 200, 0.05, 20000
	forModes(t, must(NewPoisson(n, q, 9)), func(t *testing.T, s Sampler) {
		c := make([]float64, n)
		var buf []int
		drawn := 0
		for e := 0; drawn < count; e++ {
			for st := 0; st < s.StepsPerEpoch() && drawn < count; st++ {
				buf = s.Batch(e, st, buf)
				for _, v := range buf {
					c[v]++
				}
				drawn++
			}
		}
		var stat float64
		for _, ci := range c {
			d := ci - count*q
			stat += d * d / (count * q * (1 - q))
		}
		p := distuv.ChiSquared{K: n}.Survival(stat)
		if !(p > pMin) {
			t.Errorf("inclusion counts: chi-square %.1f on %d df, p = %.3g", stat, n, p)
		}
	})
}

// TestPoissonPairwise: P(i and j both in a batch) = q² for every pair.
func TestPoissonPairwise(t *testing.T) {
	const n, q, count = 12, 0.3, 45000
	forModes(t, must(NewPoisson(n, q, 4242)), func(t *testing.T, s Sampler) {
		var both [n][n]float64
		var buf []int
		drawn := 0
		for e := 0; drawn < count; e++ {
			for st := 0; st < s.StepsPerEpoch() && drawn < count; st++ {
				buf = s.Batch(e, st, buf)
				for a := range buf {
					for b := a + 1; b < len(buf); b++ {
						both[buf[a]][buf[b]]++
					}
				}
				drawn++
			}
		}
		p2 := q * q
		sd := math.Sqrt(count * p2 * (1 - p2))
		var sum float64
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				if z := (both[i][j] - count*p2) / sd; math.Abs(z) > zMax {
					t.Errorf("pair (%d,%d): joint inclusion %g, want %g: z = %.2f", i, j, both[i][j]/count, p2, z)
				}
				sum += both[i][j]
			}
		}
		pairs := float64(n * (n - 1) / 2)
		t.Logf("mean pairwise inclusion %.5f, q² = %.5f", sum/pairs/count, p2)
	})
}

// TestPoissonEmptyBatches: with tiny q most batches are empty, with
// probability (1−q)^N, and come back with length 0.
func TestPoissonEmptyBatches(t *testing.T) {
	const n, q = 100, 1e-4
	forModes(t, must(NewPoisson(n, q, 1)), func(t *testing.T, s Sampler) {
		m := s.StepsPerEpoch() // 10000
		empty := 0
		for st := 0; st < m; st++ {
			if len(s.Batch(0, st, []int{7, 8, 9})) == 0 {
				empty++
			}
		}
		p := math.Pow(1-q, n)
		requireZ(t, "empty fraction", float64(empty)/float64(m), p, math.Sqrt(p*(1-p)/float64(m)))
		if empty == 0 || empty == m {
			t.Fatalf("%d of %d batches empty", empty, m)
		}
	})
}

func TestPoissonQOne(t *testing.T) {
	forModes(t, must(NewPoisson(37, 1, 3)), func(t *testing.T, s Sampler) {
		for e := 0; e < 3; e++ {
			if b := s.Batch(e, 0, nil); !slices.Equal(b, seq(37)) {
				t.Fatalf("q = 1: batch %v, want all of [0, 37)", b)
			}
		}
	})
}

// TestTruncatedCoupling: the truncated batch never exceeds maxBatch, is a
// subset of the Poisson batch of the same seed, equals it when that has at
// most maxBatch examples, and is truncated as often as
// TruncationProbability says.
func TestTruncatedCoupling(t *testing.T) {
	const n, q, maxB, count = 1000, 0.1, 105, 6000
	po := must(NewPoisson(n, q, 8))
	tr := must(NewTruncatedPoisson(n, q, maxB, 8))
	truncated := 0
	for i := 0; i < count; i++ {
		e, st := i/10, i%10
		pb, tb := po.Batch(e, st, nil), tr.Batch(e, st, nil)
		if len(tb) != min(len(pb), maxB) {
			t.Fatalf("batch of %d from Poisson %d, maxBatch %d", len(tb), len(pb), maxB)
		}
		if len(pb) <= maxB && !slices.Equal(pb, tb) {
			t.Fatalf("untruncated batch differs from the Poisson batch")
		}
		if len(pb) > maxB {
			truncated++
			j := 0
			for _, v := range tb { // tb ⊆ pb, both increasing
				for j < len(pb) && pb[j] < v {
					j++
				}
				if j == len(pb) || pb[j] != v {
					t.Fatalf("truncated batch has %d, not in the Poisson batch", v)
				}
			}
		}
	}
	pt := tr.(*TruncatedPoisson).TruncationProbability()
	requireZ(t, "truncation frequency", float64(truncated)/count, pt, math.Sqrt(pt*(1-pt)/count))
}

// TestTruncatedMatchesPoisson: with maxBatch ≥ N the truncated sampler is
// the Poisson sampler.
func TestTruncatedMatchesPoisson(t *testing.T) {
	po := must(NewPoisson(50, 0.9, 21))
	for _, maxB := range []int{50, 51, 1 << 40} {
		tr := must(NewTruncatedPoisson(50, 0.9, maxB, 21))
		if p := tr.(*TruncatedPoisson).TruncationProbability(); p != 0 {
			t.Errorf("maxBatch %d ≥ N: TruncationProbability = %g", maxB, p)
		}
		for e := 0; e < 200; e++ {
			if !slices.Equal(po.Batch(e, 0, nil), tr.Batch(e, 0, nil)) {
				t.Fatalf("maxBatch %d: epoch %d differs from Poisson", maxB, e)
			}
		}
	}
}

// TestTruncatedSubsetLaw: the whole law for N = 6, q = 0.6, maxBatch = 3:
// a subset of size k < 3 has probability q^k(1−q)^(6−k); each of the C(6,3)
// = 20 subsets of size 3 has probability P(K ≥ 3)/20; larger subsets never
// occur.
func TestTruncatedSubsetLaw(t *testing.T) {
	const n, q, maxB = 6, 0.6, 3
	forModes(t, must(NewTruncatedPoisson(n, q, maxB, 55)), func(t *testing.T, s Sampler) {
		atLeast := distuv.Binomial{N: n, P: q}.Survival(maxB - 1)
		requireSubsetLaw(t, "truncated N=6 subsets", s, 60000, func(mask uint) float64 {
			k := bits.OnesCount(mask)
			switch {
			case k < maxB:
				return math.Pow(q, float64(k)) * math.Pow(1-q, float64(n-k))
			case k == maxB:
				return atLeast / 20
			}
			return 0
		})
	})
}

// TestSelectSubsetUniform: selection sampling of 3 out of 6 draws each of
// the 20 subsets with probability 1/20 and preserves order.
func TestSelectSubsetUniform(t *testing.T) {
	const count = 40000
	r := newStream(1, 1, 1, 1)
	obs := map[uint]float64{}
	for i := 0; i < count; i++ {
		s := selectSubset(r, []int{0, 1, 2, 3, 4, 5}, 3)
		if len(s) != 3 || !slices.IsSorted(s) {
			t.Fatalf("selectSubset gave %v", s)
		}
		obs[1<<s[0]|1<<s[1]|1<<s[2]]++
	}
	if len(obs) != 20 {
		t.Fatalf("%d distinct subsets, want 20", len(obs))
	}
	var o, exp []float64
	for _, c := range obs {
		o = append(o, c)
		exp = append(exp, count/20.0)
	}
	requireChiSquare(t, "selectSubset 3 of 6", o, exp)
}

// TestTruncationProbability against exact binomial sums: hand-computed for
// N = 10, q = 1/2, and, in the far tail, against a direct sum of the pmf.
// The oracle's first term is log C(N,k) + k log q + (N−k) log(1−q) with
// log C(N,k) summed as Σ log((N−i)/(i+1)) (about 1e-12 relative error, where
// lgamma(N+1) at N = 10⁷ would already lose 1e-8), the next ones by the ratio
// pmf(k+1)/pmf(k) = (N−k)/(k+1) · q/(1−q).
func TestTruncationProbability(t *testing.T) {
	tp := func(n int, q float64, maxB int) float64 {
		s := must(NewTruncatedPoisson(n, q, maxB, 0))
		return s.(*TruncatedPoisson).TruncationProbability()
	}
	// P(K > 7) = (C(10,8)+C(10,9)+C(10,10))/2¹⁰ = 56/1024; P(K > 9) = 1/1024.
	for _, c := range []struct {
		maxB int
		want float64
	}{{7, 56.0 / 1024}, {9, 1.0 / 1024}, {1, 1 - 11.0/1024}} {
		if got := tp(10, 0.5, c.maxB); math.Abs(got-c.want) > 1e-14 {
			t.Errorf("N=10 q=1/2 maxBatch=%d: %v, want %v", c.maxB, got, c.want)
		}
	}
	for _, c := range []struct {
		n    int
		q    float64
		maxB int
	}{{60000, 256.0 / 60000, 300}, {60000, 256.0 / 60000, 400}, {10_000_000, 1e-4, 1200}, {1000, 0.3, 450}} {
		k0 := c.maxB + 1
		var logPmf float64
		for i := 0; i < k0; i++ {
			logPmf += math.Log(float64(c.n-i) / float64(i+1))
		}
		logPmf += float64(k0)*math.Log(c.q) + float64(c.n-k0)*math.Log1p(-c.q)
		term, sum := 1.0, 0.0
		for k := k0; k <= c.n && term > 1e-20*sum; k++ {
			sum += term
			term *= float64(c.n-k) / float64(k+1) * c.q / (1 - c.q)
		}
		want := math.Exp(logPmf) * sum
		got := tp(c.n, c.q, c.maxB)
		if math.Abs(got-want) > 1e-7*want {
			t.Errorf("N=%d q=%g maxBatch=%d: %.12g, want %.12g", c.n, c.q, c.maxB, got, want)
		} else {
			t.Logf("N=%d q=%g maxBatch=%d: P(K > maxBatch) = %.12g (oracle %.12g)", c.n, c.q, c.maxB, got, want)
		}
	}
	// 40-digit values from mpmath 1.3.0:
	// mpmath.betainc(maxBatch+1, N-maxBatch, 0, q, regularized=True).
	for _, c := range []struct {
		n    int
		q    float64
		maxB int
		want float64
	}{
		{10_000_000, 1e-4, 1200, 3.876954303220484185531734949223662011747e-10},
		{60000, 256.0 / 60000, 300, 0.003242492480584718751077390136843587473427},
		{60000, 256.0 / 60000, 400, 2.986110564454529574052770525964089087057e-17},
	} {
		if got := tp(c.n, c.q, c.maxB); math.Abs(got-c.want) > 1e-7*c.want {
			t.Errorf("N=%d q=%g maxBatch=%d: %.12g, mpmath %.12g", c.n, c.q, c.maxB, got, c.want)
		}
	}
}
