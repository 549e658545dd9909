package engine

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"gorgonia.org/tensor"
)

// randomDataset makes n examples of the arch's input shape with random labels; rows listed in
// nanRows get a NaN feature.
func randomDataset(arch nn.Arch, n int, seed uint64, nanRows ...int) *datasets.Dataset {
	r := rand.New(rand.NewPCG(seed, 7))
	d := arch.InputSize()
	ds := &datasets.Dataset{Name: "random", X: make([]float32, n*d), Y: make([]int, n), N: n, D: d, Classes: arch.Classes, Shape: arch.Input}
	for i := range ds.X {
		ds.X[i] = float32(r.NormFloat64())
	}
	for i := range ds.Y {
		ds.Y[i] = r.IntN(arch.Classes)
	}
	for _, i := range nanRows {
		ds.X[i*d] = float32(math.NaN())
	}
	return ds
}

// TestPerExampleAgainstOracle checks the batched path (per-example errors at pre-activations,
// ghost norms for dense layers, per-example materialization for convolutions, one clipped GEMM
// per layer) against a batch-1 Gorgonia graph differentiated with respect to the weights:
// squared norms and the clipped sum agree to 1e-10 relative in float64.
func TestPerExampleAgainstOracle(t *testing.T) {
	small := nn.Arch{
		Kind: "cnn", Input: []int{2, 9, 9}, Classes: 3, Activation: nn.Tanh, Hidden: []int{5},
		Conv: []nn.ConvSpec{
			{Filters: 4, Kernel: 3, Stride: 1, Pad: 1, PoolKernel: 2, PoolStride: 1},
			{Filters: 3, Kernel: 3, Stride: 2, Pad: 0, PoolKernel: 2, PoolStride: 1},
		},
	}
	cases := []struct {
		name string
		arch nn.Arch
		b    int
	}{
		{"logreg", nn.LogReg([]int{7}, 3), 6},
		{"mlp-tanh", nn.MLP([]int{11}, 4, []int{8, 6}, nn.Tanh), 7},
		{"mlp-relu", nn.MLP([]int{11}, 4, []int{9}, nn.ReLU), 7},
		{"cnn-small", small, 5},
		{"cnn-mnist", nn.CNN([]int{1, 28, 28}, 10, nil, nn.Tanh), 4},
	}
	for ci, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			params, err := nn.NewParams(tc.arch, tensor.Float64, uint64(ci+1))
			if err != nil {
				t.Fatal(err)
			}
			ds := randomDataset(tc.arch, tc.b, uint64(ci+10))
			rep, err := newReplica[float64](tc.arch, params, tc.b)
			if err != nil {
				t.Fatal(err)
			}
			rows := make([]int, tc.b)
			mask := make([]float64, tc.b)
			for i := range rows {
				rows[i], mask[i] = i, 1
			}
			mask[tc.b-1] = 0 // a padding row must contribute nothing

			oracle, err := nn.NewGradOracle(tc.arch, params)
			if err != nil {
				t.Fatal(err)
			}
			xshape := append([]int{1}, tc.arch.Input...)
			if len(tc.arch.Conv) == 0 {
				xshape = []int{1, tc.arch.InputSize()}
			}
			perEx := make([][][]float64, tc.b)
			norms := make([]float64, tc.b)
			for i := 0; i < tc.b; i++ {
				x := tensor.New(tensor.WithShape(xshape...), tensor.Of(tensor.Float64))
				for j, v := range ds.X[i*ds.D : (i+1)*ds.D] {
					x.Data().([]float64)[j] = float64(v)
				}
				y := tensor.New(tensor.WithShape(1, tc.arch.Classes), tensor.Of(tensor.Float64))
				y.Data().([]float64)[ds.Y[i]] = 1
				if perEx[i], err = oracle.Grad(x, y); err != nil {
					t.Fatal(err)
				}
				for _, gp := range perEx[i] {
					for _, v := range gp {
						norms[i] += v * v
					}
				}
			}
			// Clip at the median norm so that some examples are clipped and some are not.
			clip := math.Sqrt(median(norms[:tc.b-1]))
			want := make([][]float64, len(perEx[0]))
			for p := range want {
				want[p] = make([]float64, len(perEx[0][p]))
			}
			for i := 0; i < tc.b-1; i++ {
				c := math.Min(1, clip/math.Sqrt(norms[i]))
				for p, gp := range perEx[i] {
					for j, v := range gp {
						want[p][j] += c * v
					}
				}
			}
			rep.reset()
			if err := rep.physical(ds, rows, mask, clip); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < tc.b-1; i++ {
				if err := relErr(rep.norm2[i], norms[i]); err > 1e-10 {
					t.Errorf("example %d: squared norm %v, oracle %v (rel err %.2g)", i, rep.norm2[i], norms[i], err)
				}
			}
			for p := range want {
				if e := maxRelErr(rep.grads[p], want[p]); e > 1e-10 {
					t.Errorf("param %s: clipped sum rel err %.2g", params.List[p].Name, e)
				}
			}
			if rep.clipped == 0 || rep.clipped == tc.b-1 {
				t.Errorf("clipped %d of %d: the test should clip some but not all", rep.clipped, tc.b-1)
			}
		})
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func relErr(got, want float64) float64 {
	return math.Abs(got-want) / math.Max(math.Abs(want), 1e-300)
}

// maxRelErr is max|got−want| / max|want| (relative to the tensor's scale).
func maxRelErr(got, want []float64) float64 {
	var num, den float64
	for i := range want {
		num = math.Max(num, math.Abs(got[i]-want[i]))
		den = math.Max(den, math.Abs(want[i]))
	}
	return num / math.Max(den, 1e-300)
}

// TestNonFiniteExampleIsContained: an example whose gradient is NaN is zeroed, counted, and
// does not change the other examples' sum.
func TestNonFiniteExampleIsContained(t *testing.T) {
	arch := nn.MLP([]int{6}, 3, []int{5}, nn.Tanh)
	params, err := nn.NewParams(arch, tensor.Float64, 3)
	if err != nil {
		t.Fatal(err)
	}
	clean := randomDataset(arch, 4, 5)
	dirty := randomDataset(arch, 4, 5, 2)
	run := func(ds *datasets.Dataset, mask []float64) *replica[float64] {
		rep, err := newReplica[float64](arch, params, 4)
		if err != nil {
			t.Fatal(err)
		}
		rep.reset()
		if err := rep.physical(ds, []int{0, 1, 2, 3}, mask, 1); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	a := run(dirty, []float64{1, 1, 1, 1})
	b := run(clean, []float64{1, 1, 0, 1})
	if a.nonFinite != 1 {
		t.Fatalf("non-finite count %d, want 1", a.nonFinite)
	}
	for p := range a.grads {
		for j := range a.grads[p] {
			if a.grads[p][j] != b.grads[p][j] {
				t.Fatalf("param %d[%d]: %v with the NaN example, %v with it masked", p, j, a.grads[p][j], b.grads[p][j])
			}
		}
	}
}
