package engine

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/engine/sampler"
	"gorgonia.org/tensor"
)

// scatterArch is a small ScatterNet: scattering (J = 1, L = 3) of 2×8×9 images, GroupNorm,
// flatten, dense.
func scatterArch(classes int) nn.Arch {
	return nn.Arch{Kind: nn.KindStack, Input: []int{2, 8, 9}, Classes: classes, Stack: []nn.LayerSpec{
		{Type: "scatter", J: 1, L: 3}, {Type: "groupnorm", Groups: 4}, {Type: "flatten"}, {Type: "dense", Units: classes},
	}}
}

// TestScatterAgainstOracle: a replica reading the run's precomputed features (FeatureCache)
// gives each example the gradient and squared norm the batch-1 oracle computes from the raw
// image (the scattering run inside the net), to 1e-9 relative in float64.
func TestScatterAgainstOracle(t *testing.T) {
	arch := scatterArch(3)
	const b = 5
	params, err := nn.NewParams(arch, tensor.Float64, 3)
	if err != nil {
		t.Fatal(err)
	}
	randomizeParams(params, 3)
	ds := randomDataset(arch, b, 31)
	rep, err := newReplica[float64](arch, params, b)
	if err != nil {
		t.Fatal(err)
	}
	defer rep.net.Close()
	cache, err := nn.NewFeatureCache(arch)
	if err != nil || cache == nil {
		t.Fatalf("feature cache: %v, %v", cache, err)
	}
	rep.useFeatures(cache)
	oracle, err := nn.NewGradOracle(arch, params)
	if err != nil {
		t.Fatal(err)
	}
	rows := []int{0, 1, 2, 3, 4}
	for i := range b {
		x := tensor.New(tensor.WithShape(append([]int{1}, arch.Input...)...), tensor.Of(tensor.Float64))
		for j, v := range ds.X[i*ds.D : (i+1)*ds.D] {
			x.Data().([]float64)[j] = float64(v)
		}
		y := tensor.New(tensor.WithShape(1, arch.Classes), tensor.Of(tensor.Float64))
		y.Data().([]float64)[ds.Y[i]] = 1
		want, err := oracle.Grad(x, y)
		if err != nil {
			t.Fatal(err)
		}
		norm := 0.0
		for _, gp := range want {
			for _, v := range gp {
				norm += v * v
			}
		}
		mask := make([]float64, b)
		mask[i] = 1
		rep.reset()
		if err := rep.physical(ds, rows, mask, 1e300); err != nil {
			t.Fatal(err)
		}
		if e := relErr(rep.norm2[i], norm); !(e <= 1e-9) || norm == 0 {
			t.Errorf("example %d: squared norm %v, oracle %v", i, rep.norm2[i], norm)
		}
		for p := range want {
			if e := maxRelErr(rep.grads[p], want[p]); !(e <= 1e-9) {
				t.Errorf("example %d, %s: gradient rel err %.2g", i, params.List[p].Name, e)
			}
		}
	}
}

