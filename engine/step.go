package engine

import (
	"fmt"
	"math"
	"sync"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/engine/sampler"
	"github.com/dpsgd/dpsgd/kernels"
	"gorgonia.org/tensor"
)

// replica is one compiled training graph at the physical batch size with its own buffers.
// Replicas process the physical batches of a logical step concurrently (physical batch j goes
// to replica j mod R, and each replica sums its batches in order), so a step's result does not
// depend on scheduling: sums are combined replica by replica in a fixed order.
type replica[T kernels.Float] struct {
	net  *nn.Net
	x, y *tensor.Dense
	mask []float64

	norm2, coef, rowCoef []float64
	asq, esq             []float64
	grads                [][]T // this replica's clipped sums, one per parameter
	tmp                  [][]T // one physical batch's clipped sums
	scratch              []T
	gi                   []T // one example's gradient of a convolution layer

	loss      float64
	correct   int
	count     int
	nonFinite int
	clipped   int
}

func newReplica[T kernels.Float](arch nn.Arch, params *nn.Params, phys int) (*replica[T], error) {
	net, err := nn.Build(arch, params, phys, true)
	if err != nil {
		return nil, err
	}
	dt := params.Dtype
	xshape := []int{phys, arch.InputSize()}
	if len(arch.Conv) > 0 {
		xshape = append([]int{phys}, arch.Input...)
	}
	r := &replica[T]{
		net:   net,
		x:     tensor.New(tensor.WithShape(xshape...), tensor.Of(dt)),
		y:     tensor.New(tensor.WithShape(phys, arch.Classes), tensor.Of(dt)),
		mask:  make([]float64, phys),
		norm2: make([]float64, phys), coef: make([]float64, phys),
		asq: make([]float64, phys), esq: make([]float64, phys),
	}
	maxRows, maxScratch, maxGi := 0, 0, 0
	for _, l := range params.Shapes {
		rows := phys * l.Positions
		maxRows = max(maxRows, rows)
		maxScratch = max(maxScratch, rows*l.Out)
		if l.Positions > 1 {
			maxGi = max(maxGi, (l.In+1)*l.Out)
		}
	}
	r.rowCoef = make([]float64, maxRows)
	r.scratch = make([]T, maxScratch)
	r.gi = make([]T, maxGi)
	for _, p := range params.List {
		n := p.Value.Shape().TotalSize()
		r.grads = append(r.grads, make([]T, n))
		r.tmp = append(r.tmp, make([]T, n))
	}
	return r, nil
}

func (r *replica[T]) reset() {
	for _, g := range r.grads {
		clear(g)
	}
	r.loss, r.correct, r.count, r.nonFinite, r.clipped = 0, 0, 0, 0, 0
}

// fill copies the examples rows[i] (masked by mask[i]) into the replica's x and y.
func (r *replica[T]) fill(ds *datasets.Dataset, rows []int, mask []float64) {
	x := r.x.Data().([]T)
	y := r.y.Data().([]T)
	d, k := ds.D, ds.Classes
	clear(y)
	for i, idx := range rows {
		xi := x[i*d : (i+1)*d]
		if mask[i] == 0 {
			clear(xi)
			continue
		}
		src := ds.X[idx*d : (idx+1)*d]
		for j, v := range src {
			xi[j] = T(v)
		}
		y[i*k+ds.Y[idx]] = 1
	}
	copy(r.mask, mask)
}

// physical runs one physical batch through the graph and adds its clipped per-example
// gradients into r.grads (DESIGN.md steps 2–5).
func (r *replica[T]) physical(ds *datasets.Dataset, rows []int, mask []float64, clip float64) error {
	r.fill(ds, rows, mask)
	if err := r.net.Run(r.x, r.y); err != nil {
		return err
	}
	b := len(rows)
	clear(r.norm2)
	taps := r.net.Taps()
	for _, t := range taps {
		a := t.A().Data().([]T)
		e := t.E().Data().([]T)
		s := t.Shape
		if s.Positions == 1 {
			kernels.RowSqNorms(r.asq, a, b, s.In)
			kernels.RowSqNorms(r.esq, e, b, s.Out)
			kernels.GhostAccum(r.norm2, r.asq, r.esq, true)
			continue
		}
		convSqNorms(r.norm2, a, e, b, s, r.gi)
	}
	r.nonFinite += kernels.ClipCoefs(r.coef, r.norm2, r.mask, clip)
	for i := range b {
		if r.mask[i] != 0 && r.coef[i] < 1 {
			r.clipped++
		}
	}
	for li, t := range taps {
		s := t.Shape
		rows := b * s.Positions
		rc := r.coef[:b]
		if s.Positions > 1 {
			rc = r.rowCoef[:rows]
			for i := range b {
				c := r.coef[i]
				for p := range s.Positions {
					rc[i*s.Positions+p] = c
				}
			}
		}
		wi, bi := 2*li, 2*li+1
		kernels.ClippedSum(r.tmp[wi], r.tmp[bi], t.A().Data().([]T), t.E().Data().([]T), rows, s.In, s.Out, rc, r.scratch)
		addInto(r.grads[wi], r.tmp[wi])
		addInto(r.grads[bi], r.tmp[bi])
	}
	r.loss += r.net.Loss()
	r.correct += countCorrect(r.net.Logits().Data().([]T), r.y.Data().([]T), r.mask, ds.Classes)
	for _, m := range r.mask {
		if m != 0 {
			r.count++
		}
	}
	return nil
}

