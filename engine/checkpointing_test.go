package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/checkpoint"
	"github.com/dpsgd/dpsgd/engine/sampler"
	"github.com/dpsgd/dpsgd/internal/testkeys"
	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/accounting"
	"gorgonia.org/tensor"
)

// The package's tests write checkpoints: their run keys go to a temporary key store.
func init() { testkeys.Use() }

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
		{"dataset fingerprint", func(_ *Config, _ *sampler.Sampler, _ *Privacy, ds **datasets.Dataset) {
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
// every step that draws it; the run goes on, its parameters stay finite, and its loss is left
// out of its steps' loss, which stays finite (no step counts a non-finite loss).
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
	if res.NonFinite != 2 || res.NonFiniteLoss != 0 || res.Diverged {
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
// (the seeded mode gives equal ones, TestSameSeedSameResult), a secure sampler's key is
// checked on resume by its keyed fingerprint in the checkpoint, a resume of a secure run
// continues to the planned steps, and ball noise is refused in secure mode.
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
	if err != nil || !ck.Config.Secure || ck.Config.Sampler.KeyMAC == "" {
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

// plainDatasetDigest is the unkeyed SHA-256 of a dataset's sizes, features' bits and labels,
// which version 1 checkpoints stored: an exact membership test for anyone who can guess the
// data.
func plainDatasetDigest(ds *datasets.Dataset) []byte {
	h := sha256.New()
	var buf []byte
	buf = binary.LittleEndian.AppendUint64(buf, uint64(ds.N))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(ds.D))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(ds.Classes))
	for _, v := range ds.X {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
	}
	for _, v := range ds.Y {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(v))
	}
	h.Write(buf)
	return h.Sum(nil)
}

// secureCase builds a secure run of ckptCases[0] with sampler key key.
func secureCase(t *testing.T, train *datasets.Dataset, epochs int, key [32]byte) (Config, sampler.Sampler, Privacy) {
	t.Helper()
	cfg, smp, pv := ckptCases[0].build(t, train, epochs)
	cfg.Secure = true
	pv = securePrivacy(t, cfg, pv)
	smp, err := sampler.Secure(smp, key)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, smp, pv
}

// TestCheckpointHoldsNoSecrets: a checkpoint holds neither the training set's SHA-256 nor a
// secure sampler's key, in hex or in binary, nor the run's secret; it says in its JSON that it
// is private; the secret is in the key store (mode 0600), and without the key store a resume
// is refused, saying where the key was looked for and how to name the store.
func TestCheckpointHoldsNoSecrets(t *testing.T) {
	keys := t.TempDir()
	t.Setenv(checkpoint.KeyDirEnv, keys)
	train, test := smallProblem(t)
	key, err := sampler.NewSecureKey()
	if err != nil {
		t.Fatal(err)
	}
	digest := plainDatasetDigest(train)
	for _, secure := range []bool{true, false} {
		cfg, smp, pv := ckptCases[0].build(t, train, 1)
		if secure {
			cfg, smp, pv = secureCase(t, train, 1, key)
		}
		path := filepath.Join(t.TempDir(), "run.ckpt")
		cfg.Checkpoint = CheckpointOptions{Path: path, Every: 7, SamplerSeed: cfg.Seed}
		if _, err := Train(context.Background(), cfg, train, test, smp, pv, nil); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		leaks := map[string][]byte{
			"the data's SHA-256 in hex": []byte(hex.EncodeToString(digest)),
			"the data's SHA-256":        digest,
		}
		if secure {
			leaks["the sampler key in hex"] = []byte(hex.EncodeToString(key[:]))
			leaks["the sampler key"] = key[:]
		}
		ck, err := checkpoint.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if sf, err := os.ReadFile(filepath.Join(keys, ck.Config.RunID, "secret")); err != nil {
			t.Errorf("secure %v: the run's key is not in the key store: %v", secure, err)
		} else {
			i := bytes.Index(sf, []byte(`"secret":"`))
			if i < 0 {
				t.Fatalf("key file %s", sf)
			}
			hexSecret := sf[i+10 : i+10+64]
			raw, _ := hex.DecodeString(string(hexSecret))
			leaks["the run's secret in hex"], leaks["the run's secret"] = hexSecret, raw
		}
		for what, b := range leaks {
			if bytes.Contains(data, b) || bytes.Contains(bytes.ToUpper(data), bytes.ToUpper(b)) {
				t.Errorf("secure %v: the checkpoint holds %s", secure, what)
			}
		}
		if !bytes.Contains(data, []byte(`"private":"PRIVATE: this checkpoint holds the run's non-private training history`)) {
			t.Errorf("secure %v: the checkpoint's JSON does not say it is private", secure)
		}
		// Without its key the run does not resume.
		t.Setenv(checkpoint.KeyDirEnv, t.TempDir())
		cfg, smp, pv = ckptCases[0].build(t, train, 2)
		if secure {
			cfg, smp, pv = secureCase(t, train, 2, key)
		}
		cfg.Checkpoint = CheckpointOptions{Resume: ck, SamplerSeed: cfg.Seed}
		_, err = Train(context.Background(), cfg, train, test, smp, pv, nil)
		if !errors.Is(err, checkpoint.ErrNoKey) || !strings.Contains(err.Error(), "--key-dir") || !strings.Contains(err.Error(), ck.Config.RunID) {
			t.Errorf("secure %v: resume without the key store: err = %v, want ErrNoKey naming --key-dir and the run", secure, err)
		}
		t.Setenv(checkpoint.KeyDirEnv, keys)
	}
}

// TestSecureResumeOnce: two resumes of copies of one secure checkpoint would release the same
// epochs twice with independent noise, which neither ledger covers. The first resume claims
// the run's next generation; the second is refused with ErrStale saying why, and leaves its
// file as it was; the first's checkpoints carry the new generation and resume in turn; and a
// run whose generation another process takes stops before its next checkpoint.
func TestSecureResumeOnce(t *testing.T) {
	t.Setenv(checkpoint.KeyDirEnv, t.TempDir())
	train, test := smallProblem(t)
	key, _ := sampler.NewSecureKey()
	dir := t.TempDir()
	orig, dup := filepath.Join(dir, "run.ckpt"), filepath.Join(dir, "copy.ckpt")
	cfg, smp, pv := secureCase(t, train, 1, key)
	cfg.Checkpoint = CheckpointOptions{Path: orig}
	if _, err := Train(context.Background(), cfg, train, test, smp, pv, nil); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(orig)
	if err := os.WriteFile(dup, data, 0o600); err != nil {
		t.Fatal(err)
	}
	ckA, errA := checkpoint.Load(orig)
	ckB, errB := checkpoint.Load(dup)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	// A resume whose checkpoint could not be written claims nothing.
	cfg, smp, pv = secureCase(t, train, 2, key)
	cfg.Checkpoint = CheckpointOptions{Path: filepath.Join(dir, "missing", "x.ckpt"), Resume: ckA}
	if _, err := Train(context.Background(), cfg, train, test, smp, pv, nil); !errors.Is(err, checkpoint.ErrWrite) {
		t.Fatalf("resume to an unwritable path: err = %v", err)
	}
	cfg, smp, pv = secureCase(t, train, 2, key)
	cfg.Checkpoint = CheckpointOptions{Path: orig, Resume: ckA}
	if _, err := Train(context.Background(), cfg, train, test, smp, pv, nil); err != nil {
		t.Fatalf("first resume: %v", err)
	}
	cfg, smp, pv = secureCase(t, train, 2, key)
	cfg.Checkpoint = CheckpointOptions{Path: dup, Resume: ckB}
	_, err := Train(context.Background(), cfg, train, test, smp, pv, nil)
	if err == nil {
		t.Fatalf("a second resume of the same secure checkpoint ran: the same epochs were released twice with fresh noise")
	}
	if !errors.Is(err, checkpoint.ErrStale) || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("second resume: err = %v, want ErrStale saying the epochs would be released twice", err)
	}
	if now, _ := os.ReadFile(dup); !bytes.Equal(now, data) {
		t.Errorf("the refused resume wrote its checkpoint")
	}
	ck1, err := checkpoint.Load(orig)
	if err != nil || ck1.State.Generation != 1 {
		t.Fatalf("first resume's checkpoint: %v, generation %v", err, ck1.State.Generation)
	}
	cfg, smp, pv = secureCase(t, train, 3, key)
	cfg.Checkpoint = CheckpointOptions{Path: orig, Resume: ck1}
	if res, err := Train(context.Background(), cfg, train, test, smp, pv, nil); err != nil || res.Steps != 3*smp.StepsPerEpoch() {
		t.Fatalf("resume of the newest checkpoint: %v", err)
	}
	if ck2, err := checkpoint.Load(orig); err != nil || ck2.State.Generation != 2 {
		t.Fatalf("second generation's checkpoint: %v, generation %v", err, ck2.State.Generation)
	}

	// A live run whose checkpoint was copied and resumed elsewhere (simulated by claiming the
	// next generation at step 3) stops before writing its next checkpoint.
	live := filepath.Join(dir, "live.ckpt")
	cfg, smp, pv = secureCase(t, train, 1, key)
	cfg.Checkpoint = CheckpointOptions{Path: live, Every: 1}
	res, err := Train(context.Background(), cfg, train, test, smp, pv, &claimAt{t: t, n: 3, path: live})
	if !errors.Is(err, checkpoint.ErrStale) || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("live run after its generation was taken: err = %v", err)
	}
	if ck, err := checkpoint.Load(live); err != nil || ck.State.Step != res.LastCheckpointStep || ck.State.Step >= 3 {
		t.Fatalf("live run's checkpoint: %v at step %v, last written %d", err, ck, res.LastCheckpointStep)
	}
}

