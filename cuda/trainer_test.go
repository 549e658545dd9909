package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/kernels"
	"gorgonia.org/tensor"
)

func synthData(n, d, k int, seed uint64) *datasets.Dataset {
	rng := rand.New(rand.NewPCG(seed, 1))
	ds := &datasets.Dataset{Name: "synth", N: n, D: d, Classes: k, X: make([]float32, n*d), Y: make([]int, n), Shape: []int{d}}
	for i := range n {
		ds.Y[i] = rng.IntN(k)
		for j := range d {
			ds.X[i*d+j] = float32(rng.NormFloat64() + 0.5*float64(ds.Y[i]%3))
		}
	}
	return ds
}

// cpuStep is the CPU engine's step (engine/step.go replica.physical, engine/train.go step and
// update) composed from the same building blocks: the Gorgonia graph's per-example errors,
// kernels.RowSqNorms/GhostAccum/ClipCoefs/ClippedSum, kernels.AddGaussian keyed (seed, step,
// tensor), division by the expected batch size and the SGD update. It returns the gradient
// and the step's loss, updating params.
func cpuStep(t *testing.T, cfg TrainerConfig, params *nn.Params, ds *datasets.Dataset, idx []int, step int, expected, lr float64) ([][]float32, float64, int) {
	t.Helper()
	p := cfg.PhysicalBatch
	net, err := nn.Build(cfg.Arch, params, p, true)
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	var grads [][]float32
	for _, q := range params.List {
		grads = append(grads, make([]float32, q.Value.Shape().TotalSize()))
	}
	x := tensor.New(tensor.WithShape(p, ds.D), tensor.Of(tensor.Float32))
	y := tensor.New(tensor.WithShape(p, ds.Classes), tensor.Of(tensor.Float32))
	loss, nonFinite := 0.0, 0
	k := max((len(idx)+p-1)/p, 1)
	for c := range k {
		xd, yd := x.Data().([]float32), y.Data().([]float32)
		clear(xd)
		clear(yd)
		mask := make([]float64, p)
		for i := range p {
			if c*p+i < len(idx) {
				j := idx[c*p+i]
				copy(xd[i*ds.D:(i+1)*ds.D], ds.X[j*ds.D:(j+1)*ds.D])
				yd[i*ds.Classes+ds.Y[j]] = 1
				mask[i] = 1
			}
		}
		if err := net.Run(x, y); err != nil {
			t.Fatal(err)
		}
		norm2, asq, esq, coef := make([]float64, p), make([]float64, p), make([]float64, p), make([]float64, p)
		for _, tp := range net.Taps() {
			kernels.RowSqNorms(asq, tp.A().Data().([]float32), p, tp.Shape.In)
			kernels.RowSqNorms(esq, tp.E().Data().([]float32), p, tp.Shape.Out)
			kernels.GhostAccum(norm2, asq, esq, true)
		}
		clip := cfg.Clip
		if cfg.NonPrivate {
			clip = math.Inf(1)
		}
		nonFinite += kernels.ClipCoefs(coef, norm2, mask, clip)
		for li, tp := range net.Taps() {
			s := tp.Shape
			tw, tb := make([]float32, s.In*s.Out), make([]float32, s.Out)
			kernels.ClippedSum(tw, tb, tp.A().Data().([]float32), tp.E().Data().([]float32), p, s.In, s.Out, coef, make([]float32, p*s.Out))
			for j := range tw {
				grads[2*li][j] += tw[j]
			}
			for j := range tb {
				grads[2*li+1][j] += tb[j]
			}
		}
		loss += net.Loss()
	}
	if !cfg.NonPrivate {
		for pi, g := range grads {
			kernels.AddGaussian(g, cfg.Sigma*cfg.Clip, kernels.NoiseKey{Seed: cfg.NoiseSeed, Step: uint64(step), Tensor: uint32(pi)})
		}
	}
	inv := float32(1 / expected)
	for pi, g := range grads {
		w := params.List[pi].Value.Data().([]float32)
		for j := range g {
			g[j] *= inv
			w[j] -= float32(lr) * (g[j] + 0*w[j])
		}
	}
	return grads, loss, nonFinite
}

