package main

import (
	"fmt"

	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/kernels"
	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/accounting"
	"github.com/dpsgd/dpsgd/privacy/ball"
)

// checkNoise validates --noise and the flags that belong to one mechanism only.
func (f *trainFlags) checkNoise() error {
	switch f.noise {
	case engine.NoiseGaussian:
		if f.set["radius"] {
			return usagef("--radius is for --noise ball (the Gaussian mechanism takes --sigma)")
		}
	case engine.NoiseBall:
		for _, name := range []string{"sigma", "target-epsilon"} {
			if f.set[name] {
				return usagef("--%s does not apply to --noise ball: it gives (0, δ) guarantees only; give --radius and/or --delta (the total δ)", name)
			}
		}
		if f.set["radius"] && !(f.radius > 0 && f.radius <= kernels.MaxBallRadius) {
			return usagef("--radius %v: want a value in (0, %g]", f.radius, kernels.MaxBallRadius)
		}
	case "laplace":
		return usagef("--noise laplace: no training accountant for Laplace noise on ℓ2-clipped gradients; want gaussian or ball (Laplace noise is used by dpsgd ageaware)")
	default:
		return usagef("--noise %q: want gaussian or ball", f.noise)
	}
	return nil
}

// ballSpec is buildSampler's ball branch: the accountant of Tholeti's mechanism for the
// sampler's geometry spec, with d the number of parameters and Δ the sensitivity of the
// clipped sum under the sampler's adjacency.
func (f *trainFlags) ballSpec(rc *runConfig, spec accounting.Spec, params int) error {
	if f.set["accountant"] && f.accountant != accounting.MethodBallTV {
		return usagef("--accountant %q: --noise ball has one accountant, %s", f.accountant, accounting.MethodBallTV)
	}
	dist, err := ball.DistanceFor(spec.Sampler, f.clip)
	if err != nil {
		return usagef("--noise ball with --sampler %s: want one of %v", f.samplerName, accounting.SamplersFor(accounting.MechanismBall))
	}
	spec.Mechanism, spec.Method = accounting.MechanismBall, accounting.MethodBallTV
	spec.Dim, spec.Distance = params, dist
	spec.DatasetSize, spec.MaxBatch = 0, 0
	probe := spec
	probe.Radius = 1
	if err := probe.Validate(); err != nil {
		return usagef("--noise ball with --sampler %s: %v", f.samplerName, err)
	}
	rc.spec = spec
	rc.newAcc = func(r float64) (privacy.Accountant, error) {
		sp := spec
		sp.Radius = r
		return sp.New()
	}
	return nil
}

// resolveBall sets the radius (given, or calibrated to spend --delta over the planned epochs)
// and the accounting of a ball-noise run. The budget is (0, --delta): the run stops before an
// epoch that would take the total δ above it.
func (f *trainFlags) resolveBall(rc *runConfig) error {
	budget := privacy.Budget{Epsilon: 0, Delta: f.delta}
	steps := f.epochs * rc.smp.StepsPerEpoch()
	r := f.radius * f.clip
	if f.set["radius"] {
		rc.sigmaSource = "radius given"
	} else {
		var err error
		if r, err = accounting.SolveRadius(rc.spec, steps, budget); err != nil {
			return usagef("--delta %v over %d epochs with --noise ball: %v", f.delta, f.epochs, err)
		}
		rc.sigmaSource = fmt.Sprintf("radius calibrated to a total δ = %g over %d epochs", f.delta, f.epochs)
	}
	if !(r > 0 && r <= kernels.MaxBallRadius) {
		return usagef("--noise ball: radius r·C = %v (%s) out of range (0, %g]", r, rc.sigmaSource, kernels.MaxBallRadius)
	}
	rc.cfg.Radius, rc.cfg.Sigma = r, 0
	acc, err := rc.newAcc(r)
	if err != nil {
		return usagef("%v", err)
	}
	rc.pv = engine.Privacy{Accountant: acc, Delta: f.delta, Budget: &budget}
	rc.spec.Radius = r
	if rc.pv.Ledger, err = accounting.NewLedger(rc.spec, f.delta, rc.pv.Budget); err != nil {
		return usagef("%v", err)
	}
	return validateConfig(rc)
}
