package datasets

import (
	"math"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// centroids returns the per-class mean feature vectors of d and the pooled within-class
// variance per coordinate.
func centroids(d *Dataset) (mu [][]float64, pooledVar float64) {
	mu = make([][]float64, d.Classes)
	cnt := make([]int, d.Classes)
	for c := range mu {
		mu[c] = make([]float64, d.D)
	}
	for i := range d.N {
		c := d.Y[i]
		cnt[c]++
		for j, v := range d.Row(i) {
			mu[c][j] += float64(v)
		}
	}
	for c := range mu {
		for j := range mu[c] {
			mu[c][j] /= float64(cnt[c])
		}
	}
	var ss float64
	for i := range d.N {
		for j, v := range d.Row(i) {
			e := float64(v) - mu[d.Y[i]][j]
			ss += e * e
		}
	}
	return mu, ss / float64((d.N-d.Classes)*d.D)
}

func nearestCentroidAccuracy(mu [][]float64, d *Dataset) float64 {
	right := 0
	for i := range d.N {
		best, bestC := math.Inf(1), -1
		for c := range mu {
			var s float64
			for j, v := range d.Row(i) {
				e := float64(v) - mu[c][j]
				s += e * e
			}
			if s < best {
				best, bestC = s, c
			}
		}
		if bestC == d.Y[i] {
			right++
		}
	}
	return float64(right) / float64(d.N)
}

func TestSyntheticDefault(t *testing.T) {
	cfg := DefaultSynthetic()
	train, test, err := Synthetic(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []*Dataset{train, test} {
		if err := d.Validate(); err != nil {
			t.Fatal(err)
		}
		if d.D != 32 || d.Classes != 10 || !slices.Equal(d.Shape, []int{32}) {
			t.Fatalf("%s: D=%d Classes=%d Shape=%v", d.Name, d.D, d.Classes, d.Shape)
		}
	}
	if train.N != 20000 || test.N != 5000 {
		t.Fatalf("N = %d / %d", train.N, test.N)
	}
	// Unit scale: E[x²] = 1 by construction.
	var ss float64
	for _, v := range train.X {
		ss += float64(v) * float64(v)
	}
	if m2 := ss / float64(len(train.X)); math.Abs(m2-1) > 0.05 {
		t.Errorf("mean square feature %.4f, want ≈ 1", m2)
	}
	// Classes roughly balanced (uniform draws: binomial, 5 SE).
	p := 0.1
	se := math.Sqrt(p * (1 - p) / float64(train.N))
	for c, n := range train.ClassCounts() {
		if f := float64(n) / float64(train.N); math.Abs(f-p) > 5*se {
			t.Errorf("class %d frequency %.4f, want 0.1 ± %.4f", c, f, 5*se)
		}
	}

	// Within-class variance: σ² = 1/(1 + Separation²/Features).
	mu, v := centroids(train)
	wantVar := 1 / (1 + 9.0/32)
	if math.Abs(v-wantVar) > 0.01 {
		t.Errorf("pooled within-class variance %.4f, want %.4f", v, wantVar)
	}
	// Centres at distance Separation·σ from the origin.
	for c := range mu {
		var r2 float64
		for _, x := range mu[c] {
			r2 += x * x
		}
		if r := math.Sqrt(r2); math.Abs(r-3*math.Sqrt(wantVar)) > 0.1 {
			t.Errorf("class %d centre at radius %.3f, want %.3f", c, r, 3*math.Sqrt(wantVar))
		}
	}

	// Accuracy of the nearest-centroid rule against the Gaussian pairwise-error bounds: for a
	// class c the error lies between max_c' Φ(-Δ/2σ) and Σ_c' Φ(-Δ/2σ) (union bound),
	// Δ = ‖μ_c − μ_c'‖.
	acc := nearestCentroidAccuracy(mu, test)
	norm := distuv.UnitNormal
	sigma := math.Sqrt(v)
	var lo, hi float64
	for c := range mu {
		var mx, sum float64
		for c2 := range mu {
			if c2 == c {
				continue
			}
			var d2 float64
			for j := range mu[c] {
				e := mu[c][j] - mu[c2][j]
				d2 += e * e
			}
			pe := norm.CDF(-math.Sqrt(d2) / (2 * sigma))
			mx = math.Max(mx, pe)
			sum += pe
		}
		lo += mx / float64(len(mu))
		hi += sum / float64(len(mu))
	}
	seAcc := math.Sqrt(acc * (1 - acc) / float64(test.N))
	errRate := 1 - acc
	if errRate < lo-4*seAcc || errRate > hi+4*seAcc+0.01 {
		t.Errorf("nearest-centroid error %.4f outside the Gaussian bounds [%.4f, %.4f]", errRate, lo, hi)
	}
	if acc < 0.6 || acc > 0.97 {
		t.Errorf("nearest-centroid accuracy %.4f, want clearly above chance (0.1) but not trivial (0.6–0.97)", acc)
	}
	t.Logf("default synthetic: nearest-centroid test accuracy %.4f (error bounds [%.4f, %.4f])", acc, lo, hi)
}

func TestSyntheticReproducible(t *testing.T) {
	cfg := SyntheticConfig{Train: 300, Test: 100, Features: 5, Classes: 3, Seed: 42}
	a1, b1, err := Synthetic(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a2, b2, _ := Synthetic(cfg)
	if !slices.Equal(a1.X, a2.X) || !slices.Equal(a1.Y, a2.Y) || !slices.Equal(b1.X, b2.X) {
		t.Error("same config gave different data")
	}
	cfg.Seed = 43
	a3, _, _ := Synthetic(cfg)
	if slices.Equal(a1.X, a3.X) {
		t.Error("different seeds gave the same data")
	}
	// Separate streams: the test set does not depend on Train, and a smaller training set is a
	// prefix of a larger one.
	cfg.Seed = 42
	cfg.Train = 500
	a4, b4, _ := Synthetic(cfg)
	if !slices.Equal(b1.X, b4.X) || !slices.Equal(b1.Y, b4.Y) {
		t.Error("test set changed with Train")
	}
	if !slices.Equal(a1.X, a4.X[:len(a1.X)]) || !slices.Equal(a1.Y, a4.Y[:a1.N]) {
		t.Error("training set for Train=300 is not a prefix of the one for Train=500")
	}
	// Separation 0 selects the default.
	cfg.Separation = DefaultSeparation
	a5, _, _ := Synthetic(cfg)
	if !slices.Equal(a4.X, a5.X) {
		t.Error("Separation 0 is not the default")
	}
}

// TestSyntheticLabelNoise: relabelling is independent of the features, so a fixed classifier's
// accuracy becomes (1-ρ)·a + ρ/C.
func TestSyntheticLabelNoise(t *testing.T) {
	cfg := SyntheticConfig{Train: 4000, Test: 8000, Features: 16, Classes: 4, Seed: 3, Separation: 2.5}
	train, test, err := Synthetic(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mu, _ := centroids(train)
	a := nearestCentroidAccuracy(mu, test)
	cfg.LabelNoise = 0.4
	_, noisy, err := Synthetic(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := nearestCentroidAccuracy(mu, noisy)
	want := 0.6*a + 0.4/4
	if se := math.Sqrt(2 * want * (1 - want) / float64(test.N)); math.Abs(got-want) > 4*se+0.005 {
		t.Errorf("accuracy with label noise %.4f, want (1-ρ)a + ρ/C = %.4f (a = %.4f)", got, want, a)
	}
	cfg.LabelNoise = 1
	_, pure, _ := Synthetic(cfg)
	if acc := nearestCentroidAccuracy(mu, pure); math.Abs(acc-0.25) > 0.025 {
		t.Errorf("accuracy with LabelNoise 1: %.4f, want chance 0.25", acc)
	}
}

// TestSyntheticClusters: with several clusters per class the class spread exceeds the
// within-cluster variance by the spread of the centres, r²(1-1/K)/D per coordinate on
// average (for nearly orthogonal centres).
func TestSyntheticClusters(t *testing.T) {
	cfg := SyntheticConfig{Train: 20000, Test: 10, Features: 64, Classes: 2, Seed: 5, Separation: 4, ClustersPerClass: 4}
	train, _, err := Synthetic(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := train.Validate(); err != nil {
		t.Fatal(err)
	}
	_, v := centroids(train)
	sigma2 := 1 / (1 + 16.0/64)
	r2 := 16 * sigma2
	want := sigma2 + r2*(1-1.0/4)/64
	if math.Abs(v-want) > 0.05 {
		t.Errorf("within-class variance %.4f, want ≈ %.4f (σ² = %.4f)", v, want, sigma2)
	}
}

func TestSyntheticErrors(t *testing.T) {
	base := SyntheticConfig{Train: 10, Test: 10, Features: 3, Classes: 2}
	cases := []struct {
		mutate func(c *SyntheticConfig)
		want   string
	}{
		{func(c *SyntheticConfig) { c.Train = 0 }, "Train = 0"},
		{func(c *SyntheticConfig) { c.Test = -1 }, "Test = -1"},
		{func(c *SyntheticConfig) { c.Features = 0 }, "Features = 0"},
		{func(c *SyntheticConfig) { c.Classes = 1 }, "Classes = 1"},
		{func(c *SyntheticConfig) { c.Separation = -1 }, "Separation = -1"},
		{func(c *SyntheticConfig) { c.Separation = math.Inf(1) }, "Separation = +Inf"},
		{func(c *SyntheticConfig) { c.Separation = math.NaN() }, "Separation = NaN"},
		{func(c *SyntheticConfig) { c.ClustersPerClass = -2 }, "ClustersPerClass = -2"},
		{func(c *SyntheticConfig) { c.LabelNoise = 1.5 }, "LabelNoise = 1.5"},
		{func(c *SyntheticConfig) { c.LabelNoise = math.NaN() }, "LabelNoise = NaN"},
		{func(c *SyntheticConfig) { c.Train = 1 << 40 }, "at most"},
		{func(c *SyntheticConfig) { c.Classes = 1 << 30; c.ClustersPerClass = 1 << 30 }, "at most"},
	}
	for _, c := range cases {
		cfg := base
		c.mutate(&cfg)
		_, _, err := Synthetic(cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Synthetic(%+v) = %v, want an error containing %q", cfg, err, c.want)
		}
	}
	// Test = 0 is allowed: an empty test set.
	cfg := base
	cfg.Test = 0
	_, te, err := Synthetic(cfg)
	if err != nil || te.N != 0 || te.Validate() != nil {
		t.Errorf("Test = 0: %v", err)
	}
}

func BenchmarkSynthetic(b *testing.B) {
	cfg := DefaultSynthetic()
	b.SetBytes(int64((cfg.Train + cfg.Test) * cfg.Features * 4))
	for b.Loop() {
		if _, _, err := Synthetic(cfg); err != nil {
			b.Fatal(err)
		}
	}
}
