package datasets

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
)

// FuzzSchema: any text gives a valid schema or a one-line ErrSchema error, never a panic; a
// valid schema marshals to JSON and parses back to itself (what a saved model embeds), and
// its encoder has width Dim in [1, MaxSchemaDim] and encodes a record of missing or zero
// values to finite features in [0, 1] (or refuses it with a FieldError).
func FuzzSchema(f *testing.F) {
	for _, s := range []*Schema{smallSchema(), AdultSchema(), MNISTSchema()} {
		b, err := json.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"label":{"column":"y","classes":["a","b"]},"columns":[{"name":"x","type":"numeric","lo":-0,"hi":1e-300,"scale":"log","missing":"hi"}]}`))
	f.Add([]byte(`{"label":{"column":"y","classes":["a","b"]},"columns":[{"name":"x","type":"numeric","hi":1}]}`))
	f.Add([]byte(`{"label":{"column":"y","classes":["a","b"]},"columns":[{"name":"x","type":"categorical","categories":["(other)"]}]}`))
	f.Add([]byte(`{"warning":"w","label":{"column":"y","classes":["a","b"]},"missing_values":[],"columns":[{"name":"x","type":"ignore"},{"name":"z","type":"categorical","categories":["q"],"missing":"error"}]}`))
	f.Add([]byte(`{"label":{"column":"y","classes":["a","b"]},"columns":[{"name":"x","type":"numeric","lo":-1e308,"hi":1e308}]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSchema(data)
		if err != nil {
			if s != nil || !errors.Is(err, ErrSchema) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("bad error %q (schema %v)", err, s != nil)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("parsed schema does not validate: %v", err)
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("valid schema does not marshal: %v", err)
		}
		back, err := ParseSchema(b)
		if err != nil || !reflect.DeepEqual(back, s) {
			t.Fatalf("round trip through %s: %v", b, err)
		}
		if b2, _ := json.Marshal(back); string(b2) != string(b) {
			t.Fatalf("marshal not stable:\n%s\n%s", b, b2)
		}
		enc, err := s.Encoder()
		if err != nil {
			t.Fatal(err)
		}
		if d := enc.Dim(); d != s.Dim() || d < 1 || d > MaxSchemaDim || len(enc.FeatureNames()) != d {
			t.Fatalf("D %d, Dim %d, %d names", d, s.Dim(), len(enc.FeatureNames()))
		}
		header := []string{s.Label.Column}
		for _, c := range s.Columns {
			header = append(header, c.Name)
		}
		row, err := enc.Bind(header)
		if err != nil || !row.HasLabel() {
			t.Fatalf("the schema's own header: %v", err)
		}
		dst := make([]float32, enc.Dim())
		for _, v := range []string{"", "0"} {
			rec := make([]string, len(header))
			for i := range rec {
				rec[i] = v
			}
			rec[0] = s.Label.Classes[len(s.Label.Classes)-1]
			label, err := row.Encode(dst, rec)
			if err != nil {
				var fe *FieldError
				if !errors.As(err, &fe) || !errors.Is(err, ErrFormat) {
					t.Fatalf("record %q: error %v is not a FieldError", rec, err)
				}
				continue
			}
			if label != len(s.Label.Classes)-1 {
				t.Fatalf("label %d", label)
			}
			for j, x := range dst {
				if !(x >= 0 && x <= 1) {
					t.Fatalf("feature %d = %v", j, x)
				}
			}
		}
	})
}

