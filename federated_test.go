package dpsgd

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/personalized"
)

// baseFedPlan is a valid federated plan: 6 clients of 100 examples, ε ∈ {1, 4}, δ = 1e-5.
func baseFedPlan() FederatedPlan {
	p := FederatedPlan{Rounds: 20, Draws: 3, LocalSteps: 2, LocalBatch: 25, Clip: 1, Seed: 7}
	for i := range 6 {
		p.Clients = append(p.Clients, Client{ID: fmt.Sprintf("c%d", i), Epsilon: []float64{1, 4}[i%2], Delta: 1e-5})
		p.Examples = append(p.Examples, 100)
	}
	return p
}

func TestSplitDelta(t *testing.T) {
	for _, d := range []float64{1e-300, 1e-12, 1e-5, 0.01, 0.5, 0.999999} {
		dp, dt := SplitDelta(d)
		if dp != dt || !(dp > 0 && dp < d) {
			t.Errorf("δ = %v: split %v, %v: want equal parts in (0, δ)", d, dp, dt)
		}
		// Independent form: 1 − (1 − δ')(1 − δ‴) = δ.
		if got := -math.Expm1(2 * math.Log1p(-dp)); math.Abs(got-d) > 1e-14*d {
			t.Errorf("δ = %v: 1 − (1 − δ')² = %v", d, got)
		}
		if got := personalized.DeltaTotal(dp, dt); math.Abs(got-d) > 1e-14*d {
			t.Errorf("δ = %v: DeltaTotal(split) = %v", d, got)
		}
	}
	// Small δ: each part is δ/2 to first order (δ/(1 + √(1−δ)) = δ/2 + δ²/8 + …).
	if dp, _ := SplitDelta(1e-6); math.Abs(dp-(5e-7+1e-12/8)) > 1e-19 {
		t.Errorf("SplitDelta(1e-6) = %v, want 5.00000125e-7", dp)
	}
}

// TestClientResolveProperty: for random valid requests given in each of the four δ forms,
// Resolve completes a split with δ' + δ‴ − δ'δ‴ = δ, keeps what was given, and refuses every
// value outside its range, naming the field by its JSON key.
func TestClientResolveProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		d := math.Exp(-rng.Float64() * 30) // (1e-13, 1]
		if d >= 1 {
			continue
		}
		part := d * (0.01 + 0.98*rng.Float64())
		forms := []Client{
			{Delta: d},
			{Delta: d, DeltaPrime: part},
			{Delta: d, DeltaTail: part},
			{DeltaPrime: part, DeltaTail: d - part},
		}
		for k, c := range forms {
			c.ID, c.Epsilon = "x", 0.1+10*rng.Float64()
			r, err := c.Resolve()
			if err != nil {
				t.Fatalf("form %d %+v: %v", k, c, err)
			}
			if tot := personalized.DeltaTotal(r.DeltaPrime, r.DeltaTail); math.Abs(tot-r.Delta) > 1e-9*r.Delta {
				t.Fatalf("form %d %+v: δ' + δ‴ − δ'δ‴ = %v, δ = %v", k, r, tot, r.Delta)
			}
			if (c.Delta != 0 && r.Delta != c.Delta) || (c.DeltaPrime != 0 && r.DeltaPrime != c.DeltaPrime) || (c.DeltaTail != 0 && r.DeltaTail != c.DeltaTail) {
				t.Fatalf("form %d: given %+v, resolved %+v", k, c, r)
			}
		}
	}
	good := Client{ID: "x", Epsilon: 1, Delta: 1e-5}
	for _, c := range []struct {
		key    string
		mutate func(*Client)
	}{
		{"epsilon", func(c *Client) { c.Epsilon = 0 }},
		{"epsilon", func(c *Client) { c.Epsilon = math.Inf(1) }},
		{"epsilon", func(c *Client) { c.Epsilon = math.NaN() }},
		{"delta", func(c *Client) { c.Delta = 1 }},
		{"delta", func(c *Client) { c.Delta = -1e-5 }},
		{"delta", func(c *Client) { c.Delta = 0 }},
		{"delta", func(c *Client) { c.Delta, c.DeltaPrime, c.DeltaTail = 1e-5, 1e-6, 1e-6 }},
		{"delta_prime", func(c *Client) { c.DeltaPrime = 2e-5 }},
		{"delta_tail", func(c *Client) { c.DeltaTail = math.NaN() }},
		{"sample_rate", func(c *Client) { c.SampleRate = 1.5 }},
		{"share", func(c *Client) { c.Share = -0.5 }},
		{"sensitivity", func(c *Client) { c.Sensitivity = 0.5 }},
		{"sensitivity", func(c *Client) { c.Sensitivity = math.Inf(1) }},
	} {
		cl := good
		c.mutate(&cl)
		_, err := cl.Resolve()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.key || !errors.Is(err, ErrInvalid) || !strings.Contains(fe.Reason, "want") {
			t.Errorf("%+v: error %v, want a FieldError on %s saying what is valid", cl, err, c.key)
		}
	}
}

