package nn

import (
	"fmt"
	"hash"
	"hash/fnv"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The plumbing shared by this package's custom Gorgonia ops (actop.go, gemmop.go, biasop.go,
// rowsop.go, xentop.go and the layers' own ops): the Op methods that are the same for all of
// them, the String-based hash, the unpacking of the inputs, the float32/float64 dispatch to a
// generic kernel, and Do in terms of UsePreallocDo.

// opBase gives an op the Op methods that are constant for every op of this package: the
// output is a value of its own (no pointer into an input), computed in Go (no external call),
// and no input is overwritten.
type opBase struct{}

func (opBase) ReturnsPtr() bool     { return false }
func (opBase) CallsExtern() bool    { return false }
func (opBase) OverwritesInput() int { return -1 }

// writeHash is an op's WriteHash: its String identifies it.
func writeHash(h hash.Hash, op fmt.Stringer) { fmt.Fprint(h, op.String()) }

// hashOf is the Hashcode of an op identified by its String.
func hashOf(op fmt.Stringer) uint32 {
	h := fnv.New32a()
	writeHash(h, op)
	return h.Sum32()
}

// gradPrefix starts the String of a gradient op (diff set) whose type is its forward op's.
func gradPrefix(diff bool) string {
	if diff {
		return "Grad"
	}
	return ""
}

// denseInputs returns an op's inputs as dense tensors, after checking that there are
// len(sizes) of them and that input i holds sizes[i] values.
func denseInputs(op fmt.Stringer, inputs []G.Value, sizes ...int) ([]*tensor.Dense, error) {
	if len(inputs) != len(sizes) {
		return nil, fmt.Errorf("%v: %d inputs, want %d", op, len(inputs), len(sizes))
	}
	in := make([]*tensor.Dense, len(inputs))
	for i, v := range inputs {
		t, ok := v.(*tensor.Dense)
		if !ok {
			return nil, fmt.Errorf("%v: input %d is %T, want a dense tensor", op, i, v)
		}
		if t.Shape().TotalSize() != sizes[i] {
			return nil, fmt.Errorf("%v: input %d has shape %v, want %d values", op, i, t.Shape(), sizes[i])
		}
		in[i] = t
	}
	return in, nil
}

// kernel is an op's arithmetic for one dtype: out (nil for an op whose result is not a tensor)
// from the inputs' data.
type kernel[P any, T float32 | float64] func(op P, out []T, in [][]T)

// preallocDo is UsePreallocDo for an op whose kernel computes into prealloc from the inputs,
// of len(sizes) and sizes[i] values (denseInputs).
func preallocDo[P fmt.Stringer](op P, prealloc G.Value, inputs []G.Value, sizes []int, f32 kernel[P, float32], f64 kernel[P, float64]) (G.Value, error) {
	out, err := preallocDense(op, prealloc)
	if err != nil {
		return nil, err
	}
	in, err := denseInputs(op, inputs, sizes...)
	if err != nil {
		return nil, err
	}
	return floatDo(op, out, in, f32, f64)
}

// bufDo is Do for an op whose kernel computes into buf's r×c matrix from the inputs, of
// len(sizes) and sizes[i] values (denseInputs).
func bufDo[P fmt.Stringer](op P, buf *ownBuf, r, c int, inputs []G.Value, sizes []int, f32 kernel[P, float32], f64 kernel[P, float64]) (G.Value, error) {
	in, err := denseInputs(op, inputs, sizes...)
	if err != nil {
		return nil, err
	}
	out, err := buf.get(in[0].Dtype(), r, c)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", op, err)
	}
	return floatDo(op, out, in, f32, f64)
}

// floatDo runs an op's kernel on the data of its output and inputs: f32 when they are all
// float32, f64 when they are all float64 (out may be nil: an op whose result is not a tensor).
// It returns out, or an error naming the op for any other dtype or a mix of dtypes.
func floatDo[P fmt.Stringer](op P, out *tensor.Dense, in []*tensor.Dense, f32 kernel[P, float32], f64 kernel[P, float64]) (G.Value, error) {
	if o, x, ok := floatData[float32](out, in); ok {
		f32(op, o, x)
		return out, nil
	}
	if o, x, ok := floatData[float64](out, in); ok {
		f64(op, o, x)
		return out, nil
	}
	return nil, fmt.Errorf("%v: input dtype %v: want float32 or float64, the same for every input and the output", op, in[0].Dtype())
}

// floatData returns the data of out (nil if out is nil) and of every input, if all are []T.
func floatData[T float32 | float64](out *tensor.Dense, in []*tensor.Dense) (o []T, x [][]T, ok bool) {
	if out != nil {
		if o, ok = out.Data().([]T); !ok {
			return nil, nil, false
		}
	}
	x = make([][]T, len(in))
	for i, t := range in {
		if x[i], ok = t.Data().([]T); !ok {
			return nil, nil, false
		}
	}
	return o, x, true
}

// preallocOp is an op that computes into a given output.
type preallocOp interface {
	G.Op
	G.UsePreallocDoer
}

// doInto is Do for an op with UsePreallocDo: the output, of the shape InferShape gives and the
// first input's dtype, is buf's reusable storage (an r×c matrix), or a fresh tensor with buf nil.
func doInto(op preallocOp, buf *ownBuf, inputs []G.Value) (G.Value, error) {
	if len(inputs) != op.Arity() {
		return nil, fmt.Errorf("%v: %d inputs, want %d", op, len(inputs), op.Arity())
	}
	s, err := op.InferShape()
	if err != nil {
		return nil, fmt.Errorf("%v: %w", op, err)
	}
	if buf == nil {
		return op.UsePreallocDo(tensor.New(tensor.Of(inputs[0].Dtype()), tensor.WithShape(s...)), inputs...)
	}
	if len(s) != 2 {
		return nil, fmt.Errorf("%v: output shape %v: a reusable buffer is a matrix", op, s)
	}
	out, err := buf.get(inputs[0].Dtype(), s[0], s[1])
	if err != nil {
		return nil, fmt.Errorf("%v: %w", op, err)
	}
	return op.UsePreallocDo(out, inputs...)
}

// preallocDense returns the preallocated output of UsePreallocDo as a dense tensor.
func preallocDense(op fmt.Stringer, prealloc G.Value) (*tensor.Dense, error) {
	out, ok := prealloc.(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("%v: preallocated value is %T, want a dense tensor", op, prealloc)
	}
	return out, nil
}

// tensorFnType is the Type of an op from n tensors of dims dimensions, all of one dtype, to
// a tensor of the same.
func tensorFnType(dims, n int) hm.Type {
	t := G.TensorType{Dims: dims, Of: hm.TypeVariable('a')}
	ts := make([]hm.Type, n+1)
	for i := range ts {
		ts[i] = t
	}
	return hm.NewFnType(ts...)
}

// gradAt is SymDiff's result for an op of n inputs differentiable with respect to input i
// only: the gradient op d applied to args at position i, nil elsewhere.
func gradAt(i, n int, d G.Op, args ...*G.Node) (G.Nodes, error) {
	g, err := G.ApplyOp(d, args...)
	if err != nil {
		return nil, err
	}
	grads := make(G.Nodes, n)
	grads[i] = g
	return grads, nil
}
