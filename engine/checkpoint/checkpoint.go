// Package checkpoint reads and writes dpsgd training checkpoints: everything a DP-SGD run needs
// to continue exactly where it stopped — the parameters' exact bits, the optimizer's state
// (momentum or Adam moments, its step count), the exponential moving average of the weights,
// the position in the sampler's schedule (epoch, step), the sampler's description (family, N,
// batch parameters, sealed seed), the accountant's ledger, the run's configuration (every field that
// affects privacy, and the rest), its noise segments (NoiseSegment) and its resume generation.
//
// # What a checkpoint holds, and what it does not
//
// A checkpoint is private: besides the noisy parameters it holds the run's non-private
// per-epoch history (training loss and accuracy, clipped fraction, non-finite counts), and its
// CONF section says so in a "private" field (PrivateNotice). It is for resuming, not for
// sharing. It holds no secret and no unkeyed digest of the data: the run's 256-bit secret
// lives in a key store (KeyStore) that is not beside the checkpoint, under a random run id the
// checkpoint records, and every fingerprint the checkpoint holds — of the training data
// (Config.DataMAC), of the sampler's batches, of a secure sampler's key — is an HMAC-SHA256
// under that secret, so it is no membership test for someone who can guess the data. A secure
// sampler's key is derived from the secret (RunKey.SamplerKey) and is stored nowhere. The
// seeds, from which anyone could regenerate a seeded run's noise and batches, are sealed
// under the secret (RunKey.Seal: a one-time pad, each under its own label).
//
// # File format (version 2)
//
// All integers are little-endian.
//
//	magic    8 bytes  "DPSGDCKP"
//	version  uint32   2
//	count    uint32   number of sections
//	sections count × { tag [4]byte, length uint64, payload [length]byte }
//	digest   32 bytes SHA-256 of every byte before it
//
// Sections come in this order, each at most once: CONF (the Config, JSON), STAT (the State,
// JSON), LEDG (the accounting.Ledger, JSON; present exactly when the run is private), PARM (the
// parameters), MOM1 (the first optimizer moment: momentum buffer or Adam's m), MOM2 (Adam's v),
// EMAV (the moving average of the weights). A tensor section is a uint32 tensor count, then per
// tensor a uint64 value count and the values' IEEE bits at the width of Config.Dtype (4 bytes
// for float32, 8 for float64), so the parameters are stored bit for bit.
//
// Read rejects a foreign file (wrong magic), another version (version 1, which stored the
// data's SHA-256 and a secure sampler's key in the clear, with a message saying so), a
// truncated file, a checksum
// mismatch, an unknown, repeated or misplaced section, malformed JSON, non-finite tensors, and
// a checkpoint whose model is ahead of its ledger (State.Step above Ledger.Steps): every error
// wraps ErrFormat and says what is wrong. Write is atomic: the bytes go to a temporary file in
// the target's directory, which is synced, renamed over the target, and the directory synced;
// on any error the temporary file is removed and the previous checkpoint is left as it was
// (errors wrap ErrWrite).
package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/internal/boundedio"
	"github.com/dpsgd/dpsgd/internal/checksum"
	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/accounting"
)

// Magic opens every checkpoint file.
const Magic = "DPSGDCKP"

// Version is the layout version this package writes and reads. Version 1 stored the training
// set's SHA-256, a secure sampler's key in hex and no run id; it is refused.
const Version = 2

// PrivateNotice is the CONF section's "private" field: every checkpoint carries it.
const PrivateNotice = "PRIVATE: this checkpoint holds the run's non-private training history (per-epoch training loss " +
	"and accuracy, clipped fraction) besides the noisy parameters; it is for resuming this run only, not for sharing " +
	"or publishing. Release the final model, not the checkpoint."

// MaxFileBytes bounds what Read accepts (8 GiB).
const MaxFileBytes = 8 << 30

// maxJSONBytes bounds a JSON section.
const maxJSONBytes = 16 << 20

