package dpsgd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/engine/sampler"
	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/accounting"
	"github.com/dpsgd/dpsgd/privacy/ball"
)

// testArch is a logistic regression on two features: 6 parameters.
var testArch = nn.LogReg([]int{2}, 2)

// basePlan is a valid Poisson plan over 500 examples, σ calibrated to ε = 2.
func basePlan() Plan {
	return Plan{Sampler: Poisson, BatchSize: 50, Epochs: 2, Clip: 1, TargetEpsilon: 2, Delta: 1e-5, Seed: 1}
}

// clouds returns n points of two classes around (-1, -1) and (1, 1).
func clouds(n int, seed uint64) *datasets.Dataset {
	rng := rand.New(rand.NewPCG(seed, 1))
	d := &datasets.Dataset{N: n, D: 2, Classes: 2, Shape: []int{2}, X: make([]float32, 2*n), Y: make([]int, n)}
	for i := range n {
		d.Y[i] = i % 2
		c := float64(2*d.Y[i] - 1)
		d.X[2*i], d.X[2*i+1] = float32(c+rng.NormFloat64()), float32(c+rng.NormFloat64())
	}
	return d
}

// TestResolveValidation: each field outside its valid range is refused with a FieldError that
// names it and wraps ErrInvalid.
func TestResolveValidation(t *testing.T) {
	for _, c := range []struct {
		field  string
		mutate func(*Plan)
	}{
		{"Sampler", func(p *Plan) { p.Sampler = "magic" }},
		{"Sampler", func(p *Plan) { p.Sampler = "" }},
		{"BatchSize", func(p *Plan) { p.BatchSize = 0 }},
		{"BatchSize", func(p *Plan) { p.BatchSize = 501 }},
		{"MaxBatch", func(p *Plan) { p.Sampler, p.MaxBatch = PoissonTruncated, -1 }},
		{"Epochs", func(p *Plan) { p.Epochs = 0 }},
		{"Clip", func(p *Plan) { p.Clip = 0 }},
		{"Clip", func(p *Plan) { p.Clip = math.NaN() }},
		{"Clip", func(p *Plan) { p.Clip = math.Inf(1) }},
		{"Sigma", func(p *Plan) { p.Sigma = -1 }},
		{"Sigma", func(p *Plan) { p.Sigma = math.NaN() }},
		{"Sigma", func(p *Plan) { p.Sigma = math.Inf(1) }},
		{"TargetEpsilon", func(p *Plan) { p.TargetEpsilon = -2 }},
		{"TargetEpsilon", func(p *Plan) { p.TargetEpsilon = math.Inf(1) }},
		{"TargetEpsilon", func(p *Plan) { p.TargetEpsilon = 0 }}, // and Sigma 0: nothing to calibrate to
		{"TargetEpsilon", func(p *Plan) { p.TargetEpsilon = 1e-9 }},
		{"Delta", func(p *Plan) { p.Delta = 0 }},
		{"Delta", func(p *Plan) { p.Delta = 1 }},
		{"Delta", func(p *Plan) { p.Delta = math.NaN() }},
		{"Accountant", func(p *Plan) { p.Accountant = "nope" }},
		{"Noise", func(p *Plan) { p.Noise = "laplace" }},
		{"Radius", func(p *Plan) { p.Radius = 1 }}, // Gaussian noise takes no radius
		{"Radius", func(p *Plan) { p.Noise, p.TargetEpsilon, p.Radius = engine.NoiseBall, 0, -1 }},
		{"Radius", func(p *Plan) { p.Noise, p.TargetEpsilon, p.Radius = engine.NoiseBall, 0, math.NaN() }},
		{"Sigma", func(p *Plan) { p.Noise, p.TargetEpsilon, p.Sigma = engine.NoiseBall, 0, 1 }},
		{"TargetEpsilon", func(p *Plan) { p.Noise = engine.NoiseBall }},
		{"Accountant", func(p *Plan) { p.Noise, p.TargetEpsilon, p.Accountant = engine.NoiseBall, 0, accounting.MethodRDP }},
		{"Sampler", func(p *Plan) { p.Noise, p.TargetEpsilon, p.Sampler = engine.NoiseBall, 0, PoissonTruncated }},
		{"Secure", func(p *Plan) { p.Secure, p.NonPrivate = true, true }},
		{"Secure", func(p *Plan) { p.Secure, p.Noise, p.TargetEpsilon = true, engine.NoiseBall, 0 }},
	} {
		p := basePlan()
		c.mutate(&p)
		_, err := p.Resolve(context.Background(), 500, testArch, nil)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: error %v, want a FieldError of %s wrapping ErrInvalid", p, err, c.field)
			continue
		}
		if !strings.HasPrefix(err.Error(), "dpsgd: "+c.field+" ") {
			t.Errorf("%s: message %q does not name the field", c.field, err)
		}
	}
	// Not a field: the dataset size and the model.
	for _, c := range []struct {
		n    int
		arch nn.Arch
	}{{0, testArch}, {500, nn.Arch{}}} {
		var fe *FieldError
		if _, err := basePlan().Resolve(context.Background(), c.n, c.arch, nil); !errors.Is(err, ErrInvalid) || errors.As(err, &fe) {
			t.Errorf("n = %d, arch %+v: %v, want ErrInvalid", c.n, c.arch, err)
		}
	}
	// An unreachable budget keeps its cause.
	p := basePlan()
	p.TargetEpsilon = 1e-9
	if _, err := p.Resolve(context.Background(), 500, testArch, nil); !errors.Is(err, privacy.ErrUnreachable) {
		t.Errorf("unreachable target: %v, want privacy.ErrUnreachable", err)
	}
}

