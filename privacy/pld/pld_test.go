package pld

import (
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/dpsgd/dpsgd/privacy"
)

// opacusOrders is the Rényi order grid of Opacus's RDP accountant:
// 1.1, 1.2, …, 10.9 and 12, …, 63.
func opacusOrders() []float64 {
	var o []float64
	for x := 1; x < 100; x++ {
		o = append(o, 1+float64(x)/10)
	}
	for a := 12; a < 64; a++ {
		o = append(o, float64(a))
	}
	return o
}

func mustAcc(t testing.TB, q, sigma float64, opts ...Options) *PoissonAccountant {
	t.Helper()
	a, err := NewPoissonAccountant(q, sigma, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustEps(t testing.TB, a privacy.Accountant, steps int, delta float64) float64 {
	t.Helper()
	e, err := a.Epsilon(steps, delta)
	if err != nil {
		t.Fatalf("%s Epsilon(%d, %g): %v", a.Name(), steps, delta, err)
	}
	return e
}

// Opacus's RDP unit test: q = 0.04, σ = 1.5, 2250 steps, δ = 1e-5 gives RDP
// ε = 7.32911117143 and PRV ε = 6.7774 (an upper estimate, eps_error 0.01);
// an independent PLD implementation gives 6.769.
func TestOpacusAnchor(t *testing.T) {
	const q, sigma, steps, delta = 0.04, 1.5, 2250, 1e-5
	eps := mustEps(t, mustAcc(t, q, sigma), steps, delta)
	r, err := privacy.NewPoissonRDP(q, sigma, opacusOrders())
	if err != nil {
		t.Fatal(err)
	}
	rdp := mustEps(t, r, steps, delta)
	if math.Abs(rdp-7.32911117143) > 1e-9 {
		t.Errorf("RDP oracle = %.11f, want 7.32911117143", rdp)
	}
	if !(eps <= rdp) {
		t.Errorf("PLD ε = %.6f above RDP ε = %.6f", eps, rdp)
	}
	if eps < 6.75 || eps > 6.7774+0.01 {
		t.Errorf("PLD ε = %.6f, want about 6.769 (PRV 6.7774 ± 0.01)", eps)
	}
}

// PLD ε (δ = 1e-5) of the TF and Opacus MNIST settings,
// from an independent implementation, to 2 decimals.
func TestAnchorsTable(t *testing.T) {
	cases := []struct {
		q, sigma float64
		steps    int
		want     float64
	}{
		{256.0 / 60000, 1.1, 14063, 2.38},
		{256.0 / 60000, 1.3, 3516, 0.86},
		{256.0 / 60000, 0.7, 10547, 5.64},
		{240.0 / 60000, 1.1, 15000, 2.30},
		{240.0 / 60000, 1.3, 3750, 0.83},
		{240.0 / 60000, 0.7, 11250, 5.43},
	}
	if testing.Short() {
		cases = cases[:2]
	}
	for _, c := range cases {
		eps := mustEps(t, mustAcc(t, c.q, c.sigma), c.steps, 1e-5)
		r, _ := privacy.NewPoissonRDP(c.q, c.sigma, nil)
		rdp := mustEps(t, r, c.steps, 1e-5)
		if math.Abs(eps-c.want) > 0.006 {
			t.Errorf("q=%g σ=%g T=%d: PLD ε = %.4f, want %.2f", c.q, c.sigma, c.steps, eps, c.want)
		}
		if !(eps < rdp) {
			t.Errorf("q=%g σ=%g T=%d: PLD ε = %.4f not below RDP %.4f", c.q, c.sigma, c.steps, eps, rdp)
		}
	}
}

// dp_accounting: the Gaussian mechanism with σ = √3 composed 3 times is
// 1-GDP, δ(1) = 0.126936; privacy.GaussianDelta(1, 1) is the exact value.
// The pessimistic PLD must be at or above it and within 1e-5.
func TestGaussianComposedAnchor(t *testing.T) {
	a := mustAcc(t, 1, math.Sqrt(3))
	d, err := a.Delta(3, 1)
	if err != nil {
		t.Fatal(err)
	}
	exact, _ := privacy.GaussianDelta(1, 1)
	if math.Abs(exact-0.126936) > 1e-6 {
		t.Fatalf("oracle GaussianDelta(1, 1) = %.7f, want 0.126936", exact)
	}
	if d < exact || d > exact+1e-5 {
		t.Errorf("PLD δ(1) = %.8f, exact %.8f", d, exact)
	}
}

// q = 1 composed n times is exactly (√n/σ)-GDP: the FFT self-composition at
// large n (roundoff, Chernoff window) must stay at or above the exact δ and
// close to it, and ε at or above the exact one.
func TestSelfComposeMatchesGDP(t *testing.T) {
	cases := []struct {
		sigma float64
		n     int
	}{{10, 100}, {100, 10000}, {20, 1600}, {3, 2}}
	for _, c := range cases {
		a := mustAcc(t, 1, c.sigma)
		mu := math.Sqrt(float64(c.n)) / c.sigma
		for _, eps := range []float64{0, 0.5, 1, 2, 4} {
			d, err := a.Delta(c.n, eps)
			if err != nil {
				t.Fatal(err)
			}
			exact, _ := privacy.GaussianDelta(mu, eps)
			if d < exact || d > exact+2e-5*math.Max(1, 1/mu) {
				t.Errorf("σ=%g n=%d ε=%g: PLD δ = %.10g, exact %.10g", c.sigma, c.n, eps, d, exact)
			}
		}
		for _, delta := range []float64{1e-3, 1e-6, 1e-10} {
			e := mustEps(t, a, c.n, delta)
			exact, _ := privacy.GaussianEpsilon(mu, delta)
			if e < exact-1e-9 || e > exact+2e-3 {
				t.Errorf("σ=%g n=%d δ=%g: PLD ε = %.8f, exact %.8f", c.sigma, c.n, delta, e, exact)
			}
		}
	}
}

// dp_accounting: the smallest σ for ε = 1, δ = 1e-5, q = 0.01, one step is
// 0.67379294682. CalibrateSigma returns σ within 1e-4 relative that meets
// the target; a pessimistic PLD may only need slightly more.
func TestCalibrateSigmaAnchor(t *testing.T) {
	const want = 0.67379294682
	newAcc := func(s float64) (privacy.Accountant, error) { return NewPoissonAccountant(0.01, s) }
	s, err := privacy.CalibrateSigma(newAcc, 1, privacy.Budget{Epsilon: 1, Delta: 1e-5}, 0.6, 0.75)
	if err != nil {
		t.Fatal(err)
	}
	if s < want*(1-1.01e-4) || s > want*(1+5e-4) {
		t.Errorf("calibrated σ = %.8f, want %.8f", s, want)
	}
}

// PLD ≤ RDP over a grid of settings (PLD is tighter), and the ε is positive.
func TestBelowRDPGrid(t *testing.T) {
	qs := []float64{0.001, 0.02, 0.2, 1}
	sigmas := []float64{0.8, 1.5, 4}
	steps := []int{1, 30, 1000}
	if testing.Short() {
		qs, steps = []float64{0.02, 1}, []int{1, 100}
	}
	for _, q := range qs {
		for _, s := range sigmas {
			a := mustAcc(t, q, s, Options{Interval: 2e-4})
			r, _ := privacy.NewPoissonRDP(q, s, nil)
			for _, n := range steps {
				if q == 1 && n > 30 {
					continue // no subsampling: a 40-GDP PLD over 10⁶ grid points, slow and uninformative
				}
				for _, delta := range []float64{1e-5, 1e-9} {
					e := mustEps(t, a, n, delta)
					er := mustEps(t, r, n, delta)
					if !(e <= er+1e-9) || !(e >= 0) {
						t.Errorf("q=%g σ=%g T=%d δ=%g: PLD ε = %.6f, RDP ε = %.6f", q, s, n, delta, e, er)
					}
				}
			}
		}
	}
}

// Monte Carlo of the privacy loss: for T steps the loss is a sum of i.i.d.
// per-step losses ln(dP/dQ)(x), written here from the two densities (not
// from the package's formula); δ(ε) = E_P[(1 − e^{ε−S})₊]. The PLD must be
// at or above the estimate minus 4 standard errors, and close to it.
func TestMonteCarloLoss(t *testing.T) {
	const q, sigma, steps = 0.1, 1.0, 40
	n := 200000
	if testing.Short() {
		n = 50000
	}
	a := mustAcc(t, q, sigma)
	rem, add, err := a.PLDs(steps)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	logPhi := func(z float64) float64 { return -0.5 * z * z }
	mix := func(x float64) float64 { // ln of the mixture density over N(0) density
		a, b := math.Log1p(-q)+logPhi(x/sigma), math.Log(q)+logPhi((x-1)/sigma)
		m := math.Max(a, b)
		return m + math.Log(math.Exp(a-m)+math.Exp(b-m)) - logPhi(x/sigma)
	}
	epss := []float64{0, 0.5, 1, 1.5}
	for dir, pmf := range []*PMF{rem, add} {
		sums := make([]float64, n)
		for i := range sums {
			var s float64
			for k := 0; k < steps; k++ {
				x := sigma * rng.NormFloat64()
				if dir == 0 {
					if rng.Float64() < q {
						x++
					}
					s += mix(x)
				} else {
					s -= mix(x)
				}
			}
			sums[i] = s
		}
		for _, eps := range epss {
			var m, m2 float64
			for _, s := range sums {
				v := math.Max(0, -math.Expm1(eps-s))
				m += v
				m2 += v * v
			}
			m /= float64(n)
			se := math.Sqrt((m2/float64(n) - m*m) / float64(n))
			d, _ := pmf.DeltaForEpsilon(eps)
			if d < m-4*se || d > m+4*se+1e-3*m {
				t.Errorf("%v ε=%g: PLD δ = %.6g, Monte Carlo %.6g ± %.2g", Direction(dir), eps, d, m, se)
			}
		}
	}
}

// A finer grid (aligned: the coarse grid is a subgrid) is never above the
// coarser one (connect-the-dots refines), and the two are close.
func TestFinerGrid(t *testing.T) {
	const q, sigma, steps = 0.05, 1.0, 300
	coarse := mustAcc(t, q, sigma, Options{Interval: 1e-3})
	fine := mustAcc(t, q, sigma, Options{Interval: 1.25e-4})
	for _, eps := range []float64{0, 0.3, 1, 2, 3} {
		dc, _ := coarse.Delta(steps, eps)
		df, _ := fine.Delta(steps, eps)
		if dc < df-1e-12 || dc > df*1.02+1e-12 {
			t.Errorf("ε=%g: coarse δ = %.8g, fine δ = %.8g", eps, dc, df)
		}
	}
	for _, delta := range []float64{1e-3, 1e-5, 1e-8} {
		ec, ef := mustEps(t, coarse, steps, delta), mustEps(t, fine, steps, delta)
		if ec < ef-1e-9 || ec > ef+0.01 {
			t.Errorf("δ=%g: coarse ε = %.6f, fine ε = %.6f", delta, ec, ef)
		}
	}
}

// Properties: ε decreases in σ, increases in steps; Delta and Epsilon are
// inverse to each other (conservatively).
func TestMonotoneAndRoundTrip(t *testing.T) {
	const q, delta = 0.01, 1e-6
	prev := math.Inf(1)
	for _, s := range []float64{0.7, 0.9, 1.2, 2, 4} {
		e := mustEps(t, mustAcc(t, q, s), 500, delta)
		if !(e < prev) {
			t.Errorf("σ=%g: ε = %g not below %g", s, e, prev)
		}
		prev = e
	}
	a := mustAcc(t, q, 1)
	prev = 0
	for _, n := range []int{1, 10, 100, 1000} {
		e := mustEps(t, a, n, delta)
		if !(e > prev) {
			t.Errorf("steps=%d: ε = %g not above %g", n, e, prev)
		}
		prev = e
		d, err := a.Delta(n, e)
		if err != nil {
			t.Fatal(err)
		}
		if d > delta || d < delta*(1-1e-6) {
			t.Errorf("steps=%d: Delta(Epsilon(δ)) = %.10g, δ = %g", n, d, delta)
		}
		if d2, _ := a.Delta(n, e*(1-1e-6)); !(d2 > delta) {
			t.Errorf("steps=%d: δ just below ε = %g is %g, not above δ", n, e, d2)
		}
	}
	if e, _ := a.Epsilon(0, delta); e != 0 {
		t.Errorf("Epsilon(0) = %g", e)
	}
	if d, _ := a.Delta(0, 0); d != 0 {
		t.Errorf("Delta(0, 0) = %g", d)
	}
}

// Compose agrees with SelfCompose; the identity is neutral; composition
// adds up (δ of the composition of two different mechanisms equals that of
// the GDP they compose to).
func TestCompose(t *testing.T) {
	p, err := PoissonGaussian(1, 2, Remove, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p3, _ := p.SelfCompose(3)
	pp, _ := p.Compose(p)
	ppp, _ := pp.Compose(p)
	id, _ := Identity(p.Interval(), true)
	pid, _ := p.Compose(id)
	g, _ := PoissonGaussian(1, 1.5, Remove, Options{})
	pg, _ := p.Compose(g)
	muPG := math.Hypot(1/2.0, 1/1.5)
	for _, eps := range []float64{0, 0.5, 1, 2} {
		a, _ := p3.DeltaForEpsilon(eps)
		b, _ := ppp.DeltaForEpsilon(eps)
		if math.Abs(a-b) > 1e-12 {
			t.Errorf("ε=%g: SelfCompose(3) δ = %.14g, Compose twice %.14g", eps, a, b)
		}
		c, _ := p.DeltaForEpsilon(eps)
		d, _ := pid.DeltaForEpsilon(eps)
		if math.Abs(c-d) > 1e-13 {
			t.Errorf("ε=%g: identity changes δ: %.14g vs %.14g", eps, c, d)
		}
		e, _ := pg.DeltaForEpsilon(eps)
		exact, _ := privacy.GaussianDelta(muPG, eps)
		if e < exact || e > exact+1e-5 {
			t.Errorf("ε=%g: Gaussian σ=2 ∘ σ=1.5: δ = %.10g, exact %.10g", eps, e, exact)
		}
	}
	if p0, _ := p.SelfCompose(0); p0.Len() != 1 {
		t.Errorf("SelfCompose(0) has %d grid points, want 1", p0.Len())
	}
	opt, _ := Identity(p.Interval(), false)
	if _, err := p.Compose(opt); !errors.Is(err, privacy.ErrInvalidArgument) {
		t.Errorf("pessimistic ∘ optimistic: err = %v", err)
	}
	q, _ := PoissonGaussian(1, 2, Remove, Options{Interval: 1e-3})
	if _, err := p.Compose(q); !errors.Is(err, privacy.ErrInvalidArgument) {
		t.Errorf("different intervals: err = %v", err)
	}
}

// FromLosses rounds up (pessimistic) or down (optimistic): δ brackets the
// δ of the exact discrete distribution, and ε(δ) is exact on the grid.
func TestFromLossesRounding(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 20; trial++ {
		n := 1 + rng.IntN(50)
		losses, masses := make([]float64, n), make([]float64, n)
		var tot float64
		for i := range losses {
			losses[i] = 6*rng.Float64() - 2
			masses[i] = rng.Float64()
			tot += masses[i]
		}
		inf := 0.01 * rng.Float64()
		for i := range masses {
			masses[i] *= (1 - inf) / tot
		}
		pess, err := FromLosses(losses, masses, inf, 0.01, true)
		if err != nil {
			t.Fatal(err)
		}
		opt, _ := FromLosses(losses, masses, inf, 0.01, false)
		for _, eps := range []float64{-1, 0, 0.25, 1, 2.5} {
			exact := inf
			for i, l := range losses {
				exact += masses[i] * math.Max(0, -math.Expm1(eps-l))
			}
			dp, _ := pess.DeltaForEpsilon(eps)
			do, _ := opt.DeltaForEpsilon(eps)
			if dp < exact-1e-14 || do > exact+1e-14 || dp-do > 0.05 {
				t.Errorf("trial %d ε=%g: optimistic %.10g ≤ exact %.10g ≤ pessimistic %.10g violated", trial, eps, do, exact, dp)
			}
		}
		for _, delta := range []float64{0.3, 0.1, 0.03} {
			if delta <= inf {
				continue
			}
			e, err := pess.EpsilonForDelta(delta)
			if err != nil {
				t.Fatal(err)
			}
			d, _ := pess.DeltaForEpsilon(e)
			if d > delta {
				t.Errorf("trial %d: δ(ε(%g)) = %.15g above", trial, delta, d)
			}
			if e > 0 {
				if d2, _ := pess.DeltaForEpsilon(e * (1 - 1e-9)); d2 <= delta {
					t.Errorf("trial %d: ε(%g) = %g is not the smallest", trial, delta, e)
				}
			}
		}
	}
	// All mass at +∞ beyond the target: unreachable.
	p, _ := FromLosses([]float64{0.5, math.Inf(1)}, []float64{0.5, 0.5}, 0, 0.01, true)
	if _, err := p.EpsilonForDelta(0.1); !errors.Is(err, privacy.ErrUnreachable) {
		t.Errorf("δ below the mass at infinity: err = %v", err)
	}
	if p.InfinityMass() != 0.5 {
		t.Errorf("a +Inf loss did not go to the infinity mass: %g", p.InfinityMass())
	}
}

func TestBadInput(t *testing.T) {
	for _, c := range []struct{ q, s float64 }{
		{0, 1}, {-0.1, 1}, {1.5, 1}, {math.NaN(), 1}, {0.1, 0}, {0.1, -1}, {0.1, math.NaN()}, {0.1, math.Inf(1)},
	} {
		if _, err := NewPoissonAccountant(c.q, c.s); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("q=%g σ=%g: err = %v", c.q, c.s, err)
		}
	}
	for _, o := range []Options{{Interval: -1}, {Interval: math.NaN()}, {Interval: 2}, {TailMass: 0.5}, {TailMass: -1}} {
		if _, err := NewPoissonAccountant(0.1, 1, o); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("%+v: err = %v", o, err)
		}
	}
	if _, err := NewPoissonAccountant(0.1, 1, Options{}, Options{}); !errors.Is(err, privacy.ErrInvalidArgument) {
		t.Errorf("two Options: err = %v", err)
	}
	a := mustAcc(t, 0.1, 1)
	for _, d := range []float64{0, 1, -1, math.NaN(), math.Inf(1)} {
		if _, err := a.Epsilon(10, d); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("δ=%g: err = %v", d, err)
		}
	}
	if _, err := a.Epsilon(-1, 1e-5); !errors.Is(err, privacy.ErrInvalidArgument) {
		t.Errorf("steps=-1: err = %v", err)
	}
	for _, e := range []float64{-1, math.NaN()} {
		if _, err := a.Delta(10, e); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("ε=%g: err = %v", e, err)
		}
	}
	if d, err := a.Delta(10, math.Inf(1)); err != nil || math.IsNaN(d) || d > 1e-12 {
		t.Errorf("δ(+Inf) = %g, %v", d, err)
	}
	if _, err := a.Delta(-2, 1); !errors.Is(err, privacy.ErrInvalidArgument) {
		t.Errorf("steps=-2: err = %v", err)
	}
	if _, err := PoissonGaussian(0.1, 1, Direction(7), Options{}); !errors.Is(err, privacy.ErrInvalidArgument) {
		t.Errorf("bad direction: err = %v", err)
	}
	if _, err := FromLosses([]float64{1}, []float64{2}, 0, 0.1, true); !errors.Is(err, privacy.ErrInvalidArgument) {
		t.Errorf("mass 2: err = %v", err)
	}
	if _, err := FromLosses([]float64{math.NaN()}, []float64{0.1}, 0, 0.1, true); !errors.Is(err, privacy.ErrInvalidArgument) {
		t.Errorf("NaN loss: err = %v", err)
	}
	if _, err := FromLosses([]float64{1, 2}, []float64{0.1}, 0, 0.1, true); !errors.Is(err, privacy.ErrInvalidArgument) {
		t.Errorf("length mismatch: err = %v", err)
	}
	if _, err := FromLosses(nil, nil, 0, 0, true); !errors.Is(err, privacy.ErrInvalidArgument) {
		t.Errorf("interval 0: err = %v", err)
	}
	p, _ := PoissonGaussian(0.1, 1, Remove, Options{})
	if _, err := p.SelfCompose(-1); !errors.Is(err, privacy.ErrInvalidArgument) {
		t.Errorf("SelfCompose(-1): err = %v", err)
	}
	if _, err := p.DeltaForEpsilon(math.NaN()); !errors.Is(err, privacy.ErrInvalidArgument) {
		t.Errorf("DeltaForEpsilon(NaN): err = %v", err)
	}
	// A tiny σ needs a coarser grid; the accountant coarsens by itself and
	// still answers (finite, no panic).
	tiny := mustAcc(t, 1, 0.02)
	if e, err := tiny.Epsilon(1, 1e-5); err != nil || math.IsNaN(e) || math.IsInf(e, 0) {
		t.Errorf("σ = 0.02: ε = %g, %v", e, err)
	}
}