// Errors wrapped by Read, Write and Config.Compare.
var (
	// ErrFormat: the bytes are not a valid checkpoint (foreign, truncated, corrupt, another
	// version, inconsistent contents).
	ErrFormat = errors.New("checkpoint: invalid checkpoint")
	// ErrWrite: writing the checkpoint failed; the previous file at the path is untouched.
	ErrWrite = errors.New("checkpoint: write failed")
	// ErrMismatch: the checkpoint's configuration differs from the resumed run's.
	ErrMismatch = errors.New("checkpoint: configuration differs")
)

// Sampler describes the sampler of a run: enough to rebuild it (family, parameters, seed; a
// secure sampler's key comes from the key store) and a keyed fingerprint of its batches to
// check that a rebuilt one draws the same.
type Sampler struct {
	Family        string  `json:"family"` // sampler.Sampler.Name()
	N             int     `json:"n"`
	StepsPerEpoch int     `json:"steps_per_epoch"`
	ExpectedBatch float64 `json:"expected_batch"`
	MaxBatch      int     `json:"max_batch"`
	SampleRate    float64 `json:"sample_rate"`
	// SealedSeed is the sampler's seed sealed under the run's secret (RunKey.Seal with
	// SamplerSeedLabel); "" for a secure sampler, which has no seed.
	SealedSeed string `json:"seed_sealed,omitempty"`
	// Secure: the sampler draws from a CSPRNG keyed by a key that is not stored (Seed is
	// unused); KeyMAC is the hex HMAC-SHA256 of that key under the run's secret, which tells a
	// resume whether it rebuilt the same key and nothing else.
	Secure bool   `json:"secure,omitempty"`
	KeyMAC string `json:"key_mac,omitempty"`
	// Fingerprint is the hex HMAC-SHA256, under the run's secret, of a few of the sampler's
	// batches.
	Fingerprint string `json:"fingerprint"`
}

// Optimizer mirrors engine.OptimizerConfig (validated values).
type Optimizer struct {
	Name        string  `json:"name"`
	LR          float64 `json:"lr"`
	Momentum    float64 `json:"momentum"`
	Beta1       float64 `json:"beta1"`
	Beta2       float64 `json:"beta2"`
	Eps         float64 `json:"eps"`
	WeightDecay float64 `json:"weight_decay"`
	Schedule    string  `json:"schedule"`
	EMA         float64 `json:"ema"`
}

// Config is a run's configuration as the checkpoint records it.
type Config struct {
	// Private is PrivateNotice: the file is for resuming, not for sharing.
	Private string `json:"private"`
	// RunID names the run's secret in the key store (32 hex digits, random).
	RunID string `json:"run_id"`
	// Fields that affect privacy: a resume refuses any difference.
	Sampler     Sampler `json:"sampler"`
	DatasetSize int     `json:"dataset_size"`
	// DataMAC is the hex HMAC-SHA256, under the run's secret, of the training set (sizes,
	// features' bits, labels): a resume checks it against its data, and without the secret it
	// says nothing about the data.
	DataMAC    string           `json:"data_mac"`
	Arch       nn.Arch          `json:"arch"`
	Dtype      string           `json:"dtype"` // "float32" or "float64"
	NonPrivate bool             `json:"non_private"`
	Clip       float64          `json:"clip"`
	Sigma      float64          `json:"sigma"`
	Noise      string           `json:"noise"`
	Radius     float64          `json:"radius"`
	Secure     bool             `json:"secure"`
	Delta      float64          `json:"delta"`
	Budget     *privacy.Budget  `json:"budget,omitempty"`
	Accountant *accounting.Spec `json:"accountant,omitempty"`
	// Fields that do not affect privacy but decide the bits of the result: a resume refuses
	// a difference too, so that it continues the same run.
	Optimizer Optimizer `json:"optimizer"`
	// SealedSeed is the run's seed (initialization, and a seeded run's noise) sealed under
	// the run's secret (RunKey.Seal with SeedLabel).
	SealedSeed    string `json:"seed_sealed"`
	PhysicalBatch int    `json:"physical_batch"`
	// Fields a resume may change: the planned epochs (the new total), the replica count and
	// the evaluation batch. (The sum over replicas is combined in a fixed order, so a resume
	// with another replica count is still deterministic but not bitwise equal to an
	// uninterrupted run.)
	Epochs    int `json:"epochs"`
	Replicas  int `json:"replicas"`
	EvalBatch int `json:"eval_batch"`
	// Meta is the caller's own record (dpsgd train stores its flags there, not the paths of
	// its checkpoint or key store).
	Meta map[string]string `json:"meta,omitempty"`
}

