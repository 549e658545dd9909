package datasets

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// smallSchema is a valid schema with one column of each type.
func smallSchema() *Schema {
	return &Schema{
		Label:         Label{Column: "y", Classes: []string{"no", "yes"}},
		MissingValues: []string{"?", "NA"},
		Columns: []Column{
			{Name: "age", Type: ColumnNumeric, Lo: 0, Hi: 100},
			{Name: "income", Type: ColumnNumeric, Lo: 0, Hi: 1e6, Scale: ScaleLog, Missing: MissingLo},
			{Name: "color", Type: ColumnCategorical, Categories: []string{"red", "green", "blue"}},
			{Name: "id", Type: ColumnIgnore},
		},
	}
}

// TestSchemaValidate: every rule of Validate, each breach named by its column and field.
func TestSchemaValidate(t *testing.T) {
	if err := smallSchema().Validate(); err != nil {
		t.Fatalf("valid schema refused: %v", err)
	}
	if err := AdultSchema().Validate(); err != nil {
		t.Fatalf("Adult schema refused: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(s *Schema)
		want []string // fragments of the error
	}{
		{"no label column", func(s *Schema) { s.Label.Column = "" }, []string{"label.column", "empty"}},
		{"label blanks", func(s *Schema) { s.Label.Column = " y" }, []string{"label.column", "surrounding blanks"}},
		{"one class", func(s *Schema) { s.Label.Classes = []string{"no"} }, []string{"label.classes", "1 entries, want 2"}},
		{"no classes", func(s *Schema) { s.Label.Classes = nil }, []string{"label.classes", "0 entries"}},
		{"duplicate class", func(s *Schema) { s.Label.Classes = []string{"a", "b", "a"} }, []string{"label.classes[2]", `"a" listed twice`}},
		{"empty class", func(s *Schema) { s.Label.Classes = []string{"a", ""} }, []string{"label.classes[1]", "empty"}},
		{"class is missing", func(s *Schema) { s.Label.Classes = []string{"a", "NA"} }, []string{"label.classes[1]", "missing_values"}},
		{"invalid UTF-8", func(s *Schema) { s.Label.Classes = []string{"a", "\xff"} }, []string{"label.classes[1]", "UTF-8"}},
		{"empty missing value", func(s *Schema) { s.MissingValues = []string{""} }, []string{"missing_values[0]", "always missing"}},
		{"duplicate missing value", func(s *Schema) { s.MissingValues = []string{"?", "?"} }, []string{"missing_values[1]", "twice"}},
		{"no columns", func(s *Schema) { s.Columns = nil }, []string{"columns", "D would be 0"}},
		{"only ignored", func(s *Schema) { s.Columns = []Column{{Name: "id", Type: ColumnIgnore}} }, []string{"D would be 0"}},
		{"unnamed column", func(s *Schema) { s.Columns[0].Name = "" }, []string{"columns[0]", "name", "empty"}},
		{"duplicate name", func(s *Schema) { s.Columns[2].Name = "age" }, []string{`columns[2] ("age")`, "also the name of columns[0]"}},
		{"label as column", func(s *Schema) { s.Columns[0].Name = "y" }, []string{`columns[0] ("y")`, "label column"}},
		{"no type", func(s *Schema) { s.Columns[0].Type = "" }, []string{`("age")`, "type", "missing"}},
		{"bad type", func(s *Schema) { s.Columns[0].Type = "float" }, []string{`("age")`, `type: "float"`}},
		{"lo = hi", func(s *Schema) { s.Columns[0].Lo, s.Columns[0].Hi = 5, 5 }, []string{`("age")`, "hi: 5, want hi > lo = 5"}},
		{"lo > hi", func(s *Schema) { s.Columns[0].Lo = 200 }, []string{`("age")`, "hi > lo = 200"}},
		{"NaN lo", func(s *Schema) { s.Columns[0].Lo = math.NaN() }, []string{`("age")`, "lo: NaN"}},
		{"Inf hi", func(s *Schema) { s.Columns[0].Hi = math.Inf(1) }, []string{`("age")`, "hi: +Inf"}},
		{"overflowing range", func(s *Schema) { s.Columns[0].Lo, s.Columns[0].Hi = -1e308, 1e308 }, []string{`("age")`, "overflows"}},
		{"log below -1", func(s *Schema) { s.Columns[1].Lo = -1 }, []string{`("income")`, "lo: -1", "lo > −1"}},
		{"log indistinct", func(s *Schema) { s.Columns[1].Lo, s.Columns[1].Hi = 1e300, 1.0000000000000001e300*(1+1e-15) }, []string{`("income")`, "cannot tell them apart"}},
		{"bad scale", func(s *Schema) { s.Columns[0].Scale = "sqrt" }, []string{`("age")`, `scale: "sqrt"`}},
		{"numeric other", func(s *Schema) { s.Columns[0].Missing = MissingOther }, []string{`("age")`, `missing: "other"`}},
		{"numeric categories", func(s *Schema) { s.Columns[0].Categories = []string{"a"} }, []string{`("age")`, "categories", "categorical columns only"}},
		{"categorical bounds", func(s *Schema) { s.Columns[2].Hi = 1 }, []string{`("color")`, "lo/hi/scale"}},
		{"categorical lo", func(s *Schema) { s.Columns[2].Missing = MissingLo }, []string{`("color")`, `missing: "lo"`}},
		{"no categories", func(s *Schema) { s.Columns[2].Categories = nil }, []string{`("color")`, "categories", "0 entries"}},
		{"duplicate category", func(s *Schema) { s.Columns[2].Categories = []string{"red", "red"} }, []string{`("color")`, "categories[1]", "twice"}},
		{"other category", func(s *Schema) { s.Columns[2].Categories = []string{"red", "(other)"} }, []string{`("color")`, "categories[1]", "other bucket"}},
		{"missing category", func(s *Schema) { s.Columns[2].Categories = []string{"red", "?"} }, []string{`("color")`, "categories[1]", "missing_values"}},
		{"blank category", func(s *Schema) { s.Columns[2].Categories = []string{"red "} }, []string{`("color")`, "categories[0]", "blanks"}},
		{"ignore with bounds", func(s *Schema) { s.Columns[3].Hi = 3 }, []string{`("id")`, "ignored column"}},
		{"ignore with missing", func(s *Schema) { s.Columns[3].Missing = MissingError }, []string{`("id")`, "ignored column"}},
		{"too wide", func(s *Schema) { s.Columns[2].Categories = make([]string, MaxSchemaCategories+1) }, []string{`("color")`, "65537 entries"}},
	} {
		s := smallSchema()
		tc.edit(s)
		err := s.Validate()
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		var se *SchemaError
		if !errors.Is(err, ErrSchema) || !errors.As(err, &se) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %q is not a one-line SchemaError", tc.name, err)
		}
		for _, f := range tc.want {
			if !strings.Contains(err.Error(), f) {
				t.Errorf("%s: error %q does not contain %q", tc.name, err, f)
			}
		}
		if _, err := s.Encoder(); err == nil {
			t.Errorf("%s: Encoder accepted an invalid schema", tc.name)
		}
	}
	var nilSchema *Schema
	if err := nilSchema.Validate(); !errors.Is(err, ErrSchema) {
		t.Errorf("nil schema: %v", err)
	}
}

