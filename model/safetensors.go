package model

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/internal/boundedio"
)

// The safetensors format (Hugging Face's, as its specification states it): an 8-byte
// little-endian header length N; N bytes of JSON, {NAME: {"dtype", "shape", "data_offsets":
// [BEGIN, END]}, …, "__metadata__": {STRING: STRING}}, padded with spaces; then the byte buffer,
// each tensor row-major and little-endian at [BEGIN, END) of it, the tensors covering it without
// holes or overlaps.
//
// WriteSafetensors names and lays out the parameters as PyTorch's nn.Sequential equivalent to
// the architecture holds them (TorchSequential), so that torch's load_state_dict takes them as
// they are:
//
//	logreg  Sequential(Linear(D, K))                                        0.weight [K, D], 0.bias [K]
//	mlp     Sequential(Linear(D, h₁), Act(), …, Linear(hₙ, K))             0, 2, …, 2n
//	cnn     Sequential(Conv2d(C, F₁, k, stride, padding), Act(), MaxPool2d(k′, s′), …,
//	                   Flatten(), Linear(·, h₁), Act(), …, Linear(hₙ, K))  conv weights [F, C, k, k]
//
// Act is Tanh or ReLU. Linear stores its weight as [out, in] where our dense layer holds [in, out]:
// it is transposed on write. A convolution's weight rows are its patch entries; they are put in
// PyTorch's [out channels, in channels, kh, kw] order, and the first dense layer after the
// convolutions is permuted from our row layout (row, column, channel) to Flatten's (channel, row,
// column) (nn.Arch.CHWOrder). Biases are [out]. The dtype is the one trained: F32 or F64.

// Safetensors dtypes.
const (
	DtypeF32 = "F32"
	DtypeF64 = "F64"
)

// maxSafetensorsHeader is the header bound of the safetensors specification (100 MB).
const maxSafetensorsHeader = 100_000_000

// Tensor is one tensor of a safetensors file.
type Tensor struct {
	Dtype string    // DtypeF32 or DtypeF64
	Shape []int     // dimensions, outermost first
	Data  []float64 // row-major values (exact for F32)
}

// Safetensors is the content of a safetensors file.
type Safetensors struct {
	Tensors  map[string]Tensor
	Metadata map[string]string // "__metadata__"; empty when absent
}

// ErrNoTorchLayout is returned for a layer-stack model (nn.KindStack): the safetensors export
// names and lays out the presets' tensors as PyTorch's nn.Sequential holds them, and has no
// such mapping for stacks yet; their release is the model file alone.
var ErrNoTorchLayout = errors.New("model: safetensors: the PyTorch layout is defined for the preset models (logreg, mlp, cnn) only, not for a layer-stack model")

// torchModule is one module of the equivalent nn.Sequential; layer ≥ 0 for a GEMM layer.
type torchModule struct {
	text  string
	layer int
}

// torchModules lists the modules of arch's equivalent nn.Sequential.
func torchModules(arch nn.Arch) ([]torchModule, error) {
	if arch.Kind == nn.KindStack {
		return nil, ErrNoTorchLayout
	}
	ls, err := arch.Layers()
	if err != nil {
		return nil, err
	}
	act := "nn.Tanh()"
	if arch.Activation == nn.ReLU {
		act = "nn.ReLU()"
	}
	var mods []torchModule
	for i, c := range arch.Conv {
		l := ls[i]
		in := l.In / (c.Kernel * c.Kernel)
		mods = append(mods, torchModule{fmt.Sprintf("nn.Conv2d(%d, %d, kernel_size=%d, stride=%d, padding=%d)", in, l.Out, c.Kernel, c.Stride, c.Pad), i},
			torchModule{act, -1})
		if c.PoolKernel > 0 {
			mods = append(mods, torchModule{fmt.Sprintf("nn.MaxPool2d(kernel_size=%d, stride=%d)", c.PoolKernel, c.PoolStride), -1})
		}
	}
	if len(arch.Conv) > 0 {
		mods = append(mods, torchModule{"nn.Flatten()", -1})
	}
	for i := len(arch.Conv); i < len(ls); i++ {
		mods = append(mods, torchModule{fmt.Sprintf("nn.Linear(%d, %d)", ls[i].In, ls[i].Out), i})
		if i < len(ls)-1 {
			mods = append(mods, torchModule{act, -1})
		}
	}
	return mods, nil
}

