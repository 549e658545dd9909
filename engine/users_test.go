package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/kernels"
	"gorgonia.org/tensor"
)

// userTestModels are the presets and the layer library's stacks (every rule kind: GEMM dense
// and convolution, materialized LayerNorm and GroupNorm, the sparse embedding).
func userTestModels() []advModel {
	return advModels()
}

// partition cuts 0..n-1 into consecutive groups of the given sizes.
func partition(sizes ...int) *userBatch {
	b := &userBatch{start: []int{0}}
	for _, s := range sizes {
		for range s {
			b.rows = append(b.rows, len(b.rows))
		}
		b.start = append(b.start, len(b.rows))
	}
	return b
}

// oracleGrads returns the batch-1 oracle's gradient of each example of ds, per parameter.
func oracleGrads(t *testing.T, arch nn.Arch, params *nn.Params, ds *datasets.Dataset) [][][]float64 {
	t.Helper()
	oracle, err := nn.NewGradOracle(arch, params)
	if err != nil {
		t.Fatal(err)
	}
	xshape := []int{1, arch.InputSize()}
	if arch.ImageInput() {
		xshape = append([]int{1}, arch.Input...)
	}
	out := make([][][]float64, ds.N)
	for i := range ds.N {
		x := tensor.New(tensor.WithShape(xshape...), tensor.Of(tensor.Float64))
		for j, v := range ds.X[i*ds.D : (i+1)*ds.D] {
			x.Data().([]float64)[j] = float64(v)
		}
		y := tensor.New(tensor.WithShape(1, arch.Classes), tensor.Of(tensor.Float64))
		y.Data().([]float64)[ds.Y[i]] = 1
		if out[i], err = oracle.Grad(x, y); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestUserGradAgainstOracle: for every model (dense, convolution, every rule kind), random
// partitions of a batch into users — groups of one, of several, and one group holding the
// whole batch — each user's gradient g_u (userGrad) equals the sum of the batch-1 oracle's
// per-example gradients over the user's records, and its squared norm the brute-force norm of
// that sum, to 1e-9 relative in float64; with the clip at the median user norm, the step's
// clipped sum equals Σ_u min(1, C/‖g_u‖)·g_u from the oracle.
func TestUserGradAgainstOracle(t *testing.T) {
	const b = 7
	parts := [][]int{{1, 1, 1, 1, 1, 1, 1}, {7}, {3, 1, 2, 1}}
	r := rand.New(rand.NewPCG(5, 5))
	for range 2 {
		var sizes []int
		for left := b; left > 0; {
			s := 1 + r.IntN(left)
			sizes = append(sizes, s)
			left -= s
		}
		parts = append(parts, sizes)
	}
	for mi, m := range userTestModels() {
		t.Run(m.name, func(t *testing.T) {
			params, err := nn.NewParams(m.arch, tensor.Float64, uint64(mi+1))
			if err != nil {
				t.Fatal(err)
			}
			randomizeParams(params, uint64(mi+1))
			ds := randomDataset(m.arch, b, uint64(mi+60))
			tokenize(m.arch, ds, uint64(mi+60))
			per := oracleGrads(t, m.arch, params, ds)
			rep, err := newReplica[float64](m.arch, params, b)
			if err != nil {
				t.Fatal(err)
			}
			defer rep.net.Close()
			for _, sizes := range parts {
				ub := partition(sizes...)
				rows, mask, gid, k := userChunks(ub, b, nil, nil, nil)
				if k != 1 {
					t.Fatalf("%v: %d physical batches, want 1", sizes, k)
				}
				// The users' norms from the oracle, and the clip at their median.
				want := make([][][]float64, len(sizes))
				norms := make([]float64, len(sizes))
				for u := range sizes {
					want[u] = make([][]float64, len(per[0]))
					for p := range per[0] {
						want[u][p] = make([]float64, len(per[0][p]))
						for _, i := range ub.rows[ub.start[u]:ub.start[u+1]] {
							for j, v := range per[i][p] {
								want[u][p][j] += v
							}
						}
						for _, v := range want[u][p] {
							norms[u] += v * v
						}
					}
				}
				clip := 0.9 * math.Sqrt(median(norms)) // clips at least one user
				rep.reset()
				if err := rep.physicalUsers(ds, rows, mask, gid, clip, nil); err != nil {
					t.Fatal(err)
				}
				sum := make([][]float64, len(per[0]))
				for p := range sum {
					sum[p] = make([]float64, len(per[0][p]))
				}
				for u := range sizes {
					rep.userGrad(ub.start[u], ub.start[u+1])
					var n2 float64
					for p, g := range rep.ug {
						if e := maxRelErr(g, want[u][p]); !(e <= 1e-9) {
							t.Errorf("users %v, user %d, param %s: gradient rel err %.2g", sizes, u, params.List[p].Name, e)
						}
						n2 += kernels.SqNorm(g)
					}
					if e := relErr(n2, norms[u]); !(e <= 1e-9) {
						t.Errorf("users %v, user %d: squared norm %v, oracle %v", sizes, u, n2, norms[u])
					}
					c := math.Min(1, clip/math.Sqrt(norms[u]))
					for p := range sum {
						for j, v := range want[u][p] {
							sum[p][j] += c * v
						}
					}
				}
				for p := range sum {
					if e := maxRelErr(rep.grads[p], sum[p]); !(e <= 1e-9) {
						t.Errorf("users %v, param %s: clipped sum rel err %.2g", sizes, params.List[p].Name, e)
					}
				}
				if rep.clipped == 0 {
					t.Errorf("users %v: no record's user clipped; the test should clip", sizes)
				}
			}
		})
	}
}

// userHarness runs gradStepUsers over fixed replicas.
type userHarness[T kernels.Float] struct {
	reps  []*replica[T]
	phys  int
	grads [][]float64
	bufs  userChunkBufs
}

func newUserHarness[T kernels.Float](t *testing.T, arch nn.Arch, params *nn.Params, phys, nrep int) *userHarness[T] {
	h := &userHarness[T]{phys: phys}
	for range nrep {
		r, err := newReplica[T](arch, params, phys)
		if err != nil {
			t.Fatal(err)
		}
		h.reps = append(h.reps, r)
	}
	for _, p := range params.List {
		h.grads = append(h.grads, make([]float64, p.Value.Shape().TotalSize()))
	}
	return h
}

func (h *userHarness[T]) close() {
	for _, r := range h.reps {
		r.net.Close()
	}
}

func (h *userHarness[T]) run(t *testing.T, ds *datasets.Dataset, ub *userBatch, clip float64) ([][]float64, StepStats) {
	t.Helper()
	st, err := gradStepUsers(h.reps, ds, ub, h.phys, kernels.ClipBound[T](clip), h.grads, &h.bufs, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]float64, len(h.grads))
	for p, g := range h.grads {
		out[p] = slices.Clone(g)
	}
	return out, st
}

// TestUserRemovalSensitivity: one user owns 40% of the data (4 of 10 records, interleaved
// with the others'). Removing that user moves the engine's clipped sum by at most C
// (tolerance 1e-9·C: the sums are float64 and the other users' contributions only change
// their order of addition), for every model (presets, and stacks with LayerNorm, GroupNorm,
// an embedding, residual blocks), float32 and float64, several physical batch sizes and
// replica counts, the user drawn first, in the middle or last, with its records clean and
// with each adversarial value (NaN, ±Inf, 1e30, ±3.4e38, −0, subnormals, one huge feature)
// in each one of its records in turn, and with the user capped to a subset of 2 records.
// Also: the other users' records are never non-finite.
func TestUserRemovalSensitivity(t *testing.T) {
	const n = 10
	owner := []int{0, 1, 0, 2, 3, 0, 4, 5, 0, 6} // user 0 owns records 0, 2, 5, 8
	heavy := []int{0, 2, 5, 8}
	configs := []advConfig{{4, 1}, {5, 2}, {10, 1}}
	clips := []float64{1e-3, 1}
	values := advValues()
	if testing.Short() {
		configs, clips = []advConfig{{5, 2}}, []float64{1}
	}
	for mi, m := range userTestModels() {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			t.Run(fmt.Sprintf("%s/%v", m.name, dt), func(t *testing.T) {
				params, err := nn.NewParams(m.arch, dt, uint64(70+mi))
				if err != nil {
					t.Fatal(err)
				}
				ds := randomDataset(m.arch, n, uint64(80+mi))
				tokenize(m.arch, ds, uint64(80+mi))
				ds.User, ds.Users = owner, 7
				if err := ds.Validate(); err != nil {
					t.Fatal(err)
				}
				if dt == tensor.Float32 {
					userRemoval[float32](t, m.arch, params, ds, heavy, configs, clips, values)
				} else {
					userRemoval[float64](t, m.arch, params, ds, heavy, configs, clips, values)
				}
			})
		}
	}
}

