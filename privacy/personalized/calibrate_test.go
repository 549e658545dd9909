package personalized

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/privacy"
)

// gdpDelta is δ(ε) of μ-GDP written directly with math.Erfc
// (Dong, Roth & Su 2019), independently of privacy.GaussianDelta's log-space
// evaluation: Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2).
func gdpDelta(mu, eps float64) float64 {
	phi := func(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }
	return phi(-eps/mu+mu/2) - math.Exp(eps)*phi(-eps/mu-mu/2)
}

// hand is the worked example of the tests: T = 1000 draws, q = 0.01,
// δ‴ = 1e−5 (R = 32, see TestLogisticHand), C = 1, s = 1, m = 100, ε = 0.5,
// δ' = 1e−5, one release per participation.
var (
	handClient  = Client{Epsilon: 0.5, DeltaPrime: 1e-5, DeltaTail: 1e-5, SampleRate: 0.01}
	handSetting = Setting{Draws: 1000, Clip: 1, LocalExamples: 100, LocalSteps: 1}
)

// TestCalibrateHand: the worked example by hand.
// S = 2·1·1/100 = 0.02.
// σ_seed = 0.02/0.5·√(2·ln(1.25e5)·32) = 0.04·√(2·11.7360690·32)
// = 0.04·√751.108 = 0.04·27.40635 = 1.0962543 (50 digits: 1.0962542895092938).
// σ_GDP: the largest μ with δ(0.5; μ) ≤ 1e−5 is μ* = 0.14221055866926 (50-digit
// root of Φ(−ε/μ+μ/2) − e^ε Φ(−ε/μ−μ/2) = 1e−5), multiplier √32/μ* =
// 39.778018611463, σ = 0.02·39.778 = 0.79556037222925.
// δ_total = 1e−5 + 1e−5 − 1e−10 = 1.99999e−5.
func TestCalibrateHand(t *testing.T) {
	cal, err := Calibrate(handClient, handSetting)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, got, want, rel float64) {
		t.Helper()
		if math.Abs(got-want) > rel*math.Abs(want) {
			t.Errorf("%s = %.15g, want %.15g", name, got, want)
		}
	}
	if cal.Rounds.Used != 32 || cal.Releases != 1 {
		t.Errorf("rounds %+v, releases %d", cal.Rounds, cal.Releases)
	}
	check("Sensitivity", cal.Sensitivity, 0.02, 1e-15)
	check("SigmaSeed", cal.SigmaSeed, 1.0962542895092938, 1e-14)
	check("Mu", cal.Mu, 0.14221055866926122, 2e-9)
	check("Multiplier", cal.Multiplier, 39.778018611462693, 2e-9)
	check("SigmaGDP", cal.SigmaGDP, 0.79556037222925387, 2e-9)
	check("DeltaTotal", cal.DeltaTotal, 1.99999e-5, 1e-14)
	if !cal.SeedValid {
		t.Error("ε = 0.5, one release: SeedValid = false")
	}
	// The same by a second path: math directly from the appendix's formula with
	// K·T·q + √(K·T·q(1−q))/k·ln(1/γ') replaced by Lemma 1's R.
	r := float64(cal.Rounds.Used)
	check("SigmaSeed (formula)", cal.SigmaSeed, (2*1*1)/(100*0.5)*math.Sqrt(2*math.Log(1.25/1e-5)*r), 1e-14)
	check("SigmaGDP/Multiplier", cal.SigmaGDP/cal.Multiplier, cal.Sensitivity, 1e-15)
	check("Mu·Multiplier", cal.Mu*cal.Multiplier, math.Sqrt(r), 1e-14)
}

