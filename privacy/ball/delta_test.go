package ball

import (
	"errors"
	"math"
	"math/big"
	mrand "math/rand"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/quick"

	"github.com/dpsgd/dpsgd/privacy"
)

// relErr returns |got − want|/|want| (|got| when want = 0).
func relErr(got, want float64) float64 {
	if want == 0 {
		return math.Abs(got)
	}
	return math.Abs(got-want) / math.Abs(want)
}

// TestStepDeltaD1: in one dimension the ball is an interval and δ = Δ/(2r)
// exactly (Tholeti §IV.A.1; He & Cai 2017), 1 once Δ ≥ 2r.
func TestStepDeltaD1(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		r := math.Exp(rng.Float64()*40 - 20)
		dist := 2.2 * r * rng.Float64()
		got, err := StepDelta(1, dist, r)
		if err != nil {
			t.Fatal(err)
		}
		want := math.Min(1, dist/(2*r))
		if got != want {
			t.Fatalf("d = 1, Δ = %g, r = %g: δ = %.17g, want Δ/(2r) = %.17g", dist, r, got, want)
		}
	}
	for _, c := range [][3]float64{{0, 1, 0}, {2, 1, 1}, {5, 1, 1}, {0, 1e-300, 0}} {
		if got, _ := StepDelta(7, c[0], c[1]); got != c[2] {
			t.Errorf("d = 7, Δ = %g, r = %g: δ = %g, want %g", c[0], c[1], got, c[2])
		}
	}
}

// TestStepDeltaGeometry: d = 2 and d = 3 against the textbook overlap of two
// discs (lens area 2r²·acos(Δ/2r) − (Δ/2)√(4r² − Δ²)) and of two balls
// (π(4r + Δ)(2r − Δ)²/12), δ = 1 − overlap/volume.
func TestStepDeltaGeometry(t *testing.T) {
	for _, r := range []float64{0.5, 1, 3} {
		for i := 1; i < 40; i++ {
			dist := 2 * r * float64(i) / 40
			lens := 2*r*r*math.Acos(dist/(2*r)) - dist/2*math.Sqrt(4*r*r-dist*dist)
			want2 := 1 - lens/(math.Pi*r*r)
			want3 := 1 - (4*r+dist)*(2*r-dist)*(2*r-dist)/(16*r*r*r)
			got2, _ := StepDelta(2, dist, r)
			got3, _ := StepDelta(3, dist, r)
			if math.Abs(got2-want2) > 1e-14 || math.Abs(got3-want3) > 1e-14 {
				t.Errorf("r = %g, Δ = %g: d=2 δ = %.16g want %.16g; d=3 δ = %.16g want %.16g", r, dist, got2, want2, got3, want3)
			}
		}
	}
}

// oracleDims are the dimensions checked against the 256-bit sums: small ones,
// both sides of the power-series threshold b = (d+1)/2 = 30, and large ones.
var oracleDims = []int{1, 2, 3, 4, 5, 6, 7, 10, 11, 57, 58, 59, 60, 61, 62, 99, 100, 256, 1000, 1001, 4096, 10001}

// oracleAs returns values of a = Δ/(2r): a log grid from 1e-12 to 1 − 1e-9,
// the points where b·a² = 1 (the switch between the two series) ± 1 ulp, and
// random ones.
func oracleAs(dim int, rng *rand.Rand) []float64 {
	as := []float64{1e-300, 1e-12, 1e-8, 1e-5, 1e-3, 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.5000000001, 0.7, 0.9, 0.99, 0.999999, 1 - 1e-9}
	sw := 1 / math.Sqrt(0.5*float64(dim+1))
	as = append(as, sw, math.Nextafter(sw, 0), math.Nextafter(sw, 1), 3*sw, 6*sw)
	for i := 0; i < 8; i++ {
		as = append(as, math.Exp(-rng.Float64()*20))
	}
	out := as[:0]
	for _, a := range as {
		if a > 0 && a < 1 {
			out = append(out, a)
		}
	}
	return out
}

