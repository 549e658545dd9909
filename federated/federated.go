package federated

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/internal/seedmix"
	"github.com/dpsgd/dpsgd/kernels"
	"github.com/dpsgd/dpsgd/privacy/personalized"
)

// Mode says where a client's noise goes.
type Mode string

const (
	// ModeGradient (the default; the appendix's Theorem 2): each of the I local steps adds
	// Gaussian noise to the client's summed clipped gradient, so one participation is I
	// Gaussian releases.
	ModeGradient Mode = "gradient"
	// ModeOutput (the appendix's Theorem 1 and 4): the I local steps are clipped but not noised;
	// the client releases its update once, with noise. See Federation for the sensitivity.
	ModeOutput Mode = "output"
)

// Calibration chooses which of personalized.Calibrate's two noise levels a run uses.
type Calibration string

const (
	// CalibrationGDP (the default) is the tight μ-GDP calibration (docs/accounting.md):
	// valid at every ε.
	CalibrationGDP Calibration = "gdp"
	// CalibrationSeed is the appendix's explicit classic-Gaussian calibration (end of the proof of
	// Theorem 4), proven only for εᵢ < 1 and one release per participation. In gradient mode
	// its σ is multiplied by √I, the √E of the appendix's Theorem 2, so that Rᵢ·I releases get
	// the same total as Rᵢ releases of the appendix's σ. The report gives the ε actually spent,
	// by exact GDP accounting, whatever the calibration.
	CalibrationSeed Calibration = "seed"
)

// Config is one federated run's configuration.
type Config struct {
	// Model configures the clients' local training (engine.NewLearner): Arch, Dtype,
	// PhysicalBatch (0: the local batch), Clip C, Seed (parameter initialization),
	// Optimizer (the local optimizer, reset at every participation; Optimizer.LR is the local
	// learning rate γ; Schedule is not used), EvalBatch. Model.NonPrivate runs the same
	// rounds without clipping, noise, budgets or retirement: the baseline.
	Model engine.Config
	// Rounds is R ≥ 1.
	Rounds int
	// Draws is K, the number of client draws per round: 1 ≤ K ≤ N.
	Draws int
	// LocalSteps is I ≥ 1, the local steps of one participation.
	LocalSteps int
	// LocalBatch is the number of a client's examples in one local step, drawn uniformly
	// without replacement from its examples (at most all of them); 0 means all of them.
	LocalBatch int
	// Mode is ModeGradient (default when empty) or ModeOutput.
	Mode Mode
	// Calibration is CalibrationGDP (default when empty) or CalibrationSeed.
	Calibration Calibration
	// UniformNoise gives every client the noise multiplier of the strictest budget: each
	// client is calibrated to the smallest εᵢ of the federation (with its own δ and qᵢ) and
	// the largest of these multipliers is used by all. It is the comparison point of
	// personalized noise: the same guarantees, more noise for the clients that asked for less
	// privacy.
	UniformNoise bool
	// Sampling is how draws select clients; empty means SamplingCategorical when the rates
	// sum to 1 (within ShareTolerance) and SamplingBernoulli otherwise.
	Sampling Sampling
	// LogisticK is Lemma 1's logistic constant k; 0 means personalized.DefaultK.
	LogisticK float64
	// Workers is the number of clients trained at once; 0 means GOMAXPROCS (at most K).
	Workers int
	// EvalEvery evaluates the global model on the test set every EvalEvery rounds (0: only
	// after the last round).
	EvalEvery int
	// GammaL is γ·L in eq. 11's utility cost; 0 means the local learning rate γ (L = 1).
	GammaL float64
}

