package nn

// The convolutional part of a model as plain functions: the geometry of each convolution and
// the row-layout data movements the graphs run (im2col.go, rowsop.go), on slices. Other
// backends (the CUDA backend, engine/backend_cuda.go) take the geometry from here, and test
// their own kernels against these functions.

// ConvLayout is one convolution layer's geometry: its input of InC channels on InH×InW
// positions (a C×H×W image for the first, the previous layer's pooled output in the row layout
// for a later one), OutH×OutW positions after the convolution (the layer's Positions) and
// PoolH×PoolW after its max pooling (OutH×OutW without pooling).
type ConvLayout struct {
	InC, InH, InW int
	OutH, OutW    int
	PoolH, PoolW  int
	Spec          ConvSpec
}

// ConvLayouts lists the geometry of a's convolution layers, in order (none for a dense model).
func (a Arch) ConvLayouts() ([]ConvLayout, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	if len(a.Conv) == 0 {
		return nil, nil
	}
	geo, err := a.convShapes()
	if err != nil {
		return nil, err
	}
	out := make([]ConvLayout, len(geo))
	for i, g := range geo {
		out[i] = ConvLayout{InC: g.inC, InH: g.inH, InW: g.inW, OutH: g.outH, OutW: g.outW, PoolH: g.poolH, PoolW: g.poolW, Spec: g.spec}
	}
	return out, nil
}

func (l ConvLayout) geom() convGeom {
	k := l.Spec.Kernel
	return convGeom{inC: l.InC, inH: l.InH, inW: l.InW, outH: l.OutH, outW: l.OutW, poolH: l.PoolH, poolW: l.PoolW,
		patch: l.InC * k * k, filters: l.Spec.Filters, spec: l.Spec, positions: l.OutH * l.OutW,
		flatAfterPooling: l.Spec.Filters * l.PoolH * l.PoolW}
}

func (l ConvLayout) patchesOp(b int) *rowsOp {
	s := l.Spec
	return newRowsOp(false, b, l.InH, l.InW, l.InC, s.Kernel, s.Stride, s.Pad)
}

func (l ConvLayout) poolOp(b int) *rowsOp {
	s := l.Spec
	return newRowsOp(true, b, l.OutH, l.OutW, s.Filters, s.PoolKernel, s.PoolStride, 0)
}

// Im2Col writes the patch matrix of the b images x (each InC×InH×InW, as a dataset row) into
// dst ((b·OutH·OutW) × InC·k·k, columns ordered channel, kernel row, kernel column): what
// Net.Run does before the graph for the first convolution.
func Im2Col[T float32 | float64](dst, x []T, b int, l ConvLayout) {
	g := l.geom()
	parallelExamples(b, func(i int) { im2colOne(dst, x, i, g) })
}

// Patches writes the patch matrix of the row-layout input x ((b·InH·InW) × InC) into dst
// ((b·OutH·OutW) × k·k·InC, columns ordered kernel row, kernel column, channel): a later
// convolution's patches op.
func Patches[T float32 | float64](dst, x []T, b int, l ConvLayout) {
	rowsForward(l.patchesOp(b), dst, x)
}

// PatchesGrad sets dx ((b·InH·InW) × InC) to the gradient of Patches given the patch matrix's
// gradient dy: every entry added back to the value it was copied from (the graph's gradient op).
func PatchesGrad[T float32 | float64](dx, dy []T, b int, l ConvLayout) {
	rowsBackward(l.patchesOp(b), dx, nil, dy)
}

// Pool writes the max pooling of the row-layout convolution output x ((b·OutH·OutW) × Filters)
// into dst ((b·PoolH·PoolW) × Filters). l must pool (Spec.PoolKernel > 0).
func Pool[T float32 | float64](dst, x []T, b int, l ConvLayout) { rowsForward(l.poolOp(b), dst, x) }

// PoolGrad sets dx ((b·OutH·OutW) × Filters) to the gradient of Pool at x given dy
// ((b·PoolH·PoolW) × Filters): each window's gradient routed to its first maximum.
func PoolGrad[T float32 | float64](dx, x, dy []T, b int, l ConvLayout) {
	rowsBackward(l.poolOp(b), dx, x, dy)
}
