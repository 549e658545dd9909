package datasets

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// seqDataset has N examples of D features where X[i][j] = 1000·i + j and Y[i] = i mod classes,
// so every value identifies its origin.
func seqDataset(n, d, classes int) *Dataset {
	ds := &Dataset{Name: "seq", X: make([]float32, n*d), Y: make([]int, n), N: n, D: d, Classes: classes, Shape: []int{d}}
	for i := range n {
		for j := range d {
			ds.X[i*d+j] = float32(1000*i + j)
		}
		ds.Y[i] = i % classes
	}
	return ds
}

func TestValidate(t *testing.T) {
	if err := seqDataset(5, 3, 2).Validate(); err != nil {
		t.Fatalf("valid dataset: %v", err)
	}
	if err := (&Dataset{N: 0, D: 4, Classes: 2}).Validate(); err != nil {
		t.Errorf("empty dataset: %v", err)
	}
	cases := []struct {
		name   string
		mutate func(d *Dataset)
		want   string
	}{
		{"short X", func(d *Dataset) { d.X = d.X[:len(d.X)-1] }, "len(X)"},
		{"long Y", func(d *Dataset) { d.Y = append(d.Y, 0) }, "len(Y)"},
		{"negative label", func(d *Dataset) { d.Y[3] = -1 }, "Y[3] = -1"},
		{"label too big", func(d *Dataset) { d.Y[4] = 2 }, "Y[4] = 2"},
		{"NaN", func(d *Dataset) { d.X[7] = float32(math.NaN()) }, "example 2, feature 1"},
		{"Inf", func(d *Dataset) { d.X[0] = float32(math.Inf(-1)) }, "X[0]"},
		{"shape", func(d *Dataset) { d.Shape = []int{2, 2} }, "product of Shape"},
		{"zero extent", func(d *Dataset) { d.Shape = []int{3, 0} }, "Shape[1] = 0"},
		{"feature names", func(d *Dataset) { d.FeatureNames = []string{"a"} }, "FeatureNames"},
		{"D zero", func(d *Dataset) { d.D = 0 }, "D = 0"},
		{"classes zero", func(d *Dataset) { d.Classes = 0 }, "Classes = 0"},
		{"negative N", func(d *Dataset) { d.N = -1 }, "N = -1"},
	}
	for _, c := range cases {
		d := seqDataset(5, 3, 2)
		c.mutate(d)
		err := d.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate() = %v, want an error containing %q", c.name, err, c.want)
		}
	}
	var nilDS *Dataset
	if nilDS.Validate() == nil {
		t.Error("nil dataset validated")
	}
}

func TestSubset(t *testing.T) {
	d := seqDataset(6, 4, 3)
	d.FeatureNames = []string{"a", "b", "c", "d"}
	idx := []int{5, 0, 5, 2}
	s := d.Subset(idx)
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if s.N != 4 || s.D != 4 || s.Classes != 3 || len(s.FeatureNames) != 4 {
		t.Fatalf("subset sizes N=%d D=%d C=%d", s.N, s.D, s.Classes)
	}
	for k, i := range idx {
		for j := range 4 {
			if got, want := s.X[k*4+j], float32(1000*i+j); got != want {
				t.Errorf("subset X[%d][%d] = %v, want %v", k, j, got, want)
			}
		}
		if s.Y[k] != i%3 {
			t.Errorf("subset Y[%d] = %d, want %d", k, s.Y[k], i%3)
		}
		if !slices.Equal(s.Row(k), d.Row(i)) {
			t.Errorf("Row(%d) differs from the original Row(%d)", k, i)
		}
	}
	s.X[0] = -1
	if d.X[5*4] == -1 {
		t.Error("Subset aliases the original features")
	}
	if e := d.Subset(nil); e.N != 0 || len(e.X) != 0 || e.Validate() != nil {
		t.Errorf("empty subset: N=%d, Validate=%v", e.N, e.Validate())
	}
	defer func() {
		if recover() == nil {
			t.Error("Subset with index out of range did not panic")
		}
	}()
	d.Subset([]int{6})
}

func TestClassCounts(t *testing.T) {
	d := seqDataset(10, 1, 3)
	if got := d.ClassCounts(); !slices.Equal(got, []int{4, 3, 3}) {
		t.Errorf("ClassCounts = %v, want [4 3 3]", got)
	}
}

