package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"math"
	"os"
	"path/filepath"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/checkpoint"
	"github.com/dpsgd/dpsgd/engine/sampler"
	"github.com/dpsgd/dpsgd/kernels"
	"gorgonia.org/tensor"
)

// CheckpointOptions makes Train write checkpoints and resume from one (package checkpoint has
// the format). The zero value writes none and starts afresh.
//
// The ledger invariant: a checkpoint on disk never shows the model ahead of its ledger. Train
// charges each epoch in Privacy.Ledger BEFORE the epoch's first step (the entry records the
// steps at the epoch's end and ε after them), so every step whose noise is in the saved
// parameters has been charged in the saved ledger; a run that stops mid-epoch (interrupted,
// killed) has charged the whole epoch, which is conservative, and a resume does not charge it
// again.
//
// Resume continues the checkpoint's run from its step to the new Config.Epochs and gives the
// same parameters, bit for bit, as an uninterrupted run (CPU, float32 and float64, same
// replica count): the noise of step t is keyed by (noise key, t), every batch is a pure
// function of (sampler seed, epoch, step), and the optimizer's moments, step count and moving
// average are restored exactly. Two exceptions: a resume that changes the trajectory (a cosine
// schedule's total, the replica count) forks the noise, and a secure run (Config.Secure) draws
// fresh noise from the operating system, so it continues correctly but not bitwise.
//
// The noise key. A seeded run's noise key is derived from its seed, its sampler's batches and
// a fingerprint of every field that decides the parameters' path (trajectoryFingerprint:
// architecture, dtype, physical batch, replicas, clip, σ, noise, radius, optimizer and all its
// constants, schedule, the total of steps when the schedule depends on it, the sampler's
// parameters), so two runs from one seed whose paths differ never add the same noise to
// different gradients (the difference of their releases would cancel it). A resume whose fingerprint differs from the checkpoint's forks: its key is
// derived from (the checkpoint's key, the step, the new fingerprint), and the checkpoint
// records the fork (checkpoint.NoiseSegment). A resume with an unchanged configuration keeps
// the key: bitwise. The device is not in the fingerprint: a run moved between the CPU and the
// GPU keeps its key, and the two paths differ only by the rounding of their sums.
//
// The key store. A checkpoint holds no secret and no unkeyed digest of the data: the run's
// 256-bit secret lives in a key store (checkpoint.KeyStore at KeyDir) under a random run id that
// the checkpoint records; the checkpoint's fingerprints of the data and the sampler (and of a
// secure sampler's key) are HMACs under it, and the seeds are sealed under it
// (checkpoint.RunKey.Seal). Resume needs the run's key: without it (another machine, another KeyDir)
// Train refuses, with an error wrapping checkpoint.ErrNoKey naming the store looked in. The
// key store must not hold the checkpoint.
//
// Generations. Every secure resume claims the run's next generation in the key store
// (checkpoint.RunKey.Claim): it is refused, with an error wrapping checkpoint.ErrStale, unless
// the checkpoint is of the store's current generation, so two resumes of copies of one secure
// checkpoint cannot both release the same epochs with independent noise; a resume writes a
// checkpoint of the new generation at once (with a Path), and a run stops, before writing a
// checkpoint, when it finds that another process has claimed a newer generation. Seeded runs
// do not claim: a resume with the same configuration repeats the same bits, and a fork draws
// new noise and is a new release, charged in its own ledger (two forks released together
// compose). What this cannot catch: a user who copies the key store along with the checkpoint
// can resume each copy once.
type CheckpointOptions struct {
	Path  string // write checkpoints to this file ("" = none)
	Every int    // also write one every Every steps (0 = only when the run ends or stops)
	// Resume continues this checkpoint's run (nil = start afresh). Train refuses it when its
	// configuration differs from the run's in anything but Epochs, Replicas, EvalBatch and
	// Meta, with an error wrapping checkpoint.ErrMismatch that names the field and both values.
	Resume *checkpoint.Checkpoint
	// SamplerSeed is the seed the sampler was built with, recorded (sealed under the run's
	// secret, as Config.Seed is: checkpoint.Config.Seeds unseals both) so that a resume can
	// rebuild it (dpsgd train builds its sampler with Config.Seed). Train itself checks the
	// resumed sampler by a keyed fingerprint of its batches.
	SamplerSeed uint64
	// Meta is stored in the checkpoint as is (dpsgd train records its flags).
	Meta map[string]string
	// KeyDir is the key store's directory ("" = checkpoint.DefaultKeyDir()), used when Run is
	// nil: Train makes a new run key there for a fresh run and loads the resumed run's key.
	KeyDir string
	// Run is the run's key (nil: from KeyDir). A secure run's sampler key may be derived from
	// it (Run.SamplerKey, as dpsgd train does), which requires making it before the sampler;
	// on a resume it must be the checkpoint's run's key.
	Run *checkpoint.RunKey
}

