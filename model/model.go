// Package model is the release file of a model trained by dpsgd: what leaves a private run to be
// shared, evaluated and used for predictions. A checkpoint (package engine/checkpoint) is for
// resuming and is private; this file is the release, and it holds only what is public:
//
//   - the architecture (engine/nn's Arch, encoded as checkpoints encode it) and the dtype it was
//     trained in (float32 or float64);
//   - the parameters, bit for bit, as the run evaluates them (the moving average of the weights
//     when the run keeps one): post-processing of the noisy steps, covered by the guarantee;
//   - the preprocessing: the built-in dataset whose fixed public encoding the model reads, or,
//     for the user's own data, its kind (DatasetCSV, DatasetIDX) and the public schema document
//     the run encoded it with (kept as opaque JSON here; package datasets reads it);
//   - the guarantee: the sentence dpsgd train prints, without the seed (a seeded run's sentence
//     says that a seed, not in the file, must stay secret), ε, δ, the steps taken and the steps ε
//     covers, the accountant, the sampler, the adjacency, the noise mechanism, whether the
//     noise came from a secure generator, and the privacy ledger (the accounting's public
//     parameters and ε after each epoch, as dpsgd train --json reports it).
//
// It holds nothing else: no seed, noise key or other key material, no digest or fingerprint of
// the training data, no training statistics (loss, accuracy, clipped fraction, counts), no
// file path, no time. Decode refuses a file with any other field (docs/model-files.md).
//
// # File format (version 1)
//
// All integers are little-endian.
//
//	magic     8 bytes  "DPSGDMDL"
//	version   uint32   1
//	manifest  uint64 length, then that many bytes of JSON (below)
//	data      uint64 length, then the parameters: every tensor of the manifest in order,
//	          row-major, as IEEE 754 values of the dtype's width (4 bytes for float32, 8 for float64)
//	digest    32 bytes SHA-256 of every byte before it
//
// The manifest is {"arch", "dtype", "tensors": [{"name", "shape"}], "preprocessing": {"dataset",
// "schema"}, "guarantee": {…}}. The tensors are those of nn.NewParams for the architecture, two
// per GEMM layer: "NAME.w" of shape [In, Out] and "NAME.b" of shape [1, Out], then those of the
// other layers of a layer-stack model (its "Stack" in the arch, docs/models.md), such as a
// normalization's "NAME.gamma" and "NAME.beta" of shape [1, C]. A preset's arch has no
// "Stack" key, so files written before stacks existed read as they did.
//
// Decode checks, in order: the magic, the version, the lengths against the file, the SHA-256,
// the manifest (strict JSON: no unknown or missing field), the architecture, the tensors' names
// and shapes against the architecture, the data length, finite values, the preprocessing and
// the guarantee (its ledger is read by accounting.ReadLedger and must agree with the other
// fields). Every error wraps ErrFormat and says what is wrong.
//
// WriteSafetensors writes the same parameters in the safetensors format, named and laid out as
// PyTorch's equivalent nn.Sequential holds them (safetensors.go).
package model

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/internal/atomicfile"
	"github.com/dpsgd/dpsgd/internal/boundedio"
	"github.com/dpsgd/dpsgd/internal/checksum"
	"github.com/dpsgd/dpsgd/privacy/accounting"
	"gorgonia.org/tensor"
)

// Magic opens every model file.
const Magic = "DPSGDMDL"

// Version is the layout version this package writes and reads.
const Version = 1

// MaxFileBytes bounds what Read accepts (1 GiB).
const MaxFileBytes = 1 << 30

// maxManifestBytes bounds the manifest (a schema document included).
const maxManifestBytes = 16 << 20

// ErrFormat is wrapped by every error about bytes that are not a valid model file.
var ErrFormat = errors.New("model: invalid model file")

func formatErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrFormat}, args...)...)
}

// Artifact is a released model.
type Artifact struct {
	Arch nn.Arch
	// Params are the parameters in the layout of nn.NewParams(Arch, Params.Dtype, ·).
	Params        *nn.Params
	Preprocessing Preprocessing
	Guarantee     Guarantee
}

