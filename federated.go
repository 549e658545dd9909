package dpsgd

import (
	"errors"
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/personalized"
)

// Perturbation says where a federated client's noise goes.
type Perturbation string

// The perturbations.
const (
	// GradientPerturbation (the default; the personalized-DP FL appendix's Theorem 2): each of
	// the I local steps adds Gaussian noise to the client's summed clipped gradient, so one
	// participation is I Gaussian releases.
	GradientPerturbation Perturbation = "gradient"
	// OutputPerturbation (the appendix's Theorems 1 and 4): the I local steps are clipped but
	// not noised; the client releases its update once, with noise, projected onto the C-ball.
	// Its sensitivity is 2C/b for I = 1 but only the trivial 2C for I > 1, so for I > 1 the
	// sensitivity factor is multiplied by the local batch b: output perturbation is meant for
	// I = 1.
	OutputPerturbation Perturbation = "output"
)

// Calibration chooses which of personalized.Calibrate's two noise levels a federated run uses.
type Calibration string

// The calibrations.
const (
	// CalibrationGDP (the default) is the tight μ-GDP calibration (docs/accounting.md): valid
	// at every ε.
	CalibrationGDP Calibration = "gdp"
	// CalibrationSeed is the appendix's explicit classic-Gaussian calibration (end of the proof
	// of Theorem 4), proven only for εᵢ < 1 and one release per participation. With gradient
	// perturbation its σ is multiplied by √I, the √E of the appendix's Theorem 2, so that Rᵢ·I
	// releases get the same total as Rᵢ releases of the appendix's σ. The ε actually spent is
	// accounted exactly (GDP) whatever the calibration.
	CalibrationSeed Calibration = "seed"
)

// ClientSampling names how the K draws of a federated round select clients. Under both,
// client i's count over the run is Binomial(T = K·R, qᵢ), as the appendix's Lemma 1 assumes.
type ClientSampling string

// The client samplings (package federated draws them).
const (
	// SamplingCategorical: each of the K draws picks one client, client i with probability
	// qᵢ; the rates must sum to 1 (within ShareTolerance).
	SamplingCategorical ClientSampling = "categorical"
	// SamplingBernoulli: each client is tried K times per round, each trial independently
	// successful with probability qᵢ; the rates need not sum to anything.
	SamplingBernoulli ClientSampling = "bernoulli"
)

// ShareTolerance is how far from 1 the sum of the data shares (and, for categorical client
// sampling, of the sample rates) may be.
const ShareTolerance = 1e-6

// Client is one federated client's privacy request and participation parameters, as a
// clients file or flags give them. A Client's fields are named, in errors, by their JSON keys
// (the columns of a clients file).
//
// The total δᵢ of the guarantee is δᵢ = δ'ᵢ + δ‴ᵢ − δ'ᵢ·δ‴ᵢ (the personalized-DP FL appendix,
// Theorem 1): δ'ᵢ is the Gaussian mechanism's δ and δ‴ᵢ the probability that the client's
// selection count exceeds Lemma 1's bound Rᵢ. Any two of the three determine the third; δᵢ
// alone is split evenly (SplitDelta). 0 means "not given" for every field but Epsilon.
type Client struct {
	ID         string  `json:"id"`
	Epsilon    float64 `json:"epsilon"`     // εᵢ > 0
	Delta      float64 `json:"delta"`       // δᵢ ∈ (0, 1), the total
	DeltaPrime float64 `json:"delta_prime"` // δ'ᵢ ∈ (0, 1)
	DeltaTail  float64 `json:"delta_tail"`  // δ‴ᵢ ∈ (0, 1)
	// SampleRate is qᵢ ∈ (0, 1], the probability that one draw selects the client; 0 means
	// not given (then every client gets 1/N).
	SampleRate float64 `json:"sample_rate,omitempty"`
	// Share is pᵢ ∈ (0, 1], the client's weight in the global objective; 0 means not given
	// (then the client's fraction of the training examples). Given shares must sum to 1
	// within ShareTolerance.
	Share float64 `json:"share,omitempty"`
	// Sensitivity is the sensitivity factor sᵢ ≥ 1 of the client's updates (the
	// personalized-DP FL appendix); 0 means 1.
	Sensitivity float64 `json:"sensitivity,omitempty"`
}

