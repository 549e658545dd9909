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
	"github.com/dpsgd/dpsgd/privacy/ball"
)

// ballSpec returns a valid ball Spec for sampler.
func ballSpec(sampler string) Spec {
	s := Spec{Mechanism: MechanismBall, Sampler: sampler, Method: MethodBallTV, Dim: 100, Distance: 1, Radius: 50}
	switch sampler {
	case privacy.SamplerPoisson:
		s.SampleRate = 0.01
	case ball.SamplerUniform:
		s.DatasetSize, s.Distance = 1000, 2
	default:
		s.Rounds, s.SampleRate = 100, 0.01
	}
	return s
}

// TestBallSpecs: every ball sampler builds the ball accountant of the same
// configuration, is a guarantee, and passes a budget check.
func TestBallSpecs(t *testing.T) {
	samplers := SamplersFor(MechanismBall)
	if !reflect.DeepEqual(samplers, []string{"allocation", "poisson", "shuffle", "uniform"}) {
		t.Fatalf("ball samplers %v", samplers)
	}
	if !reflect.DeepEqual(SamplersFor(MechanismGaussian), Samplers()) || !reflect.DeepEqual(SamplersFor(""), Samplers()) || SamplersFor("laplace") != nil {
		t.Error("SamplersFor")
	}
	for _, sampler := range samplers {
		if ms := MethodsFor(MechanismBall, sampler); !reflect.DeepEqual(ms, []string{MethodBallTV}) {
			t.Errorf("%s: methods %v", sampler, ms)
		}
		spec := ballSpec(sampler)
		kind, err := spec.Kind()
		if err != nil || kind != KindGuarantee {
			t.Fatalf("%s: kind %q, %v", sampler, kind, err)
		}
		acc, err := spec.New()
		if err != nil {
			t.Fatal(err)
		}
		ref, err := ball.NewAccountant(spec.BallConfig())
		if err != nil {
			t.Fatal(err)
		}
		if acc.Name() != "ball-tv" || acc.Sampler() != sampler || acc.Adjacency() != ball.Adjacency(sampler) {
			t.Errorf("%s: %s %s %s", sampler, acc.Name(), acc.Sampler(), acc.Adjacency())
		}
		for _, steps := range []int{0, 1, 150, 5000} {
			a, _ := acc.Delta(steps, 1)
			b, _ := ref.DeltaTotal(steps)
			if a != b {
				t.Errorf("%s after %d steps: %g, ball.Accountant %g", sampler, steps, a, b)
			}
		}
		d, _ := acc.Delta(500, 0)
		if _, _, err := (privacy.Budget{Epsilon: 1, Delta: math.Min(0.5, 2*d)}).Check(acc, 500); err != nil {
			t.Errorf("%s: Budget.Check refused a guarantee: %v", sampler, err)
		}
	}
}

