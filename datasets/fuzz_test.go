package datasets

import (
	"bytes"
	"errors"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzReadIDX: any input gives either a consistent IDX or a ParseError, never a panic.
func FuzzReadIDX(f *testing.F) {
	good := idxBytes(IDXUint8, []uint32{2, 2, 2}, []byte{1, 2, 3, 4, 5, 6, 7, 8})
	f.Add(good)
	f.Add(gzipBytes(f, good))
	f.Add(idxBytes(IDXUint8, []uint32{3}, []byte{5, 0, 4}))
	f.Add(idxBytes(IDXFloat64, []uint32{1}, []byte{0x3f, 0xf0, 0, 0, 0, 0, 0, 0}))
	f.Add(idxBytes(IDXInt16, []uint32{1, 1}, []byte{0xff, 0xfe}))
	f.Add(idxBytes(IDXUint8, []uint32{0xffff, 0xffff}, []byte{1}))
	f.Add(good[:len(good)-3])
	f.Add([]byte{0, 0, 7, 1})
	f.Add([]byte{0x1f, 0x8b})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		x, err := ReadIDX(bytes.NewReader(data))
		if err != nil {
			if x != nil {
				t.Fatal("result and error")
			}
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %q does not match ErrFormat", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if len(x.Data) != x.Len()*x.ElemSize() || x.ElemSize() == 0 || len(x.Dims) == 0 {
			t.Fatalf("inconsistent IDX: type 0x%02x dims %v, %d bytes", x.Type, x.Dims, len(x.Data))
		}
		if bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
			return
		}
		// Raw input: the payload is exactly the bytes after the header.
		if h := 4 + 4*len(x.Dims); !bytes.Equal(x.Data, data[h:]) {
			t.Fatal("payload differs from the input bytes after the header")
		}
		_ = x.Float64s()
	})
}

// FuzzAdultCSV: any text gives records or a ParseError naming a line; records are finite and
// encode with the public schema to a valid dataset of D = AdultDim whose features lie in
// [0, 1], with exactly one 1 per categorical column, and whose every row equals its record
// encoded alone (a row depends on its own record only).
func FuzzAdultCSV(f *testing.F) {
	row := "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, Male, 2174, 0, 40, United-States, <=50K\n"
	f.Add(adultSample)
	f.Add(row)
	f.Add("1,a,2,b,3,c,d,e,f,g,4,5,6,h,>50K.\n1,a,2,b,3,c,d,e,f,g,4,5,6,h,<=50K\n")
	f.Add("1,a,2,b,3,c,d,e,f,g,4,5,6,h,>50K.\n1,?,1e-150,b,3,c,d,e,f,g,4,5,6,h,<=50K\n")
	f.Add(row + strings.Replace(row, "United-States", "Holand-Netherlands", 1))
	f.Add(row + strings.Replace(row, "39", "nan", 1))
	f.Add(row + strings.Replace(row, "2174", "-Infinity", 1))
	f.Add(row + strings.Replace(row, "2174", "0x1p4", 1))
	f.Add(row + strings.Replace(row, "2174", "1e400", 1))
	f.Add(row + strings.Replace(row, "2174", "-1e300", 1))
	f.Add(row + strings.Replace(row, "77516", "1_000", 1))
	f.Add("|1x3 Cross validator\n\n")
	f.Add("1,2,3\n")
	f.Add("x,a,2,b,3,c,d,e,f,g,4,5,6,h,>50K\n")
	f.Add("1,,2,b,3,c,d,e,f,g,4,5,6,h,>50K\n")
	f.Add("")
	enc := NewAdultEncoder()
	groups := adultGroups(enc.FeatureNames())
	f.Fuzz(func(t *testing.T, text string) {
		recs, err := ReadAdultCSV(strings.NewReader(text), "fuzz.csv")
		if err != nil {
			var pe *ParseError
			if recs != nil || !errors.Is(err, ErrFormat) || !errors.As(err, &pe) || pe.Line < 1 || strings.Contains(err.Error(), "\n") {
				t.Fatalf("bad error %q (records %v)", err, recs != nil)
			}
			return
		}
		for _, r := range recs {
			if r.Label != 0 && r.Label != 1 {
				t.Fatalf("label %d", r.Label)
			}
			for _, v := range r.Continuous {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("non-finite value %v", v)
				}
			}
		}
		ds, err := enc.Encode("fuzz", recs)
		if err != nil {
			t.Fatalf("records from ReadAdultCSV do not encode: %v", err)
		}
		if err := ds.Validate(); err != nil {
			t.Fatal(err)
		}
		if ds.D != AdultDim || len(ds.FeatureNames) != AdultDim || ds.N != len(recs) {
			t.Fatalf("D %d, names %d, N %d of %d", ds.D, len(ds.FeatureNames), ds.N, len(recs))
		}
		for i := range ds.N {
			row := ds.Row(i)
			for j, v := range row {
				if !(v >= 0 && v <= 1) {
					t.Fatalf("row %d feature %s = %v, want a value in [0, 1]", i, ds.FeatureNames[j], v)
				}
			}
			checkOneHot(t, "fuzz", i, row, groups)
			alone, err := enc.Encode("alone", recs[i:i+1])
			if err != nil || !slices.Equal(alone.Row(0), row) {
				t.Fatalf("row %d differs from its record encoded alone (%v)", i, err)
			}
		}
	})
}

// plainDecimalRE is the oracle of isPlainDecimal: the pattern its doc comment states.
var plainDecimalRE = regexp.MustCompile(`^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

// FuzzAdultNumber: the numbers ReadAdultCSV accepts are exactly the plain decimals that
// strconv.ParseFloat reads as finite, with ParseFloat's value; the rest are refused.
func FuzzAdultNumber(f *testing.F) {
	for _, s := range []string{"0", "-0", "+1.5", ".5", "5.", "1e5", "1E-5", "1e400", "1e-400", "NaN", "nan", "Inf", "-inf",
		"infinity", "0x1p4", "0x10", "1_000", "", "-", ".", "e5", "1e", "1e+", "00012", " 1", "1 ", "١"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, nerr := parseAdultNumber(s)
		pv, perr := strconv.ParseFloat(s, 64)
		plain := isPlainDecimal(s)
		if want := plainDecimalRE.MatchString(s); plain != want {
			t.Fatalf("isPlainDecimal(%q) = %v, the regular expression says %v", s, plain, want)
		}
		switch {
		case nerr != nil:
			if plain && perr == nil && !math.IsNaN(pv) && !math.IsInf(pv, 0) {
				t.Fatalf("%q refused (%s), ParseFloat reads %v", s, nerr.msg, pv)
			}
		case math.IsNaN(v) || math.IsInf(v, 0):
			t.Fatalf("%q accepted as %v", s, v)
		case !plain || perr != nil || v != pv || math.Signbit(v) != math.Signbit(pv):
			t.Fatalf("%q accepted as %v: plain %v, ParseFloat %v, %v", s, v, plain, pv, perr)
		}
		for _, c := range []byte(s) {
			if !strings.ContainsRune("+-.0123456789eE", rune(c)) && nerr == nil {
				t.Fatalf("%q accepted with the byte %q", s, c)
			}
		}
	})
}
