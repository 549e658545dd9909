package nn

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Grouped and weight-standardized convolutions (Conv2d with Groups > 1 or Standardize).
//
// A grouped convolution of g groups convolves the input channels [j·C/g, (j+1)·C/g) with the
// filters [j·F/g, (j+1)·F/g) alone: g convolutions of C/g channels and F/g filters side by side.
// Each group is one GEMM layer of its own ((C/g)·k·k × F/g weights, "NAME.gJ.w"), so each has
// the exact GEMM rule; the groups' outputs are put side by side (colsOp). Its parameters are
// the g blocks on the diagonal of an ungrouped convolution's weight and nothing else: the zero
// blocks are not parameters and get no noise.
//
// A weight-standardized convolution (Qiao, Wang, Liu, Shen and Yuille, "Micro-Batch Training
// with Batch-Channel Normalization and Weight Standardization") convolves with
// Ŵ = (W − μ)/√(σ² + ε) instead of W, μ and σ² the mean and (population) variance of each output
// channel's weights, ε = 1e-5. Example i's gradient with respect to W is the standardization's
// Jacobianᵀ applied to its gradient with respect to Ŵ; the Jacobian is the same for every
// example (it depends on W alone), so the rule materializes each example's Ŵ-gradient
// Aᵢᵀ·Eᵢ over its positions, maps it column by column,
//
//	∂ℓᵢ/∂w = (ĝ − mean(ĝ) − ŵ·mean(ĝ⊙ŵ)) / √(σ² + ε),
//
// and hands the step that W-gradient (materialized rule): the norm clipped is that of the
// gradient of the parameters the optimizer updates, not of Ŵ's.

// wsEps is the ε of weight standardization.
const wsEps = normEps

// convGroups is the number of groups of a convolution (0 is read as 1).
func (l *Conv2d) convGroups() int { return max(l.Groups, 1) }

// extended reports whether the convolution takes the grouped or standardized path.
func (l *Conv2d) extended() bool { return l.Groups > 1 || l.Standardize }

// planExt declares a grouped or standardized convolution's parameters: per group, a GEMM layer
// (the GEMM rule) or, standardized, a weight (N(0, 1/fan_in)) and a zero bias declared as other
// tensors (the materialized rule).
func (l *Conv2d) planExt(in Shape, d *Decl, g convGeom) (Shape, error) {
	gr := l.convGroups()
	if gr < 1 || in.C%gr != 0 || l.Filters%gr != 0 {
		return Shape{}, fmt.Errorf("groups = %d: want ≥ 1 and dividing the %d input channels and the %d filters", l.Groups, in.C, l.Filters)
	}
	patch, fo := g.patch/gr, l.Filters/gr
	for j := range gr {
		prefix := d.path
		if gr > 1 {
			prefix = fmt.Sprintf("%s.g%d", d.path, j)
		}
		if l.Standardize {
			d.Other = append(d.Other,
				ParamDecl{Name: prefix + ".w", Rows: patch, Cols: fo, Init: 1 / math.Sqrt(float64(patch)), Normal: true},
				ParamDecl{Name: prefix + ".b", Rows: 1, Cols: fo})
		} else {
			name := l.name
			if gr > 1 {
				name = prefix
			}
			d.AddGemm(patch, fo, g.positions, name)
		}
	}
	// The patches (and their gradient), the groups' outputs put side by side, and the
	// per-example gradients the step materializes.
	d.Values += 2*float64(g.positions)*float64(g.patch) + float64(gr)*float64(g.positions)*float64(g.filters)
	d.Values += float64(g.patch+gr) * float64(fo)
	if l.Standardize {
		// The materialized rule's float64 copies: its input rows and its per-example
		// gradients, each worth two float32 values.
		d.Values += 2*float64(g.positions)*float64(g.patch) + float64(g.patch+gr)*float64(fo)
	}
	return Shape{Layout: Rows, C: g.filters, H: g.outH, W: g.outW}, nil
}

