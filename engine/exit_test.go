package engine

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/checkpoint"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/engine/sampler"
)

// stepHook calls fn after each step (from the training goroutine).
type stepHook struct {
	NopProgress
	fn func(step int)
}

func (h *stepHook) Step(step int, _ StepStats, _ float64) { h.fn(step) }

// TestEveryExitReportsEpsilon: however a private run ends — finished, interrupted before or
// inside an epoch, diverged, or stopped by an error after some steps — the result's ε is a
// number that covers every step taken (the ε of the charged steps, which include the whole
// epoch in progress), never NaN and never 0 for a run that took steps. This is the attack of a
// stopped run reporting ε = 0 while its ledger says otherwise.
func TestEveryExitReportsEpsilon(t *testing.T) {
	train, test := smallProblem(t)
	type outcome struct {
		res *Result
		err error
		pv  Privacy
		smp sampler.Sampler
	}
	run := func(t *testing.T, c ckptCase, epochs int, ctx context.Context, edit func(*Config), prog Progress) outcome {
		t.Helper()
		cfg, smp, pv := c.build(t, train, epochs)
		if edit != nil {
			edit(&cfg)
		}
		res, err := Train(ctx, cfg, train, test, smp, pv, prog)
		if res == nil {
			t.Fatalf("no result (err %v)", err)
		}
		return outcome{res, err, pv, smp}
	}
	// check asserts ε = ε(charged steps) ≥ ε(steps taken) > 0 and that the ledger agrees.
	check := func(t *testing.T, o outcome, wantCharged int) {
		t.Helper()
		res, acc := o.res, o.pv.Accountant
		if math.IsNaN(res.Epsilon) || (res.Steps > 0 && !(res.Epsilon > 0)) {
			t.Fatalf("ε = %v after %d steps (err %v): want a positive number", res.Epsilon, res.Steps, o.err)
		}
		if res.EpsilonSteps != wantCharged || res.EpsilonSteps < res.Steps {
			t.Fatalf("ε covers %d steps, want %d (steps taken %d)", res.EpsilonSteps, wantCharged, res.Steps)
		}
		want, err := acc.Epsilon(wantCharged, o.pv.Delta)
		if err != nil {
			t.Fatal(err)
		}
		taken, err := acc.Epsilon(res.Steps, o.pv.Delta)
		if err != nil {
			t.Fatal(err)
		}
		if res.Epsilon != want || res.Epsilon < taken {
			t.Fatalf("ε = %v, want ε(%d) = %v ≥ ε(%d steps taken) = %v", res.Epsilon, wantCharged, want, res.Steps, taken)
		}
		if l := o.pv.Ledger; l != nil && (l.Steps != wantCharged || l.Epochs[len(l.Epochs)-1].Epsilon != res.Epsilon) {
			t.Fatalf("ledger at %d steps with ε %v; result ε %v over %d", l.Steps, l.Epochs[len(l.Epochs)-1].Epsilon, res.Epsilon, wantCharged)
		}
	}
	c := ckptCases[0] // float32, Poisson, momentum, EMA, cosine, private

	t.Run("finished", func(t *testing.T) {
		o := run(t, c, 2, context.Background(), nil, nil)
		if o.err != nil {
			t.Fatal(o.err)
		}
		check(t, o, 2*o.smp.StepsPerEpoch())
	})
	t.Run("interrupted inside an epoch", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		o := run(t, c, 3, ctx, nil, &cancelAt{n: 5, cancel: cancel})
		if !errors.Is(o.err, ErrInterrupted) || o.res.Steps != 5 {
			t.Fatalf("err %v after %d steps, want interrupted after 5", o.err, o.res.Steps)
		}
		check(t, o, o.smp.StepsPerEpoch())
	})
	t.Run("interrupted in the second epoch", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, smp, _ := c.build(t, train, 3)
		m := smp.StepsPerEpoch()
		o := run(t, c, 3, ctx, nil, &cancelAt{n: m + 2, cancel: cancel})
		if !errors.Is(o.err, ErrInterrupted) || o.res.Steps != m+2 {
			t.Fatalf("err %v after %d steps, want interrupted after %d", o.err, o.res.Steps, m+2)
		}
		check(t, o, 2*m)
	})
	t.Run("interrupted before the first step", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		o := run(t, c, 2, ctx, nil, nil)
		if !errors.Is(o.err, ErrInterrupted) || o.res.Steps != 0 {
			t.Fatalf("err %v after %d steps", o.err, o.res.Steps)
		}
		// The first epoch was charged before its first step: ε covers it, conservatively.
		check(t, o, o.smp.StepsPerEpoch())
	})
	t.Run("diverged", func(t *testing.T) {
		d := ckptCase{"diverge", c.dtype, "poisson", OptimizerConfig{Name: "sgd", LR: 1e5, WeightDecay: 1e5}, true}
		o := run(t, d, 3, context.Background(), nil, nil)
		if !errors.Is(o.err, ErrDiverged) || o.res.Steps == 0 {
			t.Fatalf("err %v after %d steps, want a divergence", o.err, o.res.Steps)
		}
		m := o.smp.StepsPerEpoch()
		check(t, o, (o.res.Steps+m-1)/m*m)
	})
	t.Run("error after some steps", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "ckpt")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		// The checkpoint directory disappears after step 2, so the checkpoint of step 3 fails.
		prog := &stepHook{fn: func(step int) {
			if step == 2 {
				_ = os.RemoveAll(dir)
			}
		}}
		o := run(t, c, 2, context.Background(), func(cfg *Config) {
			cfg.Checkpoint = CheckpointOptions{Path: filepath.Join(dir, "run.ckpt"), Every: 3}
		}, prog)
		if !errors.Is(o.err, checkpoint.ErrWrite) || o.res.Steps != 3 {
			t.Fatalf("err %v after %d steps, want a checkpoint write error after 3", o.err, o.res.Steps)
		}
		check(t, o, o.smp.StepsPerEpoch())
	})
	t.Run("no ledger", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cfg, smp, pv := c.build(t, train, 2)
		pv.Ledger, pv.Budget = nil, nil
		res, err := Train(ctx, cfg, train, test, smp, pv, &cancelAt{n: 3, cancel: cancel})
		if !errors.Is(err, ErrInterrupted) {
			t.Fatal(err)
		}
		check(t, outcome{res, err, pv, smp}, smp.StepsPerEpoch())
	})
}

