package audit

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/engine/sampler"
	"github.com/dpsgd/dpsgd/privacy"
)

// TestAuditWithinAccountant: for every sampler the audit of the real engine at σ = 1 stays
// below the accountant's claim, every design step was clipped, and for shuffle the claim
// lies above Chua et al.'s lower bound.
func TestAuditWithinAccountant(t *testing.T) {
	runs := 800
	if testing.Short() {
		runs = 300
	}
	for _, s := range Samplers() {
		r, err := Run(context.Background(), Config{Sampler: s, Sigma: 1, Runs: runs, Seed: 11})
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		t.Logf("%s/%s: accountant %s ε = %.3f, empirical %.3f [%.3f, %.3f], lower bound %.3f, %.0f runs/s",
			s, r.Canary, r.Accountant, r.EpsilonAccountant, r.Empirical.Point, r.Empirical.Low, r.Empirical.High, r.EpsilonLowerBound, r.RunsPerSecond)
		if r.Violation || !(r.Empirical.Low <= r.EpsilonAccountant) {
			t.Errorf("%s: empirical lower bound %g exceeds the accountant's ε %g", s, r.Empirical.Low, r.EpsilonAccountant)
		}
		if r.Unclipped != 0 {
			t.Errorf("%s: %d design steps unclipped, want 0", s, r.Unclipped)
		}
		if r.Empirical.N0 != runs-runs/2 || r.Empirical.N1 != runs-runs/2 {
			t.Errorf("%s: evaluation half %d/%d, want %d", s, r.Empirical.N0, r.Empirical.N1, runs-runs/2)
		}
		if s == sampler.NameShuffle {
			if !(r.EpsilonLowerBound > 0 && r.EpsilonLowerBound <= r.EpsilonAccountant*(1+1e-3)) {
				t.Errorf("shuffle: lower bound %g, want in (0, accountant %g]", r.EpsilonLowerBound, r.EpsilonAccountant)
			}
		} else if !math.IsNaN(r.EpsilonLowerBound) {
			t.Errorf("%s: lower bound %g, want NaN", s, r.EpsilonLowerBound)
		}
	}
}

// TestAuditDetectsLie: an accountant told σ four times the noise actually used claims far
// too little; the audit catches it for every sampler (its lower bound exceeds the claim),
// which shows the audit has the power to find a broken mechanism.
func TestAuditDetectsLie(t *testing.T) {
	for _, s := range Samplers() {
		const sigma = 0.5
		spec, _, err := AccountantSpec(Config{Sampler: s, Sigma: 4 * sigma})
		if err != nil {
			t.Fatal(err)
		}
		liar, err := spec.New()
		if err != nil {
			t.Fatal(err)
		}
		r, err := Run(context.Background(), Config{Sampler: s, Sigma: sigma, Runs: 1000, Seed: 12, Accountant: liar})
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		t.Logf("%s: claimed ε = %.3f at σ = %g, empirical %.3f [%.3f, %.3f] at σ = %g", s, r.EpsilonAccountant, 4*sigma, r.Empirical.Point, r.Empirical.Low, r.Empirical.High, sigma)
		if !r.Violation || !(r.Empirical.Low > r.EpsilonAccountant) {
			t.Errorf("%s: the 4× σ lie was not detected: lower bound %g, claim %g", s, r.Empirical.Low, r.EpsilonAccountant)
		}
	}
}

