package datasets

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The header of smallSchema's CSVs: the label first, and the columns in another order than
// the schema's.
var smallHeader = []string{"y", "color", "id", "income", "age"}

// smallRecord is one generated record of smallSchema, as raw fields in smallHeader's order,
// and its features computed by hand from the column definitions (not by the encoder).
type smallRecord struct {
	fields []string
	want   []float32 // age, income, color=red, color=green, color=blue, color=(other)
	label  int
}

// randomSmallRecord draws fields that exercise every rule: values inside and outside the
// bounds, missing values, unlisted categories, quotes, commas and line breaks in ignored
// and categorical fields, blanks around values.
func randomSmallRecord(rng *rand.Rand) smallRecord {
	var r smallRecord
	r.want = make([]float32, 6)
	r.label = rng.IntN(2)
	label := []string{"no", "yes"}[r.label]
	age := (rng.Float64()*2 - 0.5) * 100
	if rng.IntN(6) == 0 {
		age = math.Round(age)
	}
	r.want[0] = float32(min(max(age, 0), 100) / 100)
	var income string
	switch rng.IntN(5) {
	case 0:
		income = [...]string{"", "?", "NA", " "}[rng.IntN(4)] // missing: policy lo
		r.want[1] = 0
	default:
		v := math.Round(rng.Float64() * 2e6)
		income = strconv.FormatFloat(v, 'g', -1, 64)
		c := min(v, 1e6)
		r.want[1] = float32(math.Log1p(c) / math.Log1p(1e6))
	}
	var color string
	switch u := rng.IntN(8); {
	case u < 3:
		color = []string{"red", "green", "blue"}[u]
		r.want[2+u] = 1
	case u == 3:
		color = "purple, \"dark\"\nish"
		r.want[5] = 1
	case u == 4:
		color = "?"
		r.want[5] = 1
	case u == 5:
		color = ""
		r.want[5] = 1
	case u == 6:
		color = "Red" // categories are case-sensitive
		r.want[5] = 1
	default:
		color = " green "
		r.want[3] = 1
	}
	id := fmt.Sprintf("id-%d,\"%d\"", rng.IntN(1000), rng.IntN(10))
	r.fields = []string{label, color, id, income, strconv.FormatFloat(age, 'g', -1, 64)}
	return r
}