// TestUserRemovalSensitivityExtLayers is TestUserRemovalSensitivity on the grouped and
// weight-standardized convolutions, shortcuts, dropout (each record's mask keyed by its
// dataset index, whatever row it takes) and the bce and mse losses.
func TestUserRemovalSensitivityExtLayers(t *testing.T) {
	const n = 10
	owner := []int{0, 1, 0, 2, 3, 0, 4, 5, 0, 6}
	heavy := []int{0, 2, 5, 8}
	// One physical batch configuration (two batches over two replicas, the heavy user's four
	// records in either): TestUserRemovalSensitivity covers the others on the older layers.
	configs := []advConfig{{5, 2}}
	clips := []float64{1e-3, 1}
	if testing.Short() {
		clips = []float64{1}
	}
	for mi, m := range extLayerModels() {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			t.Run(fmt.Sprintf("%s/%v", m.name, dt), func(t *testing.T) {
				params, err := nn.NewParams(m.arch, dt, uint64(170+mi))
				if err != nil {
					t.Fatal(err)
				}
				ds := randomDataset(m.arch, n, uint64(180+mi))
				ds.User, ds.Users = owner, 7
				if err := ds.Validate(); err != nil {
					t.Fatal(err)
				}
				if dt == tensor.Float32 {
					userRemoval[float32](t, m.arch, params, ds, heavy, configs, clips, advValues())
				} else {
					userRemoval[float64](t, m.arch, params, ds, heavy, configs, clips, advValues())
				}
			})
		}
	}
}

