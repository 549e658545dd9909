package engine

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/checkpoint"
	"github.com/dpsgd/dpsgd/engine/sampler"
	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/accounting"
	"gorgonia.org/tensor"
)

// ckptCase is one configuration of the resume tests.
type ckptCase struct {
	name    string
	dtype   tensor.Dtype
	smp     string // "poisson" or "shuffle"
	opt     OptimizerConfig
	private bool
}

func (c ckptCase) build(t testing.TB, train *datasets.Dataset, epochs int) (Config, sampler.Sampler, Privacy) {
	t.Helper()
	cfg := smallConfig(train)
	cfg.Dtype, cfg.Epochs, cfg.Optimizer, cfg.NonPrivate = c.dtype, epochs, c.opt, !c.private
	cfg.Replicas = 2
	smp, pv := testSamplerPrivacy(t, c.smp, train.N, 150, cfg, c.private, 50)
	return cfg, smp, pv
}

// testSamplerPrivacy builds the "shuffle" or "poisson" sampler of a test run (batch size, or
// expected batch size, batch) and, for a private run, its default accountant at cfg.Sigma with
// a ledger and the budget (eps, 1e-5).
func testSamplerPrivacy(t testing.TB, name string, n, batch int, cfg Config, private bool, eps float64) (sampler.Sampler, Privacy) {
	t.Helper()
	var smp sampler.Sampler
	var spec accounting.Spec
	var err error
	if name == "shuffle" {
		smp, err = sampler.NewShuffle(n, batch, cfg.Seed)
		if err == nil {
			spec = accounting.Spec{Sampler: privacy.SamplerShuffle, Rounds: smp.StepsPerEpoch(), SampleRate: 1 / float64(smp.StepsPerEpoch())}
		}
	} else {
		smp, err = sampler.NewPoisson(n, float64(batch)/float64(n), cfg.Seed)
		if err == nil {
			spec = accounting.Spec{Sampler: privacy.SamplerPoisson, SampleRate: smp.SampleRate()}
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if !private {
		return smp, Privacy{}
	}
	spec.Method = accounting.DefaultMethod(spec.Sampler)
	spec.Sigma = cfg.Sigma
	acc, err := spec.New()
	if err != nil {
		t.Fatal(err)
	}
	budget := &privacy.Budget{Epsilon: eps, Delta: 1e-5}
	led, err := accounting.NewLedger(spec, 1e-5, budget)
	if err != nil {
		t.Fatal(err)
	}
	return smp, Privacy{Accountant: acc, Delta: 1e-5, Budget: budget, Ledger: led}
}

var ckptCases = []ckptCase{
	{"f32-poisson-momentum-ema-cosine", tensor.Float32, "poisson", OptimizerConfig{Name: "momentum", LR: 0.5, Momentum: 0.9, Schedule: "cosine", EMA: 0.9}, true},
	{"f64-shuffle-adam", tensor.Float64, "shuffle", OptimizerConfig{Name: "adam", LR: 0.01, WeightDecay: 1e-4}, true},
	{"f32-shuffle-sgd-nonprivate", tensor.Float32, "shuffle", OptimizerConfig{Name: "sgd", LR: 0.3}, false},
}

// cancelAt cancels the run after step n.
type cancelAt struct {
	NopProgress
	n      int
	cancel func()
}

func (c *cancelAt) Step(step int, _ StepStats, _ float64) {
	if step == c.n {
		c.cancel()
	}
}

// stripSeconds drops the wall-clock times, the only part of a history that may differ.
func stripSeconds(h []EpochStats) []EpochStats {
	out := append([]EpochStats(nil), h...)
	for i := range out {
		out[i].Seconds = 0
	}
	return out
}

func sameEpochs(a, b []EpochStats) bool {
	a, b = stripSeconds(a), stripSeconds(b)
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		ea, eb := a[i], b[i]
		if math.IsNaN(ea.Epsilon) && math.IsNaN(eb.Epsilon) {
			ea.Epsilon, eb.Epsilon = 0, 0
		}
		if ea != eb {
			return false
		}
	}
	return true
}

// TestResumeBitwise: a run stopped mid-epoch, or at an epoch boundary, and resumed from its
// checkpoint ends with the same parameters bit for bit (the digest), the same history and the
// same ledger as the uninterrupted run; so does a run that finished fewer epochs and is
// extended (constant schedule) to the same total.
func TestResumeBitwise(t *testing.T) {
	train, test := smallProblem(t)
	const epochs = 3
	for _, c := range ckptCases {
		cfg, smp, pv := c.build(t, train, epochs)
		m := smp.StepsPerEpoch()
		ref, err := Train(context.Background(), cfg, train, test, smp, pv, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, stop := range []int{m + m/2 + 1, 2 * m, 1} {
			dir := t.TempDir()
			path := filepath.Join(dir, "run.ckpt")
			cfg, smp, pv := c.build(t, train, epochs)
			cfg.Checkpoint = CheckpointOptions{Path: path, Every: 4, SamplerSeed: cfg.Seed}
			ctx, cancel := context.WithCancel(context.Background())
			first, err := Train(ctx, cfg, train, test, smp, pv, &cancelAt{n: stop, cancel: cancel})
			cancel()
			if !errors.Is(err, ErrInterrupted) || first.Steps != stop || first.LastCheckpointStep != stop {
				t.Fatalf("%s stop %d: err %v, steps %d, last checkpoint %d", c.name, stop, err, first.Steps, first.LastCheckpointStep)
			}
			if stop > 4 && first.Checkpoints < 2 {
				t.Errorf("%s stop %d: %d checkpoints written, want the periodic ones and the last", c.name, stop, first.Checkpoints)
			}
			ck, err := checkpoint.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if ck.State.Step != stop || (ck.Ledger != nil && ck.Ledger.Steps < stop) {
				t.Fatalf("%s stop %d: checkpoint at step %d, ledger %v", c.name, stop, ck.State.Step, ck.Ledger)
			}
			cfg, smp, pv = c.build(t, train, epochs)
			cfg.Checkpoint = CheckpointOptions{Path: path, Every: 4, Resume: ck, SamplerSeed: cfg.Seed}
			cfg.Replicas = 2
			got, err := Train(context.Background(), cfg, train, test, smp, pv, nil)
			if err != nil {
				t.Fatalf("%s stop %d: resume: %v", c.name, stop, err)
			}
			if got.ParamsDigest != ref.ParamsDigest {
				t.Errorf("%s stop %d: resumed digest %s, uninterrupted %s", c.name, stop, got.ParamsDigest[:12], ref.ParamsDigest[:12])
			}
			if got.ResumedFromStep != stop || got.Steps != ref.Steps || got.TestAccuracy != ref.TestAccuracy {
				t.Errorf("%s stop %d: resumed from %d, steps %d/%d, accuracy %v/%v", c.name, stop, got.ResumedFromStep, got.Steps, ref.Steps, got.TestAccuracy, ref.TestAccuracy)
			}
			if !sameEpochs(got.History, ref.History) {
				t.Errorf("%s stop %d: history differs:\n got %+v\nwant %+v", c.name, stop, stripSeconds(got.History), stripSeconds(ref.History))
			}
			if c.private && !reflect.DeepEqual(pv.Ledger, refLedger(t, c, train, test)) {
				t.Errorf("%s stop %d: ledger %+v differs from the uninterrupted run's", c.name, stop, pv.Ledger)
			}
			if !(got.Epsilon == ref.Epsilon || math.IsNaN(got.Epsilon) && math.IsNaN(ref.Epsilon)) {
				t.Errorf("%s stop %d: ε %v, want %v", c.name, stop, got.Epsilon, ref.Epsilon)
			}
			final, err := checkpoint.Load(path)
			if err != nil || !final.State.Final || final.State.Step != ref.Steps {
				t.Errorf("%s stop %d: final checkpoint %v (err %v)", c.name, stop, final.State, err)
			}
		}
	}
	// Extension: 2 epochs, then resumed to 3, equals 3 epochs straight (constant schedule).
	c := ckptCases[1]
	cfg, smp, pv := c.build(t, train, 3)
	ref, err := Train(context.Background(), cfg, train, test, smp, pv, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ext.ckpt")
	cfg, smp, pv = c.build(t, train, 2)
	cfg.Checkpoint = CheckpointOptions{Path: path}
	if _, err := Train(context.Background(), cfg, train, test, smp, pv, nil); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, smp, pv = c.build(t, train, 3)
	cfg.Checkpoint = CheckpointOptions{Resume: ck}
	got, err := Train(context.Background(), cfg, train, test, smp, pv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.ParamsDigest != ref.ParamsDigest || !sameEpochs(got.History, ref.History) {
		t.Errorf("extension 2 → 3 epochs: digest %s, want %s", got.ParamsDigest[:12], ref.ParamsDigest[:12])
	}
}

func refLedger(t *testing.T, c ckptCase, train, test *datasets.Dataset) *accounting.Ledger {
	cfg, smp, pv := c.build(t, train, 3)
	if _, err := Train(context.Background(), cfg, train, test, smp, pv, nil); err != nil {
		t.Fatal(err)
	}
	return pv.Ledger
}

// TestResumeRefusesMismatch: a resume whose configuration differs in a privacy field, in the
// sampler's seed, in the data or in the optimizer is refused with an error naming the field;
// a total of epochs below the checkpoint's position is refused too.
func TestResumeRefusesMismatch(t *testing.T) {
	train, test := smallProblem(t)
	c := ckptCases[0]
	cfg, smp, pv := c.build(t, train, 2)
	path := filepath.Join(t.TempDir(), "run.ckpt")
	cfg.Checkpoint = CheckpointOptions{Path: path, SamplerSeed: cfg.Seed}
	if _, err := Train(context.Background(), cfg, train, test, smp, pv, nil); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		field string
		mut   func(*Config, *sampler.Sampler, *Privacy, **datasets.Dataset)
	}{
		{"sigma", func(cfg *Config, _ *sampler.Sampler, _ *Privacy, _ **datasets.Dataset) { cfg.Sigma = 1.5 }},
		{"clip", func(cfg *Config, _ *sampler.Sampler, _ *Privacy, _ **datasets.Dataset) { cfg.Clip = 2 }},
		{"budget", func(_ *Config, _ *sampler.Sampler, pv *Privacy, _ **datasets.Dataset) { pv.Budget = nil }},
		{"sampler batches (fingerprint)", func(cfg *Config, s *sampler.Sampler, _ *Privacy, _ **datasets.Dataset) {
			*s, _ = sampler.NewPoisson(train.N, (*s).SampleRate(), cfg.Seed+1)
		}},
		{"dataset digest", func(_ *Config, _ *sampler.Sampler, _ *Privacy, ds **datasets.Dataset) {
			d := **ds
			d.X = append([]float32(nil), d.X...)
			d.X[5] += 1
			*ds = &d
		}},
		{"lr", func(cfg *Config, _ *sampler.Sampler, _ *Privacy, _ **datasets.Dataset) { cfg.Optimizer.LR = 0.4 }},
		{"dtype", func(cfg *Config, _ *sampler.Sampler, _ *Privacy, _ **datasets.Dataset) { cfg.Dtype = tensor.Float64 }},
	} {
		cfg, smp, pv := c.build(t, train, 3)
		ds := train
		tc.mut(&cfg, &smp, &pv, &ds)
		cfg.Checkpoint = CheckpointOptions{Resume: ck, SamplerSeed: cfg.Seed}
		_, err := Train(context.Background(), cfg, ds, test, smp, pv, nil)
		var me *checkpoint.MismatchError
		if !errors.As(err, &me) || me.Field != tc.field {
			t.Errorf("%s: err = %v, want a mismatch naming %q", tc.field, err, tc.field)
		}
	}
	cfg, smp, pv = c.build(t, train, 1)
	cfg.Checkpoint = CheckpointOptions{Resume: ck, SamplerSeed: cfg.Seed}
	if _, err := Train(context.Background(), cfg, train, test, smp, pv, nil); err == nil || !strings.Contains(err.Error(), "at least 2 epochs") {
		t.Errorf("fewer epochs than the checkpoint: err = %v", err)
	}
}

// ledgerWatch loads the checkpoint at every step and checks the ledger invariant.
type ledgerWatch struct {
	NopProgress
	t      *testing.T
	path   string
	loaded int
}

func (w *ledgerWatch) Step(int, StepStats, float64) {
	ck, err := checkpoint.Load(w.path)
	if err != nil {
		return // none written yet
	}
	w.loaded++
	if ck.Ledger.Steps < ck.State.Step {
		w.t.Errorf("checkpoint at step %d, ledger charged %d: the model is ahead of the ledger", ck.State.Step, ck.Ledger.Steps)
	}
}

// TestLedgerNeverBehind: with a checkpoint after every step, every checkpoint on disk has its
// steps charged in its ledger, and the ledger charges each epoch before it runs.
func TestLedgerNeverBehind(t *testing.T) {
	train, test := smallProblem(t)
	cfg, smp, pv := ckptCases[0].build(t, train, 2)
	path := filepath.Join(t.TempDir(), "run.ckpt")
	cfg.Checkpoint = CheckpointOptions{Path: path, Every: 1}
	w := &ledgerWatch{t: t, path: path}
	res, err := Train(context.Background(), cfg, train, test, smp, pv, w)
	if err != nil {
		t.Fatal(err)
	}
	if w.loaded < res.Steps-1 || res.Checkpoints != res.Steps+1 {
		t.Fatalf("loaded %d checkpoints over %d steps, %d written", w.loaded, res.Steps, res.Checkpoints)
	}
}

// TestDivergenceStops: a learning rate far too large makes the parameters overflow; the run
// stops with ErrDiverged, reports where, and the checkpoint on disk is the last good one:
// finite and before the divergence.
func TestDivergenceStops(t *testing.T) {
	train, test := smallProblem(t)
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		// Clipping bounds the gradient, so the huge rate blows up through the weight decay:
		// w ← w·(1 − lr·λ) − lr·g grows 10¹⁰-fold per step and overflows within a few steps
		// (float32) or a few dozen (float64).
		c := ckptCase{"diverge", dt, "poisson", OptimizerConfig{Name: "sgd", LR: 1e5, WeightDecay: 1e5}, true}
		cfg, smp, pv := c.build(t, train, 3)
		path := filepath.Join(t.TempDir(), "run.ckpt")
		cfg.Checkpoint = CheckpointOptions{Path: path, Every: 1}
		res, trainErr := Train(context.Background(), cfg, train, test, smp, pv, nil)
		if err := trainErr; !errors.Is(err, ErrDiverged) || !strings.Contains(err.Error(), "last good checkpoint") {
			t.Fatalf("%v: err = %v, want ErrDiverged naming the last good checkpoint", dt, err)
		}
		if !res.Diverged || res.DivergedAt < 1 || res.LastCheckpointStep >= res.DivergedAt {
			t.Fatalf("%v: diverged %v at %d, last checkpoint %d", dt, res.Diverged, res.DivergedAt, res.LastCheckpointStep)
		}
		ck, err := checkpoint.Load(path)
		if res.LastCheckpointStep < 0 {
			if err == nil {
				t.Fatalf("%v: a checkpoint exists though none was reported", dt)
			}
			continue
		}
		if err != nil || ck.State.Step != res.LastCheckpointStep {
			t.Fatalf("%v: last good checkpoint: %v, step %v", dt, err, ck)
		}
		t.Logf("%v: diverged at step %d (%v); checkpoint at step %d intact; non-finite examples %d, loss steps %d", dt, res.DivergedAt, trainErr, ck.State.Step, res.NonFinite, res.NonFiniteLoss)
	}
}

// TestNonFiniteExampleContained: an example whose features are NaN is counted and zeroed at
// every step that draws it; the run goes on, its parameters stay finite, and a non-finite loss
// of its steps is counted and left out of the mean loss.
func TestNonFiniteExampleContained(t *testing.T) {
	train, test := smallProblem(t)
	bad := *train
	bad.X = append([]float32(nil), train.X...)
	for j := range bad.D {
		bad.X[3*bad.D+j] = float32(math.NaN())
	}
	cfg, smp, pv := ckptCases[1].build(t, &bad, 2)
	res, err := Train(context.Background(), cfg, &bad, test, smp, pv, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Shuffle with B dividing N: example 3 is in one batch per epoch.
	if res.NonFinite != 2 || res.NonFiniteLoss != res.NonFinite || res.Diverged {
		t.Fatalf("non-finite examples %d, loss steps %d, diverged %v", res.NonFinite, res.NonFiniteLoss, res.Diverged)
	}
	for _, e := range res.History {
		if math.IsNaN(e.TrainLoss) || math.IsInf(e.TrainLoss, 0) {
			t.Fatalf("epoch %d: loss %v, want the finite mean of the finite steps", e.Epoch, e.TrainLoss)
		}
	}
	if res.TestAccuracy < 0.5 {
		t.Fatalf("accuracy %v: one bad example should not spoil training", res.TestAccuracy)
	}
}

// TestCheckpointWriteError: a checkpoint that cannot be written stops the run with an error
// wrapping checkpoint.ErrWrite.
func TestCheckpointWriteError(t *testing.T) {
	train, test := smallProblem(t)
	cfg, smp, pv := ckptCases[0].build(t, train, 1)
	cfg.Checkpoint = CheckpointOptions{Path: filepath.Join(t.TempDir(), "missing", "run.ckpt"), Every: 3}
	res, err := Train(context.Background(), cfg, train, test, smp, pv, nil)
	if !errors.Is(err, checkpoint.ErrWrite) || res.Checkpoints != 0 {
		t.Fatalf("err = %v, checkpoints %d", err, res.Checkpoints)
	}
}

func BenchmarkCheckpointWrite(b *testing.B) {
	train, test := smallProblem(b)
	cfg, smp, pv := ckptCases[0].build(b, train, 1)
	path := filepath.Join(b.TempDir(), "run.ckpt")
	cfg.Checkpoint = CheckpointOptions{Path: path}
	if _, err := Train(context.Background(), cfg, train, test, smp, pv, nil); err != nil {
		b.Fatal(err)
	}
	ck, err := checkpoint.Load(path)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := checkpoint.Write(path, ck); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSecureMode: Config.Secure draws the noise from the OS: two runs with one seed differ
// (the seeded mode gives equal ones, TestSameSeedSameResult), a secure sampler's key is in
// the checkpoint, a resume of a secure run continues to the planned steps, and ball noise is
// refused in secure mode.
func TestSecureMode(t *testing.T) {
	train, test := smallProblem(t)
	key, err := sampler.NewSecureKey()
	if err != nil {
		t.Fatal(err)
	}
	var digests []string
	path := filepath.Join(t.TempDir(), "secure.ckpt")
	for i := range 2 {
		cfg, smp, pv := ckptCases[0].build(t, train, 1)
		cfg.Secure = true
		pv = securePrivacy(t, cfg, pv)
		if smp, err = sampler.Secure(smp, key); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			cfg.Checkpoint = CheckpointOptions{Path: path}
		}
		res, err := Train(context.Background(), cfg, train, test, smp, pv, nil)
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, res.ParamsDigest)
	}
	if digests[0] == digests[1] {
		t.Fatalf("two secure runs gave the same parameters")
	}
	ck, err := checkpoint.Load(path)
	if err != nil || !ck.Config.Secure || ck.Config.Sampler.Key == "" {
		t.Fatalf("secure checkpoint: %v %+v", err, ck.Config)
	}
	cfg, smp, pv := ckptCases[0].build(t, train, 2)
	cfg.Secure = true
	pv = securePrivacy(t, cfg, pv)
	smp, _ = sampler.Secure(smp, key)
	cfg.Checkpoint = CheckpointOptions{Resume: ck}
	res, err := Train(context.Background(), cfg, train, test, smp, pv, nil)
	if err != nil || res.Steps != 2*smp.StepsPerEpoch() || res.ResumedFromStep != smp.StepsPerEpoch() {
		t.Fatalf("secure resume: %v, steps %d", err, res.Steps)
	}
	// Another key: the batches differ, and the resume is refused.
	other, _ := sampler.NewSecureKey()
	cfg, smp, pv = ckptCases[0].build(t, train, 2)
	cfg.Secure = true
	pv = securePrivacy(t, cfg, pv)
	smp, _ = sampler.Secure(smp, other)
	cfg.Checkpoint = CheckpointOptions{Resume: ck}
	if _, err := Train(context.Background(), cfg, train, test, smp, pv, nil); !errors.Is(err, checkpoint.ErrMismatch) {
		t.Fatalf("resume with another key: err = %v", err)
	}
	// An accountant that ignores the secure sampler's deviation is refused.
	cfg, smp, pv = ckptCases[0].build(t, train, 1)
	cfg.Secure = true
	if _, err := Train(context.Background(), cfg, train, test, smp, pv, nil); err == nil || !strings.Contains(err.Error(), "SecureAccounting") {
		t.Fatalf("secure run with the ideal accountant: err = %v", err)
	}
	cfg = smallConfig(train)
	cfg.Secure, cfg.Noise, cfg.Radius = true, NoiseBall, 1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "gaussian noise only") {
		t.Fatalf("secure ball noise: err = %v", err)
	}
}

// securePrivacy rebuilds pv's accountant for a secure run of cfg (engine.SecureAccounting over
// the ledger's spec), as dpsgd train --secure does.
func securePrivacy(t testing.TB, cfg Config, pv Privacy) Privacy {
	t.Helper()
	spec := pv.Ledger.Spec
	ideal := func(sigma float64) (privacy.Accountant, error) {
		s := spec
		s.Sigma = sigma
		return s.New()
	}
	newAcc, _ := SecureAccounting(cfg, ideal, nil)
	acc, err := newAcc(cfg.Sigma)
	if err != nil {
		t.Fatal(err)
	}
	pv.Accountant = acc
	return pv
}

// SecureAccounting: the calibrated σ meets the budget with the near-ideal accountant, sits a
// hair above the ideal solution, and the effective multiplier is a hair below σ.
func TestSecureAccounting(t *testing.T) {
	train, _ := smallProblem(t)
	cfg, _, pv := ckptCases[0].build(t, train, 3)
	cfg.Secure = true
	spec := pv.Ledger.Spec
	spec.Method = accounting.MethodRDP // fast to solve
	ideal := func(sigma float64) (privacy.Accountant, error) {
		s := spec
		s.Sigma = sigma
		return s.New()
	}
	solveIdeal := func(steps int, b privacy.Budget) (float64, error) { return accounting.SolveSigma(spec, steps, b) }
	newAcc, solve := SecureAccounting(cfg, ideal, solveIdeal)
	b := privacy.Budget{Epsilon: 2, Delta: 1e-5}
	sigma, err := solve(30, b)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := solveIdeal(30, b)
	if !(sigma >= plain) || sigma > plain*(1+1e-6) {
		t.Errorf("secure σ %v against the ideal %v", sigma, plain)
	}
	acc, err := newAcc(sigma)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Within(acc, 30); !ok || err != nil {
		t.Errorf("secure σ %v does not meet the budget: %v %v", sigma, ok, err)
	}
	if e := SecureEffectiveSigma(sigma, cfg.Clip, cfg.Arch.NumParams()); !(e < sigma) || e < sigma*(1-1e-9) {
		t.Errorf("effective σ %v for σ %v", e, sigma)
	}
	if err := checkSecureAccountant(&cfg, acc); err != nil {
		t.Error(err)
	}
}