// TestResolveRefusesNonGuarantees: an accountant that is not an (ε, δ) guarantee for the
// sampler — total variation only, an approximation, a lower bound, Poisson accounting on
// shuffling, a method of another sampler — is refused; every default and proven one is taken.
func TestResolveRefusesNonGuarantees(t *testing.T) {
	for _, c := range []struct {
		sampler Sampler
		method  string
		want    string
	}{
		{Shuffle, accounting.MethodRDP, "assumes poisson"},
		{Shuffle, accounting.MethodPLD, "assumes poisson"},
		{Shuffle, accounting.MethodLower, "lower bound"},
		{Allocation, accounting.MethodChiSquare, "total variation"},
		{Allocation, accounting.MethodBerryEsseen, "total variation"},
		{Allocation, accounting.MethodGDP, "approximation"},
		{Poisson, accounting.MethodExact, "not available"},
		{PoissonTruncated, accounting.MethodPLD, "not available"},
	} {
		p := basePlan()
		p.Sampler, p.Accountant = c.sampler, c.method
		_, err := p.Resolve(context.Background(), 500, testArch, nil)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "Accountant" || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s/%s: %v, want an Accountant error saying %q", c.sampler, c.method, err, c.want)
		}
		if _, _, err := p.NewSampler(500); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewSampler %s/%s: %v, want ErrInvalid", c.sampler, c.method, err)
		}
	}
	for _, s := range []Sampler{Shuffle, Poisson, PoissonTruncated, Allocation} {
		for _, m := range append([]string{""}, accounting.Methods(string(s))...) {
			p := basePlan()
			p.Sampler, p.Accountant, p.Sigma = s, m, 2
			spec := accounting.Spec{Sampler: string(s), Method: m}
			if m == "" {
				spec.Method = accounting.DefaultMethod(string(s))
			}
			kind, _ := spec.Kind()
			tvOnly := m == accounting.MethodChiSquare || m == accounting.MethodBerryEsseen
			_, err := p.Resolve(context.Background(), 500, testArch, nil)
			if ok := kind == accounting.KindGuarantee && !tvOnly; ok != (err == nil) {
				t.Errorf("%s/%q (%s): %v", s, m, kind, err)
			}
		}
	}
}

