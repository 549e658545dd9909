package accounting

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/privacy"
)

// specFor returns a valid spec for sampler and method.
func specFor(sampler, method string) Spec {
	s := Spec{Sampler: sampler, Method: method, Sigma: 1.1}
	switch sampler {
	case privacy.SamplerPoisson:
		s.SampleRate = 0.01
	case privacy.SamplerPoissonTruncated:
		s.SampleRate, s.DatasetSize, s.MaxBatch = 0.01, 10000, 200
	default:
		s.Rounds, s.SampleRate = 100, 0.01
	}
	return s
}

// TestEveryMethod builds every (sampler, method) pair and checks what it says
// about itself: the sampler it is for, the neighbouring relation, and that
// only guarantees pass a budget check.
func TestEveryMethod(t *testing.T) {
	for _, sampler := range Samplers() {
		ms := Methods(sampler)
		if len(ms) == 0 || ms[0] != DefaultMethod(sampler) {
			t.Fatalf("%s: methods %v, default %q", sampler, ms, DefaultMethod(sampler))
		}
		for _, m := range ms {
			spec := specFor(sampler, m)
			acc, err := spec.New()
			if err != nil {
				t.Fatalf("%s/%s: %v", sampler, m, err)
			}
			kind, _ := spec.Kind()
			if acc.Sampler() != sampler {
				t.Errorf("%s/%s: Sampler() = %q", sampler, m, acc.Sampler())
			}
			wantAdj := privacy.AdjacencyZeroOut
			if sampler == privacy.SamplerPoisson || sampler == privacy.SamplerPoissonTruncated || kind == KindAssumesPoisson {
				wantAdj = privacy.AdjacencyAddRemove
			}
			if acc.Adjacency() != wantAdj {
				t.Errorf("%s/%s: Adjacency() = %q, want %q", sampler, m, acc.Adjacency(), wantAdj)
			}
			_, _, err = privacy.Budget{Epsilon: 100, Delta: 0.5}.Check(acc, 10)
			if kind == KindGuarantee && err != nil {
				t.Errorf("%s/%s: a guarantee refused by Budget.Check: %v", sampler, m, err)
			}
			if kind != KindGuarantee && !errors.Is(err, privacy.ErrNotCertified) {
				t.Errorf("%s/%s (%s): Budget.Check error %v, want ErrNotCertified", sampler, m, kind, err)
			}
			d, err := acc.Delta(spec.Rounds+10, 1)
			if err != nil || !(d >= 0 && d <= 1) {
				t.Errorf("%s/%s: Delta = %g, %v", sampler, m, d, err)
			}
		}
	}
	if DefaultMethod("nope") != "" || Methods("nope") != nil {
		t.Error("unknown sampler has methods")
	}
	for _, bad := range []Spec{
		{Sampler: "nope", Method: "rdp", Sigma: 1},
		{Sampler: privacy.SamplerPoisson, Method: MethodExact, Sigma: 1, SampleRate: 0.1},
		{Sampler: privacy.SamplerPoisson, Method: MethodRDP, Sigma: 0, SampleRate: 0.1},
		{Sampler: privacy.SamplerPoisson, Method: MethodRDP, Sigma: math.NaN(), SampleRate: 0.1},
		{Sampler: privacy.SamplerPoisson, Method: MethodRDP, Sigma: 1, SampleRate: 1.5},
		{Sampler: privacy.SamplerShuffle, Method: MethodGDP, Sigma: 1, Rounds: 0},
		{Sampler: privacy.SamplerPoissonTruncated, Method: MethodRDP, Sigma: 1, SampleRate: 0.1, DatasetSize: 10, MaxBatch: 11},
	} {
		if _, err := bad.New(); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("%+v: error %v, want ErrInvalidArgument", bad, err)
		}
	}
}