// TestSigmaGDPMeetsTarget: at SigmaGDP, Rᵢ·Releases Gaussian releases of
// sensitivity S meet (ε, δ') by the GDP conversion, evaluated by two
// independent codes (privacy.GaussianDelta and a direct erfc formula), and
// 1e−8 less noise misses it (the calibration is tight). Spent at Rᵢ
// selections is ε.
func TestSigmaGDPMeetsTarget(t *testing.T) {
	for _, eps := range []float64{0.01, 0.013, 0.1, 0.5, 1, 2, 4, 8, 30} {
		for _, dp := range []float64{1e-3, 1e-5, 1e-9} {
			for _, steps := range []int{1, 10} {
				c := Client{Epsilon: eps, DeltaPrime: dp, DeltaTail: 1e-6, SampleRate: 0.02, Sensitivity: 1.5}
				s := Setting{Draws: 5000, Clip: 0.7, LocalExamples: 64, LocalSteps: steps}
				cal, err := Calibrate(c, s)
				if err != nil {
					t.Fatal(err)
				}
				n := math.Sqrt(float64(cal.Rounds.Used * steps))
				mu := n * cal.Sensitivity / cal.SigmaGDP
				d1, err := privacy.GaussianDelta(mu, eps)
				if err != nil || d1 > dp {
					t.Errorf("ε=%g δ'=%g I=%d: δ at σ_GDP = %g (%v) > %g", eps, dp, steps, d1, err, dp)
				}
				if d2 := gdpDelta(mu, eps); d2 > dp*(1+1e-6) {
					t.Errorf("ε=%g δ'=%g I=%d: erfc δ at σ_GDP = %g > %g", eps, dp, steps, d2, dp)
				}
				if d3, _ := privacy.GaussianDelta(mu*(1+1e-8), eps); !(d3 > dp) {
					t.Errorf("ε=%g δ'=%g I=%d: σ_GDP·(1−1e−8) still meets δ' (δ = %g): not tight", eps, dp, steps, d3)
				}
				got, err := Spent(cal.Rounds.Used, steps, cal.Multiplier, dp)
				if err != nil || got > eps || got < eps*(1-1e-7) {
					t.Errorf("ε=%g δ'=%g I=%d: Spent at R = %.12g (%v), want ε", eps, dp, steps, got, err)
				}
			}
		}
	}
}

// TestSigmaGDPBelowSeed: in the appendix's regime (ε < 1, one release per
// participation) the classic constant is a theorem, so the tight σ_GDP is
// at most σ_seed and the appendix's σ meets δ' (SeedDelta ≤ δ'). Outside it,
// SeedValid is false.
func TestSigmaGDPBelowSeed(t *testing.T) {
	for _, eps := range []float64{0.05, 0.2, 0.5, 0.9, 0.999} {
		for _, dp := range []float64{0.01, 1e-5, 1e-12} {
			for _, q := range []float64{0.001, 0.05, 0.5, 1} {
				c := Client{Epsilon: eps, DeltaPrime: dp, DeltaTail: 1e-4, SampleRate: q}
				for _, s := range []Setting{
					{Draws: 2000, Clip: 1, LocalExamples: 10, LocalSteps: 1},
					{Draws: 2000, Clip: 1, LocalExamples: 10, LocalSteps: 5, Perturbation: Output},
				} {
					cal, err := Calibrate(c, s)
					if err != nil {
						t.Fatal(err)
					}
					if !cal.SeedValid || cal.Releases != 1 {
						t.Errorf("%+v %+v: SeedValid %v, releases %d", c, s, cal.SeedValid, cal.Releases)
					}
					if !(cal.SigmaGDP <= cal.SigmaSeed) || !(cal.SeedDelta <= dp) {
						t.Errorf("%+v: σ_GDP = %g, σ_seed = %g, seed δ = %g vs δ' = %g", c, cal.SigmaGDP, cal.SigmaSeed, cal.SeedDelta, dp)
					}
				}
			}
		}
	}
	for _, c := range []struct {
		eps   float64
		steps int
	}{{1, 1}, {3, 1}, {0.5, 2}} {
		cal, err := Calibrate(Client{Epsilon: c.eps, DeltaPrime: 1e-5, DeltaTail: 1e-5, SampleRate: 0.1},
			Setting{Draws: 100, Clip: 1, LocalExamples: 1, LocalSteps: c.steps})
		if err != nil || cal.SeedValid {
			t.Errorf("ε=%g I=%d: SeedValid = %v (%v), want false", c.eps, c.steps, cal.SeedValid, err)
		}
	}
	// With 10 noisy local steps per participation the appendix's σ (made for one
	// release) misses δ' by far.
	cal, _ := Calibrate(handClient, Setting{Draws: 1000, Clip: 1, LocalExamples: 100, LocalSteps: 10})
	if !(cal.SeedDelta > 10*handClient.DeltaPrime) || !(cal.SigmaGDP > cal.SigmaSeed) {
		t.Errorf("I = 10: seed δ = %g, σ_GDP = %g, σ_seed = %g", cal.SeedDelta, cal.SigmaGDP, cal.SigmaSeed)
	}
}

