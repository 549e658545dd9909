package ball

import (
	"errors"
	"math"
	"testing"

	"github.com/dpsgd/dpsgd/privacy"
)

// configs returns one valid configuration per sampler (d = 20, r = 20).
func configs() []Config {
	base := Config{Dim: 20, Distance: 1, Radius: 20}
	sh, al, po, un := base, base, base, base
	sh.Sampler, sh.StepsPerEpoch = privacy.SamplerShuffle, 100
	al.Sampler, al.StepsPerEpoch = privacy.SamplerAllocation, 50
	po.Sampler, po.SampleRate = privacy.SamplerPoisson, 0.01
	un.Sampler, un.DatasetSize, un.Distance = SamplerUniform, 1000, 2
	return []Config{sh, al, po, un}
}

// TestAccountantTotals: the total δ of each sampler is the exact composition
// of its unit δ' over its units, with δ' and the unit count written out here
// from the argument in the Accountant's doc comment.
func TestAccountantTotals(t *testing.T) {
	for _, cfg := range configs() {
		acc, err := NewAccountant(cfg)
		if err != nil {
			t.Fatal(err)
		}
		step, _ := StepDelta(cfg.Dim, cfg.Distance, cfg.Radius)
		if acc.StepDelta() != step {
			t.Errorf("%s: StepDelta %g, want %g", cfg.Sampler, acc.StepDelta(), step)
		}
		for _, steps := range []int{0, 1, 2, 49, 50, 51, 100, 101, 1000, 123457} {
			var unit float64
			var k int
			switch cfg.Sampler {
			case privacy.SamplerShuffle, privacy.SamplerAllocation:
				unit, k = step, int(math.Ceil(float64(steps)/float64(cfg.StepsPerEpoch)))
			case privacy.SamplerPoisson:
				unit, k = cfg.SampleRate*step, steps
			case SamplerUniform:
				unit, k = step/float64(cfg.DatasetSize), steps
			}
			want := bigCompose(unit, k)
			got, err := acc.DeltaTotal(steps)
			if err != nil || relErr(got, want) > 1e-13 {
				t.Errorf("%s after %d steps: δ = %.17g, %v; want %.17g", cfg.Sampler, steps, got, err, want)
			}
			if acc.Units(steps) != k || acc.UnitDelta() != unit {
				t.Errorf("%s: units %d (want %d), unit δ %g (want %g)", cfg.Sampler, acc.Units(steps), k, acc.UnitDelta(), unit)
			}
			sum, _ := acc.DeltaTotalSum(steps)
			if sum != math.Min(1, float64(k)*unit) || sum < got {
				t.Errorf("%s after %d steps: sum %g, exact %g", cfg.Sampler, steps, sum, got)
			}
			for _, eps := range []float64{0, 0.5, 10, math.Inf(1)} {
				if d, err := acc.Delta(steps, eps); err != nil || d != got {
					t.Errorf("%s: Delta(%d, %g) = %g, %v; want %g for every ε", cfg.Sampler, steps, eps, d, err, got)
				}
			}
		}
	}
}

// TestAccountantPaperSetting: the uniform sampler is Tholeti's Theorem 1
// with the exact composition: T steps of δ/N.
func TestAccountantPaperSetting(t *testing.T) {
	const dim, n, steps = 50, 200, 3000
	acc, err := NewAccountant(Config{Sampler: SamplerUniform, Dim: dim, Distance: 0.02, Radius: 1, DatasetSize: n})
	if err != nil {
		t.Fatal(err)
	}
	step := bigDelta(dim, 0.01)
	got, _ := acc.DeltaTotalSum(steps)
	if want := steps * step / n; relErr(got, want) > 1e-14 {
		t.Errorf("paper's T·δ/N = %.17g, want %.17g", got, want)
	}
	got, _ = acc.DeltaTotal(steps)
	if want := bigCompose(step/n, steps); relErr(got, want) > 1e-13 {
		t.Errorf("exact = %.17g, want %.17g", got, want)
	}
}

