package dpsgd

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/privacy/accounting"
)

// withUsers gives d's examples to users users, user 0 owning 40% of them.
func withUsers(t *testing.T, d *datasets.Dataset, users int) {
	t.Helper()
	if err := datasets.AssignUsers(d, users, 4); err != nil {
		t.Fatal(err)
	}
	for i := users; i < d.N; i++ {
		if i%5 < 2 {
			d.User[i] = 0
		}
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestUserLevelRun: a user-level plan trains through the door over the users. Its ε equals the
// record-level accountant's at N = users with the same rate and steps (a second method: the
// accounting spec built by hand), its guarantee says user-level and counts users, and the
// engine's configuration carries the unit; shuffle sampling of users runs too.
func TestUserLevelRun(t *testing.T) {
	const users = 40
	train, test := clouds(400, 1), clouds(100, 2)
	withUsers(t, train, users)
	for _, s := range []Sampler{Poisson, Shuffle} {
		p := Plan{Sampler: s, BatchSize: 8, Epochs: 2, Clip: 1, Sigma: 1.1, Delta: 1e-5, Seed: 3, UserLevel: true, MaxUserRecords: 16}
		priv, err := p.Resolve(context.Background(), train.Users, testArch, nil)
		if err != nil {
			t.Fatal(err)
		}
		if priv.Unit() != UnitUser || priv.N != users || priv.Sampler.DatasetSize() != users {
			t.Fatalf("%s: unit %q, N %d, sampler over %d", s, priv.Unit(), priv.N, priv.Sampler.DatasetSize())
		}
		var cfg engine.Config
		cfg.Arch, cfg.PhysicalBatch, cfg.Replicas = testArch, 32, 2
		cfg.Optimizer = engine.OptimizerConfig{Name: engine.OptimizerSGD, LR: 0.5}
		res, err := priv.Train(context.Background(), cfg, train, test, nil)
		if err != nil {
			t.Fatal(err)
		}
		spec := accounting.Spec{Sampler: string(s), Sigma: 1.1, PublicSize: true, Method: accounting.DefaultMethod(string(s))}
		if s == Poisson {
			spec.SampleRate = 8.0 / users
		} else {
			spec.Rounds = users / 8
			spec.SampleRate = 1 / float64(spec.Rounds)
		}
		acc, err := spec.New()
		if err != nil {
			t.Fatal(err)
		}
		want, err := acc.Epsilon(res.Steps, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		if res.Steps != 2*priv.Sampler.StepsPerEpoch() || math.Abs(res.Epsilon-want) > 1e-9*want {
			t.Errorf("%s: ε %v after %d steps, record-level accountant at N = %d: %v", s, res.Epsilon, res.Steps, users, want)
		}
		g, err := priv.Guarantee(res)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []string{"user-level (ε = ", "neighbouring datasets differ in all records of one user", "the number of users N = 40 is public"} {
			if !strings.Contains(g, w) {
				t.Errorf("%s: guarantee %q does not say %q", s, g, w)
			}
		}
		if !(res.TestAccuracy > 0.6) {
			t.Errorf("%s: test accuracy %v: the user-level run did not learn", s, res.TestAccuracy)
		}
		if s != Poisson {
			continue // (a shuffle run's release is refused today, user-level or not: its accountant's name is not its ledger's method)
		}
		rel, err := priv.Release(res)
		if err != nil || rel.Unit != UnitUser || !strings.HasPrefix(rel.Statement, "user-level (ε = ") {
			t.Fatalf("%s: release %+v (%v): want privacy_unit user and the user-level sentence", s, rel, err)
		}
		rel.Unit = "household"
		if err := rel.Validate(); err == nil || !strings.Contains(err.Error(), "privacy_unit") {
			t.Errorf("an unknown privacy unit: %v", err)
		}
	}
	// Secure mode samples users from the secure sampler and states a user-level guarantee.
	sp := Plan{Sampler: Poisson, BatchSize: 8, Epochs: 1, Clip: 1, Sigma: 1.1, Delta: 1e-5, Secure: true, UserLevel: true}
	spriv, err := sp.Resolve(context.Background(), train.Users, testArch, nil)
	if err != nil {
		t.Fatal(err)
	}
	scfg := engine.Config{Arch: testArch, PhysicalBatch: 32, Optimizer: engine.OptimizerConfig{Name: engine.OptimizerSGD, LR: 0.5}}
	sres, err := spriv.Train(context.Background(), scfg, train, test, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := spriv.Guarantee(sres); err != nil || !strings.HasPrefix(g, "user-level (ε = ") || !strings.Contains(g, "secure generator") {
		t.Errorf("secure user-level guarantee %q (%v)", g, err)
	}
	// A record-level plan says record.
	rp := basePlan()
	priv, err := rp.Resolve(context.Background(), 500, testArch, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := priv.Guarantee(&engine.Result{Epsilon: 1, Steps: 1, EpsilonSteps: 1})
	if priv.Unit() != UnitRecord || strings.Contains(g, "user") {
		t.Errorf("record-level: unit %q, guarantee %q", priv.Unit(), g)
	}
}

// TestUserLevelRefusals: the plan's and the engine's refusals name what is wrong.
func TestUserLevelRefusals(t *testing.T) {
	p := basePlan()
	p.MaxUserRecords = 3
	var fe *FieldError
	if _, err := p.Resolve(context.Background(), 500, testArch, nil); !errors.As(err, &fe) || fe.Field != "MaxUserRecords" {
		t.Errorf("MaxUserRecords without UserLevel: %v", err)
	}
	p.UserLevel, p.MaxUserRecords = true, -1
	if _, err := p.Resolve(context.Background(), 500, testArch, nil); !errors.As(err, &fe) || fe.Field != "MaxUserRecords" {
		t.Errorf("MaxUserRecords -1: %v", err)
	}
	p.MaxUserRecords, p.BatchSize = 0, 60
	if _, err := p.Resolve(context.Background(), 50, testArch, nil); !errors.As(err, &fe) || fe.Field != "BatchSize" || !strings.Contains(err.Error(), "users") {
		t.Errorf("BatchSize over the users: %v", err)
	}

	train, test := clouds(100, 1), clouds(20, 2)
	up := Plan{Sampler: Poisson, BatchSize: 5, Epochs: 1, Clip: 1, Sigma: 1, Delta: 1e-5, Seed: 1, UserLevel: true}
	priv, err := up.Resolve(context.Background(), 20, testArch, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.Config{Arch: testArch, PhysicalBatch: 16, Optimizer: engine.OptimizerConfig{Name: engine.OptimizerSGD, LR: 0.1}}
	if _, err := priv.Train(context.Background(), cfg, train, test, nil); err == nil || !strings.Contains(err.Error(), "user ids") {
		t.Errorf("no user ids: %v", err)
	}
	withUsers(t, train, 30)
	if _, err := priv.Train(context.Background(), cfg, train, test, nil); err == nil || !strings.Contains(err.Error(), "30 users") {
		t.Errorf("sampler over 20, data of 30 users: %v", err)
	}
	c := cfg
	priv.Apply(&c)
	c.MaxUserRecords = 17
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "max user records 17") {
		t.Errorf("cap above the physical batch: %v", err)
	}
	c.MaxUserRecords = 0
	if err := engine.CUDASupport(&c); err == nil || !strings.Contains(err.Error(), "user-level") {
		t.Errorf("CUDASupport of a user-level run: %v", err)
	}
	c.Checkpoint.Path = t.TempDir() + "/ck"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "checkpoints of a user-level run") {
		t.Errorf("checkpoints: %v", err)
	}
}
