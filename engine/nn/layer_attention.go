package nn

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The transformer's layers (Vaswani et al., "Attention Is All You Need"), on the row layout of
// L positions × C channels: multi-head self-attention, a learned positional embedding and the
// mean over positions. Each keeps examples apart: an example's outputs are formed from its own
// L rows alone, so one record's NaN or overflow stays in that record's rows.

// MaxAttentionPositions bounds the positions L an attention layer attends over: each worker
// holds an L×L matrix of weights per example.
const MaxAttentionPositions = 4096

// Attention is multi-head self-attention on L positions of C channels: per position, one dense
// map C → 3·Dim gives the queries, keys and values (Dim channels each, Heads heads of
// Dim/Heads); per example and head, softmax(Q·Kᵀ/√(Dim/Heads))·V over the example's own L
// positions; per position, a dense map Dim → C gives the output. Both maps are GEMM layers with
// P = L rows per example (the GEMM rule, materialized: rule_gemm.go), named NAME.qkv and
// NAME.out; the attention between them has no parameters.
type Attention struct {
	Heads, Dim int
}

// Kind is "attention".
func (l *Attention) Kind() string { return "attention" }

// Plan declares the C×3·Dim and Dim×C GEMM layers; the output keeps the input's shape.
func (l *Attention) Plan(in Shape, d *Decl) (Shape, error) {
	if l.Heads < 1 || l.Dim < 1 || l.Dim%l.Heads != 0 {
		return Shape{}, fmt.Errorf("heads = %d, dim = %d: want heads ≥ 1 dividing dim", l.Heads, l.Dim)
	}
	if in.Layout != Rows {
		return Shape{}, fmt.Errorf("attention needs positions (a convolved or embedded input, L positions × C channels), got %v", in)
	}
	p := in.Positions()
	if p > MaxAttentionPositions {
		return Shape{}, fmt.Errorf("attention over %d positions: want at most %d (its weights take L² values per head)", p, MaxAttentionPositions)
	}
	d.AddGemm(in.C, 3*l.Dim, p, d.path+".qkv")
	d.AddGemm(l.Dim, in.C, p, d.path+".out")
	// The projections' outputs and their gradients, and their materialized per-example
	// gradients (the step's Ĝᵢ) when P > 1.
	d.Values += 2*float64(p)*float64(3*l.Dim) + 2*float64(p)*float64(l.Dim)
	if p > 1 {
		d.Values += float64(in.C+1)*float64(3*l.Dim) + float64(l.Dim+1)*float64(in.C)
	}
	return in, nil
}

// Forward adds the projections and the attention.
func (l *Attention) Forward(b *Builder, x *G.Node, in Shape) (*G.Node, error) {
	qkv, err := b.Gemm(x)
	if err != nil {
		return nil, err
	}
	att, err := G.ApplyOp(&attnOp{b: b.Batch(), l: in.Positions(), dim: l.Dim, heads: l.Heads}, qkv)
	if err != nil {
		return nil, err
	}
	return b.Gemm(att)
}

// attnOp maps each example's L rows of [Q | K | V] (3·dim columns) to its L rows of
// softmax(Q·Kᵀ/√dₕ)·V, head by head (columns h·dₕ to (h+1)·dₕ of each, dₕ = dim/heads): in
// (B·L)×3·dim, out (B·L)×dim. Its gradient op (diff set; inputs [Q | K | V] and ∂L/∂out,
// output ∂L/∂[Q | K | V]) recomputes the attention weights: with S = Q·Kᵀ/√dₕ, P = softmax(S)
// by rows, O = P·V: ∂V = Pᵀ·∂O, ∂P = ∂O·Vᵀ, ∂S = P⊙(∂P − rowsum(∂P⊙P)), ∂Q = ∂S·K/√dₕ,
// ∂K = ∂Sᵀ·Q/√dₕ. Arithmetic in float64, example by example.
type attnOp struct {
	opBase
	b, l, dim, heads int
	diff             bool
}

func (op *attnOp) Arity() int {
	if op.diff {
		return 2
	}
	return 1
}

func (op *attnOp) Type() hm.Type { return tensorFnType(2, op.Arity()) }