// TestStepDeltaOracle: StepDelta against bigDelta (256-bit finite sums, no
// code shared) to 1e-14 relative, everywhere from δ ≈ 1e-300 to δ ≈ 1.
func TestStepDeltaOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	worst := 0.0
	for _, d := range oracleDims {
		for _, a := range oracleAs(d, rng) {
			want := bigDelta(d, a)
			got, err := StepDelta(d, 2*a, 1)
			if err != nil {
				t.Fatal(err)
			}
			e := relErr(got, want)
			worst = math.Max(worst, e)
			if e > 1e-14 {
				t.Errorf("d = %d, a = %.17g: δ = %.17g, oracle %.17g (relative error %.2g)", d, a, got, want, e)
			}
		}
	}
	t.Logf("largest relative error against the 256-bit sums: %.2g", worst)
}

// TestStepDeltaOracleLargeDim: tiny, middle and near-one δ at d ≈ 10⁵ against
// the 256-bit sums (tens of ms each).
func TestStepDeltaOracleLargeDim(t *testing.T) {
	if testing.Short() {
		t.Skip("O(d) 256-bit sums")
	}
	for _, d := range []int{100000, 100001} {
		for _, a := range []float64{1e-12, 1e-9, 1e-6, 3e-4, 2e-3, 5e-3, 1.5e-2, 0.03, 0.05} {
			want := bigDelta(d, a)
			got, _ := StepDelta(d, 2*a, 1)
			if e := relErr(got, want); e > 1e-14 {
				t.Errorf("d = %d, a = %g: δ = %.17g, oracle %.17g (relative error %.2g)", d, a, got, want, e)
			}
		}
	}
}

// TestStepDeltaQuadrature: StepDelta against the volume of the part of one
// ball outside the other, integrated slice by slice with Gauss–Legendre
// quadrature (capDelta), including tiny δ at d = 10⁶. The tolerance grows
// with d because capDelta's volume ratio comes from math.Lgamma differences.
func TestStepDeltaQuadrature(t *testing.T) {
	for _, d := range []int{2, 3, 5, 10, 31, 64, 100, 333, 1000, 10000} {
		tol := 1e-13 * math.Max(1, float64(d)/10)
		for _, a := range []float64{1e-7, 1e-3, 0.05, 0.2, 0.4, 0.6, 0.8, 0.95} {
			want := capDelta(d, a)
			got, _ := StepDelta(d, 2*a, 1)
			if e := relErr(got, want); e > tol {
				t.Errorf("d = %d, a = %g: δ = %.16g, quadrature %.16g (relative error %.2g > %.2g)", d, a, got, want, e, tol)
			}
		}
	}
	// Tiny δ in high dimension: δ ≈ 1e-9 … 1e-6 at d = 10⁵ and 10⁶.
	for _, d := range []int{100000, 1000000} {
		for _, a := range []float64{1e-12, 1e-10, 1e-9} {
			want := capDelta(d, a)
			got, _ := StepDelta(d, 2*a, 1)
			if want > 1e-5 || relErr(got, want) > 1e-9 {
				t.Errorf("d = %d, a = %g: δ = %.16g, quadrature %.16g", d, a, got, want)
			}
		}
	}
}

