package datasets

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// IDX element type codes (the third byte of the magic number).
const (
	IDXUint8   byte = 0x08 // unsigned byte
	IDXInt8    byte = 0x09 // signed byte
	IDXInt16   byte = 0x0B // big-endian int16
	IDXInt32   byte = 0x0C // big-endian int32
	IDXFloat32 byte = 0x0D // big-endian IEEE float32
	IDXFloat64 byte = 0x0E // big-endian IEEE float64
)

// Limits of [ReadIDX].
const (
	// MaxIDXDims is the largest number of dimensions accepted.
	MaxIDXDims = 16
	// MaxIDXBytes is the largest payload (product of dims × element size) accepted.
	MaxIDXBytes = 1 << 32
	// idxInitialAlloc caps the buffer allocated up front from the header's claim; beyond it
	// the buffer grows only as data actually arrives.
	idxInitialAlloc = 1 << 20
)

// IDX is a parsed IDX file: the element type, the dimensions and the raw element bytes.
//
// The format (LeCun et al., MNIST): a 4-byte magic 0x00 0x00 type ndims, then ndims big-endian
// uint32 extents, then the elements in row-major order, multi-byte elements big-endian.
// MNIST images are type 0x08 with 3 dims (magic 0x00000803 = 2051), labels type 0x08 with
// 1 dim (magic 0x00000801 = 2049).
//
// An IDX holds the elements as stored: [ReadIDX] checks the structure, not the values, so a
// float payload may hold NaN or ±Inf, which [IDX.At] returns as they are. A loader built on it
// states its own policy for such values ([LoadMNIST] accepts only byte pixels, which have
// none).
type IDX struct {
	Type byte   // element type code, one of IDXUint8 … IDXFloat64
	Dims []int  // extents, outermost first
	Data []byte // len(Data) = product(Dims) · ElemSize(), big-endian elements
}

// Magic returns the 32-bit magic number of the file: Type<<8 | len(Dims).
func (x *IDX) Magic() uint32 { return uint32(x.Type)<<8 | uint32(len(x.Dims)) }

// ElemSize returns the size in bytes of one element, or 0 for an unknown type code.
func (x *IDX) ElemSize() int { return idxElemSize(x.Type) }

// Len returns the number of elements (the product of Dims).
func (x *IDX) Len() int {
	n := 1
	for _, d := range x.Dims {
		n *= d
	}
	return n
}

// At returns element i (in row-major order) converted to float64. It panics if i is out of
// range.
func (x *IDX) At(i int) float64 {
	s := x.ElemSize()
	b := x.Data[i*s : (i+1)*s]
	switch x.Type {
	case IDXUint8:
		return float64(b[0])
	case IDXInt8:
		return float64(int8(b[0]))
	case IDXInt16:
		return float64(int16(binary.BigEndian.Uint16(b)))
	case IDXInt32:
		return float64(int32(binary.BigEndian.Uint32(b)))
	case IDXFloat32:
		return float64(math.Float32frombits(binary.BigEndian.Uint32(b)))
	case IDXFloat64:
		return math.Float64frombits(binary.BigEndian.Uint64(b))
	}
	panic(fmt.Sprintf("datasets: IDX.At: unknown type code 0x%02x", x.Type))
}

// Float64s returns all elements converted to float64.
func (x *IDX) Float64s() []float64 {
	out := make([]float64, x.Len())
	for i := range out {
		out[i] = x.At(i)
	}
	return out
}

func idxElemSize(t byte) int {
	switch t {
	case IDXUint8, IDXInt8:
		return 1
	case IDXInt16:
		return 2
	case IDXInt32, IDXFloat32:
		return 4
	case IDXFloat64:
		return 8
	}
	return 0
}

// ReadIDX parses one IDX stream from r. A gzip-compressed stream is detected by its magic bytes
// (0x1f 0x8b) and decompressed. The whole payload must be present and nothing may follow it;
// for gzip input the CRC is verified. Errors are *ParseError values giving the byte offset
// (in the decompressed stream) and the problem. Headers are never trusted for allocation: at
// most 1 MiB is reserved up front and the buffer grows only as data arrives, and payloads over
// MaxIDXBytes are refused.
func ReadIDX(r io.Reader) (*IDX, error) {
	return readIDX(r, "idx", -1)
}

// gzipMaxRatio bounds how much deflate can expand its input (about 1032:1).
const gzipMaxRatio = 1032

