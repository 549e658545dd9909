package engine

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/engine/sampler"
	"github.com/dpsgd/dpsgd/kernels"
	"gorgonia.org/tensor"
)

// augTestModels are image-input models with every rule kind an image model uses: the CNN
// preset (convolutions, dense), dense layers with GroupNorm and LayerNorm after a flatten (a
// non-square image), and convolutions with GroupNorm, LayerNorm and average pooling.
func augTestModels() []advModel {
	return []advModel{
		{"cnn", nn.CNN([]int{1, 14, 14}, 3, []int{4}, nn.ReLU), false},
		{"stack-flatten-image", layerTestModels()[4].arch, true},
		{"stack-dense-layernorm", nn.Arch{Kind: nn.KindStack, Input: []int{2, 6, 5}, Classes: 3, Stack: []nn.LayerSpec{
			{Type: "flatten"}, {Type: "dense", Units: 5}, {Type: "layernorm"}, {Type: "gelu"}, {Type: "dense", Units: 3},
		}}, true},
		{"stack-groupnorm-avgpool", layerTestModels()[2].arch, true},
	}
}

// padCropFlip is the augmentation's definition computed another way: the image padded by pad
// zeros on every side, the H×W window at (pad+dy, pad+dx) cut out, then each row reversed
// when flip.
func padCropFlip(src []float32, c, h, w, pad, dy, dx int, flip bool) []float64 {
	ph, pw := h+2*pad, w+2*pad
	padded := make([]float64, c*ph*pw)
	for ch := range c {
		for y := range h {
			for x := range w {
				padded[(ch*ph+y+pad)*pw+x+pad] = float64(src[(ch*h+y)*w+x])
			}
		}
	}
	out := make([]float64, c*h*w)
	for ch := range c {
		for y := range h {
			for x := range w {
				out[(ch*h+y)*w+x] = padded[(ch*ph+y+pad+dy)*pw+x+pad+dx]
			}
			if flip {
				slices.Reverse(out[(ch*h+y)*w : (ch*h+y+1)*w])
			}
		}
	}
	return out
}

// TestAugmentView: a view equals the padded image cropped at its offset (and mirrored), for
// every offset in [−pad, pad]² and both flips, on a non-square image of several channels with
// distinct pixels (so that a pixel moved to the wrong place is seen); a flip applied twice is
// the identity; the zero offset without flip is the image itself; a pad as large as the image
// leaves a view of zeros at the extreme offsets.
func TestAugmentView(t *testing.T) {
	const c, h, w, pad = 2, 5, 7, 3
	src := make([]float32, c*h*w)
	for i := range src {
		src[i] = float32(i + 1)
	}
	dst := make([]float64, c*h*w)
	for dy := -pad; dy <= pad; dy++ {
		for dx := -pad; dx <= pad; dx++ {
			for _, flip := range []bool{false, true} {
				augmentView(dst, src, c, h, w, dy, dx, flip)
				want := padCropFlip(src, c, h, w, pad, dy, dx, flip)
				if !slices.Equal(dst, want) {
					t.Fatalf("(dy, dx) = (%d, %d), flip %v: view %v, want %v", dy, dx, flip, dst, want)
				}
			}
		}
	}
	augmentView(dst, src, c, h, w, 0, 0, false)
	for i, v := range src {
		if dst[i] != float64(v) {
			t.Fatalf("identity view differs at %d", i)
		}
	}
	once := make([]float32, len(src))
	augmentView(once, src, c, h, w, 0, 0, true)
	if slices.Equal(once, src) {
		t.Fatal("a flip left the image unchanged")
	}
	twice := make([]float32, len(src))
	augmentView(twice, once, c, h, w, 0, 0, true)
	if !slices.Equal(twice, src) {
		t.Errorf("a flip twice: %v, want the image %v", twice, src)
	}
	augmentView(dst, src, c, h, w, h, 0, false)
	for _, v := range dst {
		if v != 0 {
			t.Fatalf("translated by the image's height: %v, want zeros", dst)
		}
	}
}

