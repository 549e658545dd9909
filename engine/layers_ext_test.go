package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/engine/sampler"
)

// extLayerModels are the stacks of the grouped and weight-standardized convolutions, the
// residual shortcut, dropout and the losses, on shapes drawn from a fixed seed (odd sizes,
// strides 1 to 3, padding); TestLayersAgainstOracle checks them after layerTestModels.
func extLayerModels() []layerModel {
	r := rand.New(rand.NewPCG(23, 5))
	in := func(lo, hi int) int { return lo + r.IntN(hi-lo+1) }
	k := in(2, 4)
	g1, g2 := in(2, 3), in(2, 3)
	c := g1 * in(1, 2)
	hw := in(9, 12)
	f1 := g1 * g2 * in(1, 2)
	stride, pad := in(2, 3), in(1, 2)
	d, h := in(5, 11), in(3, 9)
	return []layerModel{
		{"grouped-conv", nn.Arch{Kind: nn.KindStack, Input: []int{c, hw, hw}, Classes: k, Stack: []nn.LayerSpec{
			{Type: "conv2d", Filters: f1, Kernel: 3, Stride: stride, Pad: pad, Groups: g1}, {Type: "tanh"},
			{Type: "conv2d", Filters: g2 * in(1, 3), Kernel: 2, Stride: 1, Pad: in(0, 1), Groups: g2}, {Type: "gelu"},
			{Type: "flatten"}, {Type: "dense", Units: k},
		}}},
		{"ws-conv-shortcut", nn.Arch{Kind: nn.KindStack, Input: []int{c, hw, hw}, Classes: k, Stack: []nn.LayerSpec{
			{Type: "conv2d", Filters: f1, Kernel: 3, Stride: 1, Pad: pad, Standardize: true}, {Type: "groupnorm", Groups: g1}, {Type: "relu"},
			{Type: "residual", Body: []nn.LayerSpec{
				{Type: "conv2d", Filters: 2 * f1, Kernel: 3, Stride: stride, Pad: 1, Standardize: true}, {Type: "groupnorm", Groups: 2}, {Type: "tanh"},
				{Type: "conv2d", Filters: 2 * f1, Kernel: 3, Stride: 1, Pad: 1, Groups: 2, Standardize: true},
			}, Shortcut: []nn.LayerSpec{{Type: "conv2d", Filters: 2 * f1, Kernel: 1, Stride: stride, Standardize: true}}},
			{Type: "residual", Body: []nn.LayerSpec{{Type: "groupnorm", Groups: 1}, {Type: "gelu"}, {Type: "conv2d", Filters: 2 * f1, Kernel: 3, Stride: 1, Pad: 1, Groups: 2}}},
			{Type: "avgpool", Kernel: 2, Stride: 2}, {Type: "flatten"}, {Type: "dense", Units: k},
		}}},
		{"dropout", nn.Arch{Kind: nn.KindStack, Input: []int{c, hw, hw}, Classes: k, Stack: []nn.LayerSpec{
			{Type: "conv2d", Filters: f1, Kernel: 3, Stride: stride, Pad: pad}, {Type: "dropout", Rate: 0.1 + 0.4*r.Float64()}, {Type: "relu"},
			{Type: "residual", Body: []nn.LayerSpec{{Type: "groupnorm", Groups: 1}, {Type: "dropout", Rate: 0.5}, {Type: "conv2d", Filters: f1, Kernel: 3, Stride: 1, Pad: 1}}},
			{Type: "flatten"}, {Type: "dense", Units: h}, {Type: "tanh"}, {Type: "dropout", Rate: 0.3}, {Type: "dense", Units: k},
		}}},
		{"loss-bce", nn.Arch{Kind: nn.KindStack, Input: []int{d}, Classes: 2, Loss: nn.LossBCE, Stack: []nn.LayerSpec{
			{Type: "dense", Units: h}, {Type: "layernorm"}, {Type: "tanh"}, {Type: "dense", Units: 1},
		}}},
		{"loss-mse", nn.Arch{Kind: nn.KindStack, Input: []int{c, hw, hw}, Classes: k, Loss: nn.LossMSE, Stack: []nn.LayerSpec{
			{Type: "conv2d", Filters: f1, Kernel: 3, Stride: stride, Pad: pad}, {Type: "gelu"}, {Type: "flatten"},
			{Type: "dense", Units: h}, {Type: "tanh"}, {Type: "dense", Units: k},
		}}},
	}
}

