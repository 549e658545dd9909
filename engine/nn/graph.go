package nn

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

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

// Net is a compiled Gorgonia graph of a model at a fixed physical batch size. A training net
// runs the forward pass and the backward pass down to every pre-activation (never to the
// weights: the weight gradients are formed, clipped, by the DP step); an evaluation net runs
// only the forward pass.
type Net struct {
	Arch   Arch
	Batch  int
	params *Params
	train  bool
	oracle bool // batch-1 oracle: Gorgonia's BroadcastAdd and Grad with respect to the weights

	paramNodes G.Nodes
	paramGrads []G.Value

	g    *G.ExprGraph
	x, y *G.Node
	vm   G.VM
	taps []*Tap
	loss G.Value

	geo0    convGeom      // first convolution, when the model has one
	patches *tensor.Dense // its im2col'd input, filled by Run
	logits  G.Value
}

// Build compiles arch over params for a physical batch of `batch` examples. With train set,
// the graph also backpropagates the summed loss to each layer's pre-activation and the taps
// are filled on every Run.
func Build(arch Arch, params *Params, batch int, train bool) (*Net, error) {
	if batch < 1 {
		return nil, fmt.Errorf("nn: batch = %d, want ≥ 1", batch)
	}
	shapes, err := arch.Layers()
	if err != nil {
		return nil, err
	}
	if len(shapes) != len(params.Shapes) {
		return nil, fmt.Errorf("nn: parameters have %d layers, arch %d", len(params.Shapes), len(shapes))
	}
	for i := range shapes {
		if shapes[i] != params.Shapes[i] {
			return nil, fmt.Errorf("nn: layer %d: parameters %+v, arch %+v", i, params.Shapes[i], shapes[i])
		}
	}
	n := &Net{Arch: arch, Batch: batch, params: params, train: train, g: newGraph()}
	if err := n.build(shapes); err != nil {
		return nil, fmt.Errorf("nn: building %s graph: %w", arch.Kind, err)
	}
	return n, nil
}

type layerNodes struct {
	a, z *G.Node
}

func (n *Net) paramNode(p *Param) *G.Node {
	s := p.Value.Shape()
	// Each graph gets its own tensor header over the shared backing array: Gorgonia's
	// transposed matmuls transpose a tensor by mutating its header, so graphs running
	// concurrently must not share headers. The data stay shared, so in-place updates are seen
	// by every graph.
	view := tensor.New(tensor.WithShape(s[0], s[1]), tensor.WithBacking(p.Value.Data()))
	node := G.NewMatrix(n.g, n.params.Dtype, G.WithShape(s[0], s[1]), G.WithName(p.Name), G.WithValue(view))
	n.paramNodes = append(n.paramNodes, node)
	return node
}

func (n *Net) activate(z *G.Node) (*G.Node, error) {
	if !n.oracle { // one op with its gradient, same arithmetic (actop.go)
		op, err := newActOp(n.Arch.Activation, z.Shape())
		if err != nil {
			return nil, err
		}
		return G.ApplyOp(op, z)
	}
	if n.Arch.Activation == ReLU {
		return G.Rectify(z)
	}
	return G.Tanh(z)
}

// gemmLayer adds Z = A·W + b for layer li and returns Z.
func (n *Net) gemmLayer(a *G.Node, li int) (*G.Node, error) {
	w := n.paramNode(n.params.List[2*li])
	b := n.paramNode(n.params.List[2*li+1])
	if n.oracle {
		mm, err := G.Mul(a, w)
		if err != nil {
			return nil, err
		}
		return G.BroadcastAdd(mm, b, nil, []byte{0})
	}
	// One op, differentiable with respect to A only (gemmop.go): the graph never forms the
	// weight gradients, and the first layer (A the graph's input) no ∂L/∂A either.
	as, ws := a.Shape(), w.Shape()
	if len(as) != 2 || len(ws) != 2 || as[1] != ws[0] {
		return nil, fmt.Errorf("layer %d: input %v, weights %v", li, as, ws)
	}
	return G.ApplyOp(newGemmOp(as[0], as[1], ws[1], a != n.x), a, w, b)
}

