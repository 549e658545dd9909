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

	norm2, coef, rowCoef []float64
	slack2               []float64 // convolution layers' additive rounding bound (convSqNorms)
	asq, esq             []float64
	grads                [][]float64 // this replica's clipped sums, one per parameter
	tmp                  [][]float64 // one physical batch's clipped sums
	scratch              []T
	wide                 []float64 // kernels.ClippedSumWide's float64 copies (float32 T)
	gi                   []T       // one example's gradient of a convolution layer

	loss      float64
	correct   int
	count     int
	nonFinite int
	clipped   int

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
	if len(arch.Conv) > 0 {
		xshape = append([]int{phys}, arch.Input...)
	}
	r := &replica[T]{
		net:   net,
		x:     tensor.New(tensor.WithShape(xshape...), tensor.Of(dt)),
		y:     tensor.New(tensor.WithShape(phys, arch.Classes), tensor.Of(dt)),
		mask:  make([]float64, phys),
		norm2: make([]float64, phys), coef: make([]float64, phys), slack2: make([]float64, phys),
		asq: make([]float64, phys), esq: make([]float64, phys),
	}
	maxRows, maxScratch, maxWide, maxGi := 0, 0, 0, 0
	for _, l := range params.Shapes {
		rows := phys * l.Positions
		maxRows = max(maxRows, rows)
		maxScratch = max(maxScratch, rows*l.Out)
		maxWide = max(maxWide, rows*(l.In+l.Out))
		if l.Positions > 1 {
			maxGi = max(maxGi, (l.In+1)*l.Out)
		}
	}
	r.rowCoef = make([]float64, maxRows)
	r.scratch = make([]T, maxScratch)
	r.gi = make([]T, maxGi)
	if u, _ := unitRoundoff[T](); u > 0x1p-53 {
		r.wide = make([]float64, maxWide)
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
// gradients into r.grads (docs/design.md steps 2–5). The sums are float64 whatever T is: see
// gradStep.
func (r *replica[T]) physical(ds *datasets.Dataset, rows []int, mask []float64, clip float64) error {
	r.fill(ds, rows, mask)
	if err := r.net.Run(r.x, r.y); err != nil {
		return err
	}
	b := len(rows)
	clear(r.norm2)
	clear(r.slack2)
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
		convSqNorms(r.norm2, r.slack2, a, e, b, s, r.gi)
	}
	r.nonFinite += kernels.ClipCoefs(r.coef, r.norm2, r.mask, clip)
	// A clipped example's convolution gradients can exceed c·Nᵢ by the additive Hᵢ (see
	// convSqNorms); over all layers ‖clipped gᵢ‖ ≤ c·√norm2ᵢ + √slack2ᵢ (Minkowski), so
	// c = (C − H)/N keeps it within C, and an example whose H reaches C is dropped. H is of
	// the order of the smallest subnormal times the activations: it matters only for inputs
	// near the float range's end with tiny clip norms.
	for i, h := range r.slack2[:b] {
		if c := r.coef[i]; h > 0 && c > 0 && c < 1 {
			r.coef[i] = c * max(0, 1-math.Sqrt(h)/clip)
		}
	}
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
		kernels.ClippedSumWide(r.tmp[wi], r.tmp[bi], t.A().Data().([]T), t.E().Data().([]T), rows, s.In, s.Out, rc, r.scratch, r.wide)
		addInto(r.grads[wi], r.tmp[wi])
		addInto(r.grads[bi], r.tmp[bi])
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
		r.loss += nn.XentRowLoss(zi, yi)
		if argmax(zi) == argmax(yi) {
			r.correct++
		}
	}
	if r.inspect != nil {
		r.inspect(r, rows, mask)
	}
	return nil
}

