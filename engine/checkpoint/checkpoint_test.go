package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/internal/atomicfile"
	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/accounting"
)

// sample returns a small valid private checkpoint with every section present.
func sample(t testing.TB, dtype string) *Checkpoint {
	t.Helper()
	spec := accounting.Spec{Sampler: privacy.SamplerPoisson, Method: accounting.MethodRDP, Sigma: 1.1, SampleRate: 0.01}
	budget := &privacy.Budget{Epsilon: 3, Delta: 1e-5}
	led, err := accounting.NewLedger(spec, 1e-5, budget)
	if err != nil {
		t.Fatal(err)
	}
	if err := led.Record(1, 200, 0.5); err != nil {
		t.Fatal(err)
	}
	arch := nn.MLP([]int{4}, 3, []int{2}, nn.Tanh)
	// Values chosen to exercise the bits: signed zero, subnormals, extremes, non-dyadics.
	vals := []float64{0, math.Copysign(0, -1), 1, -1.5, 0.1, math.SmallestNonzeroFloat32, math.MaxFloat32, -3.4e-39}
	if dtype == "float64" {
		vals = append(vals, math.SmallestNonzeroFloat64, math.MaxFloat64, 0.1+1e-17)
	}
	tensor := func(n, shift int) []float64 {
		out := make([]float64, n)
		for i := range out {
			v := vals[(i+shift)%len(vals)]
			if dtype == "float32" {
				v = float64(float32(v))
			}
			out[i] = v
		}
		return out
	}
	sizes := []int{8, 2, 6, 3}
	var params, m1, m2, ema [][]float64
	for i, n := range sizes {
		params = append(params, tensor(n, i))
		m1 = append(m1, tensor(n, i+1))
		m2 = append(m2, tensor(n, i+2))
		ema = append(ema, tensor(n, i+3))
	}
	acc := spec
	return &Checkpoint{
		Config: Config{
			Private: PrivateNotice, RunID: strings.Repeat("0a", 16),
			Sampler: Sampler{Family: "poisson", N: 1000, StepsPerEpoch: 100, ExpectedBatch: 10, SampleRate: 0.01,
				SealedSeed: "0123456789abcdef", Fingerprint: "00ff"},
			DatasetSize: 1000, DataMAC: strings.Repeat("cd", 32), Arch: arch, Dtype: dtype, Clip: 1, Sigma: 1.1, Noise: "gaussian",
			Delta: 1e-5, Budget: budget, Accountant: &acc,
			Optimizer:  Optimizer{Name: "adam", LR: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Schedule: "cosine", EMA: 0.9},
			SealedSeed: "fedcba9876543210", PhysicalBatch: 64, Epochs: 3, Replicas: 2, EvalBatch: 500,
			Meta: map[string]string{"sampler": "poisson"},
		},
		State: State{Step: 150, Epoch: 1, StepInEpoch: 50, OptimizerSteps: 150, TotalSteps: 300, Examples: 1500, Generation: 2,
			Noise:   []NoiseSegment{{0, strings.Repeat("11", 32)}, {120, strings.Repeat("22", 32)}},
			History: []EpochStats{{Epoch: 1, Steps: 100, TrainLoss: 1.2, TrainAcc: 0.5, TestAcc: 0.6, Epsilon: 0.5, Seconds: 1}},
			Partial: EpochStats{Epoch: 2, TrainLoss: 600, TrainAcc: 300, Epsilon: 0.7, ExamplesSeen: 500}},
		Ledger: led, Params: params, Moment1: m1, Moment2: m2, EMA: ema,
	}
}

// TestRoundTrip: Decode(Encode(c)) equals c bit for bit, at both widths.
func TestRoundTrip(t *testing.T) {
	for _, dt := range []string{"float32", "float64"} {
		c := sample(t, dt)
		data, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(data)
		if err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("%s: round trip differs:\n got %+v\nwant %+v", dt, got, c)
		}
		for i, p := range c.Params {
			for j, v := range p {
				if math.Float64bits(v) != math.Float64bits(got.Params[i][j]) {
					t.Fatalf("%s: param %d,%d bits %x, want %x", dt, i, j, math.Float64bits(got.Params[i][j]), math.Float64bits(v))
				}
			}
		}
		// The on-disk width follows the dtype: one tensor value is 4 or 8 bytes.
		if dt == "float32" {
			c64 := sample(t, "float64")
			d64, _ := Encode(c64)
			if len(d64) <= len(data) {
				t.Errorf("float64 file (%d bytes) not larger than float32 (%d)", len(d64), len(data))
			}
		}
		// Sections without optimizer state or EMA, and a non-private run without a ledger.
		c.Moment1, c.Moment2, c.EMA = nil, nil, nil
		c.Config.NonPrivate, c.Ledger, c.Config.Accountant, c.Config.Budget = true, nil, nil, nil
		data, err = Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		if got, err = Decode(data); err != nil || !reflect.DeepEqual(got, c) {
			t.Fatalf("%s: minimal round trip: %v", dt, err)
		}
	}
}

