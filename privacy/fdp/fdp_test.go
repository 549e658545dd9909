package fdp

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/dpsgd/dpsgd/privacy"
)

// phi is the standard normal distribution function, Φ(x) = ½ erfc(−x/√2).
func phi(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

// TestGaussianNeymanPearson: the optimal test of N(0,1) against N(μ,1)
// rejects when X > c, with α = Φ(−c) and β = Φ(c − μ) (Neyman–Pearson), so
// G_μ(Φ(−c)) = Φ(c − μ) for every c. Checked from c = −3 to 35, i.e. α from
// 0.9987 down to 1e-268, to 1e-10 relative (below c = −3 the rounding of α
// itself, a relative 1e-16 of α but not of 1 − α, dominates).
func TestGaussianNeymanPearson(t *testing.T) {
	for _, mu := range []float64{0, 0.3, 1, 2.5, 6} {
		g, err := Gaussian(mu)
		if err != nil {
			t.Fatal(err)
		}
		for c := -3.0; c <= 35; c += 0.25 {
			alpha, want := phi(-c), phi(c-mu)
			got := g(alpha)
			if math.Abs(got-want) > 1e-10*want+1e-300 {
				t.Errorf("μ=%g c=%g: G(%g) = %.15g, want %.15g", mu, c, alpha, got, want)
			}
		}
	}
}

// curves used by the property tests.
func propertyCurves(t *testing.T) map[string]Curve {
	t.Helper()
	out := map[string]Curve{}
	for _, mu := range []float64{0.2, 1, 3} {
		g, err := Gaussian(mu)
		if err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("G_%g", mu)] = g
		p, err := FromProfile(func(e float64) (float64, error) { return privacy.GaussianDelta(mu, e) }, DefaultEpsGrid())
		if err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("profile(G_%g)", mu)] = p
	}
	for _, ed := range [][2]float64{{0, 0.1}, {1, 1e-3}, {3, 0}} {
		f, err := EpsDelta(ed[0], ed[1])
		if err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("f_(%g,%g)", ed[0], ed[1])] = f
	}
	return out
}

// TestCurveProperties: trade-off functions are in [0, 1 − α],
// non-increasing and convex (DRS Prop. 2.2); the curves here are also
// symmetric, f(f(α)) = α where f is strictly decreasing; NaN maps to 0 and
// α outside [0, 1] is clamped.
func TestCurveProperties(t *testing.T) {
	const n = 2000
	for name, f := range propertyCurves(t) {
		prev := math.Inf(1)
		var vals [n + 1]float64
		for i := 0; i <= n; i++ {
			a := float64(i) / n
			v := f(a)
			vals[i] = v
			if !(v >= 0 && v <= 1-a+1e-15) {
				t.Errorf("%s: f(%g) = %g outside [0, 1−α]", name, a, v)
			}
			if v > prev+1e-15 {
				t.Errorf("%s: increasing at α=%g: %g > %g", name, a, v, prev)
			}
			prev = v
		}
		for i := 1; i < n; i++ {
			if d2 := vals[i-1] - 2*vals[i] + vals[i+1]; d2 < -1e-13 {
				t.Errorf("%s: not convex at α=%g (second difference %g)", name, float64(i)/n, d2)
			}
		}
		for _, a := range []float64{1e-6, 0.01, 0.1, 0.3, 0.45} {
			fa := f(a)
			if fa <= 0 || fa >= 1 {
				continue
			}
			// f(f(α)) = α holds exactly where f is strictly decreasing; on a
			// flat piece (f_{ε,δ} at 0) f(f(α)) ≤ α.
			if back := f(fa); back > a+1e-9 || (name[0] == 'G' && math.Abs(back-a) > 1e-9*a+1e-15) {
				t.Errorf("%s: f(f(%g)) = %g, want %g (symmetric)", name, a, back, a)
			}
		}
		if v := f(math.NaN()); v != 0 {
			t.Errorf("%s: f(NaN) = %g, want 0", name, v)
		}
		if f(-1) != f(0) || f(2) != f(1) || f(1) != 0 {
			t.Errorf("%s: clamping: f(-1)=%g f(0)=%g f(2)=%g f(1)=%g", name, f(-1), f(0), f(2), f(1))
		}
	}
}