// SplitDelta splits a total δ ∈ (0, 1) evenly into δ' = δ‴ = 1 − √(1 − δ) (computed as
// δ/(1 + √(1 − δ)), without cancellation), the split for which δ' + δ‴ − δ'·δ‴ = δ exactly
// (the appendix's Theorem 1 δ composition).
func SplitDelta(delta float64) (deltaPrime, deltaTail float64) {
	x := delta / (1 + math.Sqrt(1-delta))
	return x, x
}

// Resolve checks c's values and completes its δ split: on return Delta, DeltaPrime and
// DeltaTail are all set. Errors are *FieldError naming the field by its JSON key ("epsilon",
// "delta", "delta_prime", "delta_tail", "sample_rate", "share", "sensitivity") with its
// valid range. The id is not checked (FederatedPlan.Resolve checks that ids are non-empty
// and unique).
func (c Client) Resolve() (Client, error) {
	if !(c.Epsilon > 0) || math.IsInf(c.Epsilon, 0) {
		return c, bad("epsilon", nil, "%v: want a finite value > 0", c.Epsilon)
	}
	for _, f := range []struct {
		key string
		v   float64
	}{{"delta", c.Delta}, {"delta_prime", c.DeltaPrime}, {"delta_tail", c.DeltaTail}} {
		if f.v != 0 && !(f.v > 0 && f.v < 1) {
			return c, bad(f.key, nil, "%v: want a value in (0, 1)", f.v)
		}
	}
	d, dp, dt := c.Delta, c.DeltaPrime, c.DeltaTail
	hd, hp, ht := d != 0, dp != 0, dt != 0
	switch {
	case hp && ht:
		total := personalized.DeltaTotal(dp, dt)
		if hd && math.Abs(total-d) > 1e-9*d {
			return c, bad("delta", nil, "%v, but delta_prime %v and delta_tail %v give δ' + δ‴ − δ'δ‴ = %v: want two of the three, or consistent values", d, dp, dt, total)
		}
		d = total
	case hd && hp:
		if dp >= d {
			return c, bad("delta_prime", nil, "%v: want a value in (0, delta = %v)", dp, d)
		}
		dt = (d - dp) / (1 - dp)
	case hd && ht:
		if dt >= d {
			return c, bad("delta_tail", nil, "%v: want a value in (0, delta = %v)", dt, d)
		}
		dp = (d - dt) / (1 - dt)
	case hd:
		dp, dt = SplitDelta(d)
	default:
		return c, bad("delta", nil, "missing: want delta in (0, 1), or both delta_prime and delta_tail")
	}
	if !(dp > 0 && dp < 1 && dt > 0 && dt < 1) {
		return c, bad("delta", nil, "%v splits into delta_prime %v and delta_tail %v: want both in (0, 1)", d, dp, dt)
	}
	c.Delta, c.DeltaPrime, c.DeltaTail = d, dp, dt
	return c, c.checkParticipation()
}

// checkParticipation checks the fields a non-private run uses too: the sample rate, the share
// and the sensitivity factor.
func (c Client) checkParticipation() error {
	if v := c.SampleRate; v != 0 && !(v > 0 && v <= 1) {
		return bad("sample_rate", nil, "%v: want a value in (0, 1]", v)
	}
	if v := c.Share; v != 0 && !(v > 0 && v <= 1) {
		return bad("share", nil, "%v: want a value in (0, 1]", v)
	}
	if v := c.Sensitivity; v != 0 && !(v >= 1 && !math.IsInf(v, 0)) {
		return bad("sensitivity", nil, "%v: want a finite value ≥ 1", v)
	}
	return nil
}