// Preprocessing says how a raw input row becomes the model's features.
type Preprocessing struct {
	// Dataset names the built-in dataset whose fixed, public encoding the model was trained on
	// (package datasets: "synthetic", "mnist", "adult"), or the kind of the user's own data,
	// DatasetCSV or DatasetIDX, encoded with Schema.
	Dataset string `json:"dataset"`
	// Schema is the public schema document (a JSON object, datasets.Schema) that encoded the
	// user's own data, opaque to this package; present exactly when Dataset is DatasetCSV or
	// DatasetIDX.
	Schema json.RawMessage `json:"schema,omitempty"`
}

// Kinds of the user's own data in Preprocessing.Dataset, each encoded with a schema.
const (
	DatasetCSV = "csv" // a CSV table with a header, each record encoded by the schema's columns
	DatasetIDX = "idx" // IDX images, every element scaled by the schema's one numeric column
)

// Guarantee is the public statement of what the run that trained the model guarantees.
type Guarantee struct {
	// Statement is the guarantee sentence as dpsgd train states it, without the seed.
	Statement string `json:"statement"`
	// Epsilon and Delta are the (ε, δ) of the statement: for ball noise, ε = 0 and δ the total
	// spent.
	Epsilon float64 `json:"epsilon"`
	Delta   float64 `json:"delta"`
	// Steps is the number of steps taken; EpsilonSteps (≥ Steps) the steps ε covers (an epoch is
	// charged whole before its first step, so a run stopped inside one covers all of it).
	Steps        int `json:"steps"`
	EpsilonSteps int `json:"epsilon_steps"`
	// Accountant names the accountant: the ledger's method, with a suffix in secure mode, whose
	// accountant adds the secure sampler's deviation to it ("pld+near-ideal").
	Accountant string `json:"accountant"`
	Sampler    string `json:"sampler"`
	Adjacency  string `json:"adjacency"`
	// Unit is the unit of privacy, "user" for a user-level run (neighbouring datasets differ
	// in all records of one user); absent for a record-level run.
	Unit string `json:"privacy_unit,omitempty"`
	// Mechanism is the noise: "gaussian" or "ball".
	Mechanism string `json:"mechanism"`
	// Secure is true when the noise and batches came from a cryptographically secure generator,
	// false when they are pseudorandom from a seed (not in the file) that must stay secret.
	Secure bool `json:"secure"`
	// Ledger is the run's privacy ledger: the accounting's public parameters and ε after every
	// epoch charged.
	Ledger *accounting.Ledger `json:"ledger"`
}

// Mechanisms of Guarantee.Mechanism.
const (
	MechanismGaussian = "gaussian"
	MechanismBall     = "ball"
)

// manifest is the file's JSON.
type manifest struct {
	Arch          nn.Arch       `json:"arch"`
	Dtype         string        `json:"dtype"`
	Tensors       []tensorEntry `json:"tensors"`
	Preprocessing Preprocessing `json:"preprocessing"`
	Guarantee     Guarantee     `json:"guarantee"`
}

type tensorEntry struct {
	Name  string `json:"name"`
	Shape []int  `json:"shape"`
}

// manifestIn is manifest as Decode reads it: the ledger is read by accounting.ReadLedger.
type manifestIn struct {
	Arch          *nn.Arch       `json:"arch"`
	Dtype         *string        `json:"dtype"`
	Tensors       []tensorEntry  `json:"tensors"`
	Preprocessing *Preprocessing `json:"preprocessing"`
	Guarantee     *guaranteeIn   `json:"guarantee"`
}

type guaranteeIn struct {
	Guarantee
	Ledger json.RawMessage `json:"ledger"` // shadows Guarantee.Ledger
}

// dtypeName returns "float32" or "float64" and the width in bytes.
func dtypeName(dt tensor.Dtype) (string, int, error) {
	switch dt {
	case tensor.Float32:
		return "float32", 4, nil
	case tensor.Float64:
		return "float64", 8, nil
	}
	return "", 0, fmt.Errorf("dtype %v: want float32 or float64", dt)
}

