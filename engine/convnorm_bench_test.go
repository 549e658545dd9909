package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/kernels"
	"gorgonia.org/tensor"
)

// convSqNormsPlain is the squared norm of the per-example convolution gradient materialized
// by the float32 GEMM alone, without a bound on its rounding (the engine's method before
// convSqNorms bounded it); kept here as the baseline of BenchmarkConvSqNorms.
func convSqNormsPlain[T kernels.Float](norm2 []float64, a, e []T, b int, s nn.LayerShape, gi []T) {
	p, d, h := s.Positions, s.In, s.Out
	w := gi[:d*h]
	bias := gi[d*h : (d+1)*h]
	for i := range b {
		ai := a[i*p*d : (i+1)*p*d]
		ei := e[i*p*h : (i+1)*p*h]
		kernels.Gemm(true, false, d, h, p, 1, ai, d, ei, h, 0, w, h)
		clear(bias)
		for r := range p {
			for j, v := range ei[r*h : (r+1)*h] {
				bias[j] += v
			}
		}
		var sq float64
		for _, v := range gi[:(d+1)*h] {
			sq += float64(v) * float64(v)
		}
		norm2[i] += sq
	}
}

// convSqNorms64 is the alternative to convSqNorms's bound: widen each example's A and E to
// float64 and materialize its gradient with a float64 GEMM (products of float32 are exact
// there, so only the float64 sums round).
func convSqNorms64(norm2 []float64, a, e []float32, b int, s nn.LayerShape, a64, e64, g64 []float64) {
	p, d, h := s.Positions, s.In, s.Out
	w := g64[:d*h]
	bias := g64[d*h : (d+1)*h]
	for i := range b {
		for j, v := range a[i*p*d : (i+1)*p*d] {
			a64[j] = float64(v)
		}
		for j, v := range e[i*p*h : (i+1)*p*h] {
			e64[j] = float64(v)
		}
		kernels.Gemm(true, false, d, h, p, 1, a64[:p*d], d, e64[:p*h], h, 0, w, h)
		clear(bias)
		for r := range p {
			for j, v := range e64[r*h : (r+1)*h] {
				bias[j] += v
			}
		}
		norm2[i] += kernels.SqNorm(g64[:(d+1)*h])
	}
}

// BenchmarkConvSqNorms: the per-example norms of the MNIST CNN's two convolution layers
// (P = 196 positions × 64 inputs × 16 filters, then 25 × 256 × 32) for a physical batch of 64
// in float32 — the engine's rigorous bound (‖Ĝ‖ plus the GEMM's rounding bound), the plain
// float32 norm it replaced, and the float64-GEMM alternative.
func BenchmarkConvSqNorms(b *testing.B) {
	const batch = 64
	shapes := []nn.LayerShape{{Name: "conv1", In: 64, Out: 16, Positions: 196}, {Name: "conv2", In: 256, Out: 32, Positions: 25}}
	rng := rand.New(rand.NewPCG(1, 2))
	type layer struct {
		s    nn.LayerShape
		a, e []float32
	}
	var layers []layer
	maxG, maxA, maxE := 0, 0, 0
	for _, s := range shapes {
		l := layer{s: s, a: make([]float32, batch*s.Positions*s.In), e: make([]float32, batch*s.Positions*s.Out)}
		for i := range l.a {
			l.a[i] = float32(rng.NormFloat64())
		}
		for i := range l.e {
			l.e[i] = float32(1e-3 * rng.NormFloat64())
		}
		layers = append(layers, l)
		maxG = max(maxG, (s.In+1)*s.Out)
		maxA = max(maxA, s.Positions*s.In)
		maxE = max(maxE, s.Positions*s.Out)
	}
	norm2, slack2 := make([]float64, batch), make([]float64, batch)
	gi := make([]float32, maxG)
	a64, e64, g64 := make([]float64, maxA), make([]float64, maxE), make([]float64, maxG)
	b.Run("bound", func(b *testing.B) {
		for b.Loop() {
			for _, l := range layers {
				convSqNorms(norm2, slack2, l.a, l.e, batch, l.s, gi)
			}
		}
	})
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			for _, l := range layers {
				convSqNormsPlain(norm2, l.a, l.e, batch, l.s, gi)
			}
		}
	})
	b.Run("float64", func(b *testing.B) {
		for b.Loop() {
			for _, l := range layers {
				convSqNorms64(norm2, l.a, l.e, batch, l.s, a64, e64, g64)
			}
		}
	})
}

// TestConvSqNormsBound: the bound of convSqNorms is at least the exact norm of the per-example
// gradient (computed in float64 from the float32 taps), and close to it on ordinary data; its
// slack is tiny there.
func TestConvSqNormsBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const batch = 5
	s := nn.LayerShape{Name: "conv", In: 12, Out: 5, Positions: 30}
	a := make([]float32, batch*s.Positions*s.In)
	e := make([]float32, batch*s.Positions*s.Out)
	for i := range a {
		a[i] = float32(rng.NormFloat64())
	}
	for i := range e {
		e[i] = float32(rng.NormFloat64())
	}
	// Example 1 cancels: its positions come in pairs with opposite errors and equal inputs,
	// plus one huge input, so the float32 GEMM rounds far from the exact (tiny) gradient.
	p, d, h := s.Positions, s.In, s.Out
	for r := 0; r+1 < p; r += 2 {
		copy(a[(p+r+1)*d:(p+r+2)*d], a[(p+r)*d:(p+r+1)*d])
		for k := range h {
			e[(p+r+1)*h+k] = -e[(p+r)*h+k] * (1 + 1e-7)
		}
	}
	a[(p+4)*d] = 3e30
	a[(p+5)*d] = 3e30
	norm2, slack2 := make([]float64, batch), make([]float64, batch)
	convSqNorms(norm2, slack2, a, e, batch, s, make([]float32, (d+1)*h))
	plain := make([]float64, batch)
	convSqNormsPlain(plain, a, e, batch, s, make([]float32, (d+1)*h))
	for i := range batch {
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
		exact := math.Sqrt(kernels.SqNorm(g))
		got := math.Sqrt(norm2[i])
		if got < exact*(1-1e-15) {
			t.Errorf("example %d: bound %v below the exact norm %v", i, got, exact)
		}
		if i != 1 && got > exact*(1+1e-3) {
			t.Errorf("example %d: bound %v far above the exact norm %v", i, got, exact)
		}
		if i != 1 && math.Sqrt(slack2[i]) > 1e-30 {
			t.Errorf("example %d: slack %v", i, math.Sqrt(slack2[i]))
		}
		t.Logf("example %d: exact %.9g, bound %.9g, float32 GEMM alone %.9g", i, exact, got, math.Sqrt(plain[i]))
	}
	if math.Sqrt(plain[1]) >= math.Sqrt(norm2[1]) {
		t.Errorf("example 1: the float32 GEMM's norm %v is not below the bound %v", math.Sqrt(plain[1]), math.Sqrt(norm2[1]))
	}
}

// BenchmarkStepCNN: one DP-SGD step of the MNIST CNN (float32, physical batch 64, logical 256).
func BenchmarkStepCNN(b *testing.B) {
	arch := nn.CNN([]int{1, 28, 28}, 10, nil, nn.Tanh)
	cfg := Config{Arch: arch, Dtype: tensor.Float32, PhysicalBatch: 64, Epochs: 1, Clip: 1, Sigma: 1,
		Optimizer: OptimizerConfig{Name: "sgd", LR: 0.1}}
	benchSteps(b, cfg, randomDataset(arch, 2048, 1), 256)
}
