package accounting

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/pld"
)

// gaussAcc is a test accountant: the Gaussian mechanism composed over the
// steps (μ = √steps/σ), which refuses σ below floor the way the PLD
// accountant refuses a grid it cannot hold, or fails with fail, or blocks
// until block is closed.
type gaussAcc struct {
	sigma, floor float64
	fail         error
	block        chan struct{}
}

func (g gaussAcc) Name() string      { return "gauss" }
func (g gaussAcc) Sampler() string   { return privacy.SamplerShuffle }
func (g gaussAcc) Adjacency() string { return privacy.AdjacencyZeroOut }

func (g gaussAcc) check() error {
	if g.block != nil {
		<-g.block
	}
	if g.fail != nil {
		return g.fail
	}
	if g.sigma < g.floor {
		return fmt.Errorf("test: sigma = %g: %w", g.sigma, pld.ErrGridTooLarge)
	}
	return nil
}

func (g gaussAcc) Epsilon(steps int, delta float64) (float64, error) {
	if err := g.check(); err != nil {
		return 0, err
	}
	return privacy.GaussianEpsilon(math.Sqrt(float64(steps))/g.sigma, delta)
}

func (g gaussAcc) Delta(steps int, eps float64) (float64, error) {
	if err := g.check(); err != nil {
		return 0, err
	}
	return privacy.GaussianDelta(math.Sqrt(float64(steps))/g.sigma, eps)
}

// gaussSearch is a σ search over gaussAcc (no RDP estimate: it starts at σ = 1).
func gaussSearch(ctx context.Context, proto gaussAcc, steps int, target privacy.Budget, onProbe func(Probe)) *sigmaSearch {
	return &sigmaSearch{
		ctx: ctx, spec: Spec{Sampler: privacy.SamplerShuffle, Method: MethodGDP, Rounds: 10}, steps: steps, target: target,
		onProbe: onProbe, start: time.Now(),
		build: func(sigma float64) (privacy.Accountant, error) { g := proto; g.sigma = sigma; return g, nil },
	}
}

