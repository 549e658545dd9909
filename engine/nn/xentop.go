package nn

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// xentOp is the training loss of every per-example graph: the summed softmax cross-entropy of
// the logits Z (B×K) against the labels Y (B×K, one-hot, all zero on a padding row),
//
//	L = Σᵢ ℓᵢ,  ℓᵢ = Σₖ yᵢₖ·(lseᵢ − zᵢₖ),  lseᵢ = mᵢ + log Σₖ exp(zᵢₖ − mᵢ),  mᵢ = maxₖ zᵢₖ,
//
// which equals −Σᵢ Σₖ yᵢₖ·logsoftmax(zᵢ)ₖ, the loss the graphs computed before, for finite
// inputs. Its gradient (xentDiffOp) is
//
//	∂L/∂zᵢ = g·(softmax(zᵢ)·Σₖ yᵢₖ − yᵢ),
//
// g the upstream gradient of L (1 in training).
//
// Why our own op: gorgonia's LogSoftMax (tensor v0.9.24) starts the running maximum of every
// row from the first element of the whole matrix, not of the row. A record in row 0 whose logit
// is NaN, or larger than another row's logits by about 745 (float64) or 104 (float32), makes
// every other row's log-softmax, hence its error ∂L/∂zᵢ, NaN or infinite; those rows then get
// clip coefficient 0, so one record removes the other rows' clipped gradients and moves the
// clipped sum by up to (B−1)·C instead of C. Even benign records in row 0 shifted the other
// rows by a common offset and changed their float32 rounding. Here each row is reduced with its
// own maximum, everything is done row by row, and:
//
//   - a row with Σₖ yᵢₖ = 0 (padding) gets exactly zero loss and zero error whatever its logits,
//     NaN and ±Inf included; its logits are not read;
//   - a term with yᵢₖ = 0 is skipped (0·log 0 = 0), so −Inf logits of other classes give a
//     finite loss;
//   - a NaN or +Inf logit, or all logits −Inf, makes that row's loss and error NaN (the clip
//     coefficient of that example is then 0) and touches no other row;
//   - float32 inputs are reduced in float64 and the error rounded once to float32.
//
// Audit of the other ops on the per-example path (forward to the logits, backward to each
// layer's pre-activation), for any way one row can reach another:
//
//   - Mul (A·W, gonum Sgemm/Dgemm): output row i reads input row i only; the backward product
//     ∂L/∂A = ∂L/∂Z·Wᵀ likewise. Each entry is accumulated over k in an order fixed by the
//     matrix shapes (set by the physical batch size) and by the weights' addresses — gonum's
//     float32 dot products peel elements until their second operand, here a row of W, is
//     16-byte aligned; the axpy kernels round each element alike whatever its alignment — so
//     a row's values depend neither on its position nor on the other rows. The weight
//     gradients Aᵀ·∂L/∂Z, the one product that sums over rows, are not in the training graphs
//     (gemmOp has no gradient with respect to W; the DP step forms them, clipped, from the taps). A library BLAS (internal/fastblas)
//     computes the graphs' products only when a probe at load finds its rows independent of
//     their position in the same way (BLIS: yes; OpenBLAS 0.3.21: no, so gonum's stay).
//   - gemmOp (gemmop.go): Mul's product above plus the bias row added to each row; its
//     gradient is ∂L/∂Z·Wᵀ only.
//   - rowsOp (max pooling and patches) and its rowsDiffOp: each example's block of rows is read
//     and written by one closure over that example's slice only (parallelExamples); the pooling
//     maximum starts from the window's first element, not the matrix's.
//   - im2col (first convolution, in Go): per example, over that example's image.
//   - actOp (actop.go: tanh, or ReLU as an x ≥ 0 mask times x) and its gradient: elementwise,
//     forward and backward; the mask comparison is not differentiated.
//   - Reshape ((B·h·w)×C to B×(h·w·C)): a view of the same bytes, example-major, so example i
//     keeps its own rows; its gradient reshapes back.
//   - Sum and Neg: the loss value sums all rows (a NaN row makes the reported loss NaN, which
//     the engine counts and leaves out of the mean), but no gradient flows from the sum to a
//     row other than through the constant upstream gradient g. With xentOp these two, and
//     LogSoftMax and HadamardProd on the loss, are no longer in the training graphs; the
//     batch-1 oracle (oracle.go) keeps gorgonia's LogSoftMax, which is correct on one row and
//     keeps the oracle independent of this op.
//
// Nothing else on the path mixes rows. After the graph, one position dependence turned up and
// was removed: kernels.RowSqNorms used gonum's Dsdot, whose alignment peeling is on the row
// itself, so a float32 row's squared norm could change in the last bit with its offset in the
// batch (kernels.SqNorm now sums in a fixed order). The adversarial-record test in package
// engine checks that every other record's clip coefficient, activations and errors are
// bit-identical with and without a hostile record, at every position.
type xentOp struct {
	opBase
	b, k int
}

func (op *xentOp) Arity() int { return 2 }

func (op *xentOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	t := G.TensorType{Dims: 2, Of: a}
	return hm.NewFnType(t, t, a)
}

func (op *xentOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.ScalarShape(), nil
}

func (op *xentOp) Do(inputs ...G.Value) (G.Value, error) {
	in, err := denseInputs(op, inputs, op.b*op.k, op.b*op.k)
	if err != nil {
		return nil, err
	}
	var loss G.Value
	_, err = floatDo(op, nil, in,
		func(op *xentOp, _ []float32, in [][]float32) {
			loss = G.NewF32(float32(xentLoss(in[0], in[1], op.b, op.k)))
		},
		func(op *xentOp, _ []float64, in [][]float64) {
			loss = G.NewF64(xentLoss(in[0], in[1], op.b, op.k))
		})
	if err != nil {
		return nil, err
	}
	return loss, nil
}

