package nn

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The losses a stack may train with (Arch.Loss; model files' "loss"). Each is a sum over the
// batch of per-example terms that read the example's own logits and label alone, zero (with
// zero error) on a padding row, so that the error E = ∂L/∂Z the rules receive at every layer
// is each example's own (xentop.go):
//
//   - softmax_xent (the default, ""): softmax cross-entropy on the K class logits (xentOp);
//   - bce: binary cross-entropy on one logit z for two classes (labels 0 and 1),
//     ℓ = log(1 + eᶻ) − t·z. The graph puts z beside a constant 0, logits [0, z], and applies
//     the softmax cross-entropy: −log softmax([0, z])ₜ is exactly that ℓ, and ∂ℓ/∂z = σ(z) − t.
//     Accuracy, evaluation and prediction read [0, z] like any logits: class 1 when z > 0, with
//     probability σ(z);
//   - mse: the squared error on one-hot targets, ℓ = Σₖ (zₖ − yₖ)² (PyTorch's MSELoss with
//     reduction "sum"), ∂ℓ/∂z = 2(z − y) (mseOp); the prediction is the largest output.
const (
	LossXent = "softmax_xent"
	LossBCE  = "bce"
	LossMSE  = "mse"
)

// lossName is the loss of a (normalized) Arch.Loss: "" is the softmax cross-entropy.
func lossName(l string) string {
	if l == "" {
		return LossXent
	}
	return l
}

// checkLoss checks a stack's loss against its output (per-example shape out) and classes.
func checkLoss(loss string, out Shape, classes int) error {
	switch loss {
	case "", LossXent, LossMSE:
		if out.Layout != Flat || out.C != classes {
			return fmt.Errorf("the last layer gives %v, want the %d class logits (end with a dense layer of %d units)", out, classes, classes)
		}
	case LossBCE:
		if classes != 2 {
			return fmt.Errorf("loss bce needs two classes (labels 0 and 1); the data has %d: use softmax_xent", classes)
		}
		if out.Layout != Flat || out.C != 1 {
			return fmt.Errorf("the last layer gives %v, want one logit for loss bce (end with a dense layer of 1 unit)", out)
		}
	default:
		return fmt.Errorf("loss %q: want %s, %s or %s", loss, LossXent, LossBCE, LossMSE)
	}
	return nil
}

// bceLogits puts the B×1 logit column z beside zeros: the B×2 logits [0, z].
func bceLogits(z *G.Node, b int) (*G.Node, error) {
	return G.ApplyOp(&colsOp{put: true, m: b, n: 2, lo: 1, hi: 2}, z)
}

// RowLoss is one row's loss (float64) of logits z against the one-hot label y, for the
// training net's loss (0 for a padding row, whose labels are all zero): the softmax
// cross-entropy for softmax_xent and bce (whose logits are [0, z]), the squared error for mse.
func RowLoss[T ~float32 | ~float64](loss string, z, y []T) float64 {
	if loss == LossMSE {
		return mseRowLoss(z, y)
	}
	return XentRowLoss(z, y)
}

// mseRowLoss is Σₖ (zₖ − yₖ)² in float64, 0 on a padding row.
func mseRowLoss[T ~float32 | ~float64](z, y []T) float64 {
	if !anyNonZero(y) {
		return 0
	}
	var l float64
	for j, v := range z {
		d := float64(v) - float64(y[j])
		l += d * d
	}
	return l
}

// mseLossNode adds the summed squared error of the logits against y: mseOp in the training
// nets, Gorgonia's Sub, Square and Sum in the batch-1 oracle (one real row).
func (n *Net) mseLossNode(logits *G.Node) (*G.Node, error) {
	if !n.oracle {
		s := logits.Shape()
		return G.ApplyOp(&mseOp{b: s[0], k: s[1]}, logits, n.y)
	}
	d, err := G.Sub(logits, n.y)
	if err != nil {
		return nil, err
	}
	sq, err := G.Square(d)
	if err != nil {
		return nil, err
	}
	return G.Sum(sq)
}

// mseOp is the summed squared error Σᵢ Σₖ (zᵢₖ − yᵢₖ)² of the B×K logits against the one-hot
// labels, row by row in float64, padding rows (all-zero labels) giving 0 whatever their logits;
// its gradient (diff: inputs z, y and the upstream scalar g) is g·2(zᵢ − yᵢ) on real rows, 0 on
// padding rows. A NaN or infinite logit makes its own row's loss and error non-finite only.
type mseOp struct {
	opBase
	b, k int
	diff bool
}

func (op *mseOp) Arity() int {
	if op.diff {
		return 3
	}
	return 2
}

func (op *mseOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	t := G.TensorType{Dims: 2, Of: a}
	if op.diff {
		return hm.NewFnType(t, t, a, t)
	}
	return hm.NewFnType(t, t, a)
}

func (op *mseOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	if op.diff {
		return tensor.Shape{op.b, op.k}, nil
	}
	return tensor.ScalarShape(), nil
}

func (op *mseOp) Do(inputs ...G.Value) (G.Value, error) {
	if op.diff {
		return doInto(op, nil, inputs)
	}
	in, err := denseInputs(op, inputs, op.b*op.k, op.b*op.k)
	if err != nil {
		return nil, err
	}
	var loss G.Value
	_, err = floatDo(op, nil, in,
		func(op *mseOp, _ []float32, in [][]float32) {
			loss = G.NewF32(float32(mseLoss(in[0], in[1], op.b, op.k)))
		},
		func(op *mseOp, _ []float64, in [][]float64) { loss = G.NewF64(mseLoss(in[0], in[1], op.b, op.k)) })
	if err != nil {
		return nil, err
	}
	return loss, nil
}

func mseLoss[T ~float32 | ~float64](z, y []T, b, k int) float64 {
	var total float64
	for i := range b {
		total += mseRowLoss(z[i*k:(i+1)*k], y[i*k:(i+1)*k])
	}
	return total
}

// UsePreallocDo (the gradient op only): out = g·2(z − y) row by row.
func (op *mseOp) UsePreallocDo(prealloc G.Value, inputs ...G.Value) (G.Value, error) {
	if !op.diff || len(inputs) != 3 {
		return nil, fmt.Errorf("%v: %d inputs, want the gradient op's 3", op, len(inputs))
	}
	n := op.b * op.k
	in, err := denseInputs(op, inputs[:2], n, n)
	if err != nil {
		return nil, err
	}
	out, err := preallocDense(op, prealloc)
	if err != nil {
		return nil, err
	}
	var g float64
	switch v := inputs[2].Data().(type) {
	case float32:
		g = float64(v)
	case float64:
		g = v
	default:
		return nil, fmt.Errorf("%v: upstream gradient is %T, want a scalar", op, inputs[2].Data())
	}
	return floatDo(op, out, in, mseGradKernel[float32](g), mseGradKernel[float64](g))
}

func mseGradKernel[T float32 | float64](g float64) func(op *mseOp, out []T, in [][]T) {
	return func(op *mseOp, out []T, in [][]T) {
		for i := range op.b {
			oi, zi, yi := out[i*op.k:(i+1)*op.k], in[0][i*op.k:(i+1)*op.k], in[1][i*op.k:(i+1)*op.k]
			if !anyNonZero(yi) {
				clear(oi)
				continue
			}
			for j, v := range zi {
				oi[j] = T(g * 2 * (float64(v) - float64(yi[j])))
			}
		}
	}
}

func (op *mseOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *mseOp) Hashcode() uint32      { return hashOf(op) }
func (op *mseOp) String() string {
	return fmt.Sprintf("%sSquaredError{%d×%d}", gradPrefix(op.diff), op.b, op.k)
}
func (op *mseOp) DiffWRT(int) []bool { return []bool{true, false} }

func (op *mseOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	if op.diff || len(inputs) != 2 {
		return nil, fmt.Errorf("%v: no second derivative", op)
	}
	d := *op
	d.diff = true
	return gradAt(0, 2, &d, inputs[0], inputs[1], grad)
}
