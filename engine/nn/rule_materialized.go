package nn

import (
	G "gorgonia.org/gorgonia"
)

// MatGradFunc writes example i's gradient of a layer's parameters into dst (its Width values)
// from the last Run's values of the layer's taps and of e = ∂L/∂out at its output, each the
// whole batch's values, row-major, widened to float64.
type MatGradFunc func(dst []float64, i int, taps [][]float64, e []float64)

// matNode is a materialized rule registered while building.
type matNode struct {
	name   string
	params []int
	width  int
	out    *G.Node
	taps   []*G.Node
	grad   MatGradFunc
	prep   func() // optional: called once per Run before the examples (Builder.MaterializePrepared)
}

// MatTap is the materialized per-example rule of one layer, the generic fallback any layer may
// declare (Builder.Materialize): after a training Run, Example writes example i's gradient with
// respect to the layer's parameters (Params, indices into Params.List, concatenated in that
// order: Width values). The DP step takes each row's squared norm into the example's norm and
// adds Σᵢ cᵢ·gᵢ, in float64, over the examples with cᵢ > 0 — the vector measured is the vector
// summed, as for a materialized convolution.
type MatTap struct {
	Name   string
	Params []int
	Width  int

	grad   MatGradFunc
	prep   func()
	tapVal []G.Value
	eVal   G.Value
	taps   [][]float64
	e      []float64
}

// load widens the last Run's values to float64 (once per Run).
func (t *MatTap) load() {
	if len(t.taps) != len(t.tapVal) {
		t.taps = make([][]float64, len(t.tapVal))
	}
	for k, v := range t.tapVal {
		t.taps[k] = widenInto(t.taps[k], v)
	}
	t.e = widenInto(t.e, t.eVal)
	if t.prep != nil {
		t.prep()
	}
}

// Example writes example i's gradient into dst[:Width].
func (t *MatTap) Example(dst []float64, i int) { t.grad(dst[:t.Width], i, t.taps, t.e) }

// MatTaps lists the materialized rules' taps of the last Run (training nets only).
func (n *Net) MatTaps() []*MatTap { return n.mats }

// widenInto is widen reusing dst's storage for float32 data (the widened taps of every Run are
// as large as the layer's inputs: a convolution's patch matrix).
func widenInto(dst []float64, v G.Value) []float64 {
	d, ok := v.Data().([]float32)
	if !ok {
		return widen(v)
	}
	if cap(dst) < len(d) {
		dst = make([]float64, len(d))
	}
	dst = dst[:len(d)]
	for j, x := range d {
		dst[j] = float64(x)
	}
	return dst
}

// widen returns a value's backing slice as float64 values (float64 data itself, float32 data
// converted).
func widen(v G.Value) []float64 {
	switch d := v.Data().(type) {
	case []float64:
		return d
	case []float32:
		out := make([]float64, len(d))
		for j, x := range d {
			out[j] = float64(x)
		}
		return out
	case float64:
		return []float64{d}
	case float32:
		return []float64{float64(d)}
	}
	return nil
}
