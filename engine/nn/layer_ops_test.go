package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// checkOpGradient compares an op's gradient op (∂L/∂x for L = Σ dy⊙f(x)) with central
// differences of f in float64: the oracle of the per-example tests runs these ops' backward
// passes, so they are checked here on their own.
func checkOpGradient(t *testing.T, name string, fwd func(x *tensor.Dense) []float64, grad func(x, dy *tensor.Dense) []float64, shape []int, seed uint64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 5))
	n := 1
	for _, v := range shape {
		n *= v
	}
	xs, dys := make([]float64, n), make([]float64, 0)
	for i := range xs {
		xs[i] = 2 * r.NormFloat64()
	}
	y0 := fwd(tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]float64(nil), xs...))))
	for range y0 {
		dys = append(dys, r.NormFloat64())
	}
	got := grad(tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]float64(nil), xs...))),
		tensor.New(tensor.WithShape(len(dys)/shape[len(shape)-1], shape[len(shape)-1]), tensor.WithBacking(dys)))
	const h = 1e-6
	var worst, scale float64
	for i := range xs {
		loss := func(v float64) float64 {
			x := append([]float64(nil), xs...)
			x[i] = v
			y := fwd(tensor.New(tensor.WithShape(shape...), tensor.WithBacking(x)))
			s := 0.0
			for j, w := range y {
				s += dys[j] * w
			}
			return s
		}
		num := (loss(xs[i]+h) - loss(xs[i]-h)) / (2 * h)
		worst = math.Max(worst, math.Abs(num-got[i]))
		scale = math.Max(scale, math.Abs(num))
	}
	if !(worst <= 1e-6*math.Max(scale, 1)) {
		t.Errorf("%s: gradient differs from central differences by %.3g (scale %.3g)", name, worst, scale)
	}
}

func doOp(t *testing.T, op G.Op, in ...*tensor.Dense) []float64 {
	t.Helper()
	vals := make([]G.Value, len(in))
	for i, v := range in {
		vals[i] = v
	}
	out, err := op.Do(vals...)
	if err != nil {
		t.Fatal(err)
	}
	return out.Data().([]float64)
}

func TestPointOpGradient(t *testing.T) {
	for i, op := range []*pointOp{
		{fn: "gelu", shape: tensor.Shape{3, 7}},
		{fn: "tempered_sigmoid", scale: 2, temp: 2, offset: 1, shape: tensor.Shape{3, 7}},
		{fn: "tempered_sigmoid", scale: 1.3, temp: 0.7, offset: 0.2, shape: tensor.Shape{3, 7}},
	} {
		d := *op
		d.diff = true
		checkOpGradient(t, op.String(), func(x *tensor.Dense) []float64 { return doOp(t, op, x) },
			func(x, dy *tensor.Dense) []float64 { return doOp(t, &d, x, dy) }, []int{3, 7}, uint64(i))
	}
	// Reference values: GELU(1) = Φ(1) = 0.8413447460685429…; tempered sigmoid (2, 2, 1) = tanh.
	g := &pointOp{fn: "gelu"}
	if v := g.f(1); math.Abs(v-0.8413447460685429) > 1e-15 {
		t.Errorf("gelu(1) = %v, want 0.8413447460685429", v)
	}
	ts := &pointOp{fn: "tempered_sigmoid", scale: 2, temp: 2, offset: 1}
	for _, x := range []float64{-3, -0.5, 0, 0.7, 2} {
		if v := ts.f(x); math.Abs(v-math.Tanh(x)) > 1e-15 {
			t.Errorf("tempered sigmoid (2, 2, 1) at %v = %v, want tanh = %v", x, v, math.Tanh(x))
		}
	}
}