// Validate checks the preprocessing: a dataset name, and a schema that is a JSON object
// exactly when the name is DatasetCSV or DatasetIDX.
func (p *Preprocessing) Validate() error {
	own := p.Dataset == DatasetCSV || p.Dataset == DatasetIDX
	switch {
	case p.Dataset == "":
		return errors.New("preprocessing: no dataset: want a built-in dataset's name, or csv or idx with a schema")
	case own && len(p.Schema) == 0:
		return fmt.Errorf("preprocessing: dataset %s without a schema: the user's own data is read with the schema it was trained with", p.Dataset)
	case !own && len(p.Schema) > 0:
		return fmt.Errorf("preprocessing: dataset %q with a schema: only csv and idx data has one", p.Dataset)
	}
	if len(p.Dataset) > 64 || strings.IndexFunc(p.Dataset, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) >= 0 {
		return fmt.Errorf("preprocessing: dataset %q: want a built-in dataset's name (lowercase letters, digits, - and _, at most 64)", p.Dataset)
	}
	if len(p.Schema) > 0 {
		s := bytes.TrimSpace(p.Schema)
		if !json.Valid(s) || s[0] != '{' {
			return errors.New("preprocessing: schema: want a JSON object")
		}
	}
	return nil
}

// Validate checks the guarantee: a statement, ε ≥ 0 finite, δ in (0, 1), at least one step,
// ε covering every step, the names, and a ledger that agrees with them.
func (g *Guarantee) Validate() error {
	if g.Statement == "" || !utf8.ValidString(g.Statement) || len(g.Statement) > 1<<14 {
		return errors.New("guarantee: statement: want a non-empty UTF-8 sentence of at most 16 KiB")
	}
	if !(g.Epsilon >= 0) || math.IsInf(g.Epsilon, 0) {
		return fmt.Errorf("guarantee: epsilon %v: want a finite value ≥ 0", g.Epsilon)
	}
	if !(g.Delta > 0 && g.Delta < 1) {
		return fmt.Errorf("guarantee: delta %v: want a value in (0, 1)", g.Delta)
	}
	if g.Steps < 1 || g.EpsilonSteps < g.Steps {
		return fmt.Errorf("guarantee: steps %d, epsilon steps %d: want at least one step, and ε covering every step taken", g.Steps, g.EpsilonSteps)
	}
	for name, v := range map[string]string{"accountant": g.Accountant, "sampler": g.Sampler, "adjacency": g.Adjacency} {
		if v == "" || len(v) > 64 || !utf8.ValidString(v) {
			return fmt.Errorf("guarantee: %s %q: want a name", name, v)
		}
	}
	if g.Unit != "" && g.Unit != "user" {
		return fmt.Errorf("guarantee: privacy_unit %q: want user, or absent for a record-level run", g.Unit)
	}
	if g.Mechanism != MechanismGaussian && g.Mechanism != MechanismBall {
		return fmt.Errorf("guarantee: mechanism %q: want %s or %s", g.Mechanism, MechanismGaussian, MechanismBall)
	}
	l := g.Ledger
	if l == nil {
		return errors.New("guarantee: no ledger")
	}
	// The accountant's name is the one the ledger's own accountant gives (the shuffle's
	// "gdp" method is the accountant "gaussian-epochs"), or the ledger's method itself.
	ledgerName := l.Method
	if acc, err := l.Accountant(); err == nil {
		ledgerName = acc.Name()
	}
	named := func(name string) bool { return g.Accountant == name || strings.HasPrefix(g.Accountant, name+"+") }
	switch {
	case !named(l.Method) && !named(ledgerName) || l.Sampler != g.Sampler || l.Adjacency != g.Adjacency:
		return fmt.Errorf("guarantee: accountant %q, sampler %q, adjacency %q: the ledger says %q, %q, %q",
			g.Accountant, g.Sampler, g.Adjacency, l.Method, l.Sampler, l.Adjacency)
	case l.IsBall() != (g.Mechanism == MechanismBall):
		return fmt.Errorf("guarantee: mechanism %s: the ledger's is %q", g.Mechanism, l.Mechanism)
	case l.Steps < g.Steps:
		return fmt.Errorf("guarantee: %d steps taken, the ledger charges %d: the model is ahead of its ledger", g.Steps, l.Steps)
	case g.Mechanism == MechanismGaussian && g.Delta != l.Delta:
		return fmt.Errorf("guarantee: delta %v: the ledger's is %v", g.Delta, l.Delta)
	}
	if n := len(l.Epochs); g.Mechanism == MechanismGaussian && n > 0 && l.Epochs[n-1].Steps == g.EpsilonSteps && l.Epochs[n-1].Epsilon != g.Epsilon {
		return fmt.Errorf("guarantee: epsilon %v over %d steps: the ledger's is %v", g.Epsilon, g.EpsilonSteps, l.Epochs[n-1].Epsilon)
	}
	return nil
}

