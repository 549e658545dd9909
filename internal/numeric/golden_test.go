package numeric

import (
	"math"
	"testing"
)

// TestGolden: on unimodal functions with a known optimum the final bracket holds it and is
// within the tolerance; each step evaluates f once; the step limit, the tolerance and the
// spacing of floats each stop the search.
func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		name   string
		f      func(float64) float64
		lo, hi float64
		min    float64
		acc    float64 // how close the bracket comes: √ε-ish where f is flat to rounding
	}{
		{"parabola", func(x float64) float64 { return (x-1.3)*(x-1.3) + 2 }, 0, 5, 1.3, 1e-7},
		{"x − ln x", func(x float64) float64 { return x - math.Log(x) }, 0.01, 30, 1, 1e-7},
		{"|x − π|", func(x float64) float64 { return math.Abs(x - math.Pi) }, -10, 10, math.Pi, 1e-12},
		{"increasing: the left end", func(x float64) float64 { return math.Exp(x) }, -2, 3, -2, 1e-12},
	} {
		calls := 0
		f := func(x float64) float64 { calls++; return tc.f(x) }
		g := GoldenMin(f, tc.lo, tc.hi, 1000, 1e-9)
		if !(g.Hi-g.Lo <= 1e-9) || !(g.Lo <= tc.min+tc.acc && tc.min-tc.acc <= g.Hi) {
			t.Errorf("%s: bracket [%v, %v], want ≤ 1e-9 wide within %g of %v", tc.name, g.Lo, g.Hi, tc.acc, tc.min)
		}
		if !(g.Lo < g.C && g.C < g.D && g.D < g.Hi) || g.FC != tc.f(g.C) || g.FD != tc.f(g.D) {
			t.Errorf("%s: points %v < %v in [%v, %v] with values %v, %v", tc.name, g.C, g.D, g.Lo, g.Hi, g.FC, g.FD)
		}
		// The bracket shrinks by 1/φ a step: steps = ⌈ln(width/tol)/ln φ⌉ or one less.
		steps := math.Log((tc.hi-tc.lo)/1e-9) / math.Log(1/invPhi)
		if n := float64(calls - 2); n < math.Floor(steps) || n > math.Ceil(steps) {
			t.Errorf("%s: %d evaluations, want 2 + about %.1f", tc.name, calls, steps)
		}
		// The maximum of −f is the minimum of f, through the same points.
		m := GoldenMax(func(x float64) float64 { return -tc.f(x) }, tc.lo, tc.hi, 1000, 1e-9)
		if m.Lo != g.Lo || m.Hi != g.Hi || m.C != g.C || m.D != g.D || m.FC != -g.FC || m.FD != -g.FD {
			t.Errorf("%s: GoldenMax of −f %+v, GoldenMin of f %+v", tc.name, m, g)
		}
	}
	parabola := func(x float64) float64 { return -(x - 0.25) * (x - 0.25) }
	// maxIter steps exactly.
	calls := 0
	g := GoldenMax(func(x float64) float64 { calls++; return parabola(x) }, 0, 1, 10, 0)
	if calls != 12 || math.Abs(g.Hi-g.Lo-math.Pow(invPhi, 10)) > 1e-12 {
		t.Errorf("10 steps: %d evaluations, bracket width %v, want 12 and φ⁻¹⁰", calls, g.Hi-g.Lo)
	}
	// No limit and no tolerance: the search stops where floats run out (a kink keeps the
	// comparisons exact, so the bracket still holds the maximum).
	kink := func(x float64) float64 { return -math.Abs(x - 0.25) }
	g = GoldenMax(kink, 0, 1, math.MaxInt, 0)
	if g.Hi-g.Lo > 8*(math.Nextafter(0.25, 1)-0.25) || !(g.Lo <= 0.25 && 0.25 <= g.Hi) {
		t.Errorf("to the last float: bracket [%v, %v], want a few ulps around 0.25", g.Lo, g.Hi)
	}
	// An empty bracket evaluates f at its end twice and stops.
	calls = 0
	g = GoldenMax(func(x float64) float64 { calls++; return x }, 2, 2, 100, 0)
	if calls != 2 || g.Lo != 2 || g.Hi != 2 {
		t.Errorf("empty bracket: %d evaluations, %+v", calls, g)
	}
}
