package nn

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// actOp is a training or evaluation net's activation, y = f(z) elementwise, as one op with
// its gradient op; the batch-1 oracle keeps Gorgonia's Tanh and Rectify.
//
// Why: Gorgonia's Rectify is two ops (a ≥ 0 mask, then a product) and Tanh's gradient three
// (y·y, 1 − ·, times ∂L/∂y), each allocating and copying a matrix of the layer's size on every
// run; in a profile of the MNIST CNN step they were a quarter of the time
// (docs/benchmarks.md). The arithmetic is theirs, operation for operation, except float32's
// tanh:
//
//   - ReLU: y = z·m with m = 1 if z ≥ 0 else 0 (so a negative z gives −0 and NaN stays NaN),
//     ∂L/∂z = ∂L/∂y·m;
//   - tanh: y = tanh(z) (math.Tanh for float64, as gorgonia.org/tensor uses; tanh32 for
//     float32, within an ulp of the exact value and AVX-512 where the CPU has it, where
//     Gorgonia's chewxy/math32 Tanh was a sixth of the MNIST CNN's time),
//     ∂L/∂z = (1 − y·y)·∂L/∂y, each operation rounded to the dtype.
//
// Each element depends on its own element only, so rows stay apart (xentop.go's audit). Both
// ops write into buffers of their own (ownBuf).
type actOp struct {
	opBase
	act  Activation
	r, c int
	out  ownBuf
}

func newActOp(act Activation, s tensor.Shape) (*actOp, error) {
	if len(s) != 2 {
		return nil, fmt.Errorf("activation of shape %v: want a matrix", s)
	}
	if act != ReLU && act != Tanh {
		return nil, fmt.Errorf("activation %q: want tanh or relu", act)
	}
	return &actOp{act: act, r: s[0], c: s[1]}, nil
}

func (op *actOp) Arity() int { return 1 }

func (op *actOp) Type() hm.Type { return tensorFnType(2, 1) }

func (op *actOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{op.r, op.c}, nil
}

func (op *actOp) Do(inputs ...G.Value) (G.Value, error) {
	return bufDo(op, &op.out, op.r, op.c, inputs, []int{op.r * op.c}, actKernel[float32], actKernel[float64])
}

// actKernel is actForward with the dtype's tanh.
func actKernel[T float32 | float64](op *actOp, out []T, in [][]T) {
	tanh, ok := any(tanhSlice32).(func(dst, src []T))
	if !ok {
		tanh = any(tanhSlice64).(func(dst, src []T))
	}
	actForward(op.act, out, in[0], tanh)
}

// tanhSlice64 sets dst[i] = math.Tanh(src[i]) for every i of src.
func tanhSlice64(dst, src []float64) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = math.Tanh(v)
	}
}

func (op *actOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *actOp) Hashcode() uint32      { return hashOf(op) }
func (op *actOp) String() string        { return fmt.Sprintf("Act{%s %d×%d}", op.act, op.r, op.c) }

func (op *actOp) DiffWRT(int) []bool { return []bool{true} }

// SymDiff: ReLU's gradient reads z (its mask), tanh's reads y.
func (op *actOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	if len(inputs) != 1 {
		return nil, fmt.Errorf("%v: %d inputs, want 1", op, len(inputs))
	}
	from := output
	if op.act == ReLU {
		from = inputs[0]
	}
	return gradAt(0, 1, &actDiffOp{fwd: op}, from, grad)
}

// actDiffOp computes ∂L/∂z from z (ReLU) or y (tanh) and ∂L/∂y.
type actDiffOp struct {
	opBase
	fwd *actOp
	out ownBuf
}

func (d *actDiffOp) Arity() int { return 2 }

func (d *actDiffOp) Type() hm.Type { return tensorFnType(2, 2) }

func (d *actDiffOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{d.fwd.r, d.fwd.c}, nil
}

func (d *actDiffOp) Do(inputs ...G.Value) (G.Value, error) {
	n := d.fwd.r * d.fwd.c
	return bufDo(d, &d.out, d.fwd.r, d.fwd.c, inputs, []int{n, n}, actDiffKernel[float32], actDiffKernel[float64])
}

func actDiffKernel[T float32 | float64](d *actDiffOp, out []T, in [][]T) {
	actBackward(d.fwd.act, out, in[0], in[1])
}

func (d *actDiffOp) WriteHash(h hash.Hash) { writeHash(h, d) }
func (d *actDiffOp) Hashcode() uint32      { return hashOf(d) }
func (d *actDiffOp) String() string        { return "Grad" + d.fwd.String() }

func actForward[T float32 | float64](act Activation, y, z []T, tanh func(dst, src []T)) {
	y = y[:len(z)]
	parallelRows(len(z), func(lo, hi int) {
		if act == ReLU {
			for i, v := range z[lo:hi] {
				var m T
				if v >= 0 {
					m = 1
				}
				y[lo+i] = v * m
			}
			return
		}
		tanh(y[lo:hi], z[lo:hi])
	})
}

func actBackward[T float32 | float64](act Activation, dz, v, dy []T) {
	dz, dy = dz[:len(v)], dy[:len(v)]
	parallelRows(len(v), func(lo, hi int) {
		if act == ReLU {
			for i, x := range v[lo:hi] {
				var m T
				if x >= 0 {
					m = 1
				}
				dz[lo+i] = dy[lo+i] * m
			}
			return
		}
		for i, y := range v[lo:hi] {
			sq := T(y * y)          // HadamardProd(y, y)
			d := T(1 - sq)          // Sub(1, ·)
			dz[lo+i] = d * dy[lo+i] // HadamardProd(·, ∂L/∂y)
		}
	})
}