// TestAugmentDraws: the views' offsets are in [−pad, pad], each offset and both flips occur
// about equally often (χ² over 20000 draws), a draw is a function of (seed, step, example,
// view) — the same for the same four, different when any one changes — and the views of an
// example in a physical batch depend neither on the other examples of the step nor on their
// values (the first example's features hostile).
func TestAugmentDraws(t *testing.T) {
	const pad = 2
	a := &augmenter{k: 4, aug: Augment{Pad: pad, Flip: true}, c: 1, h: 6, w: 6, seed: 7}
	counts := make([]int, (2*pad+1)*(2*pad+1)*2)
	const draws = 20000
	for i := range draws {
		dy, dx, flip := a.draw(i/100, i%100, i%4)
		if dy < -pad || dy > pad || dx < -pad || dx > pad {
			t.Fatalf("offset (%d, %d) outside [−%d, %d]", dy, dx, pad, pad)
		}
		f := 0
		if flip {
			f = 1
		}
		counts[((dy+pad)*(2*pad+1)+dx+pad)*2+f]++
	}
	exp := float64(draws) / float64(len(counts))
	var chi2 float64
	for _, n := range counts {
		chi2 += (float64(n) - exp) * (float64(n) - exp) / exp
	}
	// 49 degrees of freedom: P(χ² > 90) < 1e-3.
	if chi2 > 90 {
		t.Errorf("offsets and flips not uniform: χ² = %.1f over %d cells (%v)", chi2, len(counts), counts)
	}
	key := func(a *augmenter, step, ex, view int) string {
		dy, dx, flip := a.draw(step, ex, view)
		return fmt.Sprint(dy, dx, flip)
	}
	// Over 16 neighbouring keys, changing one coordinate changes the draw at least once
	// (each draw is one of 50: all 16 equal by chance has probability 50⁻¹⁵).
	b := &augmenter{k: 4, aug: a.aug, c: 1, h: 6, w: 6, seed: 8}
	for _, tc := range []struct {
		name string
		f    func(i int) string
	}{
		{"step", func(i int) string { return key(a, 100+i, 3, 1) }},
		{"example", func(i int) string { return key(a, 3, 100+i, 1) }},
		{"view", func(i int) string { return key(a, 3, 1, i) }},
		{"seed", func(i int) string { return key([]*augmenter{a, b}[i%2], 3, i/2, 1) }},
	} {
		seen := map[string]bool{}
		for i := range 16 {
			seen[tc.f(i)] = true
		}
		if len(seen) < 2 {
			t.Errorf("draws along %s: always %v", tc.name, seen)
		}
	}
	if key(a, 5, 6, 2) != key(&augmenter{k: 4, aug: a.aug, c: 1, h: 6, w: 6, seed: 7}, 5, 6, 2) {
		t.Error("the same (seed, step, example, view) drew two views")
	}

	// Views in a batch: example 1's and 2's rows are the same whether example 0 (with hostile
	// features) is in the step or not.
	ds := randomDataset(nn.CNN([]int{1, 6, 6}, 3, []int{4}, nn.ReLU), 3, 5)
	fill := func(idx []int) map[int][]float64 {
		var ub userBatch
		a.batch(idx, &ub)
		rows, mask, gid, _ := userChunks(&ub, len(ub.rows)+1, nil, nil, nil)
		x := make([]float64, len(rows)*ds.D)
		fillViews(x, ds, rows, mask, gid, &viewStep{a: a, step: 9})
		out := map[int][]float64{}
		for i, r := range rows {
			if mask[i] != 0 {
				out[r] = append(out[r], x[i*ds.D:(i+1)*ds.D]...)
			}
		}
		return out
	}
	base := fill([]int{1, 2})
	for j := range ds.D {
		ds.X[j] = float32(math.NaN())
	}
	for _, idx := range [][]int{{0, 1, 2}, {1, 0, 2}, {1, 2, 0}} {
		with := fill(idx)
		for _, ex := range []int{1, 2} {
			if !slices.Equal(with[ex], base[ex]) {
				t.Errorf("step %v: example %d's views changed with example 0 in the step", idx, ex)
			}
		}
		if len(with[0]) != a.k*ds.D {
			t.Errorf("step %v: example 0 has %d values of views, want %d", idx, len(with[0]), a.k*ds.D)
		}
	}
	// And the K views of one example are not all the same.
	if v := base[1]; slices.Equal(v[:ds.D], v[ds.D:2*ds.D]) && slices.Equal(v[:ds.D], v[2*ds.D:3*ds.D]) && slices.Equal(v[:ds.D], v[3*ds.D:]) {
		t.Error("an example's 4 views are identical")
	}
}

