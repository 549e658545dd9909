package ageaware

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/integrate/quad"
)

// enumerate calls f for every assignment of n records to pairs (x, y) of
// states (collected state x, fresh state y) with its probability under
// μ(x)·Pᵃ(x, y), independently over records.
func enumerate(mu []float64, pa [][]float64, n int, f func(xs, ys []int, prob float64)) {
	k := len(mu)
	xs, ys := make([]int, n), make([]int, n)
	var rec func(j int, prob float64)
	rec = func(j int, prob float64) {
		if prob == 0 {
			return
		}
		if j == n {
			f(xs, ys, prob)
			return
		}
		for x := 0; x < k; x++ {
			for y := 0; y < k; y++ {
				xs[j], ys[j] = x, y
				rec(j+1, prob*mu[x]*pa[x][y])
			}
		}
	}
	rec(0, 1)
}

func matPow(p [][]float64, a int) [][]float64 {
	out := identity(len(p))
	for range a {
		out = matMul(out, p)
	}
	return out
}

// miFromJoint returns I(A; B) from a joint table keyed by (a, b).
func miFromJoint(joint map[[2]int]float64) float64 {
	pa, pb := map[int]float64{}, map[int]float64{}
	for k, v := range joint {
		pa[k[0]] += v
		pb[k[1]] += v
	}
	mi := 0.0
	for k, v := range joint {
		if v > 0 {
			mi += v * math.Log(v/(pa[k[0]]*pb[k[1]]))
		}
	}
	return mi
}

// TestMutualInformationBruteForce: the lattice mutual informations of
// Theorem 1 against a direct enumeration of every record's (collected, fresh)
// states for small clients.
func TestMutualInformationBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 3))
	for trial := 0; trial < 12; trial++ {
		states := 2 + rng.IntN(2)
		n := 1 + rng.IntN(3)
		cfg := randomConfig(rng, 1, states, n, 4, DeltaExact)
		cfg.Clients[0].Samples = n
		p := mustProblem(t, cfg)
		c := p.clients[0]
		vals := cfg.Clients[0].Values
		for a := 0; a <= 4; a++ {
			pa := matPow(c.gen.Matrix(), a)
			// I(W; Z_1^agg): key (sum of collected offsets, fresh state of record 0).
			joint := map[[2]int]float64{}
			enumerate(c.mu, pa, n, func(xs, ys []int, prob float64) {
				s := 0
				for _, x := range xs {
					s += c.lat.off[x]
				}
				joint[[2]int{s, ys[0]}] += prob
			})
			if got, want := c.mi[a], miFromJoint(joint); !approxEq(got, want, 1e-9, 1e-14) {
				t.Errorf("trial %d age %d: I(W; Z) = %.15g, brute force %.15g (values %v)", trial, a, got, want, vals)
			}
			// I(W^agg; Z_1^agg): the fresh states are i.i.d. from μPᵃ.
			joint = map[[2]int]float64{}
			enumerate(c.mu, pa, n, func(xs, ys []int, prob float64) {
				s := 0
				for _, y := range ys {
					s += c.lat.off[y]
				}
				joint[[2]int{s, ys[0]}] += prob
			})
			if got, want := c.miFresh[a], miFromJoint(joint); !approxEq(got, want, 1e-9, 1e-14) {
				t.Errorf("trial %d age %d: I(W^agg; Z) = %.15g, brute force %.15g", trial, a, got, want)
			}
		}
	}
}

// clipExpect returns E[g(clip(w + N, lo, hi))] for N Laplace(η) by quadrature.
func clipExpect(g func(float64) float64, w, lo, hi, eta float64) float64 {
	if eta == 0 {
		return g(math.Min(math.Max(w, lo), hi))
	}
	f := func(n float64) float64 { return g(w+n) * math.Exp(-math.Abs(n)/eta) / (2 * eta) }
	a, b := w-lo, hi-w
	return g(lo)*0.5*math.Exp(-a/eta) + g(hi)*0.5*math.Exp(-b/eta) +
		quad.Fixed(f, -a, 0, 120, quad.Legendre{}, 0) + quad.Fixed(f, 0, b, 120, quad.Legendre{}, 0)
}

// TestExpectedLossBruteForce: the exact expected loss against enumeration of
// every record's states and quadrature over each client's Laplace noise.
func TestExpectedLossBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 5))
	for trial := 0; trial < 6; trial++ {
		cfg := randomConfig(rng, 2, 2+rng.IntN(2), 2, 3, DeltaSource(rng.IntN(3)))
		for i := range cfg.Clients {
			cfg.Clients[i].Samples = 2
		}
		p := mustProblem(t, cfg)
		for _, eps := range []float64{0.05, 0.7, 5} {
			for _, mode := range []NoiseMode{NoiseConstant, NoiseAdaptive} {
				sch := Schedule{rng.IntN(4), rng.IntN(4)}
				got, err := p.ExpectedLoss(eps, mode, sch)
				if err != nil {
					t.Fatal(err)
				}
				nz, _ := p.Noise(eps, mode, sch)
				ages := sch.Ages(p.T)
				// Per client: E[U − F] and E[(U − F)²].
				var m1, m2 [2]float64
				for k, c := range p.clients {
					pa := matPow(c.gen.Matrix(), ages[k])
					enumerate(c.mu, pa, c.n, func(xs, ys []int, prob float64) {
						w, f := 0.0, 0.0
						for j := range xs {
							w += c.values[xs[j]]
							f += c.values[ys[j]]
						}
						w /= float64(c.n)
						f /= float64(c.n)
						e1 := clipExpect(func(u float64) float64 { return u - f }, w, c.lo, c.hi, nz.Scale[k])
						e2 := clipExpect(func(u float64) float64 { return (u - f) * (u - f) }, w, c.lo, c.hi, nz.Scale[k])
						m1[k] += prob * e1
						m2[k] += prob * e2
					})
				}
				pw := p.weights
				want := pw[0]*pw[0]*m2[0] + pw[1]*pw[1]*m2[1] + 2*pw[0]*pw[1]*m1[0]*m1[1]
				if !approxEq(got, want, 1e-9, 1e-12) {
					t.Errorf("trial %d ε̄ %g %v %v: exact %.15g, brute force %.15g", trial, eps, mode, sch, got, want)
				}
			}
		}
	}
}

