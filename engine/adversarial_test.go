package engine

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/kernels"
	"gorgonia.org/tensor"
)

// The adversarial-record sensitivity test. DP-SGD's privacy guarantee rests on one record
// moving the clipped gradient sum by at most the clip norm C (Abadi et al., "Deep Learning
// with Differential Privacy"), whatever the record holds and wherever it sits in the physical
// batches. TestAdversarialRecordSensitivity puts one record with extreme values (NaN, ±Inf,
// 1e30, ±3.4e38, −0, subnormals, one huge feature) at every position of a small logical batch
// and compares the step with the record against the step without it, for logistic regression,
// an MLP and a CNN, in float32 and float64, over several physical batch sizes, replica counts
// and clip norms down to 1e-6.
//
// Three checks per case:
//
//  1. Isolation: every other record's clip coefficient and its rows of A and E (every layer)
//     are bit-identical with and without the record, so the record cannot act through them.
//  2. Own effect, exactly: each record's clipped gradient is materialized in float64 from the
//     taps — Gᵢ = Σₚ [aₚ, 1]ᵀ·ẽₚ over its rows, with ẽ the error rows scaled by the record's
//     coefficient exactly as kernels.ClippedSum scales them in T — and Δ, the difference of
//     the float64 sums of these per-record gradients with and without the record, must have
//     ‖Δ‖ ≤ C·(1 + 1e-12): the clip coefficients aim at kernels.ClipBound, C less the
//     rounding margin, so what remains is the test's own float64 rounding.
//  3. The engine's own sums (gradStep's grads, float64 whatever T is) move by at most
//     C·(1 + 1e-12) plus a float rounding allowance: each sum of n terms is within
//     γₙ·Σ|terms| of its exact value (γₙ = n·u/(1 − n·u), u taken as the unit roundoff of T,
//     which over-allows for float32 now that the sums are float64), so the allowance is
//     ‖γₙ·(Σᵢ|Gᵢ| with + Σᵢ|Gᵢ| without)‖ plus n times the underflow spacing per entry, with
//     n counting the rows of a physical batch, the physical batches and the replicas.

// advValue is one adversarial record: every feature set to v, or, when single, only the
// middle feature (the others keep their ordinary values).
type advValue struct {
	name   string
	v      float32
	single bool
}

func advValues() []advValue {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	return []advValue{
		{"NaN", nan, false},
		{"+Inf", inf, false},
		{"-Inf", -inf, false},
		{"1e30", 1e30, false},
		{"+3.4e38", 3.4e38, false},
		{"-3.4e38", -3.4e38, false},
		{"-0", float32(math.Copysign(0, -1)), false},
		{"min subnormal", math.SmallestNonzeroFloat32, false},
		{"subnormal 1e-40", 1e-40, false},
		{"one 3.4e38", 3.4e38, true},
		{"one -3.4e38", -3.4e38, true},
		{"one 1e30", 1e30, true},
		{"one NaN", nan, true},
		{"one +Inf", inf, true},
	}
}

type advModel struct {
	name  string
	arch  nn.Arch
	extra bool // a second activation: fewer batch configurations
}

func advModels() []advModel {
	return []advModel{
		{"logreg", nn.LogReg([]int{6}, 3), false},
		{"mlp", nn.MLP([]int{6}, 3, []int{5}, nn.Tanh), false},
		{"cnn", nn.CNN([]int{1, 14, 14}, 3, []int{4}, nn.ReLU), false},
		{"mlp-relu", nn.MLP([]int{6}, 3, []int{5, 4}, nn.ReLU), true},
		{"cnn-tanh", nn.CNN([]int{1, 14, 14}, 3, []int{4}, nn.Tanh), true},
		// The layer library's other layers and rules (layers_test.go).
		{"stack-layernorm-gelu", layerTestModels()[0].arch, true},
		{"stack-groupnorm-avgpool", layerTestModels()[2].arch, true},
		{"stack-residual", layerTestModels()[3].arch, true},
		{"stack-embedding", layerTestModels()[5].arch, true},
		{"stack-tempered-sigmoid", layerTestModels()[1].arch, true},
		{"stack-flatten-image", layerTestModels()[4].arch, true},
		// The transformer's layers (attention_test.go).
		{"stack-vit", attentionTestModels()[0].arch, true},
		{"stack-attention-embedding", attentionTestModels()[1].arch, true},
		// Normalizations of the raw record itself: a record of one repeated value (every
		// advValue but the "one" ones) has variance 0 in every group.
		{"stack-norm-first", nn.Arch{Kind: nn.KindStack, Input: []int{6}, Classes: 3, Stack: []nn.LayerSpec{
			{Type: "layernorm"}, {Type: "dense", Units: 4}, {Type: "groupnorm", Groups: 2}, {Type: "gelu"}, {Type: "dense", Units: 3},
		}}, true},
	}
}

