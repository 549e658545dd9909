package privacy

import (
	"errors"
	"math"
	"testing"

	"gonum.org/v1/gonum/integrate/quad"
	"gonum.org/v1/gonum/stat/distuv"
)

// gaussPair is an ideal accountant for one Gaussian mechanism of sensitivity/σ = mu, by the
// exact formula of Balle & Wang 2018 (independent of the accountants under test).
type gaussPair struct{ mu float64 }

func (g gaussPair) Name() string      { return "gauss-pair" }
func (g gaussPair) Sampler() string   { return SamplerShuffle }
func (g gaussPair) Adjacency() string { return AdjacencyZeroOut }
func (g gaussPair) Delta(_ int, eps float64) (float64, error) {
	phi := distuv.UnitNormal.CDF
	return phi(-eps/g.mu+g.mu/2) - math.Exp(eps)*phi(-eps/g.mu-g.mu/2), nil
}
func (g gaussPair) Epsilon(_ int, delta float64) (float64, error) {
	lo, hi := 0.0, 100.0
	for range 200 {
		mid := (lo + hi) / 2
		if d, _ := g.Delta(1, mid); d > delta {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi, nil
}

func TestNearIdealIsIdealWithoutDeviation(t *testing.T) {
	ideal := gaussPair{mu: 1}
	a, err := NewNearIdeal(ideal, 0, math.Inf(-1))
	if err != nil {
		t.Fatal(err)
	}
	for _, eps := range []float64{0.1, 1, 3} {
		got, _ := a.Delta(1, eps)
		want, _ := ideal.Delta(1, eps)
		if got != want {
			t.Errorf("Delta(ε=%v) = %v, ideal %v", eps, got, want)
		}
	}
	got, _ := a.Epsilon(1, 1e-5)
	want, _ := ideal.Epsilon(1, 1e-5)
	if math.Abs(got-want) > 1e-6*want {
		t.Errorf("Epsilon = %v, ideal %v", got, want)
	}
}

// The bound holds against the exact hockey-stick divergence, by quadrature, of a pair of
// mechanisms that deviate from the Gaussian pair by exactly e^{±r}: p'(x) ∝ p(x)·e^{±r} on
// either side of a cut (and q' likewise with the opposite sign), the worst kind of deviation.
func TestNearIdealBoundsAnExactDeviation(t *testing.T) {
	const mu = 1.0
	for _, r := range []float64{1e-3, 0.05, 0.2} {
		p := func(x float64) float64 { return distuv.UnitNormal.Prob(x) }
		q := func(x float64) float64 { return distuv.UnitNormal.Prob(x - mu) }
		cut := mu / 2
		tilt := func(f func(float64) float64, sign float64, mass float64) func(float64) float64 {
			// f reweighted by e^{sign·r/2} above the cut and e^{−sign·r/2} below, renormalized;
			// mass is f's mass above the cut; with tilts of ±r/2 and the normalizer, the ratio to f
			// stays within e^{±r}.
			up, down := math.Exp(sign*r/2), math.Exp(-sign*r/2)
			z := up*mass + down*(1-mass)
			return func(x float64) float64 {
				if x > cut {
					return f(x) * up / z
				}
				return f(x) * down / z
			}
		}
		pAbove := 1 - distuv.UnitNormal.CDF(cut)
		qAbove := 1 - distuv.UnitNormal.CDF(cut-mu)
		pp := tilt(p, -1, pAbove)
		qq := tilt(q, 1, qAbove)
		a, err := NewNearIdeal(gaussPair{mu: mu}, r, math.Inf(-1))
		if err != nil {
			t.Fatal(err)
		}
		for _, eps := range []float64{0.5, 1, 2} {
			exact := quad.Fixed(func(x float64) float64 { return math.Max(0, pp(x)-math.Exp(eps)*qq(x)) }, -12, 14, 4000, nil, 0)
			bound, err := a.Delta(1, eps)
			if err != nil {
				t.Fatal(err)
			}
			if exact > bound*(1+1e-9) {
				t.Errorf("r=%v ε=%v: exact δ %.6g above the bound %.6g", r, eps, exact, bound)
			}
			ideal, _ := gaussPair{mu: mu}.Delta(1, eps)
			if exact <= ideal && r >= 0.05 {
				t.Errorf("r=%v ε=%v: the deviation did not raise δ (%.6g ≤ ideal %.6g): the test has no power", r, eps, exact, ideal)
			}
		}
	}
}

func TestNearIdealRoundTripAndErrors(t *testing.T) {
	a, err := NewNearIdeal(gaussPair{mu: 0.5}, 1e-6, -800)
	if err != nil {
		t.Fatal(err)
	}
	for _, steps := range []int{1, 10} {
		eps, err := a.Epsilon(steps, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		ideal, _ := gaussPair{mu: 0.5}.Epsilon(steps, 1e-5)
		if !(eps > ideal) || eps-ideal > 2*float64(steps)*1e-6+1e-5 {
			t.Errorf("steps %d: ε %v against ideal %v", steps, eps, ideal)
		}
		if d, _ := a.Delta(steps, eps); d > 1e-5*(1+1e-12) {
			t.Errorf("steps %d: Delta(Epsilon(1e-5)) = %v > 1e-5", steps, d)
		}
		b, err := a.IdealBudget(steps, Budget{Epsilon: 1, Delta: 1e-5})
		if err != nil || !(b.Epsilon < 1) || !(b.Delta < 1e-5) {
			t.Errorf("IdealBudget = %+v, %v", b, err)
		}
	}
	if _, err := NearIdealBudget(0.1, 10, Budget{Epsilon: 1, Delta: 1e-5}); !errors.Is(err, ErrUnreachable) {
		t.Errorf("a budget eaten by 2λ: %v", err)
	}
	// A tail too heavy for the δ left free is refused, not hidden.
	heavy, _ := NewNearIdeal(gaussPair{mu: 0.5}, 0, math.Log(1e-8))
	if _, err := heavy.Epsilon(1, 1e-5); !errors.Is(err, ErrUnreachable) {
		t.Errorf("heavy tail: %v", err)
	}
	for _, bad := range [][2]float64{{-1, -800}, {math.NaN(), -800}, {math.Inf(1), -800}, {0, 1}, {0, math.NaN()}} {
		if _, err := NewNearIdeal(gaussPair{mu: 1}, bad[0], bad[1]); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("NewNearIdeal(%v): %v", bad, err)
		}
	}
	if _, err := NewNearIdeal(nil, 0, -800); err == nil {
		t.Error("nil ideal accepted")
	}
}