// TorchSequential returns the PyTorch module equivalent to arch, as Python source:
// "nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 10))". It takes a batch of inputs
// shaped [B, D] for a dense model and [B, C, H, W] for a convolutional one, the features in the
// order the datasets hold them.
func TorchSequential(arch nn.Arch) (string, error) {
	mods, err := torchModules(arch)
	if err != nil {
		return "", err
	}
	parts := make([]string, len(mods))
	for i, m := range mods {
		parts[i] = m.text
	}
	return "nn.Sequential(" + strings.Join(parts, ", ") + ")", nil
}

// TorchTensors returns the parameters as PyTorch's equivalent nn.Sequential names and lays them
// out (see the format note above), in module order, weight before bias.
func TorchTensors(arch nn.Arch, params *nn.Params) ([]string, []Tensor, error) {
	mods, err := torchModules(arch)
	if err != nil {
		return nil, nil, err
	}
	ls, _ := arch.Layers()
	if params == nil || len(params.List) != 2*len(ls) {
		return nil, nil, errors.New("model: torch tensors: the parameters do not match the architecture")
	}
	dtype := DtypeF32
	if _, w, err := dtypeName(params.Dtype); err != nil {
		return nil, nil, err
	} else if w == 8 {
		dtype = DtypeF64
	}
	var names []string
	var ts []Tensor
	for mi, m := range mods {
		if m.layer < 0 {
			continue
		}
		l := ls[m.layer]
		w, b := values(params.List[2*m.layer]), values(params.List[2*m.layer+1])
		if len(w) != l.In*l.Out || len(b) != l.Out {
			return nil, nil, fmt.Errorf("model: torch tensors: layer %s holds %d and %d values, want %d and %d", l.Name, len(w), len(b), l.In*l.Out, l.Out)
		}
		order, err := arch.CHWOrder(m.layer)
		if err != nil {
			return nil, nil, err
		}
		tw := make([]float64, len(w))
		for r := range l.In {
			for o := range l.Out {
				tw[o*l.In+order[r]] = w[r*l.Out+o]
			}
		}
		shape := []int{l.Out, l.In}
		if m.layer < len(arch.Conv) {
			k := arch.Conv[m.layer].Kernel
			shape = []int{l.Out, l.In / (k * k), k, k}
		}
		names = append(names, strconv.Itoa(mi)+".weight", strconv.Itoa(mi)+".bias")
		ts = append(ts, Tensor{Dtype: dtype, Shape: shape, Data: tw}, Tensor{Dtype: dtype, Shape: []int{l.Out}, Data: b})
	}
	return names, ts, nil
}

// values returns a parameter's values as float64 (exact for float32).
func values(p *nn.Param) []float64 {
	switch d := p.Value.Data().(type) {
	case []float32:
		out := make([]float64, len(d))
		for i, v := range d {
			out[i] = float64(v)
		}
		return out
	case []float64:
		return slices.Clone(d)
	}
	return nil
}

// SafetensorsMetadata returns the "__metadata__" WriteSafetensors writes: "format": "pt" (what
// PyTorch's own writer puts there), and the public description of the model: its architecture
// (JSON, as in the model file), the equivalent nn.Sequential, the preprocessing (JSON) and the
// guarantee (statement, ε, δ).
func SafetensorsMetadata(a *Artifact) (map[string]string, error) {
	arch, err := json.Marshal(a.Arch)
	if err != nil {
		return nil, err
	}
	pre, err := json.Marshal(a.Preprocessing)
	if err != nil {
		return nil, err
	}
	seq, err := TorchSequential(a.Arch)
	if err != nil {
		return nil, err
	}
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	return map[string]string{
		"format":              "pt",
		"dpsgd.arch":          string(arch),
		"dpsgd.sequential":    seq,
		"dpsgd.preprocessing": string(pre),
		"dpsgd.guarantee":     a.Guarantee.Statement,
		"dpsgd.epsilon":       num(a.Guarantee.Epsilon),
		"dpsgd.delta":         num(a.Guarantee.Delta),
	}, nil
}