func (n *Net) build(shapes []LayerShape) error {
	B, dt := n.Batch, n.params.Dtype
	var cur *G.Node
	if len(n.Arch.Conv) > 0 {
		// The first convolution's im2col runs in Go (Run does it, in parallel): the graph's
		// input is the patch matrix, which is also that layer's tap A, read without a copy.
		geo, err := n.Arch.convShapes()
		if err != nil {
			return err
		}
		n.geo0 = geo[0]
		n.patches = tensor.New(tensor.WithShape(B*geo[0].positions, geo[0].patch), tensor.Of(dt))
		n.x = G.NewMatrix(n.g, dt, G.WithShape(B*geo[0].positions, geo[0].patch), G.WithName("patches"))
	} else {
		n.x = G.NewMatrix(n.g, dt, G.WithShape(B, n.Arch.InputSize()), G.WithName("x"))
	}
	if n.train {
		n.y = G.NewMatrix(n.g, dt, G.WithShape(B, n.Arch.Classes), G.WithName("y"))
	}
	cur = n.x

	var nodes []layerNodes
	li := 0
	if len(n.Arch.Conv) > 0 {
		geo, err := n.Arch.convShapes()
		if err != nil {
			return err
		}
		for ci, cg := range geo {
			s := cg.spec
			patch := cur
			if ci > 0 {
				prev := geo[ci-1]
				op := newRowsOp(false, B, prev.poolH, prev.poolW, prev.filters, s.Kernel, s.Stride, s.Pad)
				var err error
				if patch, err = G.ApplyOp(op, cur); err != nil {
					return err
				}
			}
			z, err := n.gemmLayer(patch, li)
			if err != nil {
				return err
			}
			nodes = append(nodes, layerNodes{a: patch, z: z})
			li++
			if cur, err = n.activate(z); err != nil {
				return err
			}
			if s.PoolKernel > 0 {
				op := newRowsOp(true, B, cg.outH, cg.outW, cg.filters, s.PoolKernel, s.PoolStride, 0)
				if cur, err = G.ApplyOp(op, cur); err != nil {
					return err
				}
			}
		}
		// (B·h·w)×C rows are, read row-major, the same bytes as B×(h·w·C).
		if cur, err = G.Reshape(cur, tensor.Shape{B, geo[len(geo)-1].flatAfterPooling}); err != nil {
			return err
		}
	}
	for range n.Arch.Hidden {
		z, err := n.gemmLayer(cur, li)
		if err != nil {
			return err
		}
		nodes = append(nodes, layerNodes{a: cur, z: z})
		li++
		if cur, err = n.activate(z); err != nil {
			return err
		}
	}
	logits, err := n.gemmLayer(cur, li)
	if err != nil {
		return err
	}
	nodes = append(nodes, layerNodes{a: cur, z: logits})
	G.Read(logits, &n.logits)

	if !n.train {
		n.vm = G.NewTapeMachine(n.g)
		return nil
	}
	// Summed cross-entropy: L = −Σᵢ Σₖ yᵢₖ·log softmax(zᵢ)ₖ. Padding rows have y = 0.
	loss, err := n.lossNode(logits)
	if err != nil {
		return err
	}
	G.Read(loss, &n.loss)

	if n.oracle {
		grads, err := G.Grad(loss, n.paramNodes...)
		if err != nil {
			return fmt.Errorf("grad: %w", err)
		}
		n.paramGrads = make([]G.Value, len(grads))
		for i, gr := range grads {
			G.Read(gr, &n.paramGrads[i])
		}
		n.vm = G.NewTapeMachine(n.g)
		return nil
	}
	var one *G.Node
	if dt == tensor.Float32 {
		one = n.g.AddNode(G.NewConstant(float32(1)))
	} else {
		one = n.g.AddNode(G.NewConstant(float64(1)))
	}
	wrt := make(G.Nodes, len(nodes))
	for i, ln := range nodes {
		wrt[i] = ln.z
	}
	grads, err := G.Backpropagate(G.Nodes{loss}, G.Nodes{one}, wrt)
	if err != nil {
		return fmt.Errorf("backpropagate: %w", err)
	}
	for i, ln := range nodes {
		t := &Tap{Shape: shapes[i], W: n.params.List[2*i], B: n.params.List[2*i+1]}
		if ln.a == n.x {
			// The graph input needs no read: it is the buffer Run fills.
			if n.patches != nil {
				t.aValue = n.patches
			} else {
				t.aFromInput = true
			}
		} else {
			G.Read(ln.a, &t.aValue)
		}
		G.Read(grads[i], &t.eValue)
		n.taps = append(n.taps, t)
	}
	n.vm = G.NewTapeMachine(n.g)
	return nil
}

// lossNode adds the summed cross-entropy of the logits against n.y. Training nets use xentOp,
// which reduces each row with its own maximum and keeps rows apart (see xentop.go); the batch-1
// oracle keeps Gorgonia's LogSoftMax, correct on a single row, so that it stays independent of
// the training nets' loss.
func (n *Net) lossNode(logits *G.Node) (*G.Node, error) {
	if !n.oracle {
		s := logits.Shape()
		return G.ApplyOp(&xentOp{b: s[0], k: s[1]}, logits, n.y)
	}
	logp, err := G.LogSoftMax(logits)
	if err != nil {
		return nil, err
	}
	prod, err := G.HadamardProd(n.y, logp)
	if err != nil {
		return nil, err
	}
	s, err := G.Sum(prod)
	if err != nil {
		return nil, err
	}
	return G.Neg(s)
}

// Run executes the graph on one physical batch: x is B×D (or B×C×H×W for convolutional
// models) and y the B×K one-hot labels, all-zero on padding rows (ignored by evaluation nets).
func (n *Net) Run(x, y *tensor.Dense) error {
	in := x
	if n.patches != nil {
		if err := im2col(n.patches, x, n.geo0); err != nil {
			return err
		}
		in = n.patches
	}
	for _, t := range n.taps {
		if t.aFromInput {
			t.aValue = x
		}
	}
	if err := G.Let(n.x, in); err != nil {
		return fmt.Errorf("nn: bind x: %w", err)
	}
	if n.train {
		if err := G.Let(n.y, y); err != nil {
			return fmt.Errorf("nn: bind y: %w", err)
		}
	}
	defer n.vm.Reset()
	if err := n.vm.RunAll(); err != nil {
		return fmt.Errorf("nn: run: %w", err)
	}
	return nil
}

// Taps lists the GEMM layers' inputs and errors of the last Run (training nets only).
func (n *Net) Taps() []*Tap { return n.taps }

// Loss is the summed loss of the last Run (training nets only).
func (n *Net) Loss() float64 {
	switch v := n.loss.Data().(type) {
	case float32:
		return float64(v)
	case float64:
		return v
	}
	return 0
}

// Logits returns the B×K logits of the last Run.
func (n *Net) Logits() tensor.Tensor { return n.logits.(tensor.Tensor) }

// Close releases the VM.
func (n *Net) Close() error {
	if n.vm != nil {
		return n.vm.Close()
	}
	return nil
}

func newGraph() *G.ExprGraph { return G.NewGraph() }
