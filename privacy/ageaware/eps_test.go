package ageaware

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/dpsgd/dpsgd/privacy"
)

// bigEpsilon evaluates ln(1 + Δ(e^{ε_c} − 1)) with 200-bit arithmetic for
// e^{ε_c} (math/big has no log; the log is taken of a float64 rounding of the
// argument, whose relative error 1e-16 changes the result by < 1e-16 in
// absolute terms when the argument is ≥ 1).
func bigEpsilon(delta, epsC float64) float64 {
	// e^x by its Taylor series in big.Float (x ≤ 50 here).
	x := new(big.Float).SetPrec(200).SetFloat64(epsC)
	term := new(big.Float).SetPrec(200).SetFloat64(1)
	sum := new(big.Float).SetPrec(200).SetFloat64(0)
	for k := 1; k < 400; k++ {
		term.Mul(term, x)
		term.Quo(term, new(big.Float).SetPrec(200).SetInt64(int64(k)))
		sum.Add(sum, term) // sum = e^x − 1
	}
	arg := new(big.Float).SetPrec(200).Mul(sum, new(big.Float).SetPrec(200).SetFloat64(delta))
	a, _ := arg.Float64() // Δ(e^x − 1), accurate to 1 ulp
	return math.Log1p(a)
}

// TestEpsilonAgainstHighPrecision: Proposition 1 against a 200-bit evaluation,
// including tiny ε_c and tiny Δ, where the naive formula loses every digit.
func TestEpsilonAgainstHighPrecision(t *testing.T) {
	for _, delta := range []float64{1, 0.7, 0.01, 1e-9, 1e-200} {
		for _, epsC := range []float64{1e-12, 1e-6, 0.01, 0.5, 1, 3, 10, 40} {
			got, err := Epsilon(delta, epsC)
			if err != nil {
				t.Fatal(err)
			}
			want := bigEpsilon(delta, epsC)
			if math.Abs(got-want) > 1e-14*want+1e-300 {
				t.Errorf("ε(Δ=%g, ε_c=%g) = %.17g, want %.17g", delta, epsC, got, want)
			}
		}
	}
}

// TestEpsilonProperties: ε(t, ε_c) ≤ ε_c with equality at Δ = 1, monotone in
// Δ and ε_c, and the round trip ε(t, ε_c(ε̄, t)) = ε̄ of eq. 4.
func TestEpsilonProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := 0; trial < 20000; trial++ {
		delta := math.Pow(10, -12*rng.Float64())
		if trial%7 == 0 {
			delta = 1
		}
		epsC := math.Pow(10, -6+8*rng.Float64())
		e, err := Epsilon(delta, epsC)
		if err != nil {
			t.Fatal(err)
		}
		if e > epsC*(1+1e-15) {
			t.Fatalf("ε(Δ=%g, ε_c=%g) = %g > ε_c", delta, epsC, e)
		}
		if delta == 1 && math.Abs(e-epsC) > 1e-15*epsC {
			t.Fatalf("ε(1, %g) = %g, want ε_c", epsC, e)
		}
		e2, _ := Epsilon(delta*0.9, epsC)
		e3, _ := Epsilon(delta, epsC*1.1)
		if e2 > e || e3 < e {
			t.Fatalf("not monotone at Δ=%g ε_c=%g: %g %g %g", delta, epsC, e, e2, e3)
		}
		epsBar := math.Pow(10, -4+6*rng.Float64())
		c, free, err := AdaptiveEpsC(delta, epsBar)
		if err != nil || free {
			t.Fatalf("AdaptiveEpsC(%g, %g): %v %v", delta, epsBar, free, err)
		}
		if c < epsBar*(1-1e-15) {
			t.Fatalf("ε_c = %g < ε̄ = %g", c, epsBar)
		}
		back, err := Epsilon(delta, c)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(back-epsBar) > 1e-12*epsBar {
			t.Fatalf("round trip Δ=%g ε̄=%g: ε_c=%g gives ε=%.17g", delta, epsBar, c, back)
		}
	}
	// Large ε_c: the log form agrees with the direct one where both work and
	// stays finite beyond e^{709}.
	for _, delta := range []float64{1, 0.5, 1e-3} {
		a, _ := Epsilon(delta, 699.9)
		want := 699.9 + math.Log(delta) + math.Log1p((1-delta)*math.Exp(-699.9)/delta)
		if math.Abs(a-want) > 1e-12*want {
			t.Errorf("ε(%g, 699.9) = %g, want %g", delta, a, want)
		}
		b, _ := Epsilon(delta, 1000)
		if math.IsInf(b, 0) || math.Abs(b-(1000+math.Log(delta))) > 1e-9 {
			t.Errorf("ε(%g, 1000) = %g", delta, b)
		}
		c, _, _ := AdaptiveEpsC(delta, 800)
		if math.IsInf(c, 0) || math.Abs(c-(800-math.Log(delta))) > 1e-9 {
			t.Errorf("ε_c(%g, 800) = %g", delta, c)
		}
	}
}

