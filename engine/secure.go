package engine

import (
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/engine/sampler"
	"github.com/dpsgd/dpsgd/kernels"
	"github.com/dpsgd/dpsgd/privacy"
)

// samplerKey returns the key of a secure sampler (sampler.Secure). A checkpoint holds only an
// HMAC of it under the run's secret; a resumed secure run must be given the same key (dpsgd
// train derives it from the run's key, checkpoint.RunKey.SamplerKey) to draw the same batches
// for the rest of the epoch.
func samplerKey(s sampler.Sampler) ([32]byte, bool) { return sampler.SecureKey(s) }

// SecureBounds returns the per-step bounds that privacy.NearIdeal needs for Config.Secure's
// noise over params coordinates: the log-ratio d·η and the log of the split-off tail mass
// d·3·10⁻³⁴⁸ (kernels.AddSecureGaussian, "Privacy of what is released", (3)).
func SecureBounds(params int) (logRatio, logTail float64) {
	d := float64(params)
	return d * kernels.SecureLogRatioBound, math.Log(d) + kernels.SecureLogTailMass
}

// SecureEffectiveSigma is the noise multiplier that a secure run's ideal accountant must be
// asked at: the clipped sum is rounded to the noise's grid g = kernels.SecureGrid(σC) before
// the discrete Gaussian is added, so the sensitivity grows from C to C + g√d and the
// multiplier is σ·C/(C + g√d) (kernels.AddSecureGaussian, (2)).
func SecureEffectiveSigma(sigma, clip float64, params int) float64 {
	return sigma * clip / (clip + kernels.SecureGrid(sigma*clip)*math.Sqrt(float64(params)))
}

// SecureAccounting turns the accounting of the ideal Gaussian mechanism into that of what
// Config.Secure releases. ideal builds the sampler's accountant at a noise multiplier and
// solveIdeal calibrates it (accounting.Spec.New and accounting.SolveSigma, say). The returned
// newAcc builds the ideal accountant at SecureEffectiveSigma and wraps it in privacy.NearIdeal
// with SecureBounds; solve asks solveIdeal for the budget NearIdeal leaves (NearIdealBudget),
// then raises σ until the effective multiplier reaches that solution. Train refuses a secure
// run whose accountant was not built this way.
func SecureAccounting(cfg Config, ideal func(sigma float64) (privacy.Accountant, error),
	solveIdeal func(steps int, b privacy.Budget) (float64, error)) (
	newAcc func(sigma float64) (privacy.Accountant, error), solve func(steps int, b privacy.Budget) (float64, error)) {
	params, clip := cfg.Arch.NumParams(), cfg.Clip
	logRatio, logTail := SecureBounds(params)
	newAcc = func(sigma float64) (privacy.Accountant, error) {
		if std := sigma * clip; !(std >= kernels.SecureStdMin && std <= kernels.SecureStdMax) {
			return nil, fmt.Errorf("noise std σ·C = %v with secure mode: want a value in [%g, %g]", std, kernels.SecureStdMin, kernels.SecureStdMax)
		}
		a, err := ideal(SecureEffectiveSigma(sigma, clip, params))
		if err != nil {
			return nil, err
		}
		return privacy.NewNearIdeal(a, logRatio, logTail)
	}
	solve = func(steps int, b privacy.Budget) (float64, error) {
		budget, err := privacy.NearIdealBudget(logRatio, steps, b)
		if err != nil {
			return 0, err
		}
		want, err := solveIdeal(steps, budget)
		if err != nil {
			return 0, err
		}
		sigma := want
		for range 64 {
			eff := SecureEffectiveSigma(sigma, clip, params)
			if eff >= want {
				return sigma, nil
			}
			sigma *= want / eff * (1 + 1e-15)
		}
		return 0, fmt.Errorf("secure mode: no noise multiplier reaches σ_eff = %v", want)
	}
	return newAcc, solve
}

// checkSecureAccountant refuses a secure private run whose accountant does not account for
// the secure sampler's deviation from the ideal Gaussian (SecureAccounting builds one that does).
func checkSecureAccountant(cfg *Config, acc privacy.Accountant) error {
	if !cfg.Secure || cfg.NonPrivate {
		return nil
	}
	logRatio, _ := SecureBounds(cfg.Arch.NumParams())
	if ni, ok := acc.(*privacy.NearIdeal); !ok || ni.LogRatio < logRatio {
		return fmt.Errorf("secure mode with accountant %s: the accountant must account for the secure sampler (engine.SecureAccounting builds one)", acc.Name())
	}
	return nil
}
