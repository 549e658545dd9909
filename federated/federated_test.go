package federated

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd"
	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/personalized"
	"gorgonia.org/tensor"
)

func toyData(t testing.TB, train, features, classes int) (*datasets.Dataset, *datasets.Dataset) {
	t.Helper()
	cfg := datasets.DefaultSynthetic()
	cfg.Train, cfg.Test, cfg.Features, cfg.Classes = train, 500, features, classes
	tr, te, err := datasets.Synthetic(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr, te
}

func toyClients(n int, eps ...float64) []dpsgd.Client {
	cs := make([]dpsgd.Client, n)
	for i := range cs {
		dp, dt := dpsgd.SplitDelta(1e-5)
		cs[i] = dpsgd.Client{ID: fmt.Sprintf("c%d", i), Epsilon: eps[i%len(eps)], Delta: 1e-5, DeltaPrime: dp, DeltaTail: dt}
	}
	return cs
}

// toyCfg is a run's training configuration and its plan's run-wide fields (no field name is
// in both).
type toyCfg struct {
	Config
	dpsgd.FederatedPlan
}

func toyConfig(train *datasets.Dataset) toyCfg {
	return toyCfg{
		Config: Config{
			Model: engine.Config{
				Arch: nn.LogReg(train.Shape, train.Classes), Dtype: tensor.Float64,
				Optimizer: engine.OptimizerConfig{Name: "sgd", LR: 0.5},
			},
			EvalEvery: 10,
		},
		FederatedPlan: dpsgd.FederatedPlan{Rounds: 30, Draws: 3, LocalSteps: 3, LocalBatch: 20, Clip: 1, Seed: 3},
	}
}

// build resolves cfg's plan for the clients cs holding parts and prepares the run.
func build(cfg toyCfg, train, test *datasets.Dataset, cs []dpsgd.Client, parts [][]int) (*Federation, error) {
	plan := cfg.FederatedPlan
	plan.Clients = cs
	plan.Examples = make([]int, len(parts))
	for i, p := range parts {
		plan.Examples[i] = len(p)
	}
	priv, err := plan.Resolve()
	if err != nil {
		return nil, err
	}
	return New(cfg.Config, priv, train, test, parts)
}

func newToy(t testing.TB, cfg toyCfg, train, test *datasets.Dataset, cs []dpsgd.Client, part Partition) *Federation {
	t.Helper()
	parts, err := PartitionIndices(part, train.Y, len(cs), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	f, err := build(cfg, train, test, cs, parts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// TestRunLearnsAndReproduces: a private run reaches well above chance; the same seed gives the
// same model whatever the number of workers, another seed a different one.
func TestRunLearnsAndReproduces(t *testing.T) {
	train, test := toyData(t, 1500, 8, 3)
	cs := toyClients(10, 2, 8)
	var results []*Report
	var globals [][]float64
	for _, w := range []struct {
		workers int
		seed    uint64
	}{{1, 3}, {3, 3}, {2, 4}} {
		cfg := toyConfig(train)
		cfg.Workers, cfg.Seed = w.workers, w.seed
		f := newToy(t, cfg, train, test, cs, PartitionIID)
		rep, err := f.Run(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, rep)
		globals = append(globals, append([]float64(nil), f.global...))
	}
	for i := range globals[0] {
		if globals[0][i] != globals[1][i] {
			t.Fatalf("parameter %d: %v with 1 worker, %v with 3", i, globals[0][i], globals[1][i])
		}
	}
	same := true
	for i := range globals[0] {
		same = same && globals[0][i] == globals[2][i]
	}
	if same {
		t.Error("seeds 3 and 4 gave the same model")
	}
	rep := results[0]
	if rep.TestAccuracy < 0.6 {
		t.Errorf("test accuracy %.3f after %d rounds, want ≥ 0.6 (chance 0.33)", rep.TestAccuracy, rep.Rounds)
	}
	if len(rep.History) != 30 || rep.History[9].TestAccuracy == nil || rep.History[10].TestAccuracy != nil {
		t.Errorf("history: %d rounds; evaluated after rounds 10, 20, 30 only", len(rep.History))
	}
	draws := 0
	for _, c := range rep.Clients {
		draws += c.Draws
		if c.Selections > c.Draws || c.Selections > c.RoundsBound {
			t.Errorf("client %s: %d selections, %d draws, Rᵢ %d", c.ID, c.Selections, c.Draws, c.RoundsBound)
		}
	}
	if draws != 30*3 {
		t.Errorf("%d draws, want K·R = 90 (categorical sampling)", draws)
	}
	if rep.Sampling != dpsgd.SamplingCategorical {
		t.Errorf("sampling %q with rates 1/N, want categorical", rep.Sampling)
	}
}

// TestRetirement: with δ‴ = 0.9 the bound Rᵢ is below the expected count (Lemma 1's
// quantile at probability 0.1), so clients reach it and are retired (one draw per round, so a
// draw is a participation until then):
// nobody ever takes part more than Rᵢ times, every retired client took part exactly Rᵢ
// times, its later draws are skipped and counted, and the ε spent (exact GDP at the actual
// count) never exceeds the budget; at Rᵢ participations it is the budget itself (the noise
// was calibrated for Rᵢ).
func TestRetirement(t *testing.T) {
	train, test := toyData(t, 1000, 6, 3)
	cs := toyClients(4, 1, 3)
	for i := range cs {
		cs[i].DeltaPrime, cs[i].DeltaTail = 1e-6, 0.9
		cs[i].Delta = personalized.DeltaTotal(1e-6, 0.9)
		cs[i].SampleRate = []float64{0.4, 0.2, 0.2, 0.2}[i]
	}
	cfg := toyConfig(train)
	cfg.Rounds, cfg.Draws, cfg.EvalEvery = 60, 1, 0
	f := newToy(t, cfg, train, test, cs, PartitionIID)
	rep, err := f.Run(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Retired < 2 {
		t.Fatalf("%d clients retired, want most of the 4 (client 0: %d draws, Rᵢ %d)", rep.Retired, rep.Clients[0].Draws, rep.Clients[0].RoundsBound)
	}
	skipped := 0
	for _, c := range rep.Clients {
		if c.Selections > c.RoundsBound {
			t.Errorf("%s: %d selections > Rᵢ = %d", c.ID, c.Selections, c.RoundsBound)
		}
		if c.Retired != (c.Selections == c.RoundsBound) {
			t.Errorf("%s: retired %v with %d of %d selections", c.ID, c.Retired, c.Selections, c.RoundsBound)
		}
		if c.Retired && c.SkippedDraws == 0 && c.Draws > c.Selections {
			t.Errorf("%s: drawn %d times, took part %d, no skipped draw counted", c.ID, c.Draws, c.Selections)
		}
		if c.Draws < c.Selections+c.SkippedDraws {
			t.Errorf("%s: %d draws < %d selections + %d skipped", c.ID, c.Draws, c.Selections, c.SkippedDraws)
		}
		skipped += c.SkippedDraws
		if c.EpsilonSpent == nil || *c.EpsilonSpent > c.Epsilon*(1+1e-9) {
			t.Errorf("%s: spent %v of ε = %v", c.ID, c.EpsilonSpent, c.Epsilon)
		}
		if c.Retired && math.Abs(*c.EpsilonSpent-c.Epsilon) > 1e-6*c.Epsilon {
			t.Errorf("%s: retired at Rᵢ but spent %v, want ε = %v", c.ID, *c.EpsilonSpent, c.Epsilon)
		}
		// Independent check of the spent ε: δ(ε_spent) of μ = √(selections·I)/multiplier is δ'.
		if c.Selections > 0 {
			mu := math.Sqrt(float64(c.Selections*cfg.LocalSteps)) / c.Multiplier
			d, err := privacy.GaussianDelta(mu, *c.EpsilonSpent)
			if err != nil || math.Abs(d-c.DeltaPrime) > 1e-6*c.DeltaPrime {
				t.Errorf("%s: δ at the spent ε is %v, want δ' = %v (%v)", c.ID, d, c.DeltaPrime, err)
			}
		}
	}
	if skipped != rep.SkippedDraws || skipped == 0 {
		t.Errorf("skipped draws: clients %d, report %d", skipped, rep.SkippedDraws)
	}
}

// TestNoiseWiring: with one client, I = 1, plain SGD and a clip norm no gradient reaches, the
// private and the non-private round differ by the noise alone, which must have the planned
// standard deviation: γ·StepSigma·C/b per coordinate in gradient mode (noise on the clipped
// sum, divided by the batch) and γ·Sigma in output mode (noise on the averaged update).
func TestNoiseWiring(t *testing.T) {
	train, test := toyData(t, 400, 50, 4)
	for _, mode := range []dpsgd.Perturbation{dpsgd.GradientPerturbation, dpsgd.OutputPerturbation} {
		cs := toyClients(1, 3)
		cs[0].SampleRate = 1
		cfg := toyConfig(train)
		cfg.Clip = 1e6
		cfg.Model.Arch = nn.MLP(train.Shape, train.Classes, []int{40}, nn.Tanh)
		cfg.Draws, cfg.Rounds, cfg.LocalSteps, cfg.LocalBatch, cfg.Mode = 1, 5, 1, 64, mode
		priv := newToy(t, cfg, train, test, cs, PartitionIID)
		np := cfg
		np.NonPrivate = true
		base := newToy(t, np, train, test, cs, PartitionIID)
		g0 := append([]float64(nil), priv.global...)
		counts := make([]int, 1)
		if _, err := priv.runRound(counts); err != nil {
			t.Fatal(err)
		}
		if _, err := base.runRound(counts); err != nil {
			t.Fatal(err)
		}
		p := priv.plans[0]
		var ss float64
		for i := range g0 {
			d := priv.global[i] - base.global[i]
			ss += d * d
		}
		sd := math.Sqrt(ss / float64(len(g0)))
		want := cfg.Model.Optimizer.LR * p.Sigma
		if mode == dpsgd.GradientPerturbation {
			want = cfg.Model.Optimizer.LR * p.StepSigma * cfg.Clip / float64(p.LocalBatch)
			if math.Abs(p.StepSigma*cfg.Clip/float64(p.LocalBatch)-p.Sigma) > 1e-12*p.Sigma {
				t.Errorf("σ on the sum / b = %v, σ on the mean = %v", p.StepSigma*cfg.Clip/float64(p.LocalBatch), p.Sigma)
			}
		}
		if tol := 5 * want / math.Sqrt(2*float64(len(g0))); math.Abs(sd-want) > tol {
			t.Errorf("%s: noise std %v, want %v ± %v", mode, sd, want, tol)
		}
	}
}

// TestCalibrationPlans: personalized noise is smaller for larger budgets and meets each
// budget at Rᵢ; UniformNoise gives every client the strictest client's multiplier, so the
// larger budgets are under-spent; the appendix's calibration is more noise than the GDP one at
// these budgets; eq. 11's utility cost matches a direct evaluation of the formula.
func TestCalibrationPlans(t *testing.T) {
	train, test := toyData(t, 900, 6, 3)
	cs := toyClients(9, 1, 2, 4)
	cfg := toyConfig(train)
	pers := newToy(t, cfg, train, test, cs, PartitionIID).Plans()
	cfgU := cfg
	cfgU.UniformNoise = true
	uni := newToy(t, cfgU, train, test, cs, PartitionIID).Plans()
	cfgS := cfg
	cfgS.Calibration = dpsgd.CalibrationSeed
	seed := newToy(t, cfgS, train, test, cs, PartitionIID).Plans()
	for i, p := range pers {
		if math.Abs(p.EpsilonBound-p.Epsilon) > 1e-6*p.Epsilon {
			t.Errorf("%s: ε after Rᵢ participations %v, budget %v", p.ID, p.EpsilonBound, p.Epsilon)
		}
		if i >= 1 && p.Epsilon > pers[i-1].Epsilon && !(p.Multiplier < pers[i-1].Multiplier) {
			t.Errorf("%s: ε %v > %v but multiplier %v ≥ %v", p.ID, p.Epsilon, pers[i-1].Epsilon, p.Multiplier, pers[i-1].Multiplier)
		}
		u := uni[i]
		if u.Multiplier != uni[0].Multiplier || u.Multiplier < p.Multiplier {
			t.Errorf("%s: uniform multiplier %v (client 0: %v), personalized %v", p.ID, u.Multiplier, uni[0].Multiplier, p.Multiplier)
		}
		if p.Epsilon > 1 && !(u.EpsilonBound < p.Epsilon*0.9) {
			t.Errorf("%s: under uniform noise spends %v of ε = %v, want much less", p.ID, u.EpsilonBound, p.Epsilon)
		}
		if !(seed[i].Multiplier > p.Multiplier) {
			t.Errorf("%s: seed multiplier %v, GDP %v: want the appendix's larger", p.ID, seed[i].Multiplier, p.Multiplier)
		}
		if want := p.SigmaSeed / (2 * cfg.Clip / float64(p.LocalBatch)) * math.Sqrt(float64(cfg.LocalSteps)); math.Abs(seed[i].Multiplier-want) > 1e-12*want {
			t.Errorf("%s: seed multiplier %v, want σ_seed/S·√I = %v", p.ID, seed[i].Multiplier, want)
		}
	}
	// Eq. 11: (γ·L·N·S²/K)·Σ θₙ·pₙ²·σₙ², θₙ = K − 1 + 1/qₙ, S = 2C/b, γ·L = lr.
	f := newToy(t, cfg, train, test, cs, PartitionIID)
	var sum float64
	for _, p := range f.plans {
		s := 2 * cfg.Clip / float64(p.LocalBatch)
		theta := float64(cfg.Draws) - 1 + 1/p.SampleRate
		sum += theta * p.Share * p.Share * s * s * p.Multiplier * p.Multiplier
	}
	want := cfg.Model.Optimizer.LR * float64(len(cs)) / float64(cfg.Draws) * sum
	if f.utility == nil || math.Abs(*f.utility-want) > 1e-12*want {
		t.Errorf("utility cost %v, want %v", f.utility, want)
	}
}

func TestCancel(t *testing.T) {
	train, test := toyData(t, 600, 6, 3)
	cfg := toyConfig(train)
	f := newToy(t, cfg, train, test, toyClients(5, 1), PartitionLabel)
	ctx, cancel := context.WithCancel(context.Background())
	rep, err := f.Run(ctx, func(st RoundStats) {
		if st.Round == 2 {
			cancel()
		}
	})
	if !errors.Is(err, engine.ErrInterrupted) || !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v: want ErrInterrupted and context.Canceled", err)
	}
	if rep == nil || !rep.Interrupted || rep.Rounds != 2 || len(rep.History) != 2 {
		t.Fatalf("report %+v: want interrupted after 2 rounds", rep)
	}
}

func TestNewRejects(t *testing.T) {
	train, test := toyData(t, 300, 6, 3)
	parts, _ := PartitionIndices(PartitionIID, train.Y, 3, 0, 1)
	good := toyClients(3, 1)
	cases := map[string]func(c *toyCfg, cs []dpsgd.Client, parts [][]int) [][]int{
		"K > N":        func(c *toyCfg, _ []dpsgd.Client, p [][]int) [][]int { c.Draws = 4; return p },
		"K = 0":        func(c *toyCfg, _ []dpsgd.Client, p [][]int) [][]int { c.Draws = 0; return p },
		"rounds":       func(c *toyCfg, _ []dpsgd.Client, p [][]int) [][]int { c.Rounds = 0; return p },
		"local steps":  func(c *toyCfg, _ []dpsgd.Client, p [][]int) [][]int { c.LocalSteps = 0; return p },
		"mode":         func(c *toyCfg, _ []dpsgd.Client, p [][]int) [][]int { c.Mode = "input"; return p },
		"calibration":  func(c *toyCfg, _ []dpsgd.Client, p [][]int) [][]int { c.Calibration = "rdp"; return p },
		"duplicate id": func(_ *toyCfg, cs []dpsgd.Client, p [][]int) [][]int { cs[2].ID = cs[0].ID; return p },
		"epsilon":      func(_ *toyCfg, cs []dpsgd.Client, p [][]int) [][]int { cs[1].Epsilon = 0; return p },
		"delta":        func(_ *toyCfg, cs []dpsgd.Client, p [][]int) [][]int { cs[1].DeltaTail = 1; return p },
		"rate":         func(_ *toyCfg, cs []dpsgd.Client, p [][]int) [][]int { cs[0].SampleRate = 2; return p },
		"shares sum": func(_ *toyCfg, cs []dpsgd.Client, p [][]int) [][]int {
			cs[0].Share, cs[1].Share, cs[2].Share = 0.5, 0.5, 0.5
			return p
		},
		"share partial": func(_ *toyCfg, cs []dpsgd.Client, p [][]int) [][]int { cs[0].Share = 0.5; return p },
		"categorical": func(c *toyCfg, cs []dpsgd.Client, p [][]int) [][]int {
			c.Sampling = dpsgd.SamplingCategorical
			for i := range cs {
				cs[i].SampleRate = 0.5
			}
			return p
		},
		"empty part":   func(_ *toyCfg, _ []dpsgd.Client, p [][]int) [][]int { p[1] = nil; return p },
		"overlap":      func(_ *toyCfg, _ []dpsgd.Client, p [][]int) [][]int { p[1] = append(p[1], p[0][0]); return p },
		"out of range": func(_ *toyCfg, _ []dpsgd.Client, p [][]int) [][]int { p[1] = append(p[1], 10000); return p },
		"parts count":  func(_ *toyCfg, _ []dpsgd.Client, p [][]int) [][]int { return p[:2] },
		"adam output": func(c *toyCfg, _ []dpsgd.Client, p [][]int) [][]int {
			c.Mode, c.Model.Optimizer.Name = dpsgd.OutputPerturbation, "adam"
			return p
		},
		"arch": func(c *toyCfg, _ []dpsgd.Client, p [][]int) [][]int {
			c.Model.Arch = nn.LogReg([]int{7}, 3)
			return p
		},
	}
	for name, mutate := range cases {
		cfg := toyConfig(train)
		cs := append([]dpsgd.Client(nil), good...)
		ps := make([][]int, len(parts))
		for i := range parts {
			ps[i] = append([]int(nil), parts[i]...)
		}
		ps = mutate(&cfg, cs, ps)
		f, err := build(cfg, train, test, cs, ps)
		if err == nil {
			f.Close()
			t.Errorf("%s: accepted", name)
		} else if !strings.HasPrefix(err.Error(), "federated: ") && !errors.Is(err, dpsgd.ErrInvalid) {
			t.Errorf("%s: error %q is neither the package's nor the front door's", name, err)
		}
	}
}

// BenchmarkRound: one round of 10 clients × 10 local steps (every client takes part once:
// rates 1, one draw), MLP 784-64-10 in float32 on MNIST-shaped synthetic data, local batch 64,
// the DP round (gradient perturbation) against the same round non-private, in one run.
// `go test -run '^$' -bench Round ./federated` reports both; the target is a
// ratio of at most 1.2.
func BenchmarkRound(b *testing.B) {
	cfg := datasets.DefaultSynthetic()
	cfg.Train, cfg.Test, cfg.Features, cfg.Classes = 6000, 10, 784, 10
	train, test, err := datasets.Synthetic(cfg)
	if err != nil {
		b.Fatal(err)
	}
	cs := toyClients(10, 1, 2, 4)
	for i := range cs {
		cs[i].SampleRate = 1
	}
	parts, err := PartitionIndices(PartitionIID, train.Y, len(cs), 0, 1)
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []struct {
		name       string
		nonPrivate bool
	}{{"dp", false}, {"nonprivate", true}} {
		b.Run(mode.name, func(b *testing.B) {
			fc := toyCfg{
				Config: Config{Model: engine.Config{
					Arch: nn.MLP(train.Shape, train.Classes, []int{64}, nn.Tanh), Dtype: tensor.Float32,
					Optimizer: engine.OptimizerConfig{Name: "sgd", LR: 0.1},
				}},
				FederatedPlan: dpsgd.FederatedPlan{Rounds: 1 << 20, Draws: 1, LocalSteps: 10, LocalBatch: 64, Clip: 1, Seed: 1, NonPrivate: mode.nonPrivate},
			}
			f, err := build(fc, train, test, cs, parts)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			counts := make([]int, len(cs))
			for b.Loop() {
				st, err := f.runRound(counts)
				if err != nil {
					b.Fatal(err)
				}
				if st.Participants != 10 {
					b.Fatalf("%d participants, want 10", st.Participants)
				}
				f.round++
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/round")
		})
	}
}

// TestTrainLossNotReleased: the clients' training loss, computed from their data without
// noise, is absent (null in JSON) from every round of a private run, present with
// PrivateStats and in a non-private run.
func TestTrainLossNotReleased(t *testing.T) {
	train, test := toyData(t, 600, 6, 3)
	for _, c := range []struct {
		name                     string
		nonPrivate, privateStats bool
		want                     bool
	}{{"private", false, false, false}, {"private stats", false, true, true}, {"non-private", true, false, true}} {
		cfg := toyConfig(train)
		cfg.Rounds, cfg.EvalEvery = 4, 2
		cfg.NonPrivate, cfg.PrivateStats = c.nonPrivate, c.privateStats
		f := newToy(t, cfg, train, test, toyClients(5, 1, 2), PartitionIID)
		rep, err := f.Run(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			History []map[string]any `json:"history"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		for i, h := range m.History {
			v, ok := h["train_loss"]
			if !ok {
				t.Fatalf("%s: round %d: key train_loss missing", c.name, i+1)
			}
			if got := v != nil; got != (c.want && rep.History[i].Participants > 0) {
				t.Errorf("%s: round %d: train_loss %v", c.name, i+1, v)
			}
			if v != nil && !(v.(float64) > 0) {
				t.Errorf("%s: round %d: train_loss %v, want a positive mean loss", c.name, i+1, v)
			}
		}
	}
}