// advRow is what one real row of a physical batch left: its coefficient and its rows of A and
// E in every layer (copies), from which materialize derives its clipped gradient.
type advRow[T kernels.Float] struct {
	coef   float64
	shapes []nn.LayerShape
	a, e   [][]T // per layer
	// mat holds the row's gradient of each layer with a materialized rule (nn.MatTap), and
	// matParams that layer's parameters; sparse the row's ids and error rows of each sparse
	// rule (nn.SparseTap); sizes the size of every parameter.
	mat       [][]float64
	matParams [][]int
	sparse    []advSparse
	sizes     []int

	contrib, abs [][]float64 // per parameter, filled by materialize
}

type advSparse struct {
	param, dim int
	ids        []int
	e          [][]float64
}

type advRun[T kernels.Float] struct {
	rows  map[int]*advRow[T] // by dataset index
	grads [][]float64
	st    StepStats
}

func captureRow[T kernels.Float](r *replica[T], i int) *advRow[T] {
	row := &advRow[T]{coef: r.coef[i]}
	for _, t := range r.net.Taps() {
		s := t.Shape
		p, d, h := s.Positions, s.In, s.Out
		row.shapes = append(row.shapes, s)
		row.a = append(row.a, slices.Clone(t.A().Data().([]T)[i*p*d:(i+1)*p*d]))
		row.e = append(row.e, slices.Clone(t.E().Data().([]T)[i*p*h:(i+1)*p*h]))
	}
	for k, t := range r.net.MatTaps() {
		row.mat = append(row.mat, slices.Clone(r.mat[k][i*t.Width:(i+1)*t.Width]))
		row.matParams = append(row.matParams, t.Params)
	}
	for _, t := range r.net.SparseTaps() {
		ids, e := t.Rows(i)
		sp := advSparse{param: t.Param, dim: t.Dim, ids: ids}
		for _, v := range e {
			sp.e = append(sp.e, slices.Clone(v))
		}
		row.sparse = append(row.sparse, sp)
	}
	for _, g := range r.grads {
		row.sizes = append(row.sizes, len(g))
	}
	return row
}