func (op *attnOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	if op.diff {
		return tensor.Shape{op.b * op.l, 3 * op.dim}, nil
	}
	return tensor.Shape{op.b * op.l, op.dim}, nil
}

func (op *attnOp) Do(inputs ...G.Value) (G.Value, error) { return doInto(op, nil, inputs) }

// UsePreallocDo: the inputs are [Q | K | V], (B·L)×3·dim, and with diff ∂L/∂out, (B·L)×dim.
func (op *attnOp) UsePreallocDo(prealloc G.Value, inputs ...G.Value) (G.Value, error) {
	sizes := []int{op.b * op.l * 3 * op.dim}
	if op.diff {
		sizes = append(sizes, op.b*op.l*op.dim)
	}
	return preallocDo(op, prealloc, inputs, sizes, attnApply[float32], attnApply[float64])
}

// attnApply runs the forward pass or, with diff, the gradient, one example per task: the
// example's rows are widened to float64 once, each head's Q, K and V copied into contiguous
// L×dₕ blocks, and every product runs over contiguous rows.
func attnApply[T float32 | float64](op *attnOp, out []T, in [][]T) {
	L, D, dh := op.l, op.dim, op.dim/op.heads
	w3 := 3 * D
	scale := 1 / math.Sqrt(float64(dh))
	parallelExamples(op.b, func(i int) {
		x := in[0][i*L*w3 : (i+1)*L*w3]
		buf := make([]float64, L*L+3*L*dh)
		p, blk := buf[:L*L], buf[L*L:] // the attention weights of one head; its Q, K, V
		q, k, v := blk[:L*dh], blk[L*dh:2*L*dh], blk[2*L*dh:]
		var dO, dP, dQ, dK, dV []float64
		if op.diff {
			g := make([]float64, L*L+4*L*dh)
			dP, g = g[:L*L], g[L*L:]
			dO, dQ, dK, dV = g[:L*dh], g[L*dh:2*L*dh], g[2*L*dh:3*L*dh], g[3*L*dh:4*L*dh]
		}
		for h := range op.heads {
			for r := range L {
				row := x[r*w3:]
				for j := range dh {
					q[r*dh+j] = float64(row[h*dh+j])
					k[r*dh+j] = float64(row[D+h*dh+j])
					v[r*dh+j] = float64(row[2*D+h*dh+j])
				}
			}
			// P = softmax(Q·Kᵀ/√dₕ) by rows, shifted by the row's maximum.
			for r := range L {
				row, qr := p[r*L:(r+1)*L], q[r*dh:(r+1)*dh]
				m := math.Inf(-1)
				for c := range L {
					s := 0.0
					for j, a := range k[c*dh : (c+1)*dh] {
						s += qr[j] * a
					}
					row[c] = s * scale
					m = math.Max(m, row[c])
				}
				sum := 0.0
				for c := range row {
					row[c] = math.Exp(row[c] - m)
					sum += row[c]
				}
				for c := range row {
					row[c] /= sum
				}
			}
			if !op.diff {
				o := out[i*L*D : (i+1)*L*D]
				acc := make([]float64, dh)
				for r := range L {
					clear(acc)
					for c, a := range p[r*L : (r+1)*L] {
						for j, vv := range v[c*dh : (c+1)*dh] {
							acc[j] += a * vv
						}
					}
					for j, s := range acc {
						o[r*D+h*dh+j] = T(s)
					}
				}
				continue
			}
			gi := in[1][i*L*D : (i+1)*L*D]
			for r := range L {
				for j := range dh {
					dO[r*dh+j] = float64(gi[r*D+h*dh+j])
				}
			}
			clear(dQ)
			clear(dK)
			clear(dV)
			// ∂V = Pᵀ·∂O; ∂P = ∂O·Vᵀ; ∂S = P⊙(∂P − rowsum(∂P⊙P)), scaled by 1/√dₕ here.
			for r := range L {
				pr, dor := p[r*L:(r+1)*L], dO[r*dh:(r+1)*dh]
				dot := 0.0
				for c, a := range pr {
					dvc, vc := dV[c*dh:(c+1)*dh], v[c*dh:(c+1)*dh]
					s := 0.0
					for j, d := range dor {
						dvc[j] += a * d
						s += d * vc[j]
					}
					dP[r*L+c] = s
					dot += s * a
				}
				for c, a := range pr {
					dP[r*L+c] = a * (dP[r*L+c] - dot) * scale
				}
			}
			// ∂Q = ∂S·K, ∂K = ∂Sᵀ·Q.
			for r := range L {
				dqr, qr := dQ[r*dh:(r+1)*dh], q[r*dh:(r+1)*dh]
				for c, a := range dP[r*L : (r+1)*L] {
					dkc, kc := dK[c*dh:(c+1)*dh], k[c*dh:(c+1)*dh]
					for j := range dh {
						dqr[j] += a * kc[j]
						dkc[j] += a * qr[j]
					}
				}
			}
			o := out[i*L*w3 : (i+1)*L*w3]
			for r := range L {
				row := o[r*w3:]
				for j := range dh {
					row[h*dh+j] = T(dQ[r*dh+j])
					row[D+h*dh+j] = T(dK[r*dh+j])
					row[2*D+h*dh+j] = T(dV[r*dh+j])
				}
			}
		}
	})
}

