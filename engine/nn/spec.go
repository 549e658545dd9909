package nn

import (
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/engine/nn/scatter"
)

// KindStack is the Arch.Kind of a model given as a layer list (Arch.Stack), as model files
// describe them (modelfile.go, docs/models.md).
const KindStack = "stack"

// LayerSpec is one layer of a stack, as model files and saved architectures spell it. Every
// size is explicit (ParseModelFile fills the defaults).
type LayerSpec struct {
	Type    string      `json:"type"`
	Units   int         `json:"units,omitempty"`   // dense
	Filters int         `json:"filters,omitempty"` // conv2d
	Kernel  int         `json:"kernel,omitempty"`  // conv2d, maxpool, avgpool
	Stride  int         `json:"stride,omitempty"`  // conv2d, maxpool, avgpool
	Pad     int         `json:"pad,omitempty"`     // conv2d
	Groups  int         `json:"groups,omitempty"`  // groupnorm
	Scale   float64     `json:"scale,omitempty"`   // tempered_sigmoid
	Temp    float64     `json:"temp,omitempty"`    // tempered_sigmoid
	Offset  float64     `json:"offset,omitempty"`  // tempered_sigmoid
	Vocab   int         `json:"vocab,omitempty"`   // embedding
	Dim     int         `json:"dim,omitempty"`     // embedding, attention
	Heads   int         `json:"heads,omitempty"`   // attention
	Body    []LayerSpec `json:"body,omitempty"`    // residual

	// Grouped and weight-standardized convolutions (Groups 0 or 1: ungrouped), a residual
	// block's shortcut branch (nil: the identity) and dropout's rate (layer_conv_ext.go,
	// layer_dropout.go).
	Standardize bool        `json:"standardize,omitempty"` // conv2d
	Shortcut    []LayerSpec `json:"shortcut,omitempty"`    // residual
	Rate        float64     `json:"rate,omitempty"`        // dropout
	J           int         `json:"J,omitempty"`           // scatter: scales
	L           int         `json:"L,omitempty"`           // scatter: angles
}

// Limits on a stack, so that its sizes are computed without overflow and a described model fits
// in memory: each is named by the error that refuses it.
const (
	MaxStackLayers = 256     // layers, counting those inside residual blocks
	MaxStackDepth  = 8       // nesting of residual blocks
	MaxUnits       = 1 << 20 // dense units
	MaxFilters     = 1 << 14 // conv2d filters
	MaxWindow      = 1 << 10 // kernel, stride, pad
	MaxStackParams = 1 << 28 // parameter values of the whole model
	// MaxActivation bounds the values one example takes after any layer (a convolution's
	// patch matrix included); the sum over the layers, times the physical batch, is bounded
	// by the engine (engine.MaxStepBytes).
	MaxActivation = 1 << 24
)

// layerKinds lists the layer kinds a stack may name, with what each takes (docs/models.md).
var layerKinds = map[string]string{
	"dense":            "units",
	"conv2d":           "filters, kernel, stride, pad, groups, standardize",
	"maxpool":          "kernel, stride",
	"avgpool":          "kernel, stride",
	"flatten":          "",
	"tanh":             "",
	"relu":             "",
	"gelu":             "",
	"tempered_sigmoid": "scale, temp, offset",
	"layernorm":        "",
	"groupnorm":        "groups",
	"residual":         "body, shortcut",
	"embedding":        "vocab, dim",
	// The transformer's layers (layer_attention.go).
	"attention": "heads, dim",
	"position":  "",
	"meanpool":  "",
	"dropout":   "rate",
	"scatter":   "J, L",
}

// LayerKinds returns the layer kinds of model files and the fields each takes.
func LayerKinds() map[string]string {
	out := make(map[string]string, len(layerKinds))
	for k, v := range layerKinds {
		out[k] = v
	}
	return out
}

func inRange(field string, v, lo, hi int) error {
	if v < lo || v > hi {
		return fmt.Errorf("%s = %d: want %d to %d", field, v, lo, hi)
	}
	return nil
}