// TestAccountantStatements: names, samplers, adjacency, ε only at 0, and
// privacy.Budget accepts the accountant as a guarantee.
func TestAccountantStatements(t *testing.T) {
	wantAdj := map[string]string{
		privacy.SamplerShuffle:    privacy.AdjacencyZeroOut,
		privacy.SamplerAllocation: privacy.AdjacencyZeroOut,
		privacy.SamplerPoisson:    privacy.AdjacencyAddRemove,
		SamplerUniform:            AdjacencyReplaceOne,
	}
	for _, cfg := range configs() {
		acc, _ := NewAccountant(cfg)
		if acc.Name() != "ball-tv" || acc.Sampler() != cfg.Sampler || acc.Adjacency() != wantAdj[cfg.Sampler] || acc.Config() != cfg {
			t.Errorf("%s: %s %s %s", cfg.Sampler, acc.Name(), acc.Sampler(), acc.Adjacency())
		}
		if privacy.IsApproximate(acc) || privacy.IsLowerBound(acc) {
			t.Errorf("%s: declared approximate or lower bound", cfg.Sampler)
		}
		const steps = 300
		total, _ := acc.DeltaTotal(steps)
		eps, err := acc.Epsilon(steps, math.Min(0.999, total*1.0001))
		if eps != 0 || err != nil {
			t.Errorf("%s: Epsilon at δ ≥ total = %g, %v; want 0", cfg.Sampler, eps, err)
		}
		if _, err := acc.Epsilon(steps, total*0.999); !errors.Is(err, privacy.ErrUnreachable) {
			t.Errorf("%s: Epsilon below the total δ: %v, want ErrUnreachable", cfg.Sampler, err)
		}
		within, err := privacy.Budget{Epsilon: 0, Delta: total * 1.0001}.Within(acc, steps)
		if err != nil || !within {
			t.Errorf("%s: budget above the total refused: %v %v", cfg.Sampler, within, err)
		}
		within, err = privacy.Budget{Epsilon: 5, Delta: total * 0.999}.Within(acc, steps)
		if err != nil || within {
			t.Errorf("%s: budget below the total accepted (ε does not help): %v %v", cfg.Sampler, within, err)
		}
		e, within, err := privacy.Budget{Epsilon: 1, Delta: total * 0.5}.Check(acc, steps)
		if err != nil || within || !math.IsInf(e, 1) {
			t.Errorf("%s: Budget.Check = %g, %v, %v; want +Inf, false", cfg.Sampler, e, within, err)
		}
		for _, bad := range []float64{0, 1, -1, math.NaN()} {
			if _, err := acc.Epsilon(steps, bad); !errors.Is(err, privacy.ErrInvalidArgument) {
				t.Errorf("%s: Epsilon(δ = %g): %v", cfg.Sampler, bad, err)
			}
		}
		if _, err := acc.Delta(steps, math.NaN()); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("%s: Delta(NaN): %v", cfg.Sampler, err)
		}
		if _, err := acc.Delta(-1, 0); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("%s: Delta(-1 steps): %v", cfg.Sampler, err)
		}
	}
}

func TestAccountantInvalid(t *testing.T) {
	good := configs()[0]
	for name, edit := range map[string]func(*Config){
		"sampler":       func(c *Config) { c.Sampler = "poisson-truncated" },
		"dim":           func(c *Config) { c.Dim = 0 },
		"distance":      func(c *Config) { c.Distance = -1 },
		"radius":        func(c *Config) { c.Radius = 0 },
		"steps/epoch":   func(c *Config) { c.StepsPerEpoch = 0 },
		"sample rate":   func(c *Config) { c.Sampler, c.SampleRate = privacy.SamplerPoisson, 1.5 },
		"dataset size":  func(c *Config) { c.Sampler, c.DatasetSize = SamplerUniform, 0 },
		"radius is NaN": func(c *Config) { c.Radius = math.NaN() },
	} {
		c := good
		edit(&c)
		if _, err := NewAccountant(c); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}

func TestDistanceFor(t *testing.T) {
	for sampler, want := range map[string]float64{
		privacy.SamplerShuffle: 1.5, privacy.SamplerAllocation: 1.5, privacy.SamplerPoisson: 1.5, SamplerUniform: 3,
	} {
		if got, err := DistanceFor(sampler, 1.5); got != want || err != nil {
			t.Errorf("%s: %g, %v; want %g", sampler, got, err, want)
		}
	}
	for _, c := range []struct {
		s string
		c float64
	}{{"poisson-truncated", 1}, {privacy.SamplerShuffle, 0}, {privacy.SamplerShuffle, math.Inf(1)}} {
		if _, err := DistanceFor(c.s, c.c); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("DistanceFor(%q, %g): %v", c.s, c.c, err)
		}
	}
}

// TestSolveRadiusFor: for every sampler the solved radius meets the target
// after the steps, and 2e-10 less does not.
func TestSolveRadiusFor(t *testing.T) {
	for _, cfg := range configs() {
		const steps, target = 1000, 1e-4
		r, err := SolveRadiusFor(cfg, steps, target)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			r    float64
			meet bool
		}{{r, true}, {r * (1 - 2e-10), false}} {
			cc := cfg
			cc.Radius = c.r
			acc, err := NewAccountant(cc)
			if err != nil {
				t.Fatal(err)
			}
			total, _ := acc.DeltaTotal(steps)
			if (total <= target) != c.meet {
				t.Errorf("%s: at r = %.12g δ = %g, target %g, want meet = %v", cfg.Sampler, c.r, total, target, c.meet)
			}
		}
	}
	bad := configs()[0]
	bad.Sampler = "nope"
	if _, err := SolveRadiusFor(bad, 10, 0.1); !errors.Is(err, privacy.ErrInvalidArgument) {
		t.Errorf("unknown sampler: %v", err)
	}
	if _, err := SolveRadiusFor(configs()[0], -1, 0.1); !errors.Is(err, privacy.ErrInvalidArgument) {
		t.Errorf("negative steps: %v", err)
	}
}