func (op *attnOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *attnOp) Hashcode() uint32      { return hashOf(op) }

func (op *attnOp) String() string {
	return fmt.Sprintf("%sAttention{b=%d l=%d dim=%d heads=%d}", gradPrefix(op.diff), op.b, op.l, op.dim, op.heads)
}

func (op *attnOp) DiffWRT(int) []bool { return []bool{true} }

func (op *attnOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	if op.diff || len(inputs) != 1 {
		return nil, fmt.Errorf("%v: no second derivative", op)
	}
	d := *op
	d.diff = true
	return gradAt(0, 1, &d, inputs[0], grad)
}

// Position adds a learned L×C table to each example's L positions of C channels (a learned
// positional embedding, as in Dosovitskiy et al., "An Image is Worth 16x16 Words: Transformers
// for Image Recognition at Scale"), started N(0, 0.02²). Rule: materialized: example i's
// gradient of the table is its own error at the layer's output, L·C values.
type Position struct{}

// positionInit is the standard deviation of the table's starting values.
const positionInit = 0.02

// Kind is "position".
func (l *Position) Kind() string { return "position" }

// Plan declares the L×C table.
func (l *Position) Plan(in Shape, d *Decl) (Shape, error) {
	if in.Layout != Rows {
		return Shape{}, fmt.Errorf("position needs positions (a convolved or embedded input, L positions × C channels), got %v", in)
	}
	d.Other = append(d.Other, ParamDecl{Name: d.path + ".table", Rows: in.Positions(), Cols: in.C, Init: positionInit, Normal: true})
	d.Values += float64(in.Size()) // the materialized per-example gradient
	return in, nil
}

// Forward adds the table to every example's rows and registers the rule.
func (l *Position) Forward(b *Builder, x *G.Node, in Shape) (*G.Node, error) {
	table, ti, err := b.NextParam()
	if err != nil {
		return nil, err
	}
	p, c := in.Positions(), in.C
	var y *G.Node
	if b.Oracle() {
		// The batch-1 oracle: Gorgonia's own addition, differentiable in the table.
		y, err = G.Add(x, table)
	} else {
		y, err = G.ApplyOp(&posOp{b: b.Batch(), p: p, c: c}, x, table)
	}
	if err != nil {
		return nil, err
	}
	b.Materialize("position", []int{ti}, p*c, y, nil, func(dst []float64, i int, _ [][]float64, e []float64) {
		copy(dst, e[i*p*c:(i+1)*p*c])
	})
	return y, nil
}

// posOp adds a P×C table to each of B examples' P×C rows. Differentiable with respect to the
// rows only (the gradient passes through): the DP step takes the table's clipped sum from the
// per-example errors (the materialized rule), never from the graph.
type posOp struct {
	opBase
	b, p, c int
}

func (op *posOp) Arity() int { return 2 }

func (op *posOp) Type() hm.Type { return tensorFnType(2, 2) }

