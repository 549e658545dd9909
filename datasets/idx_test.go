package datasets

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"runtime"
	"slices"
	"testing"
	"testing/iotest"
)

// TestReadIDXTypes writes one file of each element type with encoding/binary and checks that
// every element reads back, raw and gzip-compressed.
func TestReadIDXTypes(t *testing.T) {
	vals := []float64{0, 1, -2, 100, -128, 127, 3.5, -1e-3}
	type tc struct {
		typ  byte
		enc  func(v float64) any
		want func(v float64) float64
	}
	cases := []tc{
		{IDXUint8, func(v float64) any { return uint8(int8(v)) }, func(v float64) float64 { return float64(uint8(int8(v))) }},
		{IDXInt8, func(v float64) any { return int8(v) }, func(v float64) float64 { return float64(int8(v)) }},
		{IDXInt16, func(v float64) any { return int16(v * 100) }, func(v float64) float64 { return float64(int16(v * 100)) }},
		{IDXInt32, func(v float64) any { return int32(v * 1e6) }, func(v float64) float64 { return float64(int32(v * 1e6)) }},
		{IDXFloat32, func(v float64) any { return float32(v) }, func(v float64) float64 { return float64(float32(v)) }},
		{IDXFloat64, func(v float64) any { return v }, func(v float64) float64 { return v }},
	}
	for _, c := range cases {
		var payload bytes.Buffer
		for _, v := range vals {
			if err := binary.Write(&payload, binary.BigEndian, c.enc(v)); err != nil {
				t.Fatal(err)
			}
		}
		raw := idxBytes(c.typ, []uint32{2, 4}, payload.Bytes())
		for _, in := range [][]byte{raw, gzipBytes(t, raw)} {
			x, err := ReadIDX(bytes.NewReader(in))
			if err != nil {
				t.Fatalf("type 0x%02x: %v", c.typ, err)
			}
			if x.Type != c.typ || !slices.Equal(x.Dims, []int{2, 4}) || x.Len() != 8 {
				t.Fatalf("type 0x%02x: got type 0x%02x dims %v", c.typ, x.Type, x.Dims)
			}
			if x.Magic() != uint32(c.typ)<<8|2 {
				t.Errorf("Magic = 0x%08x", x.Magic())
			}
			got := x.Float64s()
			for i, v := range vals {
				if got[i] != c.want(v) {
					t.Errorf("type 0x%02x element %d = %v, want %v", c.typ, i, got[i], c.want(v))
				}
			}
		}
	}
}