// safetensorsEntry is one tensor of the header.
type safetensorsEntry struct {
	Dtype       *string   `json:"dtype"`
	Shape       []int     `json:"shape"`
	DataOffsets *[2]int64 `json:"data_offsets"`
}

// EncodeSafetensors returns the artifact's parameters as a safetensors file: TorchTensors, and
// SafetensorsMetadata as "__metadata__".
func EncodeSafetensors(a *Artifact) ([]byte, error) {
	if err := a.Validate(); err != nil {
		return nil, fmt.Errorf("model: safetensors: %w", err)
	}
	names, ts, err := TorchTensors(a.Arch, a.Params)
	if err != nil {
		return nil, err
	}
	meta, err := SafetensorsMetadata(a)
	if err != nil {
		return nil, fmt.Errorf("model: safetensors: %w", err)
	}
	return encodeSafetensors(names, ts, meta)
}

// encodeSafetensors lays out tensors ts, named names, in that order, with the metadata meta.
func encodeSafetensors(names []string, ts []Tensor, meta map[string]string) ([]byte, error) {
	if len(names) != len(ts) {
		return nil, fmt.Errorf("model: safetensors: %d names for %d tensors", len(names), len(ts))
	}
	header := map[string]any{}
	if meta != nil {
		header["__metadata__"] = meta
	}
	var buf []byte
	for i, t := range ts {
		if _, dup := header[names[i]]; dup {
			return nil, fmt.Errorf("model: safetensors: tensor name %q twice (or the metadata's)", names[i])
		}
		count := 1
		for _, d := range t.Shape {
			count *= d
		}
		if count != len(t.Data) || (t.Dtype != DtypeF32 && t.Dtype != DtypeF64) {
			return nil, fmt.Errorf("model: safetensors: tensor %q: %s of shape %v with %d values", names[i], t.Dtype, t.Shape, len(t.Data))
		}
		begin := int64(len(buf))
		for _, v := range t.Data {
			if t.Dtype == DtypeF32 {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(float32(v)))
			} else {
				buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(v))
			}
		}
		dt, shape := t.Dtype, t.Shape
		if shape == nil {
			shape = []int{}
		}
		header[names[i]] = safetensorsEntry{Dtype: &dt, Shape: shape, DataOffsets: &[2]int64{begin, int64(len(buf))}}
	}
	js, err := json.Marshal(header)
	if err != nil {
		return nil, fmt.Errorf("model: safetensors header: %w", err)
	}
	if pad := len(js) % 8; pad != 0 {
		js = append(js, bytes.Repeat([]byte{' '}, 8-pad)...)
	}
	out := binary.LittleEndian.AppendUint64(make([]byte, 0, 8+len(js)+len(buf)), uint64(len(js)))
	out = append(out, js...)
	return append(out, buf...), nil
}

// WriteSafetensors writes the artifact's parameters to w as a safetensors file
// (EncodeSafetensors).
func WriteSafetensors(w io.Writer, a *Artifact) error {
	return writeEncoded(w, a, EncodeSafetensors, "model: safetensors")
}

// ReadSafetensors reads a safetensors file of F32 and F64 tensors from r (DecodeSafetensors).
func ReadSafetensors(r io.Reader) (*Safetensors, error) {
	return boundedio.Parse(r, MaxFileBytes, "model: safetensors", ErrFormat, DecodeSafetensors)
}

