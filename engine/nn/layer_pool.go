package nn

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Pool2d is max or average pooling over Kernel×Kernel windows at Stride, no padding, on a
// convolved input (no parameters, no rule).
type Pool2d struct {
	Avg            bool
	Kernel, Stride int
}

// Kind is "maxpool" or "avgpool".
func (l *Pool2d) Kind() string {
	if l.Avg {
		return "avgpool"
	}
	return "maxpool"
}

// Plan checks that the window fits.
func (l *Pool2d) Plan(in Shape, _ *Decl) (Shape, error) {
	if l.Kernel < 1 || l.Stride < 1 {
		return Shape{}, fmt.Errorf("kernel %d, stride %d: want both ≥ 1", l.Kernel, l.Stride)
	}
	if in.Layout != Rows {
		return Shape{}, fmt.Errorf("%s needs a convolved input, got %v", l.Kind(), in)
	}
	if in.H < l.Kernel || in.W < l.Kernel {
		return Shape{}, fmt.Errorf("pool %d does not fit %dx%d", l.Kernel, in.H, in.W)
	}
	return Shape{Layout: Rows, C: in.C, H: (in.H-l.Kernel)/l.Stride + 1, W: (in.W-l.Kernel)/l.Stride + 1}, nil
}

// Forward adds the pooling op.
func (l *Pool2d) Forward(b *Builder, x *G.Node, in Shape) (*G.Node, error) {
	op := newRowsOp(true, b.Batch(), in.H, in.W, in.C, l.Kernel, l.Stride, 0)
	op.avg = l.Avg
	return G.ApplyOp(op, x)
}

func avgPoolForward[T float32 | float64](op *rowsOp, out, x []T) {
	c := op.c
	inv := 1 / T(op.k*op.k)
	for oy := 0; oy < op.oh; oy++ {
		for ox := 0; ox < op.ow; ox++ {
			o := out[(oy*op.ow+ox)*c : (oy*op.ow+ox+1)*c]
			clear(o)
			for ky := 0; ky < op.k; ky++ {
				for kx := 0; kx < op.k; kx++ {
					src := x[((oy*op.s+ky)*op.w+ox*op.s+kx)*c:]
					for ch := range o {
						o[ch] += src[ch]
					}
				}
			}
			for ch := range o {
				o[ch] *= inv
			}
		}
	}
}

func avgPoolBackward[T float32 | float64](op *rowsOp, dx, dy []T) {
	c := op.c
	inv := 1 / T(op.k*op.k)
	for oy := 0; oy < op.oh; oy++ {
		for ox := 0; ox < op.ow; ox++ {
			g := dy[(oy*op.ow+ox)*c : (oy*op.ow+ox+1)*c]
			for ky := 0; ky < op.k; ky++ {
				for kx := 0; kx < op.k; kx++ {
					d := dx[((oy*op.s+ky)*op.w+ox*op.s+kx)*c:]
					for ch, v := range g {
						d[ch] += v * inv
					}
				}
			}
		}
	}
}

// Flatten turns a convolved input into a flat one, (row, column, channel) order; on a flat
// input, or the raw image (already B×(C·H·W) channels-first), it does nothing.
type Flatten struct{}

// Kind is "flatten".
func (l *Flatten) Kind() string { return "flatten" }

// Plan returns the flat shape.
func (l *Flatten) Plan(in Shape, _ *Decl) (Shape, error) { return flatOf(in.Size()), nil }

// Forward copies (B·H·W)×C rows, read row-major the same bytes as B×(H·W·C), into a B×(H·W·C)
// matrix. A copy, not Gorgonia's Reshape: a reshaped view shares its input's memory, which
// Gorgonia's backward pass may overwrite in place (an activation's gradient) after the view
// was read as the next layer's tap A.
func (l *Flatten) Forward(b *Builder, x *G.Node, in Shape) (*G.Node, error) {
	if in.Layout != Rows {
		return x, nil
	}
	return G.ApplyOp(&flattenOp{rows: b.Batch() * in.Positions(), cols: in.C, b: b.Batch()}, x)
}

// flattenOp copies an m×n matrix into a b×(m·n/b) one (back, with back set: its gradient).
type flattenOp struct {
	opBase
	rows, cols, b int
	back          bool
}

func (op *flattenOp) shapes() (in, out tensor.Shape) {
	in, out = tensor.Shape{op.rows, op.cols}, tensor.Shape{op.b, op.rows * op.cols / op.b}
	if op.back {
		return out, in
	}
	return in, out
}

func (op *flattenOp) Arity() int { return 1 }

func (op *flattenOp) Type() hm.Type { return tensorFnType(2, 1) }

func (op *flattenOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	_, out := op.shapes()
	return out, nil
}

func (op *flattenOp) Do(inputs ...G.Value) (G.Value, error) { return doInto(op, nil, inputs) }

func (op *flattenOp) UsePreallocDo(prealloc G.Value, inputs ...G.Value) (G.Value, error) {
	in, _ := op.shapes()
	return preallocDo(op, prealloc, inputs, []int{in.TotalSize()}, flattenKernel[float32], flattenKernel[float64])
}

func flattenKernel[T float32 | float64](_ *flattenOp, out []T, in [][]T) { copy(out, in[0]) }

func (op *flattenOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *flattenOp) Hashcode() uint32      { return hashOf(op) }
func (op *flattenOp) String() string {
	return fmt.Sprintf("Flatten{%d×%d b=%d back=%v}", op.rows, op.cols, op.b, op.back)
}
func (op *flattenOp) DiffWRT(int) []bool { return []bool{true} }

func (op *flattenOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	if op.back {
		return nil, fmt.Errorf("%v: no second derivative", op)
	}
	d := *op
	d.back = true
	return gradAt(0, 1, &d, grad)
}
