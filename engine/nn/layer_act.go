package nn

import (
	"fmt"
	"hash"
	"math"
	"slices"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Act is a pointwise activation (no parameters, no rule): tanh, relu, gelu (exact,
// x·Φ(x), Hendrycks and Gimpel, "Gaussian Error Linear Units (GELUs)"), or the tempered
// sigmoid φ(x) = Scale·σ(Temp·x) − Offset (Papernot, Thakurta, Song, Chien and Erlingsson,
// "Tempered Sigmoid Activations for Deep Learning with Differential Privacy"; Scale 2, Temp 2,
// Offset 1 is tanh).
type Act struct {
	Fn                  string // "tanh", "relu", "gelu" or "tempered_sigmoid"
	Scale, Temp, Offset float64
}

// Kind is the function's name.
func (l *Act) Kind() string { return l.Fn }

// Plan keeps the shape.
func (l *Act) Plan(in Shape, _ *Decl) (Shape, error) {
	switch l.Fn {
	case "tanh", "relu", "gelu":
	case "tempered_sigmoid":
		if !(l.Scale > 0 && l.Temp > 0 && l.Scale <= 1e6 && l.Temp <= 1e6) || math.IsNaN(l.Offset) || math.Abs(l.Offset) > 1e6 {
			return Shape{}, fmt.Errorf("tempered sigmoid: scale %g, temp %g, offset %g: want scale and temp in (0, 1e6], |offset| ≤ 1e6", l.Scale, l.Temp, l.Offset)
		}
	default:
		return Shape{}, fmt.Errorf("activation %q: want tanh, relu, gelu or tempered_sigmoid", l.Fn)
	}
	return in, nil
}

// Forward applies the function.
func (l *Act) Forward(b *Builder, x *G.Node, _ Shape) (*G.Node, error) {
	switch l.Fn {
	case "tanh", "relu":
		if s := x.Shape(); !b.Oracle() && len(s) == 2 {
			// Training and evaluation nets: one op with its gradient and its own buffers,
			// Gorgonia's arithmetic operation for operation (actop.go). The batch-1 oracle
			// keeps Gorgonia's ops, an independent check.
			op, err := newActOp(Activation(l.Fn), s)
			if err != nil {
				return nil, err
			}
			return G.ApplyOp(op, x)
		}
		if l.Fn == "tanh" {
			return G.Tanh(x)
		}
		return G.Rectify(x)
	}
	return G.ApplyOp(&pointOp{fn: l.Fn, scale: l.Scale, temp: l.Temp, offset: l.Offset, shape: x.Shape().Clone()}, x)
}

// pointOp applies a pointwise function; its gradient op (pointDiffOp) multiplies ∂L/∂y by f′(x).
type pointOp struct {
	opBase
	fn                  string
	scale, temp, offset float64
	shape               tensor.Shape
	diff                bool // the gradient op: inputs x and ∂L/∂y
}

func (op *pointOp) f(x float64) float64 {
	switch op.fn {
	case "gelu":
		return x * 0.5 * math.Erfc(-x/math.Sqrt2)
	default: // tempered_sigmoid
		return op.scale/(1+math.Exp(-op.temp*x)) - op.offset
	}
}

func (op *pointOp) df(x float64) float64 {
	switch op.fn {
	case "gelu":
		return 0.5*math.Erfc(-x/math.Sqrt2) + x*math.Exp(-x*x/2)/math.Sqrt(2*math.Pi)
	default:
		s := 1 / (1 + math.Exp(-op.temp*x))
		return op.scale * op.temp * s * (1 - s)
	}
}

func (op *pointOp) Arity() int {
	if op.diff {
		return 2
	}
	return 1
}

func (op *pointOp) Type() hm.Type { return tensorFnType(len(op.shape), op.Arity()) }

func (op *pointOp) InferShape(...G.DimSizer) (tensor.Shape, error) { return op.shape.Clone(), nil }

func (op *pointOp) Do(inputs ...G.Value) (G.Value, error) { return doInto(op, nil, inputs) }

// UsePreallocDo: the inputs are x, and with diff ∂L/∂y, each of the op's shape.
func (op *pointOp) UsePreallocDo(prealloc G.Value, inputs ...G.Value) (G.Value, error) {
	sizes := slices.Repeat([]int{op.shape.TotalSize()}, op.Arity())
	return preallocDo(op, prealloc, inputs, sizes, pointApply[float32], pointApply[float64])
}

// pointApply sets out = f(x), or with diff out = ∂L/∂y·f′(x); in is x (and ∂L/∂y).
func pointApply[T float32 | float64](op *pointOp, out []T, in [][]T) {
	x := in[0]
	if !op.diff {
		for j, v := range x {
			out[j] = T(op.f(float64(v)))
		}
		return
	}
	g := in[1]
	for j, v := range x {
		out[j] = g[j] * T(op.df(float64(v)))
	}
}

func (op *pointOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *pointOp) Hashcode() uint32      { return hashOf(op) }

func (op *pointOp) String() string {
	return fmt.Sprintf("%s%s{%g,%g,%g %v}", gradPrefix(op.diff), op.fn, op.scale, op.temp, op.offset, op.shape)
}

func (op *pointOp) DiffWRT(int) []bool { return []bool{true} }

func (op *pointOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	if op.diff || len(inputs) != 1 {
		return nil, fmt.Errorf("%v: no second derivative", op)
	}
	d := *op
	d.diff = true
	return gradAt(0, 1, &d, inputs[0], grad)
}