func wantFormat(t *testing.T, err error, substr string) {
	t.Helper()
	if !errors.Is(err, ErrFormat) {
		t.Fatalf("err = %v, want ErrFormat", err)
	}
	if !strings.Contains(err.Error(), substr) {
		t.Fatalf("err = %v, want it to mention %q", err, substr)
	}
}

// TestRejectsDamage: every truncation and every flipped byte is rejected with an error naming
// the damage; foreign files and other versions are named as such.
func TestRejectsDamage(t *testing.T) {
	data, err := Encode(sample(t, "float32"))
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(data) {
		_, err := Decode(data[:n])
		if n < len(Magic) {
			wantFormat(t, err, "not a dpsgd checkpoint")
		} else {
			wantFormat(t, err, "truncated")
		}
	}
	for i := range data {
		bad := bytes.Clone(data)
		bad[i] ^= 1 << (i % 8)
		if _, err := Decode(bad); !errors.Is(err, ErrFormat) {
			t.Fatalf("flipped byte %d accepted (err %v)", i, err)
		}
	}
	// A flip inside a payload is a checksum mismatch.
	bad := bytes.Clone(data)
	bad[len(Magic)+8+12+3] ^= 0x20
	_, err = Decode(bad)
	wantFormat(t, err, "SHA-256 mismatch")
	_, err = Decode(append(bytes.Clone(data), 0))
	wantFormat(t, err, "trailing data")
	_, err = Decode([]byte("{\"version\":1,\"sampler\":\"poisson\"}"))
	wantFormat(t, err, "not a dpsgd checkpoint")
	v3 := bytes.Clone(data)
	binary.LittleEndian.PutUint32(v3[len(Magic):], 3)
	_, err = Decode(v3)
	wantFormat(t, err, "version 3")
	// Version 1 stored the data's SHA-256 and a secure key in the clear: refused, saying why.
	v1 := bytes.Clone(data)
	binary.LittleEndian.PutUint32(v1[len(Magic):], 1)
	_, err = Decode(v1)
	wantFormat(t, err, "SHA-256 (a membership test")
}

// reframe rebuilds a file with a valid digest from edited sections, so the checks behind the
// checksum can be reached.
func reframe(t *testing.T, c *Checkpoint, edit func([]section) []section) []byte {
	t.Helper()
	data, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	var secs []section
	p := data[len(Magic)+8 : len(data)-sha256.Size]
	for len(p) > 0 {
		n := binary.LittleEndian.Uint64(p[4:])
		secs = append(secs, section{string(p[:4]), p[12 : 12+n]})
		p = p[12+n:]
	}
	return frame(edit(secs))
}