// writeCSV writes header and records with encoding/csv (quoting where needed); crlf selects
// CRLF line ends.
func writeCSV(t testing.TB, header []string, records [][]string, crlf bool) []byte {
	t.Helper()
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.UseCRLF = crlf
	if err := w.Write(header); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteAll(records); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestReadCSVOracle: features equal a hand computation for fixed rows.
func TestReadCSVOracle(t *testing.T) {
	text := "y,color,id,income,age\n" +
		"yes,green,1,999999,50\n" +
		"no,purple,2,,150\n" +
		"no, ?,3,0,-3\n" +
		" yes ,\"red\",\"4,5\",1e7,12.5e0\n"
	ds, err := ReadCSV(strings.NewReader(text), "oracle.csv", smallSchema())
	if err != nil {
		t.Fatal(err)
	}
	logMax := math.Log1p(1e6)
	want := [][]float32{
		{0.5, float32(math.Log1p(999999) / logMax), 0, 1, 0, 0},
		{1, 0, 0, 0, 0, 1},
		{0, 0, 0, 0, 0, 1},
		{0.125, 1, 1, 0, 0, 0},
	}
	if ds.N != 4 || ds.D != 6 || ds.Classes != 2 || !slices.Equal(ds.Shape, []int{6}) {
		t.Fatalf("N %d D %d classes %d shape %v", ds.N, ds.D, ds.Classes, ds.Shape)
	}
	for i, w := range want {
		if !slices.Equal(ds.Row(i), w) {
			t.Errorf("row %d = %v, want %v", i, ds.Row(i), w)
		}
	}
	if !slices.Equal(ds.Y, []int{1, 0, 0, 1}) {
		t.Errorf("labels %v", ds.Y)
	}
	wantNames := []string{"age", "income", "color=red", "color=green", "color=blue", "color=(other)"}
	if !slices.Equal(ds.FeatureNames, wantNames) {
		t.Errorf("feature names %v", ds.FeatureNames)
	}
	if err := ds.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestReadCSVRoundTrip: generated files, written with LF or CRLF, with or without a byte
// order mark, gzip-compressed or not, read back to the hand-computed features.
func TestReadCSVRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 200
	recs := make([]smallRecord, n)
	fields := make([][]string, n)
	for i := range recs {
		recs[i] = randomSmallRecord(rng)
		fields[i] = recs[i].fields
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name      string
		crlf, bom bool
		gz        bool
	}{{"lf", false, false, false}, {"crlf", true, false, false}, {"bom", false, true, false}, {"crlf-bom-gz", true, true, true}} {
		data := writeCSV(t, smallHeader, fields, tc.crlf)
		if tc.bom {
			data = append([]byte("\ufeff"), data...)
		}
		if tc.gz {
			data = gzipBytes(t, data)
		}
		path := filepath.Join(dir, tc.name+".csv")
		writeFile(t, dir, tc.name+".csv", data)
		ds, err := LoadCSV(path, smallSchema())
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if ds.N != n || ds.D != 6 {
			t.Fatalf("%s: N %d D %d", tc.name, ds.N, ds.D)
		}
		for i, r := range recs {
			if !slices.Equal(ds.Row(i), r.want) || ds.Y[i] != r.label {
				t.Fatalf("%s: record %d %q: features %v label %d, want %v %d", tc.name, i, r.fields, ds.Row(i), ds.Y[i], r.want, r.label)
			}
		}
		if h, err := CSVHeader(path); err != nil || !slices.Equal(h, smallHeader) {
			t.Fatalf("%s: CSVHeader %q, %v", tc.name, h, err)
		}
	}
}

// TestReadCSVErrors: bad input rejects the file with one line naming the file, the line and
// the field.
func TestReadCSVErrors(t *testing.T) {
	const header = "y,color,id,income,age\n"
	const row = "yes,red,1,10,20\n"
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{"empty file", "", []string{"t.csv:1:", "empty file", "header"}},
		{"header only", header, []string{"t.csv:1:", "no records"}},
		{"missing header", row + row, []string{"t.csv:1:", `no column named "age", "income", "color"`, "is the first line a header?"}},
		{"unknown column", "y,color,id,income,age,zip\n" + row, []string{"t.csv:1:", `columns not in the schema: "zip"`, "ignore"}},
		{"duplicate column", "y,color,id,income,age,age\n" + row, []string{"columns 5 and 6 are both named \"age\""}},
		{"no label column", "color,id,income,age\nred,1,10,20\n", []string{"t.csv:1:", `no label column "y"`}},
		{"too few fields", header + row + "yes,red,1,10\n", []string{"t.csv:3:", "4 fields, want 5 as in the header"}},
		{"too many fields", header + "yes,red,1,10,20,30\n", []string{"t.csv:2:", "6 fields, want 5"}},
		{"unknown label", header + row + "maybe,red,1,10,20\n", []string{"t.csv:3:", `field 1 ("y")`, `label "maybe"`, `["no" "yes"]`}},
		{"missing label", header + ",red,1,10,20\n", []string{"t.csv:2:", `field 1 ("y")`, "missing label"}},
		{"NaN", header + "yes,red,1,10,NaN\n", []string{"t.csv:2:", `field 5 ("age")`, `bad number "NaN"`, "finite decimal"}},
		{"Inf", header + "yes,red,1,10,-Inf\n", []string{"t.csv:2:", `field 5 ("age")`, `"-Inf"`}},
		{"infinity", header + "yes,red,1,10,infinity\n", []string{`field 5 ("age")`}},
		{"hex", header + "yes,red,1,10,0x1p4\n", []string{`field 5 ("age")`, `"0x1p4"`}},
		{"beyond float64", header + "yes,red,1,10,1e400\n", []string{`field 5 ("age")`, "beyond the float64 range"}},
		{"empty numeric", header + "yes,red,1,10,\n", []string{"t.csv:2:", `field 5 ("age")`, `missing value ""`, `"lo" or "hi" would accept it`}},
		{"missing token numeric", header + "yes,red,1,10,?\n", []string{`field 5 ("age")`, `missing value "?"`}},
		{"bare quote", header + "yes,re\"d,1,10,20\n", []string{"t.csv:2:", "bare \""}},
		{"unterminated quote", header + "yes,\"red,1,10,20\n", []string{"t.csv:", "extraneous or missing \""}},
		{"multi-line field then error", header + "yes,\"r\ne\nd\",1,10,x\n", []string{"t.csv:4:", `field 5 ("age")`}},
	} {
		_, err := ReadCSV(strings.NewReader(tc.text), "t.csv", smallSchema())
		t.Run(tc.name, func(t *testing.T) { checkFormatErr(t, err, tc.want...) })
	}
	s := smallSchema()
	s.Columns[2].Missing = MissingError
	_, err := ReadCSV(strings.NewReader(header+"yes,,1,10,20\n"), "t.csv", s)
	checkFormatErr(t, err, "t.csv:2:", `field 2 ("color")`, `missing value ""`)
	bad := smallSchema()
	bad.Columns[0].Hi = -1
	if _, err := ReadCSV(strings.NewReader(header+row), "t.csv", bad); err == nil || !strings.Contains(err.Error(), "hi > lo") {
		t.Errorf("invalid schema: %v", err)
	}
	if _, err := LoadCSV(filepath.Join(t.TempDir(), "absent.csv"), smallSchema()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("absent file: %v", err)
	}
}

