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

// checkSigmaRounds checks σ, then M.
func checkSigmaRounds(sigma float64, rounds int) error {
	if err := checkSigma(sigma); err != nil {
		return err
	}
	return checkRounds(rounds)
}

// checkSigmaRoundsEpochs checks σ, M, then E.
func checkSigmaRoundsEpochs(sigma float64, rounds, epochs int) error {
	if err := checkSigmaRounds(sigma, rounds); err != nil {
		return err
	}
	return checkEpochs(epochs)
}

// checkSigmaSolve checks the arguments of the σ solvers (ChiSquareSigma,
// ExactSigma): the target tv, then M, then E.
func checkSigmaSolve(tv float64, rounds, epochs int) error {
	if err := checkProb("tv", tv); err != nil {
		return err
	}
	if err := checkRounds(rounds); err != nil {
		return err
	}
	return checkEpochs(epochs)
}

// checkRoundsSolve checks the arguments of the rounds solvers
// (ChiSquareRounds, ExactRounds, BerryEsseenRounds): σ, then the target
// named field, then E.
func checkRoundsSolve(sigma float64, field string, target float64, epochs int) error {
	if err := checkSigma(sigma); err != nil {
		return err
	}
	if err := checkProb(field, target); err != nil {
		return err
	}
	return checkEpochs(epochs)
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