// augOracle returns, per example of ds, the mean over its K views (view v of example i at
// step step, built by padCropFlip) of the batch-1 oracle's gradients.
func augOracle(t *testing.T, arch nn.Arch, params *nn.Params, ds *datasets.Dataset, a *augmenter, step int) [][][]float64 {
	t.Helper()
	oracle, err := nn.NewGradOracle(arch, params)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][][]float64, ds.N)
	for i := range ds.N {
		for v := range a.k {
			dy, dx, flip := a.draw(step, i, v)
			view := padCropFlip(ds.X[i*ds.D:(i+1)*ds.D], a.c, a.h, a.w, a.aug.Pad, dy, dx, flip)
			xshape := []int{1, arch.InputSize()}
			if arch.ImageInput() {
				xshape = append([]int{1}, arch.Input...)
			}
			x := tensor.New(tensor.WithShape(xshape...), tensor.WithBacking(view))
			y := tensor.New(tensor.WithShape(1, arch.Classes), tensor.Of(tensor.Float64))
			y.Data().([]float64)[ds.Y[i]] = 1
			g, err := oracle.Grad(x, y)
			if err != nil {
				t.Fatal(err)
			}
			if out[i] == nil {
				out[i] = make([][]float64, len(g))
				for p := range g {
					out[i][p] = make([]float64, len(g[p]))
				}
			}
			for p := range g {
				for j, u := range g[p] {
					out[i][p][j] += u / float64(a.k)
				}
			}
		}
	}
	return out
}

// TestAugMultAgainstOracle: for every image model (dense, convolution, LayerNorm, GroupNorm),
// K = 1, 3 and 4 views with translation and flips, physical batches that hold one, two or all
// examples (padding included) over 1 or 2 replicas, the augmented step's clipped sum equals
// Σᵢ min(1, C/‖ḡᵢ‖)·ḡᵢ with ḡᵢ the mean of the batch-1 oracle's gradients of example i's
// views (float64, 1e-9 relative), the clip at 0.9× the median norm so that some examples are
// clipped; the statistics count examples.
func TestAugMultAgainstOracle(t *testing.T) {
	const n, step = 5, 11
	for mi, m := range augTestModels() {
		t.Run(m.name, func(t *testing.T) {
			params, err := nn.NewParams(m.arch, tensor.Float64, uint64(mi+3))
			if err != nil {
				t.Fatal(err)
			}
			randomizeParams(params, uint64(mi+3))
			ds := randomDataset(m.arch, n, uint64(mi+30))
			in := m.arch.Input
			for _, k := range []int{1, 3, 4} {
				a := &augmenter{k: k, aug: Augment{Pad: 2, Flip: true}, c: in[0], h: in[1], w: in[2], seed: uint64(40 + k)}
				per := augOracle(t, m.arch, params, ds, a, step)
				norms := make([]float64, n)
				for i := range n {
					for _, g := range per[i] {
						norms[i] += kernels.SqNorm(g)
					}
				}
				clip := 0.9 * math.Sqrt(median(norms))
				want := make([][]float64, len(per[0]))
				for p := range want {
					want[p] = make([]float64, len(per[0][p]))
				}
				clipped := 0
				for i := range n {
					c := math.Min(1, clip/math.Sqrt(norms[i]))
					if c < 1 {
						clipped++
					}
					for p := range want {
						for j, v := range per[i][p] {
							want[p][j] += c * v
						}
					}
				}
				idx := []int{3, 0, 4, 1, 2}
				for _, cfg := range []advConfig{{k, 1}, {2*k + 1, 2}, {n * k, 1}} {
					h := newUserHarness[float64](t, m.arch, params, cfg.phys, cfg.reps)
					var ub userBatch
					a.batch(idx, &ub)
					st, err := gradStepUsers(h.reps, ds, &ub, h.phys, clip, h.grads, &h.bufs, &viewStep{a: a, step: step})
					h.close()
					if err != nil {
						t.Fatal(err)
					}
					for p := range want {
						if e := maxRelErr(h.grads[p], want[p]); !(e <= 1e-9) {
							t.Errorf("K = %d, physical batch %d, %d replicas, param %s: clipped sum rel err %.2g", k, cfg.phys, cfg.reps, params.List[p].Name, e)
						}
					}
					if st.BatchSize != n || st.Clipped != clipped || st.NonFinite != 0 || clipped == 0 {
						t.Errorf("K = %d, physical batch %d: statistics %+v, want %d examples, %d clipped (> 0)", k, cfg.phys, st, n, clipped)
					}
				}
			}
		})
	}
}