// TestReadIDXMNISTHeader: the magic numbers quoted in the MNIST README (2051, 2049).
func TestReadIDXMNISTHeader(t *testing.T) {
	in := []byte{0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 2, 10, 20, 30, 40}
	x, err := ReadIDX(bytes.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if x.Magic() != 2051 || !slices.Equal(x.Dims, []int{1, 2, 2}) || !slices.Equal(x.Data, []byte{10, 20, 30, 40}) {
		t.Errorf("got magic %d dims %v data %v", x.Magic(), x.Dims, x.Data)
	}
	lbl := []byte{0, 0, 8, 1, 0, 0, 0, 3, 5, 0, 4}
	x, err = ReadIDX(iotest.OneByteReader(bytes.NewReader(lbl)))
	if err != nil {
		t.Fatal(err)
	}
	if x.Magic() != 2049 || !slices.Equal(x.Data, []byte{5, 0, 4}) {
		t.Errorf("labels: magic %d data %v", x.Magic(), x.Data)
	}
	// A zero extent is a valid, empty file.
	x, err = ReadIDX(bytes.NewReader([]byte{0, 0, 8, 1, 0, 0, 0, 0}))
	if err != nil || x.Len() != 0 || len(x.Data) != 0 {
		t.Errorf("empty IDX: %v, %+v", err, x)
	}
}

func TestReadIDXErrors(t *testing.T) {
	good := idxBytes(IDXUint8, []uint32{3, 2}, []byte{1, 2, 3, 4, 5, 6})
	gz := gzipBytes(t, good)
	badCRC := slices.Clone(gz)
	badCRC[len(badCRC)-8] ^= 0xff // the CRC-32 in the gzip trailer
	cases := []struct {
		name string
		in   []byte
		want []string
	}{
		{"empty", nil, []string{"offset 0", "short IDX header"}},
		{"short magic", []byte{0, 0}, []string{"offset 2", "short IDX header"}},
		{"nonzero magic bytes", []byte{1, 0, 8, 1, 0, 0, 0, 0}, []string{"offset 0", "bad IDX magic 0x01000801"}},
		{"unknown type", []byte{0, 0, 7, 1, 0, 0, 0, 0}, []string{"offset 2", "unknown element type 0x07"}},
		{"zero dims", []byte{0, 0, 8, 0}, []string{"offset 3", "0 dimensions"}},
		{"too many dims", []byte{0, 0, 8, 17}, []string{"17 dimensions"}},
		{"short dims", []byte{0, 0, 8, 3, 0, 0, 0, 1, 0, 0}, []string{"offset 10", "short IDX header"}},
		{"short data", good[:len(good)-2], []string{"offset 16", "truncated IDX data", "need 6 bytes, got 4"}},
		{"trailing data", append(slices.Clone(good), 9, 9), []string{"offset 18", "trailing data"}},
		{"over limit", []byte{0, 0, 0x0E, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, []string{"limit"}},
		{"truncated gzip", gz[:len(gz)/2], []string{"unexpected EOF"}},
		{"gzip header only", gz[:5], []string{"bad gzip header"}},
		{"gzip bad CRC", badCRC, []string{"checksum"}},
		{"gzip wrapping short data", gzipBytes(t, good[:len(good)-1]), []string{"truncated IDX data"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x, err := ReadIDX(bytes.NewReader(c.in))
			if x != nil {
				t.Errorf("got a result %+v with the error", x)
			}
			checkFormatErr(t, err, c.want...)
		})
	}
	// Truncation errors unwrap to io.ErrUnexpectedEOF, CRC errors to gzip.ErrChecksum.
	if _, err := ReadIDX(bytes.NewReader(good[:10])); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short header: %v does not match io.ErrUnexpectedEOF", err)
	}
	if _, err := ReadIDX(bytes.NewReader(badCRC)); !errors.Is(err, gzip.ErrChecksum) {
		t.Errorf("bad CRC: %v does not match gzip.ErrChecksum", err)
	}
	// A reader error is passed on.
	boom := errors.New("disk on fire")
	if _, err := ReadIDX(io.MultiReader(bytes.NewReader(good[:12]), iotest.ErrReader(boom))); !errors.Is(err, boom) {
		t.Errorf("reader error: got %v", err)
	}
}

// TestReadIDXHugeHeaderNoAlloc: a 16-byte file claiming a 4 GB payload must fail without
// allocating anywhere near that.
func TestReadIDXHugeHeaderNoAlloc(t *testing.T) {
	in := []byte{0, 0, 8, 2, 0, 0, 0xff, 0xff, 0, 0, 0xff, 0xff, 1, 2, 3}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadIDX(bytes.NewReader(in))
	runtime.ReadMemStats(&after)
	checkFormatErr(t, err, "truncated IDX data")
	if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
		t.Errorf("allocated %d bytes for a 15-byte input", got)
	}
}

func TestIDXAtFloatSpecials(t *testing.T) {
	var p bytes.Buffer
	_ = binary.Write(&p, binary.BigEndian, []float32{float32(math.Inf(1)), -0.5})
	x, err := ReadIDX(bytes.NewReader(idxBytes(IDXFloat32, []uint32{2}, p.Bytes())))
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsInf(x.At(0), 1) || x.At(1) != -0.5 || x.ElemSize() != 4 {
		t.Errorf("At = %v, %v; ElemSize %d", x.At(0), x.At(1), x.ElemSize())
	}
}

func BenchmarkReadIDXGzip(b *testing.B) {
	payload := make([]byte, 10000*784)
	for i := range payload {
		payload[i] = byte(i * 7 % 256 * (i % 3 / 2))
	}
	in := gzipBytes(b, idxBytes(IDXUint8, []uint32{10000, 28, 28}, payload))
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if _, err := ReadIDX(bytes.NewReader(in)); err != nil {
			b.Fatal(err)
		}
	}
}
