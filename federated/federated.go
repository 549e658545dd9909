package federated

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/dpsgd/dpsgd"
	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/internal/seedmix"
	"github.com/dpsgd/dpsgd/kernels"
	"github.com/dpsgd/dpsgd/privacy/personalized"
)

// Config is one federated run's training configuration; its privacy side is the front door's
// resolved plan (dpsgd.FederatedPlan), given to New.
type Config struct {
	// Model configures the clients' local training (engine.NewLearner): Arch, Dtype,
	// PhysicalBatch (0: the local batch), Optimizer (the local optimizer, reset at every
	// participation; Optimizer.LR is the local learning rate γ; Schedule is not used),
	// EvalBatch. Its Clip, Seed and NonPrivate are set from the plan
	// (dpsgd.FederatedPrivate.Apply).
	Model engine.Config
	// Workers is the number of clients trained at once; 0 means GOMAXPROCS (at most K).
	Workers int
	// EvalEvery evaluates the global model on the test set every EvalEvery rounds (0: only
	// after the last round).
	EvalEvery int
	// GammaL is γ·L in eq. 11's utility cost; 0 means the local learning rate γ (L = 1).
	GammaL float64
	// PrivateStats reports, in a private run, the clients' mean training loss of each round
	// (RoundStats.TrainLoss): computed from their data without noise, it is not covered by
	// the guarantee. A non-private run always reports it.
	PrivateStats bool
}

// ClientReport is a client's plan and what happened to it.
type ClientReport struct {
	dpsgd.ClientPlan
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
	// Guarantee is the client's guarantee sentence after Selections participations
	// (dpsgd.FederatedPrivate.ClientGuarantee).
	Guarantee string `json:"guarantee"`
}

// RoundStats is what the loop reports after each round.
type RoundStats struct {
	Round        int `json:"round"` // 1-based
	Rounds       int `json:"rounds"`
	Participants int `json:"participants"`  // clients that trained this round
	SkippedDraws int `json:"skipped_draws"` // draws that fell on retired clients
	Retired      int `json:"retired"`       // clients retired so far
	// TrainLoss is the mean loss over the local steps' examples, computed from the clients'
	// data without noise: not covered by the guarantee, so a private run reports it only with
	// Config.PrivateStats; nil otherwise, without participants, or when not finite (a
	// diverging model's).
	TrainLoss *float64 `json:"train_loss"`
	// TestAccuracy is the global model's accuracy, nil when not evaluated this round.
	TestAccuracy *float64 `json:"test_accuracy,omitempty"`
	Seconds      float64  `json:"seconds"`
}