// forwardExt builds a grouped or standardized convolution: per group, its input channels'
// patches, its GEMM (standardized or not), and the groups' outputs side by side.
func (l *Conv2d) forwardExt(b *Builder, x *G.Node, in Shape, g convGeom) (*G.Node, error) {
	gr := l.convGroups()
	cin, fo := in.C/gr, l.Filters/gr
	k := l.Kernel
	rows := b.Batch() * g.positions
	var z *G.Node
	for j := range gr {
		var patch *G.Node
		var err error
		if in.Layout == Rows {
			xj := x
			if gr > 1 {
				n := b.Batch() * in.H * in.W
				if xj, err = G.ApplyOp(&colsOp{m: n, n: in.C, lo: j * cin, hi: (j + 1) * cin}, x); err != nil {
					return nil, err
				}
			}
			if patch, err = G.ApplyOp(newRowsOp(false, b.Batch(), in.H, in.W, cin, k, l.Stride, l.Pad), xj); err != nil {
				return nil, err
			}
		} else {
			// The raw image's patch matrix (Net.Run's im2col) orders its columns channel by
			// channel: a group's channels are one block of columns.
			patch = x
			if gr > 1 {
				w := cin * k * k
				if patch, err = G.ApplyOp(&colsOp{m: rows, n: in.C * k * k, lo: j * w, hi: (j + 1) * w}, x); err != nil {
					return nil, err
				}
			}
		}
		var zj *G.Node
		if l.Standardize {
			zj, err = b.wsGemm(patch, g.positions, cin*k*k, fo)
		} else {
			zj, err = b.Gemm(patch)
		}
		if err != nil {
			return nil, err
		}
		if gr == 1 {
			return zj, nil
		}
		put, err := G.ApplyOp(&colsOp{put: true, m: rows, n: l.Filters, lo: j * fo, hi: (j + 1) * fo}, zj)
		if err != nil {
			return nil, err
		}
		if z == nil {
			z = put
		} else if z, err = G.Add(z, put); err != nil {
			return nil, err
		}
	}
	return z, nil
}

// wsGemm adds Z = A·Ŵ + b for the next two declared tensors W (in×out) and b (1×out), Ŵ the
// column-standardized W, and registers its materialized rule (wsRule). The batch-1 oracle
// standardizes with Gorgonia's Transpose and the normalization op (whose gradient is tested on
// its own) and multiplies with Gorgonia's Mul, so that its gradient with respect to W is
// Gorgonia's, independent of wsRule.
func (b *Builder) wsGemm(a *G.Node, positions, in, out int) (*G.Node, error) {
	w, wi, err := b.NextParam()
	if err != nil {
		return nil, err
	}
	bias, bi, err := b.NextParam()
	if err != nil {
		return nil, err
	}
	if b.Oracle() {
		wt, err := G.Transpose(w)
		if err != nil {
			return nil, err
		}
		nt, err := G.ApplyOp(&normOp{b: out, p: 1, c: in, groups: 1}, wt)
		if err != nil {
			return nil, err
		}
		what, err := G.Transpose(nt)
		if err != nil {
			return nil, err
		}
		mm, err := G.Mul(a, what)
		if err != nil {
			return nil, err
		}
		return G.BroadcastAdd(mm, bias, nil, []byte{0})
	}
	what, err := G.ApplyOp(&wsOp{in: in, out: out}, w)
	if err != nil {
		return nil, err
	}
	z, err := G.ApplyOp(newGemmOp(b.Batch()*positions, in, out, a != b.net.x), a, what, bias)
	if err != nil {
		return nil, err
	}
	grad, prep := wsRule(positions, in, out, b.net.params.List[wi])
	b.Materialize("conv2d-ws", []int{wi, bi}, (in+1)*out, z, []*G.Node{a}, grad)
	b.mats[len(b.mats)-1].prep = prep
	return z, nil
}

// wsStats returns each column's mean and 1/√(σ² + ε) of the in×out matrix w, in float64.
func wsStats(w []float64, in, out int) (mu, inv []float64) {
	mu, inv = make([]float64, out), make([]float64, out)
	for o := range out {
		var s float64
		for r := range in {
			s += w[r*out+o]
		}
		m := s / float64(in)
		var v float64
		for r := range in {
			d := w[r*out+o] - m
			v += d * d
		}
		mu[o], inv[o] = m, 1/math.Sqrt(v/float64(in)+wsEps)
	}
	return mu, inv
}

// wsRule is the materialized rule of a weight-standardized convolution: example i's gradient
// of Ŵ, Aᵢᵀ·Eᵢ over its positions, mapped through the standardization's Jacobianᵀ, then its
// bias gradient Σₚ eₚ (all in float64). prep, run once per Run before the examples, reads the
// weights (which do not change during a step) and their column statistics, in float64.
func wsRule(positions, in, out int, wp *Param) (grad MatGradFunc, prep func()) {
	var w, mu, inv []float64
	prep = func() {
		w = append(w[:0], widen(wp.Value)...)
		mu, inv = wsStats(w, in, out)
	}
	grad = func(dst []float64, i int, taps [][]float64, e []float64) {
		a := taps[0][i*positions*in : (i+1)*positions*in]
		ei := e[i*positions*out : (i+1)*positions*out]
		gw, gb := dst[:in*out], dst[in*out:in*out+out]
		blas64.Implementation().Dgemm(blas.Trans, blas.NoTrans, in, out, positions, 1, a, in, ei, out, 0, gw, out)
		clear(gb)
		for p := range positions {
			for o, v := range ei[p*out : (p+1)*out] {
				gb[o] += v
			}
		}
		n := float64(in)
		for o := range out {
			var sg, sgx float64
			for r := range in {
				g := gw[r*out+o]
				sg += g
				sgx += g * (w[r*out+o] - mu[o]) * inv[o]
			}
			sg /= n
			sgx /= n
			for r := range in {
				xh := (w[r*out+o] - mu[o]) * inv[o]
				gw[r*out+o] = (gw[r*out+o] - sg - xh*sgx) * inv[o]
			}
		}
	}
	return grad, prep
}

