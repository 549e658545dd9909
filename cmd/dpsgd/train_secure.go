package main

import (
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/kernels"
	"github.com/dpsgd/dpsgd/privacy"
)

// secureAccounting makes rc account for what --secure actually releases
// (kernels.AddSecureGaussian, "Privacy of what is released"): the clipped sum is rounded to the
// noise's grid g before the discrete Gaussian is added, so the sensitivity grows from C to
// C + g√d and the accountant is asked at σ_eff = σ·C/(C + g√d); and the sampler's pmf is
// within e^{±η} of the ideal per coordinate, which privacy.NearIdeal composes over the d
// coordinates and the steps (ε + 2Tdη, δ·e^{Tdη} plus a split-off tail below 10⁻³⁰⁰).
// Calibration solves the ideal accountant for the budget NearIdeal leaves it, then raises σ
// until σ_eff reaches the ideal solution.
func secureAccounting(rc *runConfig) error {
	d := float64(rc.cfg.Arch.NumParams())
	clip := rc.cfg.Clip
	logRatio := d * kernels.SecureLogRatioBound
	logTail := math.Log(d) + kernels.SecureLogTailMass
	effective := func(sigma float64) float64 {
		return sigma * clip / (clip + kernels.SecureGrid(sigma*clip)*math.Sqrt(d))
	}
	idealAcc, idealSolve := rc.newAcc, rc.solveSigma
	rc.newAcc = func(sigma float64) (privacy.Accountant, error) {
		if !(sigma*clip >= kernels.SecureStdMin && sigma*clip <= kernels.SecureStdMax) {
			return nil, fmt.Errorf("noise std σ·C = %v with --secure: want a value in [%g, %g]", sigma*clip, kernels.SecureStdMin, kernels.SecureStdMax)
		}
		a, err := idealAcc(effective(sigma))
		if err != nil {
			return nil, err
		}
		return privacy.NewNearIdeal(a, logRatio, logTail)
	}
	rc.solveSigma = func(steps int, b privacy.Budget) (float64, error) {
		ideal, err := privacy.NearIdealBudget(logRatio, steps, b)
		if err != nil {
			return 0, err
		}
		want, err := idealSolve(steps, ideal)
		if err != nil {
			return 0, err
		}
		sigma := want
		for range 64 {
			eff := effective(sigma)
			if eff >= want {
				return sigma, nil
			}
			sigma *= want / eff * (1 + 1e-15)
		}
		return 0, fmt.Errorf("--secure: no noise multiplier reaches σ_eff = %v", want)
	}
	return nil
}
