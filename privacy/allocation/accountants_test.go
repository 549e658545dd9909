package allocation

import (
	"errors"
	"math"
	"testing"

	"github.com/dpsgd/dpsgd/privacy"
)

func cfNewAll(t *testing.T, sigma float64, m int) []privacy.Accountant {
	t.Helper()
	c, err := NewChiSquareAccountant(sigma, m)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBerryEsseenAccountant(sigma, m, RhoSimplified)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRDPAccountant(sigma, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	return []privacy.Accountant{c, b, r}
}

func TestAccountantsInterface(t *testing.T) {
	names := []string{"chisq", "berry-esseen", "rdp"}
	for i, a := range cfNewAll(t, 1, 1000) {
		if a.Name() != names[i] || a.Sampler() != privacy.SamplerAllocation || a.Adjacency() != privacy.AdjacencyZeroOut {
			t.Errorf("%s: %s %s", a.Name(), a.Sampler(), a.Adjacency())
		}
		if privacy.IsApproximate(a) || privacy.IsLowerBound(a) {
			t.Errorf("%s should be a guarantee", a.Name())
		}
		if d, err := a.Delta(0, 0); err != nil || d != 0 {
			t.Errorf("%s: δ after 0 steps = %g, %v", a.Name(), d, err)
		}
		if _, err := a.Delta(-1, 0); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("%s: steps −1: %v", a.Name(), err)
		}
		for _, eps := range []float64{-1, math.NaN(), math.Inf(1)} {
			if _, err := a.Delta(10, eps); !errors.Is(err, privacy.ErrInvalidArgument) {
				t.Errorf("%s: eps %g: %v", a.Name(), eps, err)
			}
		}
		for _, d := range []float64{0, 1, math.NaN()} {
			if _, err := a.Epsilon(10, d); !errors.Is(err, privacy.ErrInvalidArgument) {
				t.Errorf("%s: delta %g: %v", a.Name(), d, err)
			}
		}
	}
}

// TestTVAccountants: Delta equals the closed forms at E = ⌈steps/M⌉ for
// every ε, Epsilon is 0 or ErrUnreachable, monotone in σ and steps, and
// the chi-square bound is far below Berry–Esseen.
func TestTVAccountants(t *testing.T) {
	const m = 1000
	c, _ := NewChiSquareAccountant(1, m)
	b, _ := NewBerryEsseenAccountant(1, m, RhoSimplified)
	for _, steps := range []int{1, 999, 1000, 1001, 5000} {
		e := (steps + m - 1) / m // ⌈steps/M⌉
		wc, _ := ChiSquareTV(1, m, e)
		wb, _ := BerryEsseenDelta(1, m, e, RhoSimplified)
		for _, eps := range []float64{0, 1, 10} {
			dc, _ := c.Delta(steps, eps)
			db, _ := b.Delta(steps, eps)
			if dc != wc || db != wb {
				t.Errorf("steps %d eps %g: %g %g, want %g %g", steps, eps, dc, db, wc, wb)
			}
		}
		if !(wc < wb) {
			t.Errorf("steps %d: chi-square %g not below Berry–Esseen %g", steps, wc, wb)
		}
		if eps, err := c.Epsilon(steps, wc); err != nil || eps != 0 {
			t.Errorf("δ = TV: %g, %v", eps, err)
		}
		if _, err := c.Epsilon(steps, wc/2); !errors.Is(err, privacy.ErrUnreachable) {
			t.Errorf("δ < TV: %v", err)
		}
		if _, err := b.Epsilon(steps, wb/2); !errors.Is(err, privacy.ErrUnreachable) {
			t.Errorf("BE δ < TV: %v", err)
		}
	}
	prevC, prevB := 0.0, 0.0
	for steps := 1; steps < 100000; steps = steps*3 + 1 {
		dc, _ := c.Delta(steps, 0)
		db, _ := b.Delta(steps, 0)
		if dc < prevC || db < prevB {
			t.Errorf("δ decreased at steps %d", steps)
		}
		prevC, prevB = dc, db
	}
	prevC, prevB = 2, 2
	for s := 0.8; s < 10; s *= 1.3 {
		ca, _ := NewChiSquareAccountant(s, m)
		ba, _ := NewBerryEsseenAccountant(s, m, RhoExact)
		dc, _ := ca.TV(5000)
		db, _ := ba.TV(5000)
		if dc > prevC || db > prevB {
			t.Errorf("δ increased in σ at %g", s)
		}
		prevC, prevB = dc, db
	}
	if _, err := NewBerryEsseenAccountant(0.4, 20000, RhoSimplified); !errors.Is(err, privacy.ErrOutOfRegime) {
		t.Errorf("out of regime: %v", err)
	}
	if _, err := NewChiSquareAccountant(-1, 10); !errors.Is(err, privacy.ErrInvalidArgument) {
		t.Errorf("σ = −1: %v", err)
	}
}

// TestRDPAccountant: ε decreases in σ, increases in steps; M = 1 is the
// plain Gaussian (matches the Poisson accountant at q = 1, per epoch);
// Delta and Epsilon are consistent; Budget.Check accepts it.
func TestRDPAccountant(t *testing.T) {
	const m = 500
	prev := math.Inf(1)
	for s := 0.6; s < 8; s *= 1.25 {
		a, err := NewRDPAccountant(s, m, nil)
		if err != nil {
			t.Fatal(err)
		}
		eps, err := a.Epsilon(20*m, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		if eps > prev {
			t.Errorf("ε increased in σ at %g: %g > %g", s, eps, prev)
		}
		prev = eps
	}
	a, _ := NewRDPAccountant(1, m, nil)
	prev = 0
	for steps := 1; steps <= 100*m; steps *= 3 {
		eps, _ := a.Epsilon(steps, 1e-5)
		if eps < prev {
			t.Errorf("ε decreased in steps at %d", steps)
		}
		prev = eps
		d, _ := a.Delta(steps, eps)
		if d > 1e-5*(1+1e-9) {
			t.Errorf("steps %d: δ(ε(1e-5)) = %g", steps, d)
		}
	}
	g, _ := NewRDPAccountant(1.3, 1, nil)
	p, _ := privacy.NewPoissonRDP(1, 1.3, DefaultRDPOrders())
	for _, e := range []int{1, 7, 100} {
		ge, _ := g.Epsilon(e, 1e-6)
		pe, _ := p.Epsilon(e, 1e-6)
		gr, _ := g.RDP(e)
		if !cfRelClose(ge, pe, 1e-12) || !cfRelClose(gr[3], float64(e)*5/(2*1.3*1.3), 1e-12) {
			t.Errorf("M = 1, E = %d: ε = %g, Gaussian RDP gives %g; RDP(α=5) = %g", e, ge, pe, gr[3])
		}
	}
	if _, ok, err := (privacy.Budget{Epsilon: 8, Delta: 1e-5}).Check(a, 10*m); err != nil || !ok {
		t.Errorf("Budget.Check: %v %v", ok, err)
	}
	if _, err := NewRDPAccountant(1, 10, []float64{2.5}); !errors.Is(err, privacy.ErrInvalidArgument) {
		t.Errorf("fractional order: %v", err)
	}
}
