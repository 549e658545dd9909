package allocation

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/privacy"
)

// TestRhoQuadrature checks the closed form of E|Y−1|³ (and its series
// branch) against numerical integration, and ρ/b^{3/2} against values
// computed independently.
func TestRhoQuadrature(t *testing.T) {
	for _, sigma := range []float64{0.4, 0.5, 0.75, 1, 1.5, 2, 5, 20, 45, 60} {
		tt := 1 / sigma
		want := cfLognormalMoment(tt, func(y float64) float64 { return math.Abs(y-1) * (y - 1) * (y - 1) })
		got := math.Exp(beLogRho(tt * tt))
		if !cfRelClose(got, want, 1e-6) {
			t.Errorf("σ = %g: ρ = %.10g, quadrature %.10g", sigma, got, want)
		}
	}
	pub := map[float64]float64{0.5: 414.36, 0.75: 17.610, 1: 6.3500, 1.5: 3.0607, 2: 2.3335}
	for sigma, want := range pub {
		if got := math.Exp(beLogR(1/(sigma*sigma), RhoExact)); !cfRelClose(got, want, 5e-5) {
			t.Errorf("σ = %g: ρ/b^1.5 = %.6g, reference %g", sigma, got, want)
		}
	}
	// σ → ∞: ρ/b^{3/2} → E|N|³ = 2√(2/π); the series and closed form agree at the switch.
	if got := math.Exp(beLogR(1e-12, RhoExact)); !cfRelClose(got, 2*math.Sqrt(2/math.Pi), 1e-6) {
		t.Errorf("σ = 1e6: ρ/b^1.5 = %.10g, want 2√(2/π)", got)
	}
	x := beSeriesT * beSeriesT
	if a, b := beLogRhoSeries(x*(1+1e-9)), beLogRho(x*(1-1e-9)); math.Abs(a-b) > 1e-8 {
		t.Errorf("series %.12g vs closed form %.12g at the switch", a, b)
	}
	// Small σ: finite, ln ρ ≈ 3/σ² (no overflow).
	if lr := beLogRho(1 / (0.02 * 0.02)); !(math.Abs(lr-3/(0.02*0.02)) < 1e-6) {
		t.Errorf("σ = 0.02: ln ρ = %g, want ≈ %g", lr, 3/(0.02*0.02))
	}
}