func TestTrainerStepEqualsCPU(t *testing.T) {
	d := openFake(t)
	for _, tc := range []struct {
		name string
		arch nn.Arch
		phys int
		n    int
	}{
		{"logreg", nn.LogReg([]int{12}, 3), 16, 16},
		{"mlp-tanh-2phys", nn.MLP([]int{12}, 4, []int{10}, nn.Tanh), 8, 13},
		{"mlp-relu", nn.MLP([]int{12}, 4, []int{9, 7}, nn.ReLU), 24, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := synthData(60, 12, tc.arch.Classes, 9)
			cfg := TrainerConfig{Arch: tc.arch, PhysicalBatch: tc.phys, Clip: 0.5, Sigma: 0.8, NoiseSeed: 1234}
			pCPU, err := nn.NewParams(tc.arch, tensor.Float32, 77)
			if err != nil {
				t.Fatal(err)
			}
			pGPU := pCPU.Clone()
			tr, err := NewTrainer(d, cfg, pGPU, ds)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			rng := rand.New(rand.NewPCG(11, 12))
			for step := range 3 {
				idx := rng.Perm(ds.N)[:tc.n]
				want, wantLoss, _ := cpuStep(t, cfg, pCPU, ds, idx, step, float64(tc.n), 0.1)
				st, err := tr.Step(idx, step, float64(tc.n), 0.1)
				if err != nil {
					t.Fatal(err)
				}
				if st.BatchSize != tc.n || !relClose(st.Loss, wantLoss, 1e-5) || st.NonFinite != 0 {
					t.Fatalf("step %d: stats %+v, CPU loss %v", step, st, wantLoss)
				}
				got, err := tr.Gradients()
				if err != nil {
					t.Fatal(err)
				}
				for pi := range want {
					checkClose(t, pCPU.List[pi].Name+" gradient", got[pi], want[pi], 1e-5)
				}
				if err := tr.CopyParams(pGPU); err != nil {
					t.Fatal(err)
				}
				for pi, q := range pCPU.List {
					checkClose(t, q.Name, pGPU.List[pi].Value.Data().([]float32), q.Value.Data().([]float32), 1e-5)
				}
			}
		})
	}
}

func TestTrainerNonFiniteExample(t *testing.T) {
	d := openFake(t)
	arch := nn.MLP([]int{6}, 3, []int{5}, nn.ReLU)
	ds := synthData(20, 6, 3, 3)
	ds.X[4*6+2] = float32(math.Inf(1))
	cfg := TrainerConfig{Arch: arch, PhysicalBatch: 8, Clip: 1, Sigma: 1, NoiseSeed: 5}
	pCPU, _ := nn.NewParams(arch, tensor.Float32, 1)
	pGPU := pCPU.Clone()
	tr, err := NewTrainer(d, cfg, pGPU, ds)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	idx := []int{0, 4, 7, 9, 12}
	want, _, nf := cpuStep(t, cfg, pCPU, ds, idx, 0, 5, 0.05)
	st, err := tr.Step(idx, 0, 5, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	if st.NonFinite != 1 || nf != 1 {
		t.Fatalf("non-finite examples: device %d, CPU %d, want 1", st.NonFinite, nf)
	}
	got, _ := tr.Gradients()
	for pi := range want {
		checkClose(t, "gradient", got[pi], want[pi], 1e-5)
	}
}

func TestTrainerRejects(t *testing.T) {
	d := openFake(t)
	ds := synthData(10, 4, 2, 1)
	p, _ := nn.NewParams(nn.LogReg([]int{4}, 2), tensor.Float32, 1)
	cnn := nn.CNN([]int{1, 8, 8}, 2, nil, nn.ReLU)
	for name, cfg := range map[string]TrainerConfig{
		"cnn":   {Arch: cnn, PhysicalBatch: 4, Clip: 1},
		"phys":  {Arch: nn.LogReg([]int{4}, 2), Clip: 1},
		"clip":  {Arch: nn.LogReg([]int{4}, 2), PhysicalBatch: 4},
		"noise": {Arch: nn.LogReg([]int{4}, 2), PhysicalBatch: 4, Clip: 1, Noise: "cauchy"},
		"shape": {Arch: nn.LogReg([]int{5}, 2), PhysicalBatch: 4, Clip: 1},
	} {
		if _, err := NewTrainer(d, cfg, p, ds); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	tr, err := NewTrainer(d, TrainerConfig{Arch: nn.LogReg([]int{4}, 2), PhysicalBatch: 4, Clip: 1}, p, ds)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.Step([]int{0, 99}, 0, 2, 0.1); err == nil {
		t.Fatal("index out of range accepted")
	}
}

func BenchmarkFakeTrainerStep(b *testing.B) {
	d := openFake(b)
	arch := nn.MLP([]int{64}, 10, []int{32}, nn.ReLU)
	ds := synthData(256, 64, 10, 1)
	p, _ := nn.NewParams(arch, tensor.Float32, 1)
	tr, err := NewTrainer(d, TrainerConfig{Arch: arch, PhysicalBatch: 64, Clip: 1, Sigma: 1}, p, ds)
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	idx := make([]int, 64)
	for i := range idx {
		idx[i] = i
	}
	for i := 0; b.Loop(); i++ {
		if _, err := tr.Step(idx, i, 64, 0.1); err != nil {
			b.Fatal(err)
		}
	}
}