// readIDX is ReadIDX with a name for errors and the size of the input in bytes (-1: unknown).
// A known input size bounds the plausible payload, which may then be allocated at once.
func readIDX(r io.Reader, name string, inputSize int64) (*IDX, error) {
	src, closeFn, err := maybeGunzip(r, name)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	plausible := inputSize
	if _, gz := src.(*gzip.Reader); gz && inputSize >= 0 {
		plausible = min(inputSize, MaxIDXBytes) * gzipMaxRatio
	}
	perr := func(off int64, cause error, format string, args ...any) error {
		return &ParseError{File: name, Offset: off, Msg: fmt.Sprintf(format, args...), Err: cause}
	}
	var hdr [4]byte
	if n, err := io.ReadFull(src, hdr[:]); err != nil {
		return nil, perr(int64(n), ioCause(err), "%s IDX header (%d of 4 magic bytes)", shortOr(err), n)
	}
	if hdr[0] != 0 || hdr[1] != 0 {
		return nil, perr(0, nil, "bad IDX magic 0x%08x: the first two bytes must be zero", binary.BigEndian.Uint32(hdr[:]))
	}
	typ, nd := hdr[2], int(hdr[3])
	es := idxElemSize(typ)
	if es == 0 {
		return nil, perr(2, nil, "bad IDX magic 0x%08x: unknown element type 0x%02x (want 0x08, 0x09, 0x0B, 0x0C, 0x0D or 0x0E)", binary.BigEndian.Uint32(hdr[:]), typ)
	}
	if nd < 1 || nd > MaxIDXDims {
		return nil, perr(3, nil, "bad IDX magic 0x%08x: %d dimensions, want 1 to %d", binary.BigEndian.Uint32(hdr[:]), nd, MaxIDXDims)
	}
	dimBytes := make([]byte, 4*nd)
	if n, err := io.ReadFull(src, dimBytes); err != nil {
		return nil, perr(4+int64(n), ioCause(err), "%s IDX header: %d dimensions declared, %d of %d extent bytes present", shortOr(err), nd, n, 4*nd)
	}
	dims := make([]int, nd)
	total := uint64(es)
	for k := range dims {
		v := binary.BigEndian.Uint32(dimBytes[4*k:])
		dims[k] = int(v)
		if v != 0 && total > MaxIDXBytes/uint64(v) {
			return nil, perr(4+4*int64(k), nil, "IDX dimension %d = %d makes the payload larger than the limit of %d bytes", k, v, uint64(MaxIDXBytes))
		}
		total *= uint64(v)
	}
	if total > MaxIDXBytes {
		return nil, perr(4, nil, "IDX payload of %d bytes exceeds the limit of %d bytes", total, uint64(MaxIDXBytes))
	}
	dataOff := int64(4 + 4*nd)
	initial := min(total, idxInitialAlloc)
	if plausible >= 0 && total <= uint64(plausible) {
		initial = total // the input is large enough to hold it: allocate once
	}
	data, err := readN(src, int(total), int(initial))
	if err != nil {
		return nil, perr(dataOff+int64(len(data)), ioCause(err), "%s IDX data: dims %v need %d bytes, got %d", truncatedOr(err), dims, total, len(data))
	}
	// Nothing may follow the payload. Reading to EOF also makes gzip verify its CRC.
	var one [1]byte
	n, err := io.ReadFull(src, one[:])
	if n > 0 {
		extra, _ := io.Copy(io.Discard, io.LimitReader(src, 1<<20))
		return nil, perr(dataOff+int64(total), nil, "%d or more bytes of trailing data after the IDX payload of dims %v", extra+1, dims)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, perr(dataOff+int64(total), ioCause(err), "after the IDX payload")
	}
	return &IDX{Type: typ, Dims: dims, Data: data}, nil
}

// ioCause maps a bare io.EOF (nothing read) to io.ErrUnexpectedEOF: for a reader that needed
// more data both mean truncation.
func ioCause(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// shortOr and truncatedOr name a failed read: "short"/"truncated" when the input ended,
// "unreadable" for any other error (corrupt gzip, I/O).
func shortOr(err error) string {
	if errors.Is(ioCause(err), io.ErrUnexpectedEOF) {
		return "short"
	}
	return "unreadable"
}

func truncatedOr(err error) string {
	if errors.Is(ioCause(err), io.ErrUnexpectedEOF) {
		return "truncated"
	}
	return "unreadable"
}

// readN reads exactly n bytes into a buffer of initial capacity c0 ≤ n that grows as data
// arrives, rather than trusting n for the allocation. On a short read it returns what it got
// and the error.
func readN(r io.Reader, n, c0 int) ([]byte, error) {
	buf := make([]byte, 0, c0)
	for len(buf) < n {
		if len(buf) == cap(buf) {
			nb := make([]byte, len(buf), min(n, max(2*cap(buf), 4096)))
			copy(nb, buf)
			buf = nb
		}
		m, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err != nil {
			if len(buf) == n {
				break
			}
			return buf, err
		}
	}
	return buf, nil
}

// maybeGunzip wraps r in a gzip reader if the stream starts with the gzip magic bytes.
func maybeGunzip(r io.Reader, name string) (io.Reader, func(), error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, err := br.Peek(2)
	if err != nil && len(magic) == 0 && !errors.Is(err, io.EOF) {
		return nil, nil, &ParseError{File: name, Offset: 0, Msg: "read", Err: err}
	}
	if !bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		return br, func() {}, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, nil, &ParseError{File: name, Offset: 0, Msg: "bad gzip header", Err: ioCause(err)}
	}
	return zr, func() { _ = zr.Close() }, nil
}