func userRemoval[T kernels.Float](t *testing.T, arch nn.Arch, params *nn.Params, ds *datasets.Dataset, heavy []int, configs []advConfig, clips []float64, values []advValue) {
	d := ds.D
	orig := slices.Clone(ds.X)
	others := []int{1, 2, 3, 4, 5, 6}
	var worst float64
	for ci, cfg := range append(slices.Clone(configs), configs[0]) {
		// The heavy user brings all its records, and, in a last run of the first
		// configuration, a seeded subset of 2 of them (the cap).
		limit := len(heavy)
		if ci == len(configs) {
			limit = 2
		}
		ui := newUserIndex(ds, limit, 1)
		h := newUserHarness[T](t, arch, params, cfg.phys, cfg.reps)
		for _, clip := range clips {
			var without userBatch
			ui.batch(others, 0, &without)
			base, bst := h.run(t, ds, &without, clip)
			if bst.NonFinite != 0 || bst.BatchSize != len(without.rows) {
				t.Fatalf("clean batch: %+v", bst)
			}
			check := func(what string, users []int) {
				var with userBatch
				ui.batch(users, 0, &with)
				if n := len(with.rows) - len(without.rows); n != limit {
					t.Fatalf("%s: the heavy user brings %d records, want %d", what, n, limit)
				}
				got, st := h.run(t, ds, &with, clip)
				if st.NonFinite != 0 && st.NonFinite != limit {
					t.Errorf("%s: %d non-finite records, want 0 or the heavy user's %d", what, st.NonFinite, limit)
				}
				delta := norm2D(diff2D(got, base)) / clip
				worst = max(worst, delta)
				if !(delta <= 1+1e-9) {
					t.Errorf("%s, physical batch %d, %d replicas, C = %g: removing the user moves the sum by %.12g·C", what, cfg.phys, cfg.reps, clip, delta)
				}
			}
			for _, at := range []int{0, 3, 6} {
				users := slices.Insert(slices.Clone(others), at, 0)
				copy(ds.X, orig)
				check(fmt.Sprintf("clean user at %d", at), users)
				for _, v := range values {
					for _, rec := range heavy {
						copy(ds.X, orig)
						if v.single {
							ds.X[rec*d+d/2] = v.v
						} else {
							for j := range d {
								ds.X[rec*d+j] = v.v
							}
						}
						check(fmt.Sprintf("%s in record %d, user at %d", v.name, rec, at), users)
					}
				}
			}
		}
		h.close()
	}
	copy(ds.X, orig)
	t.Logf("largest ‖Δ‖/C: %.12g", worst)
}