func TestNormOpGradient(t *testing.T) {
	for i, op := range []*normOp{
		{b: 2, p: 1, c: 7, groups: 1}, // LayerNorm
		{b: 2, p: 6, c: 4, groups: 2}, // GroupNorm
		{b: 3, p: 4, c: 6, groups: 3},
	} {
		d := *op
		d.diff = true
		shape := []int{op.b * op.p, op.c}
		checkOpGradient(t, op.String(), func(x *tensor.Dense) []float64 { return doOp(t, op, x) },
			func(x, dy *tensor.Dense) []float64 { return doOp(t, &d, x, dy) }, shape, uint64(10+i))
	}
	// Each example's group has mean 0 and variance v/(v + ε) after normalization.
	op := &normOp{b: 2, p: 3, c: 4, groups: 2}
	x := tensor.New(tensor.WithShape(6, 4), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 40}))
	y := doOp(t, op, x)
	for e := range 2 {
		for g := range 2 {
			var s, s2 float64
			for r := range 3 {
				for c := 2 * g; c < 2*g+2; c++ {
					v := y[(e*3+r)*4+c]
					s += v
					s2 += v * v
				}
			}
			if math.Abs(s/6) > 1e-12 || s2/6 > 1 || s2/6 < 0.99 {
				t.Errorf("example %d group %d: mean %v, mean square %v", e, g, s/6, s2/6)
			}
		}
	}
}

func TestAvgPoolGradient(t *testing.T) {
	op := newRowsOp(true, 2, 5, 4, 3, 2, 1, 0)
	op.avg = true
	d := &rowsDiffOp{fwd: op}
	checkOpGradient(t, op.String(), func(x *tensor.Dense) []float64 { return doOp(t, op, x) },
		func(x, dy *tensor.Dense) []float64 { return doOp(t, d, x, dy) }, []int{2 * 5 * 4, 3}, 20)
	// A constant image pools to the constant.
	x := tensor.New(tensor.WithShape(40, 3), tensor.WithBacking(make([]float64, 120)))
	for i := range x.Data().([]float64) {
		x.Data().([]float64)[i] = 2.5
	}
	for _, v := range doOp(t, op, x) {
		if v != 2.5 {
			t.Fatalf("average of a constant 2.5: %v", v)
		}
	}
}

// TestEmbedOp: the lookup gives the table's rows (zero rows for invalid ids), and the scatter
// op (the table's gradient, which the oracle uses) is the lookup's adjoint: ⟨lookup(T), G⟩ =
// ⟨T, scatter(G)⟩ for random T and G.
func TestEmbedOp(t *testing.T) {
	const b, l, v, d = 2, 4, 5, 3
	ids := []float64{0, 4, 4, 2, -1, 2.5, 5, math.NaN()}
	r := rand.New(rand.NewPCG(4, 4))
	table := make([]float64, v*d)
	g := make([]float64, b*l*d)
	for i := range table {
		table[i] = r.NormFloat64()
	}
	for i := range g {
		g[i] = r.NormFloat64()
	}
	x := tensor.New(tensor.WithShape(b, l), tensor.WithBacking(ids))
	op := &embedOp{b: b, l: l, v: v, d: d}
	out := doOp(t, op, x, tensor.New(tensor.WithShape(v, d), tensor.WithBacking(table)))
	for p, id := range ids {
		for j := range d {
			want := 0.0
			if p < 4 {
				want = table[int(id)*d+j]
			}
			if out[p*d+j] != want {
				t.Fatalf("position %d (id %v) channel %d: %v, want %v", p, id, j, out[p*d+j], want)
			}
		}
	}
	s := *op
	s.scatter = true
	sc := doOp(t, &s, x, tensor.New(tensor.WithShape(b*l, d), tensor.WithBacking(g)))
	var lhs, rhs float64
	for i := range out {
		lhs += out[i] * g[i]
	}
	for i := range table {
		rhs += table[i] * sc[i]
	}
	if math.Abs(lhs-rhs) > 1e-12*math.Max(1, math.Abs(lhs)) {
		t.Errorf("⟨lookup(T), G⟩ = %v, ⟨T, scatter(G)⟩ = %v", lhs, rhs)
	}
}
