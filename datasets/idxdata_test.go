package datasets

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// idxSchemaOf is a schema for IDX data: classes "0".."k-1", one numeric column.
func idxSchemaOf(k int, lo, hi float64, scale string) *Schema {
	s := &Schema{Label: Label{Column: "label"}, Columns: []Column{{Name: "v", Type: ColumnNumeric, Lo: lo, Hi: hi, Scale: scale}}}
	for c := range k {
		s.Label.Classes = append(s.Label.Classes, string(rune('0'+c)))
	}
	return s
}

// TestIDXDatasetOracle: elements of every type map to the hand-computed features, labels to
// their classes, and the shape follows the dims.
func TestIDXDatasetOracle(t *testing.T) {
	// float32 images 2×(1×3): values inside, below and above [−1, 3].
	var pay []byte
	for _, v := range []float32{-1, 0, 1, 3, 7, -5} {
		pay = binary.BigEndian.AppendUint32(pay, math.Float32bits(v))
	}
	img, err := readIDX(bytes.NewReader(idxBytes(IDXFloat32, []uint32{2, 1, 3}, pay)), "img", -1)
	if err != nil {
		t.Fatal(err)
	}
	lbl := &IDX{Type: IDXInt16, Dims: []int{2}, Data: []byte{0, 2, 0, 0}}
	s := idxSchemaOf(3, -1, 3, "")
	ds, err := IDXDataset(img, lbl, "f", s)
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{0, 0.25, 0.5, 1, 1, 0}
	if !slices.Equal(ds.X, want) || !slices.Equal(ds.Y, []int{2, 0}) || !slices.Equal(ds.Shape, []int{1, 1, 3}) || ds.D != 3 || ds.Classes != 3 {
		t.Fatalf("X %v Y %v shape %v D %d classes %d", ds.X, ds.Y, ds.Shape, ds.D, ds.Classes)
	}
	// Log scale on uint8, 2 dims: shape [D].
	img = &IDX{Type: IDXUint8, Dims: []int{1, 3}, Data: []byte{0, 15, 255}}
	lbl = &IDX{Type: IDXUint8, Dims: []int{1}, Data: []byte{1}}
	ds, err = IDXDataset(img, lbl, "u", idxSchemaOf(2, 0, 255, ScaleLog))
	if err != nil {
		t.Fatal(err)
	}
	if want := []float32{0, float32(math.Log(16) / math.Log(256)), 1}; !slices.Equal(ds.X, want) || !slices.Equal(ds.Shape, []int{3}) {
		t.Fatalf("log: X %v (want %v) shape %v", ds.X, want, ds.Shape)
	}
	// Classes need not be 0..K-1: label value 7 is class 1 of ["3", "7"].
	s = idxSchemaOf(2, 0, 255, "")
	s.Label.Classes = []string{"3", "7"}
	lbl.Data = []byte{7}
	if ds, err = IDXDataset(img, lbl, "u", s); err != nil || ds.Y[0] != 1 {
		t.Fatalf("class 7: %v %v", ds, err)
	}
}