// TestRejectsInconsistent: well-framed files with bad contents are rejected, each with an
// error naming the problem.
func TestRejectsInconsistent(t *testing.T) {
	c := sample(t, "float64")
	cases := []struct {
		name, want string
		edit       func([]section) []section
	}{
		{"unknown tag", "unknown tag", func(s []section) []section { s[1].tag = "XXXX"; return s }},
		{"repeated", "repeated or out of order", func(s []section) []section { s[2] = s[1]; return s }},
		{"missing params", "section PARM missing", func(s []section) []section { return s[:3] }},
		{"bad json", "JSON", func(s []section) []section { s[0].payload = []byte("{\"sampler\":"); return s }},
		{"unknown field", "unknown field", func(s []section) []section {
			s[1].payload = append([]byte(`{"bogus":1,`), s[1].payload[1:]...)
			return s
		}},
		{"tensor overrun", "declares", func(s []section) []section {
			p := bytes.Clone(s[3].payload)
			binary.LittleEndian.PutUint64(p[4:], 1<<40)
			s[3].payload = p
			return s
		}},
		{"nan param", "want finite values", func(s []section) []section {
			p := bytes.Clone(s[3].payload)
			binary.LittleEndian.PutUint64(p[12:], math.Float64bits(math.NaN()))
			s[3].payload = p
			return s
		}},
	}
	for _, tc := range cases {
		_, err := Decode(reframe(t, c, tc.edit))
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrFormat mentioning %q", tc.name, err, tc.want)
		}
	}
	// Semantic checks, through Encode's validation (Decode runs the same Validate).
	for name, mut := range map[string]func(*Checkpoint){
		"model is ahead of the ledger": func(c *Checkpoint) { c.Ledger.Steps = c.State.Step - 1 },
		"position":                     func(c *Checkpoint) { c.State.Step++ },
		"history":                      func(c *Checkpoint) { c.State.History = nil },
		"ledger":                       func(c *Checkpoint) { c.Ledger = nil },
		"moment1 has":                  func(c *Checkpoint) { c.Moment1 = c.Moment1[:1] },
		"not a float32":                func(c *Checkpoint) { c.Config.Dtype = "float32"; c.Params[0][0] = 0.1 },
		"dtype":                        func(c *Checkpoint) { c.Config.Dtype = "int8" },
		"sampler key":                  func(c *Checkpoint) { c.Config.Sampler.Secure = true },
		"private notice":               func(c *Checkpoint) { c.Config.Private = "" },
		"run id":                       func(c *Checkpoint) { c.Config.RunID = "run-1" },
		"data fingerprint":             func(c *Checkpoint) { c.Config.DataMAC = "abcd" },
		"noise segment":                func(c *Checkpoint) { c.State.Noise[1].From = 151 },
		"no noise segment":             func(c *Checkpoint) { c.State.Noise = nil },
	} {
		c := sample(t, "float64")
		mut(c)
		if _, err := Encode(c); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: err = %v, want one naming it", name, err)
		}
	}
}

// TestCompare: the first differing fixed field is named with both values; the fields a resume
// may change are ignored.
func TestCompare(t *testing.T) {
	a := sample(t, "float32").Config
	b := sample(t, "float32").Config
	b.Epochs, b.Replicas, b.EvalBatch, b.Meta = 9, 1, 100, nil
	if err := a.Compare(&b); err != nil {
		t.Fatalf("allowed changes refused: %v", err)
	}
	for name, mut := range map[string]func(*Config){
		"sigma":       func(c *Config) { c.Sigma = 1.2 },
		"clip":        func(c *Config) { c.Clip = 2 },
		"budget":      func(c *Config) { c.Budget = nil },
		"sampler":     func(c *Config) { c.Sampler.Family = "shuffle" },
		"sampler key": func(c *Config) { c.Sampler.KeyMAC = strings.Repeat("ab", 32) },
		"run id":      func(c *Config) { c.RunID = strings.Repeat("0b", 16) },
		"dtype":       func(c *Config) { c.Dtype = "float64" },
		"model architecture": func(c *Config) {
			c.Arch = nn.MLP([]int{4}, 3, []int{3}, nn.Tanh)
		},
		"dataset fingerprint": func(c *Config) { c.DataMAC = strings.Repeat("ff", 32) },
		"lr":                  func(c *Config) { c.Optimizer.LR = 0.02 },
		"seed (sealed)":       func(c *Config) { c.SealedSeed = "fedcba9876543211" },
	} {
		b := sample(t, "float32").Config
		mut(&b)
		err := a.Compare(&b)
		var me *MismatchError
		if !errors.As(err, &me) || !errors.Is(err, ErrMismatch) || me.Field != name {
			t.Errorf("%s: err = %v, want a mismatch in %q", name, err, name)
			continue
		}
		if me.Checkpoint == me.New {
			t.Errorf("%s: mismatch shows equal values %q", name, me.New)
		}
	}
}

// faultyFile fails its writes after limit bytes (a full disk) or its Sync.
type faultyFile struct {
	*os.File
	limit    int
	failSync bool
}