// TestEpsDeltaShape: f_{ε,δ}(0) = 1 − δ, the two lines meet on the diagonal
// at α = (1−δ)/(1+e^ε) = f(α), and f reaches 0 at α = 1 − δ (DRS Prop. 2.5).
func TestEpsDeltaShape(t *testing.T) {
	for _, ed := range [][2]float64{{0, 0}, {0.5, 0.01}, {2, 1e-5}, {10, 0.3}} {
		eps, delta := ed[0], ed[1]
		f, err := EpsDelta(eps, delta)
		if err != nil {
			t.Fatal(err)
		}
		ak := (1 - delta) / (1 + math.Exp(eps))
		checks := [][2]float64{{0, 1 - delta}, {ak, ak}, {1 - delta, 0}, {1, 0}}
		for _, c := range checks {
			if got := f(c[0]); math.Abs(got-c[1]) > 1e-14 {
				t.Errorf("ε=%g δ=%g: f(%g) = %.16g, want %.16g", eps, delta, c[0], got, c[1])
			}
		}
	}
}

// TestToDeltaGaussian: ToDelta(G_μ, ε) against the closed form
// privacy.GaussianDelta: never below it, within 1e-9 relative (or
// 3e-15 absolute, the float64 limit of 1 − f).
func TestToDeltaGaussian(t *testing.T) {
	for _, mu := range []float64{0.1, 0.5, 1, 2, 4, 8} {
		g, err := Gaussian(mu)
		if err != nil {
			t.Fatal(err)
		}
		for _, eps := range []float64{0, 0.1, 0.5, 1, 3, 8, 20} {
			want, err := privacy.GaussianDelta(mu, eps)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ToDelta(g, eps)
			if err != nil {
				t.Fatal(err)
			}
			if got < want*(1-1e-12) {
				t.Errorf("μ=%g ε=%g: ToDelta = %.15g below the true δ %.15g", mu, eps, got, want)
			}
			if got-want > 1e-9*want+3e-15 {
				t.Errorf("μ=%g ε=%g: ToDelta = %.15g, want %.15g", mu, eps, got, want)
			}
		}
	}
}

// TestToDeltaEpsDelta: the hockey-stick divergence of f_{ε,δ} at ε' is δ for
// ε' ≥ ε (the sup sits at α = 0) and 1 − (1−δ)(1 + e^{ε'})/(1 + e^ε) for
// ε' < ε (at the kink α = (1−δ)/(1+e^ε)).
func TestToDeltaEpsDelta(t *testing.T) {
	for _, ed := range [][2]float64{{0, 0.2}, {0.5, 1e-5}, {1, 0.01}, {4, 0}, {4, 1e-9}} {
		eps, delta := ed[0], ed[1]
		f, err := EpsDelta(eps, delta)
		if err != nil {
			t.Fatal(err)
		}
		for _, e2 := range []float64{0, 0.25, eps / 2, eps, eps + 1, math.Inf(1)} {
			want := delta
			if e2 < eps {
				want = 1 - (1-delta)*(1+math.Exp(e2))/(1+math.Exp(eps))
			}
			got, err := ToDelta(f, e2)
			if err != nil {
				t.Fatal(err)
			}
			if got < want-1e-16 || got-want > 1e-12*want+3e-15 {
				t.Errorf("f_(%g,%g): ToDelta(ε'=%g) = %.16g, want %.16g", eps, delta, e2, got, want)
			}
		}
	}
}