// materialize derives the row's clipped gradient of every layer, Σₚ [aₚ, 1]ᵀ·ẽₚ, in float64,
// with entrywise |·| sums.
func (row *advRow[T]) materialize() {
	if row.contrib != nil {
		return
	}
	row.contrib, row.abs = make([][]float64, len(row.sizes)), make([][]float64, len(row.sizes))
	for p, n := range row.sizes {
		row.contrib[p], row.abs[p] = make([]float64, n), make([]float64, n)
	}
	for l, s := range row.shapes {
		p, d, h := s.Positions, s.In, s.Out
		a, e := row.a[l], row.e[l]
		w, b := make([]float64, d*h), make([]float64, h)
		wa, ba := make([]float64, d*h), make([]float64, h)
		if row.coef != 0 {
			// ẽ: the rows scaled exactly as the clipped sum scales them (row by row, so a
			// one-example call forms the same values as the batched one).
			rc := make([]float64, p)
			for k := range rc {
				rc[k] = row.coef
			}
			scratch := make([]T, p*h)
			kernels.ClippedSum(make([]T, d*h), make([]T, h), a, e, p, d, h, rc, scratch)
			for q := range p {
				for k := range h {
					ev := float64(scratch[q*h+k])
					if ev == 0 {
						continue
					}
					b[k] += ev
					ba[k] += math.Abs(ev)
					for j := range d {
						// A product of two float32 is exact in float64 (of two float64, rounded
						// once); the sum over positions rounds once per position, far below the
						// checks' tolerance.
						v := float64(a[q*d+j]) * ev
						w[j*h+k] += v
						wa[j*h+k] += math.Abs(v)
					}
				}
			}
		}
		row.contrib[2*l], row.contrib[2*l+1] = w, b
		row.abs[2*l], row.abs[2*l+1] = wa, ba
	}
	if row.coef == 0 {
		return
	}
	// Materialized rules: cᵢ·gᵢ, as matClippedSum forms it.
	for k, g := range row.mat {
		off := 0
		for _, p := range row.matParams[k] {
			c, a := row.contrib[p], row.abs[p]
			for j := range c {
				c[j] = row.coef * g[off+j]
				a[j] = math.Abs(c[j])
			}
			off += len(c)
		}
	}
	// Sparse rules: cᵢ times each row of the table's gradient (Σ_{t: id_t = v} e_t, in
	// position order), added into row v, as SparseTap.AddClipped forms it.
	for _, sp := range row.sparse {
		c, a := row.contrib[sp.param], row.abs[sp.param]
		sum := map[int][]float64{}
		for t, id := range sp.ids {
			if sum[id] == nil {
				sum[id] = make([]float64, sp.dim)
			}
			for j, v := range sp.e[t] {
				sum[id][j] += v
			}
		}
		for id, r := range sum {
			for j, v := range r {
				c[id*sp.dim+j] += row.coef * v
				a[id*sp.dim+j] += math.Abs(row.coef * v)
			}
		}
	}
}

// sameRow reports whether two captures of a record are bit-identical.
func sameRow[T kernels.Float](x, y *advRow[T]) bool {
	if x == nil || y == nil || math.Float64bits(x.coef) != math.Float64bits(y.coef) {
		return false
	}
	for l := range x.a {
		if !sameBits(x.a[l], y.a[l]) || !sameBits(x.e[l], y.e[l]) {
			return false
		}
	}
	for k := range x.mat {
		if !sameBits(x.mat[k], y.mat[k]) {
			return false
		}
	}
	for k := range x.sparse {
		a, b := x.sparse[k], y.sparse[k]
		if !slices.Equal(a.ids, b.ids) || len(a.e) != len(b.e) {
			return false
		}
		for t := range a.e {
			if !sameBits(a.e[t], b.e[t]) {
				return false
			}
		}
	}
	return true
}

func sameBits[T kernels.Float](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(float64(a[i])) != math.Float64bits(float64(b[i])) {
			return false
		}
	}
	return true
}

// advHarness runs gradStep over fixed replicas and records every real row.
type advHarness[T kernels.Float] struct {
	reps  []*replica[T]
	phys  int
	grads [][]float64
	rows  []int
	mask  []float64

	mu  sync.Mutex
	cur map[int]*advRow[T]
}

func newAdvHarness[T kernels.Float](t *testing.T, arch nn.Arch, params *nn.Params, phys, nrep int) *advHarness[T] {
	h := &advHarness[T]{phys: phys}
	for range nrep {
		r, err := newReplica[T](arch, params, phys)
		if err != nil {
			t.Fatal(err)
		}
		r.inspect = func(r *replica[T], rows []int, mask []float64) {
			for i, m := range mask {
				if m == 0 {
					continue
				}
				row := captureRow(r, i)
				h.mu.Lock()
				h.cur[rows[i]] = row
				h.mu.Unlock()
			}
		}
		h.reps = append(h.reps, r)
	}
	for _, p := range params.List {
		h.grads = append(h.grads, make([]float64, p.Value.Shape().TotalSize()))
	}
	return h
}

func (h *advHarness[T]) close() {
	for _, r := range h.reps {
		r.net.Close()
	}
}

