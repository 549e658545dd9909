package pld

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpsgd/dpsgd/privacy"
)

// legacyAccountant is the PoissonAccountant as it was before the speed-up,
// without its caches: the former PoissonGaussian, logMGF, window and
// convolve (legacy_test.go) under the same interval doubling and ε/δ
// queries (it keeps its compositions per step count, only so that the
// test asks for each once).
type legacyAccountant struct {
	q, sigma float64
	opts     Options
	done     map[int][2]*PMF
}

func newLegacyAccountant(q, sigma float64, o Options) *legacyAccountant {
	o, err := o.withDefaults()
	if err != nil {
		panic(err)
	}
	return &legacyAccountant{q: q, sigma: sigma, opts: o, done: map[int][2]*PMF{}}
}

func (a *legacyAccountant) Name() string      { return "pld (legacy)" }
func (a *legacyAccountant) Sampler() string   { return privacy.SamplerPoisson }
func (a *legacyAccountant) Adjacency() string { return privacy.AdjacencyAddRemove }

// composed is the former PoissonAccountant.composed and composeAt.
func (a *legacyAccountant) composed(steps int) ([2]*PMF, error) {
	if c, ok := a.done[steps]; ok {
		return c, nil
	}
	interval := a.opts.Interval
	lmin, lmax := newPoissonGaussian(a.q, a.sigma, Remove).lossRange(a.opts.TailMass)
	for (lmax-lmin)/interval > maxSingleLen {
		interval *= 2
	}
	lastErr := fmt.Errorf("%w: the privacy-loss range [%g, %g] needs an interval above 1", ErrGridTooLarge, lmin, lmax)
	for ; interval <= 1; interval *= 2 {
		var c [2]*PMF
		var err error
		for i, d := range []Direction{Remove, Add} {
			var p *PMF
			if p, err = oldPoissonGaussian(a.q, a.sigma, d, Options{Interval: interval, TailMass: a.opts.TailMass}); err != nil {
				break
			}
			if steps == 1 {
				c[i] = p
			} else if c[i], err = oldConvolve(p, nil, steps); err != nil {
				break
			}
		}
		if errors.Is(err, ErrGridTooLarge) {
			lastErr = err
			continue
		}
		if err == nil {
			a.done[steps] = c
		}
		return c, err
	}
	return [2]*PMF{}, lastErr
}

func (a *legacyAccountant) Epsilon(steps int, delta float64) (float64, error) {
	if steps == 0 {
		return 0, nil
	}
	c, err := a.composed(steps)
	if err != nil {
		return 0, err
	}
	var eps float64
	for _, p := range c {
		e, err := p.EpsilonForDelta(delta)
		if err != nil {
			return 0, err
		}
		eps = math.Max(eps, e)
	}
	return eps, nil
}

func (a *legacyAccountant) Delta(steps int, eps float64) (float64, error) {
	if steps == 0 {
		return 0, nil
	}
	c, err := a.composed(steps)
	if err != nil {
		return 0, err
	}
	return math.Max(c[0].delta(eps), c[1].delta(eps)), nil
}

// samePMF fails unless p and want hold the same numbers bit for bit.
func samePMF(t *testing.T, what string, p, want *PMF) {
	t.Helper()
	bits := math.Float64bits
	if p.offset != want.offset || len(p.probs) != len(want.probs) || p.interval != want.interval || p.pessimistic != want.pessimistic ||
		bits(p.inf) != bits(want.inf) || bits(p.err) != bits(want.err) || bits(p.rel) != bits(want.rel) {
		t.Fatalf("%s: offset %d, len %d, interval %g, inf %g, err %g, rel %g; legacy offset %d, len %d, interval %g, inf %g, err %g, rel %g",
			what, p.offset, len(p.probs), p.interval, p.inf, p.err, p.rel, want.offset, len(want.probs), want.interval, want.inf, want.err, want.rel)
	}
	for i := range p.probs {
		if bits(p.probs[i]) != bits(want.probs[i]) {
			t.Fatalf("%s: mass %d = %v, legacy %v", what, i, p.probs[i], want.probs[i])
		}
	}
}

// plainDecayingSum is the loop decayingSum must reproduce.
func plainDecayingSum(p []float64, r float64, backward bool) float64 {
	s, c := 0.0, 1.0
	for j := range p {
		i := j
		if backward {
			i = len(p) - 1 - j
		}
		s += p[i] * c
		c *= r
	}
	return s
}