// TestAugMultIdentityViewsMatchRecords: with K = 2 views and no augmentation, both views are
// the record, their mean gradient is the record's gradient, and the augmented step's clipped
// sum equals the record-level step's (ghost norms and clipped GEMMs there, materialized
// means here) to 1e-12, with the same statistics (but the loss, summed per example in both);
// a NaN record is zeroed by both.
func TestAugMultIdentityViewsMatchRecords(t *testing.T) {
	const n = 7
	models := augTestModels()[:2]
	// The grouped and weight-standardized convolutions, shortcuts, dropout (an example's views
	// share its mask) and the mse loss, whose statistics must be the model's loss.
	for _, m := range extLayerModels() {
		if m.arch.ImageInput() {
			models = append(models, advModel{name: m.name, arch: m.arch})
		}
	}
	for mi, m := range models {
		t.Run(m.name, func(t *testing.T) {
			params, err := nn.NewParams(m.arch, tensor.Float64, uint64(50+mi))
			if err != nil {
				t.Fatal(err)
			}
			ds := randomDataset(m.arch, n, uint64(51+mi), 2)
			idx := []int{0, 1, 2, 3, 4, 5, 6}
			in := m.arch.Input
			a := &augmenter{k: 2, c: in[0], h: in[1], w: in[2], seed: 1}
			h := newUserHarness[float64](t, m.arch, params, 4, 2)
			defer h.close()
			var ub userBatch
			a.batch(idx, &ub)
			clip := kernels.ClipBound[float64](0.05)
			ast, err := gradStepUsers(h.reps, ds, &ub, 4, clip, h.grads, &h.bufs, &viewStep{a: a, step: 3})
			if err != nil {
				t.Fatal(err)
			}
			got := make([][]float64, len(h.grads))
			for p, g := range h.grads {
				got[p] = slices.Clone(g)
			}
			rst, err := gradStep(h.reps, ds, idx, 4, clip, h.grads, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			for p := range got {
				if e := maxRelErr(got[p], h.grads[p]); !(e <= 1e-12) {
					t.Errorf("param %d: augmented sum rel err %.2g against the record-level sum", p, e)
				}
			}
			if e := relErr(ast.Loss, rst.Loss); !(e <= 1e-12) {
				t.Errorf("loss %v, record-level %v", ast.Loss, rst.Loss)
			}
			ast.Loss = rst.Loss
			if ast != rst || rst.NonFinite != 1 {
				t.Errorf("statistics: augmented %+v, record-level %+v (want equal, one non-finite)", ast, rst)
			}
		})
	}
}

// TestAugMultRemovalSensitivity: removing one example (K = 3 views, translation and flips)
// moves the augmented step's clipped sum by at most C (1e-9·C: float64 sums reordered), for
// every image model, float32 and float64, physical batches of one, two and all the examples'
// views over 1 or 2 replicas, the example drawn first, in the middle or last, with its
// features clean and with each adversarial value (NaN, ±Inf, 1e30, ±3.4e38, −0, subnormals,
// one huge or NaN feature) in it; the other examples are never non-finite.
func TestAugMultRemovalSensitivity(t *testing.T) {
	const n, k = 6, 3
	clips := []float64{1e-3, 1}
	if testing.Short() {
		clips = clips[1:]
	}
	for mi, m := range augTestModels() {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			t.Run(fmt.Sprintf("%s/%v", m.name, dt), func(t *testing.T) {
				params, err := nn.NewParams(m.arch, dt, uint64(70+mi))
				if err != nil {
					t.Fatal(err)
				}
				ds := randomDataset(m.arch, n, uint64(80+mi))
				if dt == tensor.Float32 {
					augRemoval[float32](t, m.arch, params, ds, k, clips)
				} else {
					augRemoval[float64](t, m.arch, params, ds, k, clips)
				}
			})
		}
	}
}