func (h *advHarness[T]) run(t *testing.T, ds *datasets.Dataset, idx []int, clip float64) *advRun[T] {
	h.cur = map[int]*advRow[T]{}
	st, err := gradStep(h.reps, ds, idx, h.phys, kernels.ClipBound[T](clip), h.grads, h.rows, h.mask) // as cpuBackend.clippedSum, with run.dpStep's clip bound
	if err != nil {
		t.Fatal(err)
	}
	out := &advRun[T]{rows: h.cur, st: st}
	for _, g := range h.grads {
		out.grads = append(out.grads, slices.Clone(g))
	}
	return out
}

// sumRows adds the per-row clipped gradients (or their |·|) in increasing dataset index.
func sumRows[T kernels.Float](run *advRun[T], abs bool) [][]float64 {
	keys := make([]int, 0, len(run.rows))
	for k := range run.rows {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	var out [][]float64
	for _, k := range keys {
		run.rows[k].materialize()
		src := run.rows[k].contrib
		if abs {
			src = run.rows[k].abs
		}
		if out == nil {
			for _, s := range src {
				out = append(out, make([]float64, len(s)))
			}
		}
		for p, s := range src {
			for j, v := range s {
				out[p][j] += v
			}
		}
	}
	return out
}

func norm2D(x [][]float64) float64 {
	var s float64
	for _, v := range x {
		for _, w := range v {
			s += w * w
		}
	}
	return math.Sqrt(s)
}

func diff2D(a, b [][]float64) [][]float64 {
	out := make([][]float64, len(a))
	for p := range a {
		out[p] = make([]float64, len(a[p]))
		for j := range a[p] {
			out[p][j] = a[p][j] - b[p][j]
		}
	}
	return out
}

// advStats gathers the largest measured ratios per model, dtype and value.
type advStats struct {
	mu       sync.Mutex
	exact    map[string]float64 // max ‖Δ‖/C, float64 from the materialized rows
	own      map[string]float64 // max ‖G_record‖/C
	engine   map[string]float64 // max ‖Δ_T‖/C of the engine's sums
	failures map[string]int
	first    []string
}

func (s *advStats) note(key string, exact, own, eng float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, kv := range []struct {
		m map[string]float64
		v float64
	}{{s.exact, exact}, {s.own, own}, {s.engine, eng}} {
		old, ok := kv.m[key]
		switch {
		case !ok, math.IsNaN(kv.v):
			kv.m[key] = kv.v
		case !math.IsNaN(old) && kv.v > old:
			kv.m[key] = kv.v
		}
	}
}

func (s *advStats) fail(key, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[key]++
	if len(s.first) < 25 {
		s.first = append(s.first, msg)
	}
}

type advConfig struct {
	phys, reps int
}

// TestAdversarialRecordSensitivity: see the comment at the top of this file.
func TestAdversarialRecordSensitivity(t *testing.T) {
	const n = 6 // logical batch with the record; the record is dataset row n−1
	// Physical batch sizes 1, 2, 4 and 7 cut the 6 records into 6, 3, 2 (the last padded by
	// 2) and 1 (padded by 1) physical batches; the clean batch of 5 is padded differently.
	configs := []advConfig{{1, 1}, {2, 2}, {7, 1}, {4, 2}}
	extra := []advConfig{{2, 2}, {7, 1}}
	clips := []float64{1e-6, 1}
	if testing.Short() {
		configs, extra = []advConfig{{2, 2}, {4, 1}}, nil
	}
	stats := &advStats{exact: map[string]float64{}, own: map[string]float64{}, engine: map[string]float64{}, failures: map[string]int{}}
	for mi, m := range advModels() {
		cfgs := configs
		if m.extra {
			if cfgs = extra; cfgs == nil {
				continue
			}
		}
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			name := fmt.Sprintf("%s/%v", m.name, dt)
			t.Run(name, func(t *testing.T) {
				params, err := nn.NewParams(m.arch, dt, uint64(40+mi))
				if err != nil {
					t.Fatal(err)
				}
				ds := randomDataset(m.arch, n, uint64(50+mi))
				tokenize(m.arch, ds, uint64(50+mi))
				if dt == tensor.Float32 {
					advCheck[float32](t, name, m.arch, params, ds, cfgs, clips, stats)
				} else {
					advCheck[float64](t, name, m.arch, params, ds, cfgs, clips, stats)
				}
			})
		}
	}
	keys := make([]string, 0, len(stats.exact))
	for k := range stats.exact {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%-32s %16s %16s %16s %s\n", "model/dtype/value", "max‖Δ‖/C", "max‖G_rec‖/C", "engine max‖Δ_T‖/C", "failures")
	for _, k := range keys {
		fmt.Fprintf(&b, "%-32s %16.10g %16.10g %16.10g %d\n", k, stats.exact[k], stats.own[k], stats.engine[k], stats.failures[k])
	}
	t.Logf("largest effect of one record over positions, physical batch sizes, replicas and clip norms:\n%s", b.String())
	if len(stats.first) > 0 {
		t.Errorf("%d kinds of failures; first ones:\n%s", len(stats.failures), strings.Join(stats.first, "\n"))
	}
}

func advCheck[T kernels.Float](t *testing.T, name string, arch nn.Arch, params *nn.Params, ds *datasets.Dataset, configs []advConfig, clips []float64, stats *advStats) {
	const n = 6
	positions := make([]int, n)
	for i := range positions {
		positions[i] = i
	}
	advCheckAt[T](t, name, arch, params, ds, n, positions, configs, clips, stats)
}

// advCheckAt is advCheck on a logical batch of the first n records of ds (the record is row
// n−1), inserting the record at each of positions only.
func advCheckAt[T kernels.Float](t *testing.T, name string, arch nn.Arch, params *nn.Params, ds *datasets.Dataset, n int, positions []int, configs []advConfig, clips []float64, stats *advStats) {
	rec := n - 1
	d := ds.D
	orig := slices.Clone(ds.X[rec*d : (rec+1)*d])
	clean := make([]int, n-1)
	for i := range clean {
		clean[i] = i
	}
	u, eta := unitRoundoff[T]()
	pmax := 1
	for _, s := range params.Shapes {
		pmax = max(pmax, s.Positions)
	}
	for _, cfg := range configs {
		h := newAdvHarness[T](t, arch, params, cfg.phys, cfg.reps)
		// Additions into one entry of a sum: the rows of a physical batch (times positions),
		// the physical batches of a replica, the replicas, and slack.
		k := (n + cfg.phys - 1) / cfg.phys
		terms := float64(cfg.phys*pmax + (k+cfg.reps-1)/cfg.reps + cfg.reps + 2)
		gamma := terms * u / (1 - terms*u)
		for _, clip := range clips {
			copy(ds.X[rec*d:], orig)
			base := h.run(t, ds, clean, clip)
			if base.st.NonFinite != 0 || base.st.BatchSize != n-1 {
				t.Fatalf("clean batch: %+v", base.st)
			}
			baseSum, baseAbs := sumRows(base, false), sumRows(base, true)
			for _, v := range advValues() {
				copy(ds.X[rec*d:], orig)
				if v.single {
					ds.X[rec*d+d/2] = v.v
				} else {
					for j := range d {
						ds.X[rec*d+j] = v.v
					}
				}
				key := name + "/" + v.name
				for _, pos := range positions {
					idx := slices.Insert(slices.Clone(clean), pos, rec)
					with := h.run(t, ds, idx, clip)
					where := fmt.Sprintf("%s: record at %d of %d, physical batch %d, %d replicas, C = %g", key, pos, n, cfg.phys, cfg.reps, clip)
					if with.st.BatchSize != n || with.st.NonFinite > 1 {
						stats.fail(key, fmt.Sprintf("%s: stats %+v (one record can be at most one non-finite example)", where, with.st))
					}
					// 1. Isolation. A bit-identical record shares the clean run's materialized
					// gradient; one that changed is materialized from its own capture.
					for _, j := range clean {
						a, b := with.rows[j], base.rows[j]
						if sameRow(a, b) {
							with.rows[j] = b
							continue
						}
						var ca float64
						if a != nil {
							ca = a.coef
						}
						stats.fail(key, fmt.Sprintf("%s: record %d's coefficient or taps changed (coef %v, without the record %v)", where, j, ca, b.coef))
					}
					// 2. Own effect.
					r := with.rows[rec]
					r.materialize()
					own := norm2D(r.contrib) / clip
					exact := norm2D(diff2D(sumRows(with, false), baseSum)) / clip
					if !(exact <= 1+1e-12) || !(own <= 1+1e-12) {
						stats.fail(key, fmt.Sprintf("%s: ‖Δ‖ = %.9g·C, ‖G_record‖ = %.9g·C", where, exact, own))
					}
					// 3. The engine's sums.
					withAbs := sumRows(with, true)
					var allow2 float64
					for p := range withAbs {
						for j := range withAbs[p] {
							a := gamma*(withAbs[p][j]+baseAbs[p][j]) + 2*terms*eta
							allow2 += a * a
						}
					}
					allow := math.Sqrt(allow2)
					eng := norm2D(diff2D(with.grads, base.grads)) / clip
					if !(eng <= 1+1e-12+allow/clip) {
						stats.fail(key, fmt.Sprintf("%s: engine ‖Δ_T‖ = %.9g·C, allowance %.3g·C", where, eng, allow/clip))
					}
					stats.note(key, exact, own, eng)
				}
			}
			copy(ds.X[rec*d:], orig)
		}
		h.close()
	}
}

// TestAdversarialAccumulationRounding: the rounding of a large float32 batch sum. Every record
// of a logistic regression on one feature with one label has nearly the same gradient
// direction, each is clipped to C, and a logical batch of 4·4096 such records is summed over
// four physical batches; with the record present or absent the OTHER records' contributions
// round differently, which in a float32 sum moved it by about 1.0013·C. The engine sums in
// float64 and adds the noise there (run.step), rounding to T only after the noise, so the
// difference of the two noisy float64 sums (the noise is fixed by the key, so the difference
// is the clipped-sum difference up to the noise addition's own float64 rounding) must stay
// within C·(1 + 1e-6).
func TestAdversarialAccumulationRounding(t *testing.T) {
	const phys, n, clip, sigma = 4096, 4 * 4096, 0.05, 1.0
	arch := nn.LogReg([]int{1}, 2)
	params, err := nn.NewParams(arch, tensor.Float32, 7)
	if err != nil {
		t.Fatal(err)
	}
	ds := &datasets.Dataset{Name: "aligned", X: make([]float32, n), Y: make([]int, n), N: n, D: 1, Classes: 2, Shape: []int{1}}
	for i := range ds.X {
		ds.X[i] = 1 + float32(i%97)/97 // all positive: the gradients point the same way
	}
	h := newAdvHarness[float32](t, arch, params, phys, 2)
	defer h.close()
	for _, r := range h.reps {
		r.inspect = nil
	}
	noisy := func(idx []int) [][]float64 {
		h.cur = map[int]*advRow[float32]{}
		run := h.run(t, ds, idx, clip)
		if run.st.Clipped != len(idx) {
			t.Fatalf("%d of %d clipped: the test wants every record clipped", run.st.Clipped, len(idx))
		}
		for p, g := range run.grads {
			kernels.AddGaussian(g, sigma*clip, kernels.NoiseKey{Seed: 11, Step: 3, Tensor: uint32(p)})
		}
		return run.grads
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	worst, worstT := 0.0, 0.0
	for _, rec := range []int{0, 1, phys - 1, phys, 2*phys + 5, n - 1} {
		without := slices.Delete(slices.Clone(all), rec, rec+1)
		a, b := noisy(all), noisy(without)
		d := norm2D(diff2D(a, b)) / clip
		worst = max(worst, d)
		// The released values are rounded to float32 after the noise: post-processing.
		var s float64
		for p := range a {
			for j := range a[p] {
				v := float64(float32(a[p][j])) - float64(float32(b[p][j]))
				s += v * v
			}
		}
		worstT = max(worstT, math.Sqrt(s)/clip)
		if !(d <= 1+1e-6) {
			t.Errorf("record %d: the noisy sums differ by %.9g·C, want ≤ C·(1 + 1e-6)", rec, d)
		}
	}
	t.Logf("largest ‖Δ‖/C: %.9g before rounding to float32, %.9g after (post-processing of the noisy sum)", worst, worstT)
}
