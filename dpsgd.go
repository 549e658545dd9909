// Package dpsgd is the front door of the DP-SGD engine: the one place where a private training
// run is assembled, as Opacus's make_private is for PyTorch. The command (dpsgd train), the
// sampler comparison (package bench), the audit and federated training (package federated)
// build their runs here, so that what a private run is — its sampler, its accountant, its
// noise, its budget and the sentence that states its guarantee — is decided once.
//
// # Overview
//
// A Plan states the privacy side of a run: the sampler and its expected batch size, the
// epochs, the clip norm C, the noise multiplier σ (or a target ε to calibrate σ to), δ, the
// accountant, the noise mechanism, and whether noise and batches are seeded or drawn from a
// cryptographically secure generator.
//
// Plan.Resolve checks every field (an error names the field and its valid range and wraps
// ErrInvalid), builds the sampler over the N training examples, refuses an accountant that is
// not a proven (ε, δ) guarantee for that sampler (a total-variation-only bound, an
// approximation, a lower bound, Poisson accounting applied to shuffling), calibrates σ so that
// the planned epochs spend exactly the budget (or ball noise's radius so that they spend δ),
// accounts for the secure sampler's deviation from the ideal Gaussian in secure mode, and
// starts the ledger. The result is a Private: the resolved run.
//
// Private.Train sets the privacy fields of an engine.Config (Private.Apply) and runs
// engine.Train with the Private's sampler, accountant, budget and ledger; the engine checks the
// budget before every epoch and stops before it would be exceeded. Private.Guarantee turns the
// engine.Result into the guarantee sentence that dpsgd train prints, and Private.Release into the
// public guarantee of a model file (package model: the sentence without the seed, ε, δ, the
// steps and the ledger):
//
//	plan := dpsgd.Plan{Sampler: dpsgd.Poisson, BatchSize: 256, Epochs: 10, Clip: 1,
//		TargetEpsilon: 3, Delta: 1e-5, Seed: seed}
//	priv, err := plan.Resolve(ctx, train.N, arch, nil)
//	...
//	res, err := priv.Train(ctx, cfg, train, test, nil)
//	...
//	sentence, err := priv.Guarantee(res)
//
// # Federated runs
//
// A FederatedPlan states a federated run with a budget per client (the personalized-DP FL
// appendix; docs/federated.md): the clients (Client: εᵢ, δᵢ or its parts δ'ᵢ and δ‴ᵢ, sample
// rate, data share, sensitivity factor), the sizes of their data parts, the rounds, draws and
// local steps, C, where the noise goes (Perturbation) and how it is calibrated (Calibration).
// FederatedPlan.Resolve checks every field, fixes each client's share, sample rate, Lemma 1's
// bound Rᵢ on its participations and its noise multiplier (personalized.Calibrate), and gives
// each client its accountant: exact μ-GDP composition of its releases, counted in
// participations. The resulting FederatedPrivate sets the clients' training configuration
// (Apply), reports what each client spent (Spent) and states the guarantees (Guarantee, and
// ClientGuarantee per client); package federated runs it.
//
// # What the guarantee covers
//
// The sequence of released parameters (every iterate, hence also the final model) is (ε, δ)-DP
// with respect to one training record, for the sampler actually used, proven by the named
// accountant, whatever the record's values. The run derives q = B/N and the steps per epoch
// from the dataset size, so N is public and every guarantee is stated for zero-out adjacency
// (one record replaced by a ghost whose clipped gradient is zero; for Poisson sampling the
// add/remove numbers hold unchanged: Kairouz et al. 2021, "Practical and Private (Deep)
// Learning without Sampling or Shuffling"). ε covers every step taken however the run ends. Not
// covered: seeded noise (whoever knows the seed can regenerate the noise; Plan.Secure draws
// it from the operating system instead), statistics computed from the training data without
// noise, the test accuracy, and checkpoints. docs/reliability.md, "The privacy promise", states
// all of it with the attacks tried against it.
package dpsgd

import (
	"context"
	"errors"
	"strings"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/engine/sampler"
	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/accounting"
)

// MaxSteps bounds a run's total number of steps (engine.MaxSteps): Resolve refuses more,
// before any calibration.
const MaxSteps = engine.MaxSteps

// ErrInvalid is wrapped by every error of Resolve and NewSampler about a plan that is not a
// valid private run: a field outside its valid range, an accountant that is not an (ε, δ)
// guarantee for the sampler, a budget no σ in range meets.
var ErrInvalid = errors.New("dpsgd: invalid plan")