// ClientPlan is one client's resolved parameters and noise, fixed before the first round.
type ClientPlan struct {
	ID          string  `json:"id"`
	Examples    int     `json:"examples"`    // mᵢ, the client's training examples
	LocalBatch  int     `json:"local_batch"` // examples per local step
	Share       float64 `json:"share"`       // pᵢ
	SampleRate  float64 `json:"sample_rate"` // qᵢ
	Epsilon     float64 `json:"epsilon"`     // εᵢ requested
	Delta       float64 `json:"delta"`       // δᵢ = δ'ᵢ + δ‴ᵢ − δ'ᵢδ‴ᵢ
	DeltaPrime  float64 `json:"delta_prime"`
	DeltaTail   float64 `json:"delta_tail"`
	Sensitivity float64 `json:"sensitivity_factor"` // sᵢ as used (output mode with I > 1 includes the local batch, see Federation)
	// RoundsBound is Lemma 1's Rᵢ (Used: the larger of the logistic approximation and the
	// exact binomial quantile); the client is retired once it has taken part Rᵢ times.
	RoundsBound         int     `json:"rounds_bound"`
	RoundsBoundLogistic float64 `json:"rounds_bound_logistic"`
	RoundsBoundExact    int     `json:"rounds_bound_exact"`
	// Multiplier is the noise of one Gaussian release in units of its sensitivity
	// S = 2·C·sᵢ/b (b the local batch): each release is (1/Multiplier)-GDP.
	Multiplier float64 `json:"noise_multiplier"`
	// Sigma is the absolute noise std per coordinate, Multiplier·S: on the client's averaged
	// clipped gradient (gradient mode) or on its averaged update (output mode).
	Sigma     float64 `json:"sigma"`
	SigmaSeed float64 `json:"sigma_seed"` // the appendix's calibration (absolute, same units)
	SigmaGDP  float64 `json:"sigma_gdp"`  // the tight calibration (absolute, same units)
	SeedValid bool    `json:"seed_valid"` // personalized.Calibration.SeedValid
	// EpsilonBound is the ε at δ'ᵢ after Rᵢ participations at this noise (exact GDP):
	// at most εᵢ, smaller under UniformNoise for clients with a larger budget.
	EpsilonBound float64 `json:"epsilon_bound"`
	// StepSigma is the engine's noise multiplier of one local step (gradient mode): std
	// StepSigma·C on the summed clipped gradient.
	StepSigma float64 `json:"step_sigma"`
}

// ClientReport is a client's plan and what happened to it.
type ClientReport struct {
	ClientPlan
	Draws      int  `json:"draws"`      // times drawn, retired or not: Binomial(T, qᵢ)
	Selections int  `json:"selections"` // rounds taken part in (noisy releases of its data)
	Retired    bool `json:"retired"`    // reached Rᵢ: took no further part
	// RetiredRound is the round after which the client was retired (0: never).
	RetiredRound int `json:"retired_round,omitempty"`
	// SkippedDraws counts draws that fell on the client after it was retired.
	SkippedDraws int `json:"skipped_draws"`
	// EpsilonSpent is the ε at δ'ᵢ spent after Selections participations (exact GDP
	// accounting given the realized, data-independent selections); nil for a non-private run.
	EpsilonSpent *float64 `json:"epsilon_spent"`
}

// RoundStats is what the loop reports after each round.
type RoundStats struct {
	Round        int     `json:"round"` // 1-based
	Rounds       int     `json:"rounds"`
	Participants int     `json:"participants"`  // clients that trained this round
	SkippedDraws int     `json:"skipped_draws"` // draws that fell on retired clients
	Retired      int     `json:"retired"`       // clients retired so far
	TrainLoss    float64 `json:"train_loss"`    // mean loss over the local steps' examples (0 without participants)
	// TestAccuracy is the global model's accuracy, nil when not evaluated this round.
	TestAccuracy *float64 `json:"test_accuracy,omitempty"`
	Seconds      float64  `json:"seconds"`
}

// MarshalJSON writes a non-finite training loss (a diverging model's) as null: JSON has no
// NaN or Inf.
func (r RoundStats) MarshalJSON() ([]byte, error) {
	type plain RoundStats
	out := struct {
		plain
		TrainLoss *float64 `json:"train_loss"`
	}{plain: plain(r)}
	if !math.IsNaN(r.TrainLoss) && !math.IsInf(r.TrainLoss, 0) {
		out.TrainLoss = &r.TrainLoss
	}
	return json.Marshal(out)
}

// Report is the result of a run.
type Report struct {
	Clients      []ClientReport `json:"clients"`
	TestAccuracy float64        `json:"test_accuracy"`
	Rounds       int            `json:"rounds"` // rounds completed
	RoundsPlan   int            `json:"rounds_planned"`
	DrawsPer     int            `json:"draws_per_round"` // K
	LocalSteps   int            `json:"local_steps"`
	Mode         Mode           `json:"mode"`
	Calibration  Calibration    `json:"calibration"`
	Sampling     Sampling       `json:"sampling"`
	UniformNoise bool           `json:"uniform_noise"`
	NonPrivate   bool           `json:"non_private"`
	// UtilityCost is eq. 11's noise term (γ·L·N·S²/K)·Σₙ θₙ·pₙ²·σₙ² at the σₙ used (σₙ the
	// noise multipliers, S per client), with γ·L = GammaL; nil for a non-private run.
	UtilityCost  *float64     `json:"utility_cost"`
	GammaL       float64      `json:"gamma_l"`
	Retired      int          `json:"retired"`
	SkippedDraws int          `json:"skipped_draws"`
	Seconds      float64      `json:"seconds"`
	Interrupted  bool         `json:"interrupted"`
	History      []RoundStats `json:"history"`
}