// TestBerryEsseenTable reproduces an independently computed δ₁(M) table
// (R_simpl, E = 1) including its "n/a" cells (out of regime).
func TestBerryEsseenTable(t *testing.T) {
	ms := []int{1e4, 1e5, 1e6, 1e7, 1e8, 1e9}
	table := map[float64][]float64{
		0.5:  {-1, -1, 0.397, 0.125, 0.0397, 0.0125},
		0.75: {0.193, 0.061, 0.0193, 0.0061, 0.00193, 0.00061},
		1.0:  {0.107, 0.0338, 0.0107, 0.00338, 0.00107, 0.00034},
		1.5:  {0.180, 0.0568, 0.0180, 0.00568, 0.00180, 0.00057},
		2.0:  {0.386, 0.122, 0.0386, 0.0122, 0.00386, 0.00122},
	}
	for sigma, row := range table {
		for i, m := range ms {
			d, err := BerryEsseenDelta1(sigma, m, RhoSimplified)
			if row[i] < 0 {
				if !errors.Is(err, privacy.ErrOutOfRegime) {
					t.Errorf("σ = %g, M = %d: err = %v, want ErrOutOfRegime", sigma, m, err)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			// The table has 2–3 significant digits.
			if !cfRelClose(d, row[i], 0.012) {
				t.Errorf("σ = %g, M = %d: δ₁ = %.4g, table %g", sigma, m, d, row[i])
			}
		}
	}
}

// TestBerryEsseenExactRho reproduces an independently computed
// "reconstructed BE (exact ρ)" column.
func TestBerryEsseenExactRho(t *testing.T) {
	for _, c := range []struct {
		sigma float64
		m     int
		want  float64
	}{{0.75, 16384, 0.1376}, {1, 16384, 0.0512}, {1.5, 65536, 0.01252}, {1, 1140000, 6.137e-3}} {
		d, err := BerryEsseenDelta1(c.sigma, c.m, RhoExact)
		if err != nil {
			t.Fatal(err)
		}
		if !cfRelClose(d, c.want, 2e-3) {
			t.Errorf("σ = %g, M = %d: δ₁ = %.5g, want %g", c.sigma, c.m, d, c.want)
		}
	}
}

// TestBerryEsseenWorkedExample: van Dijk & Ertan's worked example σ = 1, δ = 0.01,
// E = 1 → M ≈ 1.14·10⁶ (1.1401·10⁶ recomputed), the two-term
// approximation within 0.1%, and minimality of the solve.
func TestBerryEsseenWorkedExample(t *testing.T) {
	m, err := BerryEsseenRounds(1, 0.01, 1, RhoSimplified)
	if err != nil {
		t.Fatal(err)
	}
	if math.Round(float64(m)/100) != 11401 {
		t.Errorf("M = %d, want 1.1401e6", m)
	}
	d, _ := BerryEsseenDelta(1, m, 1, RhoSimplified)
	dPrev, _ := BerryEsseenDelta(1, m-1, 1, RhoSimplified)
	if !(d <= 0.01 && dPrev > 0.01) {
		t.Errorf("δ(M) = %g, δ(M−1) = %g: not the smallest M", d, dPrev)
	}
	if tt := BerryEsseenTwoTermRounds(1, 0.01, 1); !cfRelClose(tt, float64(m), 1e-3) {
		t.Errorf("two-term M = %g vs solve %d: more than 0.1%% apart", tt, m)
	}
	// E epochs: the two-term form uses δ_E ≈ E·δ₁ ≥ 1 − (1−δ₁)^E, so it is
	// at or above the solve, and close for small E·δ₁.
	m5, err := BerryEsseenRounds(1, 0.01, 5, RhoSimplified)
	if err != nil {
		t.Fatal(err)
	}
	if tt := BerryEsseenTwoTermRounds(1, 0.01, 5); !(tt >= float64(m5)*(1-1e-6) && cfRelClose(tt, float64(m5), 0.02)) {
		t.Errorf("E = 5: two-term %g vs solve %d", tt, m5)
	}
	if !cfRelClose(float64(m5), 25*float64(m), 0.02) {
		t.Errorf("E = 5: M = %d, want ≈ 25×%d", m5, m)
	}
}

// TestBerryEsseenOptimalSigma: the argmin of the required M is ≈ 1.031 for
// every δ (van Dijk & Ertan: σ ≈ 1.03), checked also against a grid scan of the
// two-term constant 2B·R(σ) + √(b/(2π)).
func TestBerryEsseenOptimalSigma(t *testing.T) {
	best, bestK := 0.0, math.Inf(1)
	for s := 0.9; s <= 1.2; s += 1e-5 {
		t2 := 1 / (s * s)
		k := 2*BerryEsseenB*(math.Exp(3*t2)+4)/math.Pow(math.Expm1(t2), 1.5) + math.Sqrt(math.Expm1(t2)/(2*math.Pi))
		if k < bestK {
			best, bestK = s, k
		}
	}
	for _, delta := range []float64{1e-2, 1e-3, 1e-4} {
		s, m, err := BerryEsseenOptimalSigma(delta, 1, RhoSimplified)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(s-1.031) > 1e-3 || math.Abs(s-best) > 1e-4 {
			t.Errorf("δ = %g: σ* = %.6f, want ≈ 1.031 (grid %.5f)", delta, s, best)
		}
		for _, f := range []float64{0.9, 1.1} {
			if m2, err := BerryEsseenRounds(s*f, delta, 1, RhoSimplified); err != nil || m2 < m {
				t.Errorf("δ = %g: M(σ*·%g) = %d < M(σ*) = %d (err %v)", delta, f, m2, m, err)
			}
		}
	}
	if _, _, err := BerryEsseenOptimalSigma(1e-2, 1, RhoExact); !errors.Is(err, privacy.ErrUnreachable) {
		t.Errorf("RhoExact: err = %v, want ErrUnreachable (no interior minimum)", err)
	}
}

// TestBerryEsseenMonotone: δ_E is non-increasing in M, non-decreasing in E,
// and 1 − (1−δ₁)^E agrees with repeated multiplication and is ≤ E·δ₁.
func TestBerryEsseenMonotone(t *testing.T) {
	prev := 2.0
	for m := 21; m < 1e9; m = m*5/4 + 1 {
		d, err := BerryEsseenDelta(1, m, 1, RhoSimplified)
		if err != nil {
			t.Fatal(err)
		}
		if d > prev {
			t.Fatalf("δ(M = %d) = %g > previous %g", m, d, prev)
		}
		prev = d
	}
	d1, _ := BerryEsseenDelta1(1.2, 50000, RhoSimplified)
	p := 1.0
	for e := 1; e <= 20; e++ {
		p *= 1 - d1
		de, _ := BerryEsseenDelta(1.2, 50000, e, RhoSimplified)
		if !cfRelClose(de, 1-p, 1e-12) || de > float64(e)*d1 {
			t.Errorf("E = %d: δ_E = %.15g, want %.15g ≤ %g", e, de, 1-p, float64(e)*d1)
		}
	}
}

func TestBerryEsseenErrors(t *testing.T) {
	_, err := BerryEsseenDelta1(0.4, 20000, RhoSimplified)
	if !errors.Is(err, privacy.ErrOutOfRegime) {
		t.Fatalf("err = %v", err)
	}
	for _, s := range []string{"sigma = 0.4", "sqrt(3/ln M) = 0.5504", "M = 20000", "chisq", "exact"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
	if _, err := BerryEsseenDelta1(5, 2, RhoSimplified); !errors.Is(err, privacy.ErrOutOfRegime) || !strings.Contains(err.Error(), "M ≥ 3") {
		t.Errorf("M = 2: err = %v", err)
	}
	bad := []error{}
	_, e := BerryEsseenDelta1(-1, 100, RhoSimplified)
	bad = append(bad, e)
	_, e = BerryEsseenDelta1(math.NaN(), 100, RhoSimplified)
	bad = append(bad, e)
	_, e = BerryEsseenDelta1(1, 0, RhoSimplified)
	bad = append(bad, e)
	_, e = BerryEsseenDelta1(1, 100, Rho(7))
	bad = append(bad, e)
	_, e = BerryEsseenDelta(1, 100, 0, RhoSimplified)
	bad = append(bad, e)
	_, e = BerryEsseenRounds(1, 1, 1, RhoSimplified)
	bad = append(bad, e)
	_, e = BerryEsseenRounds(math.Inf(1), 0.1, 1, RhoSimplified)
	bad = append(bad, e)
	_, _, e = BerryEsseenOptimalSigma(0, 1, RhoSimplified)
	bad = append(bad, e)
	for i, err := range bad {
		if !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("case %d: err = %v, want ErrInvalidArgument", i, err)
		}
	}
	if _, err := BerryEsseenRounds(0.2, 0.1, 1, RhoSimplified); !errors.Is(err, privacy.ErrOutOfRegime) {
		t.Errorf("σ = 0.2 (regime starts at e^75): err = %v", err)
	}
	if _, err := BerryEsseenRounds(1, 1e-12, 1, RhoSimplified); !errors.Is(err, privacy.ErrUnreachable) {
		t.Errorf("δ = 1e-12: err = %v, want ErrUnreachable", err)
	}
	if v := BerryEsseenTwoTermRounds(-1, 0.1, 1); !math.IsNaN(v) {
		t.Errorf("two-term with σ = −1: %g, want NaN", v)
	}
}