// TestTVAndMIA: TV(G_μ) = 2Φ(μ/2) − 1 and MIAAccuracy = ½(1 + TV).
func TestTVAndMIA(t *testing.T) {
	for _, mu := range []float64{0.01, 0.5, 1, 3, 10} {
		g, _ := Gaussian(mu)
		want := math.Erf(mu / (2 * math.Sqrt2))
		tv, err := TV(g)
		if err != nil || tv < want*(1-1e-12) || tv-want > 1e-9*want+3e-15 {
			t.Errorf("μ=%g: TV = %.15g (%v), want %.15g", mu, tv, err, want)
		}
		acc, err := MIAAccuracy(g)
		if err != nil || math.Abs(acc-0.5*(1+want)) > 1e-9 {
			t.Errorf("μ=%g: MIA accuracy = %.15g (%v), want %.15g", mu, acc, err, 0.5*(1+want))
		}
	}
	f, _ := EpsDelta(0, 0.3) // (0, δ)-DP: TV = δ
	if tv, err := TV(f); err != nil || math.Abs(tv-0.3) > 1e-14 {
		t.Errorf("TV(f_(0,0.3)) = %g (%v), want 0.3", tv, err)
	}
}

// profileGap returns max over α of G_μ(α) − FromProfile(GaussianDelta(μ,·),
// grid)(α), and the largest excess of the profile curve over G_μ.
func profileGap(t *testing.T, mu float64, grid []float64) (gap, excess float64) {
	t.Helper()
	g, _ := Gaussian(mu)
	p, err := FromProfile(func(e float64) (float64, error) { return privacy.GaussianDelta(mu, e) }, grid)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i <= 4000; i++ {
		a := float64(i) / 4000
		for _, x := range []float64{a, a * 1e-4} {
			d := g(x) - p(x)
			gap = math.Max(gap, d)
			excess = math.Max(excess, -d)
		}
	}
	return gap, excess
}

// TestFromProfileGaussian: DRS Prop. 2.12 applied to the exact μ-GDP
// profile reproduces G_μ: never above it (a lower bound for any grid), within
// 1e-3 on the default grid, and the gap shrinks (second order) as the grid
// is refined (8× finer: at least 6× smaller).
func TestFromProfileGaussian(t *testing.T) {
	for _, mu := range []float64{0.3, 1, 2, 5} {
		gap, excess := profileGap(t, mu, DefaultEpsGrid())
		if excess > 1e-12 {
			t.Errorf("μ=%g: profile curve above G_μ by %g", mu, excess)
		}
		if gap > 1e-3 {
			t.Errorf("μ=%g: profile curve below G_μ by %g, want ≤ 1e-3", mu, gap)
		}
		coarse, _ := EpsGrid(32, 201) // spacing 0.16
		fine, _ := EpsGrid(32, 1601)  // spacing 0.02
		gc, _ := profileGap(t, mu, coarse)
		gf, ef := profileGap(t, mu, fine)
		if ef > 1e-12 || !(gf < gc/6) {
			t.Errorf("μ=%g: gap %g at spacing 0.16, %g at 0.02 (want < 1/6 of it), excess %g", mu, gc, gf, ef)
		}
	}
}

// TestFromProfileRoundTrip: at a grid point, ToDelta of the profile curve
// gives back δ(ε) (the line of slope −e^ε supports the curve).
func TestFromProfileRoundTrip(t *testing.T) {
	mu := 1.5
	p, err := FromProfile(func(e float64) (float64, error) { return privacy.GaussianDelta(mu, e) }, DefaultEpsGrid())
	if err != nil {
		t.Fatal(err)
	}
	for _, eps := range []float64{0, 0.4, 1, 2.48, 6} {
		want, _ := privacy.GaussianDelta(mu, eps)
		got, err := ToDelta(p, eps)
		if err != nil || got < want*(1-1e-12) || got-want > 1e-9*want+3e-15 {
			t.Errorf("ε=%g: ToDelta(FromProfile) = %.15g (%v), want %.15g", eps, got, err, want)
		}
	}
}

