package accounting

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/dpsgd/dpsgd/privacy"
)

// TestPublicSize: a Spec with PublicSize states a Poisson guarantee for zero-out adjacency
// with the same numbers as add/remove, keeps approximations approximations, leaves the
// zero-out samplers as they are, and its ledger rebuilds the same accountant.
func TestPublicSize(t *testing.T) {
	for _, sp := range []Spec{
		{Sampler: privacy.SamplerPoisson, Method: MethodPLD, Sigma: 1.1, SampleRate: 0.01},
		{Sampler: privacy.SamplerPoisson, Method: MethodRDP, Sigma: 1.1, SampleRate: 0.01},
		{Sampler: privacy.SamplerPoisson, Method: MethodGDP, Sigma: 1.1, SampleRate: 0.01},
		{Sampler: privacy.SamplerPoissonTruncated, Method: MethodRDP, Sigma: 1.1, SampleRate: 0.01, DatasetSize: 10000, MaxBatch: 200},
		{Sampler: privacy.SamplerShuffle, Method: MethodGDP, Sigma: 1.1, Rounds: 100, SampleRate: 0.01},
	} {
		base, err := sp.New()
		if err != nil {
			t.Fatal(err)
		}
		pub := sp
		pub.PublicSize = true
		acc, err := pub.New()
		if err != nil {
			t.Fatal(err)
		}
		if acc.Adjacency() != privacy.AdjacencyZeroOut {
			t.Errorf("%s/%s: adjacency %q, want zero-out", sp.Sampler, sp.Method, acc.Adjacency())
		}
		if privacy.IsApproximate(acc) != privacy.IsApproximate(base) || acc.Name() != base.Name() || acc.Sampler() != base.Sampler() {
			t.Errorf("%s/%s: approximate %v/%v, name %s/%s", sp.Sampler, sp.Method, privacy.IsApproximate(acc), privacy.IsApproximate(base), acc.Name(), base.Name())
		}
		for _, steps := range []int{1, 100, 3000} {
			e0, err0 := base.Epsilon(steps, 1e-5)
			e1, err1 := acc.Epsilon(steps, 1e-5)
			if e0 != e1 || (err0 == nil) != (err1 == nil) {
				t.Errorf("%s/%s: ε(%d) %v (%v) against %v (%v)", sp.Sampler, sp.Method, steps, e1, err1, e0, err0)
			}
		}
		led, err := NewLedger(pub, 1e-5, nil)
		if err != nil {
			t.Fatal(err)
		}
		if led.Adjacency != privacy.AdjacencyZeroOut {
			t.Errorf("%s/%s: ledger adjacency %q", sp.Sampler, sp.Method, led.Adjacency)
		}
		raw, err := json.Marshal(led)
		if err != nil {
			t.Fatal(err)
		}
		read, err := ReadLedger(bytes.NewReader(raw))
		if err != nil || !read.PublicSize || read.Adjacency != privacy.AdjacencyZeroOut {
			t.Errorf("%s/%s: ledger round trip %s: %+v, %v", sp.Sampler, sp.Method, raw, read, err)
		}
		back, err := led.Accountant()
		if err != nil || back.Adjacency() != privacy.AdjacencyZeroOut {
			t.Errorf("%s/%s: rebuilt accountant %v, %v", sp.Sampler, sp.Method, back, err)
		}
	}
}