// TestAuditFrontDoor: the audit's sampler and claim are the front door's (dpsgd.Plan, as
// `dpsgd train` builds them): the same spec, public size and zero-out adjacency included, the
// same steps per epoch, and SolveSigma is Plan.Resolve's calibration: the same σ over whole
// epochs, and a σ that meets the target over steps ending inside an epoch.
func TestAuditFrontDoor(t *testing.T) {
	ctx := context.Background()
	const n, batch, eps, delta = 16, 4, 2.0, 1e-5
	for _, s := range Samplers() {
		spec, steps, err := AccountantSpec(Config{Sampler: s, Sigma: 1.3, Epochs: 2})
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		smp, want, err := dpsgd.Plan{Sampler: dpsgd.Sampler(s), BatchSize: batch}.NewSampler(n)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		want.Sigma = 1.3
		if spec != want || !spec.PublicSize || steps != 2*smp.StepsPerEpoch() {
			t.Errorf("%s: spec %+v over %d steps, want the front door's %+v over %d", s, spec, steps, want, 2*smp.StepsPerEpoch())
		}
		acc, err := spec.New()
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if acc.Adjacency() != privacy.AdjacencyZeroOut {
			t.Errorf("%s: adjacency %s, want %s", s, acc.Adjacency(), privacy.AdjacencyZeroOut)
		}

		sigma, err := SolveSigma(ctx, Config{Sampler: s, Epochs: 2, Delta: delta}, eps)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		plan := dpsgd.Plan{Sampler: dpsgd.Sampler(s), BatchSize: batch, Epochs: 2, Clip: 1, TargetEpsilon: eps, Delta: delta}
		priv, err := plan.Resolve(ctx, n, nn.LogReg([]int{5}, 2), nil)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if sigma != priv.Sigma {
			t.Errorf("%s: SolveSigma over 2 epochs = %v, Plan.Resolve's σ = %v", s, sigma, priv.Sigma)
		}

		partial := smp.StepsPerEpoch() + 1
		sp, err := SolveSigma(ctx, Config{Sampler: s, Steps: partial, Delta: delta}, eps)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		spec.Sigma = sp
		acc, err = spec.New()
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		got, err := acc.Epsilon(partial, delta)
		if err != nil || !(got <= eps) || !(sp <= sigma) {
			t.Errorf("%s: σ = %v over %d steps claims ε = %v (%v), want ≤ %v and σ ≤ %v (2 epochs)", s, sp, partial, got, err, eps, sigma)
		}
	}
	if _, err := SolveSigma(ctx, Config{Sampler: sampler.NameShuffle}, 1e-9); !errors.Is(err, privacy.ErrUnreachable) {
		t.Errorf("ε = 1e-9: %v, want privacy.ErrUnreachable", err)
	}
}

// TestEngineMatchesDesign checks, on the engine's released parameters, the model the test
// statistics assume (Monte Carlo against the closed form): with the final model released
// and the isolated canary under allocation, Z = Σ_t y_t is N(0, T) without the canary and
// N(E·ρ/σ, T) with it, so the engine's noise in the canary coordinates has std σC·η/B and
// the canary's clipped push is ρC once per epoch.
func TestEngineMatchesDesign(t *testing.T) {
	cfg, err := Config{Sampler: sampler.NameAllocation, Sigma: 0.8, Epochs: 2, Runs: 1500, Threat: ThreatFinal, Seed: 13}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDesign(cfg)
	if err != nil {
		t.Fatal(err)
	}
	scores, cnt, err := d.collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cnt.unclipped != 0 || cnt.collateral != 0 {
		t.Errorf("%d unclipped steps, %d collateral", cnt.unclipped, cnt.collateral)
	}
	T := float64(d.steps)
	rho := cfg.Scale / math.Hypot(cfg.Scale, 1)
	for w, want := range []float64{0, float64(cfg.Epochs) * rho / cfg.Sigma} {
		mean, sq := 0.0, 0.0
		for _, v := range scores[w] {
			mean += v
		}
		n := float64(len(scores[w]))
		mean /= n
		for _, v := range scores[w] {
			sq += (v - mean) * (v - mean)
		}
		variance := sq / (n - 1)
		// mean: sd √(T/n); variance: relative sd √(2/n).
		if math.Abs(mean-want) > 4*math.Sqrt(T/n) {
			t.Errorf("world %d: mean %g, want %g ± %g", w, mean, want, 4*math.Sqrt(T/n))
		}
		if math.Abs(variance/T-1) > 4*math.Sqrt(2/n) {
			t.Errorf("world %d: variance %g, want T = %g (relative ± %g)", w, variance, T, 4*math.Sqrt(2/n))
		}
	}
}