// EpochStats is one epoch's statistics, as the engine reports them after each epoch
// (engine.EpochStats is this type). In State.Partial (the epoch in progress) TrainLoss is the
// running sum of losses, TrainAcc the count of correct examples and ClippedFrac the count of
// clipped examples; in State.History and the engine's reports they are the epoch's means.
type EpochStats struct {
	Epoch     int     `json:"epoch"`
	Steps     int     `json:"steps"`
	TrainLoss float64 `json:"train_loss"`
	TrainAcc  float64 `json:"train_accuracy"`
	TestAcc   float64 `json:"test_accuracy"`
	Epsilon   float64 `json:"epsilon"` // NaN in the engine's report of a non-private run; 0 in a checkpoint
	NonFinite int     `json:"non_finite_examples"`
	// NonFiniteLoss counts the steps whose summed loss was not finite (their loss is left
	// out of TrainLoss); the examples behind it had non-finite gradients, zeroed (NonFinite).
	NonFiniteLoss int     `json:"non_finite_loss_steps"`
	ClippedFrac   float64 `json:"clipped_fraction"`
	Seconds       float64 `json:"seconds"`
	ExamplesSeen  int     `json:"examples"`
}

// State is the run's position and running totals.
type State struct {
	Step           int  `json:"step"`          // logical steps done (all epochs)
	Epoch          int  `json:"epoch"`         // 0-based epoch of the next step
	StepInEpoch    int  `json:"step_in_epoch"` // next step within Epoch: Step = Epoch·M + StepInEpoch
	OptimizerSteps int  `json:"optimizer_steps"`
	TotalSteps     int  `json:"total_steps"` // planned steps when written (the schedule's horizon)
	Examples       int  `json:"examples"`    // examples processed so far
	Final          bool `json:"final"`       // written when the run ended
	// StoppedByBudget: the run stopped because the next epoch would exceed the budget.
	StoppedByBudget bool `json:"stopped_by_budget,omitempty"`
	// Generation is the run's resume generation when written (KeyStore): 0 for a run never
	// resumed in secure mode, and one more after each secure resume.
	Generation uint64 `json:"generation"`
	// Noise lists the run's noise segments, the first from step 0: the seeded noise of the
	// steps from here on is keyed by SegmentsKey(the run's noise base, Noise) (unused in
	// secure mode).
	Noise []NoiseSegment `json:"noise"`
	// History holds the finished epochs' non-private statistics (see PrivateNotice).
	History []EpochStats `json:"history"`
	Partial EpochStats   `json:"partial"` // the epoch in progress (StepInEpoch > 0)
}

// Checkpoint is one checkpoint's contents. Tensors are kept as float64 (exact for float32
// values) and stored at the width of Config.Dtype.
type Checkpoint struct {
	Config  Config
	State   State
	Ledger  *accounting.Ledger // nil exactly when Config.NonPrivate
	Params  [][]float64
	Moment1 [][]float64 // momentum buffer or Adam's m; nil for sgd
	Moment2 [][]float64 // Adam's v; nil otherwise
	EMA     [][]float64 // nil when Optimizer.EMA = 0
}

