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
	m, k, n int
	diffA   bool // ∂L/∂A is needed (A is not the graph's input)
	out     ownBuf
}

func newGemmOp(m, k, n int, diffA bool) *gemmOp {
	return &gemmOp{m: m, k: k, n: n, diffA: diffA}
}

func (op *gemmOp) Arity() int { return 3 }

func (op *gemmOp) Type() hm.Type {
	t := G.TensorType{Dims: 2, Of: hm.TypeVariable('a')}
	return hm.NewFnType(t, t, t, t)
}

func (op *gemmOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{op.m, op.n}, nil
}

func (op *gemmOp) Do(inputs ...G.Value) (G.Value, error) {
	if len(inputs) != 3 {
		return nil, fmt.Errorf("%v: %d inputs, want 3", op, len(inputs))
	}
	a, w, b, err := denseArgs(op, inputs)
	if err != nil {
		return nil, err
	}
	if a.Shape().TotalSize() != op.m*op.k || w.Shape().TotalSize() != op.k*op.n || b.Shape().TotalSize() != op.n {
		return nil, fmt.Errorf("%v: shapes %v, %v and %v", op, a.Shape(), w.Shape(), b.Shape())
	}
	out, err := op.out.get(a.Dtype(), op.m, op.n)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", op, err)
	}
	switch ad := a.Data().(type) {
	case []float32:
		wd, ok1 := w.Data().([]float32)
		bd, ok2 := b.Data().([]float32)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%v: mixed dtypes", op)
		}
		od := out.Data().([]float32)
		G.WhichBLAS().Sgemm(blas.NoTrans, blas.NoTrans, op.m, op.n, op.k, 1, ad, op.k, wd, op.n, 0, od, op.n)
		addBias(od, od, bd, op.m, op.n)
	case []float64:
		wd, ok1 := w.Data().([]float64)
		bd, ok2 := b.Data().([]float64)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%v: mixed dtypes", op)
		}
		od := out.Data().([]float64)
		G.WhichBLAS().Dgemm(blas.NoTrans, blas.NoTrans, op.m, op.n, op.k, 1, ad, op.k, wd, op.n, 0, od, op.n)
		addBias(od, od, bd, op.m, op.n)
	default:
		return nil, fmt.Errorf("%v: dtype %v not supported", op, a.Dtype())
	}
	return out, nil
}

func (op *gemmOp) ReturnsPtr() bool      { return false }
func (op *gemmOp) CallsExtern() bool     { return false }
func (op *gemmOp) OverwritesInput() int  { return -1 }
func (op *gemmOp) WriteHash(h hash.Hash) { fmt.Fprint(h, op.String()) }
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
	da, err := G.ApplyOp(&gemmDiffOp{fwd: op}, grad, inputs[1])
	if err != nil {
		return nil, err
	}
	return G.Nodes{da, nil, nil}, nil
}

// gemmDiffOp computes ∂L/∂A = ∂L/∂Z·Wᵀ (m×k) from ∂L/∂Z (m×n) and W (k×n), as Mul's gradient
// did: Sgemm/Dgemm(NoTrans, Trans) with the same strides.
type gemmDiffOp struct {
	fwd *gemmOp
	out ownBuf
}

func (d *gemmDiffOp) Arity() int { return 2 }

func (d *gemmDiffOp) Type() hm.Type {
	t := G.TensorType{Dims: 2, Of: hm.TypeVariable('a')}
	return hm.NewFnType(t, t, t)
}

func (d *gemmDiffOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{d.fwd.m, d.fwd.k}, nil
}

func (d *gemmDiffOp) Do(inputs ...G.Value) (G.Value, error) {
	op := d.fwd
	if len(inputs) != 2 {
		return nil, fmt.Errorf("%v: %d inputs, want 2", d, len(inputs))
	}
	dz, w, err := denseArgs2(d, inputs)
	if err != nil {
		return nil, err
	}
	if dz.Shape().TotalSize() != op.m*op.n || w.Shape().TotalSize() != op.k*op.n {
		return nil, fmt.Errorf("%v: shapes %v and %v", d, dz.Shape(), w.Shape())
	}
	out, err := d.out.get(dz.Dtype(), op.m, op.k)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", d, err)
	}
	switch gd := dz.Data().(type) {
	case []float32:
		wd, ok := w.Data().([]float32)
		if !ok {
			return nil, fmt.Errorf("%v: mixed dtypes", d)
		}
		G.WhichBLAS().Sgemm(blas.NoTrans, blas.Trans, op.m, op.k, op.n, 1, gd, op.n, wd, op.n, 0, out.Data().([]float32), op.k)
	case []float64:
		wd, ok := w.Data().([]float64)
		if !ok {
			return nil, fmt.Errorf("%v: mixed dtypes", d)
		}
		G.WhichBLAS().Dgemm(blas.NoTrans, blas.Trans, op.m, op.k, op.n, 1, gd, op.n, wd, op.n, 0, out.Data().([]float64), op.k)
	default:
		return nil, fmt.Errorf("%v: dtype %v not supported", d, dz.Dtype())
	}
	return out, nil
}

func (d *gemmDiffOp) ReturnsPtr() bool      { return false }
func (d *gemmDiffOp) CallsExtern() bool     { return false }
func (d *gemmDiffOp) OverwritesInput() int  { return -1 }
func (d *gemmDiffOp) WriteHash(h hash.Hash) { fmt.Fprint(h, d.String()) }
func (d *gemmDiffOp) Hashcode() uint32      { return hashOf(d) }
func (d *gemmDiffOp) String() string        { return "Grad" + d.fwd.String() }

// denseArgs unpacks three dense inputs.
func denseArgs(op fmt.Stringer, inputs []G.Value) (a, b, c *tensor.Dense, err error) {
	a, ok1 := inputs[0].(*tensor.Dense)
	b, ok2 := inputs[1].(*tensor.Dense)
	c, ok3 := inputs[2].(*tensor.Dense)
	if !ok1 || !ok2 || !ok3 {
		return nil, nil, nil, fmt.Errorf("%v: inputs must be dense tensors", op)
	}
	return a, b, c, nil
}

// denseArgs2 unpacks two dense inputs.
func denseArgs2(op fmt.Stringer, inputs []G.Value) (a, b *tensor.Dense, err error) {
	a, ok1 := inputs[0].(*tensor.Dense)
	b, ok2 := inputs[1].(*tensor.Dense)
	if !ok1 || !ok2 {
		return nil, nil, fmt.Errorf("%v: inputs must be dense tensors", op)
	}
	return a, b, nil
}