// convSqNorms adds, for each example i of one convolution layer, the square of Nᵢ to norm2[i]
// and the square of Hᵢ to slack2[i], two numbers that bound the example's clipped gradient of
// the layer rigorously despite float rounding in T:
//
//   - with coefficient 1 (E used as is) the gradient is Gᵢ = [Aᵢ, 1]ᵀ·Eᵢ over its P rows, and
//     ‖Gᵢ‖ ≤ Nᵢ;
//   - with a coefficient c < 1 it is [Aᵢ, 1]ᵀ·Ẽᵢ, Ẽᵢ = Eᵢ scaled by kernels.ClipScaleRow, and
//     ‖[Aᵢ, 1]ᵀ·Ẽᵢ‖ ≤ c·Nᵢ + Hᵢ.
//
// Gᵢ is materialized one example at a time in gi (Ĝ, a GEMM in T; the layer is small, In·Out
// values), and
//
//	Nᵢ = ‖Ĝ‖ + (γ_P + δ)·‖A′‖_F·‖Eᵢ‖_F + P·η·√((In+1)·Out),
//	Hᵢ = 2η·√nnz(Eᵢ)·‖A′‖_F,
//
// where A′ holds the rows [aₚ, 1] of positions whose error row eₚ is not all zero (rows with
// eₚ = 0 contribute exactly nothing, to Gᵢ and to its rounding), u is the unit roundoff of T
// (2⁻²⁴ or 2⁻⁵³), γ_P = P·u/(1 − P·u), δ = 4u and η the smallest subnormal of T. The standard
// bound for a sum of P products, |Ĝ − G| ≤ γ_P·|A′|ᵀ|E| entrywise plus P·η/2 per entry for
// products that underflow, with ‖|A′|ᵀ|E|‖_F ≤ ‖A′‖_F·‖E‖_F, gives ‖G‖ ≤ ‖Ĝ‖ + γ_P·‖A′‖‖E‖ +
// P·η·√(entries). ClipScaleRow moves each scaled entry by at most δ·c·|e| (rounding to nearest
// in the normal range) plus 2η (one step toward zero in the subnormal range), so
// ‖[A,1]ᵀ(Ẽ − cE)‖ ≤ ‖A′‖·(δ·c·‖E‖ + 2η·√nnz) — a term that, unlike for a dense layer's
// rank-one gradient, is not proportional to c‖G‖ when the positions cancel, hence the δ in Nᵢ
// and the additive Hᵢ. (The float64 sums of squares round too, by a relative n·2⁻⁵³, far below
// anything here.)
//
// Why a bound rather than accumulating Ĝ in float64 (which would make γ_P negligible): the
// bound costs O(P·(In+Out)) per example beside the GEMM's O(P·In·Out) — on the MNIST CNN's
// shapes BenchmarkConvSqNorms measured it about 10% above the unbounded float32 norm, and the
// float64 GEMM (with its widening copies) about 75% above — while it over-estimates ‖G‖ by at
// most (γ_P + δ)·‖A′‖‖E‖, about 1e-4 relative for P = 196 in float32 on ordinary data, which
// only clips such examples that much tighter.
func convSqNorms[T kernels.Float](norm2, slack2 []float64, a, e []T, b int, s nn.LayerShape, gi []T) {
	p, d, h := s.Positions, s.In, s.Out
	w := gi[:d*h]
	bias := gi[d*h : (d+1)*h]
	u, eta := unitRoundoff[T]()
	gamma := float64(p) * u / (1 - float64(p)*u)
	under := float64(p) * eta * math.Sqrt(float64((d+1)*h))
	for i := range b {
		ai := a[i*p*d : (i+1)*p*d]
		ei := e[i*p*h : (i+1)*p*h]
		kernels.Gemm(true, false, d, h, p, 1, ai, d, ei, h, 0, w, h)
		clear(bias)
		var asq, esq float64
		nnz := 0
		for r := range p {
			row := ei[r*h : (r+1)*h]
			for j, v := range row {
				bias[j] += v
				if v != 0 {
					nnz++
				}
			}
			if sq := kernels.SqNorm(row); sq != 0 {
				esq += sq
				asq += kernels.SqNorm(ai[r*d:(r+1)*d]) + 1
			}
		}
		ag := math.Sqrt(asq)
		bound := math.Sqrt(kernels.SqNorm(gi[:(d+1)*h])) + (gamma+4*u)*ag*math.Sqrt(esq) + under
		norm2[i] += bound * bound
		hs := 2 * eta * math.Sqrt(float64(nnz)) * ag
		slack2[i] += hs * hs
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
