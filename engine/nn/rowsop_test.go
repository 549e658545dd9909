package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"
)

func randSlice(r *rand.Rand, n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = r.NormFloat64()
	}
	return s
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// TestPatchesAdjoint: patches is linear, so its gradient must be its adjoint:
// ⟨patches(x), y⟩ = ⟨x, patchesᵀ(y)⟩ for all x, y.
func TestPatchesAdjoint(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, op := range []*rowsOp{
		newRowsOp(false, 2, 6, 5, 3, 3, 1, 1),
		newRowsOp(false, 3, 7, 7, 2, 4, 2, 0),
		newRowsOp(false, 1, 5, 5, 1, 5, 1, 2),
	} {
		x := randSlice(r, op.b*op.h*op.w*op.c)
		y := randSlice(r, op.b*op.oh*op.ow*op.outCols())
		px := make([]float64, len(y))
		rowsForward(op, px, x)
		pty := make([]float64, len(x))
		rowsBackward(op, pty, x, y)
		lhs, rhs := dot(px, y), dot(x, pty)
		if math.Abs(lhs-rhs) > 1e-12*math.Max(1, math.Abs(lhs)) {
			t.Errorf("%v: ⟨Px, y⟩ = %v, ⟨x, Pᵀy⟩ = %v", op, lhs, rhs)
		}
	}
}

// TestPatchesLayout: one hand-checked case of the column order (ky, kx, channel) and padding.
func TestPatchesLayout(t *testing.T) {
	op := newRowsOp(false, 1, 2, 2, 2, 2, 1, 1) // 2×2 image, 2 channels, 2×2 kernel, pad 1: 3×3 outputs
	// pixel (y, x) channel c holds 10·(2y+x) + c
	x := []float64{0, 1, 10, 11, 20, 21, 30, 31}
	out := make([]float64, op.oh*op.ow*op.outCols())
	rowsForward(op, out, x)
	// output (0,0): window rows −1..0, cols −1..0: only (0,0) is inside, at (ky,kx) = (1,1).
	want := []float64{0, 0, 0, 0, 0, 0, 0, 1}
	for j, v := range want {
		if out[j] != v {
			t.Fatalf("output (0,0) column %d = %v, want %v (row %v)", j, out[j], v, out[:8])
		}
	}
}

// TestPoolGradient checks the max-pool gradient by central differences (inputs drawn so that
// window maxima are unique).
func TestPoolGradient(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	for _, op := range []*rowsOp{newRowsOp(true, 2, 5, 5, 3, 2, 1, 0), newRowsOp(true, 1, 6, 4, 2, 2, 2, 0)} {
		x := randSlice(r, op.b*op.h*op.w*op.c)
		w := randSlice(r, op.b*op.oh*op.ow*op.c)
		f := func(x []float64) float64 {
			y := make([]float64, len(w))
			rowsForward(op, y, x)
			return dot(y, w)
		}
		g := make([]float64, len(x))
		rowsBackward(op, g, x, w)
		const h = 1e-6
		for i := range x {
			xp := append([]float64(nil), x...)
			xm := append([]float64(nil), x...)
			xp[i] += h
			xm[i] -= h
			fd := (f(xp) - f(xm)) / (2 * h)
			if math.Abs(fd-g[i]) > 1e-6 {
				t.Fatalf("%v: ∂/∂x[%d] = %v, finite difference %v", op, i, g[i], fd)
			}
		}
	}
}

// TestPoolForward against a direct max over each window.
func TestPoolForward(t *testing.T) {
	op := newRowsOp(true, 1, 3, 3, 1, 2, 1, 0)
	x := []float64{1, 5, 2, 7, 3, 9, 4, 8, 6}
	y := make([]float64, 4)
	rowsForward(op, y, x)
	want := []float64{7, 9, 8, 9}
	for i := range want {
		if y[i] != want[i] {
			t.Fatalf("pool = %v, want %v", y, want)
		}
	}
}

func TestArchValidate(t *testing.T) {
	bad := []Arch{
		{Kind: "mlp", Input: []int{4}, Classes: 1, Activation: Tanh},
		{Kind: "mlp", Input: []int{4}, Classes: 3, Hidden: []int{0}, Activation: Tanh},
		{Kind: "mlp", Input: []int{4}, Classes: 3, Activation: "sigmoid"},
		CNN([]int{4}, 10, nil, Tanh),
		CNN([]int{1, 3, 3}, 10, nil, Tanh),
		// A window slightly larger than its input: the truncating division alone would give
		// one output position and read into the next example's rows.
		{Kind: "cnn", Input: []int{1, 3, 3}, Classes: 2, Activation: Tanh, Conv: []ConvSpec{{Filters: 2, Kernel: 4, Stride: 2}}},
		{Kind: "cnn", Input: []int{1, 1, 4}, Classes: 2, Activation: Tanh, Conv: []ConvSpec{{Filters: 2, Kernel: 1, Stride: 1, PoolKernel: 2, PoolStride: 2}}},
	}
	for i, a := range bad {
		if err := a.Validate(); err == nil {
			t.Errorf("case %d: %+v accepted", i, a)
		}
	}
	if n := CNN([]int{1, 28, 28}, 10, nil, Tanh).NumParams(); n != 26010 {
		t.Errorf("MNIST CNN has %d parameters, want 26010", n)
	}
}

