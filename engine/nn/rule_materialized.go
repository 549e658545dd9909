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
	tapVal []G.Value
	eVal   G.Value
	taps   [][]float64
	e      []float64
}

// load widens the last Run's values to float64 (once per Run).
func (t *MatTap) load() {
	t.taps = t.taps[:0]
	for _, v := range t.tapVal {
		t.taps = append(t.taps, widen(v))
	}
	t.e = widen(t.eVal)
}

// Example writes example i's gradient into dst[:Width].
func (t *MatTap) Example(dst []float64, i int) { t.grad(dst[:t.Width], i, t.taps, t.e) }

// MatTaps lists the materialized rules' taps of the last Run (training nets only).
func (n *Net) MatTaps() []*MatTap { return n.mats }

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