// TestAdversarialExtLayers is TestAdversarialRecordSensitivity on extLayerModels: one record
// holding NaN, ±Inf, 1e30, ±3.4e38, −0 or subnormals (every feature, or one), at every position
// of the batch, float32 and float64, two physical batch configurations, C = 1e-6 and 1: every
// other record's coefficient, taps and materialized rows are bit-identical, and the clipped sum
// moves by at most C.
func TestAdversarialExtLayers(t *testing.T) {
	const n = 6
	configs := []advConfig{{2, 2}, {7, 1}}
	if testing.Short() {
		configs = []advConfig{{4, 1}}
	}
	clips := []float64{1e-6, 1}
	stats := &advStats{exact: map[string]float64{}, own: map[string]float64{}, engine: map[string]float64{}, failures: map[string]int{}}
	for mi, m := range extLayerModels() {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			name := fmt.Sprintf("%s/%v", m.name, dt)
			t.Run(name, func(t *testing.T) {
				params, err := nn.NewParams(m.arch, dt, uint64(70+mi))
				if err != nil {
					t.Fatal(err)
				}
				ds := randomDataset(m.arch, n, uint64(80+mi))
				if dt == tensor.Float32 {
					advCheck[float32](t, name, m.arch, params, ds, configs, clips, stats)
				} else {
					advCheck[float64](t, name, m.arch, params, ds, configs, clips, stats)
				}
			})
		}
	}
	keys := make([]string, 0, len(stats.exact))
	for k := range stats.exact {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		t.Logf("%-40s max‖Δ‖/C %.10g  engine %.10g  failures %d", k, stats.exact[k], stats.engine[k], stats.failures[k])
	}
	if len(stats.first) > 0 {
		t.Errorf("%d kinds of failures; first ones:\n%s", len(stats.failures), strings.Join(stats.first, "\n"))
	}
}

// TestDropoutTrainingReproducible: a run with dropout gives bit-identical parameters from one
// seed, whatever the scheduling of its two replicas, and other parameters from another seed
// or with rate 0 (the masks drop something).
func TestDropoutTrainingReproducible(t *testing.T) {
	train, test := smallProblem(t)
	arch := func(rate float64) nn.Arch {
		return nn.Arch{Kind: nn.KindStack, Input: train.Shape, Classes: train.Classes, Stack: []nn.LayerSpec{
			{Type: "dense", Units: 16}, {Type: "dropout", Rate: rate}, {Type: "tanh"}, {Type: "dense", Units: train.Classes},
		}}
	}
	run := func(rate float64, seed uint64, phys int) string {
		cfg := smallConfig(train)
		cfg.Arch, cfg.Seed, cfg.Epochs, cfg.PhysicalBatch = arch(rate), seed, 1, phys
		smp, err := sampler.NewPoisson(train.N, 100.0/float64(train.N), seed)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Train(context.Background(), cfg, train, test, smp, poissonPrivacy(t, smp.SampleRate(), 1, nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		return res.ParamsDigest
	}
	a, b, c := run(0.4, 7, 64), run(0.4, 7, 64), run(0.4, 8, 64)
	if a != b {
		t.Errorf("same seed: %s and %s", a, b)
	}
	if a == c {
		t.Errorf("seeds 7 and 8 gave the same parameters %s", a)
	}
	if z := run(0, 7, 64); z == a {
		t.Errorf("rate 0.4 and rate 0 gave the same parameters %s: the masks dropped nothing", a)
	}
}