// CheckShares checks that clients give a share for all or none, and that given shares sum to
// 1 within ShareTolerance; likewise that sample rates are given for all or none. The error is
// a *FieldError naming "share" or "sample_rate".
func CheckShares(clients []Client) error {
	if len(clients) == 0 {
		return nil
	}
	givenShares, givenRates := clients[0].Share != 0, clients[0].SampleRate != 0
	var sum float64
	for _, c := range clients {
		if (c.Share != 0) != givenShares {
			return bad("share", nil, "given for some clients only (not for client %q): give it for all or none", c.ID)
		}
		if (c.SampleRate != 0) != givenRates {
			return bad("sample_rate", nil, "given for some clients only (not for client %q): give it for all or none", c.ID)
		}
		sum += c.Share
	}
	if givenShares && math.Abs(sum-1) > ShareTolerance {
		return bad("share", nil, "the shares sum to %.9g: want 1 (within %g)", sum, ShareTolerance)
	}
	return nil
}

// FederatedPlan is the privacy side of a federated run with a budget per client (the
// personalized-DP FL appendix; docs/federated.md), stated once: the clients and their
// budgets, the sizes of their data parts, the rounds, draws and local steps, the clip norm,
// where the noise goes and how it is calibrated. Package federated runs a resolved plan.
type FederatedPlan struct {
	// Clients are the clients' requests, in order; ids non-empty and unique.
	Clients []Client
	// Examples[i] is mᵢ ≥ 1, the number of client i's training examples. It is public: the
	// guarantee is stated with it known (replace-one adjacency inside the client's data).
	Examples []int
	// Rounds is R ≥ 1; Draws is K ∈ [1, N], the client draws per round; K·R ≤ 2^40.
	Rounds, Draws int
	// LocalSteps is I ≥ 1, the local steps of one participation.
	LocalSteps int
	// LocalBatch is the number of a client's examples in one local step (at most mᵢ); 0 is
	// all of them.
	LocalBatch int
	// Clip is the per-example ℓ2 clip norm C, finite and ≥ engine.MinClip.
	Clip float64
	// Mode is GradientPerturbation ("" too) or OutputPerturbation.
	Mode Perturbation
	// Calibration is CalibrationGDP ("" too) or CalibrationSeed.
	Calibration Calibration
	// UniformNoise gives every client the noise multiplier of the strictest budget: each
	// client is calibrated to the smallest εᵢ of the federation (with its own δ and qᵢ) and the
	// largest of these multipliers is used by all: the comparison point of personalized noise.
	UniformNoise bool
	// Sampling is how draws select clients; "" is SamplingCategorical when the rates sum to 1
	// (within ShareTolerance) and SamplingBernoulli otherwise.
	Sampling ClientSampling
	// LogisticK is Lemma 1's logistic constant k, finite and ≥ 0; 0 is personalized.DefaultK.
	LogisticK float64
	// Seed seeds the parameters' initialization, the client draws, the local batches and the
	// noise: whoever knows it can regenerate the noise, and the guarantee sentence says so.
	Seed uint64
	// NonPrivate runs the same rounds without clipping, noise, budgets or retirement: the
	// baseline. The clients' budgets are then not checked.
	NonPrivate bool
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
	Sensitivity float64 `json:"sensitivity_factor"` // sᵢ as used (output mode with I > 1 includes the local batch)
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
	// Accountant is the client's accountant, its steps counted in participations: exact
	// μ-GDP composition of Releases Gaussian releases per participation at Multiplier; nil
	// for a non-private run.
	Accountant privacy.Accountant `json:"-"`
}