// wsOp standardizes each column of an in×out weight matrix (in float64): the training and
// evaluation nets' Ŵ. It is not differentiable: the graph never forms weight gradients (the
// rule does, wsRule).
type wsOp struct {
	opBase
	in, out int
}

func (op *wsOp) Arity() int     { return 1 }
func (op *wsOp) Type() hm.Type  { return tensorFnType(2, 1) }
func (op *wsOp) String() string { return fmt.Sprintf("WeightStd{%d×%d}", op.in, op.out) }

func (op *wsOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{op.in, op.out}, nil
}

func (op *wsOp) Do(inputs ...G.Value) (G.Value, error) { return doInto(op, nil, inputs) }

func (op *wsOp) UsePreallocDo(prealloc G.Value, inputs ...G.Value) (G.Value, error) {
	return preallocDo(op, prealloc, inputs, []int{op.in * op.out}, wsKernel[float32], wsKernel[float64])
}

func wsKernel[T float32 | float64](op *wsOp, out []T, in [][]T) {
	w := make([]float64, len(in[0]))
	for j, v := range in[0] {
		w[j] = float64(v)
	}
	mu, inv := wsStats(w, op.in, op.out)
	for j, v := range w {
		o := j % op.out
		out[j] = T((v - mu[o]) * inv[o])
	}
}

func (op *wsOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *wsOp) Hashcode() uint32      { return hashOf(op) }
func (op *wsOp) DiffWRT(int) []bool    { return []bool{false} }

func (op *wsOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%v: not differentiable (the rule forms the weight gradients)", op)
}

// colsOp moves a block of columns: take (put false) copies columns [lo, hi) of an m×n matrix
// into an m×(hi−lo) one; put writes an m×(hi−lo) matrix into columns [lo, hi) of an m×n matrix
// of zeros. Each is the other's adjoint, hence the other's gradient. (Copies, not views:
// Gorgonia's backward pass may overwrite an activation in place.)
type colsOp struct {
	opBase
	put          bool
	m, n, lo, hi int
}

func (op *colsOp) Arity() int    { return 1 }
func (op *colsOp) Type() hm.Type { return tensorFnType(2, 1) }

func (op *colsOp) String() string {
	kind := "Take"
	if op.put {
		kind = "Put"
	}
	return fmt.Sprintf("%sCols{%d×%d [%d,%d)}", kind, op.m, op.n, op.lo, op.hi)
}

func (op *colsOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	if op.put {
		return tensor.Shape{op.m, op.n}, nil
	}
	return tensor.Shape{op.m, op.hi - op.lo}, nil
}

func (op *colsOp) Do(inputs ...G.Value) (G.Value, error) { return doInto(op, nil, inputs) }

func (op *colsOp) UsePreallocDo(prealloc G.Value, inputs ...G.Value) (G.Value, error) {
	size := op.m * op.n
	if op.put {
		size = op.m * (op.hi - op.lo)
	}
	return preallocDo(op, prealloc, inputs, []int{size}, colsKernel[float32], colsKernel[float64])
}

func colsKernel[T float32 | float64](op *colsOp, out []T, in [][]T) {
	w, x := op.hi-op.lo, in[0]
	if op.put {
		clear(out)
		for r := range op.m {
			copy(out[r*op.n+op.lo:r*op.n+op.hi], x[r*w:(r+1)*w])
		}
		return
	}
	for r := range op.m {
		copy(out[r*w:(r+1)*w], x[r*op.n+op.lo:r*op.n+op.hi])
	}
}

func (op *colsOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *colsOp) Hashcode() uint32      { return hashOf(op) }
func (op *colsOp) DiffWRT(int) []bool    { return []bool{true} }

func (op *colsOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	d := *op
	d.put = !op.put
	g, err := G.ApplyOp(&d, grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{g}, nil
}

// planShortcut plans a residual block's shortcut on the block's input and checks that it
// gives the body's output shape.
func (r *Residual) planShortcut(in, body Shape, d *Decl) (Shape, error) {
	if len(r.Shortcut.Layers) == 0 {
		return Shape{}, fmt.Errorf("empty shortcut: want at least one layer, or none for the identity")
	}
	parent := d.path
	d.path = parent + ".shortcut"
	out, err := r.Shortcut.Plan(in, d)
	d.path = parent
	if err != nil {
		return Shape{}, err
	}
	if out != body {
		return Shape{}, fmt.Errorf("the shortcut maps %v to %v but the body to %v: the branches must agree", in, out, body)
	}
	return out, nil
}