// Federation is a federated DP training run (the personalized-DP FL appendix;
// docs/federated.md): N clients holding parts of one training set, R rounds of K draws, each
// selected client training I local steps from the global model with its own noise, the server
// aggregating by eq. 15.
//
// Privacy unit and adjacency: one training example of client i, replaced by another (the
// appendix's 2C/m sensitivity), with client i's part size public. The guarantee is "towards a
// third party": it covers everything the clients release. In gradient mode each local step
// releases the clipped sum of b = LocalBatch examples plus N(0, (Mᵢ·2C·sᵢ)²) per coordinate;
// the sum's replace-one sensitivity is 2C whatever examples the batch holds, so each step is
// (1/Mᵢ)-GDP without any amplification by sampling, and Rᵢ participations of I steps are
// μ-GDP with μ = √(Rᵢ·I)/Mᵢ (personalized.Calibrate). In output mode the client runs its I
// steps with clipping and no noise, forms its averaged update u = −(y_I − y_0)/(γ·I),
// projects it onto the ball of radius C (so ‖u‖ ≤ C, whatever the optimizer), and releases
// u + N(0, σᵢ²); its sensitivity is 2C/b for I = 1 (one clipped mean from a public start)
// but only the trivial 2C for I > 1 (the local trajectories of neighbouring datasets
// diverge), so for I > 1 the sensitivity factor is multiplied by b: output perturbation is
// meant for I = 1.
//
// Retirement: a client that has taken part Rᵢ times is retired and its later draws are
// skipped, so no client ever exceeds the Rᵢ its noise was calibrated for and the guarantee
// (εᵢ, δ'ᵢ) holds with probability one (δ‴ᵢ is the probability that retirement happens at
// all, by Lemma 1). A skipped draw contributes nothing to eq. 15, so once clients retire the
// aggregate is no longer unbiased: its expectation lacks the retired clients' terms pₙ·Δₙ
// (the model drifts toward the active clients' data).
type Federation struct {
	cfg      Config
	train    *datasets.Dataset
	test     *datasets.Dataset
	parts    [][]int
	plans    []ClientPlan
	shares   []float64
	rates    []float64
	smp      *sampler
	learners []*engine.Learner
	global   []float64
	utility  *float64
	gammaL   float64
	// run state
	draws, selections, retiredAt, skipped []int
	history                               []RoundStats
	round                                 int
}

// Stream constants for the random numbers of a run.
const (
	batchStream  = 0x3c6e_f372_fe94_f82b
	noiseStream  = 0xa54f_f53a_5f1d_36f1
	outputStream = 0x510e_527f_ade6_82d1
)