// TestParseSchema: JSON errors name the column and the field; valid text parses to the
// schema it describes.
func TestParseSchema(t *testing.T) {
	good := `{"label": {"column": "y", "classes": ["no", "yes"]},
	  "missing_values": ["?", "NA"],
	  "columns": [
	    {"name": "age", "type": "numeric", "lo": 0, "hi": 100},
	    {"name": "income", "type": "numeric", "lo": 0, "hi": 1e6, "scale": "log", "missing": "lo"},
	    {"name": "color", "type": "categorical", "categories": ["red", "green", "blue"]},
	    {"name": "id", "type": "ignore"}]}`
	s, err := ParseSchema([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, smallSchema()) {
		t.Fatalf("parsed %+v, want %+v", s, smallSchema())
	}
	for _, tc := range []struct{ text, want string }{
		{``, "EOF"},
		{`{`, "unexpected EOF"},
		{`[]`, "cannot unmarshal array"},
		{`{"label": {"column": "y", "classes": ["a", "b"]}, "columns": [{"name": "x", "type": "numeric", "lo": 0, "hi": 1}]} {}`, "data after the JSON value"},
		{`{"labels": {}}`, `unknown field "labels"`},
		{`{"label": {"column": "y", "classes": ["a", "b"], "kind": 1}, "columns": []}`, `unknown field "kind"`},
		{`{"label": {"column": "y", "classes": ["a", "b"]}, "columns": [{"name": "c", "type": "categorical", "catgories": ["a"]}]}`, `("c"): json: unknown field "catgories"`},
		{`{"label": {"column": "y", "classes": ["a", "b"]}, "columns": [{"name": "x", "type": "numeric", "hi": 1}]}`, `("x"): a numeric column needs both "lo" and "hi"`},
		{`{"label": {"column": "y", "classes": ["a", "b"]}, "columns": [{"name": "x", "type": "numeric", "lo": 0}]}`, `needs both "lo" and "hi"`},
		{`{"label": {"column": "y", "classes": ["a", "b"]}, "columns": [{"name": "x", "type": "numeric", "lo": "0", "hi": 1}]}`, `cannot unmarshal string`},
		{`{"label": {"column": "y", "classes": ["a", "b"]}, "columns": [{"name": "x", "type": "numeric", "lo": 0, "hi": 1e999}]}`, `1e999`},
		{`{"label": {"column": "y", "classes": ["a", "b"]}, "columns": [{"name": "x", "type": "numeric", "lo": 2, "hi": 1}]}`, `columns[0] ("x"): hi: 1, want hi > lo = 2`},
	} {
		_, err := ParseSchema([]byte(tc.text))
		if err == nil || !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want a one-line schema error containing %q", tc.text, err, tc.want)
		}
	}
}