// Report is the result of a run.
type Report struct {
	Clients      []ClientReport       `json:"clients"`
	TestAccuracy float64              `json:"test_accuracy"`
	Rounds       int                  `json:"rounds"` // rounds completed
	RoundsPlan   int                  `json:"rounds_planned"`
	DrawsPer     int                  `json:"draws_per_round"` // K
	LocalSteps   int                  `json:"local_steps"`
	Mode         dpsgd.Perturbation   `json:"mode"`
	Calibration  dpsgd.Calibration    `json:"calibration"`
	Sampling     dpsgd.ClientSampling `json:"sampling"`
	UniformNoise bool                 `json:"uniform_noise"`
	NonPrivate   bool                 `json:"non_private"`
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
	priv     *dpsgd.FederatedPrivate
	plan     dpsgd.FederatedPlan // priv.Plan
	train    *datasets.Dataset
	test     *datasets.Dataset
	parts    [][]int
	plans    []dpsgd.ClientPlan
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

// New prepares a run of priv, a plan resolved by the front door (dpsgd.FederatedPlan.Resolve:
// the clients' budgets, shares, rates, bounds, noise and accountants), on train, evaluating on
// test: parts[i] are client i's example indices, as many as the plan's Examples[i], disjoint.
// It sets cfg.Model's privacy fields from the plan and builds the client sampler and the local
// learners. The returned Federation holds compiled graphs: Close it.
func New(cfg Config, priv *dpsgd.FederatedPrivate, train, test *datasets.Dataset, parts [][]int) (*Federation, error) {
	if priv == nil {
		return nil, errors.New("federated: nil plan: resolve a dpsgd.FederatedPlan")
	}
	if train == nil {
		return nil, errors.New("federated: nil training set")
	}
	plan := priv.Plan
	n := len(priv.Clients)
	if len(parts) != n {
		return nil, fmt.Errorf("federated: %d clients but %d data parts", n, len(parts))
	}
	if cfg.EvalEvery < 0 {
		return nil, fmt.Errorf("federated: eval every = %d rounds, want ≥ 0 (0: after the last round)", cfg.EvalEvery)
	}
	if cfg.Workers < 0 {
		return nil, fmt.Errorf("federated: workers = %d, want ≥ 0 (0: one per CPU)", cfg.Workers)
	}
	if err := cfg.Model.Optimizer.Validate(); err != nil {
		return nil, fmt.Errorf("federated: local optimizer: %w", err)
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
	owner := make(map[int]int)
	for i, c := range priv.Clients {
		if len(parts[i]) != c.Examples {
			return nil, fmt.Errorf("federated: client %q has %d training examples, its plan %d", c.ID, len(parts[i]), c.Examples)
		}
		for _, x := range parts[i] {
			if x < 0 || x >= train.N {
				return nil, fmt.Errorf("federated: client %q: example %d out of range [0, %d)", c.ID, x, train.N)
			}
			if j, taken := owner[x]; taken && j != i {
				return nil, fmt.Errorf("federated: example %d belongs to clients %q and %q: parts must be disjoint", x, priv.Clients[j].ID, c.ID)
			}
			owner[x] = i
		}
	}
	f := &Federation{priv: priv, plan: plan, train: train, test: test, parts: parts, plans: priv.Clients}
	smp, err := newSampler(plan.Sampling, priv.Rates, plan.Draws, plan.Seed)
	if err != nil {
		return nil, err
	}
	f.smp = smp

	// Local learners: one per worker, each on one core.
	priv.Apply(&cfg.Model)
	lr := cfg.Model.Optimizer.LR
	if cfg.GammaL == 0 {
		f.gammaL = lr
	} else {
		f.gammaL = cfg.GammaL
	}
	maxBatch := 0
	for _, c := range priv.Clients {
		maxBatch = max(maxBatch, c.LocalBatch)
	}
	mc := cfg.Model
	mc.Replicas = 1
	if mc.PhysicalBatch == 0 {
		mc.PhysicalBatch = maxBatch
	}
	if mc.Optimizer.Schedule == "cosine" {
		return nil, errors.New("federated: optimizer schedule cosine: want constant (the local learning rate is fixed)")
	}
	if plan.Mode == dpsgd.OutputPerturbation && !plan.NonPrivate && mc.Optimizer.Name == engine.OptimizerAdam {
		// Adam's first step is not linear in the gradient; the 2C/b sensitivity of I = 1 needs
		// an update that is. (The projection onto the C-ball keeps I > 1 valid for any
		// optimizer, but one rule is simpler to state.)
		return nil, errors.New("federated: output mode with optimizer adam: want sgd or momentum (their first step is linear in the clipped gradient)")
	}
	workers := cfg.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, plan.Draws)
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

	if !plan.NonPrivate {
		cost, err := utilityCost(priv, f.gammaL)
		if err != nil {
			f.Close()
			return nil, err
		}
		f.utility = &cost
	}
	f.draws = make([]int, n)
	f.selections = make([]int, n)
	f.retiredAt = make([]int, n)
	f.skipped = make([]int, n)
	return f, nil
}

// utilityCost is eq. 11's noise term at the clients' noise multipliers
// (personalized.UtilityCost), with a per-client S = 2·C·sᵢ/bᵢ: one LocalExamples of 1 and
// sᵢ/bᵢ as the sensitivity factor.
func utilityCost(priv *dpsgd.FederatedPrivate, gammaL float64) (float64, error) {
	p := priv.Plan
	sigmas := make([]float64, len(priv.Clients))
	clients := make([]personalized.Client, len(priv.Clients))
	for i, c := range priv.Clients {
		sigmas[i] = c.Multiplier
		clients[i] = personalized.Client{Epsilon: c.Epsilon, DeltaPrime: c.DeltaPrime, DeltaTail: c.DeltaTail,
			SampleRate: c.SampleRate, Sensitivity: c.Sensitivity / float64(c.LocalBatch)}
	}
	cost, err := personalized.UtilityCost(gammaL, p.Draws, clients, priv.Shares, sigmas,
		personalized.Setting{Draws: p.Draws * p.Rounds, Clip: p.Clip, LocalExamples: 1, LocalSteps: p.LocalSteps, K: p.LogisticK})
	if err != nil {
		return 0, fmt.Errorf("federated: utility cost: %w", err)
	}
	return cost, nil
}

// Plans returns the clients' resolved parameters and noise.
func (f *Federation) Plans() []dpsgd.ClientPlan { return append([]dpsgd.ClientPlan(nil), f.plans...) }

// Config returns the configuration with its defaults resolved.
func (f *Federation) Config() Config { return f.cfg }

// Private returns the resolved plan the run follows.
func (f *Federation) Private() *dpsgd.FederatedPrivate { return f.priv }

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
	for f.round < f.plan.Rounds {
		if err := ctx.Err(); err != nil {
			rep := f.report(start)
			rep.Interrupted = true
			return rep, fmt.Errorf("%w after round %d of %d: %w", engine.ErrInterrupted, f.round, f.plan.Rounds, err)
		}
		st, err := f.runRound(counts)
		if err != nil {
			return f.report(start), fmt.Errorf("federated: round %d: %w", f.round+1, err)
		}
		f.round++
		if f.round == f.plan.Rounds || (f.cfg.EvalEvery > 0 && f.round%f.cfg.EvalEvery == 0) {
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
	st := RoundStats{Round: t + 1, Rounds: f.plan.Rounds}
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
	seen, loss := 0, 0.0
	for _, j := range jobs {
		if j.err != nil {
			return st, fmt.Errorf("client %q: %w", f.plans[j.client].ID, j.err)
		}
		updates[j.client] = j.update
		loss += j.loss
		seen += j.seen
	}
	if seen > 0 && (f.plan.NonPrivate || f.cfg.PrivateStats) {
		if loss /= float64(seen); !math.IsNaN(loss) && !math.IsInf(loss, 0) {
			st.TrainLoss = &loss
		}
	}
	active := make([]int, len(counts))
	for _, j := range jobs {
		active[j.client] = counts[j.client]
	}
	delta := make([]float64, len(f.global))
	Aggregate(delta, updates, active, f.priv.Shares, f.priv.Rates, f.plan.Draws)
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
		if !f.plan.NonPrivate && f.selections[n] >= f.plans[n].RoundsBound {
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
	rng := rand.New(rand.NewPCG(seedmix.Mix(f.plan.Seed^batchStream, uint64(n)), uint64(t)))
	noiseSeed := seedmix.Mix(f.plan.Seed^noiseStream, uint64(n))
	sigma := 0.0
	if f.plan.Mode == dpsgd.GradientPerturbation && !f.plan.NonPrivate {
		sigma = p.StepSigma
	}
	b := p.LocalBatch
	scratch = append(scratch[:0], part...)
	for s := range f.plan.LocalSteps {
		idx := scratch
		if b < len(part) {
			for k := range b { // partial Fisher–Yates: a uniform b-subset
				r := k + rng.IntN(len(scratch)-k)
				scratch[k], scratch[r] = scratch[r], scratch[k]
			}
			idx = scratch[:b]
		}
		key := kernels.NoiseKey{Seed: noiseSeed, Step: uint64(t)*uint64(f.plan.LocalSteps) + uint64(s)}
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
	if f.plan.Mode == dpsgd.OutputPerturbation && !f.plan.NonPrivate {
		// u = −Δ/(γ·I), projected onto the C-ball, plus N(0, σ²); then back to Δ.
		scale := lr * float64(f.plan.LocalSteps)
		var norm2 float64
		for _, v := range y {
			norm2 += v * v
		}
		c := f.plan.Clip * scale // ‖u‖ ≤ C ⇔ ‖Δ‖ ≤ γ·I·C
		if norm := math.Sqrt(norm2); norm > c {
			for i := range y {
				y[i] *= c / norm
			}
		}
		kernels.AddGaussian(y, p.Sigma*scale, kernels.NoiseKey{Seed: seedmix.Mix(f.plan.Seed^outputStream, uint64(n)), Step: uint64(t)})
	}
	j.update = y
	return scratch
}

// report assembles the Report of the rounds done so far.
func (f *Federation) report(start time.Time) *Report {
	rep := &Report{
		Rounds: f.round, RoundsPlan: f.plan.Rounds, DrawsPer: f.plan.Draws, LocalSteps: f.plan.LocalSteps,
		Mode: f.plan.Mode, Calibration: f.plan.Calibration, Sampling: f.plan.Sampling, UniformNoise: f.plan.UniformNoise,
		NonPrivate: f.plan.NonPrivate, UtilityCost: f.utility, GammaL: f.gammaL,
		Seconds: time.Since(start).Seconds(), History: append([]RoundStats(nil), f.history...),
	}
	if f.plan.NonPrivate {
		rep.Calibration = ""
	}
	for i := len(f.history) - 1; i >= 0; i-- {
		if a := f.history[i].TestAccuracy; a != nil {
			rep.TestAccuracy = *a
			break
		}
	}
	for i, p := range f.plans {
		cr := ClientReport{
			ClientPlan: p, Draws: f.draws[i], Selections: f.selections[i], Retired: f.retiredAt[i] > 0,
			RetiredRound: f.retiredAt[i], SkippedDraws: f.skipped[i],
		}
		if !f.plan.NonPrivate {
			eps, err := f.priv.Spent(i, f.selections[i])
			if err == nil && !math.IsNaN(eps) && !math.IsInf(eps, 0) {
				cr.EpsilonSpent = &eps
			}
		}
		g, err := f.priv.ClientGuarantee(i, f.selections[i])
		if err != nil {
			g = "unknown: " + err.Error()
		}
		cr.Guarantee = g
		if cr.Retired {
			rep.Retired++
		}
		rep.SkippedDraws += cr.SkippedDraws
		rep.Clients = append(rep.Clients, cr)
	}
	return rep
}