// New resolves and checks everything a run needs: the clients (specs from a clients file or
// flags) with their parts of train (parts[i] are client i's example indices), the defaults
// (sample rates 1/N, shares proportional to the parts' sizes), the sampling, each client's
// calibration, and the local learners. The returned Federation holds compiled graphs: Close
// it.
func New(cfg Config, train, test *datasets.Dataset, clients []ClientSpec, parts [][]int) (*Federation, error) {
	if train == nil {
		return nil, errors.New("federated: nil training set")
	}
	n := len(clients)
	if n == 0 {
		return nil, errors.New("federated: no clients: want at least one")
	}
	if len(parts) != n {
		return nil, fmt.Errorf("federated: %d clients but %d data parts", n, len(parts))
	}
	if cfg.Rounds < 1 {
		return nil, fmt.Errorf("federated: rounds = %d, want ≥ 1", cfg.Rounds)
	}
	if cfg.Draws < 1 || cfg.Draws > n {
		return nil, fmt.Errorf("federated: draws per round K = %d, want a value in [1, N = %d]", cfg.Draws, n)
	}
	if cfg.Rounds > personalized.MaxDraws/cfg.Draws {
		return nil, fmt.Errorf("federated: rounds × K = %d × %d, want at most 2^40 draws", cfg.Rounds, cfg.Draws)
	}
	if cfg.LocalSteps < 1 {
		return nil, fmt.Errorf("federated: local steps I = %d, want ≥ 1", cfg.LocalSteps)
	}
	if cfg.LocalBatch < 0 {
		return nil, fmt.Errorf("federated: local batch = %d, want ≥ 0 (0: all local examples)", cfg.LocalBatch)
	}
	if cfg.EvalEvery < 0 {
		return nil, fmt.Errorf("federated: eval every = %d rounds, want ≥ 0 (0: after the last round)", cfg.EvalEvery)
	}
	if cfg.Workers < 0 {
		return nil, fmt.Errorf("federated: workers = %d, want ≥ 0 (0: one per CPU)", cfg.Workers)
	}
	switch cfg.Mode {
	case "":
		cfg.Mode = ModeGradient
	case ModeGradient, ModeOutput:
	default:
		return nil, fmt.Errorf("federated: mode %q: want gradient or output", cfg.Mode)
	}
	switch cfg.Calibration {
	case "":
		cfg.Calibration = CalibrationGDP
	case CalibrationGDP, CalibrationSeed:
	default:
		return nil, fmt.Errorf("federated: calibration %q: want gdp or seed", cfg.Calibration)
	}
	if err := cfg.Model.Optimizer.Validate(); err != nil {
		return nil, fmt.Errorf("federated: local optimizer: %w", err)
	}
	if !(cfg.LogisticK >= 0) || math.IsInf(cfg.LogisticK, 0) {
		return nil, fmt.Errorf("federated: logistic constant k = %v, want a finite value > 0 (0: %v)", cfg.LogisticK, personalized.DefaultK)
	}
	if !(cfg.GammaL >= 0) || math.IsInf(cfg.GammaL, 0) {
		return nil, fmt.Errorf("federated: γ·L = %v, want a finite value ≥ 0 (0: the learning rate)", cfg.GammaL)
	}
	if err := train.Validate(); err != nil {
		return nil, fmt.Errorf("federated: training set: %w", err)
	}
	if test != nil && (test.D != train.D || test.Classes != train.Classes) {
		return nil, fmt.Errorf("federated: test set has %d features and %d classes, training set %d and %d", test.D, test.Classes, train.D, train.Classes)
	}

	// Clients: specs, parts, shares and rates.
	f := &Federation{cfg: cfg, train: train, test: test, parts: parts}
	ids := map[string]int{}
	total := 0
	owner := make(map[int]int)
	for i, c := range clients {
		if c.ID == "" {
			return nil, fmt.Errorf("federated: client %d: empty id", i)
		}
		if j, dup := ids[c.ID]; dup {
			return nil, fmt.Errorf("federated: client id %q given twice (clients %d and %d): want unique ids", c.ID, j, i)
		}
		ids[c.ID] = i
		if len(parts[i]) == 0 {
			return nil, fmt.Errorf("federated: client %q has no training examples: want at least one", c.ID)
		}
		for _, x := range parts[i] {
			if x < 0 || x >= train.N {
				return nil, fmt.Errorf("federated: client %q: example %d out of range [0, %d)", c.ID, x, train.N)
			}
			if j, taken := owner[x]; taken && j != i {
				return nil, fmt.Errorf("federated: example %d belongs to clients %q and %q: parts must be disjoint", x, clients[j].ID, c.ID)
			}
			owner[x] = i
		}
		total += len(parts[i])
		if !cfg.Model.NonPrivate {
			if !(c.Epsilon > 0) || math.IsInf(c.Epsilon, 0) {
				return nil, fmt.Errorf("federated: client %q: epsilon %v, want a finite value > 0", c.ID, c.Epsilon)
			}
			if !(c.DeltaPrime > 0 && c.DeltaPrime < 1) || !(c.DeltaTail > 0 && c.DeltaTail < 1) {
				return nil, fmt.Errorf("federated: client %q: delta_prime %v and delta_tail %v, want both in (0, 1)", c.ID, c.DeltaPrime, c.DeltaTail)
			}
		}
		if c.Sensitivity != 0 && !(c.Sensitivity >= 1 && !math.IsInf(c.Sensitivity, 0)) {
			return nil, fmt.Errorf("federated: client %q: sensitivity factor %v, want a finite value ≥ 1 (0: 1)", c.ID, c.Sensitivity)
		}
	}
	f.shares = make([]float64, n)
	f.rates = make([]float64, n)
	givenShares, givenRates := clients[0].Share != 0, clients[0].SampleRate != 0
	var shareSum, rateSum float64
	for i, c := range clients {
		if (c.Share != 0) != givenShares {
			return nil, fmt.Errorf("federated: client %q: share given for some clients only: give it for all or none", c.ID)
		}
		if (c.SampleRate != 0) != givenRates {
			return nil, fmt.Errorf("federated: client %q: sample rate given for some clients only: give it for all or none", c.ID)
		}
		if givenShares {
			if !(c.Share > 0 && c.Share <= 1) {
				return nil, fmt.Errorf("federated: client %q: share %v, want a value in (0, 1]", c.ID, c.Share)
			}
			f.shares[i] = c.Share
		} else {
			f.shares[i] = float64(len(parts[i])) / float64(total)
		}
		if givenRates {
			if !(c.SampleRate > 0 && c.SampleRate <= 1) {
				return nil, fmt.Errorf("federated: client %q: sample rate %v, want a value in (0, 1]", c.ID, c.SampleRate)
			}
			f.rates[i] = c.SampleRate
		} else {
			f.rates[i] = 1 / float64(n)
		}
		shareSum += f.shares[i]
		rateSum += f.rates[i]
	}
	if math.Abs(shareSum-1) > ShareTolerance {
		return nil, fmt.Errorf("federated: the data shares sum to %.9g, want 1 (within %g)", shareSum, ShareTolerance)
	}
	for i := range f.shares {
		f.shares[i] /= shareSum // exactly 1 up to rounding
	}
	if cfg.Sampling == "" {
		cfg.Sampling = SamplingBernoulli
		if math.Abs(rateSum-1) <= ShareTolerance {
			cfg.Sampling = SamplingCategorical
		}
	}
	if cfg.Sampling == SamplingCategorical && math.Abs(rateSum-1) <= ShareTolerance {
		for i := range f.rates {
			f.rates[i] /= rateSum // the probabilities the draws actually use
		}
	}
	smp, err := newSampler(cfg.Sampling, f.rates, cfg.Draws, cfg.Model.Seed)
	if err != nil {
		return nil, err
	}
	f.smp = smp

	// Local learners: one per worker, each on one core.
	lr := cfg.Model.Optimizer.LR
	if cfg.GammaL == 0 {
		f.gammaL = lr
	} else {
		f.gammaL = cfg.GammaL
	}
	maxBatch := 0
	for _, p := range parts {
		maxBatch = max(maxBatch, localBatch(cfg.LocalBatch, len(p)))
	}
	mc := cfg.Model
	mc.Replicas = 1
	if mc.PhysicalBatch == 0 {
		mc.PhysicalBatch = maxBatch
	}
	if mc.Optimizer.Schedule == "cosine" {
		return nil, errors.New("federated: optimizer schedule cosine: want constant (the local learning rate is fixed)")
	}
	if cfg.Mode == ModeOutput && !mc.NonPrivate && mc.Optimizer.Name == engine.OptimizerAdam {
		// Adam's first step is not linear in the gradient; the 2C/b sensitivity of I = 1 needs
		// an update that is. (The projection onto the C-ball keeps I > 1 valid for any
		// optimizer, but one rule is simpler to state.)
		return nil, errors.New("federated: output mode with optimizer adam: want sgd or momentum (their first step is linear in the clipped gradient)")
	}
	workers := cfg.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, cfg.Draws)
	cfg.Workers = workers
	f.cfg = cfg
	for range workers {
		l, err := engine.NewLearner(mc)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("federated: %w", err)
		}
		f.learners = append(f.learners, l)
	}
	if train.D != mc.Arch.InputSize() || train.Classes != mc.Arch.Classes {
		f.Close()
		return nil, fmt.Errorf("federated: training set has %d features and %d classes, model wants %d and %d", train.D, train.Classes, mc.Arch.InputSize(), mc.Arch.Classes)
	}
	global, err := f.learners[0].Params(nil)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("federated: %w", err)
	}
	f.global = global

	if err := f.calibrate(clients); err != nil {
		f.Close()
		return nil, err
	}
	f.draws = make([]int, n)
	f.selections = make([]int, n)
	f.retiredAt = make([]int, n)
	f.skipped = make([]int, n)
	return f, nil
}