// convSqNorms adds to norm2[i] the squared norm of example i's gradient of one convolution
// layer, Gᵢ = [Aᵢ, 1]ᵀ·Eᵢ over its P rows, materialized one example at a time in gi (the
// layer is small; its per-example gradient is In·Out values).
func convSqNorms[T kernels.Float](norm2 []float64, a, e []T, b int, s nn.LayerShape, gi []T) {
	p, d, h := s.Positions, s.In, s.Out
	w := gi[:d*h]
	bias := gi[d*h : (d+1)*h]
	for i := range b {
		ai := a[i*p*d : (i+1)*p*d]
		ei := e[i*p*h : (i+1)*p*h]
		kernels.Gemm(true, false, d, h, p, 1, ai, d, ei, h, 0, w, h)
		clear(bias)
		for r := range p {
			row := ei[r*h : (r+1)*h]
			for j, v := range row {
				bias[j] += v
			}
		}
		var sq float64
		for _, v := range gi[:(d+1)*h] {
			sq += float64(v) * float64(v)
		}
		norm2[i] += sq
	}
}

func addInto[T kernels.Float](dst, src []T) {
	for i, v := range src {
		dst[i] += v
	}
}

func countCorrect[T kernels.Float](logits, y []T, mask []float64, k int) int {
	n := 0
	for i, m := range mask {
		if m == 0 {
			continue
		}
		if argmax(logits[i*k:(i+1)*k]) == argmax(y[i*k:(i+1)*k]) {
			n++
		}
	}
	return n
}

func argmax[T kernels.Float](v []T) int {
	best := 0
	for j := 1; j < len(v); j++ {
		if v[j] > v[best] {
			best = j
		}
	}
	return best
}

// StepStats describes one logical step.
type StepStats struct {
	BatchSize int     // real examples in the logical batch
	Loss      float64 // summed loss over the batch
	Correct   int     // training examples classified correctly (before the update)
	NonFinite int     // examples whose gradient was not finite: zeroed, never applied
	Clipped   int     // examples whose gradient norm exceeded the clip norm
}

// gradStep computes the summed clipped gradient of one logical batch into grads.
func gradStep[T kernels.Float](reps []*replica[T], ds *datasets.Dataset, idx []int, phys int, clip float64, grads [][]T, rowsBuf []int, maskBuf []float64) (StepStats, error) {
	rows, mask, k := sampler.Chunks(idx, phys, rowsBuf, maskBuf)
	for _, r := range reps {
		r.reset()
	}
	var wg sync.WaitGroup
	errs := make([]error, len(reps))
	for ri, r := range reps {
		if ri >= k {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := ri; j < k; j += len(reps) {
				if err := r.physical(ds, rows[j*phys:(j+1)*phys], mask[j*phys:(j+1)*phys], clip); err != nil {
					errs[ri] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return StepStats{}, err
		}
	}
	var st StepStats
	for pi, g := range grads {
		clear(g)
		for ri, r := range reps {
			if ri >= k {
				break
			}
			addInto(g, r.grads[pi])
		}
	}
	for ri, r := range reps {
		if ri >= k {
			break
		}
		st.Loss += r.loss
		st.Correct += r.correct
		st.BatchSize += r.count
		st.NonFinite += r.nonFinite
		st.Clipped += r.clipped
	}
	return st, nil
}

// checkFinite reports the first non-finite value in the gradients (an error wrapping
// ErrDiverged: an overflow of the clipped sum or the noise), which would otherwise be a bug:
// non-finite examples are zeroed before the sum.
func checkFinite[T kernels.Float](grads [][]T) error {
	for pi, g := range grads {
		for j, v := range g {
			f := float64(v)
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Errorf("engine: %w: non-finite clipped gradient in parameter %d at %d", ErrDiverged, pi, j)
			}
		}
	}
	return nil
}
