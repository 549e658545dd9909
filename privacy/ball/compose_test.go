package ball

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/dpsgd/dpsgd/privacy"
)

// bigCompose returns 1 − (1 − δ)ᵀ in 256-bit arithmetic (square and multiply).
func bigCompose(delta float64, steps int) float64 {
	prec := uint(oraclePrec)
	one := new(big.Float).SetPrec(prec).SetInt64(1)
	base := new(big.Float).SetPrec(prec).Sub(one, new(big.Float).SetPrec(prec).SetFloat64(delta))
	acc := new(big.Float).SetPrec(prec).SetInt64(1)
	for e := steps; e > 0; e >>= 1 {
		if e&1 == 1 {
			acc.Mul(acc, base)
		}
		base.Mul(base, base)
	}
	r, _ := new(big.Float).SetPrec(prec).Sub(one, acc).Float64()
	return r
}

// TestCompose: the exact composition against 256-bit powers, never above
// Tholeti's sum, equal to it for T ≤ 1, and both in [0, 1].
func TestCompose(t *testing.T) {
	for _, d := range []float64{0, 1e-300, 1e-17, 1e-12, 1e-6, 0.01, 0.3, 0.999, 1} {
		for _, T := range []int{0, 1, 2, 7, 1000, 123456, 1 << 40} {
			ex, err1 := ComposeExact(d, T)
			sum, err2 := ComposeSum(d, T)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			want := bigCompose(d, T)
			if relErr(ex, want) > 1e-13 {
				t.Errorf("δ' = %g, T = %d: exact %.17g, 256-bit %.17g", d, T, ex, want)
			}
			if wantSum := math.Min(1, float64(T)*d); sum != wantSum {
				t.Errorf("δ' = %g, T = %d: sum %g, want %g", d, T, sum, wantSum)
			}
			if ex > sum || ex < 0 || sum > 1 {
				t.Errorf("δ' = %g, T = %d: exact %g, sum %g", d, T, ex, sum)
			}
			if T <= 1 && ex != sum {
				t.Errorf("δ' = %g, T = %d: exact %g ≠ sum %g", d, T, ex, sum)
			}
			for _, c := range []Composition{Exact, Sum} {
				v, err := Compose(c, d, T)
				if err != nil || (c == Exact && v != ex) || (c == Sum && v != sum) {
					t.Errorf("Compose(%v, %g, %d) = %g, %v", c, d, T, v, err)
				}
			}
		}
	}
	for _, bad := range []struct {
		d float64
		T int
	}{{-0.1, 1}, {1.1, 1}, {math.NaN(), 1}, {0.5, -1}} {
		if _, err := ComposeExact(bad.d, bad.T); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("ComposeExact(%g, %d): %v", bad.d, bad.T, err)
		}
		if _, err := ComposeSum(bad.d, bad.T); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("ComposeSum(%g, %d): %v", bad.d, bad.T, err)
		}
	}
	if _, err := Compose(Composition(7), 0.1, 1); !errors.Is(err, privacy.ErrInvalidArgument) {
		t.Errorf("unknown composition: %v", err)
	}
	if Exact.String() != "exact" || Sum.String() != "sum" {
		t.Error("Composition.String")
	}
}

// TestComposeTight: the exact composition is attained by T independent ball
// steps: by Monte Carlo, a transcript of T uniform points of B(0, 1) has at
// least one point outside B(2a·e₁, 1) with probability 1 − (1 − δ)ᵀ, which is
// the total variation between the two T-fold products.
func TestComposeTight(t *testing.T) {
	const dim, a, T = 3, 0.1, 5
	n := 60000
	rng := rand.New(rand.NewPCG(7, 8))
	hit := 0
	for i := 0; i < n; i++ {
		for s := 0; s < T; s++ {
			if mcDelta(dim, a, 1, rng) == 1 {
				hit++
				break
			}
		}
	}
	step, _ := StepDelta(dim, 2*a, 1)
	want, _ := ComposeExact(step, T)
	got := float64(hit) / float64(n)
	se := math.Sqrt(want * (1 - want) / float64(n))
	if math.Abs(got-want) > 5*se {
		t.Errorf("Monte Carlo TV of %d steps %.5f, exact composition %.5f (5 s.e. %.5f)", T, got, want, 5*se)
	}
}