// TestDecayingSumExact: decayingSum and decayingSums equal the plain loop bit
// for bit, with factors that stay normal, decay through the subnormals to a
// fixed multiple of 2⁻¹⁰⁷⁴ or to 0 (r ≤ 1/2), and masses that the fixed
// factor rounds to 0 or does not: tiny, subnormal, 0, −0, negative, up to 1
// and large ones at every position, so that skipped and kept terms both
// occur after the factor stops.
func TestDecayingSumExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	lens := []int{0, 1, 2, 5, 3000, 20000}
	rates := []float64{1, 1 - 0x1p-53, 0.9999, 0.99, 0.93, 0.75, 0.5000001, 0.5, 0.3, 1e-3, 1e-300, 0}
	pick := func() float64 {
		switch rng.IntN(10) {
		case 0:
			return 0
		case 1:
			return math.Copysign(0, -1)
		case 2:
			return 5e-324 * float64(rng.IntN(100))
		case 3:
			return 1
		case 4:
			return rng.Float64() * 1e-300
		case 5:
			return -rng.Float64()
		case 6:
			return rng.Float64() * 1e6
		}
		return rng.Float64() * math.Pow(10, -30*rng.Float64())
	}
	var ps [][]float64
	for _, n := range lens {
		p := make([]float64, n)
		for i := range p {
			p[i] = pick()
		}
		ps = append(ps, p)
	}
	// Zeros while the factor decays, then masses in [0, 1.2) (or in
	// (−1.2, 1.2)): after the factor stops, the sum is a count of 2⁻¹⁰⁷⁴
	// that each wrongly skipped (or wrongly kept) term changes.
	for _, n := range []int{1000, 30000, 1001, 30001} {
		p := make([]float64, n)
		for i := n / 2; i < n; i++ {
			p[i] = 1.2 * rng.Float64()
			if n%2 == 1 && rng.IntN(2) == 0 {
				p[i] = -p[i]
			}
		}
		rev := make([]float64, n)
		for i, v := range p {
			rev[n-1-i] = v
		}
		ps = append(ps, p, p[:n/2+3], rev, rev[n/2-3:])
	}
	// A few large masses first, then masses whose products come near half
	// an ulp of the sum while the factor decays: the early stop (the terms
	// left cannot move the sum) must come no earlier than in the plain loop.
	for _, shift := range []float64{0x1p-40, 0x1p-53, 0x1p-60} {
		p := make([]float64, 5000)
		for i := range p {
			p[i] = shift * rng.Float64()
			if i < 3 {
				p[i] = 1 + rng.Float64()
			}
		}
		ps = append(ps, p)
	}
	for _, p := range ps {
		n := len(p)
		for _, backward := range []bool{false, true} {
			out := make([]float64, len(rates))
			in := p
			if backward {
				in = reversed(p)
			}
			decayingSums(in, rates, out)
			// Out of order, so that a group's smallest factor is not its last.
			shuffled := append([]float64(nil), rates...)
			rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			outShuffled := make([]float64, len(rates))
			decayingSums(in, shuffled, outShuffled)
			for k, r := range shuffled {
				if want := plainDecayingSum(p, r, backward); math.Float64bits(outShuffled[k]) != math.Float64bits(want) {
					t.Errorf("n = %d, r = %v, backward = %v, rates shuffled: decayingSums %v, plain loop %v", n, r, backward, outShuffled[k], want)
				}
			}
			for k, r := range rates {
				want := plainDecayingSum(p, r, backward)
				got := decayingSum(in, r, maxAbs(in), 0, 0, 1)
				if math.Float64bits(got) != math.Float64bits(want) || math.Float64bits(out[k]) != math.Float64bits(want) {
					t.Errorf("n = %d, r = %v, backward = %v: decayingSum %v, decayingSums %v, plain loop %v", n, r, backward, got, out[k], want)
				}
			}
		}
	}
}