// TestResolveCalibration: σ calibrated for each sampler meets the target by the sampler's own
// accountant over the planned steps, and is tight (1% less noise misses it); the ledger and
// the budget carry the target.
func TestResolveCalibration(t *testing.T) {
	for _, s := range []Sampler{Shuffle, Poisson, PoissonTruncated, Allocation} {
		p := basePlan()
		p.Sampler, p.Epochs = s, 3
		priv, err := p.Resolve(context.Background(), 500, testArch, nil)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		steps := p.Epochs * priv.Sampler.StepsPerEpoch()
		eps, err := priv.Accountant.Epsilon(steps, p.Delta)
		if err != nil || !(eps <= p.TargetEpsilon) || eps < 0.99*p.TargetEpsilon {
			t.Errorf("%s: ε(σ = %v) = %v (%v) after %d steps, want ≤ %v and close", s, priv.Sigma, eps, err, steps, p.TargetEpsilon)
		}
		less := priv.Spec
		less.Sigma *= 0.99
		acc, err := less.New()
		if err != nil {
			t.Fatal(err)
		}
		if e, err := acc.Epsilon(steps, p.Delta); err == nil && e <= p.TargetEpsilon {
			t.Errorf("%s: σ = %v is not tight: 0.99σ still gives ε = %v", s, priv.Sigma, e)
		}
		if priv.Spec.Sigma != priv.Sigma || priv.Spec.Method != accounting.DefaultMethod(string(s)) {
			t.Errorf("%s: spec %+v, σ %v", s, priv.Spec, priv.Sigma)
		}
		if priv.Budget == nil || *priv.Budget != (privacy.Budget{Epsilon: 2, Delta: 1e-5}) || priv.Ledger.Budget == nil || *priv.Ledger.Budget != *priv.Budget {
			t.Errorf("%s: budget %v, ledger budget %v", s, priv.Budget, priv.Ledger.Budget)
		}
		if want := "calibrated to ε = 2 over 3 epochs"; priv.SigmaSource != want {
			t.Errorf("%s: σ source %q, want %q", s, priv.SigmaSource, want)
		}
	}
}

// TestResolveSigmaGiven: a given σ is kept, nothing is calibrated, and the budget is there
// only when TargetEpsilon is.
func TestResolveSigmaGiven(t *testing.T) {
	noSolve := &Options{Solve: func(context.Context, accounting.Spec, int, privacy.Budget) (float64, error) {
		t.Fatal("σ was given, yet Resolve calibrated")
		return 0, nil
	}}
	p := basePlan()
	p.Sigma, p.TargetEpsilon = 1.3, 0
	priv, err := p.Resolve(context.Background(), 500, testArch, noSolve)
	if err != nil {
		t.Fatal(err)
	}
	if priv.Sigma != 1.3 || priv.Spec.Sigma != 1.3 || priv.SigmaSource != "given" || priv.Budget != nil || priv.Ledger.Budget != nil {
		t.Errorf("σ %v, spec σ %v, source %q, budget %v", priv.Sigma, priv.Spec.Sigma, priv.SigmaSource, priv.Budget)
	}
	p.TargetEpsilon = 0.5
	if priv, err = p.Resolve(context.Background(), 500, testArch, noSolve); err != nil || priv.Sigma != 1.3 || priv.Budget == nil || priv.Budget.Epsilon != 0.5 {
		t.Errorf("σ with a budget: %+v, %v", priv, err)
	}
}