// FederatedPrivate is a resolved FederatedPlan: the clients' shares, sample rates, selection
// bounds, noise and accountants, fixed before the first round.
type FederatedPrivate struct {
	// Plan is the plan as resolved (Mode, Calibration and Sampling defaults made explicit).
	Plan FederatedPlan
	// Clients are the clients' resolved plans, in the order of Plan.Clients.
	Clients []ClientPlan
	// Shares are the data shares pᵢ (summing to 1 up to rounding); Rates the sample rates qᵢ
	// the draws use (normalized to sum to 1 for categorical sampling).
	Shares, Rates []float64
	// Releases is the number of Gaussian releases of one participation: LocalSteps with
	// gradient perturbation, 1 with output perturbation.
	Releases int
}

// localBatch is the examples per local step of a client with m examples.
func localBatch(b, m int) int {
	if b == 0 || b > m {
		return m
	}
	return b
}

// validate checks the plan's run-wide fields and sets the defaults of Mode and Calibration.
func (p *FederatedPlan) validate() error {
	n := len(p.Clients)
	if n == 0 {
		return bad("Clients", nil, "none: want at least one")
	}
	if len(p.Examples) != n {
		return bad("Examples", nil, "%d sizes for %d clients: want one per client", len(p.Examples), n)
	}
	if p.Rounds < 1 {
		return bad("Rounds", nil, "%d: want ≥ 1", p.Rounds)
	}
	if p.Draws < 1 || p.Draws > n {
		return bad("Draws", nil, "%d: want a value in [1, N = %d] (K, the draws per round, at most the number of clients)", p.Draws, n)
	}
	if p.Rounds > personalized.MaxDraws/p.Draws {
		return bad("Rounds", nil, "%d with K = %d: want K·R at most 2^40 draws", p.Rounds, p.Draws)
	}
	if p.LocalSteps < 1 {
		return bad("LocalSteps", nil, "I = %d: want ≥ 1", p.LocalSteps)
	}
	if p.LocalBatch < 0 {
		return bad("LocalBatch", nil, "%d: want ≥ 0 (0: all local examples)", p.LocalBatch)
	}
	if err := oneOf("Mode", &p.Mode, GradientPerturbation, OutputPerturbation); err != nil {
		return err
	}
	if err := oneOf("Calibration", &p.Calibration, CalibrationGDP, CalibrationSeed); err != nil {
		return err
	}
	if p.Sampling != "" { // "": chosen from the rates in Resolve
		if err := oneOf("Sampling", &p.Sampling, SamplingCategorical, SamplingBernoulli); err != nil {
			return err
		}
	}
	if !(p.LogisticK >= 0) || math.IsInf(p.LogisticK, 0) {
		return bad("LogisticK", nil, "%v: want a finite value > 0 (0: %v)", p.LogisticK, personalized.DefaultK)
	}
	if !p.NonPrivate && (!(p.Clip >= engine.MinClip) || math.IsInf(p.Clip, 0)) {
		return bad("Clip", nil, "%v: want a finite value ≥ %g", p.Clip, engine.MinClip)
	}
	return nil
}

