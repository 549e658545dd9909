package nn

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Embedding maps each of an example's L input values, read as token ids, to a row of a
// Vocab×Dim table: the output is L positions of Dim channels (the row layout, L×1 positions).
// It must be the model's first layer, on a flat input: the ids are the raw features. A value
// that is not an integer in [0, Vocab) (NaN, ±Inf, a fraction, out of range) maps to a zero row
// and takes no part in the gradient. The table starts N(0, 1), as PyTorch's nn.Embedding. Rule:
// sparse (rule_sparse.go): ghost norms from the example's own ids, never the table.
type Embedding struct {
	Vocab, Dim int
}

// Kind is "embedding".
func (l *Embedding) Kind() string { return "embedding" }

// Plan declares the Vocab×Dim table.
func (l *Embedding) Plan(in Shape, d *Decl) (Shape, error) {
	if l.Vocab < 1 || l.Dim < 1 {
		return Shape{}, fmt.Errorf("vocab %d, dim %d: want both ≥ 1", l.Vocab, l.Dim)
	}
	if in.Layout != Flat {
		return Shape{}, fmt.Errorf("embedding reads token ids from a flat input, got %v", in)
	}
	d.Other = append(d.Other, ParamDecl{Name: d.path + ".table", Rows: l.Vocab, Cols: l.Dim, Init: 1, Normal: true})
	return Shape{Layout: Rows, C: l.Dim, H: in.C, W: 1}, nil
}

// Forward adds the lookup and registers the sparse rule.
func (l *Embedding) Forward(b *Builder, x *G.Node, in Shape) (*G.Node, error) {
	if x != b.net.x {
		return nil, fmt.Errorf("embedding must be the model's first layer (it reads the input's token ids)")
	}
	table, ti, err := b.NextParam()
	if err != nil {
		return nil, err
	}
	out, err := G.ApplyOp(&embedOp{b: b.Batch(), l: in.C, v: l.Vocab, d: l.Dim}, x, table)
	if err != nil {
		return nil, err
	}
	b.sparse = append(b.sparse, &sparseNode{name: "embedding", param: ti, out: out, l: in.C, vocab: l.Vocab, dim: l.Dim})
	return out, nil
}

// tokenID returns v as a token id of a vocabulary of n, or −1.
func tokenID(v float64, n int) int {
	if !(v >= 0 && v < float64(n)) || v != math.Trunc(v) {
		return -1
	}
	return int(v)
}

// embedOp looks up B×L ids in a V×D table, giving (B·L)×D rows; with scatter set it is the
// table's gradient op instead: inputs the ids and ∂L/∂out, output V×D, Σ of the rows of each id.
type embedOp struct {
	opBase
	b, l, v, d int
	scatter    bool
}

func (op *embedOp) Arity() int { return 2 }

func (op *embedOp) Type() hm.Type { return tensorFnType(2, 2) }

func (op *embedOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	if op.scatter {
		return tensor.Shape{op.v, op.d}, nil
	}
	return tensor.Shape{op.b * op.l, op.d}, nil
}

func (op *embedOp) Do(inputs ...G.Value) (G.Value, error) { return doInto(op, nil, inputs) }

// UsePreallocDo: the inputs are the B×L ids and the table (V×D), or with scatter ∂L/∂out
// ((B·L)×D).
func (op *embedOp) UsePreallocDo(prealloc G.Value, inputs ...G.Value) (G.Value, error) {
	want := op.v * op.d
	if op.scatter {
		want = op.b * op.l * op.d
	}
	return preallocDo(op, prealloc, inputs, []int{op.b * op.l, want}, embedKernel[float32], embedKernel[float64])
}

func embedKernel[T float32 | float64](op *embedOp, out []T, in [][]T) {
	embedApply(op, out, in[0], in[1])
}

func embedApply[T float32 | float64](op *embedOp, out, ids, y []T) {
	d := op.d
	if op.scatter {
		clear(out)
		for r, v := range ids {
			if id := tokenID(float64(v), op.v); id >= 0 {
				dst, src := out[id*d:(id+1)*d], y[r*d:(r+1)*d]
				for j, g := range src {
					dst[j] += g
				}
			}
		}
		return
	}
	for r, v := range ids {
		dst := out[r*d : (r+1)*d]
		if id := tokenID(float64(v), op.v); id >= 0 {
			copy(dst, y[id*d:(id+1)*d])
		} else {
			clear(dst)
		}
	}
}

func (op *embedOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *embedOp) Hashcode() uint32      { return hashOf(op) }

func (op *embedOp) String() string {
	k := "Embed"
	if op.scatter {
		k = "EmbedScatter"
	}
	return fmt.Sprintf("%s{b=%d l=%d v=%d d=%d}", k, op.b, op.l, op.v, op.d)
}

// DiffWRT: the ids are not differentiable; the table is.
func (op *embedOp) DiffWRT(int) []bool { return []bool{false, true} }

func (op *embedOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	if op.scatter || len(inputs) != 2 {
		return nil, fmt.Errorf("%v: no second derivative", op)
	}
	s := *op
	s.scatter = true
	return gradAt(1, 2, &s, inputs[0], grad)
}