// TestFromAccountant: the per-epoch Gaussian accountant after E epochs is
// exactly (√E/σ)-GDP, so its curve matches G_{√E/σ} within the grid error
// and never exceeds it.
func TestFromAccountant(t *testing.T) {
	acc, err := privacy.NewGaussianEpochs(2, 100, privacy.SamplerShuffle)
	if err != nil {
		t.Fatal(err)
	}
	c, err := FromAccountant(acc, 350, DefaultEpsGrid()) // E = 4, μ = 1
	if err != nil {
		t.Fatal(err)
	}
	g, _ := Gaussian(1)
	for i := 0; i <= 1000; i++ {
		a := float64(i) / 1000
		if d := g(a) - c(a); d < -1e-12 || d > 1e-3 {
			t.Errorf("α=%g: accountant curve %g, G_1 %g", a, c(a), g(a))
		}
	}
}

// failing is an accountant whose Delta always fails.
type failing struct{}

func (failing) Name() string                          { return "failing" }
func (failing) Sampler() string                       { return privacy.SamplerPoisson }
func (failing) Adjacency() string                     { return privacy.AdjacencyAddRemove }
func (failing) Epsilon(int, float64) (float64, error) { return 0, privacy.ErrOutOfRegime }
func (failing) Delta(int, float64) (float64, error)   { return 0, privacy.ErrOutOfRegime }

func TestBadInput(t *testing.T) {
	g, _ := Gaussian(1)
	nanCurve := Curve(func(float64) float64 { return math.NaN() })
	bigCurve := Curve(func(float64) float64 { return 2 })
	okDelta := func(e float64) (float64, error) { return privacy.GaussianDelta(1, e) }
	inf, nan := math.Inf(1), math.NaN()
	cases := map[string]error{}
	_, cases["Gaussian(-1)"] = Gaussian(-1)
	_, cases["Gaussian(NaN)"] = Gaussian(nan)
	_, cases["Gaussian(Inf)"] = Gaussian(inf)
	_, cases["EpsDelta(-1, 0)"] = EpsDelta(-1, 0)
	_, cases["EpsDelta(Inf, 0)"] = EpsDelta(inf, 0)
	_, cases["EpsDelta(1, 1.5)"] = EpsDelta(1, 1.5)
	_, cases["EpsDelta(1, NaN)"] = EpsDelta(1, nan)
	_, cases["FromProfile(nil)"] = FromProfile(nil, []float64{0})
	_, cases["FromProfile(empty)"] = FromProfile(okDelta, nil)
	_, cases["FromProfile(grid NaN)"] = FromProfile(okDelta, []float64{0, nan})
	_, cases["FromProfile(grid -1)"] = FromProfile(okDelta, []float64{-1})
	_, cases["FromProfile(grid Inf)"] = FromProfile(okDelta, []float64{inf})
	_, cases["FromProfile(δ NaN)"] = FromProfile(func(float64) (float64, error) { return nan, nil }, []float64{0})
	_, cases["FromProfile(δ 2)"] = FromProfile(func(float64) (float64, error) { return 2, nil }, []float64{0})
	_, cases["EpsGrid(0, 10)"] = EpsGrid(0, 10)
	_, cases["EpsGrid(1, 1)"] = EpsGrid(1, 1)
	_, cases["EpsGrid(NaN, 10)"] = EpsGrid(nan, 10)
	_, cases["FromAccountant(nil)"] = FromAccountant(nil, 1, DefaultEpsGrid())
	acc, _ := privacy.NewGaussianEpochs(1, 10, privacy.SamplerShuffle)
	_, cases["FromAccountant(steps -1)"] = FromAccountant(acc, -1, DefaultEpsGrid())
	_, cases["ToDelta(nil)"] = ToDelta(nil, 1)
	_, cases["ToDelta(ε -1)"] = ToDelta(g, -1)
	_, cases["ToDelta(ε NaN)"] = ToDelta(g, nan)
	_, cases["ToDelta(NaN curve)"] = ToDelta(nanCurve, 1)
	_, cases["ToDelta(curve 2)"] = ToDelta(bigCurve, 1)
	_, cases["TV(nil)"] = TV(nil)
	_, cases["MIAAccuracy(nil)"] = MIAAccuracy(nil)
	_, _, cases["Points(nil)"] = Points(nil, 10)
	_, _, cases["Points(n 1)"] = Points(g, 1)
	_, _, cases["Points(NaN curve)"] = Points(nanCurve, 10)
	for name, err := range cases {
		if !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("%s: err = %v, want ErrInvalidArgument", name, err)
		}
	}
	if _, err := FromAccountant(failing{}, 1, DefaultEpsGrid()); !errors.Is(err, privacy.ErrOutOfRegime) {
		t.Errorf("FromAccountant(failing): err = %v, want the accountant's ErrOutOfRegime", err)
	}
}