// TestLogMGFsMatchLegacy: the kept table of logMGFs equals the former logMGF
// at every ±λ, on single steps of the Poisson Gaussian (whose large λ drive
// the factors into the subnormals for most of the grid) and on random PMFs,
// some so small that the sum falls back to log space.
func TestLogMGFsMatchLegacy(t *testing.T) {
	var pmfs []*PMF
	for _, c := range []struct{ q, sigma, interval float64 }{
		{2048.0 / 60000, 0.889923, 1e-4}, {256.0 / 60000, 1.1, 1e-3}, {0.3, 0.5, 1e-3}, {1, 2, 1e-2}, {0.01, 20, 1e-4},
	} {
		for _, d := range []Direction{Remove, Add} {
			p, err := PoissonGaussian(c.q, c.sigma, d, Options{Interval: c.interval})
			if err != nil {
				t.Fatal(err)
			}
			pmfs = append(pmfs, p)
		}
	}
	rng := rand.New(rand.NewPCG(3, 5))
	for _, scale := range []float64{1, 1e-290, 1e-320} {
		probs := make([]float64, 1+rng.IntN(5000))
		for i := range probs {
			probs[i] = scale * rng.Float64() / float64(len(probs))
		}
		pmfs = append(pmfs, &PMF{interval: 1e-3, offset: -7, probs: probs, pessimistic: true})
	}
	for n, p := range pmfs {
		tab := p.mgfs()
		for k, lam := range chernoffLambdas {
			for _, c := range []struct {
				lam float64
				got float64
			}{{lam, tab.pos[k]}, {-lam, tab.neg[k]}} {
				want := oldLogMGF(p.probs, p.interval, c.lam)
				if math.Float64bits(c.got) != math.Float64bits(want) {
					t.Errorf("PMF %d (len %d), λ = %g: table %v, legacy %v", n, p.Len(), c.lam, c.got, want)
				}
				if got := logMGF(p.probs, p.interval, c.lam); math.Float64bits(got) != math.Float64bits(want) {
					t.Errorf("PMF %d (len %d), λ = %g: logMGF %v, legacy %v", n, p.Len(), c.lam, got, want)
				}
			}
		}
	}
}

// TestPoissonGaussianMatchesLegacy: one step built in both directions from
// shared edges equals the former PoissonGaussian of each direction, bit for
// bit, over small and large q and σ and several intervals (the grid's ±Δ
// clamp included: σ = 1e3).
func TestPoissonGaussianMatchesLegacy(t *testing.T) {
	for _, q := range []float64{1e-4, 2048.0 / 60000, 0.3, 1} {
		for _, sigma := range []float64{0.4, 0.889923, 3, 1e3} {
			for _, interval := range []float64{1e-3, 5e-2} {
				o := Options{Interval: interval}
				full, _ := o.withDefaults()
				pair, err := poissonGaussianPair(q, sigma, full, [2]bool{true, true})
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range []Direction{Remove, Add} {
					want, err := oldPoissonGaussian(q, sigma, d, o)
					if err != nil {
						t.Fatal(err)
					}
					one, err := PoissonGaussian(q, sigma, d, o)
					if err != nil {
						t.Fatal(err)
					}
					what := fmt.Sprintf("q = %g, σ = %g, Δ = %g, %v", q, sigma, interval, d)
					samePMF(t, what+" (pair)", pair[d], want)
					samePMF(t, what, one, want)
				}
			}
		}
	}
}

// TestPoissonGaussianWorkers: the cells split over 1 to 7 goroutines give
// the former PoissonGaussian bit for bit, chunk boundaries and all (a fine
// grid, so that there are several chunks of 4096 cells).
func TestPoissonGaussianWorkers(t *testing.T) {
	cases := []struct{ q, sigma, interval float64 }{{2048.0 / 60000, 0.889923, 1e-4}, {0.5, 0.7, 2e-4}}
	if testing.Short() {
		cases = cases[1:]
	}
	for _, c := range cases {
		o, _ := Options{Interval: c.interval}.withDefaults()
		var want [2]*PMF
		for _, d := range []Direction{Remove, Add} {
			var err error
			if want[d], err = oldPoissonGaussian(c.q, c.sigma, d, o); err != nil {
				t.Fatal(err)
			}
		}
		if n := want[Remove].Len(); n < 3*minCellsPerWorker {
			t.Fatalf("q = %g, σ = %g: %d grid points, too few for 3 chunks", c.q, c.sigma, n)
		}
		for _, workers := range []int{1, 2, 3, 7} {
			for _, only := range [][2]bool{{true, true}, {true, false}, {false, true}} {
				got, err := poissonGaussianPairOn(c.q, c.sigma, o, only, workers)
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range []Direction{Remove, Add} {
					if !only[d] {
						if got[d] != nil {
							t.Errorf("%v built but not asked for", d)
						}
						continue
					}
					samePMF(t, fmt.Sprintf("q = %g, σ = %g, %d workers, %v", c.q, c.sigma, workers, d), got[d], want[d])
				}
			}
		}
	}
}

