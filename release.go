package dpsgd

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/model"
)

// Release returns the public statement of what res guarantees, for the model file (package
// model) that releases res.Model: the sentence of Guarantee, in which a seeded run names a seed
// that is not in the file instead of its value (whoever knows the seed can regenerate the noise,
// so the file must not hold it), the (ε, δ) of the statement (for ball noise ε = 0 and the total
// δ spent), the steps taken and the steps ε covers, the accountant, the sampler, the adjacency,
// the mechanism, whether the noise was secure, and a copy of the ledger. An interrupted run
// releases the ε of the steps charged, as Guarantee states it.
//
// A run that is not private, that took no step (its parameters are the initialization, drawn
// from the seed) or whose ε is infinite at δ has nothing to release: an error wrapping ErrInvalid.
func (p *Private) Release(res *engine.Result) (model.Guarantee, error) {
	switch {
	case p.Plan.NonPrivate:
		return model.Guarantee{}, fmt.Errorf("dpsgd: release: a non-private run has no guarantee; its model is not a DP release: %w", ErrInvalid)
	case res.Steps < 1:
		return model.Guarantee{}, fmt.Errorf("dpsgd: release: no step taken; the parameters are the initialization, drawn from the seed: %w", ErrInvalid)
	}
	s, err := p.Guarantee(res)
	if err != nil {
		return model.Guarantee{}, err
	}
	if !p.Plan.Secure {
		scope := p.scope()
		if !strings.HasSuffix(s, scope) {
			return model.Guarantee{}, fmt.Errorf("dpsgd: release: the guarantee sentence does not end with its scope %q", scope)
		}
		s = strings.TrimSuffix(s, scope) + "; the noise and batches are pseudorandom from a seed that is not in this file, " +
			"so the guarantee holds only while that seed is secret (anyone who knows it can regenerate the noise): a research run, use --secure for a release"
	}
	g := model.Guarantee{
		Statement: s, Epsilon: res.Epsilon, Delta: p.Plan.Delta, Steps: res.Steps, EpsilonSteps: res.EpsilonSteps,
		Accountant: p.Accountant.Name(), Sampler: p.Accountant.Sampler(), Adjacency: p.Accountant.Adjacency(),
		Mechanism: model.MechanismGaussian, Secure: p.Plan.Secure,
	}
	if p.Plan.UserLevel {
		g.Unit = UnitUser
	}
	if p.Plan.ball() {
		g.Mechanism, g.Epsilon = model.MechanismBall, 0
		if g.Delta, err = p.DeltaSpent(res); err != nil {
			return model.Guarantee{}, err
		}
	}
	if math.IsInf(g.Epsilon, 1) {
		return model.Guarantee{}, fmt.Errorf("dpsgd: release: ε is infinite at δ = %g after %d steps: no guarantee to state: %w", p.Plan.Delta, res.EpsilonSteps, ErrInvalid)
	}
	if p.Ledger != nil {
		l := *p.Ledger
		l.Epochs = slices.Clone(l.Epochs)
		if l.Budget != nil {
			b := *l.Budget
			l.Budget = &b
		}
		g.Ledger = &l
	}
	if err := g.Validate(); err != nil {
		return model.Guarantee{}, fmt.Errorf("dpsgd: release: %w", err)
	}
	return g, nil
}