// layer turns a spec into its Layer, checking every field's range; depth is its nesting.
func (s LayerSpec) layer(depth int, count *int) (Layer, error) {
	*count++
	if *count > MaxStackLayers {
		return nil, fmt.Errorf("more than %d layers", MaxStackLayers)
	}
	switch s.Type {
	case "dense":
		if err := inRange("units", s.Units, 1, MaxUnits); err != nil {
			return nil, err
		}
		return &Dense{Units: s.Units}, nil
	case "conv2d":
		if err := firstErr(inRange("filters", s.Filters, 1, MaxFilters), inRange("kernel", s.Kernel, 1, MaxWindow),
			inRange("stride", s.Stride, 1, MaxWindow), inRange("pad", s.Pad, 0, MaxWindow)); err != nil {
			return nil, err
		}
		if s.Groups != 0 {
			if err := inRange("groups", s.Groups, 1, s.Filters); err != nil {
				return nil, err
			}
		}
		return &Conv2d{Filters: s.Filters, Kernel: s.Kernel, Stride: s.Stride, Pad: s.Pad, Groups: s.Groups, Standardize: s.Standardize}, nil
	case "maxpool", "avgpool":
		if err := firstErr(inRange("kernel", s.Kernel, 1, MaxWindow), inRange("stride", s.Stride, 1, MaxWindow)); err != nil {
			return nil, err
		}
		return &Pool2d{Avg: s.Type == "avgpool", Kernel: s.Kernel, Stride: s.Stride}, nil
	case "flatten":
		return &Flatten{}, nil
	case "tanh", "relu", "gelu", "tempered_sigmoid":
		a := &Act{Fn: s.Type, Scale: s.Scale, Temp: s.Temp, Offset: s.Offset}
		if _, err := a.Plan(Shape{}, nil); err != nil {
			return nil, err
		}
		return a, nil
	case "layernorm":
		return &Norm{Layer: true, Groups: 1}, nil
	case "groupnorm":
		if err := inRange("groups", s.Groups, 1, MaxFilters); err != nil {
			return nil, err
		}
		return &Norm{Groups: s.Groups}, nil
	case "embedding":
		if err := firstErr(inRange("vocab", s.Vocab, 1, MaxUnits), inRange("dim", s.Dim, 1, MaxFilters)); err != nil {
			return nil, err
		}
		return &Embedding{Vocab: s.Vocab, Dim: s.Dim}, nil
	case "attention":
		if err := firstErr(inRange("heads", s.Heads, 1, MaxFilters), inRange("dim", s.Dim, 1, MaxFilters)); err != nil {
			return nil, err
		}
		if s.Dim%s.Heads != 0 {
			return nil, fmt.Errorf("heads = %d does not divide dim = %d", s.Heads, s.Dim)
		}
		return &Attention{Heads: s.Heads, Dim: s.Dim}, nil
	case "position":
		return &Position{}, nil
	case "meanpool":
		return &MeanPool{}, nil
	case "scatter":
		if err := firstErr(inRange("J", s.J, 1, scatter.MaxJ), inRange("L", s.L, 1, scatter.MaxL)); err != nil {
			return nil, err
		}
		return &Scatter{J: s.J, L: s.L}, nil
	case "residual":
		if depth >= MaxStackDepth {
			return nil, fmt.Errorf("residual blocks nested deeper than %d", MaxStackDepth)
		}
		body, err := stackOf(s.Body, depth+1, count)
		if err != nil {
			return nil, err
		}
		r := &Residual{Body: body}
		if len(s.Shortcut) > 0 {
			if r.Shortcut, err = stackOf(s.Shortcut, depth+1, count); err != nil {
				return nil, fmt.Errorf("shortcut: %w", err)
			}
		}
		return r, nil
	case "dropout":
		l := &Dropout{Rate: s.Rate}
		if _, err := l.Plan(Shape{}, nil); err != nil {
			return nil, err
		}
		return l, nil
	case "batchnorm", "batchnorm2d", "batch_norm":
		return nil, errBatchNorm
	}
	return nil, fmt.Errorf("unknown layer type %q: want one of %s", s.Type, kindList())
}

func stackOf(specs []LayerSpec, depth int, count *int) (*Sequential, error) {
	seq := &Sequential{}
	for i, s := range specs {
		if s.Type == "embedding" && (depth > 0 || i > 0) {
			return nil, fmt.Errorf("layer %d (embedding): it must be the model's first layer (it reads the input's token ids)", i)
		}
		if s.Type == "scatter" && (depth > 0 || i > 0) {
			return nil, fmt.Errorf("layer %d (scatter): it must be the model's first layer (it reads the raw image)", i)
		}
		l, err := s.layer(depth, count)
		if err != nil {
			return nil, fmt.Errorf("layer %d (%s): %w", i, s.Type, err)
		}
		seq.Layers = append(seq.Layers, l)
	}
	return seq, nil
}

