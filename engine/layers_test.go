package engine

import (
	"math"

	"github.com/dpsgd/dpsgd/datasets"
	"math/rand/v2"
	"testing"

	"github.com/dpsgd/dpsgd/engine/nn"
	"gorgonia.org/tensor"
)

type layerModel struct {
	name string
	arch nn.Arch
}

// layerTestModels are stacks covering every layer kind and rule of the library, on shapes drawn
// from a fixed seed: odd sizes, strides 1 to 3, padding, groups, pooling windows.
func layerTestModels() []layerModel {
	r := rand.New(rand.NewPCG(19, 1))
	in := func(lo, hi int) int { return lo + r.IntN(hi-lo+1) }
	d, h, k := in(5, 11), in(3, 9), in(2, 4)
	c, hw := in(1, 3), in(8, 11)
	g := in(1, 3)
	f := 2 * g
	stride, pad := in(1, 3), in(0, 2)
	vocab, seq, dim := in(4, 9), in(3, 7), in(2, 5)
	oh := (hw+2-3)/2 + 1
	flat := f * ((oh-2)/2 + 1) * ((oh-2)/2 + 1)
	return []layerModel{
		{"layernorm-gelu", nn.Arch{Kind: nn.KindStack, Input: []int{d}, Classes: k, Stack: []nn.LayerSpec{
			{Type: "dense", Units: h}, {Type: "layernorm"}, {Type: "gelu"}, {Type: "dense", Units: k},
		}}},
		{"tempered-sigmoid", nn.Arch{Kind: nn.KindStack, Input: []int{d}, Classes: k, Stack: []nn.LayerSpec{
			{Type: "dense", Units: h}, {Type: "tempered_sigmoid", Scale: 1.5 + r.Float64(), Temp: 0.5 + r.Float64(), Offset: r.Float64()},
			{Type: "dense", Units: h + 1}, {Type: "relu"}, {Type: "dense", Units: k},
		}}},
		{"conv-groupnorm-avgpool", nn.Arch{Kind: nn.KindStack, Input: []int{c, hw, hw}, Classes: k, Stack: []nn.LayerSpec{
			{Type: "conv2d", Filters: f, Kernel: 3, Stride: stride, Pad: pad}, {Type: "groupnorm", Groups: g}, {Type: "gelu"},
			{Type: "conv2d", Filters: f + 1, Kernel: 2, Stride: 1, Pad: 1}, {Type: "tanh"},
			{Type: "avgpool", Kernel: 2, Stride: 1}, {Type: "flatten"}, {Type: "layernorm"}, {Type: "dense", Units: k},
		}}},
		{"residual", nn.Arch{Kind: nn.KindStack, Input: []int{c, hw, hw}, Classes: k, Stack: []nn.LayerSpec{
			{Type: "conv2d", Filters: f, Kernel: 3, Stride: 2, Pad: 1}, {Type: "relu"},
			{Type: "residual", Body: []nn.LayerSpec{{Type: "groupnorm", Groups: g}, {Type: "conv2d", Filters: f, Kernel: 3, Stride: 1, Pad: 1}, {Type: "tanh"}}},
			{Type: "maxpool", Kernel: 2, Stride: 2}, {Type: "flatten"},
			{Type: "residual", Body: []nn.LayerSpec{{Type: "layernorm"}, {Type: "dense", Units: in(3, 6)}, {Type: "gelu"}, {Type: "dense", Units: flat}}},
			{Type: "dense", Units: k},
		}}},
		{"flatten-image", nn.Arch{Kind: nn.KindStack, Input: []int{c, 5, 4}, Classes: k, Stack: []nn.LayerSpec{
			{Type: "flatten"}, {Type: "dense", Units: h}, {Type: "groupnorm", Groups: 1}, {Type: "tanh"}, {Type: "dense", Units: k},
		}}},
		{"embedding", nn.Arch{Kind: nn.KindStack, Input: []int{seq}, Classes: k, Stack: []nn.LayerSpec{
			{Type: "embedding", Vocab: vocab, Dim: dim}, {Type: "groupnorm", Groups: 1}, {Type: "gelu"},
			{Type: "conv2d", Filters: dim + 1, Kernel: 2, Stride: 1, Pad: 1}, {Type: "tanh"}, {Type: "flatten"}, {Type: "dense", Units: k},
		}}},
	}
}

// tokenize turns the features of a model that starts with an embedding into token ids drawn
// from seed, with repeats inside an example, and in the first example one of each kind of
// invalid id (−1, a fraction, the vocabulary size) when it has room; other models' data stay.
func tokenize(arch nn.Arch, ds *datasets.Dataset, seed uint64) {
	if arch.Kind != nn.KindStack || arch.Stack[0].Type != "embedding" {
		return
	}
	r := rand.New(rand.NewPCG(seed, 9))
	v := arch.Stack[0].Vocab
	for i := range ds.X {
		ds.X[i] = float32(r.IntN(v))
	}
	for j, bad := range []float32{-1, 1.5, float32(v)} {
		if j < ds.D-1 {
			ds.X[j] = bad
		}
	}
	if ds.D > 1 && ds.N > 1 {
		ds.X[ds.D+1] = ds.X[ds.D] // a repeated id
	}
}

// randomizeParams redraws every parameter (the normalizations' γ = 1, β = 0 would hide errors
// in their rules) reproducibly from seed.
func randomizeParams(p *nn.Params, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 3))
	for _, q := range p.List {
		for j, v := range q.Value.Data().([]float64) {
			q.Value.Data().([]float64)[j] = v + 0.3*r.NormFloat64()
		}
	}
}