func TestAmplify(t *testing.T) {
	for _, c := range []struct {
		d float64
		n int
	}{{0.3, 1}, {0.3, 60000}, {1, 7}, {0, 5}} {
		got, err := Amplify(c.d, c.n)
		if err != nil || got != c.d/float64(c.n) {
			t.Errorf("Amplify(%g, %d) = %g, %v", c.d, c.n, got, err)
		}
	}
	for _, c := range []struct {
		d float64
		n int
	}{{0.3, 0}, {0.3, -1}, {-0.1, 2}, {math.NaN(), 2}, {1.5, 2}} {
		if _, err := Amplify(c.d, c.n); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("Amplify(%g, %d): %v", c.d, c.n, err)
		}
	}
}

// TestSolveRadius: the solved radius meets the target and a radius 2e-10
// smaller does not; Tholeti's sum needs at least as much noise as the exact
// composition; d = 1 has the closed form r = Δ/(2δ') for one step.
func TestSolveRadius(t *testing.T) {
	for _, c := range []struct {
		dim      int
		dist     float64
		n, steps int
		target   float64
	}{
		{1, 1, 1, 1, 0.01},
		{10, 2, 100, 500, 1e-3},
		{784*128 + 128 + 1290, 1, 60000, 60 * 60000, 1e-5},
		{1000, 0.5, 1, 10, 0.2},
		{3, 1, 50, 20, 0.1},
	} {
		var radii [2]float64
		for i, comp := range []Composition{Exact, Sum} {
			r, err := SolveRadius(c.dim, c.dist, c.n, c.steps, c.target, comp)
			if err != nil {
				t.Fatalf("%+v %v: %v", c, comp, err)
			}
			radii[i] = r
			total := func(r float64) float64 {
				s, err := StepDelta(c.dim, c.dist, r)
				if err != nil {
					t.Fatal(err)
				}
				v, _ := Compose(comp, s/float64(c.n), c.steps)
				return v
			}
			if got := total(r); got > c.target {
				t.Errorf("%+v %v: r = %.12g gives δ = %.10g > target", c, comp, r, got)
			}
			if got := total(r * (1 - 2e-10)); got <= c.target {
				t.Errorf("%+v %v: r(1 − 2e-10) = %.12g still meets the target (δ = %.10g)", c, comp, r*(1-2e-10), got)
			}
		}
		if radii[1] < radii[0] {
			t.Errorf("%+v: sum radius %g below exact radius %g", c, radii[1], radii[0])
		}
	}
	// d = 1, one step, one point: δ = Δ/(2r) = target.
	r, _ := SolveRadius(1, 3, 1, 1, 0.01, Exact)
	if relErr(r, 150) > 1e-9 {
		t.Errorf("d = 1: r = %.12g, want 150", r)
	}
	// Every radius meets the target: Δ = 0, no steps, or sampling alone.
	for _, c := range []struct {
		dist     float64
		n, steps int
	}{{0, 1, 10}, {1, 1, 0}, {1, 1000000, 1}} {
		if r, err := SolveRadius(5, c.dist, c.n, c.steps, 0.01, Exact); r != 0 || err != nil {
			t.Errorf("Δ = %g, N = %d, T = %d: r = %g, %v; want 0", c.dist, c.n, c.steps, r, err)
		}
	}
	for _, bad := range []struct {
		dim      int
		dist     float64
		n, steps int
		target   float64
	}{{0, 1, 1, 1, 0.1}, {3, -1, 1, 1, 0.1}, {3, 1, 0, 1, 0.1}, {3, 1, 1, -1, 0.1}, {3, 1, 1, 1, 0}, {3, 1, 1, 1, 1}, {3, 1, 1, 1, math.NaN()}} {
		if _, err := SolveRadius(bad.dim, bad.dist, bad.n, bad.steps, bad.target, Exact); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("SolveRadius(%+v): %v", bad, err)
		}
	}
}