// localBatch is the examples per local step of a client with m examples.
func localBatch(b, m int) int {
	if b == 0 || b > m {
		return m
	}
	return b
}

// calibrate fills f.plans: Lemma 1's bound and the noise of every client (through
// personalized.Calibrate), and eq. 11's utility cost.
func (f *Federation) calibrate(clients []ClientSpec) error {
	cfg := f.cfg
	n := len(clients)
	f.plans = make([]ClientPlan, n)
	pert := personalized.Gradient
	if cfg.Mode == ModeOutput {
		pert = personalized.Output
	}
	type calib struct {
		cal  personalized.Calibration
		pc   personalized.Client
		set  personalized.Setting
		mult float64
	}
	cals := make([]calib, n)
	minEps := math.Inf(1)
	for _, c := range clients {
		minEps = math.Min(minEps, c.Epsilon)
	}
	uniformMult := 0.0
	for i, c := range clients {
		b := localBatch(cfg.LocalBatch, len(f.parts[i]))
		s := c.Sensitivity
		if s == 0 {
			s = 1
		}
		if cfg.Mode == ModeOutput && cfg.LocalSteps > 1 {
			s *= float64(b) // trivial sensitivity 2C of a C-bounded update (see Federation)
		}
		p := ClientPlan{
			ID: c.ID, Examples: len(f.parts[i]), LocalBatch: b, Share: f.shares[i], SampleRate: f.rates[i],
			Epsilon: c.Epsilon, Delta: c.Delta, DeltaPrime: c.DeltaPrime, DeltaTail: c.DeltaTail, Sensitivity: s,
		}
		if p.Delta == 0 && c.DeltaPrime > 0 && c.DeltaTail > 0 {
			p.Delta = DeltaTotal(c.DeltaPrime, c.DeltaTail)
		}
		f.plans[i] = p
		if cfg.Model.NonPrivate {
			continue
		}
		set := personalized.Setting{
			Draws: cfg.Draws * cfg.Rounds, Clip: cfg.Model.Clip, LocalExamples: b,
			LocalSteps: cfg.LocalSteps, K: cfg.LogisticK, Perturbation: pert,
		}
		pc := personalized.Client{Epsilon: c.Epsilon, DeltaPrime: c.DeltaPrime, DeltaTail: c.DeltaTail, SampleRate: f.rates[i], Sensitivity: s}
		cal, err := personalized.Calibrate(pc, set)
		if err != nil {
			return fmt.Errorf("federated: client %q: %w", c.ID, err)
		}
		cals[i] = calib{cal: cal, pc: pc, set: set, mult: f.multiplier(cal)}
		if cfg.UniformNoise {
			strict := pc
			strict.Epsilon = minEps
			sc, err := personalized.Calibrate(strict, set)
			if err != nil {
				return fmt.Errorf("federated: client %q at the strictest ε = %v: %w", c.ID, minEps, err)
			}
			uniformMult = math.Max(uniformMult, f.multiplier(sc))
		}
	}
	if cfg.Model.NonPrivate {
		return nil
	}
	sigmas := make([]float64, n)
	ucClients := make([]personalized.Client, n)
	for i := range clients {
		c := cals[i]
		m := c.mult
		if cfg.UniformNoise {
			m = uniformMult
		}
		p := &f.plans[i]
		p.RoundsBound = c.cal.Rounds.Used
		p.RoundsBoundLogistic = c.cal.Rounds.Logistic
		p.RoundsBoundExact = c.cal.Rounds.Exact
		p.Multiplier = m
		p.Sigma = m * c.cal.Sensitivity
		p.SigmaSeed = c.cal.SigmaSeed
		p.SigmaGDP = c.cal.SigmaGDP
		p.SeedValid = c.cal.SeedValid
		if cfg.Mode == ModeGradient {
			p.StepSigma = m * 2 * p.Sensitivity
		}
		eps, err := personalized.Spent(p.RoundsBound, c.set.Releases(), m, p.DeltaPrime)
		if err != nil {
			return fmt.Errorf("federated: client %q: %w", p.ID, err)
		}
		p.EpsilonBound = eps
		sigmas[i] = m
		// Eq. 11 with a per-client S = 2·C·sᵢ/bᵢ: one LocalExamples of 1 and sᵢ/bᵢ as the factor.
		uc := c.pc
		uc.Sensitivity = p.Sensitivity / float64(p.LocalBatch)
		ucClients[i] = uc
	}
	cost, err := personalized.UtilityCost(f.gammaL, cfg.Draws, ucClients, f.shares, sigmas,
		personalized.Setting{Draws: cfg.Draws * cfg.Rounds, Clip: cfg.Model.Clip, LocalExamples: 1, LocalSteps: cfg.LocalSteps, K: cfg.LogisticK})
	if err != nil {
		return fmt.Errorf("federated: utility cost: %w", err)
	}
	f.utility = &cost
	return nil
}