// Section tags, in file order.
const (
	tagConf = "CONF"
	tagStat = "STAT"
	tagLedg = "LEDG"
	tagParm = "PARM"
	tagMom1 = "MOM1"
	tagMom2 = "MOM2"
	tagEmav = "EMAV"
)

var tagOrder = []string{tagConf, tagStat, tagLedg, tagParm, tagMom1, tagMom2, tagEmav}

func formatErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrFormat}, args...)...)
}

// width returns the bytes per value of dtype.
func width(dtype string) (int, error) {
	switch dtype {
	case "float32":
		return 4, nil
	case "float64":
		return 8, nil
	}
	return 0, fmt.Errorf("dtype %q: want float32 or float64", dtype)
}

// Validate checks the checkpoint's internal consistency: what Read enforces and Write
// requires.
func (c *Checkpoint) Validate() error {
	cf, st := &c.Config, &c.State
	w, err := width(cf.Dtype)
	if err != nil {
		return err
	}
	if err := cf.Arch.Validate(); err != nil {
		return err
	}
	s := cf.Sampler
	if s.Family == "" || s.N < 1 || s.StepsPerEpoch < 1 || !(s.ExpectedBatch > 0) || math.IsInf(s.ExpectedBatch, 0) ||
		s.MaxBatch < 0 || !(s.SampleRate > 0 && s.SampleRate <= 1) {
		return fmt.Errorf("sampler %+v: want a family, n ≥ 1, steps per epoch ≥ 1, a finite expected batch > 0, max batch ≥ 0 and a sample rate in (0, 1]", s)
	}
	if cf.Private != PrivateNotice {
		return fmt.Errorf("private notice %q: want the package's PrivateNotice", cf.Private)
	}
	if !validRunID(cf.RunID) {
		return fmt.Errorf("run id %q: want 32 lowercase hex digits", cf.RunID)
	}
	if !isMAC(cf.DataMAC) {
		return fmt.Errorf("data fingerprint %q: want 64 hex digits (an HMAC-SHA256)", cf.DataMAC)
	}
	if s.Secure {
		if !isMAC(s.KeyMAC) || s.SealedSeed != "" {
			return fmt.Errorf("sampler key fingerprint: want 64 hex digits, and no seed, for a secure sampler")
		}
	} else if s.KeyMAC != "" || !isSealed(s.SealedSeed) {
		return fmt.Errorf("sampler key fingerprint given, or sealed seed %q not 16 hex digits, for a sampler that is not secure", s.SealedSeed)
	}
	if !isSealed(cf.SealedSeed) {
		return fmt.Errorf("sealed seed %q: want 16 hex digits", cf.SealedSeed)
	}
	if cf.DatasetSize != s.N {
		return fmt.Errorf("dataset size %d: want the sampler's n = %d", cf.DatasetSize, s.N)
	}
	if cf.PhysicalBatch < 1 || cf.Epochs < 1 || cf.Replicas < 0 || cf.EvalBatch < 0 {
		return fmt.Errorf("physical batch %d, epochs %d, replicas %d, eval batch %d: want ≥ 1, ≥ 1, ≥ 0, ≥ 0", cf.PhysicalBatch, cf.Epochs, cf.Replicas, cf.EvalBatch)
	}
	for name, v := range map[string]float64{"clip": cf.Clip, "sigma": cf.Sigma, "radius": cf.Radius, "lr": cf.Optimizer.LR} {
		if !(v >= 0) || math.IsInf(v, 0) {
			return fmt.Errorf("%s %v: want a finite value ≥ 0", name, v)
		}
	}
	m := s.StepsPerEpoch
	if st.Step < 0 || st.Epoch < 0 || st.StepInEpoch < 0 || st.StepInEpoch >= m {
		return fmt.Errorf("position step %d, epoch %d, step in epoch %d: want ≥ 0 and step in epoch < %d", st.Step, st.Epoch, st.StepInEpoch, m)
	}
	if st.Epoch > (math.MaxInt32-st.StepInEpoch)/m || st.Step != st.Epoch*m+st.StepInEpoch {
		return fmt.Errorf("position step %d: want epoch·M + step in epoch = %d·%d + %d", st.Step, st.Epoch, m, st.StepInEpoch)
	}
	if st.OptimizerSteps != st.Step || st.TotalSteps < 0 || st.Examples < 0 {
		return fmt.Errorf("optimizer steps %d, total steps %d, examples %d: want steps = %d and the others ≥ 0", st.OptimizerSteps, st.TotalSteps, st.Examples, st.Step)
	}
	if err := validateNoise(st.Noise, st.Step); err != nil {
		return err
	}
	if len(st.History) != st.Epoch {
		return fmt.Errorf("history holds %d epochs, want %d (the epochs done)", len(st.History), st.Epoch)
	}
	if cf.NonPrivate != (c.Ledger == nil) {
		return fmt.Errorf("ledger present = %v for non-private = %v: want a ledger exactly for a private run", c.Ledger != nil, cf.NonPrivate)
	}
	if c.Ledger != nil {
		// The ledger invariant: every step whose noise is in the parameters was charged.
		if c.Ledger.Steps < st.Step {
			return fmt.Errorf("ledger charges %d steps but the parameters hold %d: the model is ahead of the ledger", c.Ledger.Steps, st.Step)
		}
		if cf.Accountant == nil || *cf.Accountant != c.Ledger.Spec {
			return fmt.Errorf("accountant %+v: want the ledger's %+v", cf.Accountant, c.Ledger.Spec)
		}
		if cf.Delta != c.Ledger.Delta {
			return fmt.Errorf("delta %v: want the ledger's %v", cf.Delta, c.Ledger.Delta)
		}
	}
	if len(c.Params) == 0 {
		return fmt.Errorf("no parameter tensors")
	}
	for _, t := range []struct {
		name string
		ts   [][]float64
	}{{"moment1", c.Moment1}, {"moment2", c.Moment2}, {"ema", c.EMA}} {
		if t.ts != nil && len(t.ts) != len(c.Params) {
			return fmt.Errorf("%s has %d tensors, want %d like the parameters", t.name, len(t.ts), len(c.Params))
		}
		for i, x := range t.ts {
			if len(x) != len(c.Params[i]) {
				return fmt.Errorf("%s tensor %d has %d values, want %d like the parameters", t.name, i, len(x), len(c.Params[i]))
			}
		}
	}
	for _, t := range []struct {
		name string
		ts   [][]float64
	}{{"parameters", c.Params}, {"moment1", c.Moment1}, {"moment2", c.Moment2}, {"ema", c.EMA}} {
		for i, x := range t.ts {
			for j, v := range x {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return fmt.Errorf("%s tensor %d value %d is %v: want finite values", t.name, i, j, v)
				}
				if w == 4 && float64(float32(v)) != v {
					return fmt.Errorf("%s tensor %d value %d = %v is not a float32", t.name, i, j, v)
				}
			}
		}
	}
	return nil
}