func (op *posOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{op.b * op.p, op.c}, nil
}

func (op *posOp) Do(inputs ...G.Value) (G.Value, error) { return doInto(op, nil, inputs) }

func (op *posOp) UsePreallocDo(prealloc G.Value, inputs ...G.Value) (G.Value, error) {
	return preallocDo(op, prealloc, inputs, []int{op.b * op.p * op.c, op.p * op.c}, posKernel[float32], posKernel[float64])
}

func posKernel[T float32 | float64](op *posOp, out []T, in [][]T) {
	n := op.p * op.c
	x, tab := in[0], in[1]
	for i := range op.b {
		o, r := out[i*n:(i+1)*n], x[i*n:(i+1)*n]
		for j, v := range tab {
			o[j] = r[j] + v
		}
	}
}

func (op *posOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *posOp) Hashcode() uint32      { return hashOf(op) }
func (op *posOp) String() string        { return fmt.Sprintf("AddPosition{b=%d p=%d c=%d}", op.b, op.p, op.c) }

func (op *posOp) DiffWRT(int) []bool { return []bool{true, false} }

func (op *posOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	return G.Nodes{grad, nil}, nil
}

// MeanPool averages each example's L positions: L×C rows to C flat features (no parameters).
type MeanPool struct{}

// Kind is "meanpool".
func (l *MeanPool) Kind() string { return "meanpool" }

// Plan returns the flat shape of the channels.
func (l *MeanPool) Plan(in Shape, _ *Decl) (Shape, error) {
	if in.Layout != Rows {
		return Shape{}, fmt.Errorf("meanpool needs positions (a convolved or embedded input), got %v", in)
	}
	return flatOf(in.C), nil
}

// Forward adds the mean.
func (l *MeanPool) Forward(b *Builder, x *G.Node, in Shape) (*G.Node, error) {
	return G.ApplyOp(&meanOp{b: b.Batch(), p: in.Positions(), c: in.C}, x)
}

// meanOp maps (B·P)×C rows to B×C, each example's mean over its P rows; with back set it is
// its gradient op, B×C to (B·P)×C, each row ∂L/∂out / P.
type meanOp struct {
	opBase
	b, p, c int
	back    bool
}

func (op *meanOp) Arity() int { return 1 }

func (op *meanOp) Type() hm.Type { return tensorFnType(2, 1) }

func (op *meanOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	if op.back {
		return tensor.Shape{op.b * op.p, op.c}, nil
	}
	return tensor.Shape{op.b, op.c}, nil
}

func (op *meanOp) Do(inputs ...G.Value) (G.Value, error) { return doInto(op, nil, inputs) }

func (op *meanOp) UsePreallocDo(prealloc G.Value, inputs ...G.Value) (G.Value, error) {
	n := op.b * op.p * op.c
	if op.back {
		n = op.b * op.c
	}
	return preallocDo(op, prealloc, inputs, []int{n}, meanKernel[float32], meanKernel[float64])
}

func meanKernel[T float32 | float64](op *meanOp, out []T, in [][]T) {
	x, c, p := in[0], op.c, op.p
	inv := 1 / float64(p)
	for i := range op.b {
		if op.back {
			g := x[i*c : (i+1)*c]
			for r := range p {
				o := out[(i*p+r)*c : (i*p+r+1)*c]
				for j, v := range g {
					o[j] = T(float64(v) * inv)
				}
			}
			continue
		}
		o := out[i*c : (i+1)*c]
		for j := range o {
			s := 0.0
			for r := range p {
				s += float64(x[(i*p+r)*c+j])
			}
			o[j] = T(s * inv)
		}
	}
}

func (op *meanOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *meanOp) Hashcode() uint32      { return hashOf(op) }

func (op *meanOp) String() string {
	return fmt.Sprintf("MeanPool{b=%d p=%d c=%d back=%v}", op.b, op.p, op.c, op.back)
}

func (op *meanOp) DiffWRT(int) []bool { return []bool{true} }

func (op *meanOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	if op.back {
		return nil, fmt.Errorf("%v: no second derivative", op)
	}
	d := *op
	d.back = true
	return gradAt(0, 1, &d, grad)
}
