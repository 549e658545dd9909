package ageaware

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/dpsgd/dpsgd/internal/seedmix"
)

func agesKey(ages []int) int {
	k := 0
	for _, a := range ages {
		k = k*64 + a
	}
	return k
}

// TestExhaustiveFindsMinimum: against a brute-force scan of a random table.
func TestExhaustiveFindsMinimum(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 11))
	cfg := randomConfig(rng, 3, 2, 2, 4, DeltaExact)
	p := mustProblem(t, cfg)
	table := map[int]float64{}
	bestV := math.Inf(1)
	allAges(3, 4, func(ages []int) {
		v := float64(rng.IntN(1000))
		table[agesKey(ages)] = v
		if v < bestV {
			bestV = v
		}
	})
	r, err := p.Exhaustive(context.Background(), func(ages []int) float64 { return table[agesKey(ages)] })
	if err != nil {
		t.Fatal(err)
	}
	if r.Value != bestV || table[agesKey(r.Schedule.Ages(4))] != bestV || r.Evaluations != 125 {
		t.Fatalf("got %v %g (%d evaluations), want value %g", r.Schedule, r.Value, r.Evaluations, bestV)
	}
	// Ties go to the lexicographically first collection times.
	r, _ = p.Exhaustive(context.Background(), func([]int) float64 { return 1 })
	if !reflect.DeepEqual(r.Schedule, Schedule{0, 0, 0}) {
		t.Errorf("tie: %v, want [0 0 0]", r.Schedule)
	}
}

// TestCoordinateDescentSeparable: on an objective that is a sum of per-client
// functions coordinate descent is exact.
func TestCoordinateDescentSeparable(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	for trial := 0; trial < 20; trial++ {
		m, T := 2+rng.IntN(4), 1+rng.IntN(6)
		p := mustProblem(t, randomConfig(rng, m, 2, 2, T, DeltaExact))
		f := make([][]float64, m)
		for i := range f {
			f[i] = make([]float64, T+1)
			for a := range f[i] {
				f[i][a] = rng.NormFloat64()
			}
		}
		obj := func(ages []int) float64 {
			s := 0.0
			for i, a := range ages {
				s += f[i][a]
			}
			return s
		}
		ex, _ := p.Exhaustive(context.Background(), obj)
		cd, err := p.CoordinateDescent(context.Background(), obj, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !approxEq(ex.Value, cd.Value, 1e-12, 1e-12) {
			t.Fatalf("separable: exhaustive %g, coordinate descent %g", ex.Value, cd.Value)
		}
	}
}

// TestCoordinateDescentVersusExhaustive: on Theorem 1's bound and on the exact
// loss of random federations with m = 3…5 clients, coordinate descent ends at
// a coordinatewise minimum that is never better than the exhaustive optimum;
// how often it finds the optimum, and how much faster it is, is logged.
func TestCoordinateDescentVersusExhaustive(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 15))
	trials := 30
	if testing.Short() {
		trials = 8
	}
	var agree, total int
	var worst float64
	var tEx, tCD time.Duration
	var evEx, evCD int
	for trial := 0; trial < trials; trial++ {
		m := 3 + trial%3
		T := 4 + rng.IntN(3)
		p := mustProblem(t, randomConfig(rng, m, 2+rng.IntN(3), 10+rng.IntN(40), T, DeltaSource(rng.IntN(3))))
		lv, _ := p.level(math.Pow(10, -2+2*rng.Float64()))
		epsC, eta := make([]float64, m), make([]float64, m)
		for _, mode := range []NoiseMode{NoiseConstant, NoiseAdaptive} {
			for _, kind := range []string{"bound", "exact"} {
				obj := func(ages []int) float64 {
					p.scales(lv, mode, ages, epsC, eta)
					if kind == "bound" {
						return p.bound(ages, eta, nil)
					}
					return p.expectedLoss(ages, eta)
				}
				t0 := time.Now()
				ex, err := p.Exhaustive(context.Background(), obj)
				if err != nil {
					t.Fatal(err)
				}
				t1 := time.Now()
				cd, err := p.CoordinateDescent(context.Background(), obj, nil)
				if err != nil {
					t.Fatal(err)
				}
				tEx += t1.Sub(t0)
				tCD += time.Since(t1)
				evEx += ex.Evaluations
				evCD += cd.Evaluations
				if cd.Value < ex.Value*(1-1e-12) {
					t.Fatalf("coordinate descent %g below the exhaustive optimum %g", cd.Value, ex.Value)
				}
				// Coordinatewise minimum.
				ages := cd.Schedule.Ages(p.T)
				if v := obj(ages); !approxEq(v, cd.Value, 1e-12, 0) {
					t.Fatalf("reported value %g, objective %g", cd.Value, v)
				}
				for i := range ages {
					keep := ages[i]
					for a := 0; a <= p.T; a++ {
						ages[i] = a
						if v := obj(ages); v < cd.Value*(1-1e-9) {
							t.Fatalf("client %d can improve alone: %g < %g", i, v, cd.Value)
						}
					}
					ages[i] = keep
				}
				total++
				if approxEq(cd.Value, ex.Value, 1e-9, 0) {
					agree++
				}
				worst = math.Max(worst, (cd.Value-ex.Value)/math.Max(math.Abs(ex.Value), 1e-300))
			}
		}
	}
	t.Logf("coordinate descent found the exhaustive optimum in %d of %d searches (m = 3…5); worst relative excess %.3g; evaluations %d vs %d; time %v vs %v", agree, total, worst, evCD, evEx, tCD, tEx)
	if agree < total/2 {
		t.Errorf("coordinate descent agreed in only %d of %d searches", agree, total)
	}
}