// ErrDiverged is wrapped by the error of a run stopped because its parameters or its loss
// became non-finite. The last checkpoint written before stays as it was: Train never writes a
// checkpoint with non-finite parameters.
var ErrDiverged = errors.New("training diverged")

// active reports whether checkpoints are written or read.
func (o *CheckpointOptions) active() bool { return o.Path != "" || o.Resume != nil }

// validate checks the options.
func (o *CheckpointOptions) validate() error {
	if o.Every < 0 {
		return fmt.Errorf("checkpoint every %d steps: want ≥ 0", o.Every)
	}
	if o.Every > 0 && o.Path == "" {
		return fmt.Errorf("checkpoint every %d steps without a path: want a path", o.Every)
	}
	return nil
}

// datasetMAC returns the hex HMAC-SHA256, under the run's secret, of a dataset's sizes,
// features' bits and labels: the checkpoint's record of which data the run trains on. An
// unkeyed digest would be an exact membership test for anyone who can guess the data.
func datasetMAC(key *checkpoint.RunKey, ds *datasets.Dataset) string {
	h := key.MAC("dpsgd/data/v1")
	var buf []byte
	buf = binary.LittleEndian.AppendUint64(buf, uint64(ds.N))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(ds.D))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(ds.Classes))
	h.Write(buf)
	const chunk = 1 << 14
	for lo := 0; lo < len(ds.X); lo += chunk {
		buf = buf[:0]
		for _, v := range ds.X[lo:min(lo+chunk, len(ds.X))] {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
		}
		h.Write(buf)
	}
	for lo := 0; lo < len(ds.Y); lo += chunk {
		buf = buf[:0]
		for _, v := range ds.Y[lo:min(lo+chunk, len(ds.Y))] {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(v))
		}
		h.Write(buf)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// samplerFingerprint hashes the sampler's batches at a few positions of the first two epochs