// TestIDXDatasetErrors: a bad pair or a schema that does not fit IDX data is refused with
// the offset and example.
func TestIDXDatasetErrors(t *testing.T) {
	img := &IDX{Type: IDXUint8, Dims: []int{2, 2}, Data: []byte{1, 2, 3, 4}}
	lbl := &IDX{Type: IDXUint8, Dims: []int{2}, Data: []byte{0, 1}}
	nanImg := &IDX{Type: IDXFloat64, Dims: []int{1, 1}, Data: binary.BigEndian.AppendUint64(nil, math.Float64bits(math.NaN()))}
	for _, tc := range []struct {
		name     string
		img, lbl *IDX
		s        *Schema
		want     []string
	}{
		{"unknown label", img, &IDX{Type: IDXUint8, Dims: []int{2}, Data: []byte{0, 5}}, idxSchemaOf(2, 0, 1, ""), []string{"offset 9", "label 5 of example 1"}},
		{"count mismatch", img, &IDX{Type: IDXUint8, Dims: []int{3}, Data: []byte{0, 1, 1}}, idxSchemaOf(2, 0, 1, ""), []string{"3 labels for 2 examples"}},
		{"float labels", img, &IDX{Type: IDXFloat32, Dims: []int{2}, Data: make([]byte, 8)}, idxSchemaOf(2, 0, 1, ""), []string{"want integers"}},
		{"one-dim images", &IDX{Type: IDXUint8, Dims: []int{2}, Data: []byte{1, 2}}, lbl, idxSchemaOf(2, 0, 1, ""), []string{"want at least 2"}},
		{"no examples", &IDX{Type: IDXUint8, Dims: []int{0, 2}}, &IDX{Type: IDXUint8, Dims: []int{0}}, idxSchemaOf(2, 0, 1, ""), []string{"no examples"}},
		{"NaN element", nanImg, &IDX{Type: IDXUint8, Dims: []int{1}, Data: []byte{0}}, idxSchemaOf(2, 0, 1, ""), []string{"offset 12", "element 0 of example 0 is NaN"}},
	} {
		_, err := IDXDataset(tc.img, tc.lbl, "p", tc.s)
		t.Run(tc.name, func(t *testing.T) { checkFormatErr(t, err, tc.want...) })
	}
	for name, s := range map[string]*Schema{
		"two columns":    {Label: Label{Column: "l", Classes: []string{"0", "1"}}, Columns: []Column{{Name: "a", Type: ColumnNumeric, Hi: 1}, {Name: "b", Type: ColumnNumeric, Hi: 1}}},
		"categorical":    {Label: Label{Column: "l", Classes: []string{"0", "1"}}, Columns: []Column{{Name: "a", Type: ColumnCategorical, Categories: []string{"x"}}}},
		"word class":     {Label: Label{Column: "l", Classes: []string{"0", "one"}}, Columns: []Column{{Name: "a", Type: ColumnNumeric, Hi: 1}}},
		"leading zero":   {Label: Label{Column: "l", Classes: []string{"0", "01"}}, Columns: []Column{{Name: "a", Type: ColumnNumeric, Hi: 1}}},
		"invalid schema": {Label: Label{Column: "l", Classes: []string{"0"}}, Columns: []Column{{Name: "a", Type: ColumnNumeric, Hi: 1}}},
	} {
		if _, err := IDXDataset(img, lbl, "p", s); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestLoadIDXIsLoadMNIST: the general IDX loader with MNISTSchema gives LoadMNIST's features
// bit for bit: float32(v/255) computed in float64 equals float32(v)/255 for every byte.
func TestLoadIDXIsLoadMNIST(t *testing.T) {
	s := MNISTSchema()
	scale, _, err := idxSchema(s)
	if err != nil {
		t.Fatal(err)
	}
	for v := range 256 {
		if got, want := float32(scale.apply(float64(v))), float32(v)/255; got != want {
			t.Fatalf("byte %d: %v, LoadMNIST %v", v, got, want)
		}
	}
	dir := sharedDir(t, "mnist")
	test, err := loadMNISTSplit(dir, "t10k", "mnist/test") // LoadMNIST's test half
	if err != nil {
		t.Fatal(err)
	}
	ds, err := LoadIDX(filepath.Join(dir, "t10k-images-idx3-ubyte.gz"), filepath.Join(dir, "t10k-labels-idx1-ubyte.gz"), s)
	if err != nil {
		t.Fatal(err)
	}
	if ds.N != test.N || !slices.Equal(ds.Shape, test.Shape) || !slices.Equal(ds.X, test.X) || !slices.Equal(ds.Y, test.Y) {
		t.Fatal("LoadIDX and LoadMNIST differ on t10k")
	}
}

// TestIDXRowDependsOnlyOnItsExample is the attack on IDX preprocessing: two pairs that differ
// in one example (changed or removed) encode every other example identically.
func TestIDXRowDependsOnlyOnItsExample(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	const n, d = 40, 6
	s := idxSchemaOf(4, -10, 10, "")
	build := func(vals []float64, labels []byte) *Dataset {
		var pay []byte
		for _, v := range vals {
			pay = binary.BigEndian.AppendUint64(pay, math.Float64bits(v))
		}
		img := &IDX{Type: IDXFloat64, Dims: []int{len(labels), d}, Data: pay}
		ds, err := IDXDataset(img, &IDX{Type: IDXUint8, Dims: []int{len(labels)}, Data: labels}, "a", s)
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	vals := make([]float64, n*d)
	for i := range vals {
		vals[i] = rng.NormFloat64() * 8
	}
	labels := make([]byte, n)
	for i := range labels {
		labels[i] = byte(rng.IntN(4))
	}
	base := build(vals, labels)
	for trial := range 50 {
		j := rng.IntN(n)
		cv, cl := slices.Clone(vals), slices.Clone(labels)
		for k := range d {
			cv[j*d+k] = []float64{1e300, -1e300, 0, rng.NormFloat64() * 100}[rng.IntN(4)]
		}
		cl[j] = byte(rng.IntN(4))
		ds := build(cv, cl)
		alone := build(cv[j*d:(j+1)*d], cl[j:j+1])
		if !slices.Equal(ds.Row(j), alone.Row(0)) {
			t.Fatalf("trial %d: example %d differs from itself encoded alone", trial, j)
		}
		for i := range n {
			if i != j && (!slices.Equal(ds.Row(i), base.Row(i)) || ds.Y[i] != base.Y[i]) {
				t.Fatalf("trial %d: changing example %d changed example %d", trial, j, i)
			}
		}
		removed := build(slices.Delete(slices.Clone(vals), j*d, (j+1)*d), slices.Delete(slices.Clone(labels), j, j+1))
		for i := range n - 1 {
			src := i + btoi(i >= j)
			if !slices.Equal(removed.Row(i), base.Row(src)) || removed.Y[i] != base.Y[src] {
				t.Fatalf("removing example %d changed example %d", j, src)
			}
		}
	}
}

// TestIDXFeatures: images without labels encode to IDXDataset's features and shape, for byte
// and float images of 2, 3 and 4 dimensions; the errors are IDXDataset's.
func TestIDXFeatures(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	for _, dims := range [][]int{{5, 6}, {4, 3, 2}, {3, 2, 2, 2}} {
		for _, typ := range []byte{IDXUint8, IDXFloat64} {
			n := 1
			for _, v := range dims {
				n *= v
			}
			img := &IDX{Type: typ, Dims: dims, Data: make([]byte, n*idxElemSize(typ))}
			for i := range n {
				if typ == IDXUint8 {
					img.Data[i] = byte(rng.IntN(256))
				} else {
					binary.BigEndian.PutUint64(img.Data[8*i:], math.Float64bits(rng.NormFloat64()*100))
				}
			}
			lbl := &IDX{Type: IDXUint8, Dims: []int{dims[0]}, Data: make([]byte, dims[0])}
			s := idxSchemaOf(2, -50, 200, "")
			ds, err := IDXDataset(img, lbl, "i", s)
			if err != nil {
				t.Fatal(err)
			}
			x, shape, err := IDXFeatures(img, "i", s)
			if err != nil || !slices.Equal(x, ds.X) || !slices.Equal(shape, ds.Shape) {
				t.Errorf("dims %v type %#x: shape %v (IDXDataset's %v), same features %v, %v", dims, typ, shape, ds.Shape, slices.Equal(x, ds.X), err)
			}
		}
	}
	nan := &IDX{Type: IDXFloat64, Dims: []int{1, 2}, Data: binary.BigEndian.AppendUint64(make([]byte, 8), math.Float64bits(math.NaN()))}
	for name, tc := range map[string]struct {
		img  *IDX
		s    *Schema
		want string
	}{
		"one dimension": {&IDX{Type: IDXUint8, Dims: []int{3}, Data: []byte{1, 2, 3}}, idxSchemaOf(2, 0, 255, ""), "want at least 2"},
		"no example":    {&IDX{Type: IDXUint8, Dims: []int{0, 3}}, idxSchemaOf(2, 0, 255, ""), "no examples"},
		"NaN":           {nan, idxSchemaOf(2, 0, 255, ""), "element 1 of example 0 is NaN"},
		"CSV schema":    {&IDX{Type: IDXUint8, Dims: []int{1, 1}, Data: []byte{1}}, smallSchema(), "exactly one column"},
	} {
		if _, _, err := IDXFeatures(tc.img, "i", tc.s); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}