// TestCalibrateMonotone: σ decreases as ε grows and grows with T (both
// calibrations); doubling m halves both; sᵢ scales both.
func TestCalibrateMonotone(t *testing.T) {
	prevG, prevS := math.Inf(1), math.Inf(1)
	for _, eps := range []float64{0.1, 0.3, 1, 2, 5, 10} {
		cal, err := Calibrate(Client{Epsilon: eps, DeltaPrime: 1e-5, DeltaTail: 1e-5, SampleRate: 0.05}, Setting{Draws: 2000, Clip: 1, LocalExamples: 50, LocalSteps: 3})
		if err != nil {
			t.Fatal(err)
		}
		if !(cal.SigmaGDP < prevG) || !(cal.SigmaSeed < prevS) {
			t.Errorf("ε=%g: σ_GDP %g (before %g), σ_seed %g (before %g)", eps, cal.SigmaGDP, prevG, cal.SigmaSeed, prevS)
		}
		prevG, prevS = cal.SigmaGDP, cal.SigmaSeed
	}
	prevG, prevS = 0, 0
	for _, n := range []int{10, 100, 1000, 10_000, 100_000, 1_000_000} {
		cal, err := Calibrate(Client{Epsilon: 1, DeltaPrime: 1e-5, DeltaTail: 1e-5, SampleRate: 0.01}, Setting{Draws: n, Clip: 1, LocalExamples: 50, LocalSteps: 1})
		if err != nil {
			t.Fatal(err)
		}
		if !(cal.SigmaGDP > prevG) || !(cal.SigmaSeed > prevS) {
			t.Errorf("T=%d: σ_GDP %g (before %g), σ_seed %g (before %g)", n, cal.SigmaGDP, prevG, cal.SigmaSeed, prevS)
		}
		prevG, prevS = cal.SigmaGDP, cal.SigmaSeed
	}
	a, _ := Calibrate(handClient, handSetting)
	s2 := handSetting
	s2.LocalExamples *= 2
	b, _ := Calibrate(handClient, s2)
	c2 := handClient
	c2.Sensitivity = 3
	c, _ := Calibrate(c2, handSetting)
	if math.Abs(b.SigmaGDP*2/a.SigmaGDP-1) > 1e-14 || math.Abs(b.SigmaSeed*2/a.SigmaSeed-1) > 1e-14 ||
		math.Abs(c.SigmaGDP/(3*a.SigmaGDP)-1) > 1e-14 || math.Abs(c.SigmaSeed/(3*a.SigmaSeed)-1) > 1e-14 ||
		b.Multiplier != a.Multiplier || c.Multiplier != a.Multiplier {
		t.Errorf("scaling: base %+v, 2m %+v, s=3 %+v", a, b, c)
	}
}

// TestCalibrateOutput: output perturbation makes one release per
// participation whatever LocalSteps is; gradient perturbation with I steps
// needs √I times the multiplier of one step at the same μ.
func TestCalibrateOutput(t *testing.T) {
	c := Client{Epsilon: 2, DeltaPrime: 1e-6, DeltaTail: 1e-6, SampleRate: 0.03}
	one, _ := Calibrate(c, Setting{Draws: 3000, Clip: 1, LocalExamples: 20, LocalSteps: 1})
	out, _ := Calibrate(c, Setting{Draws: 3000, Clip: 1, LocalExamples: 20, LocalSteps: 8, Perturbation: Output})
	grad, _ := Calibrate(c, Setting{Draws: 3000, Clip: 1, LocalExamples: 20, LocalSteps: 8})
	if out.Multiplier != one.Multiplier || out.Releases != 1 || grad.Releases != 8 {
		t.Errorf("output %+v vs one step %+v", out, one)
	}
	if math.Abs(grad.Multiplier/one.Multiplier-math.Sqrt(8)) > 1e-9 || math.Abs(grad.Mu/one.Mu-1) > 1e-9 {
		t.Errorf("gradient, I = 8: multiplier ratio %g, want √8; μ %g vs %g", grad.Multiplier/one.Multiplier, grad.Mu, one.Mu)
	}
	if Gradient.String() != "gradient" || Output.String() != "output" {
		t.Error("Perturbation.String")
	}
}