func (op *xentOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *xentOp) Hashcode() uint32      { return hashOf(op) }
func (op *xentOp) String() string        { return fmt.Sprintf("SoftmaxXent{%d×%d}", op.b, op.k) }

func (op *xentOp) DiffWRT(int) []bool { return []bool{true, false} }

func (op *xentOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	if len(inputs) != 2 {
		return nil, fmt.Errorf("%v: %d inputs, want 2", op, len(inputs))
	}
	return gradAt(0, 2, &xentDiffOp{fwd: op}, inputs[0], inputs[1], grad)
}

// rowMaxSum returns a row's maximum m (NaN when the first logit is NaN; a later NaN leaves m
// alone but makes s NaN) and s = Σₖ exp(zₖ − m) ≥ 1, in float64.
func rowMaxSum[T ~float32 | ~float64](z []T) (m, s float64) {
	m = float64(z[0])
	for _, v := range z[1:] {
		if float64(v) > m {
			m = float64(v)
		}
	}
	for _, v := range z {
		s += math.Exp(float64(v) - m)
	}
	return m, s
}

// xentLoss is Σᵢ ℓᵢ over the b×k row-major logits z and labels y, in float64.
func xentLoss[T ~float32 | ~float64](z, y []T, b, k int) float64 {
	var total float64
	for i := range b {
		total += XentRowLoss(z[i*k:(i+1)*k], y[i*k:(i+1)*k])
	}
	return total
}

// XentRowLoss is one row's softmax cross-entropy ℓ = Σₖ yₖ·(log Σⱼ exp zⱼ − zₖ), in float64
// with the row's own maximum (0 for a row whose labels are all zero: a padding row). The
// loss op of the training graph sums it over the rows.
func XentRowLoss[T ~float32 | ~float64](z, y []T) float64 {
	if !anyNonZero(y) {
		return 0
	}
	m, s := rowMaxSum(z)
	lse := m + math.Log(s)
	var l float64
	for j, w := range y {
		if w != 0 {
			l += float64(w) * (lse - float64(z[j]))
		}
	}
	return l
}

// xentGrad sets out = g·(softmax(zᵢ)·Σₖ yᵢₖ − yᵢ) row by row; rows with Σₖ yᵢₖ = 0 get zeros.
func xentGrad[T ~float32 | ~float64](out, z, y []T, b, k int, g float64) {
	for i := range b {
		oi, zi, yi := out[i*k:(i+1)*k], z[i*k:(i+1)*k], y[i*k:(i+1)*k]
		if !anyNonZero(yi) {
			clear(oi)
			continue
		}
		var sy float64
		for _, w := range yi {
			sy += float64(w)
		}
		m, s := rowMaxSum(zi)
		for j, v := range zi {
			p := math.Exp(float64(v)-m) / s
			oi[j] = T(g * (p*sy - float64(yi[j])))
		}
	}
}

func anyNonZero[T ~float32 | ~float64](y []T) bool {
	for _, w := range y {
		if w != 0 {
			return true
		}
	}
	return false
}

// xentDiffOp computes ∂L/∂Z from the logits, the labels and the upstream scalar gradient.
type xentDiffOp struct {
	opBase
	fwd *xentOp
}

func (d *xentDiffOp) Arity() int { return 3 }

func (d *xentDiffOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	t := G.TensorType{Dims: 2, Of: a}
	return hm.NewFnType(t, t, a, t)
}

func (d *xentDiffOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{d.fwd.b, d.fwd.k}, nil
}

func (d *xentDiffOp) Do(inputs ...G.Value) (G.Value, error) { return doInto(d, nil, inputs) }

func (d *xentDiffOp) UsePreallocDo(prealloc G.Value, inputs ...G.Value) (G.Value, error) {
	if len(inputs) != 3 {
		return nil, fmt.Errorf("%v: %d inputs, want 3", d, len(inputs))
	}
	n := d.fwd.b * d.fwd.k
	in, err := denseInputs(d, inputs[:2], n, n)
	if err != nil {
		return nil, err
	}
	out, err := preallocDense(d, prealloc)
	if err != nil {
		return nil, err
	}
	if out.Shape().TotalSize() != n {
		return nil, fmt.Errorf("%v: preallocated shape %v", d, out.Shape())
	}
	var g float64
	switch v := inputs[2].Data().(type) {
	case float32:
		g = float64(v)
	case float64:
		g = v
	default:
		return nil, fmt.Errorf("%v: upstream gradient is %T, want a scalar", d, inputs[2].Data())
	}
	return floatDo(d, out, in, xentDiffKernel[float32](g), xentDiffKernel[float64](g))
}

// xentDiffKernel is xentGrad with the upstream gradient g.
func xentDiffKernel[T float32 | float64](g float64) func(d *xentDiffOp, out []T, in [][]T) {
	return func(d *xentDiffOp, out []T, in [][]T) { xentGrad(out, in[0], in[1], d.fwd.b, d.fwd.k, g) }
}

func (d *xentDiffOp) WriteHash(h hash.Hash) { writeHash(h, d) }
func (d *xentDiffOp) Hashcode() uint32      { return hashOf(d) }
func (d *xentDiffOp) String() string        { return "Grad" + d.fwd.String() }
