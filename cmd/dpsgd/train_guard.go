package main

import (
	"errors"
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/engine"
)

// The usability guard of dpsgd train: a run that ends normally but learned nothing usable
// exits 1 (not 2: the command line was valid) after its report, saying why on stderr, unless
// --allow-chance. It is a check of usefulness, not of privacy: the test accuracy it reads is not
// covered by the guarantee (not_covered_by_guarantee in the JSON), and neither are the
// training-loss counts, which it reads only where they are released anyway (--private-stats)
// or where there is nothing to protect (--non-private), so that the exit status says nothing
// more about the training data than the report does.

// errUnusable marks a run refused by the usability guard (exit 1).
var errUnusable = errors.New("the run learned nothing usable")

// chanceZ is how many standard errors above 1/K a test accuracy must be not to count as chance.
//
// A model that learned nothing from the data predicts independently of the true label. With K
// balanced test classes its accuracy on n test examples is then a binomial proportion with mean
// 1/K and standard error √((1/K)(1 − 1/K)/n) (a fixed class gets the class's share, 1/K on
// average). At 2 standard errors such a model passes about 2.3% of the time, and a model whose
// true accuracy is 4 standard errors above chance is refused about as rarely: the two mistakes
// are balanced there. A higher line would refuse models that did learn a little on small test
// sets (75 test examples of 2 classes: 3 standard errors is 67%). 1/K is the level used, not the
// majority-class rate, because the class shares of private data are not public. Unbalanced test
// classes let a constant predictor score above the line: the guard then misses that run.
const chanceZ = 2

// chanceLevel is the highest test accuracy counted as chance for k classes on n test examples:
// 1/k + chanceZ standard errors (see chanceZ).
func chanceLevel(k, n int) float64 {
	p := 1 / float64(k)
	return p + chanceZ*math.Sqrt(p*(1-p)/float64(n))
}

// usable is the guard: nil for a run worth keeping, else an error wrapping errUnusable that
// says why. It judges runs that ended normally (finished, or stopped by the budget) after at
// least one epoch; the others exit non-zero already, or measured nothing. hint, if not empty,
// ends the message (what to change).
func (f *trainFlags) usable(res *engine.Result, classes, nTest int, hint string) error {
	if f.allowChance || res.EpochsRun == 0 {
		return nil
	}
	var why string
	if f.privateStats || f.nonPrivate {
		examples := 0
		for _, e := range res.History {
			examples += e.ExamplesSeen
		}
		switch {
		case 2*res.NonFiniteLoss > res.Steps:
			why = fmt.Sprintf("the training loss was not finite at %d of its %d steps", res.NonFiniteLoss, res.Steps)
		case examples > 0 && 2*res.NonFinite > examples:
			why = fmt.Sprintf("%d of the %d examples drawn had a non-finite gradient (zeroed, so their loss is unknown)", res.NonFinite, examples)
		}
	}
	if why == "" && classes >= 2 && nTest > 0 {
		if lvl := chanceLevel(classes, nTest); !(res.TestAccuracy > lvl) {
			why = fmt.Sprintf("its test accuracy %.4f is at chance for %d classes (at most 1/%d + %d standard errors over %d test examples = %.4f)",
				res.TestAccuracy, classes, classes, chanceZ, nTest, lvl)
		}
	}
	if why == "" {
		return nil
	}
	if hint != "" {
		hint = "; " + hint
	}
	return fmt.Errorf("%w: %s%s. This is a usability check, not part of the privacy guarantee (the test accuracy is not covered by it); "+
		"--allow-chance accepts such a run", errUnusable, why, hint)
}

// budgetStop says why the budget stopped the run, with the numbers: the epoch that did not fit,
// what the run's spending would have become with it, the budget, and the noise.
func budgetStop(rc *runConfig, res *engine.Result, out trainJSON) string {
	m := rc.priv.Sampler.StepsPerEpoch()
	next := (res.Steps+m-1)/m*m + m
	acc, b := rc.priv.Accountant, rc.priv.Budget
	if rc.cfg.Noise == engine.NoiseBall {
		now := 0.0
		if out.DeltaSpent != nil {
			now = *out.DeltaSpent
		}
		after := "more"
		if d, err := acc.Delta(next, 0); err == nil {
			after = fmt.Sprintf("%.4g", d)
		}
		return fmt.Sprintf("stopped by the budget: epoch %d would take the total δ from %.4g to %s, above the budget δ = %g (ball radius R = %.4g)",
			next/m, now, after, b.Delta, rc.cfg.Radius)
	}
	now := 0.0
	if out.Epsilon != nil {
		now = *out.Epsilon
	}
	after := "no finite ε"
	if e, err := acc.Epsilon(next, b.Delta); err == nil && !math.IsInf(e, 0) {
		after = fmt.Sprintf("%.4g", e)
	}
	return fmt.Sprintf("stopped by the budget: epoch %d would take ε from %.4g to %s, above the budget ε = %g at δ = %g (σ = %.4g)",
		next/m, now, after, b.Epsilon, b.Delta, rc.cfg.Sigma)
}