// claimAt claims the next generation of the run of the checkpoint at path after step n, as a
// resume of a copy of it in another process would.
type claimAt struct {
	NopProgress
	t    *testing.T
	n    int
	path string
}

func (c *claimAt) Step(step int, _ StepStats, _ float64) {
	if step != c.n {
		return
	}
	ck, err := checkpoint.Load(c.path)
	if err != nil {
		c.t.Fatal(err)
	}
	store, _ := checkpoint.OpenKeyStore("")
	k, err := store.Load(ck.Config.RunID)
	if err == nil {
		_, err = k.Claim(ck.State.Generation, ck.State.Step)
	}
	if err != nil {
		c.t.Fatal(err)
	}
}

// TestForkedNoise: seeded runs whose trajectories differ never share noise; one resumed with
// an unchanged configuration still ends bitwise on the uninterrupted run.
//
// With the noise keyed by (seed, step) alone, (1) two fresh runs from one seed with another
// cosine horizon or another schedule took the same first step, bit for bit (same parameters,
// batch, rate and noise), and (2) two forks of one checkpoint with other epoch totals added
// the same noise, at the second step after the fork, to gradients at different parameters, so
// the difference of their releases was the noise-free difference of the clipped sums. Now the
// forks' noisy gradients there differ by about the noise's scale σC√(2d)/B. (3) Under a
// constant schedule the total is not part of the trajectory: 2 and 3 epochs take the same
// first step, as they share their path (and extend bitwise, TestResumeBitwise).
func TestForkedNoise(t *testing.T) {
	train, test := smallProblem(t)
	base := ckptCase{"fork", tensor.Float64, "poisson", OptimizerConfig{Name: "sgd", LR: 0.3, Schedule: "cosine"}, true}
	// run trains c for epochs from resume (nil: afresh) and stops after step stop, returning
	// the checkpoint there.
	run := func(c ckptCase, epochs int, resume *checkpoint.Checkpoint, stop int) *checkpoint.Checkpoint {
		t.Helper()
		cfg, smp, pv := c.build(t, train, epochs)
		path := filepath.Join(t.TempDir(), "run.ckpt")
		cfg.Checkpoint = CheckpointOptions{Path: path, Resume: resume, SamplerSeed: cfg.Seed}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if _, err := Train(ctx, cfg, train, test, smp, pv, &cancelAt{n: stop, cancel: cancel}); !errors.Is(err, ErrInterrupted) {
			t.Fatalf("%+v, %d epochs, stop %d: %v", c.opt, epochs, stop, err)
		}
		ck, err := checkpoint.Load(path)
		if err != nil || ck.State.Step != stop {
			t.Fatalf("checkpoint %v at %v", err, ck)
		}
		return ck
	}
	same := func(a, b [][]float64) bool { return reflect.DeepEqual(a, b) }

	// (1) and (3): the first step of fresh runs.
	cosine2 := run(base, 2, nil, 1)
	constant := base
	constant.opt.Schedule = "constant"
	if same(cosine2.Params, run(base, 3, nil, 1).Params) {
		t.Errorf("cosine over 2 and 3 epochs: the same first step from one seed (shared noise)")
	}
	c2 := run(constant, 2, nil, 1)
	if same(cosine2.Params, c2.Params) {
		t.Errorf("cosine and constant schedules: the same first step from one seed (shared noise)")
	}
	if !same(c2.Params, run(constant, 3, nil, 1).Params) {
		t.Errorf("constant schedule over 2 and 3 epochs: the first steps differ, though the paths are the same")
	}

	// (2): forks of a checkpoint at step s with 3 and 4 epochs.
	const s = 5
	ck := run(base, 2, nil, s)
	cfg, smp, _ := base.build(t, train, 2)
	d, b := cfg.Arch.NumParams(), smp.ExpectedBatchSize()
	var grads [2][]float64
	for i, epochs := range []int{3, 4} {
		first := run(base, epochs, ck, s+1)
		second := run(base, epochs, first, s+2)
		if len(first.State.Noise) != 2 || first.State.Noise[1].From != s || len(second.State.Noise) != 2 {
			t.Errorf("fork to %d epochs: noise segments %+v then %+v, want a fork at step %d", epochs, first.State.Noise, second.State.Noise, s)
		}
		lr := base.opt.rate(s+1, epochs*smp.StepsPerEpoch())
		for p := range first.Params {
			for j := range first.Params[p] {
				grads[i] = append(grads[i], (first.Params[p][j]-second.Params[p][j])/lr)
			}
		}
	}
	var diff float64
	for j := range grads[0] {
		diff += (grads[0][j] - grads[1][j]) * (grads[0][j] - grads[1][j])
	}
	diff = math.Sqrt(diff)
	scale := cfg.Sigma * cfg.Clip * math.Sqrt(2*float64(d)) / b
	t.Logf("forks at step %d: |ĝ₃ − ĝ₄| = %.4g at step %d; the noise's scale σC√(2d)/B = %.4g (d = %d, B = %g)", s, diff, s+1, scale, d, b)
	if diff < scale/2 {
		t.Errorf("forks with 3 and 4 epochs: their noisy gradients at step %d differ by %.3g, far below the noise's scale %.3g: the same noise on different parameters", s+1, diff, scale)
	}

	// An unchanged resume: bitwise, one noise segment.
	cfg, smp, pv := base.build(t, train, 2)
	ref, err := Train(context.Background(), cfg, train, test, smp, pv, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, smp, pv = base.build(t, train, 2)
	path := filepath.Join(t.TempDir(), "same.ckpt")
	cfg.Checkpoint = CheckpointOptions{Path: path, Resume: ck, SamplerSeed: cfg.Seed}
	got, err := Train(context.Background(), cfg, train, test, smp, pv, nil)
	if err != nil || got.ParamsDigest != ref.ParamsDigest {
		t.Fatalf("unchanged resume: %v, digest %.12s, uninterrupted %.12s", err, got.ParamsDigest, ref.ParamsDigest)
	}
	if fin, err := checkpoint.Load(path); err != nil || len(fin.State.Noise) != 1 {
		t.Fatalf("unchanged resume's checkpoint: %v, noise segments %+v", err, fin.State.Noise)
	}
}

// TestTrajectoryFingerprint: every field that decides the parameters' path changes the
// fingerprint (so the noise key); the fields that do not leave it; the seed and the sampler's
// batches change the noise key, not the fingerprint (which checkpoints record).
func TestTrajectoryFingerprint(t *testing.T) {
	train, _ := smallProblem(t)
	build := func(mut func(*Config, *int)) string {
		cfg := smallConfig(train)
		cfg.Optimizer = OptimizerConfig{Name: "momentum", LR: 0.5, Momentum: 0.9, Schedule: "cosine"}
		seed := 7
		mut(&cfg, &seed)
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		smp, err := sampler.NewPoisson(train.N, 0.05, uint64(seed))
		if err != nil {
			t.Fatal(err)
		}
		return trajectoryFingerprint(&cfg, smp)
	}
	ref := build(func(*Config, *int) {})
	for name, mut := range map[string]func(*Config, *int){
		"epochs (cosine)": func(c *Config, _ *int) { c.Epochs++ },
		"schedule":        func(c *Config, _ *int) { c.Optimizer.Schedule = "constant" },
		"lr":              func(c *Config, _ *int) { c.Optimizer.LR = 0.4 },
		"optimizer":       func(c *Config, _ *int) { c.Optimizer.Name = "sgd" },
		"momentum":        func(c *Config, _ *int) { c.Optimizer.Momentum = 0.8 },
		"weight decay":    func(c *Config, _ *int) { c.Optimizer.WeightDecay = 1e-4 },
		"ema":             func(c *Config, _ *int) { c.Optimizer.EMA = 0.5 },
		"clip":            func(c *Config, _ *int) { c.Clip = 2 },
		"sigma":           func(c *Config, _ *int) { c.Sigma = 1.5 },
		"ball noise":      func(c *Config, _ *int) { c.Noise, c.Radius = NoiseBall, 3 },
		"non-private":     func(c *Config, _ *int) { c.NonPrivate = true },
		"replicas":        func(c *Config, _ *int) { c.Replicas = 3 },
		"physical batch":  func(c *Config, _ *int) { c.PhysicalBatch = 32 },
		"dtype":           func(c *Config, _ *int) { c.Dtype = tensor.Float64 },
		"architecture":    func(c *Config, _ *int) { c.Arch = smallConfig(train).Arch; c.Arch.Hidden = []int{8} },
	} {
		if build(mut) == ref {
			t.Errorf("%s: same trajectory fingerprint", name)
		}
	}
	for name, mut := range map[string]func(*Config, *int){
		"eval batch":                  func(c *Config, _ *int) { c.EvalBatch = 100 },
		"seed (in the key, not here)": func(c *Config, _ *int) { c.Seed = 9 },
		"checkpoint path":             func(c *Config, _ *int) { c.Checkpoint.Path = "x" },
		"radius of a gaussian run":    func(c *Config, _ *int) { c.Radius = 5 },
		"device":                      func(c *Config, _ *int) { c.Device = DeviceCPU },
	} {
		if build(mut) != ref {
			t.Errorf("%s: changes the trajectory fingerprint", name)
		}
	}
	constant := func(epochs int) func(*Config, *int) {
		return func(c *Config, _ *int) { c.Optimizer.Schedule, c.Epochs = "constant", epochs }
	}
	if build(constant(2)) != build(constant(5)) {
		t.Errorf("constant schedule: the total of epochs changes the fingerprint")
	}
	key := func(seed, samplerSeed uint64) uint64 {
		cfg := smallConfig(train)
		cfg.Seed = seed
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		smp, _ := sampler.NewPoisson(train.N, 0.05, samplerSeed)
		k, err := newCkptRun(&cfg, smp)
		if err != nil {
			t.Fatal(err)
		}
		return k.noiseKey
	}
	if k := key(7, 7); k != key(7, 7) || k == key(8, 7) || k == key(7, 8) {
		t.Errorf("noise keys: the seed and the sampler's batches must decide it, and nothing random")
	}
}
