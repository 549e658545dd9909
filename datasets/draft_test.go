package datasets

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestDraftSchema: the draft proposes what the brief of each column says, carries the
// warning, and reads the file it was drafted from.
func TestDraftSchema(t *testing.T) {
	var b strings.Builder
	b.WriteString("\ufeffid,x,color,flag,empty,y,code\r\n")
	for i := range 130 {
		color := fmt.Sprintf("c%03d", i%70) // 70 distinct values: the 64 most frequent are kept
		if i < 20 {
			color = "common"
		}
		x := fmt.Sprint(float64(i)/10 - 3)
		if i == 5 {
			x = ""
		}
		fmt.Fprintf(&b, "%d,%s,%s,7,,%d,\"%s\"\r\n", i, x, color, []int{10, 2, 1}[i%3], []string{"0x1", "A", "(other)"}[i%3])
	}
	s, err := DraftSchema(strings.NewReader(b.String()), "d.csv", DraftOptions{Label: "y"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Warning != DraftWarning || !strings.Contains(s.Warning, "NOT PRIVATE") {
		t.Fatalf("warning %q", s.Warning)
	}
	// Label classes in numeric order (10 after 2), not string order.
	if s.Label.Column != "y" || !slices.Equal(s.Label.Classes, []string{"1", "2", "10"}) {
		t.Fatalf("label %+v", s.Label)
	}
	want := map[string]Column{
		"id":    {Name: "id", Type: ColumnNumeric, Lo: 0, Hi: 129},
		"x":     {Name: "x", Type: ColumnNumeric, Lo: -3, Hi: 9.9, Missing: MissingLo},
		"flag":  {Name: "flag", Type: ColumnNumeric, Lo: 0, Hi: 7}, // a constant widened to a range
		"empty": {Name: "empty", Type: ColumnIgnore},
		"code":  {Name: "code", Type: ColumnCategorical, Categories: []string{"0x1", "A"}}, // "(other)" is the bucket
	}
	if len(s.Columns) != 6 {
		t.Fatalf("%d columns", len(s.Columns))
	}
	for _, c := range s.Columns {
		if c.Name == "color" {
			if c.Type != ColumnCategorical || len(c.Categories) != DefaultDraftCategories || c.Categories[0] != "common" {
				t.Errorf("color: %+v", c)
			}
			continue
		}
		if !reflect.DeepEqual(c, want[c.Name]) {
			t.Errorf("column %+v, want %+v", c, want[c.Name])
		}
	}
	// The drafted schema reads the file it was drafted from, and survives JSON.
	ds, err := ReadCSV(strings.NewReader(b.String()), "d.csv", s)
	if err != nil {
		t.Fatal(err)
	}
	if ds.N != 130 || ds.D != s.Dim() {
		t.Fatalf("N %d D %d", ds.N, ds.D)
	}
	js, _ := json.Marshal(s)
	if back, err := ParseSchema(js); err != nil || !reflect.DeepEqual(back, s) {
		t.Fatalf("JSON round trip: %v", err)
	}
	s3, err := DraftSchema(strings.NewReader(b.String()), "d.csv", DraftOptions{Label: "y", MaxCategories: 3})
	if err != nil {
		t.Fatal(err)
	}
	if c := s3.Columns[2]; c.Name != "color" || len(c.Categories) != 3 || c.Categories[0] != "common" || c.Categories[1] != "c020" {
		t.Errorf("MaxCategories 3: %+v", c)
	}
}

// TestDraftSchemaErrors: what cannot be drafted is an error naming the problem.
func TestDraftSchemaErrors(t *testing.T) {
	for _, tc := range []struct{ text, label, want string }{
		{"a,b\n1,2\n", "y", `no column named "y" (the label column); the columns are ["a" "b"]`},
		{"a,y\n1,2\n1,2\n", "y", `holds the single value "2"`},
		{"a,y\n1,2\n1,\n", "y", `d.csv:3: field 2 ("y"): label empty`},
		{"a,y\n", "y", "no records"},
		{"", "y", "empty file"},
		{"a,,y\n1,2,3\n", "y", "header: field 2: name empty"},
		{"a,a,y\n1,2,3\n", "y", "both named"},
		{"a,y\n1,2\n1,2,3\n", "y", "3 fields, want 2"},
		{"a,y\n-1e308,0\n1e308,1\n", "y", "overflows"},
	} {
		_, err := DraftSchema(strings.NewReader(tc.text), "d.csv", DraftOptions{Label: tc.label})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %v, want one line containing %q", tc.text, err, tc.want)
		}
	}
	if _, err := DraftSchema(strings.NewReader("a,y\n1,2\n"), "d.csv", DraftOptions{Label: "y", MaxCategories: -1}); err == nil {
		t.Error("MaxCategories -1 accepted")
	}
}

// TestDraftIDXSchema: classes in numeric order, the byte range for bytes, observed bounds
// otherwise; the draft reads the pair it was drafted from.
func TestDraftIDXSchema(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "img", idxBytes(IDXUint8, []uint32{3, 2}, []byte{1, 2, 3, 4, 5, 6}))
	writeFile(t, dir, "lbl", idxBytes(IDXUint8, []uint32{3}, []byte{9, 2, 9}))
	s, err := DraftIDXSchema(filepath.Join(dir, "img"), filepath.Join(dir, "lbl"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Warning != DraftWarning || !slices.Equal(s.Label.Classes, []string{"2", "9"}) || s.Columns[0].Lo != 0 || s.Columns[0].Hi != 255 {
		t.Fatalf("draft %+v", s)
	}
	ds, err := LoadIDX(filepath.Join(dir, "img"), filepath.Join(dir, "lbl"), s)
	if err != nil || !slices.Equal(ds.Y, []int{1, 0, 1}) {
		t.Fatalf("%v %v", ds, err)
	}
	writeFile(t, dir, "fimg", idxBytes(IDXInt16, []uint32{3, 1}, []byte{0xff, 0xfe, 0, 5, 0, 1}))
	s, err = DraftIDXSchema(filepath.Join(dir, "fimg"), filepath.Join(dir, "lbl"))
	if err != nil || s.Columns[0].Lo != -2 || s.Columns[0].Hi != 5 {
		t.Fatalf("int16 draft %+v, %v", s, err)
	}
	writeFile(t, dir, "one", idxBytes(IDXUint8, []uint32{3}, []byte{4, 4, 4}))
	if _, err := DraftIDXSchema(filepath.Join(dir, "img"), filepath.Join(dir, "one")); err == nil || !strings.Contains(err.Error(), "1 distinct labels") {
		t.Errorf("one class: %v", err)
	}
}

// TestDraftMatchesGeneratedFile: drafting never fails to read back, on random files.
func TestDraftMatchesGeneratedFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for range 20 {
		var recs [][]string
		for range 1 + rng.IntN(40) {
			r := randomSmallRecord(rng)
			recs = append(recs, r.fields)
		}
		recs = append(recs, []string{"no", "", "", "", "1"}, []string{"yes", "", "", "", "2"})
		data := writeCSV(t, smallHeader, recs, rng.IntN(2) == 0)
		s, err := DraftSchema(bytes.NewReader(data), "g.csv", DraftOptions{Label: "y", MaxCategories: 1 + rng.IntN(4)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ReadCSV(bytes.NewReader(data), "g.csv", s); err != nil {
			t.Fatalf("the draft does not read its own file: %v", err)
		}
	}
}