// gaussSigma is the exact answer for gaussAcc: the σ whose μ = √steps/σ gives δ(ε) = δ.
func gaussSigma(t *testing.T, steps int, target privacy.Budget) float64 {
	t.Helper()
	lo, hi := 1e-3, 1e6
	for hi/lo > 1+1e-12 {
		mid := math.Sqrt(lo * hi)
		d, err := privacy.GaussianDelta(math.Sqrt(float64(steps))/mid, target.Epsilon)
		if err != nil {
			t.Fatal(err)
		}
		if d <= target.Delta {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// A σ the accountant cannot evaluate because it is too small counts as above the
// target: the search moves up past it instead of failing, and still finds the exact
// answer; where the answer itself lies below what can be evaluated, the smallest σ
// that can (and meets the target) is returned.
func TestSolveSigmaSteersPastUnevaluable(t *testing.T) {
	target := privacy.Budget{Epsilon: 1, Delta: 1e-5}
	const steps = 25
	want := gaussSigma(t, steps, target) // ≈ 21
	for _, c := range []struct {
		floor  float64
		answer float64
	}{{5, want}, {15, want}, {40, 40}} {
		var bad, probes int
		s := gaussSearch(context.Background(), gaussAcc{floor: c.floor}, steps, target, func(p Probe) {
			probes++
			if p.Err != nil {
				bad++
				if !errors.Is(p.Err, pld.ErrGridTooLarge) || p.Met || p.Sigma >= c.floor {
					t.Errorf("floor %g: probe %+v", c.floor, p)
				}
			}
		})
		got, err := s.solve(sigmaRel)
		if err != nil {
			t.Fatalf("floor %g: %v", c.floor, err)
		}
		if bad == 0 {
			t.Errorf("floor %g: no probe below the floor; the test does not test", c.floor)
		}
		if got < c.answer || got > c.answer*(1+sigmaRel) {
			t.Errorf("floor %g: σ = %.8g, want in [%.8g, %.8g]", c.floor, got, c.answer, c.answer*(1+sigmaRel))
		}
		t.Logf("floor %g: σ = %.8g in %d probes, %d below the floor", c.floor, got, probes, bad)
	}
}

// Only when no σ up to SigmaMax can be evaluated is there an error: ErrUnreachable,
// naming the range probed and the accountant's reason, not an invalid argument.
func TestSolveSigmaNothingEvaluable(t *testing.T) {
	s := gaussSearch(context.Background(), gaussAcc{floor: 2 * SigmaMax}, 10, privacy.Budget{Epsilon: 1, Delta: 1e-5}, nil)
	_, err := s.solve(sigmaRel)
	if !errors.Is(err, privacy.ErrUnreachable) || errors.Is(err, privacy.ErrInvalidArgument) {
		t.Fatalf("err = %v, want ErrUnreachable only", err)
	}
	for _, want := range []string{"cannot evaluate any σ probed in [1, 10000]", "privacy-loss grid too large"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
}

// Any other error of the accountant is not steered around: a genuine invalid argument
// stays one, and bad inputs are refused before any probe.
func TestSolveSigmaGenuineErrors(t *testing.T) {
	bad := fmt.Errorf("test: q out of range: %w", privacy.ErrInvalidArgument)
	s := gaussSearch(context.Background(), gaussAcc{fail: bad}, 10, privacy.Budget{Epsilon: 1, Delta: 1e-5}, nil)
	if _, err := s.solve(sigmaRel); !errors.Is(err, bad) || errors.Is(err, privacy.ErrUnreachable) {
		t.Errorf("genuine error: %v", err)
	}
	target := privacy.Budget{Epsilon: 1, Delta: 1e-5}
	for name, c := range map[string]struct {
		spec   Spec
		target privacy.Budget
		rel    float64
	}{
		"q":     {Spec{Sampler: privacy.SamplerPoisson, Method: MethodPLD, SampleRate: 2}, target, 0},
		"δ":     {Spec{Sampler: privacy.SamplerPoisson, Method: MethodPLD, SampleRate: 0.01}, privacy.Budget{Epsilon: 1, Delta: 2}, 0},
		"M":     {Spec{Sampler: privacy.SamplerAllocation, Method: MethodExact}, target, 0},
		"rel":   {Spec{Sampler: privacy.SamplerPoisson, Method: MethodPLD, SampleRate: 0.01}, target, 0.5},
		"ball":  {ballSpec(privacy.SamplerPoisson), target, 0},
		"other": {Spec{Sampler: privacy.SamplerPoisson, Method: MethodExact, SampleRate: 0.01}, target, 0},
	} {
		n := 0
		_, err := SolveSigmaCtx(context.Background(), c.spec, 10, c.target, c.rel, func(Probe) { n++ })
		if !errors.Is(err, privacy.ErrInvalidArgument) || n != 0 {
			t.Errorf("%s: err = %v after %d probes, want ErrInvalidArgument before any", name, err, n)
		}
	}
}

// Cancellation stops the search between probes and does not wait for a probe that is
// still computing; the error wraps context.Canceled and says how far it got.
func TestSolveSigmaCtxCancel(t *testing.T) {
	target := privacy.Budget{Epsilon: 1, Delta: 1e-5}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	s := gaussSearch(ctx, gaussAcc{}, 25, target, func(p Probe) {
		if n++; n == 2 {
			cancel()
		}
	})
	if _, err := s.solve(sigmaRel); !errors.Is(err, context.Canceled) || n != 2 {
		t.Errorf("between probes: err = %v after %d probes", err, n)
	}

	block := make(chan struct{})
	defer close(block) // lets the abandoned probe finish
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	s = gaussSearch(ctx, gaussAcc{block: block}, 25, target, nil)
	if _, err := s.solve(sigmaRel); !errors.Is(err, context.Canceled) {
		t.Errorf("during a probe: err = %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancelled during a probe, returned after %v", d)
	}

	// Through the exported function, with the message.
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	_, err := SolveSigmaCtx(ctx, Spec{Sampler: privacy.SamplerPoisson, Method: MethodRDP, SampleRate: 0.01}, 100, target, 0, nil)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "stopped after 0 probes") {
		t.Errorf("cancelled before the start: %v", err)
	}
}

// The case that used to fail: Poisson, PLD, q = 0.0042667, 14063 steps, ε = 1,
// δ = 1e-5, where the old search probed σ = 0.01 first and took the PLD grid's
// refusal there as fatal. The probes are reported in order, starting from the RDP
// estimate, and the last bracket is the answer's.
func TestSolveSigmaPLDLongRun(t *testing.T) {
	spec := Spec{Sampler: privacy.SamplerPoisson, Method: MethodPLD, SampleRate: 0.004266666666666667}
	target := privacy.Budget{Epsilon: 1, Delta: 1e-5}
	const steps = 14063
	var probes []Probe
	start := time.Now()
	sigma, err := SolveSigmaCtx(context.Background(), spec, steps, target, 0, func(p Probe) { probes = append(probes, p) })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("σ = %.8g in %d probes, %v", sigma, len(probes)-1, time.Since(start))
	if len(probes) < 3 || probes[0].N != 0 || probes[0].Accountant != MethodRDP || probes[0].Sigma < sigma {
		t.Fatalf("probes %+v: want the RDP estimate (at least PLD's σ) first", probes)
	}
	for i, p := range probes[1:] {
		if p.N != i+1 || p.Accountant != MethodPLD || p.Err != nil || p.Met != (p.Epsilon <= target.Epsilon) {
			t.Errorf("probe %d: %+v", i+1, p)
		}
	}
	last := probes[len(probes)-1]
	if last.Hi != sigma || !(last.Lo < sigma && sigma <= last.Lo*(1+sigmaRel)) {
		t.Errorf("last bracket [%v, %v], σ = %v", last.Lo, last.Hi, sigma)
	}
	checkSolved(t, spec, steps, target, sigma)
	// dp_accounting's PLD accountant gives σ ≈ 2.02 here; RDP needs more.
	if sigma < 1.95 || sigma > 2.1 || sigma > probes[0].Sigma {
		t.Errorf("σ = %v, want about 2.02 and below RDP's %v", sigma, probes[0].Sigma)
	}
}

// The PLD accountant's own refusal of a small σ (a composition window beyond its grid)
// is what the search counts as "too small": a probe there misses the target, no error.
// Slow (the refusal takes seconds), so not with -short.
func TestSolveSigmaPLDRefusalIsSteered(t *testing.T) {
	if testing.Short() {
		t.Skip("the PLD accountant takes seconds to refuse σ = 0.01")
	}
	spec := Spec{Sampler: privacy.SamplerPoisson, Method: MethodPLD, SampleRate: 0.004266666666666667}
	var got Probe
	s := &sigmaSearch{ctx: context.Background(), spec: spec, steps: 14063, target: privacy.Budget{Epsilon: 1, Delta: 1e-5},
		onProbe: func(p Probe) { got = p }, start: time.Now()}
	ok, f, err := s.at(SigmaMin)
	if ok || err != nil || !math.IsInf(f, 1) || !errors.Is(got.Err, pld.ErrGridTooLarge) {
		t.Errorf("σ = %g: ok %v, f %v, err %v, probe error %v", SigmaMin, ok, f, err, got.Err)
	}
}

// checkSolved: σ meets target by the accountant, in δ and in ε, and σ·(1 − 2e-4) does
// not (the search's tolerance is 1e-4).
func checkSolved(t *testing.T, spec Spec, steps int, target privacy.Budget, sigma float64) {
	t.Helper()
	for _, c := range []struct {
		sigma float64
		meets bool
	}{{sigma, true}, {sigma * (1 - 2*sigmaRel), false}} {
		if c.sigma < SigmaMin {
			continue
		}
		sp := spec
		sp.Sigma = c.sigma
		acc, err := sp.New()
		if err != nil {
			t.Fatal(err)
		}
		ok, err := accWithin(acc, steps, target)
		if err != nil {
			t.Fatal(err)
		}
		eps, err := acc.Epsilon(steps, target.Delta)
		if err != nil {
			t.Fatal(err)
		}
		if ok != c.meets || (eps <= target.Epsilon*(1+1e-9)) != c.meets {
			t.Errorf("%s/%s q=%g T=%d ε=%g: at σ = %.8g δ-check %v, ε = %.10g; want meeting the target = %v",
				spec.Sampler, spec.Method, spec.SampleRate, steps, target.Epsilon, c.sigma, ok, eps, c.meets)
		}
	}
}
