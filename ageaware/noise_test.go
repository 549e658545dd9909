package ageaware

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/privacy"
	pa "github.com/dpsgd/dpsgd/privacy/ageaware"
)

// TestNoiseMeetsTarget: adaptive noise makes every client exactly
// ε̄-age-dependent DP (Proposition 1 evaluated independently by
// privacy/ageaware.Epsilon); constant noise uses one ε_c with maxᵢ ε = ε̄, never
// above any client's adaptive level, so its noise power is never below the
// adaptive one for the same schedule.
func TestNoiseMeetsTarget(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	for _, src := range []DeltaSource{DeltaSpectral, DeltaExact, DeltaPosterior} {
		cfg := PaperConfig()
		cfg.Delta = src
		p := mustProblem(t, cfg)
		for trial := 0; trial < 200; trial++ {
			sch := Schedule{rng.IntN(16), rng.IntN(16), rng.IntN(16)}
			eps := math.Pow(10, -3+4*rng.Float64())
			ad, err := p.Noise(eps, NoiseAdaptive, sch)
			if err != nil {
				t.Fatal(err)
			}
			co, err := p.Noise(eps, NoiseConstant, sch)
			if err != nil {
				t.Fatal(err)
			}
			ages := sch.Ages(p.T)
			worst := 0.0
			for i, a := range ages {
				d := p.Delta(i)[a]
				e, _ := pa.Epsilon(d, ad.EpsC[i])
				if !approxEq(e, eps, 1e-12, 0) {
					t.Fatalf("%v: adaptive client %d at age %d: ε = %g, want ε̄ = %g", src, i, a, e, eps)
				}
				if co.EpsC[i] != co.EpsC[0] || co.EpsC[i] > ad.EpsC[i] {
					t.Fatalf("constant ε_c %v vs adaptive %v", co.EpsC, ad.EpsC)
				}
				if !approxEq(ad.Scale[i], p.Sensitivity(i)/ad.EpsC[i], 1e-15, 0) {
					t.Fatalf("η = %g, want s/ε_c", ad.Scale[i])
				}
				worst = math.Max(worst, co.Epsilon[i])
			}
			if !approxEq(worst, eps, 1e-12, 0) {
				t.Fatalf("constant: max ε = %g, want ε̄ = %g", worst, eps)
			}
			if co.Power < ad.Power*(1-1e-12) {
				t.Fatalf("constant noise power %g below adaptive %g", co.Power, ad.Power)
			}
			want := 0.0
			for i, e := range ad.Scale {
				w := p.Weights()[i]
				want += w * w * 2 * e * e
			}
			if !approxEq(ad.Power, want, 1e-14, 0) {
				t.Fatalf("power %g, want %g", ad.Power, want)
			}
		}
	}
	// Fresh data (Δ = 1): both modes are classical DP with ε_c = ε̄.
	p := mustProblem(t, PaperConfig())
	n, _ := p.Noise(0.5, NoiseAdaptive, Schedule{15, 15, 15})
	for _, e := range n.EpsC {
		if e != 0.5 {
			t.Errorf("fresh data: ε_c %v, want 0.5", n.EpsC)
		}
	}
	if math.Abs(p.Sensitivity(0)-1.8) > 1e-15 {
		t.Errorf("sensitivity %g, want (200 − 20)/100", p.Sensitivity(0))
	}
}

