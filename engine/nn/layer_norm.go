package nn

import (
	"errors"
	"fmt"
	"hash"
	"math"
	"slices"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// normEps is the ε under the square root of the normalizations (PyTorch's default).
const normEps = 1e-5

// Norm is LayerNorm or GroupNorm with an affine transform: each example's values are normalized
// within each group, x̂ = (x − μ)/√(σ² + ε), and y = γ⊙x̂ + β with γ, β one value per feature
// (LayerNorm on a flat input), or per channel (GroupNorm; LayerNorm on positions, where each
// position is normalized over its own channels, as in a transformer). Statistics are an example's own, so
// examples stay apart and per-example gradients exist (unlike BatchNorm: Wu and He, "Group
// Normalization"). Rule: materialized (rule_norm.go).
type Norm struct {
	Groups int  // GroupNorm: channel groups (C divisible by it); LayerNorm: 1
	Layer  bool // LayerNorm: all features one group (flat), or each position's channels (rows)
}

// Kind is "layernorm" or "groupnorm".
func (l *Norm) Kind() string {
	if l.Layer {
		return "layernorm"
	}
	return "groupnorm"
}

// Plan declares γ (ones) and β (zeros), 1×C each.
func (l *Norm) Plan(in Shape, d *Decl) (Shape, error) {
	if in.Layout == Image {
		return Shape{}, fmt.Errorf("%s on the raw image: put a conv2d or flatten first", l.Kind())
	}
	if !l.Layer && (l.Groups < 1 || in.C%l.Groups != 0) {
		return Shape{}, fmt.Errorf("groups = %d: want ≥ 1 and dividing the %d channels", l.Groups, in.C)
	}
	d.AddParam("gamma", 1, in.C, 1)
	d.AddParam("beta", 1, in.C, 0)
	return in, nil
}

// Forward adds the normalization, the affine transform and the rule.
func (l *Norm) Forward(b *Builder, x *G.Node, in Shape) (*G.Node, error) {
	groups := l.Groups
	if l.Layer {
		groups = 1
	}
	gamma, gi, err := b.NextParam()
	if err != nil {
		return nil, err
	}
	beta, bi, err := b.NextParam()
	if err != nil {
		return nil, err
	}
	op := &normOp{b: b.Batch(), p: in.Positions(), c: in.C, groups: groups}
	if l.Layer {
		// Each position (each row) normalized over its own channels.
		op = &normOp{b: b.Batch() * in.Positions(), p: 1, c: in.C, groups: 1}
	}
	xhat, err := G.ApplyOp(op, x)
	if err != nil {
		return nil, err
	}
	scaled, err := G.BroadcastHadamardProd(xhat, gamma, nil, []byte{0})
	if err != nil {
		return nil, err
	}
	y, err := b.AddBias(scaled, beta)
	if err != nil {
		return nil, err
	}
	b.Materialize(l.Kind(), []int{gi, bi}, 2*in.C, y, []*G.Node{xhat}, normRule(in.Positions(), in.C))
	return y, nil
}

// normOp maps (B·P)×C rows to x̂, each example's group normalized by its own mean and variance.
// Its gradient op (diff set; inputs x and ∂L/∂x̂) is
// ∂L/∂x = (∂L/∂x̂ − mean(∂L/∂x̂) − x̂·mean(∂L/∂x̂ ⊙ x̂)) / √(σ² + ε), means over the group.
type normOp struct {
	opBase
	b, p, c, groups int
	diff            bool
}

func (op *normOp) Arity() int {
	if op.diff {
		return 2
	}
	return 1
}

func (op *normOp) Type() hm.Type { return tensorFnType(2, op.Arity()) }

func (op *normOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{op.b * op.p, op.c}, nil
}

func (op *normOp) Do(inputs ...G.Value) (G.Value, error) { return doInto(op, nil, inputs) }

// UsePreallocDo: the inputs are x, and with diff ∂L/∂x̂, each (B·P)×C.
func (op *normOp) UsePreallocDo(prealloc G.Value, inputs ...G.Value) (G.Value, error) {
	sizes := slices.Repeat([]int{op.b * op.p * op.c}, op.Arity())
	return preallocDo(op, prealloc, inputs, sizes, normApply[float32], normApply[float64])
}

// normApply runs the forward pass (in = x) or, with diff, the gradient (in = x, ∂L/∂x̂),
// example by example, in float64.
func normApply[T float32 | float64](op *normOp, out []T, in [][]T) {
	x := in[0]
	var g []T
	if op.diff {
		g = in[1]
	}
	per := op.p * op.c
	cg := op.c / op.groups
	m := float64(op.p * cg)
	parallelExamples(op.b, func(i int) {
		xi, oi := x[i*per:(i+1)*per], out[i*per:(i+1)*per]
		for grp := range op.groups {
			lo, hi := grp*cg, (grp+1)*cg
			var mu float64
			for r := range op.p {
				for _, v := range xi[r*op.c+lo : r*op.c+hi] {
					mu += float64(v)
				}
			}
			mu /= m
			var v2 float64
			for r := range op.p {
				for _, v := range xi[r*op.c+lo : r*op.c+hi] {
					d := float64(v) - mu
					v2 += d * d
				}
			}
			inv := 1 / math.Sqrt(v2/m+normEps)
			if g == nil {
				for r := range op.p {
					for j := lo; j < hi; j++ {
						oi[r*op.c+j] = T((float64(xi[r*op.c+j]) - mu) * inv)
					}
				}
				continue
			}
			gi := g[i*per : (i+1)*per]
			var sg, sgx float64
			for r := range op.p {
				for j := lo; j < hi; j++ {
					gv := float64(gi[r*op.c+j])
					sg += gv
					sgx += gv * (float64(xi[r*op.c+j]) - mu) * inv
				}
			}
			sg /= m
			sgx /= m
			for r := range op.p {
				for j := lo; j < hi; j++ {
					xh := (float64(xi[r*op.c+j]) - mu) * inv
					oi[r*op.c+j] = T((float64(gi[r*op.c+j]) - sg - xh*sgx) * inv)
				}
			}
		}
	})
}

func (op *normOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *normOp) Hashcode() uint32      { return hashOf(op) }

func (op *normOp) String() string {
	return fmt.Sprintf("%sNorm{b=%d p=%d c=%d g=%d}", gradPrefix(op.diff), op.b, op.p, op.c, op.groups)
}

func (op *normOp) DiffWRT(int) []bool { return []bool{true} }

func (op *normOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	if op.diff || len(inputs) != 1 {
		return nil, fmt.Errorf("%v: no second derivative", op)
	}
	d := *op
	d.diff = true
	return gradAt(0, 1, &d, inputs[0], grad)
}

// BatchNorm is refused: it normalizes each value by statistics of the whole batch, so one
// example's output depends on the others' and no per-example gradient (hence no clipping bound)
// exists.
var errBatchNorm = errors.New("batchnorm mixes the examples of a batch (its statistics are the batch's), so per-example gradients and DP-SGD's clipping bound do not exist: use groupnorm (or layernorm on flat inputs)")
