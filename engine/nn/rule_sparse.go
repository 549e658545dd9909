package nn

import (
	"slices"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The sparse rule, for an embedding table (Embedding). Example i's gradient of the V×D table is
// nonzero only in the rows of its own ids: row v is Σ_{t: id_t = v} e_t over its L positions, e
// = ∂L/∂out. Its squared norm is Σ_v ‖Σ_{t: id_t = v} e_t‖² = Σ_{t,t'} [id_t = id_t']·(e_t·e_t')
// (the ghost norm of a one-hot input), computed from the example's L ids and errors without
// touching the table; the clipped sum adds cᵢ times each of those grouped rows, in float64: the
// vector measured is the vector summed.

// sparseNode is a sparse rule registered while building.
type sparseNode struct {
	name          string
	param         int
	out           *G.Node
	l, vocab, dim int
}

// SparseTap is the sparse rule of one embedding layer after a training Run: its parameter
// (Param, an index into Params.List) is the Vocab×Dim table.
type SparseTap struct {
	Name  string
	Param int
	L     int // ids per example
	Vocab int
	Dim   int

	x    *tensor.Dense // the graph input: the ids
	eVal G.Value
	e    []float64
	ids  []int     // B·L ids, −1 for none
	ord  []int     // scratch
	row  []float64 // scratch
}

// SparseTaps lists the sparse rules' taps of the last Run (training nets only).
func (n *Net) SparseTaps() []*SparseTap { return n.sparse }

func (t *SparseTap) load() {
	t.e = widen(t.eVal)
	xs := widen(t.x)
	t.ids = t.ids[:0]
	for _, v := range xs {
		t.ids = append(t.ids, tokenID(v, t.Vocab))
	}
}

// Rows returns example i's valid positions: their ids and their error rows (Dim values each,
// float64, the tap's own memory).
func (t *SparseTap) Rows(i int) (ids []int, e [][]float64) {
	for p := i * t.L; p < (i+1)*t.L; p++ {
		if id := t.ids[p]; id >= 0 {
			ids = append(ids, id)
			e = append(e, t.e[p*t.Dim:(p+1)*t.Dim])
		}
	}
	return ids, e
}

// grouped calls f with each id of example i's valid positions, in increasing id order, and
// row, example i's gradient of that table row: Σ_{t: id_t = id} e_t in float64, in position
// order (scratch memory, valid until f returns).
func (t *SparseTap) grouped(i int, f func(id int, row []float64)) {
	t.ord = t.ord[:0]
	for p := i * t.L; p < (i+1)*t.L; p++ {
		if t.ids[p] >= 0 {
			t.ord = append(t.ord, p)
		}
	}
	slices.SortStableFunc(t.ord, func(a, b int) int { return t.ids[a] - t.ids[b] })
	if cap(t.row) < t.Dim {
		t.row = make([]float64, t.Dim)
	}
	row := t.row[:t.Dim]
	for k := 0; k < len(t.ord); {
		id := t.ids[t.ord[k]]
		clear(row)
		for ; k < len(t.ord) && t.ids[t.ord[k]] == id; k++ {
			p := t.ord[k]
			for j, v := range t.e[p*t.Dim : (p+1)*t.Dim] {
				row[j] += v
			}
		}
		f(id, row)
	}
}

// Norm2 is ‖example i's table gradient‖²: its rows' sums grouped by id, in float64.
func (t *SparseTap) Norm2(i int) float64 {
	var s float64
	t.grouped(i, func(_ int, row []float64) {
		for _, v := range row {
			s += v * v
		}
	})
	return s
}

// AddClipped adds c times example i's table gradient into dst (Vocab×Dim, row-major): c times
// each row Norm2 measured, the rows grouped by id before the scaling. Adding c·e_t position by
// position instead would let an example whose positions share an id with opposite errors
// (their sum, hence its norm, small; each alone as large as the weights make it) round the
// other examples' contributions in those rows away, moving the sum by more than the clip norm.
func (t *SparseTap) AddClipped(dst []float64, i int, c float64) {
	t.grouped(i, func(id int, row []float64) {
		d := dst[id*t.Dim : (id+1)*t.Dim]
		for j, v := range row {
			d[j] += c * v
		}
	})
}