// DecodeSafetensors parses a safetensors file and checks it as the specification asks: a
// header within 100 MB that is one JSON object starting with "{", no repeated name, string
// metadata, every tensor with a dtype, a shape of dimensions ≥ 0 and data offsets whose span
// holds exactly its values, the tensors covering the byte buffer without holes or overlaps.
// Only F32 and F64 tensors are read (what dpsgd writes); other dtypes are refused by name.
// Errors wrap ErrFormat.
func DecodeSafetensors(data []byte) (*Safetensors, error) {
	if len(data) < 8 {
		return nil, formatErr("safetensors: %d bytes, shorter than the 8-byte header length", len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if n > maxSafetensorsHeader || n > uint64(len(data)-8) {
		return nil, formatErr("safetensors: header of %d bytes: want at most %d and the %d bytes the file holds", n, maxSafetensorsHeader, len(data)-8)
	}
	head, buf := data[8:8+n], data[8+n:]
	if len(head) == 0 || head[0] != '{' || !utf8.Valid(head) {
		return nil, formatErr("safetensors: the header is not a UTF-8 JSON object starting with {")
	}
	dec := json.NewDecoder(bytes.NewReader(head))
	if _, err := dec.Token(); err != nil {
		return nil, formatErr("safetensors: header JSON: %v", err)
	}
	st := &Safetensors{Tensors: map[string]Tensor{}, Metadata: map[string]string{}}
	type span struct {
		name       string
		begin, end int64
	}
	var spans []span
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, formatErr("safetensors: header JSON: %v", err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, formatErr("safetensors: header JSON: key %v is not a string", tok)
		}
		if seen[name] {
			return nil, formatErr("safetensors: %q appears twice in the header", name)
		}
		seen[name] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, formatErr("safetensors: header JSON: %q: %v", name, err)
		}
		if name == "__metadata__" {
			if err := strictUnmarshal(raw, &st.Metadata); err != nil || st.Metadata == nil {
				return nil, formatErr("safetensors: __metadata__: want an object of strings (%v)", err)
			}
			continue
		}
		var e safetensorsEntry
		if err := strictUnmarshal(raw, &e); err != nil {
			return nil, formatErr("safetensors: tensor %q: %v", name, err)
		}
		if e.Dtype == nil || e.Shape == nil || e.DataOffsets == nil {
			return nil, formatErr("safetensors: tensor %q: want dtype, shape and data_offsets", name)
		}
		width := 0
		switch *e.Dtype {
		case DtypeF32:
			width = 4
		case DtypeF64:
			width = 8
		default:
			return nil, formatErr("safetensors: tensor %q: dtype %q: this reader takes %s and %s", name, *e.Dtype, DtypeF32, DtypeF64)
		}
		count := int64(1)
		for _, d := range e.Shape {
			if d < 0 || (d > 0 && count > int64(len(buf))/int64(d)) {
				return nil, formatErr("safetensors: tensor %q: shape %v: want dimensions ≥ 0 whose values fit in the file", name, e.Shape)
			}
			count *= int64(d)
		}
		begin, end := e.DataOffsets[0], e.DataOffsets[1]
		if begin < 0 || end < begin || end > int64(len(buf)) || end-begin != count*int64(width) {
			return nil, formatErr("safetensors: tensor %q: data offsets [%d, %d]: want a span of the %d-byte buffer holding its %d values of %d bytes", name, begin, end, len(buf), count, width)
		}
		t := Tensor{Dtype: *e.Dtype, Shape: e.Shape, Data: make([]float64, count)}
		for i := range t.Data {
			p := buf[begin+int64(i*width):]
			if width == 4 {
				t.Data[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(p)))
			} else {
				t.Data[i] = math.Float64frombits(binary.LittleEndian.Uint64(p))
			}
		}
		st.Tensors[name] = t
		spans = append(spans, span{name, begin, end})
	}
	if _, err := dec.Token(); err != nil {
		return nil, formatErr("safetensors: header JSON: %v", err)
	}
	if rest := bytes.TrimLeft(head[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, formatErr("safetensors: %d bytes after the header's JSON object", len(rest))
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Or(cmp.Compare(a.begin, b.begin), cmp.Compare(a.end, b.end)) })
	at := int64(0)
	for _, s := range spans {
		if s.begin != at {
			return nil, formatErr("safetensors: tensor %q starts at byte %d of the buffer, want %d: the tensors must cover it without holes or overlaps", s.name, s.begin, at)
		}
		at = s.end
	}
	if at != int64(len(buf)) {
		return nil, formatErr("safetensors: the tensors cover %d bytes of the %d-byte buffer: want all of it", at, len(buf))
	}
	return st, nil
}

// strictUnmarshal decodes one JSON value into dst, refusing unknown fields.
func strictUnmarshal(raw []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}