func TestPointsAndGrid(t *testing.T) {
	g, _ := Gaussian(1)
	a, b, err := Points(g, 11)
	if err != nil || len(a) != 11 || len(b) != 11 || a[0] != 0 || a[10] != 1 || b[0] != 1 || b[10] != 0 {
		t.Fatalf("Points: %v %v %v", a, b, err)
	}
	if b[5] != g(0.5) {
		t.Errorf("Points: β(0.5) = %g, want %g", b[5], g(0.5))
	}
	grid := DefaultEpsGrid()
	if len(grid) != 801 || grid[0] != 0 || grid[800] != 32 || math.Abs(grid[1]-0.04) > 1e-15 {
		t.Errorf("DefaultEpsGrid: %d points, [%g, %g, …, %g]", len(grid), grid[0], grid[1], grid[len(grid)-1])
	}
	// An unsorted grid with duplicates gives the same curve as the clean one.
	dirty := []float64{2, 0, 1, 1, 0.5, 2}
	clean := []float64{0, 0.5, 1, 2}
	p1, _ := FromProfile(func(e float64) (float64, error) { return privacy.GaussianDelta(1, e) }, dirty)
	p2, _ := FromProfile(func(e float64) (float64, error) { return privacy.GaussianDelta(1, e) }, clean)
	for _, x := range []float64{0, 0.01, 0.2, 0.6} {
		if p1(x) != p2(x) {
			t.Errorf("grid order changes the curve at α=%g: %g vs %g", x, p1(x), p2(x))
		}
	}
}

func BenchmarkGaussianCurve(b *testing.B) {
	g, _ := Gaussian(1)
	s := 0.0
	for i := 0; b.Loop(); i++ {
		s += g(float64(i%1000+1) / 1002)
	}
	_ = s
}

func BenchmarkFromProfileEval(b *testing.B) {
	p, _ := FromProfile(func(e float64) (float64, error) { return privacy.GaussianDelta(1, e) }, DefaultEpsGrid())
	s := 0.0
	for i := 0; b.Loop(); i++ {
		s += p(float64(i%1000+1) / 1002)
	}
	_ = s
}

func BenchmarkFromAccountant(b *testing.B) {
	acc, _ := privacy.NewGaussianEpochs(1, 100, privacy.SamplerShuffle)
	grid := DefaultEpsGrid()
	for b.Loop() {
		if _, err := FromAccountant(acc, 1000, grid); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkToDeltaGaussian(b *testing.B) {
	g, _ := Gaussian(1)
	for b.Loop() {
		if _, err := ToDelta(g, 1); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkToDeltaFromProfile(b *testing.B) {
	p, _ := FromProfile(func(e float64) (float64, error) { return privacy.GaussianDelta(1, e) }, DefaultEpsGrid())
	for b.Loop() {
		if _, err := ToDelta(p, 1); err != nil {
			b.Fatal(err)
		}
	}
}
