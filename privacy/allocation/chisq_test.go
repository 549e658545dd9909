package allocation

import (
	"errors"
	"math"
	"testing"

	"github.com/dpsgd/dpsgd/privacy"
	"gonum.org/v1/gonum/stat/distuv"
)

// TestChiSquarePublished reproduces an independently computed
// chi-square column (½√(b/M) at E = 1) and its M = 4,296.
func TestChiSquarePublished(t *testing.T) {
	for _, c := range []struct {
		sigma float64
		m     int
		want  float64
	}{{0.75, 16384, 8.6616e-3}, {1, 16384, 5.1204e-3}, {1.5, 65536, 1.4611e-3}, {1, 1140000, 6.1385e-4}} {
		tv, err := ChiSquareTV(c.sigma, c.m, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !cfRelClose(tv, c.want, 1e-4) {
			t.Errorf("σ = %g, M = %d: TV bound %.6g, want %g", c.sigma, c.m, tv, c.want)
		}
	}
	m, err := ChiSquareRounds(1, 0.01, 1)
	if err != nil || m != 4296 {
		t.Errorf("ChiSquareRounds(1, 0.01, 1) = %d, %v; want 4296", m, err)
	}
}

// TestChiSquareClosedForm: c_E against a direct product, the bracket
// x ≤ c_E ≤ eˣ − 1 (Ertan & van Dijk 2026), and the α = 2 Rényi divergence (an
// independent code path: ln(1 + χ²) = D₂).
func TestChiSquareClosedForm(t *testing.T) {
	for _, c := range []struct {
		sigma float64
		m, e  int
	}{{1, 100, 1}, {0.7, 1000, 7}, {3, 10, 40}, {1, 1e6, 1000}} {
		got, err := ChiSquare(c.sigma, c.m, c.e)
		if err != nil {
			t.Fatal(err)
		}
		b := math.Expm1(1 / (c.sigma * c.sigma))
		p := 1.0
		for i := 0; i < c.e; i++ {
			p *= 1 + b/float64(c.m)
		}
		x := float64(c.e) * b / float64(c.m)
		if !cfRelClose(got, p-1, 1e-9) || got < x*(1-1e-12) || got > math.Expm1(x)*(1+1e-12) {
			t.Errorf("%+v: c_E = %g, product %g, bracket [%g, %g]", c, got, p-1, x, math.Expm1(x))
		}
		d2, _ := RDPRemove(c.sigma, c.m, []float64{2})
		if !cfRelClose(math.Expm1(float64(c.e)*d2[0]), got, 1e-9) {
			t.Errorf("%+v: exp(E·D₂) − 1 = %g, c_E = %g", c, math.Expm1(float64(c.e)*d2[0]), got)
		}
	}
	// Saturation instead of +Inf, and TV = 1 there.
	c, _ := ChiSquare(0.02, 10, 1)
	tv, _ := ChiSquareTV(0.02, 10, 1)
	if math.IsInf(c, 0) || math.IsNaN(c) || tv != 1 {
		t.Errorf("σ = 0.02: c = %g, TV = %g", c, tv)
	}
}

// TestChiSquareSolvers: σ, M and E solves plug back and are extremal.
func TestChiSquareSolvers(t *testing.T) {
	for _, tv := range []float64{1e-4, 0.01, 0.1, 0.5, 0.6, 0.95} {
		for _, m := range []int{1, 100, 10000} {
			for _, e := range []int{1, 3, 50} {
				s, err := ChiSquareSigma(tv, m, e)
				if err != nil {
					t.Fatal(err)
				}
				got, _ := ChiSquareTV(s, m, e)
				below, _ := ChiSquareTV(s*(1-1e-9), m, e)
				if !(got <= tv && cfRelClose(got, tv, 1e-9) && below > tv) {
					t.Errorf("tv = %g, M = %d, E = %d: σ = %g gives %.12g (σ(1−1e-9): %.12g)", tv, m, e, s, got, below)
				}
			}
		}
	}
	for _, c := range []struct{ sigma, tv float64 }{{1, 0.01}, {0.6, 0.1}, {2, 0.005}, {1, 0.7}} {
		for _, e := range []int{1, 4} {
			m, err := ChiSquareRounds(c.sigma, c.tv, e)
			if err != nil {
				t.Fatal(err)
			}
			a, _ := ChiSquareTV(c.sigma, m, e)
			if a > c.tv {
				t.Errorf("%+v E = %d: M = %d gives %g", c, e, m, a)
			}
			if m > 1 {
				if b, _ := ChiSquareTV(c.sigma, m-1, e); b <= c.tv {
					t.Errorf("%+v E = %d: M−1 = %d also meets it (%g)", c, e, m-1, b)
				}
			}
		}
		e, err := ChiSquareEpochs(c.sigma, c.tv, 5000)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		a, _ := ChiSquareTV(c.sigma, 5000, e)
		b, _ := ChiSquareTV(c.sigma, 5000, e+1)
		if !(a <= c.tv && b > c.tv) {
			t.Errorf("%+v: E = %d gives %g, E+1 gives %g", c, e, a, b)
		}
	}
	if _, err := ChiSquareEpochs(0.5, 0.01, 10); !errors.Is(err, privacy.ErrUnreachable) {
		t.Errorf("one epoch over budget: err = %v", err)
	}
	if _, err := ChiSquareRounds(0.05, 0.01, 1); !errors.Is(err, privacy.ErrUnreachable) {
		t.Errorf("σ = 0.05 needs e^400 rounds: err = %v", err)
	}
	if e, err := ChiSquareEpochs(1e9, 0.5, 1e9); err != nil || e != chisqMaxEpochs {
		t.Errorf("huge σ: E = %d, %v; want the cap", e, err)
	}
}

// TestChiSquareTradeOff: the bound stays below the exact trade-off curve
// of the M = 1 pair N(0,1) vs N(t,1), whose χ² is e^{t²} − 1, and is tight
// at the ends.
func TestChiSquareTradeOff(t *testing.T) {
	n := distuv.UnitNormal
	for _, sigma := range []float64{0.5, 1, 2, 5} {
		tt := 1 / sigma
		c := math.Expm1(tt * tt)
		for a := 0.0; a <= 1; a += 0.01 {
			exact := n.CDF(n.Quantile(1-a) - tt)
			if a == 0 {
				exact = 1
			}
			if a >= 1 {
				exact = 0
			}
			got := ChiSquareTradeOff(c, a)
			if got > exact+1e-12 || got < 0 {
				t.Errorf("σ = %g, α = %.2f: bound %g above exact %g", sigma, a, got, exact)
			}
		}
	}
	if ChiSquareTradeOff(0, 0.3) != 0.7 || ChiSquareTradeOff(0.01, 0) != 1 {
		t.Error("identity pair / α = 0")
	}
	// TV side: at α where √(cα(1−α)) > U(c) the TV line wins.
	if got, want := ChiSquareTradeOff(0.04, 0.5), 0.5-0.1; math.Abs(got-want) > 1e-15 {
		t.Errorf("c = 0.04, α = ½: %g, want %g", got, want)
	}
	for _, c := range [][2]float64{{-1, 0.5}, {math.NaN(), 0.5}, {1, -0.1}, {1, 1.1}} {
		if !math.IsNaN(ChiSquareTradeOff(c[0], c[1])) {
			t.Errorf("%v: want NaN", c)
		}
	}
}

func TestChiSquareInvalid(t *testing.T) {
	var errs []error
	_, e := ChiSquare(0, 10, 1)
	errs = append(errs, e)
	_, e = ChiSquareTV(1, 0, 1)
	errs = append(errs, e)
	_, e = ChiSquareTV(1, 10, 0)
	errs = append(errs, e)
	_, e = ChiSquareSigma(1, 10, 1)
	errs = append(errs, e)
	_, e = ChiSquareSigma(math.NaN(), 10, 1)
	errs = append(errs, e)
	_, e = ChiSquareRounds(1, 0, 1)
	errs = append(errs, e)
	_, e = ChiSquareEpochs(math.Inf(1), 0.1, 1)
	errs = append(errs, e)
	for i, err := range errs {
		if !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("case %d: %v", i, err)
		}
	}
}