// TestUserSingletonsMatchRecords: with every user owning one record, the user-level step's
// clipped sum equals the record-level step's (a second method: the ghost norms and one
// clipped GEMM per dense layer there, materialized user gradients here) to 1e-12 relative in
// float64, with the same statistics; a NaN record is zeroed by both.
func TestUserSingletonsMatchRecords(t *testing.T) {
	const n = 9
	// A dropout model: the user path must give each row its own record's mask, as the record
	// path does (the dropout seeds keyed by the dataset index).
	dropout, err := nn.ParseModelFile([]byte(`{"layers": [{"type": "dense", "units": 6}, {"type": "tanh"}, {"type": "dropout", "rate": 0.5}, {"type": "dense", "units": 4}]}`), []int{5}, 4)
	if err != nil {
		t.Fatal(err)
	}
	// A scatter model whose replicas read the feature cache: the user path must run the net
	// on the cached features its fill wrote, as the record path does.
	models := append(userTestModels()[:3], advModel{name: "dropout", arch: dropout}, advModel{name: "scatter", arch: scatterArch(3)})
	// The grouped and weight-standardized convolutions, shortcuts, dropout and the bce and
	// mse losses: the user path's statistics must use the model's loss, as the record path's.
	for _, m := range extLayerModels() {
		models = append(models, advModel{name: m.name, arch: m.arch})
	}
	for mi, m := range models {
		t.Run(m.name, func(t *testing.T) {
			params, err := nn.NewParams(m.arch, tensor.Float64, uint64(90+mi))
			if err != nil {
				t.Fatal(err)
			}
			ds := randomDataset(m.arch, n, uint64(91+mi), 4)
			idx := []int{0, 1, 2, 3, 4, 5, 6, 7, 8}
			h := newUserHarness[float64](t, m.arch, params, 4, 2)
			defer h.close()
			cache, err := nn.NewFeatureCache(m.arch)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range h.reps {
				r.dropStep = 0x5eed
				r.useFeatures(cache)
			}
			ub := partition(1, 1, 1, 1, 1, 1, 1, 1, 1)
			got, ust := h.run(t, ds, ub, 0.05)
			rows, mask := []int(nil), []float64(nil)
			want := make([][]float64, len(h.grads))
			for p, g := range h.grads {
				want[p] = make([]float64, len(g))
			}
			rst, err := gradStep(h.reps, ds, idx, 4, kernels.ClipBound[float64](0.05), want, rows, mask)
			if err != nil {
				t.Fatal(err)
			}
			for p := range want {
				if e := maxRelErr(got[p], want[p]); !(e <= 1e-12) {
					t.Errorf("param %d: user-level sum rel err %.2g against the record-level sum", p, e)
				}
			}
			if ust != rst {
				t.Errorf("statistics: user-level %+v, record-level %+v", ust, rst)
			}
			if rst.NonFinite != 1 {
				t.Errorf("the NaN record: %d non-finite, want 1", rst.NonFinite)
			}
		})
	}
}

