package datasets

import (
	"bytes"
	"errors"
	"math"
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

// FuzzAdultCSV: any text gives records or a ParseError; records encode to a valid dataset or
// a ParseError.
func FuzzAdultCSV(f *testing.F) {
	f.Add(adultSample)
	f.Add("39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, Male, 2174, 0, 40, United-States, <=50K\n")
	f.Add("1,a,2,b,3,c,d,e,f,g,4,5,6,h,>50K.\n1,a,2,b,3,c,d,e,f,g,4,5,6,h,<=50K\n")
	f.Add("1,a,2,b,3,c,d,e,f,g,4,5,6,h,>50K.\n1,?,1e-150,b,3,c,d,e,f,g,4,5,6,h,<=50K\n")
	f.Add("|1x3 Cross validator\n\n")
	f.Add("1,2,3\n")
	f.Add("x,a,2,b,3,c,d,e,f,g,4,5,6,h,>50K\n")
	f.Add("1,,2,b,3,c,d,e,f,g,4,5,6,h,>50K\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, text string) {
		recs, err := ReadAdultCSV(strings.NewReader(text), "fuzz.csv")
		if err != nil {
			if recs != nil || !errors.Is(err, ErrFormat) || strings.Contains(err.Error(), "\n") {
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
		if len(recs) == 0 {
			return
		}
		enc, err := FitAdultEncoder(recs)
		if err != nil {
			t.Fatal(err)
		}
		ds, err := enc.Encode("fuzz", recs)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("encode error %q does not match ErrFormat", err)
			}
			return
		}
		if err := ds.Validate(); err != nil {
			t.Fatal(err)
		}
		if ds.D != enc.Dim() || len(ds.FeatureNames) != ds.D || ds.N != len(recs) {
			t.Fatalf("D %d, Dim %d, names %d, N %d of %d", ds.D, enc.Dim(), len(ds.FeatureNames), ds.N, len(recs))
		}
	})
}