func TestBallSpecInvalid(t *testing.T) {
	for name, edit := range map[string]func(*Spec){
		"mechanism":          func(s *Spec) { s.Mechanism = "laplace" },
		"sigma":              func(s *Spec) { s.Sigma = 1 },
		"max_batch":          func(s *Spec) { s.MaxBatch = 10 },
		"method":             func(s *Spec) { s.Method = MethodRDP },
		"sampler":            func(s *Spec) { s.Sampler = privacy.SamplerPoissonTruncated },
		"dim":                func(s *Spec) { s.Dim = 0 },
		"radius":             func(s *Spec) { s.Radius = 0 },
		"distance":           func(s *Spec) { s.Distance = -1 },
		"rounds":             func(s *Spec) { s.Rounds = 0 },
		"radius NaN":         func(s *Spec) { s.Radius = math.NaN() },
		"gaussian with ball": func(s *Spec) { s.Mechanism, s.Method, s.Sigma = "", MethodGDP, 1 },
	} {
		s := ballSpec(privacy.SamplerShuffle)
		edit(&s)
		if _, err := s.New(); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	g := specFor(privacy.SamplerPoisson, MethodRDP)
	g.Mechanism = MechanismGaussian
	if _, err := g.New(); err != nil {
		t.Errorf("explicit gaussian: %v", err)
	}
}

// TestGaussianJSONUnchanged: a Gaussian spec writes none of the ball keys,
// and a ledger written before they existed reads and writes back unchanged.
func TestGaussianJSONUnchanged(t *testing.T) {
	old := `{"version":1,"sampler":"shuffle","accountant":"gdp","sigma":2,"sample_rate":0.1,"rounds":10,"adjacency":"zero-out","kind":"guarantee","delta":0.000001,"budget":{"epsilon":1,"delta":0.000001},"steps":20,"epochs":[{"epoch":1,"steps":10,"epsilon":0.5},{"epoch":2,"steps":20,"epsilon":null}]}`
	l, err := ReadLedger(strings.NewReader(old))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != old {
		t.Errorf("re-written ledger differs:\n%s\n%s", b, old)
	}
	for _, key := range []string{"mechanism", "radius", "dim", "distance"} {
		if bytes.Contains(b, []byte(`"`+key+`"`)) {
			t.Errorf("Gaussian ledger has key %q", key)
		}
	}
}

// TestBallLedger: a ball ledger round-trips, records ε = 0 and +Inf (null),
// and ReadLedger checks the ball fields.
func TestBallLedger(t *testing.T) {
	spec := ballSpec(ball.SamplerUniform)
	l, err := NewLedger(spec, 1e-3, &privacy.Budget{Epsilon: 0, Delta: 1e-3})
	if err != nil {
		t.Fatal(err)
	}
	if l.Adjacency != ball.AdjacencyReplaceOne || l.Kind != KindGuarantee {
		t.Errorf("ledger adjacency %q kind %q", l.Adjacency, l.Kind)
	}
	for e, eps := range []float64{0, math.Inf(1)} {
		if err := l.Record(e+1, (e+1)*1000, eps); err != nil {
			t.Fatal(err)
		}
	}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"mechanism":"ball"`, `"radius":50`, `"dim":100`, `"distance":2`, `"accountant":"ball-tv"`} {
		if !bytes.Contains(b, []byte(key)) {
			t.Errorf("ledger JSON lacks %s: %s", key, b)
		}
	}
	back, err := ReadLedger(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !reflect.DeepEqual(l, back) {
		t.Errorf("round trip:\n%+v\n%+v", l, back)
	}
	good := string(b)
	for name, edit := range map[string][2]string{
		"mechanism": {`"mechanism":"ball"`, `"mechanism":"balls"`},
		"no mech":   {`"mechanism":"ball",`, ``},
		"sigma":     {`"sigma":0`, `"sigma":1`},
		"dim":       {`"dim":100`, `"dim":0`},
		"radius":    {`"radius":50`, `"radius":-50`},
		"distance":  {`"distance":2`, `"distance":-2`},
		"size":      {`"dataset_size":1000`, `"dataset_size":0`},
		"adjacency": {`"replace one"`, `"zero-out"`},
		"kind":      {`"kind":"guarantee"`, `"kind":"approximation"`},
		"dim type":  {`"dim":100`, `"dim":1.5`},
	} {
		bad := strings.Replace(good, edit[0], edit[1], 1)
		if bad == good {
			t.Fatalf("%s: edit did not apply to %s", name, good)
		}
		if _, err := ReadLedger(strings.NewReader(bad)); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("%s: error %v, want ErrInvalidArgument", name, err)
		}
	}
}

// TestBallSolvers: SolveRadius meets the target and 2e-10 less does not;
// SolveEpochs gives the last epoch whose total δ fits; SolveSigma refuses
// ball specs and SolveRadius Gaussian ones.
func TestBallSolvers(t *testing.T) {
	target := privacy.Budget{Epsilon: 0, Delta: 1e-3}
	for _, sampler := range SamplersFor(MechanismBall) {
		spec := ballSpec(sampler)
		const steps = 2000
		r, err := SolveRadius(spec, steps, target)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			r  float64
			ok bool
		}{{r, true}, {r * (1 - 2e-10), false}} {
			s := spec
			s.Radius = c.r
			ok, err := within(s, steps, target)
			if err != nil || ok != c.ok {
				t.Errorf("%s: at r = %.12g within = %v (%v), want %v", sampler, c.r, ok, err, c.ok)
			}
		}
	}
	spec := ballSpec(privacy.SamplerShuffle)
	spec.Radius = 20000
	e, err := SolveEpochs(spec, spec.Rounds, target)
	if err != nil {
		t.Fatal(err)
	}
	acc, _ := spec.New()
	for _, c := range []struct {
		epochs int
		ok     bool
	}{{e, true}, {e + 1, false}} {
		d, _ := acc.Delta(c.epochs*spec.Rounds, 0)
		if (d <= target.Delta) != c.ok {
			t.Errorf("SolveEpochs = %d: after %d epochs δ = %g", e, c.epochs, d)
		}
	}
	if _, err := SolveSigma(ballSpec(privacy.SamplerPoisson), 10, target); !errors.Is(err, privacy.ErrInvalidArgument) {
		t.Errorf("SolveSigma on ball: %v", err)
	}
	if _, err := SolveRadius(specFor(privacy.SamplerPoisson, MethodRDP), 10, target); !errors.Is(err, privacy.ErrInvalidArgument) {
		t.Errorf("SolveRadius on gaussian: %v", err)
	}
	bad := ballSpec(privacy.SamplerPoisson)
	bad.Dim = 0
	if _, err := SolveRadius(bad, 10, target); !errors.Is(err, privacy.ErrInvalidArgument) {
		t.Errorf("SolveRadius with dim 0: %v", err)
	}
}
