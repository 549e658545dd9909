package allocation

import (
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/privacy"
)

// checkSigma validates a noise multiplier σ in (0, +Inf).
func checkSigma(sigma float64) error {
	if !(sigma > 0) || math.IsInf(sigma, 1) {
		return fmt.Errorf("allocation: sigma = %g out of range (0, +Inf): %w", sigma, privacy.ErrInvalidArgument)
	}
	return nil
}

// checkRounds validates M, the rounds per epoch, in [1, +Inf).
func checkRounds(rounds int) error {
	if rounds < 1 {
		return fmt.Errorf("allocation: rounds = %d out of range [1, +Inf): %w", rounds, privacy.ErrInvalidArgument)
	}
	return nil
}

// checkEpochs validates E, the number of epochs, in [1, +Inf).
func checkEpochs(epochs int) error {
	if epochs < 1 {
		return fmt.Errorf("allocation: epochs = %d out of range [1, +Inf): %w", epochs, privacy.ErrInvalidArgument)
	}
	return nil
}

// checkProb validates a probability-like target (δ or a total variation)
// named field in (0, 1).
func checkProb(field string, v float64) error {
	if !(v > 0 && v < 1) {
		return fmt.Errorf("allocation: %s = %g out of range (0, 1): %w", field, v, privacy.ErrInvalidArgument)
	}
	return nil
}

// epochsOf returns E = ⌈steps/rounds⌉, the epochs begun after steps steps; a
// partial epoch is accounted as a whole one (its releases are a prefix of the
// whole epoch's, so post-processing covers it).
func epochsOf(steps, rounds int) int {
	if steps <= 0 {
		return 0
	}
	return (steps-1)/rounds + 1
}

// checkSteps validates a step count in [0, +Inf).
func checkSteps(steps int) error {
	if steps < 0 {
		return fmt.Errorf("allocation: steps = %d out of range [0, +Inf): %w", steps, privacy.ErrInvalidArgument)
	}
	return nil
}

// checkEps validates ε in [0, +Inf).
func checkEps(eps float64) error {
	if !(eps >= 0) || math.IsInf(eps, 1) {
		return fmt.Errorf("allocation: eps = %g out of range [0, +Inf): %w", eps, privacy.ErrInvalidArgument)
	}
	return nil
}
