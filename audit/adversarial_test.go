package audit

import (
	"context"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/engine/sampler"
	"github.com/dpsgd/dpsgd/internal/numeric"
)

// visible returns how many ordinary examples of a batch (dataset indices, canary at index
// canary or absent) the update shows under the cross-row fault: the batch is cut into
// physical batches of phys rows in the given order, and a canary that is row 0 of one
// removes the other rows of that physical batch. It is written from the batch itself,
// independently of erased.
func visible(batch []int, canary, phys int) int {
	v := 0
	for _, i := range batch {
		if i != canary {
			v++
		}
	}
	for p, i := range batch {
		if i == canary && p%phys == 0 {
			for _, o := range batch[p+1 : min(p+phys, len(batch))] {
				if o != canary {
					v--
				}
			}
		}
	}
	return v
}

// gauss is ln φ(z) up to the constant every term shares.
func gauss(z float64) float64 { return -z * z / 2 }

// TestAdversarialScoresMatchEnumeration checks the three cross-row likelihood ratios
// against brute force on tiny datasets: every Poisson subset, every shuffle permutation and
// every allocation of the examples to rounds is enumerated, the batches are sorted (Poisson,
// allocation) or taken in permutation order (shuffle) and cut into physical batches as the
// engine cuts them, and the likelihoods of the observed updates are summed directly.
func TestAdversarialScoresMatchEnumeration(t *testing.T) {
	const s, c = 0.8, 0.45
	ys := []float64{-1.3, 0.4, -2.2}
	t.Run("poisson", func(t *testing.T) {
		const n, phys, q = 7, 2, 0.3
		d := &design{cfg: Config{N: n, Batch: phys}, s: s, own: c, q: q}
		for j := range n {
			for _, y := range ys {
				l0, l1 := math.Inf(-1), math.Inf(-1)
				for mask := 0; mask < 1<<n; mask++ {
					var batch []int
					lp := 0.0
					for i := range n {
						if mask&(1<<i) != 0 {
							batch = append(batch, i)
							lp += math.Log(q)
						} else {
							lp += math.Log1p(-q)
						}
					}
					if !slices.Contains(batch, j) {
						// Without the canary its slot is a ghost; with it, it was not drawn.
						k := len(batch)
						l0 = numeric.LogAddExp(l0, lp-math.Log1p(-q)+gauss(y+s*float64(k)))
						l1 = numeric.LogAddExp(l1, lp+gauss(y+s*float64(k)))
						continue
					}
					l1 = numeric.LogAddExp(l1, lp+gauss(y+s*float64(visible(batch, j, phys))-c))
				}
				want := l1 - l0
				got := d.advPoissonLogLR(y, newPoissonWeights(n, j, phys, q))
				if math.Abs(got-want) > 1e-12*(1+math.Abs(want)) {
					t.Errorf("j = %d, y = %g: score %.15g, enumeration %.15g", j, y, got, want)
				}
			}
		}
	})
	t.Run("shuffle", func(t *testing.T) {
		const n, b = 7, 2 // M = 3 steps, one slot dropped
		m := sampler.ShuffleSteps(n, b)
		d := &design{cfg: Config{N: n, Batch: b}, s: s, own: c, m: m}
		const canary = n - 1
		for obs := 1; obs <= m; obs++ {
			l0, l1 := math.Inf(-1), math.Inf(-1)
			perm := []int{0, 1, 2, 3, 4, 5, 6}
			for ok := true; ok; ok = nextPerm(perm) {
				a0, a1 := 0.0, 0.0
				for st := range obs {
					batch := perm[st*b : (st+1)*b]
					ghost := 0
					for _, i := range batch {
						if i != canary {
							ghost++
						}
					}
					mu1 := -s * float64(visible(batch, canary, b))
					if slices.Contains(batch, canary) {
						mu1 += c
					}
					a0 += gauss(ys[st] + s*float64(ghost))
					a1 += gauss(ys[st] - mu1)
				}
				l0, l1 = numeric.LogAddExp(l0, a0), numeric.LogAddExp(l1, a1)
			}
			want := l1 - l0
			got := d.advShuffleEpochLogLR(ys[:obs])
			if math.Abs(got-want) > 1e-12*(1+math.Abs(want)) {
				t.Errorf("%d of %d steps observed: score %.15g, enumeration %.15g", obs, m, got, want)
			}
		}
	})
	t.Run("allocation", func(t *testing.T) {
		const n, phys = 7, 2
		const m = 3
		d := &design{cfg: Config{N: n, Batch: phys}, s: s, own: c, m: m}
		for j := range n {
			for obs := 1; obs <= m; obs++ {
				l0, l1 := math.Inf(-1), math.Inf(-1)
				round := make([]int, n)
				for code := 0; code < int(math.Pow(m, n)); code++ {
					x := code
					for i := range round {
						round[i], x = x%m, x/m
					}
					a0, a1 := 0.0, 0.0
					for r := range obs {
						var batch []int // increasing index order, as the sampler returns it
						for i := range n {
							if round[i] == r {
								batch = append(batch, i)
							}
						}
						ghost := len(batch)
						mu1 := -s * float64(visible(batch, j, phys))
						if slices.Contains(batch, j) {
							ghost--
							mu1 += c
						}
						a0 += gauss(ys[r] + s*float64(ghost))
						a1 += gauss(ys[r] - mu1)
					}
					l0, l1 = numeric.LogAddExp(l0, a0), numeric.LogAddExp(l1, a1)
				}
				want := l1 - l0
				got := d.advAllocationEpochLogLR(ys[:obs], newAllocationTables(n, j))
				if math.Abs(got-want) > 1e-10*(1+math.Abs(want)) {
					t.Errorf("j = %d, %d of %d rounds observed: score %.15g, enumeration %.15g", j, obs, m, got, want)
				}
			}
		}
	})
}

