// Package nn builds dpsgd's models as Gorgonia graphs from a layer library (Layer, Sequential,
// Residual; dense, conv2d, pooling, flatten, activations, LayerNorm, GroupNorm), each layer with
// a per-example rule the DP step uses to clip without a per-example backward pass
// (docs/models.md): the presets (Arch.Model) and model files (ParseModelFile) are stacks of it;
// an Embedding has the sparse rule (SparseTap). Convolutions may be grouped or
// weight-standardized (layer_conv_ext.go), residual blocks may project their input (a
// shortcut), Dropout draws per-example masks (layer_dropout.go), a stack may train with the
// binary cross-entropy or the squared error (loss.go), and WideResNet builds De et al.'s
// WRN from these layers (wrn.go).
//
// The GEMM rule exposes, for every layer with a weight matrix, the two matrices the DP step
// needs: the layer's input rows A and the per-example errors E at its pre-activation. The
// materialized rule (MatTap) hands the step each example's gradient of the layer's parameters.
//
// A "GEMM layer" (dense, conv2d) is Z = A·W + b evaluated on B·P rows, where B is the
// physical batch and P the number of positions an example contributes: P = 1 for a dense
// layer, P = H'·W' output positions for a convolution (A is then the im2col patch matrix).
// The gradient of example i is Gᵢ = [Aᵢ, 1]ᵀ·Eᵢ over its P rows (docs/design.md step 3), and the
// clipped sum over the batch is one GEMM, Aᵀ·diag(c)·E, for a dense layer, and the sum of the
// materialized per-example gradients for a convolution.
//
// Graphs use a SUM loss over the batch (never the mean), so row i of ∂L/∂Z is ∂ℓᵢ/∂Zᵢ; rows of
// padding examples have an all-zero one-hot label and therefore contribute exactly zero loss and
// zero error.
package nn

import (
	"fmt"
	"strings"
)

// Activation names a pointwise non-linearity.
type Activation string

// The supported activations. tanh is the default: under DP it trained better than ReLU on
// MNIST in our measurements.
const (
	Tanh Activation = "tanh"
	ReLU Activation = "relu"
)

// ConvSpec describes one square 2-D convolution, optionally followed by max pooling.
type ConvSpec struct {
	Filters    int // output channels
	Kernel     int // kernel height = width
	Stride     int
	Pad        int // zero padding on every side
	PoolKernel int // 0: no pooling
	PoolStride int
}

// Arch describes a model. A preset ("logreg", "mlp", "cnn") is optional convolutions, then
// dense hidden layers, then a dense output layer with one logit per class; a "stack"
// (KindStack) is the layer list Stack, as a model file describes it (docs/models.md). Either is
// built from the layer library (Model).
type Arch struct {
	Kind       string // "logreg", "mlp", "cnn" or "stack"
	Input      []int  // per-example shape: [D] or [C, H, W]
	Classes    int
	Conv       []ConvSpec
	Hidden     []int
	Activation Activation
	// Stack is the layer list of a stack model (nil for the presets, and then not encoded, so
	// that a preset's encoding is what it was before stacks).
	Stack []LayerSpec `json:",omitempty"`
	// Loss is a stack's training loss (loss.go): "" (the softmax cross-entropy), "bce" or
	// "mse"; not encoded when "", so that files written before it read and re-encode alike.
	Loss string `json:",omitempty"`
}

// LogReg is multinomial logistic regression: one dense layer.
func LogReg(input []int, classes int) Arch {
	return Arch{Kind: "logreg", Input: flatShape(input), Classes: classes, Activation: Tanh}
}

// MLP is a fully connected network with the given hidden widths.
func MLP(input []int, classes int, hidden []int, act Activation) Arch {
	return Arch{Kind: "mlp", Input: flatShape(input), Classes: classes, Hidden: append([]int(nil), hidden...), Activation: act}
}