// BenchmarkNetRun times one forward and backward (to the pre-activations) pass of the MNIST
// CNN and of the MLP, float32.
func BenchmarkNetRun(b *testing.B) {
	for _, tc := range []struct {
		name  string
		arch  Arch
		batch int
	}{
		{"cnn-256", CNN([]int{1, 28, 28}, 10, nil, Tanh), 256},
		{"mlp-256", MLP([]int{784}, 10, []int{256}, Tanh), 256},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p, err := NewParams(tc.arch, tensor.Float32, 1)
			if err != nil {
				b.Fatal(err)
			}
			net, err := Build(tc.arch, p, tc.batch, true)
			if err != nil {
				b.Fatal(err)
			}
			shape := []int{tc.batch, tc.arch.InputSize()}
			if len(tc.arch.Conv) > 0 {
				shape = append([]int{tc.batch}, tc.arch.Input...)
			}
			x := tensor.New(tensor.WithShape(shape...), tensor.Of(tensor.Float32))
			y := tensor.New(tensor.WithShape(tc.batch, 10), tensor.Of(tensor.Float32))
			r := rand.New(rand.NewPCG(1, 2))
			for i, d := 0, x.Data().([]float32); i < len(d); i++ {
				d[i] = r.Float32()
			}
			for i, d := 0, y.Data().([]float32); i < tc.batch; i++ {
				d[i*10+r.IntN(10)] = 1
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := net.Run(x, y); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(tc.batch*b.N)/b.Elapsed().Seconds(), "examples/s")
		})
	}
}

// TestPoolArgmaxGradient: a pool whose gradient is in the graph records each window's argmax
// in the forward pass and routes ∂L/∂y there; the result equals the search of poolBackward
// bit for bit, with ties (first in scan order wins) and NaN inputs (a NaN first element is
// the maximum; a NaN elsewhere never is), and the forward values are unchanged.
func TestPoolArgmaxGradient(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, shape := range [][8]int{{3, 5, 5, 3, 2, 1}, {2, 6, 4, 2, 2, 2}, {2, 7, 7, 4, 3, 2}} {
		plain := newRowsOp(true, shape[0], shape[1], shape[2], shape[3], shape[4], shape[5], 0)
		kept := newRowsOp(true, shape[0], shape[1], shape[2], shape[3], shape[4], shape[5], 0)
		kept.keepArg = true
		x := randSlice(r, plain.b*plain.h*plain.w*plain.c)
		for i := range x {
			switch r.IntN(10) {
			case 0, 1, 2:
				x[i] = math.Round(x[i]) // ties
			case 3:
				x[i] = math.NaN()
			}
		}
		dy := randSlice(r, plain.b*plain.oh*plain.ow*plain.c)
		y1, y2 := make([]float64, len(dy)), make([]float64, len(dy))
		rowsForward(plain, y1, x)
		rowsForward(kept, y2, x)
		for i := range y1 {
			if math.Float64bits(y1[i]) != math.Float64bits(y2[i]) {
				t.Fatalf("%v: forward %d: %v with argmax, %v without", plain, i, y2[i], y1[i])
			}
		}
		g1, g2 := make([]float64, len(x)), make([]float64, len(x))
		rowsBackward(plain, g1, x, dy)
		rowsBackward(kept, g2, nil, dy) // x is not read
		for i := range g1 {
			if math.Float64bits(g1[i]) != math.Float64bits(g2[i]) {
				t.Fatalf("%v: ∂/∂x[%d]: %v from the argmax, %v from the search", plain, i, g2[i], g1[i])
			}
		}
	}
}

// TestPoolStride1: the row-run pooling of stride 1 gives the window-by-window pooling's values
// and argmax bit for bit, with ties and NaN inputs.
func TestPoolStride1(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	for _, op := range []*rowsOp{newRowsOp(true, 2, 14, 14, 16, 2, 1, 0), newRowsOp(true, 3, 5, 7, 3, 3, 1, 0), newRowsOp(true, 1, 4, 4, 2, 1, 1, 0)} {
		x := randSlice(r, op.b*op.h*op.w*op.c)
		for i := range x {
			switch r.IntN(10) {
			case 0, 1, 2:
				x[i] = math.Round(x[i])
			case 3:
				x[i] = math.NaN()
			}
		}
		per, oper := op.h*op.w*op.c, op.oh*op.ow*op.c
		for i := range op.b {
			xi := x[i*per : (i+1)*per]
			y1, y2 := make([]float64, oper), make([]float64, oper)
			a1, a2 := make([]int32, oper), make([]int32, oper)
			poolForwardWindows(op, y1, xi, a1)
			poolForwardStride1(op, y2, xi, a2)
			y3 := make([]float64, oper)
			poolForwardStride1(op, y3, xi, nil)
			for j := range y1 {
				if math.Float64bits(y1[j]) != math.Float64bits(y2[j]) || a1[j] != a2[j] || math.Float64bits(y1[j]) != math.Float64bits(y3[j]) {
					t.Fatalf("%v example %d output %d: rows %v at %d (%v without argmax), windows %v at %d", op, i, j, y2[j], a2[j], y3[j], y1[j], a1[j])
				}
			}
			// float32 (the branch-free maxArg32), with −0 against +0 among the ties.
			x32 := make([]float32, len(xi))
			for j, v := range xi {
				x32[j] = float32(v)
				if v == 0 && j%2 == 1 {
					x32[j] = float32(math.Copysign(0, -1))
				}
			}
			z1, z2 := make([]float32, oper), make([]float32, oper)
			poolForwardWindows(op, z1, x32, a1)
			poolForwardStride1(op, z2, x32, a2)
			for j := range z1 {
				if math.Float32bits(z1[j]) != math.Float32bits(z2[j]) || a1[j] != a2[j] {
					t.Fatalf("%v float32 example %d output %d: rows %v at %d, windows %v at %d", op, i, j, z2[j], a2[j], z1[j], a1[j])
				}
			}
		}
	}
}