// TestStepDeltaMonteCarlo: δ is the chance that a uniform point of one ball
// lies outside the other (d = 2, 3, 10), within 5 standard errors.
func TestStepDeltaMonteCarlo(t *testing.T) {
	n := 200000
	if testing.Short() {
		n = 40000
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, d := range []int{2, 3, 10} {
		for _, a := range []float64{0.05, 0.3, 0.7} {
			want, _ := StepDelta(d, 2*a, 1)
			got := mcDelta(d, a, n, rng)
			se := math.Sqrt(want * (1 - want) / float64(n))
			if math.Abs(got-want) > 5*se {
				t.Errorf("d = %d, a = %g: Monte Carlo %.5f, δ = %.5f (5 s.e. = %.5f)", d, a, got, want, 5*se)
			}
		}
	}
}

// TestStepDeltaProperties: δ in [0, 1], non-decreasing in d and Δ,
// non-increasing in r, and a function of Δ/r only (up to rounding).
func TestStepDeltaProperties(t *testing.T) {
	type in struct {
		D        uint16
		A1, A2   float64
		R, Scale float64
	}
	cfg := &quick.Config{MaxCount: 3000, Rand: mrand.New(mrand.NewSource(9))}
	prop := func(v in) bool {
		d := 1 + int(v.D)%3000
		a1, a2 := math.Abs(math.Mod(v.A1, 1.2)), math.Abs(math.Mod(v.A2, 1.2))
		if a1 > a2 {
			a1, a2 = a2, a1
		}
		r := 0.01 + math.Abs(math.Mod(v.R, 100))
		s := 1e-3 + math.Abs(math.Mod(v.Scale, 1e3))
		d1, err1 := StepDelta(d, 2*a1*r, r)
		d2, err2 := StepDelta(d, 2*a2*r, r)
		d1Next, err3 := StepDelta(d+1, 2*a1*r, r)
		farther, err4 := StepDelta(d, 2*a1*r, 1.5*r) // larger radius
		scaled, err5 := StepDelta(d, 2*a1*r*s, r*s)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil {
			t.Logf("errors %v %v %v %v %v", err1, err2, err3, err4, err5)
			return false
		}
		const slack = 1e-13
		ok := d1 >= 0 && d2 <= 1 &&
			d2 >= d1*(1-slack) && // increasing in Δ
			d1Next >= d1*(1-slack) && // increasing in d
			farther <= d1*(1+slack) && // decreasing in r
			math.Abs(scaled-d1) <= 1e-12*math.Max(d1, 1e-300)+1e-300
		if !ok {
			t.Logf("d=%d a1=%g a2=%g r=%g s=%g: δ(a1)=%g δ(a2)=%g δ(d+1)=%g δ(1.5r)=%g δ(scaled)=%g", d, a1, a2, r, s, d1, d2, d1Next, farther, scaled)
		}
		return ok
	}
	if err := quick.Check(prop, cfg); err != nil {
		t.Error(err)
	}
	// Strictly increasing in d at fixed Δ/r away from the extremes (Tholeti
	// §IV.A.1, Fig. 2).
	prev := 0.0
	for d := 1; d <= 2000; d++ {
		v, _ := StepDelta(d, 0.02, 1)
		if !(v > prev) {
			t.Fatalf("δ(d = %d) = %.17g not above δ(d−1) = %.17g", d, v, prev)
		}
		prev = v
	}
}

// TestSeriesAgree: where both apply (b ≥ 30, b·x ≤ 1) the power series and
// the positive series agree to 1e-14.
func TestSeriesAgree(t *testing.T) {
	for _, d := range []int{59, 60, 101, 1000, 4001, 20000} {
		b := 0.5 * float64(d+1)
		for _, bx := range []float64{1e-6, 0.01, 0.1, 0.5, 0.9, 1} {
			a := math.Sqrt(bx / b)
			p := powerSeries(b, a, a*a)
			s := positiveSeries(d, a, a*a)
			if e := relErr(p, s); e > 1e-14 {
				t.Errorf("d = %d, b·x = %g: power series %.17g, positive series %.17g (%.2g)", d, bx, p, s, e)
			}
		}
	}
}

// TestQuadratureAgrees: for b ≥ 500 and b·x > 1, the quadrature agrees
// with the positive series (O(d) there, so the tests' reference) to 1e-14,
// and where the complement bound says δ rounds to 1 the series is within a
// few ulps of 1 (its absolute error near 1).
func TestQuadratureAgrees(t *testing.T) {
	dims := []int{999, 1000, 4000, 20001, 100000}
	if testing.Short() {
		dims = dims[:4]
	}
	for _, d := range dims {
		b := 0.5 * float64(d+1)
		for _, bx := range []float64{1.0001, 1.5, 3, 8, 20, 35, 45, 60, 200} {
			a := math.Sqrt(bx / b)
			s := positiveSeries(d, a, a*a)
			if complementNegligible(b, a, a*a) {
				if bx < 30 || s < 1-1e-14 {
					t.Errorf("d = %d, b·x = %g: complement called negligible, series δ = %.17g", d, bx, s)
				}
				continue
			}
			if bx > 60 {
				t.Errorf("d = %d, b·x = %g: complement bound not used", d, bx)
			}
			if q := quadrature(b, a); relErr(q, s) > 1e-14 {
				t.Errorf("d = %d, b·x = %g: quadrature %.17g, series %.17g (%.2g)", d, bx, q, s, relErr(q, s))
			}
		}
	}
}

// TestLnGammaRatio: R(b) = Γ(b+½)/Γ(b) against 256-bit values of the exact
// recurrence R(b+1) = R(b)·(b+½)/b from R(½) = 1/√π and R(1) = √π/2, on both
// sides of the switch to the Stirling difference at b = 30, and against the
// asymptotic series √b·(1 − 1/(8b) + 1/(128b²) − …) far out.
func TestLnGammaRatio(t *testing.T) {
	prec := uint(oraclePrec)
	sqrtPi := new(big.Float).SetPrec(prec).Sqrt(piBig)
	// R(1) = Γ(3/2)/Γ(1) = √π/2, R(1/2) = Γ(1)/Γ(1/2) = 1/√π; R(b+1) = R(b)(b+½)/b.
	for _, start := range []float64{0.5, 1} {
		r := new(big.Float).SetPrec(prec).Quo(sqrtPi, big.NewFloat(2))
		if start == 0.5 {
			r = new(big.Float).SetPrec(prec).Quo(big.NewFloat(1), sqrtPi)
		}
		for b := start; b < 5000; b++ {
			if b < 100 || int(b)%97 == 0 {
				want, _ := r.Float64()
				got := math.Exp(lnGammaRatio(b))
				if e := relErr(got, want); e > 2e-15 {
					t.Errorf("Γ(b+½)/Γ(b) at b = %g: %.17g, want %.17g (%.2g)", b, got, want, e)
				}
			}
			f := new(big.Float).SetPrec(prec).SetFloat64(b + 0.5)
			r.Mul(r, f)
			r.Quo(r, new(big.Float).SetPrec(prec).SetFloat64(b))
		}
	}
	// Large b: the ratio is √b·(1 − 1/(8b) + 1/(128b²) + …).
	for _, b := range []float64{1e6, 1e9, 1e12} {
		want := math.Sqrt(b) * (1 - 1/(8*b) + 1/(128*b*b))
		if e := relErr(math.Exp(lnGammaRatio(b)), want); e > 2e-15 {
			t.Errorf("b = %g: relative error %.2g", b, e)
		}
	}
}

func TestStepDeltaErrors(t *testing.T) {
	for _, c := range []struct {
		dim        int
		dist, r    float64
		field, rng string
	}{
		{0, 1, 1, "dim", "[1, "},
		{-3, 1, 1, "dim", "[1, "},
		{MaxDim + 1, 1, 1, "dim", "[1, "},
		{3, -1, 1, "distance", "[0, +Inf)"},
		{3, math.NaN(), 1, "distance", "[0, +Inf)"},
		{3, math.Inf(1), 1, "distance", "[0, +Inf)"},
		{3, 1, 0, "radius", "(0, +Inf)"},
		{3, 1, -2, "radius", "(0, +Inf)"},
		{3, 1, math.NaN(), "radius", "(0, +Inf)"},
		{3, 1, math.Inf(1), "radius", "(0, +Inf)"},
	} {
		_, err := StepDelta(c.dim, c.dist, c.r)
		if !errors.Is(err, privacy.ErrInvalidArgument) || !strings.Contains(err.Error(), c.field) || !strings.Contains(err.Error(), c.rng) {
			t.Errorf("StepDelta(%d, %g, %g): error %v, want ErrInvalidArgument naming %s and %s", c.dim, c.dist, c.r, err, c.field, c.rng)
		}
	}
}

// FuzzStepDelta: any input gives an error or a δ in [0, 1], never a panic.
func FuzzStepDelta(f *testing.F) {
	f.Add(uint32(3), 0.5, 1.0)
	f.Add(uint32(100000), 1e-9, 1.0)
	f.Add(uint32(1), 2.0, 1.0)
	f.Add(uint32(60), -1.0, 0.0)
	f.Fuzz(func(t *testing.T, d uint32, dist, r float64) {
		dim := int(d % 200000) // keep each execution fast (the cost is O(d) at worst)
		v, err := StepDelta(dim, dist, r)
		if err != nil {
			if !errors.Is(err, privacy.ErrInvalidArgument) {
				t.Fatalf("StepDelta(%d, %g, %g): error %v does not wrap ErrInvalidArgument", dim, dist, r, err)
			}
			return
		}
		if !(v >= 0 && v <= 1) {
			t.Fatalf("StepDelta(%d, %g, %g) = %g", dim, dist, r, v)
		}
	})
}