// Encode returns the checkpoint's bytes.
func Encode(c *Checkpoint) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("checkpoint: encode: %w", err)
	}
	w, _ := width(c.Config.Dtype)
	var sections []section
	add := func(tag string, payload []byte) { sections = append(sections, section{tag, payload}) }
	conf, err := json.Marshal(c.Config)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: encode config: %w", err)
	}
	add(tagConf, conf)
	stat, err := json.Marshal(c.State)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: encode state: %w", err)
	}
	add(tagStat, stat)
	if c.Ledger != nil {
		led, err := json.Marshal(c.Ledger)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: encode ledger: %w", err)
		}
		add(tagLedg, led)
	}
	add(tagParm, encodeTensors(c.Params, w))
	if c.Moment1 != nil {
		add(tagMom1, encodeTensors(c.Moment1, w))
	}
	if c.Moment2 != nil {
		add(tagMom2, encodeTensors(c.Moment2, w))
	}
	if c.EMA != nil {
		add(tagEmav, encodeTensors(c.EMA, w))
	}
	return frame(sections), nil
}

type section struct {
	tag     string
	payload []byte
}

// frame lays out magic, version, sections and the digest.
func frame(sections []section) []byte {
	var b bytes.Buffer
	b.WriteString(Magic)
	b.Write(binary.LittleEndian.AppendUint32(nil, Version))
	b.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(sections))))
	for _, s := range sections {
		b.WriteString(s.tag)
		b.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(s.payload))))
		b.Write(s.payload)
	}
	sum := sha256.Sum256(b.Bytes())
	b.Write(sum[:])
	return b.Bytes()
}