// TestSpent: ε = 0 before any selection, increasing with selections and
// local steps, equal to the GDP conversion at μ = √(c·I)/multiplier.
func TestSpent(t *testing.T) {
	if e, err := Spent(0, 5, 2, 1e-5); err != nil || e != 0 {
		t.Errorf("Spent(0) = %g, %v", e, err)
	}
	prev := 0.0
	for c := 1; c <= 64; c *= 2 {
		e, err := Spent(c, 3, 10, 1e-5)
		if err != nil || !(e > prev) {
			t.Errorf("c=%d: ε = %g (%v), previous %g", c, e, err, prev)
		}
		// ε meets δ' by the erfc formula, and ε(1 − 1e−6) does not.
		mu := math.Sqrt(float64(3*c)) / 10
		if d := gdpDelta(mu, e); d > 1e-5*(1+1e-6) {
			t.Errorf("c=%d: δ(ε) = %g > 1e-5", c, d)
		}
		if d := gdpDelta(mu, e*(1-1e-6)); !(d > 1e-5) {
			t.Errorf("c=%d: δ(ε(1−1e−6)) = %g ≤ 1e-5: ε not the smallest", c, d)
		}
		prev = e
	}
	// Dong, Roth & Su's δ(ε) solved independently: μ = 1 → ε(1e−5) = 4.3772 (c·I = 4, multiplier 2).
	if e, _ := Spent(2, 2, 2, 1e-5); math.Abs(e-4.3772) > 5e-5 {
		t.Errorf("μ = 1: ε = %g, want 4.3772", e)
	}
	for _, bad := range []struct {
		c, i int
		m, d float64
	}{{-1, 1, 1, 1e-5}, {1, 0, 1, 1e-5}, {1, 1, 0, 1e-5}, {1, 1, math.Inf(1), 1e-5}, {1, 1, math.NaN(), 1e-5}, {1, 1, 1, 0}, {1, 1, 1, 1}} {
		if _, err := Spent(bad.c, bad.i, bad.m, bad.d); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("Spent%+v: %v", bad, err)
		}
	}
}

// TestDeltaTotal: δ' + δ‴ − δ'δ‴ = 1 − (1−δ')(1−δ‴), and a Monte Carlo
// reading of it: the probability that a Bernoulli(δ') "mechanism failure" or
// an independent Bernoulli(δ‴) "count exceeded" happens.
func TestDeltaTotal(t *testing.T) {
	for _, c := range [][2]float64{{1e-5, 1e-5}, {0.1, 0.2}, {0.5, 0.5}, {1e-9, 0.3}} {
		got := DeltaTotal(c[0], c[1])
		want := 1 - (1-c[0])*(1-c[1])
		if math.Abs(got-want) > 1e-15 {
			t.Errorf("DeltaTotal(%g, %g) = %.17g, want %.17g", c[0], c[1], got, want)
		}
	}
	if got := DeltaTotal(0.1, 0.2); math.Abs(got-0.28) > 1e-15 { // 0.1 + 0.2 − 0.02 by hand
		t.Errorf("DeltaTotal(0.1, 0.2) = %g, want 0.28", got)
	}
}