// nextPerm advances p to the next permutation in lexicographic order and reports whether
// there was one.
func nextPerm(p []int) bool {
	i := len(p) - 2
	for i >= 0 && p[i] >= p[i+1] {
		i--
	}
	if i < 0 {
		return false
	}
	j := len(p) - 1
	for p[j] <= p[i] {
		j--
	}
	p[i], p[j] = p[j], p[i]
	slices.Reverse(p[i+1:])
	return true
}

// longAudit reports whether the long adversarial audits were asked for
// (DPSGD_AUDIT_LONG=1).
func longAudit() bool { return os.Getenv("DPSGD_AUDIT_LONG") != "" }

// TestAdversarialWithinAccountant: with a correct engine, no adversarial canary reaches
// another row — no other example is ever zeroed as non-finite — and the empirical lower
// bound stays at or below the accountant's claim, for every sampler, canary and row. The
// NaN and ±Inf canaries' own gradients are zeroed, so the two worlds have the same law and
// the bound is near 0; the huge-logit canary's finite gradient is clipped to C like any
// record's. The default run is a few hundred trainings per world on the Poisson and
// allocation samplers with the canary in row 0 (the position the fault needs) and on
// shuffle; DPSGD_AUDIT_LONG=1 runs 5000 per world on every combination, the audit whose
// numbers docs/reliability.md reports.
func TestAdversarialWithinAccountant(t *testing.T) {
	type tc struct{ smp, canary, row string }
	var cases []tc
	runs := 200
	if testing.Short() {
		runs = 100
	}
	if longAudit() {
		runs = 5000
		for _, s := range Samplers() {
			for _, c := range AdversarialCanaries() {
				for _, r := range CanaryRows() {
					if r == RowFirst && s == sampler.NameShuffle {
						continue
					}
					cases = append(cases, tc{s, c, r})
				}
			}
		}
	} else {
		cases = []tc{
			{sampler.NamePoisson, CanaryNaN, RowFirst},
			{sampler.NamePoisson, CanaryInf, RowFirst},
			{sampler.NamePoisson, CanaryHugeLogit, RowFirst},
			{sampler.NameAllocation, CanaryNaN, RowFirst},
			{sampler.NameShuffle, CanaryHugeLogit, RowRandom},
		}
	}
	for _, c := range cases {
		r, err := Run(context.Background(), Config{Sampler: c.smp, Canary: c.canary, CanaryRow: c.row, Sigma: 1, Runs: runs, Seed: 31})
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		t.Logf("%s %s/%s: accountant %s ε = %.3f, empirical %.3f [%.3f, %.3f], collateral %d",
			c.smp, c.canary, r.CanaryRow, r.Accountant, r.EpsilonAccountant, r.Empirical.Point, r.Empirical.Low, r.Empirical.High, r.Collateral)
		if r.Collateral != 0 {
			t.Errorf("%s %s/%s: %d other examples zeroed as non-finite: the canary reached across rows", c.smp, c.canary, r.CanaryRow, r.Collateral)
		}
		if r.Violation || !(r.Empirical.Low <= r.EpsilonAccountant) {
			t.Errorf("%s %s/%s: empirical lower bound %g exceeds the accountant's ε %g", c.smp, c.canary, r.CanaryRow, r.Empirical.Low, r.EpsilonAccountant)
		}
		if r.Unclipped != 0 {
			t.Errorf("%s %s/%s: %d design steps unclipped", c.smp, c.canary, r.CanaryRow, r.Unclipped)
		}
	}
}

