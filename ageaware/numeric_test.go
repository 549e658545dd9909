package ageaware

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/integrate/quad"
	"gonum.org/v1/gonum/mathext"
)

// TestLowerGammaInts against gonum's regularized incomplete gamma.
func TestLowerGammaInts(t *testing.T) {
	for _, x := range []float64{1e-12, 1e-6, 1e-3, 0.1, 0.5, 0.999, 1, 1.5, 3, 10, 40, 800} {
		got := lowerGammaInts(x)
		for j := 1; j <= 4; j++ {
			want := mathext.GammaIncReg(float64(j+1), x)
			if !approxEq(got[j-1], want, 1e-12, 1e-300) {
				t.Errorf("P(%d, %g) = %.17g, want %.17g", j+1, x, got[j-1], want)
			}
		}
	}
}

// TestClippedLaplaceMoments: the closed form against Gauss–Legendre quadrature
// of the Laplace density on each smooth piece, plus the exact point masses.
func TestClippedLaplaceMoments(t *testing.T) {
	for _, tc := range [][3]float64{{3, 5, 1}, {0, 10, 2}, {10, 0, 2}, {0.001, 50, 100}, {40, 40, 0.01}, {6, 174, 180}, {1e-9, 1e-9, 3}} {
		a, b, eta := tc[0], tc[1], tc[2]
		got := clippedLaplaceMoments(a, b, eta)
		for j := 1; j <= 4; j++ {
			f := func(n float64) float64 { return math.Pow(n, float64(j)) * math.Exp(-math.Abs(n)/eta) / (2 * eta) }
			want := math.Pow(-a, float64(j))*0.5*math.Exp(-a/eta) + math.Pow(b, float64(j))*0.5*math.Exp(-b/eta)
			want += quad.Fixed(f, -a, 0, 200, quad.Legendre{}, 0) + quad.Fixed(f, 0, b, 200, quad.Legendre{}, 0)
			scale := math.Pow(math.Max(a, b), float64(j))
			if !approxEq(got[j-1], want, 1e-10, 1e-12*scale) {
				t.Errorf("a=%g b=%g η=%g: M_%d = %.15g, quadrature %.15g", a, b, eta, j, got[j-1], want)
			}
		}
	}
	if m := clippedLaplaceMoments(3, 4, 0); m != [4]float64{} {
		t.Errorf("η = 0: %v", m)
	}
}

// TestBennettInv: the closed-form optimum against a brute-force minimization
// over λ, and the classical Bernstein form as an upper bound.
func TestBennettInv(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for trial := 0; trial < 300; trial++ {
		x := math.Pow(10, -8+8*rng.Float64())
		v := math.Pow(10, -2+10*rng.Float64())
		b := math.Sqrt(v) * math.Pow(10, -1+4*rng.Float64())
		got := bennettInv(x, v, b)
		obj := func(lam float64) float64 {
			u := lam * b
			return (x + v/(b*b)*(math.Expm1(u)-u)) / lam
		}
		best := math.Inf(1)
		for k := 0; k <= 4000; k++ {
			lam := math.Pow(10, -12+20*float64(k)/4000) / b
			if lam*b > 700 {
				break
			}
			best = math.Min(best, obj(lam))
		}
		best = math.Min(best, b)
		if got > best*(1+1e-6) || got < best*(1-1e-2) {
			t.Fatalf("x=%g v=%g b=%g: %g, brute force %g", x, v, b, got, best)
		}
		if bern := math.Sqrt(2*v*x) + b*x/3; got > bern*(1+1e-12) {
			t.Fatalf("x=%g v=%g b=%g: %g above Bernstein %g", x, v, b, got, bern)
		}
	}
	if bennettInv(0, 1, 1) != 0 || bennettInv(1, 0, 1) != 0 {
		t.Error("x = 0 or v = 0 must give 0")
	}
	if got := bennettInv(1e-4, 2, 0); math.Abs(got-math.Sqrt(4e-4)) > 1e-15 {
		t.Errorf("b = 0: %g, want the sub-Gaussian limit", got)
	}
}

// TestLattice: commensurate values are exact; others are rounded and flagged.
func TestLattice(t *testing.T) {
	l := newLattice([]float64{20, 50, 100, 200}, 100)
	if l.approx || l.k != 18 || l.step != 10 {
		t.Errorf("Lin et al. values: k %d step %g approx %v", l.k, l.step, l.approx)
	}
	l = newLattice([]float64{0.1, 0.2, 0.7}, 10)
	if l.approx || l.k != 6 {
		t.Errorf("0.1, 0.2, 0.7: k %d approx %v", l.k, l.approx)
	}
	l = newLattice([]float64{0, 1, math.Pi}, 100)
	if !l.approx || 100*l.k+1 > maxLattice {
		t.Errorf("π: k %d approx %v", l.k, l.approx)
	}
	if d := math.Abs(l.lo + l.step*float64(l.off[2]) - math.Pi); d > math.Pi/float64(l.k) {
		t.Errorf("π rounded by %g", d)
	}
	l = newLattice([]float64{5, 5}, 3)
	if l.k != 0 {
		t.Errorf("constant values: k %d", l.k)
	}
}
