package nn

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

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
	paramIdx   []int // paramNodes[k] is params.List[paramIdx[k]]
	paramGrads []G.Value

	g      *G.ExprGraph
	x, y   *G.Node
	vm     G.VM
	taps   []*Tap
	mats   []*MatTap
	sparse []*SparseTap
	loss   G.Value

	// dropout: the training net has dropout layers, whose masks read dropSeeds (one per row,
	// SetDropoutSeeds; layer_dropout.go).
	dropout   bool
	dropSeeds []uint64

	geo0    convGeom      // first convolution, when the model has one
	patches *tensor.Dense // its im2col'd input (or the scatter features), filled by Run
	scat    *scatterGeom  // first layer's scattering transform, when it is a scatter layer
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
	if err := n.build(); err != nil {
		return nil, fmt.Errorf("nn: building %s graph: %w", arch.Kind, err)
	}
	return n, nil
}

type layerNodes struct {
	a, z *G.Node
}

// paramNode returns a node holding parameter p (one of n.params.List).
func (n *Net) paramNode(p *Param, idx ...int) *G.Node {
	i := -1
	if len(idx) > 0 {
		i = idx[0]
	} else {
		for j, q := range n.params.List {
			if q == p {
				i = j
			}
		}
	}
	n.paramIdx = append(n.paramIdx, i)
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

// build compiles the model's layer stack (Arch.Model): the forward graph, and for a training net
// the summed loss, its backpropagation to every GEMM layer's pre-activation and every
// materialized rule's output, and the taps.
func (n *Net) build() error {
	B, dt := n.Batch, n.params.Dtype
	seq, d, err := n.Arch.plan()
	if err != nil {
		return err
	}
	for k, o := range d.Other {
		i := 2*len(d.Gemm) + k
		if i >= len(n.params.List) || !n.params.List[i].Value.Shape().Eq(tensor.Shape{o.Rows, o.Cols}) {
			return fmt.Errorf("parameter %s: the parameters do not hold it as a %d×%d tensor at %d", o.Name, o.Rows, o.Cols, i)
		}
	}
	in := inputShape(n.Arch.Input)
	if g, ok, err := scatterOf(n.Arch); ok {
		// The scattering runs in Go (Run does it, in parallel), like a first convolution's
		// im2col: the graph's input is the feature rows (layer_scatter.go).
		if err != nil {
			return err
		}
		n.scat = g
		rows, cols := B*g.t.OutH()*g.t.OutW(), g.out/(g.t.OutH()*g.t.OutW())
		n.patches = tensor.New(tensor.WithShape(rows, cols), tensor.Of(dt))
		n.x = G.NewMatrix(n.g, dt, G.WithShape(rows, cols), G.WithName("features"))
	} else if n.Arch.ImageInput() {
		// The first convolution's im2col runs in Go (Run does it, in parallel): the graph's
		// input is the patch matrix, which is also that layer's tap A, read without a copy.
		g, err := seq.Layers[0].(*Conv2d).geom(in)
		if err != nil {
			return err
		}
		n.geo0 = g
		n.patches = tensor.New(tensor.WithShape(B*g.positions, g.patch), tensor.Of(dt))
		n.x = G.NewMatrix(n.g, dt, G.WithShape(B*g.positions, g.patch), G.WithName("patches"))
	} else {
		n.x = G.NewMatrix(n.g, dt, G.WithShape(B, n.Arch.InputSize()), G.WithName("x"))
	}
	if n.train {
		n.y = G.NewMatrix(n.g, dt, G.WithShape(B, n.Arch.Classes), G.WithName("y"))
	}
	bld := &Builder{net: n, nGemm: len(d.Gemm)}
	logits, err := seq.Forward(bld, n.x, in)
	if err != nil {
		return err
	}
	if bld.gemm != len(d.Gemm) || 2*bld.nGemm+bld.other != len(n.params.List) {
		return fmt.Errorf("the layers built %d GEMM layers and %d other tensors, declared %d and %d", bld.gemm, bld.other, len(d.Gemm), len(d.Other))
	}
	nodes := bld.gemms
	if n.Arch.Loss == LossBCE {
		if logits, err = bceLogits(logits, B); err != nil {
			return err
		}
	}
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
	wrt := make(G.Nodes, 0, len(nodes)+len(bld.mats))
	for _, ln := range nodes {
		wrt = append(wrt, ln.z)
	}
	for _, m := range bld.mats {
		wrt = append(wrt, m.out)
	}
	for _, sp := range bld.sparse {
		wrt = append(wrt, sp.out)
	}
	grads, err := G.Backpropagate(G.Nodes{loss}, G.Nodes{one}, wrt)
	if err != nil {
		return fmt.Errorf("backpropagate: %w", err)
	}
	for i, ln := range nodes {
		t := &Tap{Shape: d.Gemm[i], W: n.params.List[2*i], B: n.params.List[2*i+1]}
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
	for k, m := range bld.mats {
		t := &MatTap{Name: m.name, Params: m.params, Width: m.width, grad: m.grad, prep: m.prep, tapVal: make([]G.Value, len(m.taps))}
		for j, tn := range m.taps {
			G.Read(tn, &t.tapVal[j])
		}
		G.Read(grads[len(nodes)+k], &t.eVal)
		n.mats = append(n.mats, t)
	}
	for k, sp := range bld.sparse {
		t := &SparseTap{Name: sp.name, Param: sp.param, L: sp.l, Vocab: sp.vocab, Dim: sp.dim}
		G.Read(grads[len(nodes)+len(bld.mats)+k], &t.eVal)
		n.sparse = append(n.sparse, t)
	}
	n.vm = G.NewTapeMachine(n.g)
	return nil
}

// lossNode adds the summed cross-entropy of the logits against n.y. Training nets use xentOp,
// which reduces each row with its own maximum and keeps rows apart (see xentop.go); the batch-1
// oracle keeps Gorgonia's LogSoftMax, correct on a single row, so that it stays independent of
// the training nets' loss.
func (n *Net) lossNode(logits *G.Node) (*G.Node, error) {
	if n.Arch.Loss == LossMSE {
		return n.mseLossNode(logits)
	}
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
func (n *Net) Run(x, y *tensor.Dense) error { return n.run(x, y, false) }

func (n *Net) run(x, y *tensor.Dense, pre bool) error {
	in := x
	if n.scat != nil {
		if err := n.scatterRun(x, pre); err != nil {
			return err
		}
		in = n.patches
	} else if n.patches != nil {
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
	for _, t := range n.mats {
		t.load()
	}
	for _, t := range n.sparse {
		t.x = x
		t.load()
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