// CNN is the small convolutional network common in DP-SGD work on MNIST (Papernot et al.'s
// tempered-sigmoid CNN, also the TF Privacy and Opacus MNIST example): conv 16×8×8 stride 2
// pad 3, max-pool 2 stride 1, conv 32×4×4 stride 2, max-pool 2 stride 1, dense `hidden`
// (default 32), dense to the classes; about 26k parameters on 1×28×28 inputs.
func CNN(input []int, classes int, hidden []int, act Activation) Arch {
	if len(hidden) == 0 {
		hidden = []int{32}
	}
	return Arch{
		Kind: "cnn", Input: append([]int(nil), input...), Classes: classes,
		Conv: []ConvSpec{
			{Filters: 16, Kernel: 8, Stride: 2, Pad: 3, PoolKernel: 2, PoolStride: 1},
			{Filters: 32, Kernel: 4, Stride: 2, Pad: 0, PoolKernel: 2, PoolStride: 1},
		},
		Hidden: append([]int(nil), hidden...), Activation: act,
	}
}

func flatShape(s []int) []int {
	d := 1
	for _, v := range s {
		d *= v
	}
	return []int{d}
}

// ParseActivation accepts "tanh" or "relu".
func ParseActivation(s string) (Activation, error) {
	switch Activation(strings.ToLower(s)) {
	case Tanh:
		return Tanh, nil
	case ReLU:
		return ReLU, nil
	}
	return "", fmt.Errorf("activation %q: want tanh or relu", s)
}

// Validate checks the shapes: every size positive, convolutions only on [C,H,W] inputs, and
// every convolution and pooling leaving at least one output position.
func (a Arch) Validate() error {
	if a.Classes < 2 {
		return fmt.Errorf("arch: classes = %d, want ≥ 2", a.Classes)
	}
	if len(a.Input) == 0 {
		return fmt.Errorf("arch: empty input shape")
	}
	for _, v := range a.Input {
		if v < 1 {
			return fmt.Errorf("arch: input shape %v has a dimension < 1", a.Input)
		}
	}
	if a.Loss != "" && a.Kind != KindStack {
		return fmt.Errorf("arch: loss %q: a preset trains with the softmax cross-entropy; another loss needs a model file", a.Loss)
	}
	if a.Kind == KindStack || len(a.Stack) > 0 {
		if a.Kind != KindStack {
			return fmt.Errorf("arch: kind %q with a layer stack: want kind %q", a.Kind, KindStack)
		}
		return a.validateStack()
	}
	for i, h := range a.Hidden {
		if h < 1 {
			return fmt.Errorf("arch: hidden layer %d has width %d, want ≥ 1", i, h)
		}
	}
	if a.Activation != Tanh && a.Activation != ReLU {
		return fmt.Errorf("arch: activation %q: want tanh or relu", a.Activation)
	}
	if len(a.Conv) > 0 {
		if len(a.Input) != 3 {
			return fmt.Errorf("arch: convolutions need a [C,H,W] input, got %v", a.Input)
		}
		_, err := a.convShapes()
		return err
	}
	return nil
}

// convGeom is the geometry of one convolution layer on one example.
type convGeom struct {
	inC, inH, inW    int
	outH, outW       int // after the convolution
	poolH, poolW     int // after pooling (= outH, outW without pooling)
	patch            int // C·k·k
	filters          int
	spec             ConvSpec
	positions        int // outH·outW
	flatAfterPooling int // filters·poolH·poolW
}

