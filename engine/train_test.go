package engine

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/engine/sampler"
	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/accounting"
	"gorgonia.org/tensor"
)

func smallProblem(t testing.TB) (train, test *datasets.Dataset) {
	cfg := datasets.DefaultSynthetic()
	cfg.Train, cfg.Test = 3000, 1000
	train, test, err := datasets.Synthetic(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return train, test
}

func smallConfig(train *datasets.Dataset) Config {
	return Config{
		Arch: nn.MLP(train.Shape, train.Classes, []int{16}, nn.Tanh), PhysicalBatch: 64, Replicas: 2,
		Epochs: 3, Clip: 1, Sigma: 1, Seed: 7,
		Optimizer: OptimizerConfig{Name: "momentum", LR: 0.5, Momentum: 0.9, Schedule: "cosine", EMA: 0.9},
	}
}

func poissonPrivacy(t testing.TB, q, sigma float64, budget *privacy.Budget) Privacy {
	acc, err := privacy.NewPoissonRDP(q, sigma, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Privacy{Accountant: acc, Delta: 1e-5, Budget: budget}
}

// TestSameSeedSameResult: two runs with one seed give bit-identical parameters, whatever the
// goroutine scheduling of the replicas; another seed gives different ones.
func TestSameSeedSameResult(t *testing.T) {
	train, test := smallProblem(t)
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		digests := map[uint64][]string{}
		for _, seed := range []uint64{7, 7, 8} {
			cfg := smallConfig(train)
			cfg.Dtype, cfg.Seed = dt, seed
			smp, err := sampler.NewPoisson(train.N, 100.0/float64(train.N), seed)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Train(context.Background(), cfg, train, test, smp, poissonPrivacy(t, smp.SampleRate(), 1, nil), nil)
			if err != nil {
				t.Fatal(err)
			}
			digests[seed] = append(digests[seed], res.ParamsDigest)
		}
		if digests[7][0] != digests[7][1] {
			t.Errorf("%v: same seed, different parameters", dt)
		}
		if digests[7][0] == digests[8][0] {
			t.Errorf("%v: different seeds, same parameters", dt)
		}
	}
}

// TestBudgetStopsTraining: with a budget that only two epochs fit, training stops before the
// third, and the reported ε is within the budget.
func TestBudgetStopsTraining(t *testing.T) {
	train, test := smallProblem(t)
	cfg := smallConfig(train)
	cfg.Epochs = 5
	q := 100.0 / float64(train.N)
	smp, _ := sampler.NewPoisson(train.N, q, 1)
	acc, _ := privacy.NewPoissonRDP(q, 1, nil)
	m := smp.StepsPerEpoch()
	e2, _ := acc.Epsilon(2*m, 1e-5)
	e3, _ := acc.Epsilon(3*m, 1e-5)
	budget := &privacy.Budget{Epsilon: (e2 + e3) / 2, Delta: 1e-5}
	pv := poissonPrivacy(t, q, 1, budget)
	spec := accounting.Spec{Sampler: privacy.SamplerPoisson, Method: accounting.MethodRDP, Sigma: 1, SampleRate: q}
	ledger, err := accounting.NewLedger(spec, 1e-5, budget)
	if err != nil {
		t.Fatal(err)
	}
	pv.Ledger = ledger
	res, err := Train(context.Background(), cfg, train, test, smp, pv, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The ledger holds one entry per epoch run, with the ε the history reports.
	if len(ledger.Epochs) != 2 || ledger.Steps != 2*m {
		t.Fatalf("ledger %+v, want 2 epochs and %d steps", ledger, 2*m)
	}
	for i, e := range ledger.Epochs {
		if e.Steps != (i+1)*m || e.Epsilon != res.History[i].Epsilon {
			t.Errorf("ledger epoch %d: %+v, history ε %v", i+1, e, res.History[i].Epsilon)
		}
	}
	if !res.StoppedByBudget || res.EpochsRun != 2 || res.Steps != 2*m {
		t.Fatalf("stopped=%v epochs=%d steps=%d, want stopped after 2 epochs (%d steps)", res.StoppedByBudget, res.EpochsRun, res.Steps, 2*m)
	}
	if res.Epsilon > budget.Epsilon || math.Abs(res.Epsilon-e2) > 1e-12 {
		t.Fatalf("ε = %v, want %v ≤ budget %v", res.Epsilon, e2, budget.Epsilon)
	}
}

// TestTrainingLearns: DP training beats chance by far on the synthetic problem, and the
// non-private baseline (same code path) is at least as good.
func TestTrainingLearns(t *testing.T) {
	train, test := smallProblem(t)
	q := 100.0 / float64(train.N)
	smp, _ := sampler.NewPoisson(train.N, q, 1)
	cfg := smallConfig(train)
	res, err := Train(context.Background(), cfg, train, test, smp, poissonPrivacy(t, q, 1, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.NonPrivate = true
	base, err := Train(context.Background(), cfg, train, test, smp, Privacy{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.TestAccuracy < 0.6 || base.TestAccuracy < 0.75 {
		t.Fatalf("accuracy DP %.3f, non-private %.3f: want ≥ 0.6 and ≥ 0.75 (chance 0.1)", res.TestAccuracy, base.TestAccuracy)
	}
	if !(res.Epsilon > 0) || !math.IsNaN(base.Epsilon) {
		t.Fatalf("ε DP %v (want > 0), non-private %v (want NaN: no guarantee)", res.Epsilon, base.Epsilon)
	}
}

// TestCancelStopsCleanly: a cancelled context stops the run with ErrInterrupted and a result
// that says where it stopped.
func TestCancelStopsCleanly(t *testing.T) {
	train, test := smallProblem(t)
	q := 100.0 / float64(train.N)
	smp, _ := sampler.NewPoisson(train.N, q, 1)
	ctx, cancel := context.WithCancel(context.Background())
	prog := &cancelAfter{n: 5, cancel: cancel}
	res, err := Train(ctx, smallConfig(train), train, test, smp, poissonPrivacy(t, q, 1, nil), prog)
	if !errors.Is(err, ErrInterrupted) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want ErrInterrupted wrapping context.Canceled", err)
	}
	if res == nil || !res.Interrupted || res.Steps != 5 {
		t.Fatalf("result %+v, want interrupted after 5 steps", res)
	}
}

type cancelAfter struct {
	NopProgress
	n      int
	cancel func()
}

func (c *cancelAfter) Step(step int, _ StepStats, _ float64) {
	if step == c.n {
		c.cancel()
	}
}

func TestConfigValidation(t *testing.T) {
	train, _ := smallProblem(t)
	for name, mut := range map[string]func(*Config){
		"sigma":              func(c *Config) { c.Sigma = 0 },
		"clip":               func(c *Config) { c.Clip = -1 },
		"clip below MinClip": func(c *Config) { c.Clip = MinClip / 2 },
		"epochs":             func(c *Config) { c.Epochs = 0 },
		"batch":              func(c *Config) { c.PhysicalBatch = 0 },
		"lr":                 func(c *Config) { c.Optimizer.LR = math.NaN() },
		"opt":                func(c *Config) { c.Optimizer.Name = "rmsprop" },
	} {
		cfg := smallConfig(train)
		mut(&cfg)
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: invalid config accepted", name)
		}
	}
}
