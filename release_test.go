package dpsgd

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/model"
)

// TestRelease: the released guarantee of a seeded run is Guarantee's sentence with the seed
// replaced by a mention of a seed not in the file (the seed's digits appear nowhere in it), with
// ε, δ and the steps of the result, the accountant's names and a copy of the ledger; a secure
// run's is Guarantee's sentence as it is; ball noise releases (0, δ spent); a non-private run,
// a run without a step and an infinite ε release nothing.
func TestRelease(t *testing.T) {
	ctx := context.Background()
	p := basePlan()
	p.Sigma, p.TargetEpsilon, p.Seed = 1, 0, 918273645
	priv, err := p.Resolve(ctx, 500, testArch, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := priv.Sampler.StepsPerEpoch()
	eps, err := priv.Accountant.Epsilon(m, p.Delta)
	if err != nil {
		t.Fatal(err)
	}
	if err := priv.Ledger.Record(1, m, eps); err != nil {
		t.Fatal(err)
	}
	res := &engine.Result{Epsilon: eps, Steps: m - 3, EpsilonSteps: m}
	g, err := priv.Release(res)
	if err != nil {
		t.Fatal(err)
	}
	full, _ := priv.Guarantee(res)
	seed := strconv.FormatUint(p.Seed, 10)
	if strings.Contains(g.Statement, seed) || !strings.Contains(full, seed) {
		t.Errorf("statement %q holds the seed %s (or the sentence %q does not)", g.Statement, seed, full)
	}
	prefix, _, _ := strings.Cut(full, "; the noise and batches")
	if !strings.HasPrefix(g.Statement, prefix+"; the noise and batches are pseudorandom from a seed that is not in this file") {
		t.Errorf("statement %q, want the sentence %q up to its scope", g.Statement, prefix)
	}
	if g.Epsilon != eps || g.Delta != p.Delta || g.Steps != m-3 || g.EpsilonSteps != m || g.Accountant != "pld" || g.Sampler != "poisson" ||
		g.Adjacency != priv.Accountant.Adjacency() || g.Mechanism != model.MechanismGaussian || g.Secure || g.Ledger == priv.Ledger ||
		g.Ledger.Steps != m || len(g.Ledger.Epochs) != 1 {
		t.Errorf("released %+v", g)
	}

	s := basePlan()
	s.Sigma, s.TargetEpsilon, s.Secure = 1, 0, true
	sp, err := s.Resolve(ctx, 500, testArch, &Options{SamplerKey: func() ([32]byte, error) { return [32]byte{1}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	seps, _ := sp.Accountant.Epsilon(m, s.Delta)
	_ = sp.Ledger.Record(1, m, seps)
	sres := &engine.Result{Epsilon: seps, Steps: m, EpsilonSteps: m}
	sg, err := sp.Release(sres)
	sfull, _ := sp.Guarantee(sres)
	if err != nil || sg.Statement != sfull || !sg.Secure {
		t.Errorf("secure: %q (%v), want %q", sg.Statement, err, sfull)
	}

	b := Plan{Sampler: Shuffle, BatchSize: 50, Epochs: 2, Clip: 0.5, Delta: 0.3, Noise: engine.NoiseBall, Seed: 5}
	bp, err := b.Resolve(ctx, 500, testArch, nil)
	if err != nil {
		t.Fatal(err)
	}
	bm := bp.Sampler.StepsPerEpoch()
	_ = bp.Ledger.Record(1, bm, 0)
	bres := &engine.Result{Steps: bm, EpsilonSteps: bm}
	bg, err := bp.Release(bres)
	spent, _ := bp.DeltaSpent(bres)
	if err != nil || bg.Mechanism != model.MechanismBall || bg.Epsilon != 0 || bg.Delta != spent || !(spent > 0 && spent < 0.3) {
		t.Errorf("ball: %+v (%v), δ spent %v", bg, err, spent)
	}

	for name, c := range map[string]struct {
		priv *Private
		res  *engine.Result
	}{
		"no step":    {priv, &engine.Result{Epsilon: 0, Steps: 0, EpsilonSteps: 0}},
		"infinite ε": {priv, &engine.Result{Epsilon: math.Inf(1), Steps: m, EpsilonSteps: m}},
	} {
		if _, err := c.priv.Release(c.res); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	np := basePlan()
	np.NonPrivate = true
	npriv, err := np.Resolve(ctx, 500, testArch, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := npriv.Release(&engine.Result{Steps: 5}); !errors.Is(err, ErrInvalid) {
		t.Errorf("non-private: %v, want ErrInvalid", err)
	}
}

// TestReleaseShuffle: a shuffled run releases its guarantee, whose accountant is the name of the
// ledger's accountant ("gaussian-epochs" for the ledger's method "gdp"), and the model file's
// check accepts it; a released accountant name that is neither is refused.
func TestReleaseShuffle(t *testing.T) {
	ctx := context.Background()
	p := Plan{Sampler: Shuffle, BatchSize: 50, Epochs: 2, Clip: 1, Sigma: 1, Delta: 1e-5, Seed: 7}
	priv, err := p.Resolve(ctx, 500, testArch, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := priv.Sampler.StepsPerEpoch()
	eps, err := priv.Accountant.Epsilon(m, p.Delta)
	if err != nil {
		t.Fatal(err)
	}
	if err := priv.Ledger.Record(1, m, eps); err != nil {
		t.Fatal(err)
	}
	g, err := priv.Release(&engine.Result{Epsilon: eps, Steps: m, EpsilonSteps: m})
	if err != nil {
		t.Fatalf("release of a shuffled run: %v", err)
	}
	if g.Accountant != priv.Accountant.Name() || g.Sampler != "shuffle" || g.Ledger.Method == g.Accountant {
		t.Errorf("released accountant %q sampler %q, ledger method %q", g.Accountant, g.Sampler, g.Ledger.Method)
	}
	bad := g
	bad.Accountant = "rdp"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "the ledger says") {
		t.Errorf("accountant rdp on a gdp ledger: %v, want refused", err)
	}
}