// TestAdversarialPower: the scores see the cross-row fault. With the fault emulated on the
// real engine step (the canary's physical batch keeps only the canary when it is row 0), the
// empirical lower bound exceeds the accountant's claim: allocation at once (its ordinary
// examples' total is fixed, so the missing rows are plain), Poisson over more runs (its batch
// size is random; -short leaves it out).
func TestAdversarialPower(t *testing.T) {
	cases := []struct {
		smp  string
		runs int
	}{
		{sampler.NameAllocation, 300},
		{sampler.NamePoisson, 1500},
	}
	if testing.Short() {
		cases = cases[:1]
	}
	for _, c := range cases {
		cfg := Config{Sampler: c.smp, Canary: CanaryNaN, Sigma: 1, Runs: c.runs, Seed: 32}
		faulty, err := run(context.Background(), cfg, func(d *design) { d.fault = true })
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s nan/first, emulated fault: claim %.3f, empirical %.3f [%.3f, %.3f]", c.smp, faulty.EpsilonAccountant, faulty.Empirical.Point, faulty.Empirical.Low, faulty.Empirical.High)
		if !faulty.Violation {
			t.Errorf("%s: the emulated cross-row fault was not detected: lower bound %g, claim %g", c.smp, faulty.Empirical.Low, faulty.EpsilonAccountant)
		}
	}
}

// TestAdversarialPoissonLRIdentity checks the Poisson score against the engine: when the
// score is the exact log-likelihood ratio ln L of what the engine releases, E₁[1/L] = 1 in
// the canary world. Under the emulated fault the NaN canary's model is exact, and each
// step's 1/L lies in (0, 1/(1 − q)], so the Monte Carlo mean has a small, bounded error; a
// wrong erasure count, noise scale or push s would move it.
func TestAdversarialPoissonLRIdentity(t *testing.T) {
	runs := 1200
	if testing.Short() {
		runs = 600
	}
	cfg, err := Config{Sampler: sampler.NamePoisson, Canary: CanaryNaN, Sigma: 1, Runs: runs, Seed: 33}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDesign(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d.fault = true
	scores, _, err := d.collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	mean, sq := 0.0, 0.0
	for _, v := range scores[1] {
		x := math.Exp(-v)
		mean += x
		sq += x * x
	}
	n := float64(len(scores[1]))
	mean /= n
	sd := math.Sqrt((sq/n - mean*mean) / n)
	t.Logf("E₁[1/L] = %.4f ± %.4f", mean, sd)
	if math.Abs(mean-1) > 5*sd+0.01 {
		t.Errorf("E₁[1/L] = %g ± %g, want 1", mean, sd)
	}
	// The bound's maximum: (1/(1−q))^T.
	if hi := math.Pow(1/(1-d.q), float64(d.steps)); slices.Max(scores[1]) < -math.Log(hi)-1e-9 {
		t.Errorf("a score below −ln %g", hi)
	}
}

// TestAdversarialConfig: the adversarial designs' defaults and their invalid settings.
func TestAdversarialConfig(t *testing.T) {
	c, err := Config{Sampler: sampler.NamePoisson, Sigma: 1, Canary: CanaryNaN}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.N != 64 || c.Batch != 16 || c.CanaryRow != RowFirst {
		t.Errorf("poisson defaults: n %d batch %d row %q, want 64, 16, first", c.N, c.Batch, c.CanaryRow)
	}
	if c, err = (Config{Sampler: sampler.NameShuffle, Sigma: 1, Canary: CanaryInf, N: 32}).withDefaults(); err != nil || c.CanaryRow != RowRandom || c.Batch != 8 {
		t.Errorf("shuffle defaults: %+v, %v; want row random, batch 8", c, err)
	}
	for _, bad := range []struct {
		cfg  Config
		name string
	}{
		{Config{Sampler: "shuffle", Sigma: 1, Canary: CanaryNaN, CanaryRow: RowFirst}, "canary row"},
		{Config{Sampler: "poisson", Sigma: 1, Canary: CanaryNaN, CanaryRow: "last"}, "canary row"},
		{Config{Sampler: "poisson", Sigma: 1, CanaryRow: RowFirst}, "canary row"},
		{Config{Sampler: "poisson", Sigma: 1, Canary: "zero"}, "canary"},
		{Config{Sampler: "poisson", Sigma: 1, Canary: CanaryHugeLogit, N: 2048}, "n ="},
		{Config{Sampler: "allocation", Sigma: 1, Canary: CanaryNaN, N: 1024, Batch: 4}, "allocation"},
	} {
		_, err := Run(context.Background(), bad.cfg)
		if err == nil || !strings.Contains(err.Error(), bad.name) {
			t.Errorf("%+v: error %v, want one naming %q", bad.cfg, err, bad.name)
		}
	}
}