// TestUtilityCost: eq. 11 by hand. N = 2 clients, K = 1, q = (0.25, 0.75),
// p = (0.4, 0.6), multipliers (2, 1), C = 1, m = 4 (S = 0.5), s = (1, 2),
// γL = 0.1: θ = (0 + 4, 0 + 4/3); S₁ = 0.5, S₂ = 1;
// Σ θ p² S² σ² = 4·0.16·0.25·4 + (4/3)·0.36·1·1 = 0.64 + 0.48 = 1.12;
// cost = 0.1·2/1·1.12 = 0.224.
func TestUtilityCost(t *testing.T) {
	clients := []Client{
		{Epsilon: 1, DeltaPrime: 1e-5, DeltaTail: 1e-5, SampleRate: 0.25},
		{Epsilon: 2, DeltaPrime: 1e-5, DeltaTail: 1e-5, SampleRate: 0.75, Sensitivity: 2},
	}
	s := Setting{Draws: 100, Clip: 1, LocalExamples: 4, LocalSteps: 1}
	got, err := UtilityCost(0.1, 1, clients, []float64{0.4, 0.6}, []float64{2, 1}, s)
	if err != nil || math.Abs(got-0.224) > 1e-15 {
		t.Errorf("UtilityCost = %.17g (%v), want 0.224", got, err)
	}
	// K = 2: θ = (1 + 4, 1 + 4/3); Σ = 5·0.16·0.25·4 + (7/3)·0.36 = 0.8 + 0.84 = 1.64;
	// cost = 0.1·2/2·1.64 = 0.164.
	got, err = UtilityCost(0.1, 2, clients, []float64{0.4, 0.6}, []float64{2, 1}, s)
	if err != nil || math.Abs(got-0.164) > 1e-15 {
		t.Errorf("K=2: UtilityCost = %.17g (%v), want 0.164", got, err)
	}
	// Personalized σ costs less than every client at the strictest σ.
	strict, _ := UtilityCost(0.1, 1, clients, []float64{0.4, 0.6}, []float64{2, 2}, s)
	if !(got < strict) {
		t.Errorf("personalized %g ≥ strictest %g", got, strict)
	}
	for name, f := range map[string]func() error{
		"no clients": func() error { _, err := UtilityCost(0.1, 1, nil, nil, nil, s); return err },
		"lengths":    func() error { _, err := UtilityCost(0.1, 1, clients, []float64{1}, []float64{1, 1}, s); return err },
		"K > N": func() error {
			_, err := UtilityCost(0.1, 3, clients, []float64{0.4, 0.6}, []float64{1, 1}, s)
			return err
		},
		"K = 0": func() error {
			_, err := UtilityCost(0.1, 0, clients, []float64{0.4, 0.6}, []float64{1, 1}, s)
			return err
		},
		"shares sum": func() error {
			_, err := UtilityCost(0.1, 1, clients, []float64{0.4, 0.5}, []float64{1, 1}, s)
			return err
		},
		"share < 0": func() error {
			_, err := UtilityCost(0.1, 1, clients, []float64{-0.4, 1.4}, []float64{1, 1}, s)
			return err
		},
		"sigma NaN": func() error {
			_, err := UtilityCost(0.1, 1, clients, []float64{0.4, 0.6}, []float64{math.NaN(), 1}, s)
			return err
		},
		"gammaL < 0": func() error {
			_, err := UtilityCost(-1, 1, clients, []float64{0.4, 0.6}, []float64{1, 1}, s)
			return err
		},
		"bad client": func() error {
			_, err := UtilityCost(0.1, 1, []Client{clients[0], {}}, []float64{0.4, 0.6}, []float64{1, 1}, s)
			return err
		},
		"bad setting": func() error {
			_, err := UtilityCost(0.1, 1, clients, []float64{0.4, 0.6}, []float64{1, 1}, Setting{Clip: 1})
			return err
		},
		"clip missing": func() error {
			_, err := UtilityCost(0.1, 1, clients, []float64{0.4, 0.6}, []float64{1, 1}, Setting{LocalExamples: 1})
			return err
		},
	} {
		if err := f(); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}

// TestOrderOfMagnitude: the appendix's Ω(·) expressions with constant 1, by
// hand for the worked example with E = 4 local steps and δ″ = 1e−5
// (T* = 32, ln(1/δ') = ln(1/δ″) = ln(1/δ‴) = L = 11.512925):
// Theorem 1 = √(32·L)/0.5 = 2·19.19410 = 38.38820;
// Theorem 2 = √(32·4·L·L)/0.5 = 2·11.3137085·L = 260.5078;
// Corollary 1 = √(4·√(0.01·1000))·√(L³)/0.5 = √(4·3.1622777)·39.06401·2 = 277.8680;
// it applies when T < L²/(q k²) = 132.548/(0.01·2.896804) = 4575.6: yes at T = 1000.
// δ of Theorem 2 = 1000·1e−5 + 1e−5 + 1e−5 − (0.01 + 1e−5)·1e−5 = 0.0100198999.
func TestOrderOfMagnitude(t *testing.T) {
	s := handSetting
	s.LocalSteps = 4
	o, err := OrderOfMagnitude(handClient, s, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	l := math.Log(1e5)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"Theorem1", o.Theorem1, math.Sqrt(32*l) / 0.5},
		{"Theorem2", o.Theorem2, math.Sqrt(32*4*l*l) / 0.5},
		{"Corollary1", o.Corollary1, math.Sqrt(4*math.Sqrt(10)) * math.Sqrt(l*l*l) / 0.5},
		{"DeltaTheorem2", o.DeltaTheorem2, 0.0100198999},
	} {
		if math.Abs(c.got-c.want) > 1e-12*c.want {
			t.Errorf("%s = %.12g, want %.12g", c.name, c.got, c.want)
		}
	}
	if math.Abs(o.Theorem1-38.38820) > 1e-4 || math.Abs(o.Theorem2-260.5078) > 1e-3 || math.Abs(o.Corollary1-277.8680) > 1e-3 {
		t.Errorf("hand values: %+v", o)
	}
	if !o.Corollary1Applies || o.RoundsUsed != 32 {
		t.Errorf("%+v: corollary should apply at T = 1000 < 4575", o)
	}
	s.Draws = 5000
	if o, _ := OrderOfMagnitude(handClient, s, 1e-5); o.Corollary1Applies {
		t.Errorf("T = 5000 > 4575: corollary applies: %+v", o)
	}
	if _, err := OrderOfMagnitude(handClient, s, 0); !errors.Is(err, privacy.ErrInvalidArgument) {
		t.Errorf("deltaComp = 0: %v", err)
	}
}