// TestScatterRecordAttack: one record holding NaN, ±Inf, 1e30, 3.4e38, −0 or subnormal pixels
// (all of them, or one) changes the features of that record only, and the engine's clipped sum
// moves by at most C when it is removed, wherever it sits in the batch, with the features
// computed per batch or read from the cache.
func TestScatterRecordAttack(t *testing.T) {
	arch := scatterArch(3)
	const n, clip = 6, 0.5
	params, err := nn.NewParams(arch, tensor.Float32, 9)
	if err != nil {
		t.Fatal(err)
	}
	clean := randomDataset(arch, n, 41)
	cache, _ := nn.NewFeatureCache(arch)
	ref := slices.Clone(cache.Of(clean.X, n))
	w := cache.Width()
	for _, v := range advValues() {
		ds := &datasets.Dataset{Name: "attack", X: slices.Clone(clean.X), Y: clean.Y, N: n, D: clean.D, Classes: 3, Shape: arch.Input}
		rec := n - 1
		row := ds.X[rec*ds.D : (rec+1)*ds.D]
		if v.single {
			row[len(row)/2] = v.v
		} else {
			for j := range row {
				row[j] = v.v
			}
		}
		fresh, _ := nn.NewFeatureCache(arch)
		got := fresh.Of(ds.X, n)
		for i := 0; i < rec; i++ {
			if !slices.Equal(got[i*w:(i+1)*w], ref[i*w:(i+1)*w]) {
				t.Fatalf("%s: record %d's features changed", v.name, i)
			}
		}
		for _, cached := range []bool{false, true} {
			h := newAdvHarness[float32](t, arch, params, 4, 2)
			if cached {
				c, _ := nn.NewFeatureCache(arch)
				for _, r := range h.reps {
					r.useFeatures(c)
				}
			}
			var others []int
			for i := 0; i < rec; i++ {
				others = append(others, i)
			}
			base := h.run(t, ds, others, clip)
			for pos := 0; pos <= len(others); pos++ {
				idx := slices.Insert(slices.Clone(others), pos, rec)
				with := h.run(t, ds, idx, clip)
				for _, j := range others {
					if !sameRow(with.rows[j], base.rows[j]) {
						t.Errorf("%s (cached %v), record at %d: record %d's coefficient or taps changed", v.name, cached, pos, j)
					}
				}
				if d := norm2D(diff2D(with.grads, base.grads)); !(d <= clip*(1+1e-6)) {
					t.Errorf("%s (cached %v), record at %d: the clipped sum moved by %g, C = %g", v.name, cached, pos, d, clip)
				}
			}
			h.close()
		}
	}
}

// stripes is a two-class image set: horizontal or vertical stripes of random phase and
// contrast, plus noise, on 1×12×12 images.
func stripes(n int, seed uint64) *datasets.Dataset {
	r := rand.New(rand.NewPCG(seed, 3))
	ds := &datasets.Dataset{Name: "stripes", X: make([]float32, n*144), Y: make([]int, n), N: n, D: 144, Classes: 2, Shape: []int{1, 12, 12}}
	for i := range n {
		c := r.IntN(2)
		ds.Y[i] = c
		ph, a := r.Float64()*2*math.Pi, 0.5+r.Float64()
		for y := 0; y < 12; y++ {
			for x := 0; x < 12; x++ {
				u := float64(y)
				if c == 1 {
					u = float64(x)
				}
				ds.X[i*144+y*12+x] = float32(a*math.Sin(1.3*u+ph) + 0.3*r.NormFloat64())
			}
		}
	}
	return ds
}

// TestScatterTrainsEndToEnd: a model file with a scatter layer trains privately (σ = 1) on a
// small image set and classifies held-out images well above chance; the evaluation of the
// trained parameters from the raw images (Evaluate: features computed per batch) agrees with the
// run's own (features cached).
func TestScatterTrainsEndToEnd(t *testing.T) {
	arch, err := nn.ParseModelFile([]byte(`{"layers": [{"type": "scatter", "J": 1, "L": 4},
		{"type": "groupnorm", "groups": 5}, {"type": "flatten"}, {"type": "dense", "units": 2}]}`), []int{1, 12, 12}, 2)
	if err != nil {
		t.Fatal(err)
	}
	train, test := stripes(600, 1), stripes(200, 2)
	cfg := Config{Arch: arch, PhysicalBatch: 50, Replicas: 2, Epochs: 4, Clip: 1, Sigma: 1, Seed: 7,
		Optimizer: OptimizerConfig{Name: "momentum", LR: 0.5, Momentum: 0.9, Schedule: "constant"}}
	smp, err := sampler.NewPoisson(train.N, 100.0/float64(train.N), 7)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Train(context.Background(), cfg, train, test, smp, poissonPrivacy(t, smp.SampleRate(), 1, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.TestAccuracy < 0.9 {
		t.Fatalf("test accuracy %.3f, want ≥ 0.9", res.TestAccuracy)
	}
	ev, err := Evaluate(arch, res.Model, test, 64)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Accuracy != res.TestAccuracy {
		t.Errorf("Evaluate from the images: %.4f; the run's: %.4f", ev.Accuracy, res.TestAccuracy)
	}
}