// TestUserBatchCap: a user owning more records than the cap brings a uniform subset of exactly
// the cap, sorted, drawn from its own records, the same whatever the other users in the step,
// different across steps, each record about equally often; a user within the cap brings all.
func TestUserBatchCap(t *testing.T) {
	const n, k = 40, 5
	owner := make([]int, n)
	for i := range owner {
		owner[i] = 0
		if i%4 == 3 {
			owner[i] = 1 + i/4 // users 1..10 own one record each
		}
	}
	ds := &datasets.Dataset{N: n, User: owner, Users: 11}
	ui := newUserIndex(ds, k, 3)
	mine := ui.rec[ui.off[0]:ui.off[1]]
	if len(mine) != 30 {
		t.Fatalf("user 0 owns %d records, want 30", len(mine))
	}
	counts := map[int]int{}
	const steps = 3000
	var prev []int
	for s := range steps {
		var a, b userBatch
		ui.batch([]int{0, 1}, s, &a)
		ui.batch([]int{2, 5, 0}, s, &b)
		sub := a.rows[a.start[0]:a.start[1]]
		if !slices.Equal(sub, b.rows[b.start[2]:b.start[3]]) {
			t.Fatalf("step %d: the subset depends on the other users: %v vs %v", s, sub, b.rows[b.start[2]:b.start[3]])
		}
		if len(sub) != k || !slices.IsSorted(sub) || len(slices.Compact(slices.Clone(sub))) != k {
			t.Fatalf("step %d: subset %v, want %d distinct sorted records", s, sub, k)
		}
		for _, i := range sub {
			if owner[i] != 0 {
				t.Fatalf("step %d: record %d of user %d in user 0's subset", s, i, owner[i])
			}
			counts[i]++
		}
		if s == 1 && slices.Equal(sub, prev) {
			t.Errorf("steps 0 and 1 drew the same subset %v", sub)
		}
		prev = slices.Clone(sub)
		if got := a.rows[a.start[1]:a.start[2]]; !slices.Equal(got, []int{3}) {
			t.Fatalf("user 1 brings %v, want its one record [3]", got)
		}
	}
	// Each of the 30 records is drawn with probability 1/6 per step: 500 ± 4.5σ (σ ≈ 20.4).
	for _, i := range mine {
		if c := counts[i]; c < 408 || c > 592 {
			t.Errorf("record %d drawn %d times in %d steps, want about %d", i, c, steps, steps*k/30)
		}
	}
}

// TestUserChunks: every user's records land in one physical batch, in order, every record once,
// padding masked with gid −1; an empty step is one padded batch.
func TestUserChunks(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	for trial := range 200 {
		phys := 1 + r.IntN(6)
		var sizes []int
		for range r.IntN(8) {
			sizes = append(sizes, 1+r.IntN(phys))
		}
		ub := partition(sizes...)
		rows, mask, gid, k := userChunks(ub, phys, nil, nil, nil)
		if len(rows) != k*phys || len(mask) != k*phys || len(gid) != k*phys || k < 1 {
			t.Fatalf("trial %d: lengths %d %d %d for k = %d, phys %d", trial, len(rows), len(mask), len(gid), k, phys)
		}
		var seen []int
		batchOf := map[int]int{}
		for i := range rows {
			if mask[i] == 0 {
				if gid[i] != -1 || rows[i] != 0 {
					t.Fatalf("trial %d: padding row %d: gid %d row %d", trial, i, gid[i], rows[i])
				}
				continue
			}
			seen = append(seen, rows[i])
			if b, ok := batchOf[gid[i]]; ok && b != i/phys {
				t.Fatalf("trial %d: user %d split over physical batches %d and %d", trial, gid[i], b, i/phys)
			}
			batchOf[gid[i]] = i / phys
		}
		if !slices.Equal(seen, ub.rows) {
			t.Fatalf("trial %d: rows %v, want %v", trial, seen, ub.rows)
		}
	}
}

// groupGhostNorm2 is the ghost form of a user's dense-layer gradient norm,
// ‖[A_u, 1]ᵀE_u‖² = Σ_{i,j∈u}(aᵢ·aⱼ + 1)(eᵢ·eⱼ), from the n rows of a (n×in) and e (n×out).
func groupGhostNorm2(a, e []float64, n, in, out int) float64 {
	var s float64
	for i := range n {
		for j := range n {
			var aa, ee float64
			for k := range in {
				aa += a[i*in+k] * a[j*in+k]
			}
			for k := range out {
				ee += e[i*out+k] * e[j*out+k]
			}
			s += (aa + 1) * ee
		}
	}
	return s
}

// materialNorm2 is ‖[A_u, 1]ᵀE_u‖² of the materialized user gradient, as userGrad forms it.
func materialNorm2(a, e []float64, n, in, out int) (float64, []float64) {
	g := make([]float64, (in+1)*out)
	kernels.Gemm(true, false, in, out, n, 1, a, in, e, out, 0, g[:in*out], out)
	for i := range n {
		for k := range out {
			g[in*out+k] += e[i*out+k]
		}
	}
	return kernels.SqNorm(g), g
}