func encodeTensors(ts [][]float64, w int) []byte {
	n := 4
	for _, t := range ts {
		n += 8 + w*len(t)
	}
	out := make([]byte, 0, n)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(ts)))
	for _, t := range ts {
		out = binary.LittleEndian.AppendUint64(out, uint64(len(t)))
		for _, v := range t {
			if w == 4 {
				out = binary.LittleEndian.AppendUint32(out, math.Float32bits(float32(v)))
			} else {
				out = binary.LittleEndian.AppendUint64(out, math.Float64bits(v))
			}
		}
	}
	return out
}

func decodeTensors(tag string, p []byte, w int) ([][]float64, error) {
	if len(p) < 4 {
		return nil, formatErr("section %s: %d bytes, too short for its tensor count", tag, len(p))
	}
	count := binary.LittleEndian.Uint32(p)
	p = p[4:]
	if uint64(count) > uint64(len(p))/8 {
		return nil, formatErr("section %s: %d tensors declared, more than the %d bytes left can hold", tag, count, len(p))
	}
	ts := make([][]float64, count)
	for i := range ts {
		if len(p) < 8 {
			return nil, formatErr("section %s: tensor %d: length field cut short", tag, i)
		}
		n := binary.LittleEndian.Uint64(p)
		p = p[8:]
		if n > uint64(len(p))/uint64(w) {
			return nil, formatErr("section %s: tensor %d declares %d values, only %d bytes left", tag, i, n, len(p))
		}
		t := make([]float64, n)
		for j := range t {
			if w == 4 {
				t[j] = float64(math.Float32frombits(binary.LittleEndian.Uint32(p[4*j:])))
			} else {
				t[j] = math.Float64frombits(binary.LittleEndian.Uint64(p[8*j:]))
			}
		}
		p = p[int(n)*w:]
		ts[i] = t
	}
	if len(p) != 0 {
		return nil, formatErr("section %s: %d bytes after the last tensor", tag, len(p))
	}
	return ts, nil
}

// Read reads and validates a checkpoint.
func Read(r io.Reader) (*Checkpoint, error) {
	return boundedio.Parse(r, MaxFileBytes, "checkpoint", ErrFormat, Decode)
}

// Load reads the checkpoint file at path.
func Load(path string) (*Checkpoint, error) {
	return boundedio.ReadFile(path, "checkpoint", Read)
}