func augRemoval[T kernels.Float](t *testing.T, arch nn.Arch, params *nn.Params, ds *datasets.Dataset, k int, clips []float64) {
	d := ds.D
	orig := slices.Clone(ds.X)
	others := []int{1, 2, 3, 4, 5}
	in := arch.Input
	a := &augmenter{k: k, aug: Augment{Pad: 2, Flip: true}, c: in[0], h: in[1], w: in[2], seed: 3}
	v := &viewStep{a: a, step: 2}
	var worst float64
	for _, cfg := range []advConfig{{k, 1}, {2*k + 1, 2}, {ds.N * k, 1}} {
		h := newUserHarness[T](t, arch, params, cfg.phys, cfg.reps)
		run := func(idx []int, clip float64) ([][]float64, StepStats) {
			var ub userBatch
			a.batch(idx, &ub)
			st, err := gradStepUsers(h.reps, ds, &ub, h.phys, kernels.ClipBound[T](clip), h.grads, &h.bufs, v)
			if err != nil {
				t.Fatal(err)
			}
			out := make([][]float64, len(h.grads))
			for p, g := range h.grads {
				out[p] = slices.Clone(g)
			}
			return out, st
		}
		for _, clip := range clips {
			copy(ds.X, orig)
			base, bst := run(others, clip)
			if bst.NonFinite != 0 || bst.BatchSize != len(others) {
				t.Fatalf("clean batch: %+v", bst)
			}
			check := func(what string, idx []int) {
				got, st := run(idx, clip)
				if st.NonFinite > 1 || st.BatchSize != len(idx) {
					t.Errorf("%s: statistics %+v: want at most the one example non-finite, %d examples", what, st, len(idx))
				}
				delta := norm2D(diff2D(got, base)) / clip
				worst = max(worst, delta)
				if !(delta <= 1+1e-9) {
					t.Errorf("%s, physical batch %d, %d replicas, C = %g: removing the example moves the sum by %.12g·C", what, cfg.phys, cfg.reps, clip, delta)
				}
			}
			for _, at := range []int{0, 2, 5} {
				idx := slices.Insert(slices.Clone(others), at, 0)
				copy(ds.X, orig)
				check(fmt.Sprintf("clean example at %d", at), idx)
				for _, val := range advValues() {
					copy(ds.X, orig)
					if val.single {
						ds.X[d/2] = val.v
					} else {
						for j := range d {
							ds.X[j] = val.v
						}
					}
					check(fmt.Sprintf("%s in the example at %d", val.name, at), idx)
				}
			}
		}
		h.close()
	}
	copy(ds.X, orig)
	t.Logf("largest ‖Δ‖/C: %.12g", worst)
}

// augTrainData is a small image training set for Train.
func augTrainData(arch nn.Arch, n int) *datasets.Dataset {
	ds := randomDataset(arch, n, 12)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range ds.X {
		ds.X[i] = float32(r.Float64())
	}
	return ds
}