// into h: two samplers with equal fingerprints draw the same batches there, which a different
// seed, key or parameter would not. The checkpoint keeps it keyed (samplerMAC): a secure
// sampler's batches are secret.
func samplerFingerprint(h hash.Hash, smp sampler.Sampler) string {
	m := smp.StepsPerEpoch()
	var idx []int
	var buf []byte
	for _, pos := range [][2]int{{0, 0}, {0, m / 2}, {0, m - 1}, {1, 0}} {
		idx = smp.Batch(pos[0], pos[1], idx)
		buf = binary.LittleEndian.AppendUint64(buf[:0], uint64(len(idx)))
		for _, i := range idx {
			buf = binary.LittleEndian.AppendUint64(buf, uint64(i))
		}
		h.Write(buf)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func dtypeName(dt tensor.Dtype) string {
	if dt == tensor.Float64 {
		return "float64"
	}
	return "float32"
}

// checkpointConfig describes the run (cfg validated) as a checkpoint records it, its
// fingerprints keyed by the run's key.
func checkpointConfig(cfg *Config, train *datasets.Dataset, smp sampler.Sampler, pv *Privacy, key *checkpoint.RunKey) checkpoint.Config {
	s := checkpoint.Sampler{
		Family: smp.Name(), N: smp.DatasetSize(), StepsPerEpoch: smp.StepsPerEpoch(),
		ExpectedBatch: smp.ExpectedBatchSize(), MaxBatch: smp.MaxBatchSize(), SampleRate: smp.SampleRate(),
		SealedSeed:  key.Seal(checkpoint.SamplerSeedLabel, cfg.Checkpoint.SamplerSeed),
		Fingerprint: samplerFingerprint(key.MAC("dpsgd/sampler-batches/v1"), smp),
	}
	if k, ok := samplerKey(smp); ok {
		h := key.MAC("dpsgd/sampler-key-check/v1")
		h.Write(k[:])
		s.Secure, s.KeyMAC, s.SealedSeed = true, hex.EncodeToString(h.Sum(nil)), ""
	}
	o := cfg.Optimizer
	c := checkpoint.Config{
		Private: checkpoint.PrivateNotice, RunID: key.ID(),
		Sampler: s, DatasetSize: train.N, DataMAC: datasetMAC(key, train), Arch: cfg.Arch,
		Dtype: dtypeName(cfg.Dtype), NonPrivate: cfg.NonPrivate, Secure: cfg.Secure,
		Optimizer: checkpoint.Optimizer{Name: o.Name, LR: o.LR, Momentum: o.Momentum, Beta1: o.Beta1, Beta2: o.Beta2,
			Eps: o.Eps, WeightDecay: o.WeightDecay, Schedule: o.Schedule, EMA: o.EMA},
		SealedSeed: key.Seal(checkpoint.SeedLabel, cfg.Seed), PhysicalBatch: cfg.PhysicalBatch, Epochs: cfg.Epochs, Replicas: cfg.Replicas,
		EvalBatch: cfg.EvalBatch, Meta: cfg.Checkpoint.Meta,
	}
	if !cfg.NonPrivate {
		c.Clip, c.Noise, c.Delta = cfg.Clip, cfg.Noise, pv.Delta
		if cfg.Noise == NoiseBall {
			c.Radius = cfg.Radius
		} else {
			c.Sigma = cfg.Sigma
		}
		if pv.Budget != nil {
			b := *pv.Budget
			c.Budget = &b
		}
		if pv.Ledger != nil {
			spec := pv.Ledger.Spec
			c.Accountant = &spec
		}
	}
	return c
}

// flatTensors copies tensors to float64 (exact for float32).
func flatTensors[T kernels.Float](ts [][]T) [][]float64 {
	if ts == nil {
		return nil
	}
	out := make([][]float64, len(ts))
	for i, t := range ts {
		o := make([]float64, len(t))
		for j, v := range t {
			o[j] = float64(v)
		}
		out[i] = o
	}
	return out
}

// setTensors copies src into dst, checking the shapes.
func setTensors[T kernels.Float](name string, dst [][]T, src [][]float64) error {
	if len(src) != len(dst) {
		return fmt.Errorf("checkpoint %s: %d tensors, the model has %d", name, len(src), len(dst))
	}
	for i, d := range dst {
		if len(src[i]) != len(d) {
			return fmt.Errorf("checkpoint %s tensor %d: %d values, the model's has %d", name, i, len(src[i]), len(d))
		}
		for j, v := range src[i] {
			d[j] = T(v)
		}
	}
	return nil
}

// finite reports whether every value is finite.
func finite[T kernels.Float](ts [][]T) bool {
	for _, t := range ts {
		for _, v := range t {
			f := float64(v)
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return false
			}
		}
	}
	return true
}

// snapshot is the run's state at a position as a checkpoint.
func (r *run[T]) snapshot(cc checkpoint.Config, st checkpoint.State, pv *Privacy) *checkpoint.Checkpoint {
	c := &checkpoint.Checkpoint{Config: cc, State: st,
		Params: flatTensors(paramSlices[T](r.params)), Moment1: flatTensors(r.opt.m), Moment2: flatTensors(r.opt.v)}
	c.State.OptimizerSteps = r.opt.t
	if r.ema != nil {
		c.EMA = flatTensors(paramSlices[T](r.ema))
	}
	if !r.cfg.NonPrivate && pv.Ledger != nil {
		l := *pv.Ledger
		l.Epochs = append(l.Epochs[:0:0], pv.Ledger.Epochs...)
		c.Ledger = &l
	}
	return c
}

// restore sets the run's parameters, optimizer state and moving average from c, whose
// configuration has been compared with the run's.
func (r *run[T]) restore(c *checkpoint.Checkpoint) error {
	if err := setTensors("parameters", paramSlices[T](r.params), c.Params); err != nil {
		return err
	}
	if (r.opt.m == nil) != (c.Moment1 == nil) || (r.opt.v == nil) != (c.Moment2 == nil) || (r.ema == nil) != (c.EMA == nil) {
		return fmt.Errorf("checkpoint optimizer state (moment1 %v, moment2 %v, ema %v) does not fit optimizer %s with ema %v",
			c.Moment1 != nil, c.Moment2 != nil, c.EMA != nil, r.cfg.Optimizer.Name, r.cfg.Optimizer.EMA)
	}
	if r.opt.m != nil {
		if err := setTensors("moment1", r.opt.m, c.Moment1); err != nil {
			return err
		}
	}
	if r.opt.v != nil {
		if err := setTensors("moment2", r.opt.v, c.Moment2); err != nil {
			return err
		}
	}
	if r.ema != nil {
		if err := setTensors("ema", paramSlices[T](r.ema), c.EMA); err != nil {
			return err
		}
	}
	r.opt.t = c.State.OptimizerSteps
	return nil
}

// resumeLedger checks that the run's ledger is a fresh one for the checkpoint's accountant,
// δ and budget, and continues the checkpoint's ledger in it.
func resumeLedger(c *checkpoint.Checkpoint, pv *Privacy) error {
	if c.Ledger == nil {
		return nil
	}
	l := pv.Ledger
	if l.Steps != 0 || len(l.Epochs) != 0 {
		return fmt.Errorf("resume: the run's ledger already holds %d steps, want a fresh ledger", l.Steps)
	}
	if l.Spec != c.Ledger.Spec || l.Delta != c.Ledger.Delta || l.Adjacency != c.Ledger.Adjacency || l.Kind != c.Ledger.Kind {
		return &checkpoint.MismatchError{Field: "ledger", Checkpoint: fmt.Sprintf("%+v δ=%v", c.Ledger.Spec, c.Ledger.Delta),
			New: fmt.Sprintf("%+v δ=%v", l.Spec, l.Delta)}
	}
	*l = *c.Ledger
	l.Epochs = append(l.Epochs[:0:0], c.Ledger.Epochs...)
	if c.Ledger.Budget != nil {
		b := *c.Ledger.Budget
		l.Budget = &b
	}
	return nil
}

// toCheckpointStats is e as a checkpoint stores it (ε JSON-safe); fromCheckpointStats undoes
// it (a non-private run's ε back to NaN).
func toCheckpointStats(e EpochStats) checkpoint.EpochStats {
	e.Epsilon = jsonSafe(e.Epsilon)
	return e
}

func fromCheckpointStats(e checkpoint.EpochStats, nonPrivate bool) EpochStats {
	if nonPrivate {
		e.Epsilon = math.NaN()
	}
	return e
}

// jsonSafe maps NaN (a non-private run's ε) and ±Inf to 0 for the checkpoint's JSON; a
// non-private run's ε is restored as NaN, and a private run's ε is never NaN.
func jsonSafe(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// trajectoryFingerprint returns the hex SHA-256 of every field of the run (cfg validated) that
// decides the parameters' path from a given seed (CheckpointOptions, "The noise key"): two
// runs or continuations with different fingerprints must not share noise. The fields that
// only select what is reported (δ, the budget, the accountant, the evaluation batch) are left
// out, and so is the total of steps under a constant schedule, so extending such a run keeps
// its key. The values are normalized as checkpointConfig records them (a non-private run has
// no clip or noise, a Gaussian one no radius, a ball one no σ). The sampler enters by its
// parameters; its batches enter the key through the noise base (noiseBase), as the seed does,
// for the fingerprint is recorded in checkpoints and must not be a function of the seed.
func trajectoryFingerprint(cfg *Config, smp sampler.Sampler) string {
	type samplerFields struct {
		Family        string
		N, Steps      int
		ExpectedBatch float64
		MaxBatch      int
		SampleRate    float64
	}
	o := cfg.Optimizer
	f := struct {
		Format        string
		Arch          any
		Dtype         string
		PhysicalBatch int
		Replicas      int
		NonPrivate    bool
		Secure        bool
		Clip, Sigma   float64
		Noise         string
		Radius        float64
		Optimizer     OptimizerConfig
		Horizon       int // the total of steps when the schedule depends on it, else 0
		Sampler       samplerFields
	}{
		Format: "dpsgd/trajectory/v1", Arch: cfg.Arch, Dtype: dtypeName(cfg.Dtype), PhysicalBatch: cfg.PhysicalBatch,
		Replicas: cfg.Replicas, NonPrivate: cfg.NonPrivate, Secure: cfg.Secure, Optimizer: o,
		Sampler: samplerFields{Family: smp.Name(), N: smp.DatasetSize(), Steps: smp.StepsPerEpoch(),
			ExpectedBatch: smp.ExpectedBatchSize(), MaxBatch: smp.MaxBatchSize(), SampleRate: smp.SampleRate()},
	}
	if !cfg.NonPrivate {
		f.Clip, f.Noise = cfg.Clip, cfg.Noise
		if cfg.Noise == NoiseBall {
			f.Radius = cfg.Radius
		} else {
			f.Sigma = cfg.Sigma
		}
	}
	if o.Schedule != "constant" {
		f.Horizon = cfg.Epochs * smp.StepsPerEpoch()
	}
	b, err := json.Marshal(f)
	if err != nil {
		panic(fmt.Sprintf("engine: trajectory fingerprint: %v", err)) // plain values: cannot fail
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// noiseBase is a seeded run's secret noise base (checkpoint.NoiseKey): SHA-256 of the seed and
// of a few of a seeded sampler's batches, so that two runs from one seed whose samplers draw
// other batches do not share noise either. A secure sampler's batches are left out: a secure
// run's noise does not come from the key.
func noiseBase(seed uint64, smp sampler.Sampler) []byte {
	h := sha256.New()
	h.Write([]byte("dpsgd/noise-base/v1\x00"))
	h.Write(binary.LittleEndian.AppendUint64(nil, seed))
	if _, ok := samplerKey(smp); !ok {
		h.Write([]byte(samplerFingerprint(sha256.New(), smp)))
	}
	return h.Sum(nil)
}

// ckptRun is a run's side of its checkpoints: its noise segments and key, its run key and its
// generation.
type ckptRun struct {
	noise    []checkpoint.NoiseSegment
	noiseKey uint64
	key      *checkpoint.RunKey
	gen      uint64
	secure   bool
	path     string // CheckpointOptions.Path
}

// newCkptRun derives the run's noise segments and key (cfg validated): one segment from step 0
// for a fresh run; the checkpoint's for a resume, with a fork at its step when the trajectory
// fingerprint differs from the checkpoint's last one.
func newCkptRun(cfg *Config, smp sampler.Sampler) (*ckptRun, error) {
	traj := trajectoryFingerprint(cfg, smp)
	k := &ckptRun{noise: []checkpoint.NoiseSegment{{From: 0, Trajectory: traj}}, secure: cfg.Secure}
	if c := cfg.Checkpoint.Resume; c != nil {
		k.noise = append([]checkpoint.NoiseSegment(nil), c.State.Noise...)
		if len(k.noise) == 0 || k.noise[len(k.noise)-1].Trajectory != traj {
			k.noise = append(k.noise, checkpoint.NoiseSegment{From: c.State.Step, Trajectory: traj})
		}
		k.gen = c.State.Generation
	}
	var err error
	if k.noiseKey, err = checkpoint.SegmentsKey(noiseBase(cfg.Seed, smp), k.noise); err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	return k, nil
}

// open finds the run's key (CheckpointOptions.Run, or the key store at KeyDir: a new key for a
// fresh run, the checkpoint's for a resume) and returns the run's checkpoint configuration.
func (k *ckptRun) open(cfg *Config, train *datasets.Dataset, smp sampler.Sampler, pv *Privacy) (checkpoint.Config, error) {
	o := &cfg.Checkpoint
	k.key, k.path = o.Run, o.Path
	switch {
	case k.key != nil && o.Resume != nil && k.key.ID() != o.Resume.Config.RunID:
		return checkpoint.Config{}, fmt.Errorf("resume: %w", &checkpoint.MismatchError{Field: "run id", Checkpoint: o.Resume.Config.RunID, New: k.key.ID()})
	case k.key == nil:
		store, err := checkpoint.OpenKeyStore(o.KeyDir)
		if err != nil {
			return checkpoint.Config{}, err
		}
		if o.Resume == nil {
			if o.Path != "" && store.Holds(o.Path) {
				return checkpoint.Config{}, holdsErr(o.Path, store)
			}
			if k.key, err = store.NewRun(); err != nil {
				return checkpoint.Config{}, err
			}
		} else if k.key, err = store.Load(o.Resume.Config.RunID); err != nil {
			return checkpoint.Config{}, fmt.Errorf("resume: %w. The resume needs the run's key to check the data and "+
				"the sampler (and to rebuild a secure sampler): point the key directory (dpsgd train --key-dir, or "+
				"%s) at the key store that holds it, or copy its directory %s along with the checkpoint",
				err, checkpoint.KeyDirEnv, o.Resume.Config.RunID)
		}
	}
	if o.Path != "" && k.key.Store() != nil && k.key.Store().Holds(o.Path) {
		return checkpoint.Config{}, holdsErr(o.Path, k.key.Store())
	}
	return checkpointConfig(cfg, train, smp, pv, k.key), nil
}

func holdsErr(path string, store *checkpoint.KeyStore) error {
	return fmt.Errorf("%w: the checkpoint %s is inside the key store %s: whoever gets the one would get the other; "+
		"keep the key store elsewhere", checkpoint.ErrKeyStore, path, store.Dir())
}

// resume claims the run's next generation for a secure resume (every other check passed): of
// two resumes of one secure checkpoint, or of copies of it, only the first may run. The
// checkpoint's directory is probed first: a claim whose checkpoint then cannot be written
// would leave the run without a resumable checkpoint.
func (k *ckptRun) resume(c *checkpoint.Checkpoint) error {
	if !k.secure {
		return nil
	}
	if k.path != "" {
		dir, base := filepath.Split(k.path)
		if dir == "" {
			dir = "."
		}
		f, err := os.CreateTemp(dir, "."+base+".probe-*")
		if err != nil {
			return fmt.Errorf("%w: %s: %w (checked before claiming the run's next generation)", checkpoint.ErrWrite, k.path, err)
		}
		_ = f.Close()
		_ = os.Remove(f.Name())
	}
	g, err := k.key.Claim(c.State.Generation, c.State.Step)
	if err != nil {
		return err
	}
	k.gen = g
	return nil
}

// current checks, before a checkpoint is written, that no other process has claimed a newer
// generation of a secure run (a copy of one of its checkpoints resumed elsewhere): the run
// stops rather than release the same epochs as that one.
func (k *ckptRun) current() error {
	if !k.secure {
		return nil
	}
	g, err := k.key.Generation()
	if err != nil {
		return err
	}
	if g != k.gen {
		return fmt.Errorf("%w: the key store's generation of run %s is %d, this run's %d: another process resumed a copy of "+
			"one of this run's checkpoints; this run stops so that the two do not both release the same epochs with "+
			"independent noise", checkpoint.ErrStale, k.key.ID(), g, k.gen)
	}
	return nil
}
