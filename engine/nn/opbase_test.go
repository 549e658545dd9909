package nn

import (
	"fmt"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// opBaseCase is one custom op and the sizes of its valid inputs.
type opBaseCase struct {
	op    G.Op
	sizes []int
}

func opBaseCases(t *testing.T) []opBaseCase {
	t.Helper()
	act, err := newActOp(Tanh, tensor.Shape{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	gemm := newGemmOp(2, 3, 4, true)
	rows := newRowsOp(true, 1, 4, 4, 2, 2, 2, 0)
	point := &pointOp{fn: "gelu", shape: tensor.Shape{2, 3}}
	pointDiff := *point
	pointDiff.diff = true
	norm := &normOp{b: 2, p: 1, c: 4, groups: 2}
	normDiff := *norm
	normDiff.diff = true
	embed := &embedOp{b: 2, l: 3, v: 5, d: 4}
	attn := &attnOp{b: 1, l: 2, dim: 2, heads: 1}
	attnDiff := *attn
	attnDiff.diff = true
	return []opBaseCase{
		{act, []int{6}},
		{&actDiffOp{fwd: act}, []int{6, 6}},
		{gemm, []int{6, 12, 4}},
		{&gemmDiffOp{fwd: gemm}, []int{8, 12}},
		{&biasOp{m: 2, n: 3}, []int{6, 3}},
		{rows, []int{32}},
		{&rowsDiffOp{fwd: rows}, []int{32, 8}},
		{&xentOp{b: 2, k: 3}, []int{6, 6}},
		{point, []int{6}},
		{&pointDiff, []int{6, 6}},
		{norm, []int{8}},
		{&normDiff, []int{8, 8}},
		{embed, []int{6, 20}},
		{&flattenOp{rows: 4, cols: 2, b: 2}, []int{8}},
		// The transformer's ops (layer_attention.go).
		{attn, []int{12}},
		{&attnDiff, []int{12, 4}},
		{&posOp{b: 2, p: 1, c: 2}, []int{4, 2}},
		{&meanOp{b: 2, p: 2, c: 2}, []int{8}},
		{&meanOp{b: 2, p: 2, c: 2, back: true}, []int{4}},
	}
}

// matrixOf is a tensor of n values of dtype dt, shaped as the ops expect (rowsOp checks its
// input is (b·h·w)×c, here 16×2 and 4×2).
func matrixOf(dt tensor.Dtype, n int) *tensor.Dense {
	shape := tensor.Shape{1, n}
	if n%2 == 0 {
		shape = tensor.Shape{n / 2, 2}
	}
	if dt == tensor.Float32 {
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(make([]float32, n)))
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(make([]float64, n)))
}

func inputsOf(dts []tensor.Dtype, sizes []int) []G.Value {
	in := make([]G.Value, len(sizes))
	for i, n := range sizes {
		in[i] = matrixOf(dts[i%len(dts)], n)
	}
	return in
}

// TestOpBaseInputs: every custom op runs on valid float32 and float64 inputs, and returns an
// error naming it, never a panic, for a missing input, a wrong size or a mix of dtypes.
func TestOpBaseInputs(t *testing.T) {
	for _, c := range opBaseCases(t) {
		name := c.op.String()
		do := func(in []G.Value) (v G.Value, err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
					t.Errorf("%s: %v", name, err)
				}
			}()
			return c.op.Do(in...)
		}
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			v, err := do(inputsOf([]tensor.Dtype{dt}, c.sizes))
			if err != nil {
				t.Errorf("%s, %v: %v", name, dt, err)
				continue
			}
			if v.Dtype() != dt {
				t.Errorf("%s: output dtype %v, want %v", name, v.Dtype(), dt)
			}
			if c.op.ReturnsPtr() || c.op.CallsExtern() || c.op.OverwritesInput() != -1 {
				t.Errorf("%s: constant Op methods changed", name)
			}
		}
		bad := map[string][]G.Value{
			"one input too few": inputsOf([]tensor.Dtype{tensor.Float64}, c.sizes[:len(c.sizes)-1]),
			"a wrong size":      inputsOf([]tensor.Dtype{tensor.Float64}, append(slices.Clone(c.sizes[:len(c.sizes)-1]), c.sizes[len(c.sizes)-1]+2)),
		}
		if len(c.sizes) > 1 {
			bad["mixed dtypes"] = inputsOf([]tensor.Dtype{tensor.Float32, tensor.Float64}, c.sizes)
		}
		for what, in := range bad {
			if _, err := do(in); err == nil {
				t.Errorf("%s with %s: no error", name, what)
			}
		}
	}
}

// TestOpBaseHash: an op's hash is that of its String, and the ops (forward and gradient, the
// configurations above) all hash apart, so that Gorgonia never merges two of them.
func TestOpBaseHash(t *testing.T) {
	seen := map[uint32]string{}
	for _, c := range opBaseCases(t) {
		s := c.op.String()
		h := c.op.Hashcode()
		if h != hashOf(c.op) {
			t.Errorf("%s: Hashcode %d, hashOf %d", s, h, hashOf(c.op))
		}
		if prev, ok := seen[h]; ok {
			t.Errorf("%s and %s: same hash %d", s, prev, h)
		}
		seen[h] = s
	}
}