// Resolve checks the plan and fixes every client's noise before the first round: its δ split,
// data share (given, or mᵢ/Σm), sample rate (given, or 1/N), the client sampling, Lemma 1's
// bound Rᵢ on its participations, its noise multiplier (personalized.Calibrate, the tight GDP
// or the appendix's calibration, personalized or uniform at the strictest budget) and its
// accountant. Every error wraps ErrInvalid; a *FieldError names the field ("Clients[3].epsilon"
// for a client's).
func (p FederatedPlan) Resolve() (*FederatedPrivate, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	n := len(p.Clients)
	clients := make([]Client, n)
	ids := make(map[string]int, n)
	total := 0
	for i, c := range p.Clients {
		field := func(key string) string { return fmt.Sprintf("Clients[%d].%s", i, key) }
		if c.ID == "" {
			return nil, bad(field("id"), nil, "empty: want a non-empty name")
		}
		if j, dup := ids[c.ID]; dup {
			return nil, bad(field("id"), nil, "%q given twice (clients %d and %d): want unique ids", c.ID, j, i)
		}
		ids[c.ID] = i
		if p.Examples[i] < 1 {
			return nil, bad(fmt.Sprintf("Examples[%d]", i), nil, "%d (client %q): want ≥ 1", p.Examples[i], c.ID)
		}
		total += p.Examples[i]
		var err error
		if p.NonPrivate {
			// The budgets are not used, nor checked; the δ split is completed where it can be,
			// for the report.
			if rc, err := c.Resolve(); err == nil {
				c = rc
			}
			err = c.checkParticipation()
		} else {
			c, err = c.Resolve()
		}
		if err != nil {
			if fe := (*FieldError)(nil); errors.As(err, &fe) {
				return nil, bad(field(fe.Field), fe.Err, "(client %q) %s", c.ID, fe.Reason)
			}
			return nil, err
		}
		clients[i] = c
	}
	if err := CheckShares(p.Clients); err != nil {
		return nil, err
	}
	priv := &FederatedPrivate{Shares: make([]float64, n), Rates: make([]float64, n), Releases: p.LocalSteps}
	if p.Mode == OutputPerturbation {
		priv.Releases = 1
	}
	var shareSum, rateSum float64
	for i, c := range clients {
		if c.Share != 0 {
			priv.Shares[i] = c.Share
		} else {
			priv.Shares[i] = float64(p.Examples[i]) / float64(total)
		}
		if c.SampleRate != 0 {
			priv.Rates[i] = c.SampleRate
		} else {
			priv.Rates[i] = 1 / float64(n)
		}
		shareSum += priv.Shares[i]
		rateSum += priv.Rates[i]
	}
	if math.Abs(shareSum-1) > ShareTolerance {
		return nil, bad("Clients", nil, "the data shares sum to %.9g: want 1 (within %g)", shareSum, ShareTolerance)
	}
	for i := range priv.Shares {
		priv.Shares[i] /= shareSum // exactly 1 up to rounding
	}
	if p.Sampling == "" {
		p.Sampling = SamplingBernoulli
		if math.Abs(rateSum-1) <= ShareTolerance {
			p.Sampling = SamplingCategorical
		}
	}
	if p.Sampling == SamplingCategorical {
		if math.Abs(rateSum-1) > ShareTolerance {
			return nil, bad("Sampling", nil, "%s: the sample rates sum to %.9g, want 1 (within %g); use %s sampling for rates that do not", p.Sampling, rateSum, ShareTolerance, SamplingBernoulli)
		}
		for i := range priv.Rates {
			priv.Rates[i] /= rateSum // the probabilities the draws actually use
		}
	}
	priv.Plan = p
	if err := priv.calibrate(clients); err != nil {
		return nil, err
	}
	return priv, nil
}