// TestCheckRange: a run whose clipped sum and noise could overflow its dtype, or whose step
// count could overflow, is refused before any step (from public numbers only); an ordinary run
// passes.
func TestCheckRange(t *testing.T) {
	train, test := smallProblem(t)
	c := ckptCases[0]
	for _, tc := range []struct {
		name string
		edit func(*Config)
		ok   bool
	}{
		{"ordinary", func(*Config) {}, true},
		{"huge clip", func(cfg *Config) { cfg.Clip = 1e33 }, false},
		{"huge sigma", func(cfg *Config) { cfg.Sigma = 1e32 }, false},
		{"huge epochs", func(cfg *Config) { cfg.Epochs = 1 << 40 }, false},
	} {
		cfg, smp, pv := c.build(t, train, 1)
		tc.edit(&cfg)
		pv.Budget = nil
		err := checkRange(&cfg, train.N, smp.StepsPerEpoch())
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v", tc.name, err)
		}
		if !tc.ok {
			if res, err := Train(context.Background(), cfg, train, test, smp, pv, nil); err == nil || res != nil {
				t.Errorf("%s: Train ran (err %v)", tc.name, err)
			}
		}
	}
}

// TestHostileRecordDoesNotStopTheRun: a record with NaN features, drawn alone into its batch,
// makes every example of that step non-finite. The run must go on exactly as long as with a
// benign record in its place — a stop there would tell an observer of the run's length that the
// record is in the data, whatever ε says (Poisson, q = 1/8, 8 records, 20 epochs, several seeds).
func TestHostileRecordDoesNotStopTheRun(t *testing.T) {
	arch := nn.LogReg([]int{4}, 2)
	for seed := uint64(1); seed <= 5; seed++ {
		steps := map[bool]int{}
		for _, hostile := range []bool{false, true} {
			var ds *datasets.Dataset
			if hostile {
				ds = randomDataset(arch, 8, seed, 0)
			} else {
				ds = randomDataset(arch, 8, seed)
			}
			cfg := Config{Arch: arch, PhysicalBatch: 4, Replicas: 1, Epochs: 20, Clip: 1, Sigma: 20, Seed: seed,
				Optimizer: OptimizerConfig{Name: "sgd", LR: 0.1}}
			smp, err := sampler.NewPoisson(ds.N, 1.0/8, seed)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Train(context.Background(), cfg, ds, ds, smp, poissonPrivacy(t, smp.SampleRate(), 20, nil), nil)
			if err != nil || res.Diverged {
				t.Fatalf("seed %d hostile %v: err %v, diverged %v after %d steps", seed, hostile, err, res.Diverged, res.Steps)
			}
			steps[hostile] = res.Steps
		}
		if steps[true] != steps[false] {
			t.Errorf("seed %d: %d steps with the hostile record, %d without", seed, steps[true], steps[false])
		}
	}
}