func TestAccountantInterface(t *testing.T) {
	a := mustAcc(t, 0.01, 1)
	if a.Name() != "pld" || a.Sampler() != privacy.SamplerPoisson || a.Adjacency() != privacy.AdjacencyAddRemove {
		t.Errorf("Name/Sampler/Adjacency = %q/%q/%q", a.Name(), a.Sampler(), a.Adjacency())
	}
	if privacy.IsApproximate(a) || privacy.IsLowerBound(a) {
		t.Error("PLD accountant declares itself approximate or a lower bound")
	}
	eps, ok, err := privacy.Budget{Epsilon: 10, Delta: 1e-5}.Check(a, 100)
	if err != nil || !ok || !(eps > 0) {
		t.Errorf("Budget.Check = %g, %v, %v", eps, ok, err)
	}
	// Concurrent use: the same answers from many goroutines.
	want := mustEps(t, a, 200, 1e-5)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			steps := 200
			if g%2 == 1 {
				steps = 100 + g
			}
			e, err := a.Epsilon(steps, 1e-5)
			if err != nil || (steps == 200 && e != want) {
				t.Errorf("goroutine %d: ε = %g, %v (want %g)", g, e, err, want)
			}
		}(g)
	}
	wg.Wait()
}

// BenchmarkPoissonMNIST is the speed target: Poisson PLD for 14,063 steps
// (q = 256/60000, σ = 1.1), from scratch (discretization, both directions,
// composition, ε), under 2 s on one core.
func BenchmarkPoissonMNIST(b *testing.B) {
	for b.Loop() {
		a, _ := NewPoissonAccountant(256.0/60000, 1.1)
		if _, err := a.Epsilon(14063, 1e-5); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEpsilonCached is a repeated ε query at a cached step count.
func BenchmarkEpsilonCached(b *testing.B) {
	a, _ := NewPoissonAccountant(256.0/60000, 1.1)
	a.Epsilon(14063, 1e-5)
	for b.Loop() {
		a.Epsilon(14063, 1e-5)
	}
}

func BenchmarkPoissonGaussianPMF(b *testing.B) {
	for b.Loop() {
		PoissonGaussian(256.0/60000, 1.1, Remove, Options{})
	}
}

func BenchmarkSelfCompose(b *testing.B) {
	p, _ := PoissonGaussian(256.0/60000, 1.1, Remove, Options{})
	for b.Loop() {
		p.SelfCompose(14063)
	}
}