// TestCalibrateErrors: every field out of range is an error wrapping
// ErrInvalidArgument that names the field.
func TestCalibrateErrors(t *testing.T) {
	good := handClient
	for _, c := range []struct {
		field string
		cl    Client
		s     Setting
	}{
		{"Client.Epsilon", Client{Epsilon: 0, DeltaPrime: 1e-5, DeltaTail: 1e-5, SampleRate: 0.1}, handSetting},
		{"Client.Epsilon", Client{Epsilon: math.Inf(1), DeltaPrime: 1e-5, DeltaTail: 1e-5, SampleRate: 0.1}, handSetting},
		{"Client.DeltaPrime", Client{Epsilon: 1, DeltaPrime: 1, DeltaTail: 1e-5, SampleRate: 0.1}, handSetting},
		{"Client.DeltaTail", Client{Epsilon: 1, DeltaPrime: 1e-5, DeltaTail: 0, SampleRate: 0.1}, handSetting},
		{"Client.SampleRate", Client{Epsilon: 1, DeltaPrime: 1e-5, DeltaTail: 1e-5, SampleRate: 1.01}, handSetting},
		{"Client.SampleRate", Client{Epsilon: 1, DeltaPrime: 1e-5, DeltaTail: 1e-5, SampleRate: math.NaN()}, handSetting},
		{"Client.Sensitivity", Client{Epsilon: 1, DeltaPrime: 1e-5, DeltaTail: 1e-5, SampleRate: 0.1, Sensitivity: -1}, handSetting},
		{"Setting.Draws", good, Setting{Draws: 0, Clip: 1, LocalExamples: 1, LocalSteps: 1}},
		{"Setting.Clip", good, Setting{Draws: 10, Clip: 0, LocalExamples: 1, LocalSteps: 1}},
		{"Setting.LocalExamples", good, Setting{Draws: 10, Clip: 1, LocalExamples: 0, LocalSteps: 1}},
		{"Setting.LocalSteps", good, Setting{Draws: 10, Clip: 1, LocalExamples: 1, LocalSteps: 0}},
		{"Setting.K", good, Setting{Draws: 10, Clip: 1, LocalExamples: 1, LocalSteps: 1, K: -1}},
		{"Setting.Perturbation", good, Setting{Draws: 10, Clip: 1, LocalExamples: 1, LocalSteps: 1, Perturbation: 7}},
		// δ‴ so large that the client need never be selected: R = 0.
		{"Client.DeltaTail", Client{Epsilon: 1, DeltaPrime: 1e-5, DeltaTail: 0.9, SampleRate: 0.01}, Setting{Draws: 1, Clip: 1, LocalExamples: 1, LocalSteps: 1}},
	} {
		_, err := Calibrate(c.cl, c.s)
		if !errors.Is(err, privacy.ErrInvalidArgument) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: err = %v", c.field, err)
		}
	}
}