// TestAssumedPoissonIsPoisson: the shuffle "what Poisson would claim" numbers
// are exactly Poisson accounting at q = 1/M.
func TestAssumedPoissonIsPoisson(t *testing.T) {
	spec := specFor(privacy.SamplerShuffle, MethodRDP)
	acc, err := spec.New()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := privacy.NewPoissonRDP(1/float64(spec.Rounds), spec.Sigma, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := acc.Epsilon(1000, 1e-5)
	b, _ := ref.Epsilon(1000, 1e-5)
	if a != b || !strings.Contains(acc.Name(), "assuming poisson") {
		t.Errorf("assumed Poisson ε = %g (%s), Poisson RDP ε = %g", a, acc.Name(), b)
	}
}

// TestAsymptoticGDPMatchesCLT: van Dijk & Ertan's Theorem 5.2 μ equals the Poisson
// central-limit μ with q = 1/M and T = E·M (Bu et al. 2019).
func TestAsymptoticGDPMatchesCLT(t *testing.T) {
	for _, c := range []struct {
		sigma  float64
		rounds int
	}{{0.8, 100}, {1, 1000}, {2, 50}} {
		g, err := newAsymptoticGDP(c.sigma, c.rounds)
		if err != nil {
			t.Fatal(err)
		}
		clt, err := privacy.NewGDPCLT(1/float64(c.rounds), c.sigma)
		if err != nil {
			t.Fatal(err)
		}
		steps := 7 * c.rounds
		if got, want := g.Mu(steps), clt.Mu(steps); math.Abs(got-want) > 1e-12*want {
			t.Errorf("σ=%g M=%d: μ = %.15g, CLT μ = %.15g", c.sigma, c.rounds, got, want)
		}
	}
}

func TestLedgerRoundTrip(t *testing.T) {
	spec := specFor(privacy.SamplerAllocation, MethodRDP)
	l, err := NewLedger(spec, 1e-5, &privacy.Budget{Epsilon: 3, Delta: 1e-5})
	if err != nil {
		t.Fatal(err)
	}
	for e, eps := range []float64{0.5, 0.9, math.Inf(1)} {
		if err := l.Record(e+1, (e+1)*spec.Rounds, eps); err != nil {
			t.Fatal(err)
		}
	}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(b) || bytes.Contains(b, []byte("Inf")) {
		t.Fatalf("ledger JSON %s", b)
	}
	back, err := ReadLedger(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !reflect.DeepEqual(l, back) {
		t.Errorf("round trip:\n%+v\n%+v", l, back)
	}
	acc, err := back.Accountant()
	if err != nil {
		t.Fatal(err)
	}
	if acc.Sampler() != privacy.SamplerAllocation || acc.Adjacency() != back.Adjacency {
		t.Errorf("rebuilt %s/%s", acc.Sampler(), acc.Adjacency())
	}
	if err := l.Record(9, 1, 0.1); !errors.Is(err, privacy.ErrInvalidArgument) {
		t.Errorf("steps going back: %v", err)
	}
	if err := l.Record(9, 1e6, math.NaN()); !errors.Is(err, privacy.ErrInvalidArgument) {
		t.Errorf("NaN ε: %v", err)
	}
}

func TestReadLedgerRejects(t *testing.T) {
	good := `{"version":1,"sampler":"poisson","accountant":"rdp","sigma":1,"sample_rate":0.01,"adjacency":"add/remove one","kind":"guarantee","delta":1e-5,"steps":200,"epochs":[{"epoch":1,"steps":100,"epsilon":0.5},{"epoch":2,"steps":200,"epsilon":null}]}`
	if _, err := ReadLedger(strings.NewReader(good)); err != nil {
		t.Fatalf("good ledger: %v", err)
	}
	for name, edit := range map[string][2]string{
		"version":        {`"version":1`, `"version":2`},
		"unknown field":  {`"steps":200`, `"steps":200,"x":1`},
		"sigma":          {`"sigma":1`, `"sigma":-1`},
		"delta":          {`"delta":1e-5`, `"delta":1`},
		"kind":           {`"kind":"guarantee"`, `"kind":"lower bound"`},
		"adjacency":      {`"add/remove one"`, `"zero-out"`},
		"method":         {`"accountant":"rdp"`, `"accountant":"exact"`},
		"epoch steps":    {`"steps":100`, `"steps":300`},
		"negative steps": {`"steps":200,"epochs"`, `"steps":-1,"epochs"`},
		"epsilon":        {`"epsilon":0.5`, `"epsilon":-0.5`},
		"trailing":       {`]}`, `]}{}`},
		"type":           {`"sigma":1`, `"sigma":"1"`},
	} {
		bad := strings.Replace(good, edit[0], edit[1], 1)
		if bad == good {
			t.Fatalf("%s: edit did not apply", name)
		}
		if _, err := ReadLedger(strings.NewReader(bad)); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("%s: error %v, want ErrInvalidArgument", name, err)
		}
	}
}

// FuzzReadLedger: any input is either refused with an error or accepted and
// then survives a write/read round trip unchanged.
func FuzzReadLedger(f *testing.F) {
	f.Add([]byte(`{"version":1,"sampler":"poisson","accountant":"rdp","sigma":1,"sample_rate":0.01,"adjacency":"add/remove one","kind":"guarantee","delta":1e-5,"steps":200,"epochs":[{"epoch":1,"steps":100,"epsilon":0.5}]}`))
	f.Add([]byte(`{"version":1,"sampler":"shuffle","accountant":"gdp","sigma":2,"rounds":10,"adjacency":"zero-out","kind":"guarantee","delta":1e-6,"budget":{"epsilon":1,"delta":1e-6},"steps":0,"epochs":[]}`))
	f.Add([]byte(`{"version":1,"sampler":"uniform","accountant":"ball-tv","sigma":0,"dataset_size":1000,"mechanism":"ball","radius":50,"dim":100,"distance":2,"adjacency":"replace one","kind":"guarantee","delta":0.001,"steps":2000,"epochs":[{"epoch":1,"steps":1000,"epsilon":0},{"epoch":2,"steps":2000,"epsilon":null}]}`))
	f.Add([]byte(`{"version":1,"sampler":"poisson","accountant":"ball-tv","sigma":0,"sample_rate":0.01,"mechanism":"ball","radius":3,"dim":7,"distance":1,"adjacency":"add/remove one","kind":"guarantee","delta":0.01,"steps":0,"epochs":[]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ReadLedger(bytes.NewReader(data))
		if err != nil {
			return
		}
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatalf("accepted ledger does not marshal: %v", err)
		}
		back, err := ReadLedger(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("re-read: %v\n%s", err, b)
		}
		if !reflect.DeepEqual(l, back) {
			t.Fatalf("round trip changed the ledger:\n%+v\n%+v", l, back)
		}
	})
}