// calibrate fills priv.Clients: Lemma 1's bound, the noise and the accountant of every client
// (through personalized.Calibrate).
func (priv *FederatedPrivate) calibrate(clients []Client) error {
	p := priv.Plan
	n := len(clients)
	priv.Clients = make([]ClientPlan, n)
	pert := personalized.Gradient
	if p.Mode == OutputPerturbation {
		pert = personalized.Output
	}
	type calib struct {
		cal  personalized.Calibration
		mult float64
	}
	cals := make([]calib, n)
	minEps := math.Inf(1)
	for _, c := range clients {
		minEps = math.Min(minEps, c.Epsilon)
	}
	uniformMult := 0.0
	for i, c := range clients {
		b := localBatch(p.LocalBatch, p.Examples[i])
		s := c.Sensitivity
		if s == 0 {
			s = 1
		}
		if p.Mode == OutputPerturbation && p.LocalSteps > 1 {
			s *= float64(b) // trivial sensitivity 2C of a C-bounded update (see OutputPerturbation)
		}
		priv.Clients[i] = ClientPlan{
			ID: c.ID, Examples: p.Examples[i], LocalBatch: b, Share: priv.Shares[i], SampleRate: priv.Rates[i],
			Epsilon: c.Epsilon, Delta: c.Delta, DeltaPrime: c.DeltaPrime, DeltaTail: c.DeltaTail, Sensitivity: s,
		}
		if p.NonPrivate {
			continue
		}
		set := personalized.Setting{
			Draws: p.Draws * p.Rounds, Clip: p.Clip, LocalExamples: b,
			LocalSteps: p.LocalSteps, K: p.LogisticK, Perturbation: pert,
		}
		pc := personalized.Client{Epsilon: c.Epsilon, DeltaPrime: c.DeltaPrime, DeltaTail: c.DeltaTail, SampleRate: priv.Rates[i], Sensitivity: s}
		cal, err := personalized.Calibrate(pc, set)
		if err != nil {
			return bad(fmt.Sprintf("Clients[%d]", i), err, "(client %q): %v", c.ID, err)
		}
		cals[i] = calib{cal: cal, mult: priv.multiplier(cal)}
		if p.UniformNoise {
			strict := pc
			strict.Epsilon = minEps
			sc, err := personalized.Calibrate(strict, set)
			if err != nil {
				return bad(fmt.Sprintf("Clients[%d]", i), err, "(client %q) at the strictest ε = %v: %v", c.ID, minEps, err)
			}
			uniformMult = math.Max(uniformMult, priv.multiplier(sc))
		}
	}
	if p.NonPrivate {
		return nil
	}
	for i := range clients {
		c := cals[i]
		m := c.mult
		if p.UniformNoise {
			m = uniformMult
		}
		cp := &priv.Clients[i]
		cp.RoundsBound = c.cal.Rounds.Used
		cp.RoundsBoundLogistic = c.cal.Rounds.Logistic
		cp.RoundsBoundExact = c.cal.Rounds.Exact
		cp.Multiplier = m
		cp.Sigma = m * c.cal.Sensitivity
		cp.SigmaSeed = c.cal.SigmaSeed
		cp.SigmaGDP = c.cal.SigmaGDP
		cp.SeedValid = c.cal.SeedValid
		if p.Mode == GradientPerturbation {
			cp.StepSigma = m * 2 * cp.Sensitivity
		}
		cp.Accountant = clientAccountant{releases: priv.Releases, multiplier: m}
		eps, err := cp.Accountant.Epsilon(cp.RoundsBound, cp.DeltaPrime)
		if err != nil {
			return bad(fmt.Sprintf("Clients[%d]", i), err, "(client %q): ε after Rᵢ = %d participations: %v", cp.ID, cp.RoundsBound, err)
		}
		cp.EpsilonBound = eps
	}
	return nil
}

// multiplier is the per-release noise multiplier of a calibration under the plan's choice.
func (priv *FederatedPrivate) multiplier(cal personalized.Calibration) float64 {
	p := priv.Plan
	if p.Calibration == CalibrationSeed {
		m := cal.SigmaSeed / cal.Sensitivity
		if p.Mode == GradientPerturbation {
			m *= math.Sqrt(float64(p.LocalSteps))
		}
		return m
	}
	return cal.Multiplier
}

// Apply sets the privacy fields of the clients' local training configuration from the plan:
// Clip, Seed and NonPrivate. The other fields (the model, the optimizer, the device) are the
// caller's.
func (priv *FederatedPrivate) Apply(cfg *engine.Config) {
	cfg.Clip, cfg.Seed, cfg.NonPrivate = priv.Plan.Clip, priv.Plan.Seed, priv.Plan.NonPrivate
}