// expectedTensors returns the tensors of arch's parameters (nn.NewParams) in dtype dt, zeroed.
func expectedTensors(arch nn.Arch, dt tensor.Dtype) (*nn.Params, error) {
	p, err := nn.NewParams(arch, dt, 0)
	if err != nil {
		return nil, err
	}
	for _, q := range p.List {
		q.Value.Zero()
	}
	return p, nil
}

// Validate checks the whole artifact: what Encode requires and Decode enforces.
func (a *Artifact) Validate() error {
	if err := a.Arch.Validate(); err != nil {
		return err
	}
	if a.Params == nil {
		return errors.New("no parameters")
	}
	if _, _, err := dtypeName(a.Params.Dtype); err != nil {
		return err
	}
	want, err := expectedTensors(a.Arch, a.Params.Dtype)
	if err != nil {
		return err
	}
	if len(a.Params.List) != len(want.List) {
		return fmt.Errorf("parameters: %d tensors, the architecture has %d", len(a.Params.List), len(want.List))
	}
	for i, q := range a.Params.List {
		w := want.List[i]
		if q.Name != w.Name || !q.Value.Shape().Eq(w.Value.Shape()) || q.Value.Dtype() != a.Params.Dtype {
			return fmt.Errorf("parameters: tensor %d is %s %v %v, the architecture wants %s %v %v", i, q.Name, q.Value.Shape(), q.Value.Dtype(), w.Name, w.Value.Shape(), a.Params.Dtype)
		}
		if err := finiteTensor(q); err != nil {
			return err
		}
	}
	if err := a.Preprocessing.Validate(); err != nil {
		return err
	}
	return a.Guarantee.Validate()
}

func finiteTensor(q *nn.Param) error {
	check := func(j int, v float64) error {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("parameters: %s value %d is %v: want finite values", q.Name, j, v)
		}
		return nil
	}
	switch d := q.Value.Data().(type) {
	case []float32:
		for j, v := range d {
			if err := check(j, float64(v)); err != nil {
				return err
			}
		}
	case []float64:
		for j, v := range d {
			if err := check(j, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// Encode returns the artifact's bytes.
func Encode(a *Artifact) ([]byte, error) {
	if err := a.Validate(); err != nil {
		return nil, fmt.Errorf("model: encode: %w", err)
	}
	dt, width, _ := dtypeName(a.Params.Dtype)
	m := manifest{Arch: a.Arch, Dtype: dt, Preprocessing: a.Preprocessing, Guarantee: a.Guarantee}
	n := 0
	for _, q := range a.Params.List {
		m.Tensors = append(m.Tensors, tensorEntry{Name: q.Name, Shape: []int(q.Value.Shape().Clone())})
		n += q.Value.Shape().TotalSize()
	}
	js, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("model: encode manifest: %w", err)
	}
	out := make([]byte, 0, len(Magic)+4+8+len(js)+8+n*width+sha256.Size)
	out = append(out, Magic...)
	out = binary.LittleEndian.AppendUint32(out, Version)
	out = binary.LittleEndian.AppendUint64(out, uint64(len(js)))
	out = append(out, js...)
	out = binary.LittleEndian.AppendUint64(out, uint64(n*width))
	for _, q := range a.Params.List {
		switch d := q.Value.Data().(type) {
		case []float32:
			for _, v := range d {
				out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
			}
		case []float64:
			for _, v := range d {
				out = binary.LittleEndian.AppendUint64(out, math.Float64bits(v))
			}
		}
	}
	sum := sha256.Sum256(out)
	return append(out, sum[:]...), nil
}

// Save writes the artifact to w.
func Save(w io.Writer, a *Artifact) error {
	return writeEncoded(w, a, Encode, "model")
}

// writeEncoded writes encode(a) to w; a write error is wrapped after "prefix: write:".
func writeEncoded(w io.Writer, a *Artifact, encode func(*Artifact) ([]byte, error), prefix string) error {
	data, err := encode(a)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		return fmt.Errorf("%s: write: %w", prefix, err)
	}
	return nil
}

// WriteFile writes the artifact to path atomically (package internal/atomicfile), readable by
// all: it is a release.
func WriteFile(path string, a *Artifact) error {
	data, err := Encode(a)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("model: %s: %w", path, err)
	}
	return nil
}

