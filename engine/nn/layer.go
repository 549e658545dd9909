package nn

import (
	"errors"
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Layout says how one example's activation is held between layers.
type Layout int

// The layouts. An Image is the model's raw C×H×W input, before any layer (a graph input of
// B×(C·H·W) values in channels-first order); Rows is the row layout of the convolutional part
// (rowsop.go): (B·H·W)×C, example-major, then image row, then column; Flat is B×D.
const (
	Flat Layout = iota
	Rows
	Image
)

// Shape is one example's activation between two layers: D = C features for Flat (H = W = 1),
// C channels on H×W positions for Rows and Image.
type Shape struct {
	Layout  Layout
	C, H, W int
}

// Size is the number of values of one example.
func (s Shape) Size() int { return s.C * s.H * s.W }

// Positions is the number of rows one example takes in its layout (H·W for Rows, else 1).
func (s Shape) Positions() int {
	if s.Layout == Rows {
		return s.H * s.W
	}
	return 1
}

func (s Shape) String() string {
	switch s.Layout {
	case Flat:
		return fmt.Sprintf("[%d]", s.C)
	case Rows:
		return fmt.Sprintf("[%d×%d×%d rows]", s.C, s.H, s.W)
	}
	return fmt.Sprintf("[%d×%d×%d image]", s.C, s.H, s.W)
}

// flatOf is the Flat shape of d features.
func flatOf(d int) Shape { return Shape{Layout: Flat, C: d, H: 1, W: 1} }

// inputShape is the shape of a model's input.
func inputShape(input []int) Shape {
	if len(input) == 3 {
		return Shape{Layout: Image, C: input[0], H: input[1], W: input[2]}
	}
	d := 1
	for _, v := range input {
		d *= v
	}
	return flatOf(d)
}

// Layer is one layer of a model: it checks its input shape and declares its parameters (Plan),
// builds its forward graph (Forward), and gives the DP step its per-example rule, by what it
// registers with the Builder in Forward:
//
//   - the GEMM rule (Builder.Gemm, rule_gemm.go): a layer Z = A·W + b hands the step its input
//     rows A and per-example errors E; ghost norms or materialization follow from the shapes;
//   - the materialized rule (Builder.Materialize, rule_materialized.go): the layer hands the
//     step each example's gradient of its parameters, a vector of p values (B×p for the
//     batch); the step takes row norms and forms Σᵢ cᵢ·gᵢ in float64. Any layer may declare it.
//
// A layer with parameters that registers no rule for them cannot be trained privately: Build
// refuses it. Layers must keep examples apart (example i's outputs depend on example i's inputs
// alone), which is what makes a per-example gradient exist; BatchNorm does not and is refused.
type Layer interface {
	// Kind names the layer kind as model files spell it ("dense", "groupnorm", …).
	Kind() string
	// Plan checks the layer on one example's input shape, declares its parameters on d, and
	// returns its output shape.
	Plan(in Shape, d *Decl) (Shape, error)
	// Forward adds the layer's graph on x (of shape in, for the builder's batch) and returns
	// its output. It asks the builder for its parameters in the order Plan declared them.
	Forward(b *Builder, x *G.Node, in Shape) (*G.Node, error)
}

// ParamDecl is one parameter tensor of a layer that is not a GEMM layer: Rows×Cols values, all
// initialized to Init, or with Normal drawn from N(0, Init²) (after the GEMM layers' draws).
type ParamDecl struct {
	Name       string
	Rows, Cols int
	Init       float64
	Normal     bool
}

// Decl collects the parameters a model's layers declare in Plan: the GEMM layers' (two tensors
// each, weight In×Out and bias 1×Out, initialized by the fan-in rule) and the others'. In
// Params.List the GEMM layers' tensors come first, in layer order, then the others' in layer
// order, so that GEMM layer li's weight and bias are tensors 2·li and 2·li+1 whatever the
// other layers are.
type Decl struct {
	Gemm  []LayerShape
	Other []ParamDecl
	// Values counts, in float64 (no overflow), the values one example holds during a
	// training step: each layer's output and its gradient, a convolution's patch matrix and
	// its gradient, and its materialized per-example gradient (Arch.StepValues).
	Values float64
	path   string // the current layer's name prefix
}

// AddGemm declares a GEMM layer named by the current layer's path and returns its index.
func (d *Decl) AddGemm(in, out, positions int, name string) int {
	if name == "" {
		name = d.path
	}
	d.Gemm = append(d.Gemm, LayerShape{Name: name, In: in, Out: out, Positions: positions})
	return len(d.Gemm) - 1
}

// AddParam declares one other parameter tensor, named path.suffix.
func (d *Decl) AddParam(suffix string, rows, cols int, init float64) {
	d.Other = append(d.Other, ParamDecl{Name: d.path + "." + suffix, Rows: rows, Cols: cols, Init: init})
}

// Count is the number of parameter values declared.
func (d *Decl) Count() int {
	n := 0
	for _, l := range d.Gemm {
		n += l.In*l.Out + l.Out
	}
	for _, p := range d.Other {
		n += p.Rows * p.Cols
	}
	return n
}

// Sequential applies its layers in order. Layer i is named "i.kind" (its parameters
// "i.kind.w", …), inside a block "block.i.kind"; the presets' GEMM layers keep their own names
// (conv1, dense1, out).
type Sequential struct{ Layers []Layer }

// Kind is "sequential".
func (s *Sequential) Kind() string { return "sequential" }

func (s *Sequential) name(i int, parent string) string {
	n := fmt.Sprintf("%d.%s", i, s.Layers[i].Kind())
	if parent != "" {
		n = parent + "." + n
	}
	return n
}

// Plan plans every layer in turn.
func (s *Sequential) Plan(in Shape, d *Decl) (Shape, error) {
	parent := d.path
	defer func() { d.path = parent }()
	cur := in
	for i, l := range s.Layers {
		d.path = s.name(i, parent)
		out, err := l.Plan(cur, d)
		if err != nil {
			var le *layerError
			if errors.As(err, &le) {
				return Shape{}, err
			}
			return Shape{}, &layerError{path: d.path, err: err}
		}
		if out.Size() > MaxActivation {
			return Shape{}, &layerError{path: d.path, err: fmt.Errorf("gives %d values per example (%v): want at most %d", out.Size(), out, MaxActivation)}
		}
		d.Values += 2 * float64(out.Size())
		cur = out
	}
	return cur, nil
}

// Forward builds every layer in turn.
func (s *Sequential) Forward(b *Builder, x *G.Node, in Shape) (*G.Node, error) {
	cur, shape := x, in
	d := &Decl{}
	for i, l := range s.Layers {
		out, err := l.Plan(shape, d)
		if err != nil {
			return nil, err
		}
		if cur, err = l.Forward(b, cur, shape); err != nil {
			return nil, fmt.Errorf("layer %s: %w", s.name(i, ""), err)
		}
		shape = out
	}
	return cur, nil
}

// Residual is y = x + Body(x), or y = Shortcut(x) + Body(x) with a shortcut (a projection, such
// as a 1×1 convolution with a stride, where the body changes the shape): the two branches must
// give the same shape, and without a shortcut Body must give its input's shape back. The
// shortcut's layers are named "block.shortcut.i.kind" and bring their own rules.
type Residual struct {
	Body     *Sequential
	Shortcut *Sequential
}

// Kind is "residual".
func (r *Residual) Kind() string { return "residual" }

// Plan plans the body and checks that it keeps the shape.
func (r *Residual) Plan(in Shape, d *Decl) (Shape, error) {
	if in.Layout == Image {
		return Shape{}, fmt.Errorf("a residual block needs a flat or convolved input, not the raw image (put a conv2d or flatten first)")
	}
	if len(r.Body.Layers) == 0 {
		return Shape{}, fmt.Errorf("empty body: want at least one layer")
	}
	out, err := r.Body.Plan(in, d)
	if err != nil {
		return Shape{}, err
	}
	if r.Shortcut != nil {
		return r.planShortcut(in, out, d)
	}
	if out != in {
		return Shape{}, fmt.Errorf("the body maps %v to %v: a residual block must keep the shape", in, out)
	}
	return in, nil
}

// Forward adds x to the body's output.
func (r *Residual) Forward(b *Builder, x *G.Node, in Shape) (*G.Node, error) {
	y, err := r.Body.Forward(b, x, in)
	if err != nil {
		return nil, err
	}
	if r.Shortcut != nil {
		if x, err = r.Shortcut.Forward(b, x, in); err != nil {
			return nil, fmt.Errorf("shortcut: %w", err)
		}
	}
	return G.Add(x, y)
}

// Builder is what a layer's Forward builds with: the graph, the batch size, the model's
// parameters in declaration order, and the registry of per-example rules.
type Builder struct {
	net   *Net
	gemm  int // next GEMM layer
	other int // next other parameter, counted from the first non-GEMM tensor
	nGemm int

	dropouts int // dropout layers built

	gemms  []layerNodes
	mats   []*matNode
	sparse []*sparseNode
}

// Batch is the physical batch size of the graph being built.
func (b *Builder) Batch() int { return b.net.Batch }

// Graph is the graph being built.
func (b *Builder) Graph() *G.ExprGraph { return b.net.g }

// Dtype is the parameters' dtype.
func (b *Builder) Dtype() tensor.Dtype { return b.net.params.Dtype }

// Oracle reports whether the graph is the batch-1 gradient oracle (oracle.go), which must
// differentiate with respect to every parameter with Gorgonia's own ops.
func (b *Builder) Oracle() bool { return b.net.oracle }

// NextParam returns the node of the layer's next declared non-GEMM parameter and its index in
// Params.List.
func (b *Builder) NextParam() (*G.Node, int, error) {
	i := 2*b.nGemm + b.other
	if i >= len(b.net.params.List) {
		return nil, 0, fmt.Errorf("more parameters asked for than declared")
	}
	b.other++
	return b.net.paramNode(b.net.params.List[i], i), i, nil
}

// Gemm adds Z = A·W + b for the model's next GEMM layer, registers the GEMM rule for it (A and
// the per-example errors at Z), and returns Z.
func (b *Builder) Gemm(a *G.Node) (*G.Node, error) {
	li := b.gemm
	if li >= b.nGemm {
		return nil, fmt.Errorf("more GEMM layers built than declared")
	}
	b.gemm++
	z, err := b.net.gemmLayer(a, li)
	if err != nil {
		return nil, err
	}
	b.gemms = append(b.gemms, layerNodes{a: a, z: z})
	return z, nil
}

// AddBias adds a 1×n row to every row of m×n (the oracle differentiates it with Gorgonia's own
// BroadcastAdd).
func (b *Builder) AddBias(x, bias *G.Node) (*G.Node, error) {
	if b.net.oracle {
		return G.BroadcastAdd(x, bias, nil, []byte{0})
	}
	s := x.Shape()
	return G.ApplyOp(&biasOp{m: s[0], n: s[1]}, x, bias)
}

// Materialize registers the materialized rule for parameters params (indices from
// NextParam): after each Run, grad(dst, i, vals, e) writes example i's gradient with respect to
// those parameters, concatenated in order (Width values), into dst, from the values of taps
// (nodes of the layer's forward graph) and e = ∂L/∂out, the summed loss's gradient at the
// layer's output node out. grad must read example i's rows alone.
func (b *Builder) Materialize(name string, params []int, width int, out *G.Node, taps []*G.Node, grad MatGradFunc) {
	b.mats = append(b.mats, &matNode{name: name, params: params, width: width, out: out, taps: taps, grad: grad})
}