// TestResolveZeroOut: q and the steps per epoch come from N, so every plan's accounting has a
// public size and its ledger and accountant state zero-out adjacency.
func TestResolveZeroOut(t *testing.T) {
	for _, s := range []Sampler{Shuffle, Poisson, PoissonTruncated, Allocation} {
		p := basePlan()
		p.Sampler, p.Sigma, p.TargetEpsilon = s, 1, 0
		priv, err := p.Resolve(context.Background(), 500, testArch, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !priv.Spec.PublicSize || priv.Ledger.Adjacency != privacy.AdjacencyZeroOut || priv.Accountant.Adjacency() != privacy.AdjacencyZeroOut {
			t.Errorf("%s: public size %v, ledger adjacency %q, accountant %q", s, priv.Spec.PublicSize, priv.Ledger.Adjacency, priv.Accountant.Adjacency())
		}
		if priv.N != 500 || priv.Sampler.DatasetSize() != 500 || priv.Sampler.Name() != string(s) {
			t.Errorf("%s: N %d, sampler %s over %d", s, priv.N, priv.Sampler.Name(), priv.Sampler.DatasetSize())
		}
	}
}

// TestResolveSecure: secure mode wraps the accountant for the secure sampler's deviation
// (σ a hair above the seeded plan's, ε still within the target), keys the sampler with
// Options.SamplerKey (called once), and the engine refuses a secure run with the seeded
// plan's accountant but trains with the secure plan's.
func TestResolveSecure(t *testing.T) {
	ctx := context.Background()
	seeded, err := basePlan().Resolve(ctx, 500, testArch, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := basePlan()
	p.Secure = true
	key, calls := [32]byte{1, 2, 3}, 0
	priv, err := p.Resolve(ctx, 500, testArch, &Options{SamplerKey: func() ([32]byte, error) { calls++; return key, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := priv.Accountant.(*privacy.NearIdeal); !ok || !strings.HasSuffix(priv.Accountant.Name(), "+near-ideal") {
		t.Errorf("secure accountant %T %s, want privacy.NearIdeal", priv.Accountant, priv.Accountant.Name())
	}
	if !(priv.Sigma > seeded.Sigma) || priv.Sigma > seeded.Sigma*(1+1e-6) {
		t.Errorf("secure σ %v, seeded %v: want a hair more", priv.Sigma, seeded.Sigma)
	}
	steps := p.Epochs * priv.Sampler.StepsPerEpoch()
	if eps, err := priv.Accountant.Epsilon(steps, p.Delta); err != nil || eps > p.TargetEpsilon {
		t.Errorf("secure ε %v (%v), want ≤ %v", eps, err, p.TargetEpsilon)
	}
	if k, ok := sampler.SecureKey(priv.Sampler); !ok || k != key || calls != 1 {
		t.Errorf("secure sampler key %x (secure %v), %d calls", k, ok, calls)
	}
	if _, ok := sampler.SecureKey(seeded.Sampler); ok {
		t.Error("the seeded plan's sampler is secure")
	}
	wantErr := errors.New("no key store")
	if _, err := p.Resolve(ctx, 500, testArch, &Options{SamplerKey: func() ([32]byte, error) { return key, wantErr }}); err != wantErr {
		t.Errorf("SamplerKey's error came back as %v", err)
	}
	if _, err := basePlan().Resolve(ctx, 500, testArch, &Options{SamplerKey: func() ([32]byte, error) {
		t.Error("SamplerKey called for a seeded plan")
		return key, nil
	}}); err != nil {
		t.Fatal(err)
	}

	train, test := clouds(500, 1), clouds(100, 2)
	cfg := engine.Config{Arch: testArch, PhysicalBatch: 64, Replicas: 1, Optimizer: engine.OptimizerConfig{Name: "sgd", LR: 0.5}}
	bad := cfg
	priv.Apply(&bad)
	if _, err := engine.Train(ctx, bad, train, test, priv.Sampler, seeded.Privacy(), nil); err == nil || !strings.Contains(err.Error(), "secure") {
		t.Errorf("secure run with the seeded accountant: %v, want the engine's refusal", err)
	}
	res, err := priv.Train(ctx, cfg, train, test, nil)
	if err != nil || res.Steps != steps {
		t.Fatalf("secure run: %v (%+v)", err, res)
	}
	g, err := priv.Guarantee(res)
	if err != nil || !strings.HasSuffix(g, "; noise and batches from the operating system's secure generator") || strings.Contains(g, "seed") {
		t.Errorf("secure guarantee %q, %v", g, err)
	}
}

// TestResolveCancel: a calibration stopped by the context returns its error, not ErrInvalid.
func TestResolveCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := basePlan().Resolve(ctx, 500, testArch, nil)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrInvalid) {
		t.Errorf("cancelled calibration: %v", err)
	}
}

// TestApplyAndPrivacy: Apply sets exactly the engine's privacy fields, Privacy hands over the
// accountant, δ, budget and ledger, and a non-private plan has none of them.
func TestApplyAndPrivacy(t *testing.T) {
	p := basePlan()
	p.Sigma, p.Seed, p.Epochs, p.Clip = 1.5, 42, 3, 0.7
	priv, err := p.Resolve(context.Background(), 500, testArch, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.Config{Arch: testArch, PhysicalBatch: 17, Radius: 9, Secure: true, NonPrivate: true}
	priv.Apply(&cfg)
	if cfg.Epochs != 3 || cfg.Clip != 0.7 || cfg.Sigma != 1.5 || cfg.Seed != 42 || cfg.Noise != engine.NoiseGaussian ||
		cfg.Radius != 0 || cfg.Secure || cfg.NonPrivate || cfg.PhysicalBatch != 17 {
		t.Errorf("applied: %+v", cfg)
	}
	pv := priv.Privacy()
	if pv.Accountant != priv.Accountant || pv.Delta != 1e-5 || pv.Budget != priv.Budget || pv.Ledger != priv.Ledger {
		t.Errorf("privacy %+v", pv)
	}

	p.NonPrivate = true
	np, err := p.Resolve(context.Background(), 500, testArch, nil)
	if err != nil {
		t.Fatal(err)
	}
	np.Apply(&cfg)
	if pv := np.Privacy(); !cfg.NonPrivate || cfg.Sigma != 0 || pv.Accountant != nil || pv.Ledger != nil || pv.Budget != nil || np.Sampler == nil {
		t.Errorf("non-private: cfg %+v, privacy %+v", cfg, pv)
	}
	if g, err := np.Guarantee(&engine.Result{Steps: 10, Epsilon: math.NaN()}); err != nil || g != "none: non-private baseline" {
		t.Errorf("non-private guarantee %q, %v", g, err)
	}
}

// TestGuaranteeSentence: the sentence dpsgd train prints, word for word, for a finished run, a
// run stopped inside an epoch, ball noise, and an accountant that failed (an error, never ε).
func TestGuaranteeSentence(t *testing.T) {
	p := basePlan()
	p.Sigma, p.TargetEpsilon, p.Seed = 1, 0, 17
	priv, err := p.Resolve(context.Background(), 500, testArch, nil)
	if err != nil {
		t.Fatal(err)
	}
	const adj = "zero-out adjacency (one record replaced by a ghost whose gradient is zero; the dataset size N = 500 is public)"
	const seeded = "; the noise and batches are pseudorandom from seed 17, so the guarantee holds only while the seed is secret (anyone who knows it can regenerate the noise): a research run, use --secure for a release"
	for _, c := range []struct {
		res  engine.Result
		want string
	}{
		{engine.Result{Epsilon: 1.234567, Steps: 20, EpsilonSteps: 20},
			"(ε = 1.235, δ = 1e-05)-DP after 20 steps under " + adj + ", proven for the poisson sampler by the pld accountant" + seeded},
		{engine.Result{Epsilon: 0.5, Steps: 13, EpsilonSteps: 20},
			"(ε = 0.5, δ = 1e-05)-DP after 13 steps under " + adj + ", proven for the poisson sampler by the pld accountant" +
				" (ε covers 20 steps: the run stopped inside an epoch, which was charged whole before its first step)" + seeded},
	} {
		if got, err := priv.Guarantee(&c.res); err != nil || got != c.want {
			t.Errorf("guarantee\n got %q (%v)\nwant %q", got, err, c.want)
		}
	}
	if _, err := priv.Guarantee(&engine.Result{Epsilon: math.NaN(), Steps: 5}); err == nil || !strings.Contains(err.Error(), "no ε for the 5 steps") {
		t.Errorf("NaN ε: %v, want an error", err)
	}
	if _, err := priv.DeltaSpent(&engine.Result{Steps: 5}); !errors.Is(err, ErrInvalid) {
		t.Errorf("DeltaSpent of Gaussian noise: %v", err)
	}

	// Ball noise: (0, δ) of the charged steps, the radius calibrated to spend Delta.
	b := Plan{Sampler: Shuffle, BatchSize: 50, Epochs: 2, Clip: 0.5, Delta: 0.3, Noise: engine.NoiseBall, Seed: 17}
	bp, err := b.Resolve(context.Background(), 500, testArch, nil)
	if err != nil {
		t.Fatal(err)
	}
	steps := b.Epochs * bp.Sampler.StepsPerEpoch()
	spent, err := bp.DeltaSpent(&engine.Result{Steps: steps})
	if err != nil || spent > 0.3 || spent < 0.3*(1-1e-6) || bp.Sigma != 0 || !(bp.Radius > 0) {
		t.Errorf("ball: δ spent %v (%v) over %d steps with r·C = %v, want the budget 0.3", spent, err, steps, bp.Radius)
	}
	if *bp.Budget != (privacy.Budget{Epsilon: 0, Delta: 0.3}) || bp.Spec.Radius != bp.Radius || bp.Spec.Dim != testArch.NumParams() || bp.Spec.Distance != 0.5 {
		t.Errorf("ball: budget %v, spec %+v", bp.Budget, bp.Spec)
	}
	if want := "radius calibrated to a total δ = 0.3 over 2 epochs"; bp.SigmaSource != want {
		t.Errorf("ball σ source %q, want %q", bp.SigmaSource, want)
	}
	d, _ := bp.DeltaSpent(&engine.Result{Steps: 10})
	want := fmt.Sprintf("(0, δ = %.4g)-DP (total variation ≤ %.4g, so (ε, %.4g)-DP for every ε ≥ 0) after 10 steps under ", d, d, d) +
		adj + ", proven for the shuffle sampler by the " + ball.Name + " accountant (budget δ = 0.3)" + seeded
	if got, err := bp.Guarantee(&engine.Result{Steps: 10}); err != nil || got != want {
		t.Errorf("ball guarantee\n got %q (%v)\nwant %q", got, err, want)
	}
	b.Radius = 4
	if bp, err = b.Resolve(context.Background(), 500, testArch, nil); err != nil || bp.Radius != 2 || bp.SigmaSource != "radius given" {
		t.Errorf("radius given: r·C = %v (%q), %v; want 4·0.5", bp.Radius, bp.SigmaSource, err)
	}
}

// TestNewSamplerMatchesResolve: the sampler and spec of NewSampler are those Resolve trains
// with, batch for batch for the same seed.
func TestNewSamplerMatchesResolve(t *testing.T) {
	for _, s := range []Sampler{Shuffle, Poisson, PoissonTruncated, Allocation} {
		p := basePlan()
		p.Sampler, p.Sigma = s, 1
		smp, spec, err := p.NewSampler(500)
		if err != nil {
			t.Fatal(err)
		}
		priv, err := p.Resolve(context.Background(), 500, testArch, nil)
		if err != nil {
			t.Fatal(err)
		}
		spec.Sigma = 1
		if spec != priv.Spec || !slices.Equal(smp.Batch(1, 0, nil), priv.Sampler.Batch(1, 0, nil)) {
			t.Errorf("%s: NewSampler %+v, Resolve %+v", s, spec, priv.Spec)
		}
	}
}

// TestGuaranteeSameOnDevice: a run whose steps ran on the GPU, which sums the clipped
// gradients and adds the noise in float64 as the CPU does (engine's
// TestDeviceAdversarialAccumulationRounding), gets the CPU run's guarantee sentence, with no
// approximation label.
func TestGuaranteeSameOnDevice(t *testing.T) {
	arch := nn.LogReg([]int{4}, 2)
	priv, err := Plan{Sampler: Poisson, BatchSize: 10, Epochs: 1, Clip: 1, Sigma: 1, Delta: 1e-5, Seed: 1}.Resolve(context.Background(), 100, arch, nil)
	if err != nil {
		t.Fatal(err)
	}
	var sentences []string
	for _, dev := range []string{engine.DeviceCPU, engine.DeviceCUDA} {
		res := &engine.Result{Steps: 10, EpsilonSteps: 10, Epsilon: 1, Device: dev}
		s, err := priv.Guarantee(res)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(s, "APPROXIMATE") || !strings.Contains(s, "ε = 1") {
			t.Errorf("%s: %q", dev, s)
		}
		sentences = append(sentences, s)
	}
	if sentences[0] != sentences[1] {
		t.Errorf("the GPU run's guarantee differs:\n cpu  %q\n cuda %q", sentences[0], sentences[1])
	}
}
