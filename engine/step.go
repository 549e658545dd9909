package engine

import (
	"fmt"
	"math"
	"sync"
	"unsafe"

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

	norm2, coef []float64
	asq, esq    []float64
	grads       [][]float64 // this replica's clipped sums, one per parameter
	tmp         [][]float64 // one physical batch's clipped sums
	scratch     []T
	wide        []float64 // kernels.ClippedSumWide's float64 copies (float32 T)
	// conv holds, per layer, the physical batch's per-example gradients of a convolution
	// layer (nil for a dense layer): example i's (In+1)·Out values at i·(In+1)·Out
	// (convGrads).
	conv [][]T
	// mat holds, per materialized rule (nn.MatTap), the physical batch's per-example gradients
	// of the layer's parameters: example i's Width values at i·Width.
	mat [][]float64
	// ug is one user's gradient, per parameter, and uwA, uwE its dense layers' rows widened
	// to float64 (user-level steps only: physicalUsers).
	ug       [][]float64
	uwA, uwE []float64

	loss      float64
	correct   int
	count     int
	nonFinite int
	clipped   int

	// dropStep is the step's dropout seed (dropoutStepSeed) and seeds the rows' dropout
	// seeds, for a net with dropout layers.
	dropStep uint64
	seeds    []uint64
	// feats, when the model's first layer is a scatter layer, holds the datasets' features;
	// fx is then the physical batch's (scatter_feats.go).
	feats *nn.FeatureCache
	fx    *tensor.Dense

	// inspect, when set (tests only), is called at the end of each physical batch with the
	// batch's dataset rows and mask, while the replica's taps and coefficients are those of
	// the batch. It runs on the replica's goroutine.
	inspect func(r *replica[T], rows []int, mask []float64)
}