// Load reads and checks a model file from r.
func Load(r io.Reader) (*Artifact, error) {
	return boundedio.Parse(r, MaxFileBytes, "model", ErrFormat, Decode)
}

// ReadFile loads the model file at path.
func ReadFile(path string) (*Artifact, error) {
	return boundedio.ReadFile(path, "model", Load)
}

// Decode parses and checks a model file's bytes.
func Decode(data []byte) (*Artifact, error) {
	if len(data) < len(Magic) || string(data[:len(Magic)]) != Magic {
		n := min(len(data), len(Magic))
		return nil, formatErr("not a dpsgd model file: it starts with %q, want %q", data[:n], Magic)
	}
	p := data[len(Magic):]
	if len(p) < 4 {
		return nil, formatErr("truncated: %d bytes, no version", len(data))
	}
	if v := binary.LittleEndian.Uint32(p); v != Version {
		return nil, formatErr("version %d, this build reads version %d", v, Version)
	}
	p = p[4:]
	section := func(what string) ([]byte, error) {
		if len(p) < 8 {
			return nil, formatErr("truncated: the %s length is cut short", what)
		}
		n := binary.LittleEndian.Uint64(p)
		p = p[8:]
		if n > uint64(len(p)) {
			return nil, formatErr("truncated: the %s declares %d bytes, %d remain", what, n, len(p))
		}
		s := p[:n]
		p = p[n:]
		return s, nil
	}
	js, err := section("manifest")
	if err != nil {
		return nil, err
	}
	raw, err := section("parameter data")
	if err != nil {
		return nil, err
	}
	if err := checksum.CheckTrailer(data, p, ErrFormat); err != nil {
		return nil, err
	}
	a, err := decodeManifest(js, raw)
	if err != nil {
		return nil, err
	}
	return a, nil
}

func decodeManifest(js, raw []byte) (*Artifact, error) {
	if len(js) > maxManifestBytes {
		return nil, formatErr("manifest: %d bytes of JSON, more than %d", len(js), maxManifestBytes)
	}
	var m manifestIn
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, formatErr("manifest: JSON: %v", err)
	}
	if dec.More() {
		return nil, formatErr("manifest: trailing data after the JSON value")
	}
	switch {
	case m.Arch == nil:
		return nil, formatErr("manifest: no arch")
	case m.Dtype == nil:
		return nil, formatErr("manifest: no dtype")
	case m.Preprocessing == nil:
		return nil, formatErr("manifest: no preprocessing")
	case m.Guarantee == nil:
		return nil, formatErr("manifest: no guarantee")
	case len(m.Guarantee.Ledger) == 0 || string(m.Guarantee.Ledger) == "null":
		return nil, formatErr("manifest: guarantee: no ledger")
	}
	a := &Artifact{Arch: *m.Arch, Preprocessing: *m.Preprocessing, Guarantee: m.Guarantee.Guarantee}
	count, err := paramCount(a.Arch)
	if err != nil {
		return nil, formatErr("manifest: %v", err)
	}
	var dt tensor.Dtype
	switch *m.Dtype {
	case "float32":
		dt = tensor.Float32
	case "float64":
		dt = tensor.Float64
	default:
		return nil, formatErr("manifest: dtype %q: want float32 or float64", *m.Dtype)
	}
	_, width, _ := dtypeName(dt)
	if count > len(raw)/width {
		return nil, formatErr("parameter data: %d bytes, the architecture's %d %s values take %d", len(raw), count, *m.Dtype, count*width)
	}
	params, err := expectedTensors(a.Arch, dt)
	if err != nil {
		return nil, formatErr("manifest: %v", err)
	}
	if len(m.Tensors) != len(params.List) {
		return nil, formatErr("manifest: %d tensors, the architecture has %d", len(m.Tensors), len(params.List))
	}
	total := 0
	for i, q := range params.List {
		got := m.Tensors[i]
		if got.Name != q.Name || !slicesEqual(got.Shape, q.Value.Shape()) {
			return nil, formatErr("manifest: tensor %d is %q of shape %v, the architecture wants %q of shape %v", i, got.Name, got.Shape, q.Name, []int(q.Value.Shape()))
		}
		total += q.Value.Shape().TotalSize()
	}
	if len(raw) != total*width {
		return nil, formatErr("parameter data: %d bytes, the architecture's %d %s values take %d", len(raw), total, *m.Dtype, total*width)
	}
	for _, q := range params.List {
		switch d := q.Value.Data().(type) {
		case []float32:
			for j := range d {
				d[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:]))
			}
			raw = raw[4*len(d):]
		case []float64:
			for j := range d {
				d[j] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*j:]))
			}
			raw = raw[8*len(d):]
		}
		if err := finiteTensor(q); err != nil {
			return nil, formatErr("%v", err)
		}
	}
	a.Params = params
	if err := a.Preprocessing.Validate(); err != nil {
		return nil, formatErr("%v", err)
	}
	led, err := accounting.ReadLedger(bytes.NewReader(m.Guarantee.Ledger))
	if err != nil {
		return nil, formatErr("guarantee: ledger: %v", err)
	}
	a.Guarantee.Ledger = led
	if err := a.Guarantee.Validate(); err != nil {
		return nil, formatErr("%v", err)
	}
	return a, nil
}

