package nn

import (
	"fmt"
	"hash"
	"hash/fnv"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// biasOp adds a 1×n bias row to every row of an m×n matrix. Gorgonia's BroadcastAdd first
// materializes the repeated bias as a full m×n matrix, which for a convolution's B·P rows
// cost as much as the addition itself. The op is differentiable only with respect to the
// matrix (its gradient passes through unchanged): dpsgd never asks the graph for a bias
// gradient, since the DP step forms the clipped bias sums from the per-example errors.
type biasOp struct{ m, n int }

func (op *biasOp) Arity() int { return 2 }

func (op *biasOp) Type() hm.Type {
	t := G.TensorType{Dims: 2, Of: hm.TypeVariable('a')}
	return hm.NewFnType(t, t, t)
}

func (op *biasOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{op.m, op.n}, nil
}

func (op *biasOp) Do(inputs ...G.Value) (G.Value, error) {
	if len(inputs) != 2 {
		return nil, fmt.Errorf("%v: %d inputs, want 2", op, len(inputs))
	}
	x, ok := inputs[0].(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("%v: input is %T", op, inputs[0])
	}
	out := tensor.New(tensor.Of(x.Dtype()), tensor.WithShape(op.m, op.n))
	return op.UsePreallocDo(out, inputs...)
}

func (op *biasOp) UsePreallocDo(prealloc G.Value, inputs ...G.Value) (G.Value, error) {
	x, b, out, err := binaryArgs(op, prealloc, inputs)
	if err != nil {
		return nil, err
	}
	if x.Shape().TotalSize() != op.m*op.n || b.Shape().TotalSize() != op.n {
		return nil, fmt.Errorf("%v: shapes %v and %v", op, x.Shape(), b.Shape())
	}
	switch xd := x.Data().(type) {
	case []float32:
		addBias(out.Data().([]float32), xd, b.Data().([]float32), op.m, op.n)
	case []float64:
		addBias(out.Data().([]float64), xd, b.Data().([]float64), op.m, op.n)
	default:
		return nil, fmt.Errorf("%v: dtype %v not supported", op, x.Dtype())
	}
	return out, nil
}

func addBias[T float32 | float64](out, x, b []T, m, n int) {
	parallelRows(m, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			o, r := out[i*n:(i+1)*n], x[i*n:(i+1)*n]
			for j, v := range b {
				o[j] = r[j] + v
			}
		}
	})
}

// parallelRows splits [0, m) into one contiguous block per GOMAXPROCS worker when the work is
// large enough to pay for the goroutines.
func parallelRows(m int, f func(lo, hi int)) {
	if m < 4096 {
		f(0, m)
		return
	}
	parallelExamples(2, func(k int) { f(k*m/2, (k+1)*m/2) })
}

func (op *biasOp) ReturnsPtr() bool      { return false }
func (op *biasOp) CallsExtern() bool     { return false }
func (op *biasOp) OverwritesInput() int  { return -1 }
func (op *biasOp) WriteHash(h hash.Hash) { fmt.Fprint(h, op.String()) }
func (op *biasOp) Hashcode() uint32      { return hashOf(op) }
func (op *biasOp) String() string        { return fmt.Sprintf("AddBias{%d×%d}", op.m, op.n) }

func (op *biasOp) DiffWRT(int) []bool { return []bool{true, false} }

// binaryArgs unpacks the two dense inputs and the preallocated output of a two-input op.
func binaryArgs(op fmt.Stringer, prealloc G.Value, inputs []G.Value) (a, b, out *tensor.Dense, err error) {
	if len(inputs) != 2 {
		return nil, nil, nil, fmt.Errorf("%v: %d inputs, want 2", op, len(inputs))
	}
	a, ok1 := inputs[0].(*tensor.Dense)
	b, ok2 := inputs[1].(*tensor.Dense)
	out, ok3 := prealloc.(*tensor.Dense)
	if !ok1 || !ok2 || !ok3 {
		return nil, nil, nil, fmt.Errorf("%v: inputs must be dense tensors", op)
	}
	return a, b, out, nil
}

// hashOf is the Hashcode of an op identified by its String.
func hashOf(op fmt.Stringer) uint32 {
	h := fnv.New32a()
	fmt.Fprint(h, op.String())
	return h.Sum32()
}

func (op *biasOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	return G.Nodes{grad, nil}, nil
}