// TestGroupGhostNormCancellation: the ghost form of a group's norm equals the materialized
// norm on ordinary data (random groups of 1 to 6 rows, to 1e-12), but when a user's records
// have nearly opposite gradients the Gram sums cancel: the ghost form's error is of the order
// of the terms, not of the result, and clipping with it lets the user's summed gradient exceed
// C many times over, while the materialized gradient clipped by its own norm stays within C.
// This is why the user-level step materializes g_u (users.go).
func TestGroupGhostNormCancellation(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 12))
	for trial := range 100 {
		n, in, out := 1+r.IntN(6), 1+r.IntN(5), 1+r.IntN(4)
		a, e := make([]float64, n*in), make([]float64, n*out)
		for j := range a {
			a[j] = r.NormFloat64()
		}
		for j := range e {
			e[j] = r.NormFloat64()
		}
		ghost := groupGhostNorm2(a, e, n, in, out)
		mat, _ := materialNorm2(a, e, n, in, out)
		if relErr(ghost, mat) > 1e-12 {
			t.Fatalf("trial %d: ghost %v, materialized %v", trial, ghost, mat)
		}
	}
	// Two records, the second's error nearly the opposite of the first's: g_u = a⊗(e₁ + e₂)
	// is 1e-9 of each record's gradient.
	const clip = 1.0
	worst := 0.0
	for trial := range 50 {
		in, out := 4, 3
		a, e := make([]float64, 2*in), make([]float64, 2*out)
		for k := range in {
			a[k] = 1e6 * r.NormFloat64()
			a[in+k] = a[k]
		}
		for k := range out {
			e[k] = 1e6 * r.NormFloat64()
			e[out+k] = -e[k] * (1 - 1e-9)
		}
		mat, g := materialNorm2(a, e, 2, in, out)
		ghost := groupGhostNorm2(a, e, 2, in, out)
		c := []float64{0}
		kernels.ClipCoefs(c, []float64{mat}, nil, kernels.ClipBound[float64](clip))
		if got := c[0] * math.Sqrt(kernels.SqNorm(g)); !(got <= clip) {
			t.Fatalf("trial %d: the materialized clip gives ‖c·g_u‖ = %v > C", trial, got)
		}
		kernels.ClipCoefs(c, []float64{ghost}, nil, kernels.ClipBound[float64](clip))
		worst = max(worst, c[0]*math.Sqrt(mat)/clip)
	}
	if !(worst > 2) {
		t.Errorf("clipping with the ghost form kept ‖c·g_u‖ ≤ %.3g·C: the cancellation this test shows did not happen", worst)
	}
	t.Logf("clipped with the ghost form, ‖c·g_u‖ reached %.3g·C", worst)
}

// BenchmarkUserStep compares a user-level step with the record-level step on an MNIST-sized
// MLP (784 → 256 → 10, float32) over 256 records: users of one record each, and of eight.
func BenchmarkUserStep(b *testing.B) {
	arch := nn.MLP([]int{784}, 10, []int{256}, nn.Tanh)
	params, err := nn.NewParams(arch, tensor.Float32, 1)
	if err != nil {
		b.Fatal(err)
	}
	const n = 256
	ds := randomDataset(arch, n, 2)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	rep, err := newReplica[float32](arch, params, n)
	if err != nil {
		b.Fatal(err)
	}
	defer rep.net.Close()
	reps := []*replica[float32]{rep}
	grads := make([][]float64, len(params.List))
	for p, q := range params.List {
		grads[p] = make([]float64, q.Value.Shape().TotalSize())
	}
	b.Run("records", func(b *testing.B) {
		for b.Loop() {
			if _, err := gradStep(reps, ds, idx, n, 1, grads, nil, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, size := range []int{1, 8} {
		sizes := make([]int, n/size)
		for i := range sizes {
			sizes[i] = size
		}
		ub := partition(sizes...)
		var bufs userChunkBufs
		b.Run(fmt.Sprintf("users-of-%d", size), func(b *testing.B) {
			for b.Loop() {
				if _, err := gradStepUsers(reps, ds, ub, n, 1, grads, &bufs, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