// FieldError is a Plan that Resolve refuses because of one field. It wraps ErrInvalid, and
// Err when a lower layer said why (privacy.ErrUnreachable for a budget no σ meets, say).
type FieldError struct {
	Field  string // the Plan field at fault: "Sampler", "Accountant", "TargetEpsilon", …
	Reason string // the value, what is wrong with it and what is valid
	Err    error  // the cause, or nil
}

func (e *FieldError) Error() string { return "dpsgd: " + e.Field + " " + e.Reason }

// Unwrap returns ErrInvalid and the cause.
func (e *FieldError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalid}
	}
	return []error{ErrInvalid, e.Err}
}

// Private is a resolved Plan: everything a private run needs besides the model's training
// configuration. It is for one run: its Ledger records that run's epochs (Resolve again for
// another).
type Private struct {
	// Plan is the plan as resolved (Noise "" made engine.NoiseGaussian).
	Plan Plan
	// N is the number of training examples (of users for a user-level plan); the guarantee
	// states it as public.
	N int
	// Sampler draws the batches (wrapped by sampler.Secure in secure mode).
	Sampler sampler.Sampler
	// Spec is the accounting of the run at its σ (or ball radius): the ideal Gaussian
	// mechanism's in secure mode, whose Accountant accounts for the secure sampler on top.
	Spec accounting.Spec
	// Accountant is the accountant proven for the sampler; nil for a non-private run.
	Accountant privacy.Accountant
	// Ledger records what each epoch spent; nil for a non-private run.
	Ledger *accounting.Ledger
	// Budget is what training must not exceed: (TargetEpsilon, Delta), (0, Delta) for ball
	// noise, or nil (no budget: ε is only reported).
	Budget *privacy.Budget
	// Sigma is the noise multiplier (noise std σ·C); 0 for ball noise and non-private runs.
	Sigma float64
	// Radius is ball noise's radius r·C, in the units of the clipped gradient sum; 0 otherwise.
	Radius float64
	// SigmaSource says where σ (or the radius) came from, for people: "given", "calibrated to
	// ε = 3 over 10 epochs", "radius given", "radius calibrated to a total δ = 1e-05 over 10
	// epochs"; "" for a non-private run.
	SigmaSource string
}

// Apply sets the privacy fields of cfg from the plan: Epochs, Clip, Sigma, Noise, Radius,
// Secure, NonPrivate, Seed, UserLevel and MaxUserRecords. The other fields (the model, the optimizer, the device, the
// checkpoints) are the caller's.
func (p *Private) Apply(cfg *engine.Config) {
	cfg.Epochs, cfg.Clip, cfg.Seed = p.Plan.Epochs, p.Plan.Clip, p.Plan.Seed
	cfg.Sigma, cfg.Noise, cfg.Radius = p.Sigma, p.Plan.Noise, p.Radius
	cfg.Secure, cfg.NonPrivate = p.Plan.Secure, p.Plan.NonPrivate
	cfg.UserLevel, cfg.MaxUserRecords = p.Plan.UserLevel, p.Plan.MaxUserRecords
}

// Unit is the unit of privacy: UnitUser for a UserLevel plan, else UnitRecord.
func (p *Private) Unit() string {
	if p.Plan.UserLevel {
		return UnitUser
	}
	return UnitRecord
}

// Privacy returns the accounting side of the run for engine.Train: the accountant, δ, the
// budget and the ledger (the zero value for a non-private run).
func (p *Private) Privacy() engine.Privacy {
	if p.Plan.NonPrivate {
		return engine.Privacy{}
	}
	return engine.Privacy{Accountant: p.Accountant, Delta: p.Plan.Delta, Budget: p.Budget, Ledger: p.Ledger}
}

// Train applies the plan to cfg (Apply) and trains on train, evaluating on test, with the
// plan's sampler, accountant, budget and ledger: engine.Train. prog may be nil.
func (p *Private) Train(ctx context.Context, cfg engine.Config, train, test *datasets.Dataset, prog engine.Progress) (*engine.Result, error) {
	p.Apply(&cfg)
	return engine.Train(ctx, cfg, train, test, p.Sampler, p.Privacy(), prog)
}

// samplerList is the valid Sampler values, for messages.
func samplerList() string {
	names := []string{string(Shuffle), string(Poisson), string(PoissonTruncated)}
	return strings.Join(names, ", ") + " or " + string(Allocation)
}
