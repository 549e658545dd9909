package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/kernels"
	"gorgonia.org/tensor"
)

// convLayerData makes random taps (A, E) of a convolution layer for a batch of b examples.
func convLayerData(rng *rand.Rand, s nn.LayerShape, b int, escale float64) (a, e []float32) {
	a = make([]float32, b*s.Positions*s.In)
	e = make([]float32, b*s.Positions*s.Out)
	for i := range a {
		a[i] = float32(rng.NormFloat64())
	}
	for i := range e {
		e[i] = float32(escale * rng.NormFloat64())
	}
	return a, e
}

// exactConvGrad is example i's convolution gradient [Aᵢ, 1]ᵀ·Eᵢ in float64 from the float32
// taps (products of float32 are exact in float64): the oracle of TestConvGrads.
func exactConvGrad(a, e []float32, i int, s nn.LayerShape) []float64 {
	p, d, h := s.Positions, s.In, s.Out
	g := make([]float64, (d+1)*h)
	for r := range p {
		for k := range h {
			ev := float64(e[(i*p+r)*h+k])
			g[d*h+k] += ev
			for j := range d {
				g[j*h+k] += float64(a[(i*p+r)*d+j]) * ev
			}
		}
	}
	return g
}

// TestConvGrads: convGrads's per-example gradients equal the exact ones to float32 GEMM
// rounding, their squared norms are added to norm2 exactly as ‖Ĝᵢ‖²; convClippedSum adds
// Σ cᵢ·Ĝᵢ over the examples with cᵢ > 0 — a NaN example with coefficient 0 poisons nothing —
// and every example's clipped contribution has norm at most C.
func TestConvGrads(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const batch = 6
	s := nn.LayerShape{Name: "conv", In: 12, Out: 5, Positions: 30}
	p, d, h := s.Positions, s.In, s.Out
	a, e := convLayerData(rng, s, batch, 1)
	e[(3*p+2)*h+1] = float32(math.NaN()) // example 3: non-finite
	norm2 := make([]float64, batch)
	norm2[0] = 0.25 // convGrads adds to what the other layers put there
	g := make([]float32, batch*(d+1)*h)
	convGrads(norm2, g, a, e, batch, s)
	n := (d + 1) * h
	for i := range batch {
		gi := g[i*n : (i+1)*n]
		want := 0.0
		if i == 0 {
			want = 0.25
		}
		want += kernels.SqNorm(gi)
		if i == 3 {
			if !math.IsNaN(norm2[i]) {
				t.Fatalf("example 3: norm² %v, want NaN", norm2[i])
			}
			continue
		}
		if norm2[i] != want {
			t.Fatalf("example %d: norm² %v, want ‖Ĝ‖² = %v", i, norm2[i], want)
		}
		exact := exactConvGrad(a, e, i, s)
		for j, v := range exact {
			if math.Abs(float64(gi[j])-v) > 1e-5*(1+math.Abs(v)) {
				t.Fatalf("example %d entry %d: %v, exact %v", i, j, gi[j], v)
			}
		}
	}
	const clip = 0.3
	coef := make([]float64, batch)
	mask := []float64{1, 1, 1, 1, 1, 0}
	if nf := kernels.ClipCoefs(coef, norm2, mask, kernels.ClipBound[float32](clip)); nf != 1 || coef[3] != 0 || coef[5] != 0 {
		t.Fatalf("ClipCoefs: %d non-finite, coefficients %v", nf, coef)
	}
	dw, db := make([]float64, d*h), make([]float64, h)
	convClippedSum(dw, db, g, coef, s)
	wantW, wantB := make([]float64, d*h), make([]float64, h)
	for i, c := range coef {
		if c == 0 {
			continue
		}
		gi := g[i*n : (i+1)*n]
		var sq float64
		for j, v := range gi {
			x := c * float64(v)
			sq += x * x
			if j < d*h {
				wantW[j] += x
			} else {
				wantB[j-d*h] += x
			}
		}
		if i == 0 {
			continue // its norm² also counts 0.25 from "other layers"
		}
		if math.Sqrt(sq) > clip {
			t.Fatalf("example %d: clipped norm %v > C = %v", i, math.Sqrt(sq), clip)
		}
	}
	for j := range wantW {
		if dw[j] != wantW[j] || math.IsNaN(dw[j]) {
			t.Fatalf("weight sum %d: %v, want %v", j, dw[j], wantW[j])
		}
	}
	for j := range wantB {
		if db[j] != wantB[j] {
			t.Fatalf("bias sum %d: %v, want %v", j, db[j], wantB[j])
		}
	}
}

// BenchmarkConvGrads: the per-example gradients and norms of the MNIST CNN's two convolution
// layers (P = 196 positions × 64 inputs × 16 filters, then 25 × 256 × 32) for a physical batch
// of 64 in float32, then their clipped sum.
func BenchmarkConvGrads(b *testing.B) {
	const batch = 64
	shapes := []nn.LayerShape{{Name: "conv1", In: 64, Out: 16, Positions: 196}, {Name: "conv2", In: 256, Out: 32, Positions: 25}}
	rng := rand.New(rand.NewPCG(1, 2))
	type layer struct {
		s    nn.LayerShape
		a, e []float32
		g    []float32
	}
	var layers []layer
	for _, s := range shapes {
		a, e := convLayerData(rng, s, batch, 1e-3)
		layers = append(layers, layer{s: s, a: a, e: e, g: make([]float32, batch*(s.In+1)*s.Out)})
	}
	norm2, coef := make([]float64, batch), make([]float64, batch)
	for i := range coef {
		coef[i] = 0.5
	}
	for b.Loop() {
		clear(norm2)
		for _, l := range layers {
			convGrads(norm2, l.g, l.a, l.e, batch, l.s)
		}
		for _, l := range layers {
			dw, db := make([]float64, l.s.In*l.s.Out), make([]float64, l.s.Out)
			convClippedSum(dw, db, l.g, coef, l.s)
		}
	}
}

// BenchmarkStepCNN: one DP-SGD step of the MNIST CNN (float32, physical batch 64, logical 256).
func BenchmarkStepCNN(b *testing.B) {
	arch := nn.CNN([]int{1, 28, 28}, 10, nil, nn.Tanh)
	cfg := Config{Arch: arch, Dtype: tensor.Float32, PhysicalBatch: 64, Epochs: 1, Clip: 1, Sigma: 1,
		Optimizer: OptimizerConfig{Name: "sgd", LR: 0.1}}
	benchSteps(b, cfg, randomDataset(arch, 2048, 1), 256)
}
