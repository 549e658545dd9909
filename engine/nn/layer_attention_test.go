package nn

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gorgonia.org/tensor"
)

// naiveAttention is a second, plain implementation of multi-head self-attention on one
// example's L rows of [Q | K | V]: scores, exponentials normalized by their sum (no shift),
// weighted values.
func naiveAttention(x []float64, l, dim, heads int) []float64 {
	dh := dim / heads
	out := make([]float64, l*dim)
	for h := range heads {
		for r := range l {
			w := make([]float64, l)
			z := 0.0
			for c := range l {
				s := 0.0
				for j := range dh {
					s += x[r*3*dim+h*dh+j] * x[c*3*dim+dim+h*dh+j]
				}
				w[c] = math.Exp(s / math.Sqrt(float64(dh)))
				z += w[c]
			}
			for c := range l {
				for j := range dh {
					out[r*dim+h*dh+j] += w[c] / z * x[c*3*dim+2*dim+h*dh+j]
				}
			}
		}
	}
	return out
}

var attnCases = []*attnOp{
	{b: 2, l: 3, dim: 4, heads: 2},
	{b: 1, l: 5, dim: 3, heads: 3},
	{b: 3, l: 1, dim: 2, heads: 1},
	{b: 2, l: 7, dim: 6, heads: 2},
}

// TestAttnOpForward: the op equals the plain implementation, example by example; with Q = 0
// every position's output is the mean of the example's values.
func TestAttnOpForward(t *testing.T) {
	for ci, op := range attnCases {
		r := rand.New(rand.NewPCG(uint64(ci), 3))
		w := 3 * op.dim
		x := make([]float64, op.b*op.l*w)
		for j := range x {
			x[j] = r.NormFloat64()
		}
		got := doOp(t, op, tensor.New(tensor.WithShape(op.b*op.l, w), tensor.WithBacking(slices.Clone(x))))
		for i := range op.b {
			want := naiveAttention(x[i*op.l*w:(i+1)*op.l*w], op.l, op.dim, op.heads)
			if e := maxAbsDiff(got[i*op.l*op.dim:(i+1)*op.l*op.dim], want); e > 1e-12 {
				t.Errorf("%v example %d: differs from the plain implementation by %.3g", op, i, e)
			}
		}
		for row := range op.b * op.l {
			clear(x[row*w : row*w+op.dim])
		}
		got = doOp(t, op, tensor.New(tensor.WithShape(op.b*op.l, w), tensor.WithBacking(slices.Clone(x))))
		for i := range op.b {
			for j := range op.dim {
				mean := 0.0
				for c := range op.l {
					mean += x[(i*op.l+c)*w+2*op.dim+j] / float64(op.l)
				}
				for rr := range op.l {
					if v := got[(i*op.l+rr)*op.dim+j]; math.Abs(v-mean) > 1e-12 {
						t.Errorf("%v, Q = 0: example %d position %d channel %d = %v, want the mean %v", op, i, rr, j, v, mean)
					}
				}
			}
		}
	}
}

// TestAttnOpGradient: the gradient op against central differences of the forward op.
func TestAttnOpGradient(t *testing.T) {
	for ci, op := range attnCases {
		d := *op
		d.diff = true
		checkOpGradient(t, op.String(), func(x *tensor.Dense) []float64 { return doOp(t, op, x) },
			// The ops check sizes, not shapes: x as (3·B·L)×dim, so that ∂L/∂out is rows of dim.
			func(x, dy *tensor.Dense) []float64 { return doOp(t, &d, x, dy) }, []int{3 * op.b * op.l, op.dim}, uint64(20+ci))
	}
}

// TestAttnOpIsolation: a record holding NaN, ±Inf, 1e30 or ±3.4e38 in one value (or all) of
// its [Q | K | V] rows leaves every other example's output and gradient bit-identical, in
// float32 and float64; a finite record gives finite values of its own.
func TestAttnOpIsolation(t *testing.T) {
	op := &attnOp{b: 3, l: 4, dim: 4, heads: 2}
	diff := *op
	diff.diff = true
	w, per := 3*op.dim, op.l*3*op.dim
	r := rand.New(rand.NewPCG(7, 7))
	x := make([]float64, op.b*per)
	g := make([]float64, op.b*op.l*op.dim)
	for j := range x {
		x[j] = r.NormFloat64()
	}
	for j := range g {
		g[j] = r.NormFloat64()
	}
	run := func(xs []float64) (y, dx []float64) {
		xt := tensor.New(tensor.WithShape(op.b*op.l, w), tensor.WithBacking(slices.Clone(xs)))
		gt := tensor.New(tensor.WithShape(op.b*op.l, op.dim), tensor.WithBacking(slices.Clone(g)))
		return doOp(t, op, xt), doOp(t, &diff, xt, gt)
	}
	y0, dx0 := run(x)
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1e30, 3.4e38, -3.4e38, math.SmallestNonzeroFloat64, math.Copysign(0, -1)} {
		for rec := range op.b {
			for _, all := range []bool{false, true} {
				xs := slices.Clone(x)
				if all {
					for j := rec * per; j < (rec+1)*per; j++ {
						xs[j] = bad
					}
				} else {
					xs[rec*per+per/2+1] = bad
				}
				y, dx := run(xs)
				for i := range op.b {
					if i == rec {
						continue
					}
					yo, xo := i*op.l*op.dim, i*per
					if !slices.Equal(y[yo:yo+op.l*op.dim], y0[yo:yo+op.l*op.dim]) || !slices.Equal(dx[xo:xo+per], dx0[xo:xo+per]) {
						t.Errorf("value %v in record %d (all %v): example %d changed", bad, rec, all, i)
					}
				}
			}
		}
	}
}