// TestFederatedResolveRefuses: every invalid plan is refused with a FieldError naming the field.
func TestFederatedResolveRefuses(t *testing.T) {
	cases := []struct {
		field  string
		mutate func(*FederatedPlan)
	}{
		{"Clients", func(p *FederatedPlan) { p.Clients, p.Examples = nil, nil }},
		{"Examples", func(p *FederatedPlan) { p.Examples = p.Examples[:5] }},
		{"Examples[2]", func(p *FederatedPlan) { p.Examples[2] = 0 }},
		{"Rounds", func(p *FederatedPlan) { p.Rounds = 0 }},
		{"Rounds", func(p *FederatedPlan) { p.Rounds = personalized.MaxDraws }},
		{"Draws", func(p *FederatedPlan) { p.Draws = 7 }},
		{"Draws", func(p *FederatedPlan) { p.Draws = 0 }},
		{"LocalSteps", func(p *FederatedPlan) { p.LocalSteps = 0 }},
		{"LocalBatch", func(p *FederatedPlan) { p.LocalBatch = -1 }},
		{"Clip", func(p *FederatedPlan) { p.Clip = 0 }},
		{"Clip", func(p *FederatedPlan) { p.Clip = math.NaN() }},
		{"Mode", func(p *FederatedPlan) { p.Mode = "input" }},
		{"Calibration", func(p *FederatedPlan) { p.Calibration = "rdp" }},
		{"Sampling", func(p *FederatedPlan) { p.Sampling = "poisson" }},
		{"Sampling", func(p *FederatedPlan) {
			p.Sampling = SamplingCategorical
			for i := range p.Clients {
				p.Clients[i].SampleRate = 0.5
			}
		}},
		{"LogisticK", func(p *FederatedPlan) { p.LogisticK = -1 }},
		{"Clients[3].id", func(p *FederatedPlan) { p.Clients[3].ID = "c0" }},
		{"Clients[1].id", func(p *FederatedPlan) { p.Clients[1].ID = "" }},
		{"Clients[1].epsilon", func(p *FederatedPlan) { p.Clients[1].Epsilon = -1 }},
		{"Clients[4].delta_tail", func(p *FederatedPlan) { p.Clients[4].DeltaTail = 1 }},
		{"sample_rate", func(p *FederatedPlan) { p.Clients[0].SampleRate = 0.1 }},
		{"share", func(p *FederatedPlan) {
			for i := range p.Clients {
				p.Clients[i].Share = 0.2
			}
		}},
		// δ‴ so large that Lemma 1's bound is 0: the client would never take part.
		{"Clients[0]", func(p *FederatedPlan) {
			p.Clients[0].Delta, p.Clients[0].DeltaPrime, p.Clients[0].DeltaTail = 0, 1e-6, 0.999999
			p.Clients[0].SampleRate = 1e-6
			for i := 1; i < len(p.Clients); i++ {
				p.Clients[i].SampleRate = 1e-6
			}
			p.Sampling = SamplingBernoulli
		}},
	}
	for _, c := range cases {
		p := baseFedPlan()
		p.Clients = append([]Client(nil), p.Clients...)
		p.Examples = append([]int(nil), p.Examples...)
		c.mutate(&p)
		_, err := p.Resolve()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: error %v, want a FieldError on %s", c.field, err, c.field)
		}
	}
	// A non-private plan does not check the budgets, nor the clip norm.
	p := baseFedPlan()
	p.NonPrivate, p.Clip = true, 0
	p.Clients[1].Epsilon = -1
	if _, err := p.Resolve(); err != nil {
		t.Errorf("non-private plan: %v", err)
	}
}