// TestAuditPartialEpochAndThreats: a run of steps that ends inside an epoch, and the
// final-model threat, give valid audits; the iterates threat is at least as strong on the
// same seeds for the opposed shuffle canary (it sees more).
func TestAuditPartialEpochAndThreats(t *testing.T) {
	for _, c := range []Config{
		{Sampler: sampler.NameShuffle, Steps: 6},
		{Sampler: sampler.NameAllocation, Steps: 5, Canary: CanaryIsolated},
		{Sampler: sampler.NameShuffle, Canary: CanaryIsolated, Threat: ThreatFinal},
		{Sampler: sampler.NamePoisson, Threat: ThreatFinal, Epochs: 2},
	} {
		c.Sigma, c.Runs, c.Seed = 0.8, 400, 14
		r, err := Run(context.Background(), c)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if r.Violation {
			t.Errorf("%s %s steps %d: lower bound %g above the claim %g", c.Sampler, c.Threat, r.Steps, r.Empirical.Low, r.EpsilonAccountant)
		}
		if c.Steps > 0 && r.Steps != c.Steps {
			t.Errorf("steps %d, want %d", r.Steps, c.Steps)
		}
	}
}

// TestAuditDeterministic: the scores depend on the seed, not on the number of workers.
func TestAuditDeterministic(t *testing.T) {
	var got [2]Estimate
	for i, w := range []int{1, 3} {
		r, err := Run(context.Background(), Config{Sampler: sampler.NamePoisson, Sigma: 1, Runs: 60, Seed: 15, Workers: w})
		if err != nil {
			t.Fatal(err)
		}
		got[i] = r.Empirical
	}
	if got[0] != got[1] {
		t.Errorf("1 worker %+v, 3 workers %+v", got[0], got[1])
	}
}

// TestAuditBadConfig: every invalid field is an error naming it.
func TestAuditBadConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		name string
	}{
		{Config{Sampler: "uniform", Sigma: 1}, "sampler"},
		{Config{Sampler: "shuffle"}, "sigma"},
		{Config{Sampler: "shuffle", Sigma: math.Inf(1)}, "sigma"},
		{Config{Sampler: "shuffle", Sigma: 1, Delta: 1}, "delta"},
		{Config{Sampler: "shuffle", Sigma: 1, Confidence: 1.5}, "confidence"},
		{Config{Sampler: "shuffle", Sigma: 1, Epochs: -1}, "epochs"},
		{Config{Sampler: "shuffle", Sigma: 1, Steps: -1}, "steps"},
		{Config{Sampler: "shuffle", Sigma: 1, N: 1}, "n ="},
		{Config{Sampler: "shuffle", Sigma: 1, Batch: 17}, "batch"},
		{Config{Sampler: "shuffle", Sigma: 1, Runs: 3}, "runs"},
		{Config{Sampler: "shuffle", Sigma: 1, Workers: -1}, "workers"},
		{Config{Sampler: "shuffle", Sigma: 1, Threat: "gradients"}, "threat"},
		{Config{Sampler: "poisson", Sigma: 1, Canary: CanaryOpposed}, "canary"},
		{Config{Sampler: "shuffle", Sigma: 1, LR: -1}, "lr"},
	} {
		_, err := Run(context.Background(), c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%+v: error %v, want one naming %q", c.cfg, err, c.name)
		}
	}
}

// TestAuditCancel: a cancelled context stops the trainings with an error wrapping
// context.Canceled.
func TestAuditCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err := Run(ctx, Config{Sampler: sampler.NameShuffle, Sigma: 1, Runs: 100000, Workers: 2, Progress: func(done, total int) {
		n = done
		if done == 50 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if n >= 1000 {
		t.Errorf("%d trainings after the cancel at 50", n)
	}
}

// BenchmarkRun measures trainings per second (both worlds) of a small audit with one and
// two concurrent trainings.
func BenchmarkRun(b *testing.B) {
	for _, w := range []int{1, 2} {
		b.Run(map[int]string{1: "workers=1", 2: "workers=2"}[w], func(b *testing.B) {
			runs := 0.0
			for b.Loop() {
				r, err := Run(context.Background(), Config{Sampler: sampler.NameShuffle, Sigma: 1, Runs: 500, Workers: w})
				if err != nil {
					b.Fatal(err)
				}
				runs += float64(2 * r.Runs)
			}
			b.ReportMetric(runs/b.Elapsed().Seconds(), "runs/s")
		})
	}
}