// multiplier is the per-release noise multiplier of a calibration under f's choice.
func (f *Federation) multiplier(cal personalized.Calibration) float64 {
	if f.cfg.Calibration == CalibrationSeed {
		m := cal.SigmaSeed / cal.Sensitivity
		if f.cfg.Mode == ModeGradient {
			m *= math.Sqrt(float64(f.cfg.LocalSteps))
		}
		return m
	}
	return cal.Multiplier
}

// Plans returns the clients' resolved parameters and noise.
func (f *Federation) Plans() []ClientPlan { return append([]ClientPlan(nil), f.plans...) }

// Config returns the configuration with its defaults resolved.
func (f *Federation) Config() Config { return f.cfg }

// NumParams is the model's parameter count.
func (f *Federation) NumParams() int { return len(f.global) }

// Close releases the learners' graphs.
func (f *Federation) Close() {
	for _, l := range f.learners {
		l.Close()
	}
	f.learners = nil
}

// Run trains the remaining rounds, calling onRound (if not nil) after each, and returns the
// report. Cancelling ctx stops between rounds: the report then covers the rounds completed and
// the error wraps engine.ErrInterrupted and ctx's error. Run reproduces its results exactly for
// one Config (Model.Seed included), whatever Workers and the scheduling.
func (f *Federation) Run(ctx context.Context, onRound func(RoundStats)) (*Report, error) {
	if len(f.learners) == 0 {
		return nil, errors.New("federated: Run after Close")
	}
	start := time.Now()
	counts := make([]int, len(f.plans))
	for f.round < f.cfg.Rounds {
		if err := ctx.Err(); err != nil {
			rep := f.report(start)
			rep.Interrupted = true
			return rep, fmt.Errorf("%w after round %d of %d: %w", engine.ErrInterrupted, f.round, f.cfg.Rounds, err)
		}
		st, err := f.runRound(counts)
		if err != nil {
			return f.report(start), fmt.Errorf("federated: round %d: %w", f.round+1, err)
		}
		f.round++
		if f.round == f.cfg.Rounds || (f.cfg.EvalEvery > 0 && f.round%f.cfg.EvalEvery == 0) {
			acc, err := f.evaluate()
			if err != nil {
				return f.report(start), fmt.Errorf("federated: evaluating after round %d: %w", f.round, err)
			}
			st.TestAccuracy = &acc
		}
		st.Seconds = time.Since(start).Seconds()
		f.history = append(f.history, st)
		if onRound != nil {
			onRound(st)
		}
	}
	return f.report(start), nil
}