// TestComposeMatchesLegacy: Compose and SelfCompose, whose windows now come
// from the kept logMGF tables, equal the former convolve bit for bit.
func TestComposeMatchesLegacy(t *testing.T) {
	a, err := PoissonGaussian(0.05, 1.2, Remove, Options{Interval: 1e-3})
	if err != nil {
		t.Fatal(err)
	}
	b, err := PoissonGaussian(0.01, 0.7, Remove, Options{Interval: 1e-3})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{2, 3, 29, 1000} {
		got, err := a.SelfCompose(n)
		if err != nil {
			t.Fatal(err)
		}
		want, err := oldConvolve(a, nil, n)
		if err != nil {
			t.Fatal(err)
		}
		samePMF(t, fmt.Sprintf("SelfCompose(%d)", n), got, want)
	}
	got, err := a.Compose(b)
	if err != nil {
		t.Fatal(err)
	}
	want, err := oldConvolve(a, b, 1)
	if err != nil {
		t.Fatal(err)
	}
	samePMF(t, "Compose", got, want)
}

// TestAccountantMatchesLegacy: on a grid of (q, steps, δ, ε), the
// accountant's ε and δ, asked epoch by epoch of one accountant as a
// training run does (the step PMFs and their logMGF tables reused), equal
// those of the former code bit for bit; and σ calibrated to a grid of
// targets by privacy.CalibrateSigma is the same σ with both. The default
// grid (Δ = 1e-4) is used for the run shape of the MNIST MLP default
// (q = 2048/60000, 29 steps per epoch); the rest use Δ = 1e-2 to stay fast.
func TestAccountantMatchesLegacy(t *testing.T) {
	type run struct {
		q, sigma      float64
		perEpoch, eps int
		interval      float64
	}
	runs := []run{
		{2048.0 / 60000, 0.889923, 29, 3, 0},
		{0.01, 0.6, 100, 4, 1e-2},
		{0.2, 2, 5, 3, 1e-2},
		{1, 5, 1, 3, 1e-2},
	}
	if testing.Short() {
		runs = runs[1:]
	}
	for _, r := range runs {
		o := Options{Interval: r.interval}
		acc, err := NewPoissonAccountant(r.q, r.sigma, o)
		if err != nil {
			t.Fatal(err)
		}
		old := newLegacyAccountant(r.q, r.sigma, o)
		for e := 1; e <= r.eps; e++ {
			steps := e * r.perEpoch
			for _, delta := range []float64{1e-5, 1e-9} {
				got, err := acc.Epsilon(steps, delta)
				want, werr := old.Epsilon(steps, delta)
				if (err == nil) != (werr == nil) || math.Float64bits(got) != math.Float64bits(want) {
					t.Errorf("q = %g, σ = %g, %d steps: Epsilon(δ = %g) = %v, %v; legacy %v, %v", r.q, r.sigma, steps, delta, got, err, want, werr)
				}
			}
			for _, eps := range []float64{0, 0.5, 3, math.Inf(1)} {
				got, err := acc.Delta(steps, eps)
				want, werr := old.Delta(steps, eps)
				if (err == nil) != (werr == nil) || math.Float64bits(got) != math.Float64bits(want) {
					t.Errorf("q = %g, σ = %g, %d steps: Delta(ε = %g) = %v, %v; legacy %v, %v", r.q, r.sigma, steps, eps, got, err, want, werr)
				}
			}
		}
	}

	// Calibration: every probe of the bisection asks both accountants.
	targets := []struct {
		q     float64
		steps int
		b     privacy.Budget
	}{
		{0.01, 300, privacy.Budget{Epsilon: 2, Delta: 1e-5}},
		{0.2, 15, privacy.Budget{Epsilon: 1, Delta: 1e-6}},
		{2048.0 / 60000, 87, privacy.Budget{Epsilon: 3, Delta: 1e-5}},
	}
	if testing.Short() {
		targets = targets[:1]
	}
	o := Options{Interval: 1e-2}
	for _, c := range targets {
		got, err := privacy.CalibrateSigma(func(s float64) (privacy.Accountant, error) { return NewPoissonAccountant(c.q, s, o) }, c.steps, c.b, 0.3, 30)
		if err != nil {
			t.Fatal(err)
		}
		want, err := privacy.CalibrateSigma(func(s float64) (privacy.Accountant, error) { return newLegacyAccountant(c.q, s, o), nil }, c.steps, c.b, 0.3, 30)
		if err != nil {
			t.Fatal(err)
		}
		if math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("q = %g, %d steps, target %+v: σ = %v, legacy %v", c.q, c.steps, c.b, got, want)
		}
	}
}