// Decode parses and validates a checkpoint's bytes.
func Decode(data []byte) (*Checkpoint, error) {
	const head = len(Magic) + 8
	if len(data) < len(Magic) || string(data[:len(Magic)]) != Magic {
		n := min(len(data), len(Magic))
		return nil, formatErr("not a dpsgd checkpoint: file starts with %q, want %q", data[:n], Magic)
	}
	if len(data) < head {
		return nil, formatErr("truncated: %d bytes, shorter than the %d-byte header", len(data), head)
	}
	if v := binary.LittleEndian.Uint32(data[len(Magic):]); v == 1 {
		return nil, formatErr("version 1, this build reads version %d only. A version 1 checkpoint stores the training "+
			"set's SHA-256 (a membership test for anyone who can guess the data) and a secure sampler's key in the clear; "+
			"finish its run with the dpsgd that wrote it or start afresh, and delete the file or keep it private", Version)
	} else if v != Version {
		return nil, formatErr("version %d, this build reads version %d", v, Version)
	}
	count := binary.LittleEndian.Uint32(data[len(Magic)+4:])
	if count > uint32(len(tagOrder)) {
		return nil, formatErr("%d sections declared, at most %d exist", count, len(tagOrder))
	}
	p := data[head:]
	var sections []section
	for i := range int(count) {
		if len(p) < 12 {
			return nil, formatErr("truncated: section %d header cut short (%d bytes left)", i, len(p))
		}
		tag, n := string(p[:4]), binary.LittleEndian.Uint64(p[4:12])
		p = p[12:]
		if n > uint64(len(p)) {
			return nil, formatErr("truncated: section %d (%q) declares %d bytes, %d remain", i, tag, n, len(p))
		}
		sections = append(sections, section{tag, p[:n]})
		p = p[n:]
	}
	if err := checksum.CheckTrailer(data, p, ErrFormat); err != nil {
		return nil, err
	}
	return decodeSections(sections)
}

func decodeSections(sections []section) (*Checkpoint, error) {
	next := 0
	got := map[string][]byte{}
	for i, s := range sections {
		pos := -1
		for j, t := range tagOrder {
			if t == s.tag {
				pos = j
			}
		}
		if pos < 0 {
			return nil, formatErr("section %d: unknown tag %q", i, s.tag)
		}
		if pos < next {
			return nil, formatErr("section %d: %q repeated or out of order", i, s.tag)
		}
		next = pos + 1
		got[s.tag] = s.payload
	}
	for _, t := range []string{tagConf, tagStat, tagParm} {
		if _, ok := got[t]; !ok {
			return nil, formatErr("section %s missing", t)
		}
	}
	c := &Checkpoint{}
	if err := strictJSON(tagConf, got[tagConf], &c.Config); err != nil {
		return nil, err
	}
	if err := strictJSON(tagStat, got[tagStat], &c.State); err != nil {
		return nil, err
	}
	if led, ok := got[tagLedg]; ok {
		l, err := accounting.ReadLedger(bytes.NewReader(led))
		if err != nil {
			return nil, formatErr("section %s: %v", tagLedg, err)
		}
		c.Ledger = l
	}
	w, err := width(c.Config.Dtype)
	if err != nil {
		return nil, formatErr("config: %v", err)
	}
	for _, t := range []struct {
		tag string
		dst *[][]float64
	}{{tagParm, &c.Params}, {tagMom1, &c.Moment1}, {tagMom2, &c.Moment2}, {tagEmav, &c.EMA}} {
		if p, ok := got[t.tag]; ok {
			if *t.dst, err = decodeTensors(t.tag, p, w); err != nil {
				return nil, err
			}
			if *t.dst == nil {
				*t.dst = [][]float64{}
			}
		}
	}
	if err := c.Validate(); err != nil {
		return nil, formatErr("%v", err)
	}
	return c, nil
}