func newReplica[T kernels.Float](arch nn.Arch, params *nn.Params, phys int) (*replica[T], error) {
	net, err := nn.Build(arch, params, phys, true)
	if err != nil {
		return nil, err
	}
	dt := params.Dtype
	xshape := []int{phys, arch.InputSize()}
	if arch.ImageInput() {
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
	maxScratch, maxWide := 0, 0
	for _, l := range params.Shapes {
		if l.Positions > 1 {
			r.conv = append(r.conv, make([]T, phys*(l.In+1)*l.Out))
			continue
		}
		r.conv = append(r.conv, nil)
		maxScratch = max(maxScratch, phys*l.Out)
		maxWide = max(maxWide, phys*(l.In+l.Out))
	}
	r.scratch = make([]T, maxScratch)
	if u, _ := unitRoundoff[T](); u > 0x1p-53 {
		r.wide = make([]float64, maxWide)
	}
	for _, t := range net.MatTaps() {
		r.mat = append(r.mat, make([]float64, phys*t.Width))
	}
	for _, p := range params.List {
		n := p.Value.Shape().TotalSize()
		r.grads = append(r.grads, make([]float64, n))
		r.tmp = append(r.tmp, make([]float64, n))
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
	dsX := ds.X
	if r.feats != nil {
		x, d, dsX = r.fx.Data().([]T), r.feats.Width(), r.feats.Of(ds.X, ds.N)
	}
	clear(y)
	for i, idx := range rows {
		xi := x[i*d : (i+1)*d]
		if mask[i] == 0 {
			clear(xi)
			continue
		}
		src := dsX[idx*d : (idx+1)*d]
		for j, v := range src {
			xi[j] = T(v)
		}
		y[i*k+ds.Y[idx]] = 1
	}
	copy(r.mask, mask)
}

// physical runs one physical batch through the graph and adds its clipped per-example
// gradients into r.grads (docs/design.md steps 2–5). The sums are float64 whatever T is: see
// gradStep.
func (r *replica[T]) physical(ds *datasets.Dataset, rows []int, mask []float64, clip float64) error {
	r.fill(ds, rows, mask)
	if err := r.setDropoutSeeds(rows); err != nil {
		return err
	}
	if err := r.runNet(); err != nil {
		return err
	}
	b := len(rows)
	clear(r.norm2)
	taps := r.net.Taps()
	for li, t := range taps {
		a := t.A().Data().([]T)
		e := t.E().Data().([]T)
		s := t.Shape
		if s.Positions == 1 {
			kernels.RowSqNorms(r.asq, a, b, s.In)
			kernels.RowSqNorms(r.esq, e, b, s.Out)
			kernels.GhostAccum(r.norm2, r.asq, r.esq, true)
			continue
		}
		convGrads(r.norm2, r.conv[li], a, e, b, s)
	}
	mats := r.net.MatTaps()
	for k, t := range mats {
		matGrads(r.norm2, r.mat[k], t, b)
	}
	sparse := r.net.SparseTaps()
	for _, t := range sparse {
		for i := range b {
			r.norm2[i] += t.Norm2(i)
		}
	}
	r.nonFinite += kernels.ClipCoefs(r.coef, r.norm2, r.mask, clip)
	for i := range b {
		if r.mask[i] != 0 && r.coef[i] < 1 {
			r.clipped++
		}
	}
	for li, t := range taps {
		s := t.Shape
		wi, bi := 2*li, 2*li+1
		if s.Positions > 1 {
			convClippedSum(r.tmp[wi], r.tmp[bi], r.conv[li], r.coef[:b], s)
		} else {
			kernels.ClippedSumWide(r.tmp[wi], r.tmp[bi], t.A().Data().([]T), t.E().Data().([]T), b, s.In, s.Out, r.coef[:b], r.scratch, r.wide)
		}
		addInto(r.grads[wi], r.tmp[wi])
		addInto(r.grads[bi], r.tmp[bi])
	}
	for k, t := range mats {
		matClippedSum(r.tmp, r.mat[k], r.coef[:b], t)
		for _, pi := range t.Params {
			addInto(r.grads[pi], r.tmp[pi])
		}
	}
	for _, t := range sparse {
		// The sparse rule (an embedding table): cᵢ·(example i's rows, grouped by id) added
		// into the rows of its ids, in float64; an example with cᵢ = 0 is skipped.
		dst := r.tmp[t.Param]
		clear(dst)
		for i, c := range r.coef[:b] {
			if c != 0 {
				t.AddClipped(dst, i, c)
			}
		}
		addInto(r.grads[t.Param], dst)
	}
	// The batch's statistics count the real examples; one whose gradient is not finite (it
	// contributes nothing to the sum) adds neither loss nor a correct prediction, so that one
	// hostile record cannot make the batch's loss NaN (the CUDA backend counts alike).
	logits, y, k := r.net.Logits().Data().([]T), r.y.Data().([]T), ds.Classes
	for i, m := range r.mask {
		if m == 0 {
			continue
		}
		r.count++
		if v := r.norm2[i]; !(v >= 0 && v <= math.MaxFloat64) {
			continue
		}
		zi, yi := logits[i*k:(i+1)*k], y[i*k:(i+1)*k]
		r.loss += nn.RowLoss(r.net.Arch.Loss, zi, yi)
		if argmax(zi) == argmax(yi) {
			r.correct++
		}
	}
	if r.inspect != nil {
		r.inspect(r, rows, mask)
	}
	return nil
}

// convGrads materializes, for each example i of a physical batch of b, its gradient of one
// convolution layer — Ĝᵢ = [Aᵢ, 1]ᵀ·Eᵢ over its P positions, a GEMM in T (the weights In×Out,
// then the bias Out) — into g at i·(In+1)·Out, and adds ‖Ĝᵢ‖² (in float64) to norm2[i].
//
// The clipped sum then adds cᵢ·Ĝᵢ itself, in float64 (convClippedSum): the vector whose norm
// is measured is exactly the one that is summed, so ‖cᵢ·Ĝᵢ‖ = cᵢ·‖Ĝᵢ‖ ≤ C up to the float64
// product's rounding, which kernels.ClipBound's margin covers, whatever the float32 GEMM's
// rounding made of Ĝᵢ (it depends on record i's rows alone). Materializing beats the ghost
// norm here when P²·(In+Out) > P·In·Out, which holds for the MNIST CNN's layers (mixed ghost
// clipping's rule, Bu et al. 2022, "Scalable and efficient training of large convolutional
// neural networks with differential privacy"), and the per-example gradient then also serves
// the clipped sum: no second GEMM over the batch's B·P rows.
func convGrads[T kernels.Float](norm2 []float64, g, a, e []T, b int, s nn.LayerShape) {
	p, d, h := s.Positions, s.In, s.Out
	n := (d + 1) * h
	for i := range b {
		gi := g[i*n : (i+1)*n]
		ai := a[i*p*d : (i+1)*p*d]
		ei := e[i*p*h : (i+1)*p*h]
		kernels.Gemm(true, false, d, h, p, 1, ai, d, ei, h, 0, gi[:d*h], h)
		bias := gi[d*h:]
		clear(bias)
		for r := range p {
			for j, v := range ei[r*h : (r+1)*h] {
				bias[j] += v
			}
		}
		norm2[i] += kernels.SqNorm(gi)
	}
}

// convClippedSum sets dstW (In×Out) and dstB (Out) to Σᵢ cᵢ·Ĝᵢ over the examples with cᵢ > 0
// (an example with coefficient 0 — padding or non-finite — is skipped, never multiplied: its
// Ĝᵢ may hold NaN), in float64 and in the examples' order.
func convClippedSum[T kernels.Float](dstW, dstB []float64, g []T, coef []float64, s nn.LayerShape) {
	d, h := s.In, s.Out
	n := (d + 1) * h
	clear(dstW)
	clear(dstB)
	for i, c := range coef {
		if c == 0 {
			continue
		}
		gi := g[i*n : (i+1)*n]
		for j, v := range gi[:d*h] {
			dstW[j] += c * float64(v)
		}
		for j, v := range gi[d*h:] {
			dstB[j] += c * float64(v)
		}
	}
}

// matGrads writes, for each example i of a physical batch of b, its gradient of a layer with a
// materialized rule (nn.MatTap: Width values, float64) into g at i·Width, and adds its squared
// norm to norm2[i].
func matGrads(norm2, g []float64, t *nn.MatTap, b int) {
	w := t.Width
	for i := range b {
		gi := g[i*w : (i+1)*w]
		t.Example(gi, i)
		norm2[i] += kernels.SqNorm(gi)
	}
}

// matClippedSum sets dst[p] for each parameter p of the rule to its part of Σᵢ cᵢ·gᵢ over the
// examples with cᵢ > 0 (one with coefficient 0 is skipped, never multiplied: its gᵢ may hold
// NaN), in float64 and in the examples' order: the vector whose norm was measured is the one
// summed, as for convClippedSum.
func matClippedSum(dst [][]float64, g, coef []float64, t *nn.MatTap) {
	w := t.Width
	for _, p := range t.Params {
		clear(dst[p])
	}
	for i, c := range coef {
		if c == 0 {
			continue
		}
		gi := g[i*w : (i+1)*w]
		off := 0
		for _, p := range t.Params {
			d := dst[p]
			for j := range d {
				d[j] += c * gi[off+j]
			}
			off += len(d)
		}
	}
}

// unitRoundoff returns the unit roundoff u of T and its smallest subnormal η.
func unitRoundoff[T kernels.Float]() (u, eta float64) {
	var z T
	if unsafe.Sizeof(z) == 4 {
		return 0x1p-24, 0x1p-149
	}
	return 0x1p-53, 0x1p-1074
}

func addInto(dst, src []float64) {
	for i, v := range src {
		dst[i] += v
	}
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

// gradStep computes the summed clipped gradient of one logical batch into grads, in float64
// whatever T is.
//
// Why float64: the accountants assume that one record moves the clipped sum by at most C.
// Each record's clipped gradient is within C (kernels.ClipBound), but a sum rounded in float32
// rounds the other records' contributions differently with and without the record, which
// moved a float32 sum by up to 1.0013·C at logical batch 2¹⁴ (1.0004·C in the setting of
// TestAdversarialAccumulationRounding). In float64 the
// per-layer sums are exact products summed with rounding (kernels.ClippedSumWide), then added
// across physical batches and replicas in a fixed order. What remains: each entry is within
// γₘ·Σ|terms|, γₘ = m·2⁻⁵³/(1 − m·2⁻⁵³), of the exact sum of the clipped gradients, m the
// additions into it (the rows of a physical batch, times positions for a convolution, plus the
// physical batches of a replica plus the replicas). For dense layers ‖Σᵢ|Gᵢ|‖ ≤ N·C over the
// N records, so the two sums with and without a record differ by at most C + 2·γₘ·N·C:
// about C·(1 + 2⁻²⁴) for N = m = 2¹⁴ and C·(1 + 2⁻¹²) for 2²⁰ (for a convolution, Σ|terms|
// also counts the positions' products before they cancel). The accountants do not charge
// this residual; it is some 10⁴ times below the float32 rounding it replaces at N = 2¹⁴.
// The noise is then added to the float64 sum (run.step) and the result rounded to T only
// after it: post-processing of the noisy release, whose rounding does not depend on the
// record except through released values.
func gradStep[T kernels.Float](reps []*replica[T], ds *datasets.Dataset, idx []int, phys int, clip float64, grads [][]float64, rowsBuf []int, maskBuf []float64) (StepStats, error) {
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
	return reduceReplicas(reps[:min(k, len(reps))], errs, grads)
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

// reduceReplicas ends a step run on the replicas reps: the first of their errors, or their
// gradient sums added into grads (in replica order, so the bits do not depend on timing) and
// their statistics.
func reduceReplicas[T kernels.Float](reps []*replica[T], errs []error, grads [][]float64) (StepStats, error) {
	for _, err := range errs {
		if err != nil {
			return StepStats{}, err
		}
	}
	var st StepStats
	for pi, g := range grads {
		clear(g)
		for _, r := range reps {
			addInto(g, r.grads[pi])
		}
	}
	for _, r := range reps {
		st.Loss += r.loss
		st.Correct += r.correct
		st.BatchSize += r.count
		st.NonFinite += r.nonFinite
		st.Clipped += r.clipped
	}
	return st, nil
}
