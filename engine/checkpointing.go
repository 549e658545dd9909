package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"

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
// replica count): the noise of step t is keyed by (seed, t), every batch is a pure function of
// (sampler seed, epoch, step), and the optimizer's moments, step count and moving average are
// restored exactly. Two exceptions: a cosine schedule follows the new total, so extending a
// run changes the learning rates of the steps after the checkpoint (the same total gives the
// same bits); and a secure run (Config.Secure) draws fresh noise from the operating system, so
// it continues correctly but not bitwise.
type CheckpointOptions struct {
	Path  string // write checkpoints to this file ("" = none)
	Every int    // also write one every Every steps (0 = only when the run ends or stops)
	// Resume continues this checkpoint's run (nil = start afresh). Train refuses it when its
	// configuration differs from the run's in anything but Epochs, Replicas, EvalBatch and
	// Meta, with an error wrapping checkpoint.ErrMismatch that names the field and both values.
	Resume *checkpoint.Checkpoint
	// SamplerSeed is the seed the sampler was built with, recorded so that a resume can
	// rebuild it (dpsgd train builds its sampler with Config.Seed). Train itself checks the
	// resumed sampler by a fingerprint of its batches.
	SamplerSeed uint64
	// Meta is stored in the checkpoint as is (dpsgd train records its flags).
	Meta map[string]string
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

// DatasetDigest returns the hex SHA-256 of a dataset's sizes, features' bits and labels: the
// checkpoint's record of which data the run trains on.
func DatasetDigest(ds *datasets.Dataset) string {
	h := sha256.New()
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

// samplerFingerprint hashes the sampler's batches at a few positions of the first two epochs:
// two samplers with equal fingerprints draw the same batches there, which a different seed,
// key or parameter would not.
func samplerFingerprint(smp sampler.Sampler) string {
	h := sha256.New()
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

// checkpointConfig describes the run (cfg validated) as a checkpoint records it.
func checkpointConfig(cfg *Config, train *datasets.Dataset, smp sampler.Sampler, pv *Privacy) checkpoint.Config {
	s := checkpoint.Sampler{
		Family: smp.Name(), N: smp.DatasetSize(), StepsPerEpoch: smp.StepsPerEpoch(),
		ExpectedBatch: smp.ExpectedBatchSize(), MaxBatch: smp.MaxBatchSize(), SampleRate: smp.SampleRate(),
		Seed: cfg.Checkpoint.SamplerSeed, Fingerprint: samplerFingerprint(smp),
	}
	if key, ok := samplerKey(smp); ok {
		s.Secure, s.Key, s.Seed = true, hex.EncodeToString(key[:]), 0
	}
	o := cfg.Optimizer
	c := checkpoint.Config{
		Sampler: s, DatasetSize: train.N, DatasetDigest: DatasetDigest(train), Arch: cfg.Arch,
		Dtype: dtypeName(cfg.Dtype), NonPrivate: cfg.NonPrivate, Secure: cfg.Secure,
		Optimizer: checkpoint.Optimizer{Name: o.Name, LR: o.LR, Momentum: o.Momentum, Beta1: o.Beta1, Beta2: o.Beta2,
			Eps: o.Eps, WeightDecay: o.WeightDecay, Schedule: o.Schedule, EMA: o.EMA},
		Seed: cfg.Seed, PhysicalBatch: cfg.PhysicalBatch, Epochs: cfg.Epochs, Replicas: cfg.Replicas,
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

func toCheckpointStats(e EpochStats) checkpoint.EpochStats {
	return checkpoint.EpochStats{Epoch: e.Epoch, Steps: e.Steps, TrainLoss: e.TrainLoss, TrainAcc: e.TrainAcc,
		TestAcc: e.TestAcc, Epsilon: jsonSafe(e.Epsilon), NonFinite: e.NonFinite, NonFiniteLoss: e.NonFiniteLoss,
		ClippedFrac: e.ClippedFrac, Seconds: e.Seconds, ExamplesSeen: e.ExamplesSeen}
}

func fromCheckpointStats(e checkpoint.EpochStats, nonPrivate bool) EpochStats {
	eps := e.Epsilon
	if nonPrivate {
		eps = math.NaN()
	}
	return EpochStats{Epoch: e.Epoch, Steps: e.Steps, TrainLoss: e.TrainLoss, TrainAcc: e.TrainAcc,
		TestAcc: e.TestAcc, Epsilon: eps, NonFinite: e.NonFinite, NonFiniteLoss: e.NonFiniteLoss,
		ClippedFrac: e.ClippedFrac, Seconds: e.Seconds, ExamplesSeen: e.ExamplesSeen}
}

// jsonSafe maps NaN (a non-private run's ε) and ±Inf to 0 for the checkpoint's JSON; a
// non-private run's ε is restored as NaN, and a private run's ε is never NaN.
func jsonSafe(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}