// TestMeanOpGradient: the mean over positions and its gradient against central differences;
// a constant example pools to its value.
func TestMeanOpGradient(t *testing.T) {
	for i, op := range []*meanOp{{b: 2, p: 3, c: 4}, {b: 1, p: 5, c: 1}, {b: 3, p: 1, c: 2}} {
		d := *op
		d.back = true
		checkOpGradient(t, op.String(), func(x *tensor.Dense) []float64 { return doOp(t, op, x) },
			func(x, dy *tensor.Dense) []float64 {
				return doOp(t, &d, tensor.New(tensor.WithShape(op.b, op.c), tensor.WithBacking(dy.Data().([]float64))))
			}, []int{op.b * op.p, op.c}, uint64(30+i))
	}
	op := &meanOp{b: 2, p: 3, c: 2}
	y := doOp(t, op, tensor.New(tensor.WithShape(6, 2), tensor.WithBacking([]float64{1, 2, 1, 2, 1, 2, -3, 0.5, -3, 0.5, -3, 0.5})))
	if !slices.Equal(y, []float64{1, 2, -3, 0.5}) {
		t.Errorf("mean of constant examples = %v, want [1 2 -3 0.5]", y)
	}
}

// TestPosOp: every example gets the same table added.
func TestPosOp(t *testing.T) {
	op := &posOp{b: 2, p: 2, c: 3}
	x := tensor.New(tensor.WithShape(4, 3), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}))
	tab := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{0.5, -1, 0, 2, 0, -4}))
	y := doOp(t, op, x, tab)
	want := []float64{1.5, 1, 3, 6, 5, 2, 7.5, 7, 9, 12, 11, 8}
	if !slices.Equal(y, want) {
		t.Errorf("got %v, want %v", y, want)
	}
}

func maxAbsDiff(a, b []float64) float64 {
	m := 0.0
	for i := range a {
		m = math.Max(m, math.Abs(a[i]-b[i]))
	}
	return m
}

// TestTransformerPreset: the preset on MNIST's and CIFAR-10's shapes has the patches, the
// parameter count and the positions its definition gives, and builds.
func TestTransformerPreset(t *testing.T) {
	for _, tc := range []struct {
		input    []int
		patch, l int
	}{{[]int{1, 28, 28}, 7, 16}, {[]int{3, 32, 32}, 4, 64}} {
		const d = TransformerWidth
		a := Transformer(tc.input, 10, d, TransformerHeads, 2)
		if err := a.Validate(); err != nil {
			t.Fatal(err)
		}
		if p := TransformerPatch(tc.input[1], tc.input[2]); p != tc.patch {
			t.Errorf("%v: patch %d, want %d", tc.input, p, tc.patch)
		}
		block := 2*d + (d*3*d + 3*d) + (d*d + d) + 2*d + (d*2*d + 2*d) + (2*d*d + d)
		want := (tc.input[0]*tc.patch*tc.patch*d + d) + tc.l*d + 2*block + 2*d + (d*10 + 10)
		if n := a.NumParams(); n != want {
			t.Errorf("%v: %d parameters, want %d", tc.input, n, want)
		}
		ls, err := a.Layers()
		if err != nil {
			t.Fatal(err)
		}
		if ls[0].Positions != tc.l || ls[1].Name != "2.residual.1.attention.qkv" {
			t.Errorf("%v: first layers %+v %+v", tc.input, ls[0], ls[1])
		}
	}
}

// BenchmarkAttnOp: the transformer preset's attention on MNIST (16 positions, dim 64, 4 heads)
// for a physical batch of 128, forward and gradient, float32.
func BenchmarkAttnOp(b *testing.B) {
	op := &attnOp{b: 128, l: 16, dim: 64, heads: 4}
	d := *op
	d.diff = true
	r := rand.New(rand.NewPCG(1, 1))
	x := make([]float32, op.b*op.l*3*op.dim)
	g := make([]float32, op.b*op.l*op.dim)
	for j := range x {
		x[j] = float32(r.NormFloat64())
	}
	for j := range g {
		g[j] = float32(r.NormFloat64())
	}
	xt := tensor.New(tensor.WithShape(op.b*op.l, 3*op.dim), tensor.WithBacking(x))
	gt := tensor.New(tensor.WithShape(op.b*op.l, op.dim), tensor.WithBacking(g))
	for range b.N {
		if _, err := op.Do(xt); err != nil {
			b.Fatal(err)
		}
		if _, err := d.Do(xt, gt); err != nil {
			b.Fatal(err)
		}
	}
}
