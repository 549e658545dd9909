package allocation

import (
	"math"
	"testing"
)

// TestPosSecondQuadrature checks E[(Y−1)_+²] against numerical integration
// (asymLogPosSecond's closed form) on every branch.
func TestPosSecondQuadrature(t *testing.T) {
	for _, sigma := range []float64{0.3, 0.5, 0.99, 1, 1.01, 2, 10, 100} {
		tt := 1 / sigma
		want := cfLognormalMoment(tt, func(y float64) float64 {
			if y > 1 {
				return (y - 1) * (y - 1)
			}
			return 0
		})
		if got := math.Exp(asymLogPosSecond(tt * tt)); !cfRelClose(got, want, 1e-7) {
			t.Errorf("σ = %g: %.10g, quadrature %.10g", sigma, got, want)
		}
	}
	// Tiny t: the t²/2 + t³/√(2π) branch joins the erf branch.
	a, b := asymLogPosSecond(1e-12*(1-1e-9)), asymLogPosSecond(1e-12*(1+1e-9))
	if math.Abs(a-b) > 1e-8 {
		t.Errorf("branch switch: %g vs %g", a, b)
	}
}

// TestMuRatio: μ_sub/μ_alloc → √2 (σ → 0) and → 1 (σ → ∞), decreasing, values
// computed independently, and = (1+√2)/2 at σ ≈ 1.66801.
func TestMuRatio(t *testing.T) {
	ratio := func(s float64) float64 { return MuSubsampled(s, 1) / MuAllocation(s, 1) }
	for s, want := range map[float64]float64{0.2: math.Sqrt2, 1: 1.3046, 1.5: 1.2259, 2: 1.1775, 10: 1.0391, 100: 1.0040} {
		if got := ratio(s); math.Abs(got-want) > 6e-5 {
			t.Errorf("σ = %g: ratio %.6f, want %g", s, got, want)
		}
	}
	if r := ratio(1e5); math.Abs(r-1) > 1e-4 {
		t.Errorf("σ = 1e5: ratio %g, want → 1", r)
	}
	prev := math.Inf(1)
	for s := 0.05; s <= 50; s += 0.01 {
		r := ratio(s)
		if r > prev+1e-12 {
			t.Fatalf("ratio increases at σ = %g: %.15g > %.15g", s, r, prev)
		}
		prev = r
	}
	target := (1 + math.Sqrt2) / 2
	lo, hi := 1.0, 3.0
	for hi-lo > 1e-10 {
		mid := (lo + hi) / 2
		if ratio(mid) > target {
			lo = mid
		} else {
			hi = mid
		}
	}
	if math.Abs(lo-1.66801) > 1e-5 {
		t.Errorf("ratio = (1+√2)/2 at σ = %.6f, want 1.66801", lo)
	}
}

func TestMuValues(t *testing.T) {
	// μ = c√(e^{1/σ²} − 1) equals the Poisson CLT μ = p√(T(e^{1/σ²}−1)) with
	// p = 1/M, T = E·M, c = √(E/M) (Bu et al. 2019).
	e, m, s := 30.0, 1000.0, 1.3
	want := (1 / m) * math.Sqrt(e*m*math.Expm1(1/(s*s)))
	if got := MuAllocation(s, math.Sqrt(e/m)); !cfRelClose(got, want, 1e-12) {
		t.Errorf("MuAllocation %g, Poisson CLT %g", got, want)
	}
	if MuAllocation(1, 0) != 0 || MuSubsampled(1, 0) != 0 {
		t.Error("c = 0")
	}
	if !math.IsInf(MuAllocation(0.01, 1), 1) || !math.IsInf(MuSubsampled(0.01, 1), 1) {
		t.Error("σ = 0.01 should overflow to +Inf")
	}
	for _, v := range []float64{MuAllocation(-1, 1), MuAllocation(1, -1), MuSubsampled(math.NaN(), 1), MuSubsampled(1, math.Inf(1))} {
		if !math.IsNaN(v) {
			t.Errorf("invalid input gave %g, want NaN", v)
		}
	}
}
