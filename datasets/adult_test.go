package datasets

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// adultPublishedStats are the column means and sample standard deviations of adult.data's
// continuous columns as printed by pandas' DataFrame.describe() in many public notebooks
// (age, fnlwgt, education-num, capital-gain, capital-loss, hours-per-week).
var adultPublishedStats = struct{ mean, std [6]float64 }{
	mean: [6]float64{38.581647, 189778.366512, 10.080679, 1077.648844, 87.303830, 40.437456},
	std:  [6]float64{13.640433, 105549.977697, 2.572720, 7385.292085, 402.960219, 12.347429},
}

// naiveAdultCategories is a second, deliberately simple reading of adult.data: split on ", ",
// keep 15-field lines, collect the distinct values of each categorical column.
func naiveAdultCategories(t *testing.T, path string) [8]map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var sets [8]map[string]bool
	for k := range sets {
		sets[k] = map[string]bool{}
	}
	cols := []int{1, 3, 5, 6, 7, 8, 9, 13}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ", ")
		if len(f) != 15 {
			continue
		}
		for k, c := range cols {
			sets[k][f[c]] = true
		}
	}
	return sets
}

func TestLoadAdultReal(t *testing.T) {
	dir := sharedDir(t, "uci-adult")
	train, test, err := LoadAdult(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []*Dataset{train, test} {
		if err := d.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	// Row counts and class balance from shared/datasets/uci-adult/README.md.
	if train.N != 32561 || test.N != 16281 {
		t.Fatalf("N = %d / %d, want 32561 / 16281", train.N, test.N)
	}
	if c := train.ClassCounts(); !slices.Equal(c, []int{24720, 7841}) {
		t.Errorf("train class counts %v, want [24720 7841]", c)
	}
	if c := test.ClassCounts(); !slices.Equal(c, []int{12435, 3846}) {
		t.Errorf("test class counts %v, want [12435 3846]", c)
	}
	if r := float64(train.ClassCounts()[1]) / float64(train.N); math.Abs(r-0.2408) > 0.0005 {
		t.Errorf("train positive rate %.4f, want ≈ 0.2408", r)
	}
	if r := float64(test.ClassCounts()[1]) / float64(test.N); math.Abs(r-0.2362) > 0.0005 {
		t.Errorf("test positive rate %.4f, want ≈ 0.2362", r)
	}

	// D from an independent count of the categories: 6 + Σ distinct values = 108 (documented).
	sets := naiveAdultCategories(t, filepath.Join(dir, "adult.data"))
	wantD := 6
	for _, s := range sets {
		wantD += len(s)
	}
	if wantD != 108 || AdultUCIDim != 108 || train.D != wantD || test.D != wantD || len(train.FeatureNames) != wantD {
		t.Fatalf("D = %d (test %d, names %d), independent count %d, documented 108", train.D, test.D, len(train.FeatureNames), wantD)
	}
	names := train.FeatureNames
	if !slices.Equal(names, test.FeatureNames) {
		t.Error("train and test feature names differ")
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != len(names) {
		t.Error("feature names are not unique")
	}
	col := func(name string) int {
		j := slices.Index(names, name)
		if j < 0 {
			t.Fatalf("no feature %q", name)
		}
		return j
	}

	// Standardized continuous columns: mean 0, std 1 on train.
	cont := []string{"age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"}
	for _, c := range cont {
		j := col(c)
		var s, ss float64
		for i := range train.N {
			v := float64(train.X[i*train.D+j])
			s += v
			ss += v * v
		}
		m := s / float64(train.N)
		sd := math.Sqrt(ss/float64(train.N) - m*m)
		if math.Abs(m) > 1e-5 || math.Abs(sd-1) > 1e-5 {
			t.Errorf("%s: train mean %.2g std %.6f, want 0 and 1", c, m, sd)
		}
	}

	// One-hot groups: each training row has exactly one 1 per categorical column; test rows
	// at most one.
	groups := map[string][]int{}
	for j, n := range names {
		if k := strings.IndexByte(n, '='); k >= 0 {
			groups[n[:k]] = append(groups[n[:k]], j)
		}
	}
	if len(groups) != 8 {
		t.Fatalf("%d categorical groups, want 8", len(groups))
	}
	for _, d := range []*Dataset{train, test} {
		for i := range d.N {
			row := d.Row(i)
			for g, js := range groups {
				var s float32
				for _, j := range js {
					if row[j] != 0 && row[j] != 1 {
						t.Fatalf("%s row %d: one-hot value %v", d.Name, i, row[j])
					}
					s += row[j]
				}
				if s != 1 {
					t.Fatalf("%s row %d: group %s sums to %v, want 1", d.Name, i, g, s)
				}
			}
		}
	}

	// The first training row: 39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical,
	// Not-in-family, White, Male, 2174, 0, 40, United-States, <=50K.
	r0 := train.Row(0)
	for _, n := range []string{"workclass=State-gov", "education=Bachelors", "marital-status=Never-married",
		"occupation=Adm-clerical", "relationship=Not-in-family", "race=White", "sex=Male", "native-country=United-States"} {
		if r0[col(n)] != 1 {
			t.Errorf("first row: %s = %v, want 1", n, r0[col(n)])
		}
	}
	ps := adultPublishedStats
	if want := (39 - ps.mean[0]) / ps.std[0]; math.Abs(float64(r0[col("age")])-want) > 1e-3 {
		t.Errorf("first row age %v, want ≈ %v", r0[col("age")], want)
	}
	if train.Y[0] != 0 || test.Y[2] != 1 {
		t.Errorf("labels: train[0] = %d (want 0), test[2] = %d (want 1: 28, Local-gov, ..., >50K.)", train.Y[0], test.Y[2])
	}
	// "?" is a category: workclass has a "?" column.
	col("workclass=?")
}

// TestAdultEncoderStats: the fitted means and standard deviations equal the published
// describe() numbers (population vs sample std differ by a factor 1 - 1.5e-5 here).
func TestAdultEncoderStats(t *testing.T) {
	dir := sharedDir(t, "uci-adult")
	f, err := os.Open(filepath.Join(dir, "adult.data"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := ReadAdultCSV(f, "adult.data")
	if err != nil {
		t.Fatal(err)
	}
	enc, err := FitAdultEncoder(recs)
	if err != nil {
		t.Fatal(err)
	}
	m, s := enc.Mean(), enc.Std()
	for k := range 6 {
		if rel := math.Abs(m[k]/adultPublishedStats.mean[k] - 1); rel > 1e-6 {
			t.Errorf("column %d: mean %.6f, published %.6f", k, m[k], adultPublishedStats.mean[k])
		}
		if rel := math.Abs(s[k]/adultPublishedStats.std[k] - 1); rel > 5e-5 {
			t.Errorf("column %d: std %.6f, published %.6f", k, s[k], adultPublishedStats.std[k])
		}
	}
	if got := enc.Categories(6); !slices.Equal(got, []string{"Female", "Male"}) {
		t.Errorf("sex categories %v", got)
	}
	if got := enc.Categories(0); got[0] != "?" || len(got) != 9 {
		t.Errorf("workclass categories %v, want 9 starting with ?", got)
	}
}

const adultSample = "|1x3 Cross validator\r\n" +
	"25, Private, 226802, 11th, 7, Never-married, Machine-op-inspct, Own-child, Black, Male, 0, 0, 40, United-States, <=50K.\r\n" +
	"\r\n" +
	"38,Private,89814,HS-grad,9,Married-civ-spouse,Farming-fishing,Husband,White,Male,0,0,50,United-States,>50K\n" +
	"44, ?, 160323, Some-college, 10, Married-civ-spouse, ?, Husband, Black, Male, 7688, 0, 40, ?, >50K.\n" +
	"\n\n"

func TestReadAdultCSV(t *testing.T) {
	recs, err := ReadAdultCSV(strings.NewReader(adultSample), "sample")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	want0 := AdultRecord{
		Continuous:  [6]float64{25, 226802, 7, 0, 0, 40},
		Categorical: [8]string{"Private", "11th", "Never-married", "Machine-op-inspct", "Own-child", "Black", "Male", "United-States"},
		Label:       0, Line: 2,
	}
	if recs[0] != want0 {
		t.Errorf("record 0 = %+v, want %+v", recs[0], want0)
	}
	if recs[1].Label != 1 || recs[1].Line != 4 || recs[1].Continuous[1] != 89814 {
		t.Errorf("record 1 = %+v", recs[1])
	}
	if recs[2].Categorical[0] != "?" || recs[2].Categorical[7] != "?" || recs[2].Continuous[3] != 7688 || recs[2].Label != 1 {
		t.Errorf("record 2 = %+v", recs[2])
	}

	// Encoding: fit on records 0 and 1, encode record 2 (unseen "?" categories → zeros).
	enc, err := FitAdultEncoder(recs[:2])
	if err != nil {
		t.Fatal(err)
	}
	// 6 continuous + one category each, except education (2), marital-status (2),
	// occupation (2), relationship (2), race (2).
	if enc.Dim() != 6+8+5 {
		t.Fatalf("Dim = %d, want 19", enc.Dim())
	}
	ds, err := enc.Encode("s", recs[2:])
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.Validate(); err != nil {
		t.Fatal(err)
	}
	for j, n := range ds.FeatureNames {
		v := ds.X[j]
		switch {
		case n == "age":
			// mean 31.5, population std 6.5.
			if want := float32((44 - 31.5) / 6.5); math.Abs(float64(v-want)) > 1e-6 {
				t.Errorf("age = %v, want %v", v, want)
			}
		case n == "capital-gain":
			// zero spread in the fit: scaled by 1 → 7688 - 0.
			if v != 7688 {
				t.Errorf("capital-gain = %v, want 7688 (zero-spread column scaled by 1)", v)
			}
		case strings.HasPrefix(n, "workclass="), strings.HasPrefix(n, "occupation="), strings.HasPrefix(n, "native-country="):
			if v != 0 {
				t.Errorf("%s = %v, want 0 for an unseen category", n, v)
			}
		case n == "race=Black", n == "sex=Male", n == "relationship=Husband", n == "marital-status=Married-civ-spouse":
			if v != 1 {
				t.Errorf("%s = %v, want 1", n, v)
			}
		}
	}
	if _, err := FitAdultEncoder(nil); err == nil {
		t.Error("FitAdultEncoder(nil): no error")
	}
}

func TestReadAdultCSVErrors(t *testing.T) {
	row := "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, Male, 2174, 0, 40, United-States, <=50K"
	cases := []struct {
		name, in string
		want     []string
	}{
		{"too few fields", row + "\n39, State-gov\n", []string{"f.csv:2:", "2 fields, want 15"}},
		{"too many fields", row + ", extra\n", []string{"f.csv:1:", "16 fields"}},
		{"bad number", strings.Replace(row, "77516", "77x16", 1), []string{"f.csv:1:", "field 3 (fnlwgt)", "bad number \"77x16\""}},
		{"NaN", strings.Replace(row, "39", "NaN", 1), []string{"field 1 (age)", "bad number"}},
		{"Inf", strings.Replace(row, "2174", "+Inf", 1), []string{"field 11 (capital-gain)"}},
		{"huge", strings.Replace(row, "2174", "1e300", 1), []string{"field 11 (capital-gain)", "magnitude"}},
		{"empty category", strings.Replace(row, "Bachelors", "", 1), []string{"field 4 (education)", "empty value"}},
		{"bad label", strings.Replace(row, "<=50K", "50K+", 1), []string{"field 15 (income)", "label \"50K+\""}},
		{"empty label", strings.Replace(row, "<=50K", "", 1), []string{"field 15 (income)"}},
		{"long line", row + "\n" + strings.Repeat("x", 70000), []string{"f.csv:2:", "longer than"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			recs, err := ReadAdultCSV(strings.NewReader(c.in), "f.csv")
			if recs != nil {
				t.Errorf("records returned with the error")
			}
			checkFormatErr(t, err, c.want...)
		})
	}
}

func TestLoadAdultErrors(t *testing.T) {
	dir := t.TempDir()
	_, _, err := LoadAdult(dir)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("empty dir: %v does not match fs.ErrNotExist", err)
	}
	row := "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, Male, 2174, 0, 40, United-States, <=50K\n"
	writeFile(t, dir, "adult.data", []byte(row+row))
	_, _, err = LoadAdult(dir)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "adult.test") {
		t.Errorf("missing adult.test: %v", err)
	}
	writeFile(t, dir, "adult.test", []byte("|1x3 Cross validator\n"+strings.Replace(row, "40", "forty", 1)))
	_, _, err = LoadAdult(dir)
	checkFormatErr(t, err, filepath.Join(dir, "adult.test")+":2:", "hours-per-week")
	writeFile(t, dir, "adult.test", []byte("|1x3 Cross validator\n\n"))
	_, _, err = LoadAdult(dir)
	checkFormatErr(t, err, "adult.test", "no records")
	// A test value that standardizes beyond float32 range is an error naming the file and line.
	writeFile(t, dir, "adult.test", []byte("\n"+strings.Replace(row, "77516", "1e15", 1)))
	writeFile(t, dir, "adult.data", []byte(strings.Replace(row, "77516", "1e-150", 1)+strings.Replace(row, "77516", "2e-150", 1)))
	_, _, err = LoadAdult(dir)
	checkFormatErr(t, err, filepath.Join(dir, "adult.test")+":2:", "fnlwgt", "standardizes")
	// gzip-compressed copies under the plain names load too.
	writeFile(t, dir, "adult.data", gzipBytes(t, []byte(row+strings.Replace(row, "<=50K", ">50K", 1))))
	writeFile(t, dir, "adult.test", gzipBytes(t, []byte(row)))
	tr, te, err := LoadAdult(dir)
	if err != nil || tr.N != 2 || te.N != 1 || tr.Y[1] != 1 {
		t.Errorf("gzip copies: err %v", err)
	}
}

func BenchmarkLoadAdult(b *testing.B) {
	dir := sharedDir(b, "uci-adult")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := LoadAdult(dir); err != nil {
			b.Fatal(err)
		}
	}
}