// TestNoiseFreeClient: a client whose Δ is 0 (a chain with identical rows, π
// exactly representable, forgets in one step) needs no noise: ε_c = +Inf, η = 0, its guarantee 0.
func TestNoiseFreeClient(t *testing.T) {
	cfg := Config{AggTime: 2, Delta: DeltaExact, Clients: []Client{
		{Chain: [][]float64{{0.5, 0.5}, {0.5, 0.5}}, Values: []float64{0, 10}, Init: []float64{0.5, 0.5}, Samples: 5},
		{Chain: [][]float64{{0.9, 0.1}, {0.2, 0.8}}, Values: []float64{0, 10}, Init: []float64{0.5, 0.5}, Samples: 5},
	}}
	p := mustProblem(t, cfg)
	n, err := p.Noise(1, NoiseAdaptive, Schedule{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsInf(n.EpsC[0], 1) || n.Scale[0] != 0 || n.Epsilon[0] != 0 || !math.IsInf(n.MeanEpsC, 1) {
		t.Errorf("noise-free client: %+v", n)
	}
	if n.Scale[1] == 0 {
		t.Errorf("client 1 needs noise: %+v", n)
	}
	c, _ := p.Noise(1, NoiseConstant, Schedule{1, 1})
	if c.EpsC[0] != n.EpsC[1] || c.Scale[0] == 0 {
		t.Errorf("constant mode: ε_c %v, want client 1's %g for both", c.EpsC, n.EpsC[1])
	}
	if _, err := p.ExpectedLoss(1, NoiseAdaptive, Schedule{1, 1}); err != nil {
		t.Error(err)
	}
}

// TestProblemErrors: bad input is refused with ErrInvalidArgument and a
// message naming the client and field.
func TestProblemErrors(t *testing.T) {
	good := PaperConfig()
	mod := func(f func(c *Config)) Config {
		c := PaperConfig()
		f(&c)
		return c
	}
	nonRev := [][]float64{{0.1, 0.6, 0.3}, {0.2, 0.1, 0.7}, {0.5, 0.3, 0.2}}
	cases := map[string]struct {
		cfg  Config
		want string
	}{
		"no clients": {Config{AggTime: 3}, "no clients"},
		"aggTime":    {mod(func(c *Config) { c.AggTime = -1 }), "AggTime = -1"},
		"samples":    {mod(func(c *Config) { c.Clients[1].Samples = 0 }), "client 1: Samples = 0"},
		"row sum":    {mod(func(c *Config) { c.Clients[2].Chain[1][0] = 0.5 }), "client 2: ageaware: transition matrix row 1 sums to"},
		"negative":   {mod(func(c *Config) { c.Clients[0].Chain[0][0], c.Clients[0].Chain[0][1] = -0.1, 1.1 }), "entry (0, 0) = -0.1"},
		"reducible": {mod(func(c *Config) {
			c.Clients[0].Chain = [][]float64{{1, 0}, {0, 1}}
			c.Clients[0].Values = []float64{1, 2}
		}), "reducible"},
		"values":    {mod(func(c *Config) { c.Clients[0].Values = []float64{1, 2} }), "Values has 2 entries, want 4"},
		"NaN value": {mod(func(c *Config) { c.Clients[0].Values[2] = math.NaN() }), "value of state 2"},
		"init":      {mod(func(c *Config) { c.Clients[1].Init = []float64{0.5, 0.5, 0.5, 0} }), "client 1: ageaware: Init sums to 1.5"},
		"spectral": {mod(func(c *Config) {
			c.Clients[0].Chain = nonRev
			c.Clients[0].Values = []float64{1, 2, 3}
			c.Clients[0].Init = []float64{1, 0, 0}
		}), "not reversible"},
		"delta src":   {mod(func(c *Config) { c.Delta = 7 }), "Delta = 7"},
		"aggTime big": {mod(func(c *Config) { c.AggTime = 1 << 30 }), "AggTime"},
		"too big":     {mod(func(c *Config) { c.Clients[0].Samples = 100000 }), "client 0: the exact laws of Samples = 100000"},
	}
	for name, tc := range cases {
		_, err := NewProblem(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !(errors.Is(err, privacy.ErrInvalidArgument) || errors.Is(err, privacy.ErrOutOfRegime)) {
			t.Errorf("%s: err = %v, want one naming %q", name, err, tc.want)
		}
	}
	// A non-reversible chain is fine with the exact Δ.
	cfg := mod(func(c *Config) {
		c.Delta = DeltaExact
		c.Clients[0].Chain, c.Clients[0].Values, c.Clients[0].Init = nonRev, []float64{1, 2, 3}, []float64{1, 0, 0}
	})
	if _, err := NewProblem(cfg); err != nil {
		t.Errorf("non-reversible with DeltaExact: %v", err)
	}
	p := mustProblem(t, good)
	for name, f := range map[string]func() error{
		"ε̄ = 0":     func() error { _, err := p.Noise(0, NoiseAdaptive, Schedule{0, 0, 0}); return err },
		"ε̄ < 0":     func() error { _, err := p.ExpectedLoss(-1, NoiseAdaptive, Schedule{0, 0, 0}); return err },
		"ε̄ NaN":     func() error { _, err := p.Bound(math.NaN(), NoiseAdaptive, Schedule{0, 0, 0}); return err },
		"age < 0":    func() error { _, err := p.Noise(1, NoiseAdaptive, Schedule{0, 16, 0}); return err },
		"time < 0":   func() error { _, err := p.Noise(1, NoiseAdaptive, Schedule{-1, 0, 0}); return err },
		"length":     func() error { _, err := p.Noise(1, NoiseAdaptive, Schedule{0, 0}); return err },
		"mode":       func() error { _, err := p.Noise(1, NoiseMode(5), Schedule{0, 0, 0}); return err },
		"delta name": func() error { _, err := ParseDeltaSource("magic"); return err },
		"scheme":     func() error { _, err := ParseScheme("random+magic"); return err },
	} {
		if err := f(); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("%s: err = %v, want ErrInvalidArgument", name, err)
		}
	}
	if err := func() error { _, err := p.Noise(1, NoiseAdaptive, Schedule{0, 16, 0}); return err }(); !strings.Contains(err.Error(), "age -1") {
		t.Errorf("collection time after t_agg: %v, want it to name the age", err)
	}
}

func TestParse(t *testing.T) {
	for _, s := range Schemes() {
		got, err := ParseScheme(s.String())
		if err != nil || got != s {
			t.Errorf("%v: %v %v", s, got, err)
		}
	}
	for _, d := range []DeltaSource{DeltaSpectral, DeltaExact, DeltaPosterior} {
		got, err := ParseDeltaSource(d.String())
		if err != nil || got != d {
			t.Errorf("%v: %v %v", d, got, err)
		}
	}
	if len(Schemes()) != 6 || Schemes()[3].String() != "proposed+adaptive" {
		t.Errorf("schemes %v", Schemes())
	}
}