func (f *faultyFile) Write(p []byte) (int, error) {
	if len(p) > f.limit {
		n, _ := f.File.Write(p[:f.limit])
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	f.limit -= len(p)
	return f.File.Write(p)
}

func (f *faultyFile) Sync() error {
	if f.failSync {
		return &os.PathError{Op: "sync", Path: f.Name(), Err: syscall.EIO}
	}
	return f.File.Sync()
}

// TestWriteAtomic: a write that fails (disk full mid-write, a failed sync, a non-finite
// parameter) returns an error wrapping ErrWrite and the cause, leaves the previous checkpoint
// byte for byte and no temporary file; a good write replaces it.
func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.ckpt")
	c := sample(t, "float32")
	if err := Write(path, c); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	c2 := sample(t, "float32")
	c2.Params[0][0] = 42
	for _, tc := range []struct {
		name string
		f    func(dir, pattern string) (atomicfile.File, error)
		want error
	}{
		{"disk full", func(dir, pattern string) (atomicfile.File, error) {
			f, err := os.CreateTemp(dir, pattern)
			return &faultyFile{File: f, limit: 100}, err
		}, syscall.ENOSPC},
		{"sync", func(dir, pattern string) (atomicfile.File, error) {
			f, err := os.CreateTemp(dir, pattern)
			return &faultyFile{File: f, limit: 1 << 30, failSync: true}, err
		}, syscall.EIO},
	} {
		err := write(path, c2, atomicfile.Writer{CreateTemp: tc.f})
		if !errors.Is(err, ErrWrite) || !errors.Is(err, tc.want) {
			t.Fatalf("%s: err = %v, want ErrWrite wrapping %v", tc.name, err, tc.want)
		}
		after, _ := os.ReadFile(path)
		if !bytes.Equal(before, after) {
			t.Fatalf("%s: the previous checkpoint changed", tc.name)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Fatalf("%s: %d entries in the directory, want only the checkpoint", tc.name, len(ents))
		}
	}
	c2.Params[1][0] = math.Inf(1)
	if err := Write(path, c2); !errors.Is(err, ErrWrite) || !strings.Contains(err.Error(), "finite") {
		t.Fatalf("non-finite parameters: err = %v", err)
	}
	c2.Params[1][0] = 1
	if err := Write(path, c2); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil || got.Params[0][0] != 42 {
		t.Fatalf("after a good write: %v, param %v", err, got.Params[0][0])
	}
	// A directory that does not exist is a write error too.
	if err := Write(filepath.Join(dir, "no", "such", "x.ckpt"), c2); !errors.Is(err, ErrWrite) {
		t.Fatalf("missing directory: err = %v", err)
	}
}

// FuzzRead: Decode never panics; whatever it accepts re-encodes and decodes to the same checkpoint. The second
// input is the file body without its digest, which the target completes, so that the fuzzer
// also reaches the checks behind the checksum.
func FuzzRead(f *testing.F) {
	for _, dt := range []string{"float32", "float64"} {
		data, err := Encode(sample(f, dt))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, false)
		body := data[:len(data)-sha256.Size]
		f.Add(bytes.Clone(body), true)
		f.Add(bytes.Clone(body[:len(body)/2]), true)
		f.Add(bytes.Clone(data[:len(data)-1]), false)
		flipped := bytes.Clone(body)
		flipped[len(flipped)/3] ^= 0xff
		f.Add(flipped, true)
	}
	f.Add([]byte(Magic), false)
	f.Add([]byte("garbage"), true)
	f.Fuzz(func(t *testing.T, data []byte, complete bool) {
		if complete {
			sum := sha256.Sum256(data)
			data = append(bytes.Clone(data), sum[:]...)
		}
		c, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		again, err := Encode(c)
		if err != nil {
			t.Fatalf("accepted checkpoint does not re-encode: %v", err)
		}
		c2, err := Decode(again)
		if err != nil || !reflect.DeepEqual(c, c2) {
			t.Fatalf("re-encoded checkpoint differs: %v", err)
		}
	})
}

func BenchmarkEncodeDecode(b *testing.B) {
	c := sample(b, "float32")
	// About 100k parameters: a small MLP's worth.
	for i := range c.Params {
		for len(c.Params[i]) < 25000 {
			c.Params[i] = append(c.Params[i], c.Params[i]...)
			c.Moment1[i] = append(c.Moment1[i], c.Moment1[i]...)
			c.Moment2[i] = append(c.Moment2[i], c.Moment2[i]...)
			c.EMA[i] = append(c.EMA[i], c.EMA[i]...)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		data, err := Encode(c)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}
