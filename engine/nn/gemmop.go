package nn

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	"gonum.org/v1/gonum/blas"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// gemmOp is a training net's GEMM layer, Z = A·W + b (A m×k, W k×n, b 1×n), as one op.
//
// Why not Gorgonia's Mul and a bias op after it: the training graph backpropagates only to each layer's
// pre-activation Z (docs/design.md step 2), but Mul's gradient also builds ∂L/∂W = Aᵀ·∂L/∂Z,
// a product as large as the forward one, which the tape machine then runs on every step
// although nothing reads it (the DP step forms the clipped weight gradients itself, from the
// taps). gemmOp is differentiable with respect to A only, and only when A is not the graph's
// input (the first layer needs no ∂L/∂A at all): its gradient op computes ∂L/∂A = ∂L/∂Z·Wᵀ
// and nothing else.
//
// The arithmetic is that of Mul and of the bias op this replaces, call for call: the same BLAS routine (Gorgonia's,
// internal/fastblas may have installed a library there) with the same shapes, strides and
// flags, then the bias added row by row, so a training net computes the same bits as before
// and the rows of Z and ∂L/∂A still depend on their own rows only (xentop.go's audit). The
// batch-1 oracle (oracle.go) keeps Mul and BroadcastAdd, so that it stays an independent
// check.
//
// Both ops write into buffers of their own, reused by every run (ownBuf), instead of a fresh
// matrix per run.
type gemmOp struct {
	opBase
	m, k, n int
	diffA   bool // ∂L/∂A is needed (A is not the graph's input)
	out     ownBuf
}

func newGemmOp(m, k, n int, diffA bool) *gemmOp {
	return &gemmOp{m: m, k: k, n: n, diffA: diffA}
}

func (op *gemmOp) Arity() int { return 3 }

func (op *gemmOp) Type() hm.Type { return tensorFnType(2, 3) }

func (op *gemmOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{op.m, op.n}, nil
}

func (op *gemmOp) Do(inputs ...G.Value) (G.Value, error) {
	return bufDo(op, &op.out, op.m, op.n, inputs, []int{op.m * op.k, op.k * op.n, op.n},
		func(op *gemmOp, out []float32, in [][]float32) {
			G.WhichBLAS().Sgemm(blas.NoTrans, blas.NoTrans, op.m, op.n, op.k, 1, in[0], op.k, in[1], op.n, 0, out, op.n)
			addBias(out, out, in[2], op.m, op.n)
		},
		func(op *gemmOp, out []float64, in [][]float64) {
			G.WhichBLAS().Dgemm(blas.NoTrans, blas.NoTrans, op.m, op.n, op.k, 1, in[0], op.k, in[1], op.n, 0, out, op.n)
			addBias(out, out, in[2], op.m, op.n)
		})
}

func (op *gemmOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *gemmOp) Hashcode() uint32      { return hashOf(op) }
func (op *gemmOp) String() string {
	return fmt.Sprintf("Gemm{%d×%d·%d×%d+b diffA=%v}", op.m, op.k, op.k, op.n, op.diffA)
}

// DiffWRT: A when its gradient is needed; never W or b.
func (op *gemmOp) DiffWRT(int) []bool { return []bool{op.diffA, false, false} }

func (op *gemmOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	if len(inputs) != 3 {
		return nil, fmt.Errorf("%v: %d inputs, want 3", op, len(inputs))
	}
	if !op.diffA {
		return G.Nodes{nil, nil, nil}, nil
	}
	return gradAt(0, 3, &gemmDiffOp{fwd: op}, grad, inputs[1])
}

// gemmDiffOp computes ∂L/∂A = ∂L/∂Z·Wᵀ (m×k) from ∂L/∂Z (m×n) and W (k×n), as Mul's gradient
// did: Sgemm/Dgemm(NoTrans, Trans) with the same strides.
type gemmDiffOp struct {
	opBase
	fwd *gemmOp
	out ownBuf
}

func (d *gemmDiffOp) Arity() int { return 2 }

func (d *gemmDiffOp) Type() hm.Type { return tensorFnType(2, 2) }

func (d *gemmDiffOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{d.fwd.m, d.fwd.k}, nil
}

func (d *gemmDiffOp) Do(inputs ...G.Value) (G.Value, error) {
	op := d.fwd
	return bufDo(d, &d.out, op.m, op.k, inputs, []int{op.m * op.n, op.k * op.n},
		func(d *gemmDiffOp, out []float32, in [][]float32) {
			op := d.fwd
			G.WhichBLAS().Sgemm(blas.NoTrans, blas.Trans, op.m, op.k, op.n, 1, in[0], op.n, in[1], op.n, 0, out, op.k)
		},
		func(d *gemmDiffOp, out []float64, in [][]float64) {
			op := d.fwd
			G.WhichBLAS().Dgemm(blas.NoTrans, blas.Trans, op.m, op.k, op.n, 1, in[0], op.n, in[1], op.n, 0, out, op.k)
		})
}

func (d *gemmDiffOp) WriteHash(h hash.Hash) { writeHash(h, d) }
func (d *gemmDiffOp) Hashcode() uint32      { return hashOf(d) }
func (d *gemmDiffOp) String() string        { return "Grad" + d.fwd.String() }
