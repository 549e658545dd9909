package nn

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The GEMM rule, for every layer that is Z = A·W + b on B·P rows (dense: P = 1; convolution: A
// is the im2col patch matrix and P its output positions). The layer hands the step its input
// rows A and per-example errors E = ∂L/∂Z (a Tap); example i's gradient is [Aᵢ, 1]ᵀ·Eᵢ over its P
// rows (docs/design.md step 3). The step chooses from the shapes, per layer, between the ghost
// norm (‖aᵢ‖² + 1)·‖eᵢ‖² with one clipped GEMM Aᵀ·diag(c)·E (P = 1) and materializing each
// example's (In+1)×Out gradient (P > 1; engine's convGrads), as mixed ghost clipping does.

// Tap is what one GEMM layer exposes after a training run: its input rows A (B·P × In) and
// the per-example errors E = ∂L/∂Z (B·P × Out) at its pre-activation, rows grouped by example.
type Tap struct {
	Shape  LayerShape
	W, B   *Param
	aValue G.Value
	eValue G.Value
	// aFromInput marks a first dense layer, whose A is the x given to Run.
	aFromInput bool
}

// A returns the layer's input rows as a tensor.
func (t *Tap) A() tensor.Tensor { return t.aValue.(tensor.Tensor) }

// E returns the per-example errors at the pre-activation.
func (t *Tap) E() tensor.Tensor { return t.eValue.(tensor.Tensor) }

// Dense is a fully connected layer of Units outputs (GEMM rule). On a raw image it reads the
// C×H×W values flattened channels-first; on positions (the row layout) it maps each position's
// C channels to Units, the same weights at every position (a 1×1 convolution).
type Dense struct {
	Units int
	name  string
}

// Kind is "dense".
func (l *Dense) Kind() string { return "dense" }

// Plan declares the In×Units weight and the bias.
func (l *Dense) Plan(in Shape, d *Decl) (Shape, error) {
	if l.Units < 1 {
		return Shape{}, fmt.Errorf("units = %d, want ≥ 1", l.Units)
	}
	if in.Layout == Rows {
		// Per position: each of the example's H·W rows through the same C×Units map, the
		// GEMM rule with P = H·W (materialized when P > 1, as a convolution).
		p := in.Positions()
		d.AddGemm(in.C, l.Units, p, l.name)
		if p > 1 {
			d.Values += float64(in.C+1) * float64(l.Units) // the step's materialized Ĝᵢ
		}
		return Shape{Layout: Rows, C: l.Units, H: in.H, W: in.W}, nil
	}
	d.AddGemm(in.Size(), l.Units, 1, l.name)
	return flatOf(l.Units), nil
}

// Forward adds x·W + b.
func (l *Dense) Forward(b *Builder, x *G.Node, in Shape) (*G.Node, error) { return b.Gemm(x) }

// Conv2d is a square 2-D convolution of Filters outputs, Kernel×Kernel windows at Stride with
// Pad zeros on every side (GEMM rule over im2col patches). As a model's first layer it reads the
// raw image (its im2col runs in Go, Net.Run); later, a convolved input in the row layout.
type Conv2d struct {
	Filters, Kernel, Stride, Pad int
	// Groups > 1 makes a grouped convolution and Standardize a weight-standardized one
	// (layer_conv_ext.go).
	Groups      int
	Standardize bool
	name        string
}

// Kind is "conv2d".
func (l *Conv2d) Kind() string { return "conv2d" }

func (l *Conv2d) geom(in Shape) (convGeom, error) {
	s := ConvSpec{Filters: l.Filters, Kernel: l.Kernel, Stride: l.Stride, Pad: l.Pad}
	if s.Filters < 1 || s.Kernel < 1 || s.Stride < 1 || s.Pad < 0 {
		return convGeom{}, fmt.Errorf("filters, kernel, stride must be ≥ 1 and pad ≥ 0, got filters %d kernel %d stride %d pad %d", s.Filters, s.Kernel, s.Stride, s.Pad)
	}
	if in.Layout == Flat {
		return convGeom{}, fmt.Errorf("conv2d needs an image input, got the flat %v", in)
	}
	c, h, w := in.C, in.H, in.W
	// A window larger than its padded input is refused before the division (see convShapes).
	if h+2*s.Pad < s.Kernel || w+2*s.Pad < s.Kernel {
		return convGeom{}, fmt.Errorf("kernel %d does not fit a %dx%d input with pad %d", s.Kernel, h, w, s.Pad)
	}
	oh := (h+2*s.Pad-s.Kernel)/s.Stride + 1
	ow := (w+2*s.Pad-s.Kernel)/s.Stride + 1
	return convGeom{inC: c, inH: h, inW: w, outH: oh, outW: ow, poolH: oh, poolW: ow, patch: c * s.Kernel * s.Kernel,
		filters: s.Filters, spec: s, positions: oh * ow, flatAfterPooling: s.Filters * oh * ow}, nil
}

// Plan declares the (C·k·k)×Filters weight and the bias.
func (l *Conv2d) Plan(in Shape, d *Decl) (Shape, error) {
	g, err := l.geom(in)
	if err != nil {
		return Shape{}, err
	}
	if g.positions*g.patch > MaxActivation {
		return Shape{}, fmt.Errorf("its patch matrix takes %d×%d values per example: want at most %d", g.positions, g.patch, MaxActivation)
	}
	if l.extended() {
		return l.planExt(in, d, g)
	}
	d.AddGemm(g.patch, g.filters, g.positions, l.name)
	d.Values += 2 * float64(g.positions) * float64(g.patch)
	if g.positions > 1 {
		d.Values += float64(g.patch+1) * float64(g.filters) // the step's materialized Ĝᵢ
	}
	return Shape{Layout: Rows, C: g.filters, H: g.outH, W: g.outW}, nil
}

// Forward adds the patches (unless x already is the raw image's patch matrix, the graph input
// of a model that starts with this layer) and the GEMM.
func (l *Conv2d) Forward(b *Builder, x *G.Node, in Shape) (*G.Node, error) {
	if l.extended() {
		g, err := l.geom(in)
		if err != nil {
			return nil, err
		}
		return l.forwardExt(b, x, in, g)
	}
	patch := x
	if in.Layout == Rows {
		op := newRowsOp(false, b.Batch(), in.H, in.W, in.C, l.Kernel, l.Stride, l.Pad)
		var err error
		if patch, err = G.ApplyOp(op, x); err != nil {
			return nil, err
		}
	}
	return b.Gemm(patch)
}