// evaluate sets the first learner to the global model and measures the test accuracy.
func (f *Federation) evaluate() (float64, error) {
	if f.test == nil || f.test.N == 0 {
		return 0, nil
	}
	if err := f.learners[0].SetParams(f.global); err != nil {
		return 0, err
	}
	return f.learners[0].Evaluate(f.test)
}

// job is one participation: the client, its (noisy) update and its local loss.
type job struct {
	client int
	update []float64
	loss   float64
	seen   int
	err    error
}

// runRound draws the round's clients, trains the participants (in parallel, one learner per
// worker), checks each against its Rᵢ, and aggregates by eq. 15.
func (f *Federation) runRound(counts []int) (RoundStats, error) {
	t := f.round
	f.smp.counts(t, counts)
	st := RoundStats{Round: t + 1, Rounds: f.cfg.Rounds}
	var jobs []*job
	for n, c := range counts {
		if c == 0 {
			continue
		}
		f.draws[n] += c
		if f.retiredAt[n] > 0 {
			f.skipped[n] += c
			st.SkippedDraws += c
			continue
		}
		jobs = append(jobs, &job{client: n})
	}
	st.Participants = len(jobs)
	var next int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, l := range f.learners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var scratch []int
			for {
				mu.Lock()
				if next == len(jobs) {
					mu.Unlock()
					return
				}
				j := jobs[next]
				next++
				mu.Unlock()
				scratch = f.participate(l, j, t, scratch)
			}
		}()
	}
	wg.Wait()
	updates := make([][]float64, len(counts))
	seen := 0
	for _, j := range jobs {
		if j.err != nil {
			return st, fmt.Errorf("client %q: %w", f.plans[j.client].ID, j.err)
		}
		updates[j.client] = j.update
		st.TrainLoss += j.loss
		seen += j.seen
	}
	if seen > 0 {
		st.TrainLoss /= float64(seen)
	}
	active := make([]int, len(counts))
	for _, j := range jobs {
		active[j.client] = counts[j.client]
	}
	delta := make([]float64, len(f.global))
	Aggregate(delta, updates, active, f.shares, f.rates, f.cfg.Draws)
	for i, d := range delta {
		v := f.global[i] + d
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return st, fmt.Errorf("the global model diverged (parameter %d = %v): lower the learning rate", i, v)
		}
		f.global[i] = v
	}
	for _, j := range jobs {
		n := j.client
		f.selections[n]++
		if !f.cfg.Model.NonPrivate && f.selections[n] >= f.plans[n].RoundsBound {
			f.retiredAt[n] = t + 1
		}
	}
	for _, r := range f.retiredAt {
		if r > 0 {
			st.Retired++
		}
	}
	return st, nil
}