// TestLayersAgainstOracle: for every layer kind and rule of the library, on the stacks of
// layerTestModels, each example's gradient (the step's clipped sum over a batch where only that
// example is real, with a clip norm no gradient reaches), its squared norm, and each
// materialized rule's row equal the batch-1 oracle's (Gorgonia's Grad with respect to every
// parameter) to 1e-9 relative in float64; and with the clip at the median norm the clipped sum
// of the whole batch equals the oracle's clipped sum.
func TestLayersAgainstOracle(t *testing.T) {
	for mi, m := range append(layerTestModels(), append(attentionTestModels(), extLayerModels()...)...) {
		t.Run(m.name, func(t *testing.T) {
			const b = 5
			params, err := nn.NewParams(m.arch, tensor.Float64, uint64(mi+1))
			if err != nil {
				t.Fatal(err)
			}
			randomizeParams(params, uint64(mi+1))
			ds := randomDataset(m.arch, b, uint64(mi+30))
			tokenize(m.arch, ds, uint64(mi+30))
			rep, err := newReplica[float64](m.arch, params, b)
			if err != nil {
				t.Fatal(err)
			}
			defer rep.net.Close()
			oracle, err := nn.NewGradOracle(m.arch, params)
			if err != nil {
				t.Fatal(err)
			}
			xshape := []int{1, m.arch.InputSize()}
			if m.arch.ImageInput() {
				xshape = append([]int{1}, m.arch.Input...)
			}
			rows := []int{0, 1, 2, 3, 4}
			norms := make([]float64, b)
			perEx := make([][][]float64, b)
			for i := range b {
				x := tensor.New(tensor.WithShape(xshape...), tensor.Of(tensor.Float64))
				for j, v := range ds.X[i*ds.D : (i+1)*ds.D] {
					x.Data().([]float64)[j] = float64(v)
				}
				y := tensor.New(tensor.WithShape(1, m.arch.Classes), tensor.Of(tensor.Float64))
				y.Data().([]float64)[ds.Y[i]] = 1
				// The oracle's dropout masks are the step's for example i (nn.Dropout).
				if err := oracle.SetDropoutSeeds([]uint64{nn.DropoutSeed(rep.dropStep, rows[i])}); err != nil {
					t.Fatal(err)
				}
				if perEx[i], err = oracle.Grad(x, y); err != nil {
					t.Fatal(err)
				}
				for _, gp := range perEx[i] {
					for _, v := range gp {
						norms[i] += v * v
					}
				}
				// The batch with example i alone real.
				mask := make([]float64, b)
				mask[i] = 1
				rep.reset()
				if err := rep.physical(ds, rows, mask, 1e300); err != nil {
					t.Fatal(err)
				}
				if e := relErr(rep.norm2[i], norms[i]); !(e <= 1e-9) {
					t.Errorf("example %d: squared norm %v, oracle %v (rel err %.2g)", i, rep.norm2[i], norms[i], e)
				}
				for p, want := range perEx[i] {
					if e := maxRelErr(rep.grads[p], want); !(e <= 1e-9) {
						t.Errorf("example %d, param %s: gradient rel err %.2g", i, params.List[p].Name, e)
					}
				}
				for k, mt := range rep.net.MatTaps() {
					row := rep.mat[k][i*mt.Width : (i+1)*mt.Width]
					var want []float64
					for _, p := range mt.Params {
						want = append(want, perEx[i][p]...)
					}
					if e := maxRelErr(row, want); !(e <= 1e-9) {
						t.Errorf("example %d, %s rule: materialized row rel err %.2g", i, mt.Name, e)
					}
				}
			}
			for _, st := range rep.net.SparseTaps() {
				// The sparse rule's norm alone, against the oracle's table gradient of the last
				// example.
				var want float64
				for _, v := range perEx[b-1][st.Param] {
					want += v * v
				}
				if e := relErr(st.Norm2(b-1), want); !(e <= 1e-9) || want == 0 {
					t.Errorf("embedding: sparse norm %v, oracle %v", st.Norm2(b-1), want)
				}
			}
			if len(rep.net.MatTaps()) == 0 && m.name != "tempered-sigmoid" && m.name != "grouped-conv" && m.name != "loss-mse" {
				t.Errorf("no materialized rule in %s", m.name)
			}
			clip := math.Sqrt(median(norms))
			want := make([][]float64, len(perEx[0]))
			for p := range want {
				want[p] = make([]float64, len(perEx[0][p]))
			}
			for i := range b {
				c := math.Min(1, clip/math.Sqrt(norms[i]))
				for p, gp := range perEx[i] {
					for j, v := range gp {
						want[p][j] += c * v
					}
				}
			}
			rep.reset()
			if err := rep.physical(ds, rows, []float64{1, 1, 1, 1, 1}, clip); err != nil {
				t.Fatal(err)
			}
			for p := range want {
				if e := maxRelErr(rep.grads[p], want[p]); !(e <= 1e-9) {
					t.Errorf("param %s: clipped sum rel err %.2g", params.List[p].Name, e)
				}
			}
			if rep.clipped == 0 || rep.clipped == b {
				t.Errorf("clipped %d of %d: the test should clip some but not all", rep.clipped, b)
			}
		})
	}
}