// TestSearchErrors: too many schedules for the exhaustive search, and
// cancellation.
func TestSearchErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 17))
	p := mustProblem(t, randomConfig(rng, 30, 2, 2, 3, DeltaExact))
	if _, err := p.Exhaustive(context.Background(), func([]int) float64 { return 0 }); err == nil {
		t.Error("4^30 schedules accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	q := mustProblem(t, PaperConfig())
	if _, err := q.Exhaustive(ctx, func([]int) float64 { return 0 }); !errors.Is(err, context.Canceled) {
		t.Errorf("exhaustive: %v", err)
	}
	if _, err := q.CoordinateDescent(ctx, func([]int) float64 { return 0 }, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("coordinate descent: %v", err)
	}
	if _, err := q.Run(ctx, RunConfig{Eps: []float64{1}, Trials: 10}); !errors.Is(err, context.Canceled) {
		t.Errorf("run: %v", err)
	}
	if _, err := q.Simulate(ctx, 1000, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("simulate: %v", err)
	}
}

// TestSimulateDeterministic: the same seed gives the same Sample with one
// goroutine or several.
func TestSimulateDeterministic(t *testing.T) {
	p := mustProblem(t, PaperConfig())
	a, err := p.Simulate(context.Background(), 500, 3)
	if err != nil {
		t.Fatal(err)
	}
	old := runtime.GOMAXPROCS(1)
	b, err := p.Simulate(context.Background(), 500, 3)
	runtime.GOMAXPROCS(old)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.w, b.w) || !reflect.DeepEqual(a.f, b.f) || !reflect.DeepEqual(a.lap, b.lap) {
		t.Error("Simulate depends on the number of goroutines")
	}
	c, _ := p.Simulate(context.Background(), 500, 4)
	if reflect.DeepEqual(a.w, c.w) {
		t.Error("different seeds, same sample")
	}
}

// TestRun: reproducible; the proposed schedule minimizes the bound and the
// optimal one the search sample's loss (checked by separate exhaustive
// scans); every scheme meets ε̄; for random scheduling (the same schedules
// in both modes) constant noise has at least the adaptive noise power.
func TestRun(t *testing.T) {
	p := mustProblem(t, PaperConfig())
	cfg := RunConfig{Eps: []float64{0.03, 0.5}, Trials: 300, SearchTrials: 200, Seed: 7}
	calls := 0
	cfg.Progress = func(done, total int) {
		calls++
		if done != calls || total != 12 {
			t.Errorf("progress %d/%d at call %d", done, total, calls)
		}
	}
	r1, err := p.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Progress = nil
	r2, _ := p.Run(context.Background(), cfg)
	if fmt.Sprint(r1.Points) != fmt.Sprint(r2.Points) { // NaN fields defeat reflect.DeepEqual
		t.Error("same seed, different results")
	}
	search, _ := p.Simulate(context.Background(), 200, seedmix.Next(7^0x7365_6172_6368))
	for _, pt := range r1.Points {
		if pt.Scheme.Scheduling == SchedRandom {
			continue
		}
		n, err := p.Noise(pt.Eps, pt.Scheme.Noise, pt.Schedule)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range n.Epsilon {
			if e > pt.Eps*(1+1e-12) {
				t.Errorf("%v at ε̄ %g: client level %g", pt.Scheme, pt.Eps, e)
			}
		}
		best := math.Inf(1)
		allAges(3, 15, func(ages []int) {
			sch := agesToSchedule(ages, 15)
			var v float64
			if pt.Scheme.Scheduling == SchedProposed {
				b, _ := p.Bound(pt.Eps, pt.Scheme.Noise, sch)
				v = b.Total
			} else {
				v, _, _ = search.Loss(pt.Eps, pt.Scheme.Noise, sch)
			}
			best = math.Min(best, v)
		})
		var got float64
		if pt.Scheme.Scheduling == SchedProposed {
			got = pt.Bound
		} else {
			got, _, _ = search.Loss(pt.Eps, pt.Scheme.Noise, pt.Schedule)
		}
		if !approxEq(got, best, 1e-9, 1e-12) {
			t.Errorf("%v at ε̄ %g: schedule %v scores %g, best %g", pt.Scheme, pt.Eps, pt.Schedule, got, best)
		}
		if pt.Bound < pt.ExactLoss {
			t.Errorf("%v: bound %g below the exact loss %g", pt.Scheme, pt.Bound, pt.ExactLoss)
		}
	}
	for i := 0; i+1 < len(r1.Points); i++ {
		a, b := r1.Points[i], r1.Points[i+1]
		if a.Scheme.Scheduling == SchedRandom && b.Scheme.Scheduling == SchedRandom && a.NoisePower < b.NoisePower {
			t.Errorf("random scheduling at ε̄ %g: constant noise power %g below adaptive %g", a.Eps, a.NoisePower, b.NoisePower)
		}
	}
	if _, err := p.Run(context.Background(), RunConfig{Eps: []float64{-1}, Trials: 10}); err == nil {
		t.Error("ε̄ = −1 accepted")
	}
	if _, err := p.Run(context.Background(), RunConfig{Eps: []float64{1}, Trials: 1}); err == nil {
		t.Error("Trials = 1 accepted")
	}
}