// Model returns the architecture as a layer stack: the layer list of a stack, or the preset's
// layers (convolutions each followed by the activation and optional max pooling, a flatten,
// the hidden dense layers each followed by the activation, the output layer).
func (a Arch) Model() (*Sequential, error) {
	if a.Kind == KindStack {
		count := 0
		return stackOf(a.Stack, 0, &count)
	}
	act := &Act{Fn: string(a.Activation)}
	seq := &Sequential{}
	for i, c := range a.Conv {
		seq.Layers = append(seq.Layers, &Conv2d{Filters: c.Filters, Kernel: c.Kernel, Stride: c.Stride, Pad: c.Pad, name: fmt.Sprintf("conv%d", i+1)}, act)
		if c.PoolKernel > 0 {
			seq.Layers = append(seq.Layers, &Pool2d{Kernel: c.PoolKernel, Stride: c.PoolStride})
		}
	}
	if len(a.Conv) > 0 {
		seq.Layers = append(seq.Layers, &Flatten{})
	}
	for i, h := range a.Hidden {
		seq.Layers = append(seq.Layers, &Dense{Units: h, name: fmt.Sprintf("dense%d", i+1)}, act)
	}
	seq.Layers = append(seq.Layers, &Dense{Units: a.Classes, name: "out"})
	return seq, nil
}

// plan builds the stack and plans it on the input: the declared parameters.
func (a Arch) plan() (*Sequential, *Decl, error) {
	seq, err := a.Model()
	if err != nil {
		return nil, nil, err
	}
	d := &Decl{}
	out, err := seq.Plan(inputShape(a.Input), d)
	if err != nil {
		return nil, nil, err
	}
	if err := checkLoss(a.Loss, out, a.Classes); err != nil {
		return nil, nil, err
	}
	return seq, d, nil
}

// validateStack checks a stack model.
func (a Arch) validateStack() error {
	if len(a.Stack) == 0 {
		return fmt.Errorf("arch: a %s model needs at least one layer", KindStack)
	}
	if len(a.Conv) > 0 || len(a.Hidden) > 0 {
		return fmt.Errorf("arch: a %s model describes its layers in Stack only, not Conv or Hidden", KindStack)
	}
	if len(a.Input) > 3 {
		return fmt.Errorf("arch: input shape %v: want at most 3 dimensions", a.Input)
	}
	for _, v := range a.Input {
		if v > MaxUnits {
			return fmt.Errorf("arch: input shape %v: want dimensions ≤ %d", a.Input, MaxUnits)
		}
	}
	if a.InputSize() > MaxUnits {
		return fmt.Errorf("arch: input of %d values: want at most %d", a.InputSize(), MaxUnits)
	}
	_, d, err := a.plan()
	if err != nil {
		return fmt.Errorf("arch: %w", err)
	}
	if n := declCount(d); n > MaxStackParams {
		return fmt.Errorf("arch: %.0f parameters: want at most %d", n, MaxStackParams)
	}
	return nil
}

// StepValues is about the number of values one example of a physical batch holds during a
// training step (Decl.Values, plus the input): what, times the physical batch, a replica's
// graph and buffers take beyond the parameters. MaxActivation bounds each layer's share, not
// their sum over up to MaxStackLayers layers; the engine bounds the product (engine.Config).
func (a Arch) StepValues() (float64, error) {
	_, d, err := a.plan()
	if err != nil {
		return 0, err
	}
	return d.Values + float64(a.InputSize()), nil
}

// declCount counts d's values in float64, so that an absurd stack cannot overflow the count.
func declCount(d *Decl) float64 {
	n := 0.0
	for _, l := range d.Gemm {
		n += float64(l.In)*float64(l.Out) + float64(l.Out)
	}
	for _, p := range d.Other {
		n += float64(p.Rows) * float64(p.Cols)
	}
	return math.Min(n, math.MaxFloat64)
}

// firstErr returns the first non-nil error: a described model's errors are one line each.
func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// layerError is an error of one layer, named by its path; enclosing blocks pass it on as is.
type layerError struct {
	path string
	err  error
}

func (e *layerError) Error() string { return fmt.Sprintf("layer %s: %v", e.path, e.err) }
func (e *layerError) Unwrap() error { return e.err }