func strictJSON(tag string, p []byte, dst any) error {
	if len(p) > maxJSONBytes {
		return formatErr("section %s: %d bytes of JSON, more than %d", tag, len(p), maxJSONBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return formatErr("section %s: JSON: %v", tag, err)
	}
	if dec.More() {
		return formatErr("section %s: trailing data after the JSON value", tag)
	}
	return nil
}

// MismatchError names the first configuration field that differs between a checkpoint and a
// resumed run.
type MismatchError struct {
	Field      string
	Checkpoint string // the checkpoint's value
	New        string // the resumed run's value
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("checkpoint configuration differs in %s: checkpoint has %s, this run has %s", e.Field, e.Checkpoint, e.New)
}

// Unwrap makes errors.Is(err, ErrMismatch) hold.
func (e *MismatchError) Unwrap() error { return ErrMismatch }

type field struct{ name, value string }

func fv(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// isSealed reports whether s is 16 hex digits (RunKey.Seal).
func isSealed(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == 8
}

// Seeds returns the run's seed and its sampler's (0 for a secure sampler), unsealed with the
// run's key.
func (c *Config) Seeds(k *RunKey) (seed, samplerSeed uint64, err error) {
	if k.ID() != c.RunID {
		return 0, 0, fmt.Errorf("%w: the key of run %s cannot unseal the seeds of run %s", ErrKeyStore, k.ID(), c.RunID)
	}
	if seed, err = k.Unseal(SeedLabel, c.SealedSeed); err != nil || c.Sampler.Secure {
		return seed, 0, err
	}
	samplerSeed, err = k.Unseal(SamplerSeedLabel, c.Sampler.SealedSeed)
	return seed, samplerSeed, err
}

// isMAC reports whether s is 64 hex digits.
func isMAC(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == sha256.Size
}

func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}

// fixedFields lists the fields a resume must not change, in a fixed order: the privacy ones
// first.
func (c *Config) fixedFields() []field {
	s := c.Sampler
	key := "none"
	if s.KeyMAC != "" {
		key = "mac:" + s.KeyMAC
	}
	budget := "none"
	if c.Budget != nil {
		budget = fmt.Sprintf("(ε = %s, δ = %s)", fv(c.Budget.Epsilon), fv(c.Budget.Delta))
	}
	acc := "none"
	if c.Accountant != nil {
		acc = js(c.Accountant)
	}
	o := c.Optimizer
	return []field{
		{"run id", c.RunID},
		{"sampler", s.Family},
		{"dataset size", strconv.Itoa(c.DatasetSize)},
		{"sampler n", strconv.Itoa(s.N)},
		{"sampler steps per epoch", strconv.Itoa(s.StepsPerEpoch)},
		{"sampler expected batch", fv(s.ExpectedBatch)},
		{"sampler max batch", strconv.Itoa(s.MaxBatch)},
		{"sampler sample rate", fv(s.SampleRate)},
		{"secure", strconv.FormatBool(c.Secure)},
		{"sampler secure", strconv.FormatBool(s.Secure)},
		{"sampler seed (sealed)", s.SealedSeed},
		{"sampler key", key},
		{"sampler batches (fingerprint)", s.Fingerprint},
		{"dataset fingerprint", c.DataMAC},
		{"model architecture", js(c.Arch)},
		{"dtype", c.Dtype},
		{"non-private", strconv.FormatBool(c.NonPrivate)},
		{"clip", fv(c.Clip)},
		{"sigma", fv(c.Sigma)},
		{"noise", c.Noise},
		{"radius", fv(c.Radius)},
		{"delta", fv(c.Delta)},
		{"budget", budget},
		{"accountant", acc},
		{"optimizer", o.Name},
		{"lr", fv(o.LR)},
		{"momentum", fv(o.Momentum)},
		{"adam beta1", fv(o.Beta1)},
		{"adam beta2", fv(o.Beta2)},
		{"adam eps", fv(o.Eps)},
		{"weight decay", fv(o.WeightDecay)},
		{"schedule", o.Schedule},
		{"ema", fv(o.EMA)},
		{"seed (sealed)", c.SealedSeed},
		{"physical batch", strconv.Itoa(c.PhysicalBatch)},
	}
}

// Compare returns a *MismatchError (wrapping ErrMismatch) naming the first field, in privacy
// order, where now differs from c (the checkpoint's configuration), or nil. Epochs, Replicas,
// EvalBatch and Meta may differ.
func (c *Config) Compare(now *Config) error {
	a, b := c.fixedFields(), now.fixedFields()
	for i := range a {
		if a[i].value != b[i].value {
			return &MismatchError{Field: a[i].name, Checkpoint: a[i].value, New: b[i].value}
		}
	}
	return nil
}