// TestRowEncoder: one record of raw fields, as predictions read them: columns in any order,
// no label column, the same features as in a file.
func TestRowEncoder(t *testing.T) {
	enc, err := smallSchema().Encoder()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	withLabel, err := enc.Bind(smallHeader)
	if err != nil || !withLabel.HasLabel() {
		t.Fatal(err)
	}
	noLabel, err := enc.Bind([]string{"age", "income", "color"}) // ignored columns may be absent
	if err != nil || noLabel.HasLabel() {
		t.Fatal(err)
	}
	dst := make([]float32, enc.Dim())
	for range 100 {
		r := randomSmallRecord(rng)
		label, err := withLabel.Encode(dst, r.fields)
		if err != nil || label != r.label || !slices.Equal(dst, r.want) {
			t.Fatalf("%q: %v %d %v", r.fields, dst, label, err)
		}
		for k := range dst {
			dst[k] = 7 // Encode must overwrite every feature
		}
		label, err = noLabel.Encode(dst, []string{r.fields[4], r.fields[3], r.fields[1]})
		if err != nil || label != -1 || !slices.Equal(dst, r.want) {
			t.Fatalf("without label %q: %v %d %v", r.fields, dst, label, err)
		}
	}
	if _, err := noLabel.Encode(dst, []string{"1", "2"}); err == nil {
		t.Error("short record accepted")
	}
	if _, err := noLabel.Encode(dst[:3], []string{"1", "2", "red"}); err == nil {
		t.Error("short dst accepted")
	}
	if _, err := enc.Bind([]string{"age", "income"}); err == nil || !strings.Contains(err.Error(), `"color"`) {
		t.Errorf("absent column: %v", err)
	}
}