// TestExpectedLossMonteCarlo: the exact loss against the simulation (the
// trajectories of datasets.MarkovChain and kernels.AddLaplace noise) on the
// paper's setting, within 4.5 standard errors.
func TestExpectedLossMonteCarlo(t *testing.T) {
	p := mustProblem(t, PaperConfig())
	trials := 20000
	if testing.Short() {
		trials = 4000
	}
	s, err := p.Simulate(context.Background(), trials, 99)
	if err != nil {
		t.Fatal(err)
	}
	cache := s.newLossCache()
	for _, eps := range []float64{0.02, 0.2, 2} {
		for _, mode := range []NoiseMode{NoiseConstant, NoiseAdaptive} {
			for _, sch := range []Schedule{{0, 0, 0}, {15, 15, 15}, {5, 10, 15}, {12, 0, 3}} {
				mc, se, err := s.Loss(eps, mode, sch)
				if err != nil {
					t.Fatal(err)
				}
				ex, _ := p.ExpectedLoss(eps, mode, sch)
				if math.Abs(mc-ex) > 4.5*se+1e-9 {
					t.Errorf("ε̄ %g %v %v: Monte Carlo %.4f ± %.4f, exact %.4f", eps, mode, sch, mc, se, ex)
				}
				_, eta, _ := p.prepare(eps, mode, sch)
				if c := cache.loss(sch.Ages(p.T), eta); !approxEq(c, mc, 1e-9, 1e-12) {
					t.Errorf("cached loss %.12g, direct %.12g", c, mc)
				}
			}
		}
	}
}

// TestBoundAboveLoss: Theorem 1's bound, as evaluated, is never below the
// exact expected loss (random federations, schedules, ε̄ and modes), its
// terms are ≥ 0, and its risk term matches a Monte Carlo estimate of
// E[L̄(W̃)] − E[L̄(W^agg)].
func TestBoundAboveLoss(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 7))
	for trial := 0; trial < 40; trial++ {
		cfg := randomConfig(rng, 1+rng.IntN(3), 2+rng.IntN(3), 2+rng.IntN(30), 1+rng.IntN(6), DeltaSource(rng.IntN(3)))
		p := mustProblem(t, cfg)
		for k := 0; k < 10; k++ {
			sch := make(Schedule, p.m)
			for i := range sch {
				sch[i] = rng.IntN(p.T + 1)
			}
			eps := math.Pow(10, -2+3*rng.Float64())
			mode := NoiseMode(rng.IntN(2))
			b, err := p.Bound(eps, mode, sch)
			if err != nil {
				t.Fatal(err)
			}
			l, _ := p.ExpectedLoss(eps, mode, sch)
			if b.Total < l*(1-1e-9)-1e-9 {
				t.Fatalf("trial %d: bound %g below the exact loss %g (%v ε̄ %g %v)", trial, b.Total, l, sch, eps, mode)
			}
			for i := range b.Aged {
				if b.Aged[i] < 0 || b.Fresh[i] < 0 {
					t.Fatalf("negative term %v %v", b.Aged, b.Fresh)
				}
			}
		}
	}
	// Risk term against Monte Carlo on the paper's setting.
	p := mustProblem(t, PaperConfig())
	s, err := p.Simulate(context.Background(), 20000, 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, sch := range []Schedule{{3, 9, 14}, {15, 0, 7}} {
		for _, eps := range []float64{0.05, 1} {
			b, _ := p.Bound(eps, NoiseAdaptive, sch)
			_, eta, _ := p.prepare(eps, NoiseAdaptive, sch)
			ages := sch.Ages(p.T)
			mbar := 0.0
			for k, c := range p.clients {
				mbar += p.weights[k] * c.freshMean[ages[k]]
			}
			var w welford
			L := p.T + 1
			for tr := 0; tr < s.trials; tr++ {
				wt, wa := 0.0, 0.0
				for k, c := range p.clients {
					u := math.Min(math.Max(s.w[tr*p.m+k]+eta[k]*s.lap[tr*p.m+k], c.lo), c.hi)
					wt += p.weights[k] * u
					wa += p.weights[k] * s.f[(tr*p.m+k)*L+ages[k]]
				}
				w.add((wt-mbar)*(wt-mbar) - (wa-mbar)*(wa-mbar))
			}
			if math.Abs(w.mean-b.Risk) > 4.5*w.stderr() {
				t.Errorf("%v ε̄ %g: risk %.4f, Monte Carlo %.4f ± %.4f", sch, eps, b.Risk, w.mean, w.stderr())
			}
		}
	}
}
