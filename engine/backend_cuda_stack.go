package engine

import (
	"fmt"

	"github.com/dpsgd/dpsgd/cuda"
	"github.com/dpsgd/dpsgd/engine/nn"
)

// The CUDA backend walks the model's layer stack (nn.Arch.Model: a preset's layers or a model
// file's) as a tree of cudaNodes, one per layer, each reading its input buffer and writing its
// output buffer in engine/nn's layouts (a B×D matrix, or the row layout (B·H·W)×C of the
// convolutional part). The backward pass walks them in reverse: each node turns the error at
// its output (dy, written by its consumer) into the error at its input (dx, its producer's dy),
// or skips it when nothing needs it (the model's first layer). Pointwise layers and flatten
// work in place: their dy is their dx, so the error at a GEMM layer's pre-activation, E, ends
// in the layer's own buffer (cudaLayer.e) whatever follows it; a normalization keeps the error
// at its output (dy), from which its per-example γ and β gradients are materialized after the
// backward pass.

// Kinds of cudaNode.
const (
	nodeGemm     = iota // dense or conv2d: a GEMM layer (cudaLayer)
	nodeAct             // tanh or relu (activate_f32)
	nodePoint           // gelu or tempered_sigmoid (point_f32)
	nodeMaxPool         // maxpool
	nodeAvgPool         // avgpool
	nodeFlatten         // flatten: the same bytes, nothing to do
	nodeResidual        // x + body(x)
	nodeNorm            // layernorm or groupnorm: the materialized rule
	nodeEmbed           // embedding: the sparse rule (the model's first layer)
)

// cudaNode is one layer of the stack on the device.
type cudaNode struct {
	kind    int
	name    string // "3 (gelu)", "2.1 (dense)" inside block 2's body
	in, out nn.Shape
	gemm    int          // nodeGemm: the GEMM layer's index (nn.Decl.Gemm, Params order)
	win     cuda.Window  // nodeGemm (conv2d): its window; pools: the pooling window
	chw     bool         // conv2d on the raw image (the model's first layer)
	tanh    bool         // nodeAct
	point   cuda.PointFn // nodePoint
	body    []*cudaNode  // nodeResidual
	groups  int          // nodeNorm: channel groups (1: layernorm)
	other   int          // nodeNorm: γ's index among the non-GEMM parameters (β's is other+1); nodeEmbed: the table's
	vocab   int          // nodeEmbed: the table's rows

	x, dx  cuda.Buffer // input; error at the input (zero Buffer: not needed)
	y, dy  cuda.Buffer // output; error at the output
	idx    cuda.Buffer // nodeMaxPool: argmax positions
	bodyDx cuda.Buffer // nodeResidual: the error at the body's input
	// nodeNorm: x̂, the error at x̂, the per-example gradients of (γ, β) (phys × 2C float64) and
	// their clipped sum, then its noise (2C float64: γ's then β's); nodeEmbed: acc, the table's.
	xh, gx, mat, acc cuda.Buffer
}

// cudaOther is one parameter tensor of a layer that is not a GEMM layer (nn.Decl.Other: an
// embedding's table, a normalization's γ or β), n values; acc is its part of the layer's
// float64 sums.
type cudaOther struct {
	n          int
	w, g, m, v cuda.Buffer
	acc        cuda.Buffer
}

// planCUDA lays the model's layer stack out as cudaNodes (no device memory yet), or says which
// layer the CUDA backend does not run: "layer 3 (dropout) runs on the CPU only", a layer
// inside a residual block named by the block's index, then its own ("layer 2.1 (…)").
func planCUDA(arch nn.Arch) ([]*cudaNode, *nn.Decl, error) {
	seq, err := arch.Model()
	if err != nil {
		return nil, nil, err
	}
	in := nn.Shape{Layout: nn.Flat, C: arch.InputSize(), H: 1, W: 1}
	if len(arch.Input) == 3 {
		in = nn.Shape{Layout: nn.Image, C: arch.Input[0], H: arch.Input[1], W: arch.Input[2]}
	}
	d := &nn.Decl{}
	nodes, _, err := planSeq(seq.Layers, in, d, "")
	if err != nil {
		return nil, nil, err
	}
	return nodes, d, nil
}