// Bounds on a decoded architecture, so that its sizes are computed without overflow before
// anything is allocated: every convolution size and, with convolutions, every input dimension
// at most maxConvDim; other sizes at most maxDim; at most maxLayers layers.
const (
	maxConvDim = 1 << 16
	maxDim     = 1 << 24
	maxLayers  = 1024
)

// paramCount returns the number of parameter values of a, after checking it (Validate) within
// the decoder's bounds.
func paramCount(a nn.Arch) (int, error) {
	if a.Kind == nn.KindStack {
		// A stack's sizes are bounded by its own validation (nn.MaxStackLayers, …), its
		// count too (nn.MaxStackParams); the file's bound is checked here.
		if err := a.Validate(); err != nil {
			return 0, err
		}
		n := a.NumParams()
		if n > MaxFileBytes/4 {
			return 0, fmt.Errorf("arch: %d parameters: more than a file can hold", n)
		}
		return n, nil
	}
	limit := maxDim
	if len(a.Conv) > 0 {
		limit = maxConvDim
	}
	if len(a.Input) > 3 || len(a.Conv)+len(a.Hidden)+1 > maxLayers {
		return 0, fmt.Errorf("arch: %d input dimensions and %d layers: want at most 3 and %d", len(a.Input), len(a.Conv)+len(a.Hidden)+1, maxLayers)
	}
	sizes := append(append([]int{a.Classes}, a.Input...), a.Hidden...)
	for _, c := range a.Conv {
		sizes = append(sizes, c.Filters, c.Kernel, c.Stride, c.Pad, c.PoolKernel, c.PoolStride)
	}
	for _, v := range sizes {
		if v > limit {
			return 0, fmt.Errorf("arch: size %d: want at most %d", v, limit)
		}
	}
	d := 1
	for _, v := range a.Input {
		if v < 1 || d > MaxFileBytes/v {
			return 0, fmt.Errorf("arch: input shape %v: want dimensions ≥ 1 and at most %d features", a.Input, MaxFileBytes)
		}
		d *= v
	}
	if err := a.Validate(); err != nil {
		return 0, err
	}
	ls, err := a.Layers()
	if err != nil {
		return 0, err
	}
	total := 0
	for _, l := range ls {
		if l.In < 1 || l.Out < 1 || l.In > MaxFileBytes || l.Out > MaxFileBytes || l.In*l.Out > MaxFileBytes-total {
			return 0, fmt.Errorf("arch: layer %s of %d×%d weights: more than a file can hold", l.Name, l.In, l.Out)
		}
		total += l.In*l.Out + l.Out
	}
	return total, nil
}

func slicesEqual(a []int, b tensor.Shape) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