// TestAugMultTrain: Train with K = 1 (and AugMult 0) gives the record-level run's parameters
// bit for bit; K = 3 with translation and flips runs, is reproducible from the seed, differs
// from K = 1 and from another seed's views, and reports examples (not views) seen.
func TestAugMultTrain(t *testing.T) {
	arch := nn.CNN([]int{1, 14, 14}, 3, []int{4}, nn.ReLU)
	train, test := augTrainData(arch, 40), augTrainData(arch, 10)
	run := func(k int, aug Augment, seed uint64) *Result {
		t.Helper()
		cfg := Config{Arch: arch, PhysicalBatch: 8, Replicas: 2, Epochs: 2, Clip: 1, Sigma: 1, Seed: seed,
			Optimizer: OptimizerConfig{Name: "sgd", LR: 0.5}, AugMult: k, Augment: aug}
		smp, err := sampler.NewPoisson(train.N, 8.0/float64(train.N), seed)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Train(context.Background(), cfg, train, test, smp, poissonPrivacy(t, smp.SampleRate(), 1, nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	zero, one := run(0, Augment{}, 1), run(1, Augment{}, 1)
	if zero.ParamsDigest != one.ParamsDigest {
		t.Errorf("AugMult 0 and 1: digests %s and %s", zero.ParamsDigest, one.ParamsDigest)
	}
	aug := Augment{Pad: 2, Flip: true}
	k3, again, seed2 := run(3, aug, 1), run(3, aug, 1), run(3, aug, 2)
	if k3.ParamsDigest != again.ParamsDigest {
		t.Errorf("K = 3 twice from one seed: digests %s and %s", k3.ParamsDigest, again.ParamsDigest)
	}
	if k3.ParamsDigest == one.ParamsDigest || k3.ParamsDigest == seed2.ParamsDigest {
		t.Errorf("K = 3: digest %s equals K = 1's or another seed's", k3.ParamsDigest)
	}
	var seen1, seen3 int
	for e := range one.History {
		seen1 += one.History[e].ExamplesSeen
		seen3 += k3.History[e].ExamplesSeen
	}
	if seen3 < 20 || seen3 > 140 || seen1 < 20 || seen1 > 140 {
		t.Errorf("examples seen: K = 1 %d, K = 3 %d: want examples (about 80), not views", seen1, seen3)
	}
}

// TestAugMultRefusals: the configurations that cannot run are refused with an error naming
// the field and the valid range.
func TestAugMultRefusals(t *testing.T) {
	img := nn.CNN([]int{1, 14, 14}, 3, []int{4}, nn.ReLU)
	base := Config{Arch: img, PhysicalBatch: 8, Replicas: 1, Epochs: 1, Clip: 1, Sigma: 1, Optimizer: OptimizerConfig{Name: "sgd", LR: 0.1}}
	for _, tc := range []struct {
		name string
		mod  func(c *Config)
		want string
	}{
		{"K 65", func(c *Config) { c.AugMult = 65 }, "augmentation multiplicity 65: want a value in [1, 64]"},
		{"K −1", func(c *Config) { c.AugMult = -1 }, "want a value in [1, 64]"},
		{"pad −1", func(c *Config) { c.AugMult, c.Augment.Pad = 2, -1 }, "augment pad -1: want ≥ 0"},
		{"K > phys", func(c *Config) { c.AugMult = 9 }, "want at most the physical batch 8"},
		{"user-level", func(c *Config) { c.AugMult, c.UserLevel = 2, true }, "user-level"},
		{"checkpoint", func(c *Config) { c.AugMult, c.Checkpoint.Path = 2, "x" }, "checkpoints of an augmented run"},
	} {
		c := base
		tc.mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	c := base
	c.AugMult = 2
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := CUDASupport(&c); err == nil || !strings.Contains(err.Error(), "CPU only") {
		t.Errorf("CUDASupport with AugMult 2: %v", err)
	}
	if _, err := NewLearner(c); err == nil || !strings.Contains(err.Error(), "augmentation multiplicity 2") {
		t.Errorf("NewLearner with AugMult 2: %v", err)
	}
	// At Train: the training set must be images (whatever the model), at least Pad pixels
	// high and wide.
	smp, err := sampler.NewPoisson(10, 0.4, 1)
	if err != nil {
		t.Fatal(err)
	}
	mlp := c
	mlp.Arch = nn.MLP([]int{14 * 14}, 3, []int{4}, nn.ReLU)
	for _, tc := range []struct {
		name  string
		cfg   Config
		shape []int
		pad   int
		want  string
	}{
		{"tabular", mlp, []int{14 * 14}, 0, "images only ([C, H, W] examples), the training set's examples have shape [196]"},
		{"pad 15", c, []int{1, 14, 14}, 15, "augment pad 15: want a value in [0, 14]"},
		{"pad 15, mlp", mlp, []int{1, 14, 14}, 15, "augment pad 15: want a value in [0, 14]"},
	} {
		ds := augTrainData(img, 10)
		ds.Shape = tc.shape
		tc.cfg.Augment.Pad = tc.pad
		if _, err := Train(context.Background(), tc.cfg, ds, ds, smp, poissonPrivacy(t, 0.4, 1, nil), nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Train, %s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}
