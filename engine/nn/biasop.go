package nn

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// biasOp adds a 1×n bias row to every row of an m×n matrix. Gorgonia's BroadcastAdd first
// materializes the repeated bias as a full m×n matrix, which for a convolution's B·P rows
// cost as much as the addition itself. The op is differentiable only with respect to the
// matrix (its gradient passes through unchanged): dpsgd never asks the graph for a bias
// gradient, since the DP step forms the clipped bias sums from the per-example errors.
type biasOp struct {
	opBase
	m, n int
}

func (op *biasOp) Arity() int { return 2 }

func (op *biasOp) Type() hm.Type { return tensorFnType(2, 2) }

func (op *biasOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{op.m, op.n}, nil
}

func (op *biasOp) Do(inputs ...G.Value) (G.Value, error) { return doInto(op, nil, inputs) }

func (op *biasOp) UsePreallocDo(prealloc G.Value, inputs ...G.Value) (G.Value, error) {
	return preallocDo(op, prealloc, inputs, []int{op.m * op.n, op.n}, biasKernel[float32], biasKernel[float64])
}

func biasKernel[T float32 | float64](op *biasOp, out []T, in [][]T) {
	addBias(out, in[0], in[1], op.m, op.n)
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

func (op *biasOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *biasOp) Hashcode() uint32      { return hashOf(op) }
func (op *biasOp) String() string        { return fmt.Sprintf("AddBias{%d×%d}", op.m, op.n) }

func (op *biasOp) DiffWRT(int) []bool { return []bool{true, false} }

func (op *biasOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	return G.Nodes{grad, nil}, nil
}