// TestSchemaJSONRoundTrip: a schema marshalled and parsed back is the same schema, including
// a numeric column whose bound is 0 (which must not be dropped as an empty value) and the
// warning of a draft.
func TestSchemaJSONRoundTrip(t *testing.T) {
	drafted := smallSchema()
	drafted.Warning = DraftWarning
	drafted.Columns[0].Lo, drafted.Columns[0].Hi = -0.1, 0
	for _, s := range []*Schema{smallSchema(), AdultSchema(), MNISTSchema(), drafted} {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseSchema(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if !reflect.DeepEqual(back, s) {
			t.Fatalf("round trip changed the schema:\n%+v\n%+v", s, back)
		}
		// Embedded in another document (a saved model), the same holds.
		var doc struct{ Schema Schema }
		if err := json.Unmarshal([]byte(`{"Schema": `+string(b)+`}`), &doc); err != nil || !reflect.DeepEqual(&doc.Schema, s) {
			t.Fatalf("embedded round trip: %v", err)
		}
	}
	if !strings.Contains(mustJSON(t, smallSchema()), `"lo":0,"hi":100`) {
		t.Errorf("a zero bound is dropped: %s", mustJSON(t, smallSchema()))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAdultSchemaIsTheEncoder: the generic encoder of AdultSchema has the Adult encoder's
// width, feature names and categories, and Adult's D is the schema's Dim.
func TestAdultSchemaIsTheEncoder(t *testing.T) {
	s := AdultSchema()
	enc, err := s.Encoder()
	if err != nil {
		t.Fatal(err)
	}
	a := NewAdultEncoder()
	if enc.Dim() != AdultDim || s.Dim() != AdultDim || a.Dim() != AdultDim {
		t.Fatalf("D: encoder %d, schema %d, Adult %d, want %d", enc.Dim(), s.Dim(), a.Dim(), AdultDim)
	}
	if !reflect.DeepEqual(enc.FeatureNames(), a.FeatureNames()) {
		t.Fatal("feature names differ")
	}
	if enc.Classes() != 2 {
		t.Fatalf("classes %d", enc.Classes())
	}
}

// TestDocsSchemaExample: the schema example of docs/datasets.md is valid and has the D and
// feature names the text gives.
func TestDocsSchemaExample(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "datasets.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "### The schema file")
	_, block, ok2 := strings.Cut(after, "```json\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("no JSON block under \"### The schema file\"")
	}
	s, err := ParseSchema([]byte(block))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := s.Encoder()
	if err != nil {
		t.Fatal(err)
	}
	names := enc.FeatureNames()
	if enc.Dim() != 9 || !slices.Equal(names[:6], []string{"age", "capital-gain", "hours-per-week", "sex=Female", "sex=Male", "sex=(other)"}) || names[6] != "workclass=Private" {
		t.Fatalf("D %d, names %v", enc.Dim(), names)
	}
	if !strings.Contains(after, "here 3 + 3 + 3 = 9") {
		t.Error("the text no longer states D = 9")
	}
}