// planSeq plans layers on the input shape in; prefix names an enclosing block ("2.").
func planSeq(layers []nn.Layer, in nn.Shape, d *nn.Decl, prefix string) ([]*cudaNode, nn.Shape, error) {
	var nodes []*cudaNode
	cur := in
	for i, l := range layers {
		n := &cudaNode{name: fmt.Sprintf("%s%d (%s)", prefix, i, l.Kind()), in: cur}
		cpuOnly := fmt.Errorf("layer %s runs on the CPU only (the CUDA backend runs dense, conv2d, embedding, layernorm, groupnorm, maxpool, avgpool, flatten, tanh, relu, gelu, tempered_sigmoid and residual layers)", n.name)
		if r, ok := l.(*nn.Residual); ok {
			// A projection shortcut is a second branch the backend does not walk.
			if r.Shortcut != nil && len(r.Shortcut.Layers) > 0 {
				return nil, cur, fmt.Errorf("layer %s: a residual block with a shortcut runs on the CPU only", n.name)
			}
			if r.Body == nil || cur.Layout == nn.Image {
				return nil, cur, fmt.Errorf("layer %s: a residual block needs a non-empty body on a flat or convolved input", n.name)
			}
			body, out, err := planSeq(r.Body.Layers, cur, d, fmt.Sprintf("%s%d.", prefix, i))
			if err != nil {
				return nil, cur, err
			}
			if out != cur || len(body) == 0 {
				return nil, cur, fmt.Errorf("layer %s: the body maps %v to %v: a residual block must keep the shape", n.name, cur, out)
			}
			n.kind, n.body, n.out = nodeResidual, body, cur
			nodes = append(nodes, n)
			continue
		}
		g0, o0 := len(d.Gemm), len(d.Other)
		switch l := l.(type) {
		case *nn.Dense:
			// A dense layer on the row layout is one per position (engine/nn's gemm rule with
			// the positions as rows): the backend's dense layers take flat inputs only.
			if cur.Layout != nn.Flat {
				return nil, cur, cpuOnly
			}
			n.kind = nodeGemm
		case *nn.Conv2d:
			// Grouped convolutions declare a GEMM layer per group and weight-standardized ones
			// map their gradients through the standardization: neither is the backend's conv.
			if l.Groups > 1 || l.Standardize {
				return nil, cur, fmt.Errorf("layer %s: a grouped or weight-standardized convolution runs on the CPU only", n.name)
			}
			n.kind = nodeGemm
			// The raw image is read as patches only by the model's first layer (as engine/nn's
			// graph input); a convolution on the raw image elsewhere is not a model it builds.
			if cur.Layout == nn.Image && (prefix != "" || i != 0) {
				return nil, cur, cpuOnly
			}
			n.chw = cur.Layout == nn.Image
			n.win = cuda.Window{C: cur.C, H: cur.H, W: cur.W, K: l.Kernel, S: l.Stride, Pad: l.Pad}
		case *nn.Act:
			switch l.Fn {
			case "tanh", "relu":
				n.kind, n.tanh = nodeAct, l.Fn == "tanh"
			case "gelu":
				n.kind, n.point = nodePoint, cuda.PointFn{Fn: cuda.PointGELU}
			case "tempered_sigmoid":
				n.kind, n.point = nodePoint, cuda.PointFn{Fn: cuda.PointTemperedSigmoid, Scale: l.Scale, Temp: l.Temp, Offset: l.Offset}
			default:
				return nil, cur, cpuOnly
			}
		case *nn.Pool2d:
			n.kind = nodeMaxPool
			if l.Avg {
				n.kind = nodeAvgPool
			}
			n.win = cuda.Window{C: cur.C, H: cur.H, W: cur.W, K: l.Kernel, S: l.Stride}
		case *nn.Flatten:
			n.kind = nodeFlatten
		case *nn.Embedding:
			// It reads the raw ids: the model's first layer only (engine/nn builds no other).
			if prefix != "" || i != 0 || cur.Layout != nn.Flat {
				return nil, cur, cpuOnly
			}
			n.kind, n.vocab, n.other = nodeEmbed, l.Vocab, o0
		case *nn.Norm:
			n.kind, n.groups, n.other = nodeNorm, l.Groups, o0
			if l.Layer {
				// A layernorm on the row layout normalizes each position over its channels;
				// the backend's normalizes each example as one group.
				if cur.Layout != nn.Flat {
					return nil, cur, cpuOnly
				}
				n.groups = 1
			}
		default:
			return nil, cur, cpuOnly
		}
		out, err := l.Plan(cur, d)
		if err != nil {
			return nil, cur, fmt.Errorf("layer %s: %w", n.name, err)
		}
		if n.kind == nodeGemm {
			if len(d.Gemm) != g0+1 {
				return nil, cur, fmt.Errorf("layer %s: declared %d GEMM layers, want 1", n.name, len(d.Gemm)-g0)
			}
			n.gemm = g0
		} else if n.kind == nodeEmbed {
			if len(d.Gemm) != g0 || len(d.Other) != o0+1 || d.Other[o0].Rows != n.vocab {
				return nil, cur, cpuOnly
			}
		} else if n.kind == nodeNorm {
			if len(d.Gemm) != g0 || len(d.Other) != o0+2 || d.Other[o0].Cols != cur.C || d.Other[o0+1].Cols != cur.C || n.groups < 1 || cur.C%n.groups != 0 {
				return nil, cur, cpuOnly
			}
		} else if len(d.Gemm) != g0 || len(d.Other) != o0 {
			return nil, cur, cpuOnly
		}
		n.out = out
		nodes = append(nodes, n)
		cur = out
	}
	return nodes, cur, nil
}