// TestGroupedExitsReportEpsilon is TestEveryExitReportsEpsilon's attack on the grouped steps:
// a user-level run (the sampler over users) and an augmented one (K = 3 views), interrupted
// inside an epoch and diverged, report the ε of every charged step, as the ledger has it.
func TestGroupedExitsReportEpsilon(t *testing.T) {
	cases := []struct {
		name string
		edit func(t *testing.T, cfg *Config, train *datasets.Dataset) int // returns the sampler's N
	}{
		{"user-level", func(t *testing.T, cfg *Config, train *datasets.Dataset) int {
			if err := datasets.AssignUsers(train, 600, 3); err != nil {
				t.Fatal(err)
			}
			cfg.UserLevel, cfg.MaxUserRecords = true, 8
			return train.Users
		}},
		{"augmult", func(t *testing.T, cfg *Config, train *datasets.Dataset) int {
			// The synthetic records read as 1×1×D images: views are the record (no pad, no
			// flip), three of them per example.
			train.Shape = []int{1, 1, train.D}
			cfg.Arch = nn.MLP(train.Shape, train.Classes, []int{16}, nn.Tanh)
			cfg.AugMult = 3
			return train.N
		}},
	}
	for _, c := range cases {
		for _, diverge := range []bool{false, true} {
			name := c.name + "/interrupted"
			if diverge {
				name = c.name + "/diverged"
			}
			t.Run(name, func(t *testing.T) {
				train, test := smallProblem(t)
				cfg := smallConfig(train)
				cfg.Epochs = 3
				n := c.edit(t, &cfg, train)
				test.Shape = train.Shape
				if diverge {
					cfg.Optimizer = OptimizerConfig{Name: "sgd", LR: 1e5, WeightDecay: 1e5}
				}
				smp, pv := testSamplerPrivacy(t, "poisson", n, 60, cfg, true, 50)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				var prog Progress
				if !diverge {
					prog = &cancelAt{n: 3, cancel: cancel}
				}
				res, err := Train(ctx, cfg, train, test, smp, pv, prog)
				if res == nil {
					t.Fatalf("no result (err %v)", err)
				}
				switch {
				case diverge && !errors.Is(err, ErrDiverged):
					t.Fatalf("err %v after %d steps, want a divergence", err, res.Steps)
				case !diverge && (!errors.Is(err, ErrInterrupted) || res.Steps != 3):
					t.Fatalf("err %v after %d steps, want interrupted after 3", err, res.Steps)
				}
				m := smp.StepsPerEpoch()
				charged := (res.Steps + m - 1) / m * m
				want, err := pv.Accountant.Epsilon(charged, pv.Delta)
				if err != nil {
					t.Fatal(err)
				}
				if res.Steps == 0 || res.EpsilonSteps != charged || res.Epsilon != want || !(want > 0) {
					t.Fatalf("ε = %v over %d steps after %d taken; want ε(%d) = %v", res.Epsilon, res.EpsilonSteps, res.Steps, charged, want)
				}
				if l := pv.Ledger; l.Steps != charged || l.Epochs[len(l.Epochs)-1].Epsilon != res.Epsilon {
					t.Fatalf("ledger at %d steps with ε %v; result ε %v over %d", l.Steps, l.Epochs[len(l.Epochs)-1].Epsilon, res.Epsilon, charged)
				}
			})
		}
	}
}