// participate runs client j.client's local training from the global model in round t and
// stores its (noisy) update y_I − y_0 in j.update.
func (f *Federation) participate(l *engine.Learner, j *job, t int, scratch []int) []int {
	n := j.client
	p := f.plans[n]
	part := f.parts[n]
	if err := l.SetParams(f.global); err != nil {
		j.err = err
		return scratch
	}
	if err := l.ResetOptimizer(); err != nil {
		j.err = err
		return scratch
	}
	y0, err := l.Params(nil)
	if err != nil {
		j.err = err
		return scratch
	}
	lr := f.cfg.Model.Optimizer.LR
	rng := rand.New(rand.NewPCG(seedmix.Mix(f.cfg.Model.Seed^batchStream, uint64(n)), uint64(t)))
	noiseSeed := seedmix.Mix(f.cfg.Model.Seed^noiseStream, uint64(n))
	sigma := 0.0
	if f.cfg.Mode == ModeGradient && !f.cfg.Model.NonPrivate {
		sigma = p.StepSigma
	}
	b := p.LocalBatch
	scratch = append(scratch[:0], part...)
	for s := range f.cfg.LocalSteps {
		idx := scratch
		if b < len(part) {
			for k := range b { // partial Fisher–Yates: a uniform b-subset
				r := k + rng.IntN(len(scratch)-k)
				scratch[k], scratch[r] = scratch[r], scratch[k]
			}
			idx = scratch[:b]
		}
		key := kernels.NoiseKey{Seed: noiseSeed, Step: uint64(t)*uint64(f.cfg.LocalSteps) + uint64(s)}
		st, err := l.Step(f.train, idx, sigma, key, lr, float64(b))
		if err != nil {
			j.err = err
			return scratch
		}
		j.loss += st.Loss
		j.seen += st.BatchSize
	}
	y, err := l.Params(nil)
	if err != nil {
		j.err = err
		return scratch
	}
	for i := range y {
		y[i] -= y0[i]
	}
	if f.cfg.Mode == ModeOutput && !f.cfg.Model.NonPrivate {
		// u = −Δ/(γ·I), projected onto the C-ball, plus N(0, σ²); then back to Δ.
		scale := lr * float64(f.cfg.LocalSteps)
		var norm2 float64
		for _, v := range y {
			norm2 += v * v
		}
		c := f.cfg.Model.Clip * scale // ‖u‖ ≤ C ⇔ ‖Δ‖ ≤ γ·I·C
		if norm := math.Sqrt(norm2); norm > c {
			for i := range y {
				y[i] *= c / norm
			}
		}
		kernels.AddGaussian(y, p.Sigma*scale, kernels.NoiseKey{Seed: seedmix.Mix(f.cfg.Model.Seed^outputStream, uint64(n)), Step: uint64(t)})
	}
	j.update = y
	return scratch
}

// report assembles the Report of the rounds done so far.
func (f *Federation) report(start time.Time) *Report {
	rep := &Report{
		Rounds: f.round, RoundsPlan: f.cfg.Rounds, DrawsPer: f.cfg.Draws, LocalSteps: f.cfg.LocalSteps,
		Mode: f.cfg.Mode, Calibration: f.cfg.Calibration, Sampling: f.cfg.Sampling, UniformNoise: f.cfg.UniformNoise,
		NonPrivate: f.cfg.Model.NonPrivate, UtilityCost: f.utility, GammaL: f.gammaL,
		Seconds: time.Since(start).Seconds(), History: append([]RoundStats(nil), f.history...),
	}
	if f.cfg.Model.NonPrivate {
		rep.Calibration = ""
	}
	for i := len(f.history) - 1; i >= 0; i-- {
		if a := f.history[i].TestAccuracy; a != nil {
			rep.TestAccuracy = *a
			break
		}
	}
	releases := f.cfg.LocalSteps
	if f.cfg.Mode == ModeOutput {
		releases = 1
	}
	for i, p := range f.plans {
		cr := ClientReport{
			ClientPlan: p, Draws: f.draws[i], Selections: f.selections[i], Retired: f.retiredAt[i] > 0,
			RetiredRound: f.retiredAt[i], SkippedDraws: f.skipped[i],
		}
		if !f.cfg.Model.NonPrivate {
			eps, err := personalized.Spent(f.selections[i], releases, p.Multiplier, p.DeltaPrime)
			if err == nil && !math.IsNaN(eps) && !math.IsInf(eps, 0) {
				cr.EpsilonSpent = &eps
			}
		}
		if cr.Retired {
			rep.Retired++
		}
		rep.SkippedDraws += cr.SkippedDraws
		rep.Clients = append(rep.Clients, cr)
	}
	return rep
}
