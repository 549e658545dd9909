package nn

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	"github.com/dpsgd/dpsgd/internal/seedmix"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Dropout zeroes each value of a training net's activation with probability Rate and scales
// the others by 1/(1 − Rate) (inverted dropout), so that evaluation and prediction nets, where
// it is the identity, need no scaling.
//
// Masks are drawn per example: row i of a physical batch reads its mask from its own 64-bit
// seed (Net.SetDropoutSeeds), which the engine derives from the run's seeded stream, the step
// and the example's index in the dataset (DropoutSeed). An example's mask therefore depends on
// neither the other examples of the batch nor its position: with every mask fixed, example i's
// outputs, error and clipped gradient are functions of example i alone, so removing an example
// removes its one clipped term (norm ≤ C) and leaves every other term unchanged — the
// per-example sensitivity DP-SGD's analysis uses. The masks are randomness independent of the
// data, like the noise; a run is reproducible from its seed.
type Dropout struct {
	Rate float64
}

// Kind is "dropout".
func (l *Dropout) Kind() string { return "dropout" }

// Plan checks the rate and keeps the shape.
func (l *Dropout) Plan(in Shape, _ *Decl) (Shape, error) {
	if !(l.Rate >= 0 && l.Rate < 1) {
		return Shape{}, fmt.Errorf("rate = %g: want 0 ≤ rate < 1", l.Rate)
	}
	if in.Layout == Image {
		return Shape{}, fmt.Errorf("dropout on the raw image: put a conv2d or flatten first")
	}
	return in, nil
}

// Forward applies the mask in a training net (its gradient applies the same mask), and is the
// identity in an evaluation net.
func (l *Dropout) Forward(b *Builder, x *G.Node, in Shape) (*G.Node, error) {
	if !b.net.train || l.Rate == 0 {
		return x, nil
	}
	op := &dropOp{b: b.Batch(), per: in.Size(), rate: l.Rate, layer: b.dropouts, net: b.net}
	b.dropouts++
	b.net.dropout = true
	return G.ApplyOp(op, x)
}

// DropoutSeed is the seed of the dropout masks of the example at index in the dataset, in the
// step whose dropout seed is step.
func DropoutSeed(step uint64, index int) uint64 { return seedmix.Mix(step, uint64(index)) }

// HasDropout reports whether the training net applies dropout (and needs SetDropoutSeeds
// before every Run).
func (n *Net) HasDropout() bool { return n.dropout }

// SetDropoutSeeds sets the seed of each row's dropout masks for the next Runs (one per row of
// the physical batch; DropoutSeed).
func (n *Net) SetDropoutSeeds(seeds []uint64) error {
	if len(seeds) != n.Batch {
		return fmt.Errorf("nn: %d dropout seeds for a batch of %d", len(seeds), n.Batch)
	}
	n.dropSeeds = append(n.dropSeeds[:0], seeds...)
	return nil
}

// SetDropoutSeeds sets the oracle's dropout seed (one: its batch is one example).
func (o *GradOracle) SetDropoutSeeds(seeds []uint64) error { return o.net.SetDropoutSeeds(seeds) }

// dropKeep reports whether value e of an example's activation in dropout layer layer is kept,
// for the example's seed: a SplitMix64 draw u in [0, 1) (53 bits), kept when u ≥ rate.
func dropKeep(seed uint64, layer, e int, rate float64) bool {
	u := float64(seedmix.Mix(seed, uint64(layer)<<40|uint64(e))>>11) * 0x1p-53
	return u >= rate
}

// dropOp multiplies each example's per values by its mask over 1 − rate (a dropped value is
// set to 0, whatever it was). It is linear and diagonal, so its gradient is the same op applied
// to ∂L/∂y; both read the net's seeds of the current Run.
type dropOp struct {
	opBase
	b, per int
	rate   float64
	layer  int
	net    *Net
}

func (op *dropOp) Arity() int    { return 1 }
func (op *dropOp) Type() hm.Type { return tensorFnType(2, 1) }

func (op *dropOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if len(in) == 1 {
		if s, ok := in[0].(tensor.Shape); ok {
			return s.Clone(), nil
		}
	}
	return tensor.Shape{op.b, op.per}, nil
}

func (op *dropOp) Do(inputs ...G.Value) (G.Value, error) {
	if len(inputs) != 1 {
		return nil, fmt.Errorf("%v: %d inputs, want 1", op, len(inputs))
	}
	out := tensor.New(tensor.Of(inputs[0].Dtype()), tensor.WithShape(inputs[0].Shape().Clone()...))
	return op.UsePreallocDo(out, inputs...)
}

func (op *dropOp) UsePreallocDo(prealloc G.Value, inputs ...G.Value) (G.Value, error) {
	if len(op.net.dropSeeds) != op.b {
		return nil, fmt.Errorf("%v: no dropout seeds set for the batch (Net.SetDropoutSeeds)", op)
	}
	return preallocDo(op, prealloc, inputs, []int{op.b * op.per}, dropKernel[float32], dropKernel[float64])
}

func dropKernel[T float32 | float64](op *dropOp, out []T, in [][]T) {
	scale := 1 / (1 - op.rate)
	seeds := op.net.dropSeeds
	parallelExamples(op.b, func(i int) {
		o, x := out[i*op.per:(i+1)*op.per], in[0][i*op.per:(i+1)*op.per]
		for e, v := range x {
			if dropKeep(seeds[i], op.layer, e, op.rate) {
				o[e] = T(float64(v) * scale)
			} else {
				o[e] = 0
			}
		}
	})
}

func (op *dropOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *dropOp) Hashcode() uint32      { return hashOf(op) }
func (op *dropOp) String() string {
	return fmt.Sprintf("Dropout{b=%d per=%d p=%v layer=%d}", op.b, op.per, op.rate, op.layer)
}
func (op *dropOp) DiffWRT(int) []bool { return []bool{true} }

func (op *dropOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	g, err := G.ApplyOp(op, grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{g}, nil
}