// allocNodes gives the nodes their device memory: x is the first node's input, dx the error at
// it (the zero Buffer: not needed); it returns the last node's output and its error.
func (b *cudaBackend) allocNodes(nodes []*cudaNode, x, dx cuda.Buffer, a func(int) cuda.Buffer) (y, dy cuda.Buffer) {
	p := b.phys
	for _, n := range nodes {
		n.x, n.dx = x, dx
		size := p * n.out.Size() * 4
		own := func() cuda.Buffer {
			if dx == (cuda.Buffer{}) {
				return a(size)
			}
			return dx
		}
		switch n.kind {
		case nodeGemm:
			l := b.layers[n.gemm]
			n.y, n.dy = l.z, l.e
			l.a = x
			if l.conv != nil {
				l.a = l.conv.a
				if dx != (cuda.Buffer{}) {
					l.conv.dpatch = a(p * l.rows * l.in * 4)
				}
			}
		case nodeAct, nodePoint:
			n.y, n.dy = a(size), own()
		case nodeMaxPool, nodeAvgPool:
			n.y, n.dy = a(size), a(size)
			if n.kind == nodeMaxPool {
				n.idx = a(size)
			}
		case nodeFlatten:
			n.y, n.dy = x, own()
		case nodeNorm:
			c := n.out.C
			n.y, n.dy, n.xh, n.gx = a(size), a(size), a(size), a(size)
			n.mat, n.acc = a(p*2*c*8), a(2*c*8)
			if n.acc != (cuda.Buffer{}) {
				b.others[n.other].acc, b.others[n.other+1].acc = n.acc.Sub(0, c*8), n.acc.Sub(c*8, c*8)
			}
			b.norms = append(b.norms, n)
		case nodeEmbed:
			n.y, n.dy, n.acc = a(size), a(size), a(n.vocab*n.out.C*8)
			b.others[n.other].acc = n.acc
			b.embeds = append(b.embeds, n)
		case nodeResidual:
			if dx != (cuda.Buffer{}) {
				n.bodyDx = a(size)
			}
			b.allocNodes(n.body, x, n.bodyDx, a)
			n.y, n.dy = a(size), a(size)
		}
		x, dx = n.y, n.dy
	}
	return x, dx
}