// Spent returns the ε at δ'ᵢ that client i has spent after the given number of
// participations (its accountant: exact GDP composition, the selections being independent of
// the data); an error for a non-private run.
func (priv *FederatedPrivate) Spent(i, participations int) (float64, error) {
	acc := priv.Clients[i].Accountant
	if acc == nil {
		return 0, fmt.Errorf("dpsgd: client %q: a non-private run has no accountant: %w", priv.Clients[i].ID, ErrInvalid)
	}
	return acc.Epsilon(participations, priv.Clients[i].DeltaPrime)
}

// Guarantee returns the sentence that states what a run of this plan guarantees to every
// client, and who can regenerate the noise.
func (priv *FederatedPrivate) Guarantee() string {
	if priv.Plan.NonPrivate {
		return "none: non-private baseline"
	}
	return fmt.Sprintf("client i: (epsilon_spent_i, delta_prime_i)-DP for its examples under replace-one adjacency (its example count public), towards a third party, by exact GDP composition of its %s releases given the realized selections (never more than rounds_bound_i: (epsilon_i, delta_prime_i) always holds); the noise, draws and local batches are pseudorandom from seed %d, so the guarantee holds only while the seed is secret (anyone who knows it can regenerate the noise): a research run", priv.Plan.Mode, priv.Plan.Seed)
}

// ClientGuarantee returns the sentence that states what client i's guarantee is after the
// given number of participations: ε at δ'ᵢ by its accountant, the adjacency with its example
// count public, the releases, the retirement that keeps (εᵢ, δ'ᵢ) whatever the draws, and who
// can regenerate the noise.
func (priv *FederatedPrivate) ClientGuarantee(i, participations int) (string, error) {
	if priv.Plan.NonPrivate {
		return "none: non-private baseline", nil
	}
	cp := priv.Clients[i]
	eps, err := priv.Spent(i, participations)
	if err != nil {
		return "", err
	}
	if math.IsNaN(eps) {
		return "", fmt.Errorf("dpsgd: client %q: no ε for %d participations (the accountant failed); the guarantee is unknown", cp.ID, participations)
	}
	return fmt.Sprintf("client %s: (ε = %.4g, δ' = %.3g)-DP for its examples after %d participations of %d Gaussian release(s) each at noise multiplier %.4g, under replace-one adjacency within its %d examples (that count public), towards a third party, proven by exact μ-GDP composition; retired after Rᵢ = %d participations, so (εᵢ = %g, δ'ᵢ) holds whatever the draws, and (εᵢ, δᵢ = %.3g) without retirement; the noise is pseudorandom from seed %d, so the guarantee holds only while the seed is secret",
		cp.ID, eps, cp.DeltaPrime, participations, priv.Releases, cp.Multiplier, cp.Examples, cp.RoundsBound, cp.Epsilon, cp.Delta, priv.Plan.Seed), nil
}

// clientAccountant is a federated client's accountant (personalized.Spent): its steps are
// participations, each of releases Gaussian releases at noise multiplier multiplier, so after
// s participations the client is μ-GDP with μ = √(s·releases)/multiplier (Dong, Roth & Su,
// "Gaussian Differential Privacy"), no amplification by client sampling claimed.
type clientAccountant struct {
	releases   int
	multiplier float64
}

func (clientAccountant) Name() string { return "gdp-composition" }

// Sampler names the client selection: Binomial draws with retirement at Rᵢ; the accountant
// claims nothing from it.
func (clientAccountant) Sampler() string { return "client-selection" }

func (clientAccountant) Adjacency() string { return "replace one" }

func (a clientAccountant) Epsilon(steps int, delta float64) (float64, error) {
	return personalized.Spent(steps, a.releases, a.multiplier, delta)
}

func (a clientAccountant) Delta(steps int, eps float64) (float64, error) {
	if steps < 0 {
		return 0, fmt.Errorf("dpsgd: participations = %d: want ≥ 0: %w", steps, privacy.ErrInvalidArgument)
	}
	return privacy.GaussianDelta(math.Sqrt(float64(steps)*float64(a.releases))/a.multiplier, eps)
}