// TestCSVRowDependsOnlyOnItsRecord is the attack on the preprocessing: two files that differ
// in one record (changed, or removed) encode every other record identically, and the changed
// record as it encodes alone. D and the feature names never move.
func TestCSVRowDependsOnlyOnItsRecord(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 50
	fields := make([][]string, n)
	for i := range fields {
		fields[i] = randomSmallRecord(rng).fields
	}
	read := func(recs [][]string) *Dataset {
		ds, err := ReadCSV(bytes.NewReader(writeCSV(t, smallHeader, recs, false)), "x.csv", smallSchema())
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	base := read(fields)
	for trial := range 100 {
		j := rng.IntN(n)
		changed := slices.Clone(fields)
		changed[j] = randomSmallRecord(rng).fields
		if trial%3 == 0 { // an extreme record: huge, tiny, unlisted, missing
			changed[j] = []string{"yes", "\u00a0zzz", "x", "", "-1e300"}
		}
		ds := read(changed)
		alone := read(changed[j : j+1])
		if ds.D != base.D || !slices.Equal(ds.FeatureNames, base.FeatureNames) || !slices.Equal(ds.Row(j), alone.Row(0)) {
			t.Fatalf("trial %d: record %d: D %d, or its row differs from the record encoded alone", trial, j, ds.D)
		}
		for i := range n {
			if i != j && (!slices.Equal(ds.Row(i), base.Row(i)) || ds.Y[i] != base.Y[i]) {
				t.Fatalf("trial %d: changing record %d changed row %d", trial, j, i)
			}
		}
		removed := read(slices.Delete(slices.Clone(fields), j, j+1))
		if removed.D != base.D {
			t.Fatalf("removing record %d changed D", j)
		}
		for i := range n - 1 {
			src := i + btoi(i >= j)
			if !slices.Equal(removed.Row(i), base.Row(src)) || removed.Y[i] != base.Y[src] {
				t.Fatalf("removing record %d changed the row of record %d", j, src)
			}
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestCSVReadsAdult: the generic reader with AdultSchema gives the Adult loader's features
// and labels, on generated records and on the real adult.data with a header line added.
func TestCSVReadsAdult(t *testing.T) {
	header := strings.Join(AdultColumns(), ",") + "\n"
	rng := rand.New(rand.NewPCG(7, 8))
	var text strings.Builder
	text.WriteString(header)
	recs := make([]AdultRecord, 300)
	for i := range recs {
		recs[i] = randomAdultRecord(rng)
		text.WriteString(formatAdultRecord(recs[i]))
	}
	want, err := NewAdultEncoder().Encode("want", recs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadCSV(strings.NewReader(text.String()), "adult.csv", AdultSchema())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.X, want.X) || !slices.Equal(got.Y, want.Y) || !slices.Equal(got.FeatureNames, want.FeatureNames) {
		t.Fatal("generated records: the CSV reader and the Adult encoder differ")
	}
	dir := sharedDir(t, "uci-adult")
	train, _, err := LoadAdult(dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "adult.data"))
	if err != nil {
		t.Fatal(err)
	}
	got, err = ReadCSV(strings.NewReader(header+string(data)), "adult.data", AdultSchema())
	if err != nil {
		t.Fatal(err)
	}
	if got.N != train.N || !slices.Equal(got.X, train.X) || !slices.Equal(got.Y, train.Y) {
		t.Fatalf("real adult.data: the CSV reader (N %d) and LoadAdult (N %d) differ", got.N, train.N)
	}
}

// TestReadFeatures: a table to predict on reads to ReadCSV's features whether its label column
// is there, absent, empty or holds unknown values; the errors of a record name its line, its
// row (counted from 0 among the records) and its field, and a missing header is refused.
func TestReadFeatures(t *testing.T) {
	enc, err := smallSchema().Encoder()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var records, unlabelled, oddLabels [][]string
	var want []float32
	for range 50 {
		r := randomSmallRecord(rng)
		records = append(records, r.fields)
		unlabelled = append(unlabelled, r.fields[1:])
		odd := slices.Clone(r.fields)
		odd[0] = []string{"", "maybe", "?"}[rng.IntN(3)]
		oddLabels = append(oddLabels, odd)
		want = append(want, r.want...)
	}
	ds, err := enc.ReadCSV(bytes.NewReader(writeCSV(t, smallHeader, records, false)), "t.csv")
	if err != nil || !slices.Equal(ds.X, want) {
		t.Fatalf("ReadCSV: %v", err)
	}
	for name, text := range map[string][]byte{
		"labelled":    writeCSV(t, smallHeader, records, false),
		"no label":    writeCSV(t, smallHeader[1:], unlabelled, true),
		"odd labels":  writeCSV(t, smallHeader, oddLabels, false),
		"gzip":        gzipBytes(t, writeCSV(t, smallHeader[1:], unlabelled, false)),
		"blank lines": append(append(writeCSV(t, smallHeader, records[:1], false), "\n\n"...), writeCSV(t, smallHeader, records[1:], false)[len("y,color,id,income,age\n"):]...),
	} {
		x, n, err := enc.ReadFeatures(bytes.NewReader(text), "t.csv")
		if err != nil || n != len(records) || !slices.Equal(x, want) {
			t.Errorf("%s: %d rows, %v; equal to ReadCSV's %v", name, n, err, slices.Equal(x, want))
		}
	}
	const header = "color,income,age\n"
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{"header only", header, []string{"t.csv:1:", "no records"}},
		{"no header", "red,1,2\n", []string{"t.csv:1:", "is the first line a header?"}},
		{"unknown column", "color,income,age,zip\nred,1,2,3\n", []string{`columns not in the schema: "zip"`}},
		{"ragged", header + "red,1,2\n\nred,1\n", []string{"t.csv:4:", "row 1:", "2 fields, want 3 as in the header"}},
		{"bad number", header + "red,1,2\nblue,3,4\nred,x,5\n", []string{"t.csv:4:", "row 2:", `field 2 ("income")`, `bad number "x"`}},
		{"NaN", header + "red,1,NaN\n", []string{"t.csv:2:", "row 0:", `field 3 ("age")`}},
	} {
		x, n, err := enc.ReadFeatures(strings.NewReader(tc.text), "t.csv")
		t.Run(tc.name, func(t *testing.T) {
			if x != nil || n != 0 {
				t.Errorf("%d rows returned with the error", n)
			}
			checkFormatErr(t, err, tc.want...)
		})
	}
}