// forward runs the nodes' forward pass: a GEMM layer's Z = A·W + b (its A the patch matrix of
// a convolution's input), the functions, the poolings, a block's x + body(x).
func (b *cudaBackend) forward(nodes []*cudaNode) error {
	d, p := b.d, b.phys
	for _, n := range nodes {
		var err error
		switch n.kind {
		case nodeGemm:
			l := b.layers[n.gemm]
			if cv := l.conv; cv != nil {
				if err := d.Im2Col(cv.a, n.x, p, cv.win, n.chw); err != nil {
					return err
				}
			}
			err = firstErr(b.gemmForward(l, l.a, p*l.rows), d.BiasAdd(l.z, l.b, p*l.rows, l.out))
		case nodeAct:
			err = d.Activate(n.y, n.x, p*n.out.Size(), n.tanh)
		case nodePoint:
			err = d.Point(n.y, n.x, p*n.out.Size(), n.point)
		case nodeMaxPool:
			err = d.MaxPool(n.y, n.idx, n.x, p, n.win)
		case nodeAvgPool:
			err = d.AvgPool(n.y, n.x, p, n.win)
		case nodeEmbed:
			err = d.Embed(n.y, n.x, b.others[n.other].w, p, n.in.C, n.vocab, n.out.C)
		case nodeNorm:
			rows, c := n.out.Positions(), n.out.C
			err = firstErr(d.Norm(n.xh, n.x, p, rows, c, n.groups), d.Affine(n.y, n.xh, b.others[n.other].w, b.others[n.other+1].w, p*rows, c))
		case nodeResidual:
			err = b.forward(n.body)
			if err == nil {
				err = d.AddF32(n.y, n.x, n.body[len(n.body)-1].y, p*n.out.Size())
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// backward runs the nodes' backward pass from the error at the last node's output: each node
// sets the error at its input when it is needed (dx); pointwise nodes multiply it in place.
func (b *cudaBackend) backward(nodes []*cudaNode) error {
	d, p := b.d, b.phys
	for k := len(nodes) - 1; k >= 0; k-- {
		n := nodes[k]
		if n.dx == (cuda.Buffer{}) && n.kind != nodeResidual {
			continue
		}
		var err error
		switch n.kind {
		case nodeGemm:
			l := b.layers[n.gemm]
			if cv := l.conv; cv != nil {
				err = firstErr(b.gemmBackward(l, cv.dpatch), d.Col2Im(n.dx, cv.dpatch, p, cv.win))
			} else {
				err = b.gemmBackward(l, n.dx)
			}
		case nodeAct:
			err = d.ActivateBackward(n.dx, n.x, n.y, p*n.out.Size(), n.tanh)
		case nodePoint:
			err = d.PointBackward(n.dx, n.x, p*n.out.Size(), n.point)
		case nodeMaxPool:
			err = d.MaxPoolBackward(n.dx, n.dy, n.idx, p, n.win)
		case nodeAvgPool:
			err = d.AvgPoolBackward(n.dx, n.dy, p, n.win)
		case nodeNorm:
			// The error at x̂ is e⊙γ; the error at x, normOp's gradient. The materialized
			// per-example gradients read e (dy) later.
			rows, c := n.out.Positions(), n.out.C
			err = firstErr(d.Affine(n.gx, n.dy, b.others[n.other].w, cuda.Buffer{}, p*rows, c), d.NormBackward(n.dx, n.x, n.gx, p, rows, c, n.groups))
		case nodeResidual:
			// The body's output error is the block's (copied: a pointwise last layer works in
			// place); the error at the block's input is the body's plus the skip's.
			last := n.body[len(n.body)-1]
			bytes := p * n.out.Size() * 4
			if err = firstErr(d.Copy(last.dy, n.dy, bytes), b.backward(n.body)); err == nil && n.dx != (cuda.Buffer{}) {
				err = d.AddF32(n.dx, n.bodyDx, n.dy, p*n.out.Size())
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}