func (a Arch) convShapes() ([]convGeom, error) {
	c, h, w := a.Input[0], a.Input[1], a.Input[2]
	var out []convGeom
	for i, s := range a.Conv {
		if s.Filters < 1 || s.Kernel < 1 || s.Stride < 1 || s.Pad < 0 {
			return nil, fmt.Errorf("arch: conv %d: filters, kernel, stride must be ≥ 1 and pad ≥ 0, got %+v", i, s)
		}
		// A window larger than its (padded) input is refused before the division, which
		// truncates toward zero and would give one output position for a slightly negative
		// numerator: such a window reads past the example, into the next one's rows.
		if h+2*s.Pad < s.Kernel || w+2*s.Pad < s.Kernel {
			return nil, fmt.Errorf("arch: conv %d: kernel %d does not fit a %dx%d input with pad %d", i, s.Kernel, h, w, s.Pad)
		}
		oh := (h+2*s.Pad-s.Kernel)/s.Stride + 1
		ow := (w+2*s.Pad-s.Kernel)/s.Stride + 1
		if oh < 1 || ow < 1 {
			return nil, fmt.Errorf("arch: conv %d: kernel %d does not fit a %dx%d input with pad %d", i, s.Kernel, h, w, s.Pad)
		}
		g := convGeom{inC: c, inH: h, inW: w, outH: oh, outW: ow, patch: c * s.Kernel * s.Kernel, filters: s.Filters, spec: s, positions: oh * ow}
		ph, pw := oh, ow
		if s.PoolKernel > 0 {
			if s.PoolStride < 1 {
				return nil, fmt.Errorf("arch: conv %d: pool stride %d, want ≥ 1", i, s.PoolStride)
			}
			if oh < s.PoolKernel || ow < s.PoolKernel {
				return nil, fmt.Errorf("arch: conv %d: pool %d does not fit %dx%d", i, s.PoolKernel, oh, ow)
			}
			ph = (oh-s.PoolKernel)/s.PoolStride + 1
			pw = (ow-s.PoolKernel)/s.PoolStride + 1
			if ph < 1 || pw < 1 {
				return nil, fmt.Errorf("arch: conv %d: pool %d does not fit %dx%d", i, s.PoolKernel, oh, ow)
			}
		}
		g.poolH, g.poolW = ph, pw
		g.flatAfterPooling = s.Filters * ph * pw
		out = append(out, g)
		c, h, w = s.Filters, ph, pw
	}
	return out, nil
}

// InputSize is the number of features of one example.
func (a Arch) InputSize() int {
	d := 1
	for _, v := range a.Input {
		d *= v
	}
	return d
}

// LayerShape is one GEMM layer's geometry: In×Out weights, a bias of Out, and Positions rows
// per example.
type LayerShape struct {
	Name      string
	In, Out   int
	Positions int
}

// Layers lists the GEMM layers in order.
func (a Arch) Layers() ([]LayerShape, error) {
	d, err := a.decl()
	if err != nil {
		return nil, err
	}
	return d.Gemm, nil
}

// decl returns every parameter the model declares: its GEMM layers, then the other layers'
// tensors (Decl).
func (a Arch) decl() (*Decl, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	if a.Kind == KindStack {
		_, d, err := a.plan()
		return d, err
	}
	return &Decl{Gemm: a.presetLayers()}, nil
}

// presetLayers lists a preset's GEMM layers (a valid one).
func (a Arch) presetLayers() []LayerShape {
	var out []LayerShape
	in := a.InputSize()
	if len(a.Conv) > 0 {
		geo, _ := a.convShapes()
		for i, g := range geo {
			out = append(out, LayerShape{Name: fmt.Sprintf("conv%d", i+1), In: g.patch, Out: g.filters, Positions: g.positions})
			in = g.flatAfterPooling
		}
	}
	for i, h := range a.Hidden {
		out = append(out, LayerShape{Name: fmt.Sprintf("dense%d", i+1), In: in, Out: h, Positions: 1})
		in = h
	}
	out = append(out, LayerShape{Name: "out", In: in, Out: a.Classes, Positions: 1})
	return out
}

// NumParams counts the parameter values (0 for an invalid architecture).
func (a Arch) NumParams() int {
	d, err := a.decl()
	if err != nil {
		return 0
	}
	return d.Count()
}

// OnlyGEMM reports whether every parametric layer of the model follows the GEMM rule and the
// model is a preset, the models the CUDA backend runs.
func (a Arch) OnlyGEMM() bool { return a.Kind != KindStack }

// ImageInput reports whether the model reads its examples as B×C×H×W images (its first layer is
// a convolution on a [C,H,W] input, whose im2col runs in Go, or a scatter layer) rather than as
// B×D rows.
func (a Arch) ImageInput() bool {
	if len(a.Input) != 3 {
		return false
	}
	if a.Kind != KindStack {
		return len(a.Conv) > 0
	}
	return len(a.Stack) > 0 && (a.Stack[0].Type == "conv2d" || a.Stack[0].Type == "scatter")
}
