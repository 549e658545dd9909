package main

import (
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