// TestFederatedResolve: the defaults (shares mᵢ/Σm, rates 1/N, categorical sampling), each
// client's noise meets its budget exactly at Rᵢ participations, its accountant is exact GDP
// composition (δ(ε) at the ε it reports is δ'ᵢ), and the guarantee sentences state ε, δ', the
// participations and the seed.
func TestFederatedResolve(t *testing.T) {
	p := baseFedPlan()
	p.Examples[0] = 300
	priv, err := p.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if priv.Plan.Mode != GradientPerturbation || priv.Plan.Calibration != CalibrationGDP || priv.Plan.Sampling != SamplingCategorical {
		t.Errorf("defaults: %q %q %q", priv.Plan.Mode, priv.Plan.Calibration, priv.Plan.Sampling)
	}
	if priv.Releases != p.LocalSteps {
		t.Errorf("releases %d, want I = %d", priv.Releases, p.LocalSteps)
	}
	if math.Abs(priv.Shares[0]-300.0/800) > 1e-15 || math.Abs(priv.Shares[1]-100.0/800) > 1e-15 {
		t.Errorf("shares %v, want mᵢ/Σm", priv.Shares)
	}
	for i, c := range priv.Clients {
		if priv.Rates[i] != 1.0/6 && math.Abs(priv.Rates[i]-1.0/6) > 1e-15 {
			t.Errorf("%s: rate %v, want 1/6", c.ID, priv.Rates[i])
		}
		if c.LocalBatch != 25 || c.Examples != p.Examples[i] {
			t.Errorf("%s: local batch %d, examples %d", c.ID, c.LocalBatch, c.Examples)
		}
		if math.Abs(c.EpsilonBound-c.Epsilon) > 1e-6*c.Epsilon || c.EpsilonBound > c.Epsilon {
			t.Errorf("%s: ε at Rᵢ = %v, budget %v", c.ID, c.EpsilonBound, c.Epsilon)
		}
		// The step's noise multiplier on the clipped sum is the release's on the mean times the
		// sum's sensitivity 2·sᵢ (in units of C).
		if c.StepSigma != c.Multiplier*2*c.Sensitivity {
			t.Errorf("%s: step σ %v, multiplier %v", c.ID, c.StepSigma, c.Multiplier)
		}
		for _, sel := range []int{0, 1, 5, c.RoundsBound} {
			eps, err := priv.Spent(i, sel)
			if err != nil {
				t.Fatal(err)
			}
			want, err := personalized.Spent(sel, p.LocalSteps, c.Multiplier, c.DeltaPrime)
			if err != nil || eps != want {
				t.Errorf("%s after %d: ε %v, personalized.Spent %v (%v)", c.ID, sel, eps, want, err)
			}
			if sel > 0 {
				d, err := c.Accountant.Delta(sel, eps)
				if err != nil || math.Abs(d-c.DeltaPrime) > 1e-6*c.DeltaPrime {
					t.Errorf("%s after %d: δ at its ε = %v, want δ' = %v (%v)", c.ID, sel, d, c.DeltaPrime, err)
				}
				mu := math.Sqrt(float64(sel*p.LocalSteps)) / c.Multiplier
				if d2, _ := privacy.GaussianDelta(mu, eps); d2 != d {
					t.Errorf("%s: accountant δ %v, μ-GDP δ %v", c.ID, d, d2)
				}
			}
		}
		s, err := priv.ClientGuarantee(i, 3)
		eps3, _ := priv.Spent(i, 3)
		if err != nil || !strings.Contains(s, fmt.Sprintf("ε = %.4g", eps3)) || !strings.Contains(s, "3 participations") ||
			!strings.Contains(s, "seed 7") || !strings.Contains(s, c.ID) {
			t.Errorf("%s: guarantee %q (%v)", c.ID, s, err)
		}
	}
	if !(priv.Clients[1].Multiplier < priv.Clients[0].Multiplier) {
		t.Errorf("ε = 4 multiplier %v, ε = 1 %v: want less noise for the larger budget", priv.Clients[1].Multiplier, priv.Clients[0].Multiplier)
	}
	// Output perturbation with I > 1: the trivial sensitivity 2C, one release per participation.
	p = baseFedPlan()
	p.Mode = OutputPerturbation
	out, err := p.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if out.Releases != 1 || out.Clients[0].Sensitivity != 25 || out.Clients[0].StepSigma != 0 {
		t.Errorf("output mode: releases %d, sensitivity factor %v, step σ %v", out.Releases, out.Clients[0].Sensitivity, out.Clients[0].StepSigma)
	}
	// Non-private: no accountant, no ε.
	p = baseFedPlan()
	p.NonPrivate = true
	np, err := p.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := np.Spent(0, 1); !errors.Is(err, ErrInvalid) {
		t.Errorf("non-private Spent: %v", err)
	}
	if g := np.Guarantee(); !strings.HasPrefix(g, "none") {
		t.Errorf("non-private guarantee %q", g)
	}
}