// FuzzCSV: any text read with a fixed schema gives a valid dataset or a one-line ParseError
// naming a line, never a panic. A dataset has D = 6, features in [0, 1] with one 1 per
// categorical column, and each row equals its record encoded alone. A schema drafted from the
// text reads the text back. ReadFeatures (the table to predict on) gives ReadCSV's features
// whenever ReadCSV reads the text, and otherwise whole rows in [0, 1] or such an error.
func FuzzCSV(f *testing.F) {
	f.Add("y,color,id,income,age\nyes,green,1,999999,50\nno,purple,2,,150\n")
	f.Add("\ufeffage,income,color,y\r\n1,2,red,no\r\n\r\n3,NA,\"b,l\"\"ue\",yes\r\n")
	f.Add("y,color,id,income,age\nyes,\"multi\nline\",1,2,3\n")
	f.Add("y,color,id,income,age\nyes,red,1,2,NaN\n")
	f.Add("y,color,id,income,age\nyes,red,1,2\n")
	f.Add("y,color,id,income,age\nmaybe,red,1,2,3\n")
	f.Add("y,color,id,income,age\nyes,re\"d,1,2,3\n")
	f.Add("y,color,id,income,age\nyes,\"red,1,2,3\n")
	f.Add("y,color,id,income,age\nyes,red,1,1e400,-1e300\nno, ?,x,0x10,+.5e-3\n")
	f.Add("y,y\n1,2\n")
	f.Add("a,b\n1,2\n")
	f.Add("")
	schema := smallSchema()
	enc, err := schema.Encoder()
	if err != nil {
		f.Fatal(err)
	}
	isFormatErr := func(err error) bool {
		var pe *ParseError
		return errors.Is(err, ErrFormat) && errors.As(err, &pe) && pe.Line >= 1 && !strings.Contains(err.Error(), "\n")
	}
	f.Fuzz(func(t *testing.T, text string) {
		ds, err := ReadCSV(strings.NewReader(text), "fuzz.csv", schema)
		if err != nil {
			if ds != nil || !isFormatErr(err) {
				t.Fatalf("bad error %q", err)
			}
		} else {
			if err := ds.Validate(); err != nil {
				t.Fatal(err)
			}
			if ds.D != 6 || ds.Classes != 2 {
				t.Fatalf("D %d classes %d", ds.D, ds.Classes)
			}
			// The records again, through encoding/csv alone: each encodes to its row.
			cr := csv.NewReader(strings.NewReader(text))
			cr.FieldsPerRecord = -1
			header, _ := cr.Read()
			row, err := enc.Bind(header)
			if err != nil {
				t.Fatal(err)
			}
			dst := make([]float32, ds.D)
			for i := 0; ; i++ {
				rec, err := cr.Read()
				if err == io.EOF {
					if i != ds.N {
						t.Fatalf("%d records, N = %d", i, ds.N)
					}
					break
				}
				if err != nil || i >= ds.N {
					t.Fatalf("record %d: %v (N = %d)", i, err, ds.N)
				}
				label, err := row.Encode(dst, rec)
				if err != nil || label != ds.Y[i] || !reflect.DeepEqual(dst, ds.Row(i)) {
					t.Fatalf("record %d encoded alone: %v, %d, %v; in the file %v, %d", i, dst, label, err, ds.Row(i), ds.Y[i])
				}
				sum := 0
				for j, x := range dst {
					if !(x >= 0 && x <= 1) || math.IsNaN(float64(x)) {
						t.Fatalf("record %d feature %d = %v", i, j, x)
					}
					if j >= 2 && x == 1 {
						sum++
					}
				}
				if sum != 1 {
					t.Fatalf("record %d: %d ones in the one-hot color", i, sum)
				}
			}
		}
		// The features to predict on: ReadCSV's whenever it reads the text (labels unread),
		// else whole rows in [0, 1] or a one-line error with a line number.
		x, n, ferr := enc.ReadFeatures(strings.NewReader(text), "fuzz.csv")
		switch {
		case ferr != nil && (x != nil || n != 0 || !isFormatErr(ferr)):
			t.Fatalf("ReadFeatures: bad error %q", ferr)
		case ferr != nil && ds != nil:
			t.Fatalf("ReadFeatures refuses what ReadCSV reads: %v", ferr)
		case ds != nil && !reflect.DeepEqual(x, ds.X):
			t.Fatalf("ReadFeatures: features differ from ReadCSV's")
		case ferr == nil && (n < 1 || len(x) != n*enc.Dim()):
			t.Fatalf("ReadFeatures: %d rows, %d features", n, len(x))
		}
		for j, v := range x {
			if !(v >= 0 && v <= 1) {
				t.Fatalf("ReadFeatures: feature %d = %v", j, v)
			}
		}
		drafted, err := DraftSchema(strings.NewReader(text), "fuzz.csv", DraftOptions{Label: "y", MaxCategories: 3})
		if err != nil {
			if drafted != nil || !isFormatErr(err) && !errors.Is(err, ErrSchema) {
				t.Fatalf("bad draft error %q", err)
			}
			return
		}
		if drafted.Warning != DraftWarning || drafted.Validate() != nil {
			t.Fatalf("draft: warning %q, %v", drafted.Warning, drafted.Validate())
		}
		if _, err := ReadCSV(strings.NewReader(text), "fuzz.csv", drafted); err != nil {
			t.Fatalf("the draft does not read its own text: %v", err)
		}
	})
}