// TestZeroDelta: Δ = 0 needs no noise: ε_c = +Inf with the flag, η = 0, and
// the released data are 0-age-dependent DP.
func TestZeroDelta(t *testing.T) {
	c, free, err := AdaptiveEpsC(0, 0.5)
	if err != nil || !free || !math.IsInf(c, 1) {
		t.Fatalf("AdaptiveEpsC(0, 0.5) = %g, %v, %v", c, free, err)
	}
	eta, err := LaplaceScale(1.8, c)
	if err != nil || eta != 0 {
		t.Fatalf("LaplaceScale(1.8, +Inf) = %g, %v", eta, err)
	}
	e, err := Epsilon(0, math.Inf(1))
	if err != nil || e != 0 {
		t.Fatalf("Epsilon(0, +Inf) = %g, %v", e, err)
	}
	e, err = Epsilon(0.1, math.Inf(1))
	if err != nil || !math.IsInf(e, 1) {
		t.Fatalf("Epsilon(0.1, +Inf) = %g, %v", e, err)
	}
	// Subnormal Δ stays finite.
	c, free, err = AdaptiveEpsC(5e-324, 0.5)
	if err != nil || free || math.IsInf(c, 0) || c < 700 {
		t.Fatalf("AdaptiveEpsC(5e-324, 0.5) = %g, %v, %v", c, free, err)
	}
}

func TestLaplaceScale(t *testing.T) {
	eta, err := LaplaceScale(1.8, 0.5)
	if err != nil || math.Abs(eta-3.6) > 1e-15 {
		t.Fatalf("η = %g, %v", eta, err)
	}
}

func TestEpsErrors(t *testing.T) {
	for name, f := range map[string]func() error{
		"ε̄ = 0":         func() error { _, _, err := AdaptiveEpsC(0.5, 0); return err },
		"ε̄ < 0":         func() error { _, _, err := AdaptiveEpsC(0.5, -1); return err },
		"ε̄ NaN":         func() error { _, _, err := AdaptiveEpsC(0.5, math.NaN()); return err },
		"ε̄ Inf":         func() error { _, _, err := AdaptiveEpsC(0.5, math.Inf(1)); return err },
		"Δ > 1":          func() error { _, _, err := AdaptiveEpsC(1.5, 1); return err },
		"Δ < 0":          func() error { _, err := Epsilon(-0.1, 1); return err },
		"Δ NaN":          func() error { _, err := Epsilon(math.NaN(), 1); return err },
		"ε_c < 0":        func() error { _, err := Epsilon(0.5, -1); return err },
		"η: ε_c = 0":     func() error { _, err := LaplaceScale(1, 0); return err },
		"η: s < 0":       func() error { _, err := LaplaceScale(-1, 1); return err },
		"η: s = +Inf":    func() error { _, err := LaplaceScale(math.Inf(1), 1); return err },
		"η: ε_c is NaN":  func() error { _, err := LaplaceScale(1, math.NaN()); return err },
		"η: s is NaN":    func() error { _, err := LaplaceScale(math.NaN(), 1); return err },
		"Epsilon ε_c Na": func() error { _, err := Epsilon(0.5, math.NaN()); return err },
	} {
		if err := f(); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("%s: err = %v, want ErrInvalidArgument", name, err)
		}
	}
}
