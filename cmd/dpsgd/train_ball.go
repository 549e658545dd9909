package main

import (
	"fmt"
	"math"
	"strconv"

	"github.com/dpsgd/dpsgd"
	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/kernels"
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

// ballSwamp is how far ball noise of radius R swamps the gradient over a run of T steps of
// expected batch B and clip C: ρ = R/(B·C·√T).
//
// Why: a point uniform in a d-ball of radius R has E‖u‖² = R²·d/(d+2), so its norm is about R;
// the step divides the noisy sum by B (docs/design.md step 7), so each step moves the
// parameters by noise of norm about R/B, and T independent draws add up to a norm of about
// R·√T/B. The averaged clipped gradient has norm at most C, so T steps move the parameters
// along it by at most C·T. ρ is the ratio of the two: above 1 the noise the run accumulates
// outweighs the most signal it could accumulate (every gradient of full norm C, all aligned),
// and the model ends where the noise put it. On the synthetic problem (mlp, 10 classes) runs at
// ρ ≈ 1 ended at 13–16% test accuracy (chance: 10%), at ρ ≈ 0.2–0.25 at 25–31%, at ρ ≈ 0.05 at
// 62–73%, for batch sizes 64 to 1024 and 390 to 626 steps (docs/accounting.md, "When the noise
// swamps the gradient").
func ballSwamp(radius, batch, clip float64, steps int) float64 {
	return radius / (batch * clip * math.Sqrt(float64(steps)))
}

// ballWarning returns the warning of a ball-noise run whose radius makes learning impossible
// (ballSwamp > 1 over the planned steps), or "". It says which δ would bring the radius down to
// the edge of learning (ρ = 1) and to ρ = 0.05, each the δ that the run's own ball accountant
// gives at that radius over the planned steps, rounded up (and a radius rounded down): --delta at
// that value calibrates the radius to at most that (given is true when --radius was given: the advice is then a radius,
// with the δ it spends).
func ballWarning(priv *dpsgd.Private, clip float64, steps int, given bool) (string, error) {
	b := priv.Sampler.ExpectedBatchSize()
	rho := ballSwamp(priv.Radius, b, clip, steps)
	if !(rho > 1) {
		return "", nil
	}
	msg := fmt.Sprintf("dpsgd: warning: --noise ball: the radius R = %.4g swamps the gradient: R/(B·C·√T) = %.3g > 1 with B = %g, C = %g, T = %d planned steps "+
		"(the noise the steps add up is larger than the most the averaged gradient could add up); expect chance accuracy.", priv.Radius, rho, b, clip, steps)
	edge := b * clip * math.Sqrt(float64(steps))
	for i, target := range []float64{1, 0.05} {
		spec := priv.Spec
		spec.Radius = edge * target
		acc, err := spec.New()
		if err != nil {
			return "", fmt.Errorf("ball noise of radius %g: %w", spec.Radius, err)
		}
		d, err := acc.Delta(steps, 0)
		if err != nil {
			return "", fmt.Errorf("ball noise of radius %g: %w", spec.Radius, err)
		}
		d = sig3(d, true)
		where := "the edge of learning"
		if i > 0 {
			where = "where the synthetic problem reached 62–73% accuracy"
		}
		switch {
		case d >= 1:
			msg += fmt.Sprintf(" Even at R = %.4g (ρ = %g, %s) the planned steps would spend δ = 1: no --delta below 1 gets there.", spec.Radius, target, where)
		case given:
			msg += fmt.Sprintf(" --radius %s --delta %s (R = %.4g, ρ = %g, %s) would fit the planned steps.", formatSig3(sig3(spec.Radius/clip, false)), formatSig3(d), spec.Radius, target, where)
		default:
			msg += fmt.Sprintf(" --delta %s would calibrate R to %.4g (ρ = %g, %s).", formatSig3(d), spec.Radius, target, where)
		}
		if d >= 1 {
			break
		}
	}
	return msg + " Fewer epochs or a smaller model lower the δ needed (docs/accounting.md, \"When the noise swamps the gradient\").", nil
}

// sig3 rounds x > 0 to 3 significant digits, up or down.
func sig3(x float64, up bool) float64 {
	e := math.Pow(10, math.Floor(math.Log10(x))-2)
	if up {
		return math.Ceil(x/e) * e
	}
	return math.Floor(x/e) * e
}

// formatSig3 writes a value of sig3 (3 significant digits).
func formatSig3(x float64) string {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 3, 64), 64)
	return strconv.FormatFloat(v, 'g', -1, 64)
}