func TestTrainTestSplit(t *testing.T) {
	d := seqDataset(101, 2, 4)
	tr, te, err := TrainTestSplit(d, 0.25, 7)
	if err != nil {
		t.Fatal(err)
	}
	if te.N != 25 || tr.N != 76 {
		t.Fatalf("sizes train %d test %d, want 76 and 25", tr.N, te.N)
	}
	for _, part := range []*Dataset{tr, te} {
		if err := part.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	// Each example appears exactly once overall, rows intact, original order kept.
	seen := make([]int, d.N)
	for _, part := range []*Dataset{tr, te} {
		prev := -1
		for k := range part.N {
			i := int(part.X[k*2]) / 1000
			if part.X[k*2+1] != float32(1000*i+1) || part.Y[k] != i%4 {
				t.Fatalf("%s row %d is not an intact original row", part.Name, k)
			}
			if i <= prev {
				t.Fatalf("%s: original order not kept (%d after %d)", part.Name, i, prev)
			}
			prev = i
			seen[i]++
		}
	}
	for i, c := range seen {
		if c != 1 {
			t.Fatalf("example %d appears %d times", i, c)
		}
	}
	// Same seed: same split; another seed: another split.
	tr2, te2, _ := TrainTestSplit(d, 0.25, 7)
	if !slices.Equal(tr.X, tr2.X) || !slices.Equal(te.Y, te2.Y) {
		t.Error("same seed gave a different split")
	}
	_, te3, _ := TrainTestSplit(d, 0.25, 8)
	if slices.Equal(te.X, te3.X) {
		t.Error("different seeds gave the same split")
	}
	for _, f := range []float64{0, 1, -0.1, 1.5, math.NaN(), 0.001, 0.999} {
		if _, _, err := TrainTestSplit(d, f, 1); err == nil {
			t.Errorf("testFraction %v: no error", f)
		}
	}
	if _, _, err := TrainTestSplit(nil, 0.5, 1); err == nil {
		t.Error("nil dataset: no error")
	}
	bad := seqDataset(4, 2, 2)
	bad.Y = bad.Y[:3]
	if _, _, err := TrainTestSplit(bad, 0.5, 1); err == nil || !strings.Contains(err.Error(), "len(Y)") {
		t.Errorf("inconsistent dataset: err = %v", err)
	}
}

// TestTrainTestSplitUniform: over many seeds each example lands in the test set with
// probability testFraction (binomial, checked at 5 standard errors).
func TestTrainTestSplitUniform(t *testing.T) {
	const n, trials = 10, 4000
	d := seqDataset(n, 1, 2)
	hits := make([]int, n)
	for s := range uint64(trials) {
		_, te, err := TrainTestSplit(d, 0.3, s)
		if err != nil {
			t.Fatal(err)
		}
		for k := range te.N {
			hits[int(te.X[k])/1000]++
		}
	}
	p := 0.3
	se := math.Sqrt(p * (1 - p) / trials)
	for i, h := range hits {
		if f := float64(h) / trials; math.Abs(f-p) > 5*se {
			t.Errorf("example %d in test %.4f of the time, want %.2f ± %.4f", i, f, p, 5*se)
		}
	}
}

func TestParseErrorFormat(t *testing.T) {
	cause := errors.New("boom")
	cases := []struct {
		e    *ParseError
		want string
	}{
		{&ParseError{File: "a.csv", Line: 3, Offset: -1, Msg: "bad"}, "datasets: a.csv:3: bad"},
		{&ParseError{File: "x.idx", Offset: 12, Msg: "short", Err: cause}, "datasets: x.idx: offset 12: short: boom"},
		{&ParseError{File: "y", Offset: -1, Err: cause}, "datasets: y: boom"},
	}
	for _, c := range cases {
		if got := c.e.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
		if !errors.Is(c.e, ErrFormat) {
			t.Errorf("%q does not match ErrFormat", c.e)
		}
	}
	if !errors.Is(cases[1].e, cause) {
		t.Error("ParseError does not unwrap to its cause")
	}
}

func BenchmarkSubset(b *testing.B) {
	d := seqDataset(10000, 784, 10)
	idx := make([]int, 256)
	for i := range idx {
		idx[i] = (i * 37) % d.N
	}
	b.SetBytes(int64(len(idx) * d.D * 4))
	for b.Loop() {
		d.Subset(idx)
	}
}
