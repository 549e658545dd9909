package cuda

import (
	"errors"
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/kernels"
	"gorgonia.org/tensor"
)

// TrainerConfig is the device side of one DP-SGD run on a dense model (the fields mirror
// engine.Config; docs/gpu.md describes how the engine uses it).
type TrainerConfig struct {
	Arch          nn.Arch // logreg or mlp (no convolutions)
	PhysicalBatch int     // rows of every physical batch, ≥ 1 (padding rows are masked)
	Clip          float64 // per-example clip norm C (> 0; ignored when NonPrivate)
	// ClipBound is the norm the clip coefficients aim at, C less a float rounding margin so
	// that each clipped gradient stays within C (0: Clip); the noise std is σ·Clip.
	ClipBound    float64
	Sigma        float64 // noise multiplier: std σ·C (Noise "gaussian")
	Noise        string  // "gaussian" (default) or "ball"
	Radius       float64 // ball radius (Noise "ball")
	NonPrivate   bool    // no clipping, no noise
	NoiseSeed    uint64  // the noise stream's seed (the engine derives it from the seed and the trajectory)
	Optimizer    string  // "sgd" (default), "momentum" or "adam"
	Momentum     float64
	Beta1, Beta2 float64 // Adam (0, 0: 0.9, 0.999)
	Eps          float64 // Adam (0: 1e-8)
	WeightDecay  float64
}

// StepStats describes one logical step on the device (as engine.StepStats).
type StepStats struct {
	BatchSize int
	Loss      float64
	Correct   int
	NonFinite int
	Clipped   int
}

type layer struct {
	in, out  int
	w, b     Buffer // parameters
	gw, gb   Buffer // clipped (then noisy, normalized) gradient sums
	mw, mb   Buffer // optimizer state: momentum / Adam first moment
	vw, vb   Buffer // Adam second moment
	z, h, e  Buffer // pre-activation, output, error (phys rows)
	hasState bool
}

// Trainer runs DP-SGD steps of a dense model on the device. The training set (features and
// labels) and the parameters live on the device; a step uploads only the batch's indices.
// A Trainer is not safe for concurrent use.
type Trainer struct {
	d       *Device
	cfg     TrainerConfig
	ds      *datasets.Dataset
	layers  []*layer
	x, y    Buffer // phys×D input, phys×K one-hot targets
	X, Y    Buffer // the dataset
	idx     Buffer // phys int32
	mask    Buffer
	asq     Buffer
	esq     Buffer
	norm2   Buffer
	coef    Buffer
	loss    Buffer
	correct Buffer
	scratch Buffer
	ones    Buffer
	flag    Buffer
	adamT   int
	owned   []Buffer

	hIdx   []int32
	hCoef  []float64
	hNorm  []float64
	hLoss  []float64
	hCorr  []int32
	hFlag  []int32
	hMask  []float64
	params *nn.Params
}

// NewTrainer uploads the training set and the float32 parameters params (as nn.NewParams
// makes them for cfg.Arch) to d.
func NewTrainer(d *Device, cfg TrainerConfig, params *nn.Params, train *datasets.Dataset) (*Trainer, error) {
	if len(cfg.Arch.Conv) > 0 {
		return nil, fmt.Errorf("cuda: Trainer: convolutional models are not supported on the device yet (arch %s)", cfg.Arch.Kind)
	}
	shapes, err := cfg.Arch.Layers()
	if err != nil {
		return nil, err
	}
	if params.Dtype != tensor.Float32 {
		return nil, fmt.Errorf("cuda: Trainer: dtype %v: want float32", params.Dtype)
	}
	if len(params.List) != 2*len(shapes) {
		return nil, fmt.Errorf("cuda: Trainer: %d parameter tensors for %d layers", len(params.List), len(shapes))
	}
	if cfg.PhysicalBatch < 1 {
		return nil, fmt.Errorf("cuda: Trainer: physical batch %d: want ≥ 1", cfg.PhysicalBatch)
	}
	if train.D != cfg.Arch.InputSize() || train.Classes != cfg.Arch.Classes || len(train.X) != train.N*train.D || len(train.Y) != train.N {
		return nil, fmt.Errorf("cuda: Trainer: dataset %d×%d with %d classes does not fit the model (%d inputs, %d classes)", train.N, train.D, train.Classes, cfg.Arch.InputSize(), cfg.Arch.Classes)
	}
	if train.N > math.MaxInt32 {
		return nil, fmt.Errorf("cuda: Trainer: %d examples: at most %d", train.N, math.MaxInt32)
	}
	if !cfg.NonPrivate {
		if !(cfg.Clip > 0) || math.IsInf(cfg.Clip, 0) {
			return nil, fmt.Errorf("cuda: Trainer: clip %v: want a finite value > 0", cfg.Clip)
		}
		switch cfg.Noise {
		case "", "gaussian":
			cfg.Noise = "gaussian"
			if !(cfg.Sigma >= 0) || math.IsInf(cfg.Sigma, 0) {
				return nil, fmt.Errorf("cuda: Trainer: sigma %v: want a finite value ≥ 0", cfg.Sigma)
			}
		case "ball":
			if !(cfg.Radius > 0 && cfg.Radius <= kernels.MaxBallRadius) {
				return nil, fmt.Errorf("cuda: Trainer: radius %v: want a value in (0, %g]", cfg.Radius, kernels.MaxBallRadius)
			}
		default:
			return nil, fmt.Errorf("cuda: Trainer: noise %q: want gaussian or ball", cfg.Noise)
		}
	}
	switch cfg.Optimizer {
	case "", "sgd":
		cfg.Optimizer = "sgd"
	case "momentum", "adam":
	default:
		return nil, fmt.Errorf("cuda: Trainer: optimizer %q: want sgd, momentum or adam", cfg.Optimizer)
	}
	if cfg.Optimizer == "adam" && cfg.Beta1 == 0 && cfg.Beta2 == 0 && cfg.Eps == 0 {
		cfg.Beta1, cfg.Beta2, cfg.Eps = 0.9, 0.999, 1e-8
	}
	t := &Trainer{d: d, cfg: cfg, ds: train, params: params}
	if err := t.setup(shapes); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

func (t *Trainer) alloc(bytes int) (Buffer, error) {
	b, err := t.d.Alloc(max(bytes, 4))
	if err == nil {
		t.owned = append(t.owned, b)
	}
	return b, err
}

func (t *Trainer) allocZero(bytes int) (Buffer, error) {
	b, err := t.alloc(bytes)
	if err != nil {
		return b, err
	}
	return b, t.d.Zero(b, bytes)
}

func (t *Trainer) setup(shapes []nn.LayerShape) error {
	p := t.cfg.PhysicalBatch
	var err error
	a := func(bytes int) Buffer {
		if err != nil {
			return Buffer{}
		}
		var b Buffer
		b, err = t.alloc(bytes)
		return b
	}
	z := func(bytes int) Buffer {
		if err != nil {
			return Buffer{}
		}
		var b Buffer
		b, err = t.allocZero(bytes)
		return b
	}
	ds := t.ds
	t.X, t.Y = a(len(ds.X)*4), a(len(ds.Y)*4)
	t.x, t.y = a(p*ds.D*4), a(p*ds.Classes*4)
	t.idx, t.mask = a(p*4), a(p*8)
	t.asq, t.esq, t.norm2, t.coef = a(p*8), a(p*8), a(p*8), a(p*8)
	t.loss, t.correct, t.flag = a(p*8), a(p*4), a(4)
	maxOut := 0
	for _, s := range shapes {
		maxOut = max(maxOut, s.Out)
	}
	t.scratch = a(p * maxOut * 4)
	ones := make([]float32, p)
	for i := range ones {
		ones[i] = 1
	}
	t.ones = a(p * 4)
	state := t.cfg.Optimizer != "sgd"
	for _, s := range shapes {
		l := &layer{in: s.In, out: s.Out, hasState: state}
		l.w, l.b = a(s.In*s.Out*4), a(s.Out*4)
		l.gw, l.gb = a(s.In*s.Out*4), a(s.Out*4)
		l.z, l.h, l.e = a(p*s.Out*4), a(p*s.Out*4), a(p*s.Out*4)
		if state {
			l.mw, l.mb = z(s.In*s.Out*4), z(s.Out*4)
		}
		if t.cfg.Optimizer == "adam" {
			l.vw, l.vb = z(s.In*s.Out*4), z(s.Out*4)
		}
		t.layers = append(t.layers, l)
	}
	if err != nil {
		return err
	}
	labels := make([]int32, len(ds.Y))
	for i, v := range ds.Y {
		if v < 0 || v >= ds.Classes {
			return fmt.Errorf("cuda: Trainer: label %d of example %d: want [0, %d)", v, i, ds.Classes)
		}
		labels[i] = int32(v)
	}
	if err := firstErr(Upload(t.d, t.X, ds.X), Upload(t.d, t.Y, labels), Upload(t.d, t.ones, ones)); err != nil {
		return err
	}
	if err := t.LoadParams(t.params); err != nil {
		return err
	}
	t.hIdx, t.hCoef, t.hNorm = make([]int32, p), make([]float64, p), make([]float64, p)
	t.hLoss, t.hCorr, t.hFlag, t.hMask = make([]float64, p), make([]int32, p), make([]int32, 1), make([]float64, p)
	return nil
}

// LoadParams uploads the float32 parameters p (same shapes as the model's).
func (t *Trainer) LoadParams(p *nn.Params) error {
	for li, l := range t.layers {
		w, ok1 := p.List[2*li].Value.Data().([]float32)
		b, ok2 := p.List[2*li+1].Value.Data().([]float32)
		if !ok1 || !ok2 || len(w) != l.in*l.out || len(b) != l.out {
			return fmt.Errorf("cuda: Trainer: parameters of layer %d do not match the model", li)
		}
		if err := firstErr(Upload(t.d, l.w, w), Upload(t.d, l.b, b)); err != nil {
			return err
		}
	}
	return nil
}

// CopyParams downloads the device's parameters into p (float32, the model's shapes), e.g. for
// evaluation, EMA or a checkpoint.
func (t *Trainer) CopyParams(p *nn.Params) error {
	for li, l := range t.layers {
		w, ok1 := p.List[2*li].Value.Data().([]float32)
		b, ok2 := p.List[2*li+1].Value.Data().([]float32)
		if !ok1 || !ok2 || len(w) != l.in*l.out || len(b) != l.out {
			return fmt.Errorf("cuda: Trainer: parameters of layer %d do not match the model", li)
		}
		if err := firstErr(Download(t.d, w, l.w), Download(t.d, b, l.b)); err != nil {
			return err
		}
	}
	return nil
}

// Gradients downloads the last step's gradient (the noisy clipped sum divided by the expected
// batch size), one slice per parameter tensor in nn.Params order.
func (t *Trainer) Gradients() ([][]float32, error) {
	var out [][]float32
	for _, l := range t.layers {
		w, b := make([]float32, l.in*l.out), make([]float32, l.out)
		if err := firstErr(Download(t.d, w, l.gw), Download(t.d, b, l.gb)); err != nil {
			return nil, err
		}
		out = append(out, w, b)
	}
	return out, nil
}

// Close frees the trainer's device memory (the device stays open).
func (t *Trainer) Close() error {
	var first error
	for _, b := range t.owned {
		if err := t.d.Free(b); err != nil && first == nil && !errors.Is(err, ErrClosed) {
			first = err
		}
	}
	t.owned = nil
	return first
}

// Step performs one logical DP-SGD step (docs/design.md steps 2–7) on the examples idx (indices
// into the training set, in the sampler's order): physical batches of PhysicalBatch rows
// (the last one padded and masked), per-example errors by the forward and backward passes,
// ghost norms, clip coefficients, clipped sums by GEMM, noise keyed by (NoiseSeed, step,
// tensor), division by expectedBatch and the optimizer's update at rate lr.
func (t *Trainer) Step(idx []int, step int, expectedBatch, lr float64) (StepStats, error) {
	var st StepStats
	if !(expectedBatch > 0) || !(lr > 0) || math.IsInf(lr, 0) {
		return st, fmt.Errorf("cuda: Step: expected batch %v and learning rate %v: want > 0", expectedBatch, lr)
	}
	p := t.cfg.PhysicalBatch
	k := max((len(idx)+p-1)/p, 1)
	clip := t.cfg.Clip
	if t.cfg.ClipBound > 0 {
		clip = t.cfg.ClipBound
	}
	if t.cfg.NonPrivate {
		clip = math.Inf(1)
	}
	for c := range k {
		lo, hi := c*p, min((c+1)*p, len(idx))
		n := max(hi-lo, 0)
		for i := range p {
			t.hIdx[i] = 0
			if i < n {
				j := idx[lo+i]
				if j < 0 || j >= t.ds.N {
					return st, fmt.Errorf("cuda: Step: index %d: want [0, %d)", j, t.ds.N)
				}
				t.hIdx[i] = int32(j)
			}
		}
		if err := t.physical(n, clip, c == 0); err != nil {
			return st, err
		}
		if err := firstErr(Download(t.d, t.hCoef, t.coef), Download(t.d, t.hNorm, t.norm2), Download(t.d, t.hLoss, t.loss),
			Download(t.d, t.hCorr, t.correct)); err != nil {
			return st, err
		}
		for i := range n {
			v := t.hNorm[i]
			if !(v >= 0 && v <= math.MaxFloat64) {
				st.NonFinite++
			} else if t.hCoef[i] < 1 {
				st.Clipped++
			}
			st.Loss += t.hLoss[i]
			st.Correct += int(t.hCorr[i])
		}
		st.BatchSize += n
	}
	if err := t.noise(step); err != nil {
		return st, err
	}
	return st, t.update(expectedBatch, lr)
}

// physical runs one physical batch of n real rows (the indices in t.hIdx) and adds its
// clipped sums to the gradients (first: sets them).
func (t *Trainer) physical(n int, clip float64, first bool) error {
	d, p, ds := t.d, t.cfg.PhysicalBatch, t.ds
	tanh := t.cfg.Arch.Activation == nn.Tanh
	if err := firstErr(Upload(d, t.idx, t.hIdx), d.PadMask(t.mask, n, p)); err != nil {
		return err
	}
	g := grid(int64(p * max(ds.D, ds.Classes)))
	if err := d.Launch("gather_batch_f32", g, t.x, t.y, t.X, t.Y, t.idx, t.mask, int32(p), int32(ds.D), int32(ds.Classes)); err != nil {
		return err
	}
	// Forward: Z = A·W + b, H = act(Z) (the logits are the last Z).
	a := t.x
	for li, l := range t.layers {
		if err := firstErr(d.Sgemm(false, false, p, l.out, l.in, 1, a, l.in, l.w, l.out, 0, l.z, l.out), d.BiasAdd(l.z, l.b, p, l.out)); err != nil {
			return err
		}
		if li < len(t.layers)-1 {
			if err := d.Activate(l.h, l.z, p*l.out, tanh); err != nil {
				return err
			}
			a = l.h
		}
	}
	// Backward: errors at every pre-activation.
	last := t.layers[len(t.layers)-1]
	if err := d.SoftmaxXent(last.e, t.loss, t.correct, last.z, t.y, p, ds.Classes); err != nil {
		return err
	}
	for li := len(t.layers) - 1; li > 0; li-- {
		l, prev := t.layers[li], t.layers[li-1]
		if err := firstErr(d.Sgemm(false, true, p, l.in, l.out, 1, l.e, l.out, l.w, l.out, 0, prev.e, l.in),
			d.ActivateBackward(prev.e, prev.z, prev.h, p*l.in, tanh)); err != nil {
			return err
		}
	}
	// Ghost norms and clip coefficients.
	if err := d.Zero(t.norm2, p*8); err != nil {
		return err
	}
	for li, l := range t.layers {
		if err := firstErr(d.RowSqNorms(t.asq, t.input(li), p, l.in), d.RowSqNorms(t.esq, l.e, p, l.out), d.GhostAccum(t.norm2, t.asq, t.esq, p, true)); err != nil {
			return err
		}
	}
	if err := d.ClipCoefs(t.coef, t.norm2, t.mask, clip, p); err != nil {
		return err
	}
	// Clipped sums: the first physical batch sets the gradients, later ones add by GEMM.
	for li, l := range t.layers {
		in := t.input(li)
		if first {
			if err := d.ClippedSum(l.gw, l.gb, in, l.e, p, l.in, l.out, t.coef, t.scratch); err != nil {
				return err
			}
			continue
		}
		if err := firstErr(d.Launch("zero_rows_f32", grid(int64(p*l.in)), in, int32(p), int32(l.in), t.coef), d.ScaleRows(t.scratch, l.e, p, l.out, t.coef),
			d.Sgemm(false, false, 1, l.out, p, 1, t.ones, p, t.scratch, l.out, 1, l.gb, l.out),
			d.Sgemm(true, false, l.in, l.out, p, 1, in, l.in, t.scratch, l.out, 1, l.gw, l.out)); err != nil {
			return err
		}
	}
	return nil
}

// input is the activation buffer feeding layer li.
func (t *Trainer) input(li int) Buffer {
	if li == 0 {
		return t.x
	}
	return t.layers[li-1].h
}

func (t *Trainer) noise(step int) error {
	if t.cfg.NonPrivate {
		return nil
	}
	if t.cfg.Noise == "ball" {
		var bufs []Buffer
		var lens []int
		for _, l := range t.layers {
			bufs = append(bufs, l.gw, l.gb)
			lens = append(lens, l.in*l.out, l.out)
		}
		return t.d.AddBall(bufs, lens, t.cfg.Radius, kernels.NoiseKey{Seed: t.cfg.NoiseSeed, Step: uint64(step)})
	}
	std := t.cfg.Sigma * t.cfg.Clip
	for li, l := range t.layers {
		kw := kernels.NoiseKey{Seed: t.cfg.NoiseSeed, Step: uint64(step), Tensor: uint32(2 * li)}
		kb := kernels.NoiseKey{Seed: t.cfg.NoiseSeed, Step: uint64(step), Tensor: uint32(2*li + 1)}
		if err := firstErr(t.d.AddGaussian(l.gw, l.in*l.out, std, kw, 0), t.d.AddGaussian(l.gb, l.out, std, kb, 0)); err != nil {
			return err
		}
	}
	return nil
}

// update divides the gradients by the expected batch size, checks them for non-finite values
// and applies the optimizer (engine/optim.go's formulas, in float32).
func (t *Trainer) update(expected, lr float64) error {
	d := t.d
	inv := float32(1 / expected)
	if err := d.Zero(t.flag, 4); err != nil {
		return err
	}
	for _, l := range t.layers {
		for _, g := range []struct {
			b Buffer
			n int
		}{{l.gw, l.in * l.out}, {l.gb, l.out}} {
			if err := firstErr(d.Launch("scale_f32", grid(int64(g.n)), g.b, int64(g.n), inv), d.Launch("nonfinite_f32", grid(int64(g.n)), t.flag, g.b, int64(g.n))); err != nil {
				return err
			}
		}
	}
	if err := Download(d, t.hFlag, t.flag); err != nil {
		return err
	}
	if t.hFlag[0] != 0 {
		return errors.New("cuda: non-finite clipped gradient (a bug: non-finite examples are zeroed before the sum)")
	}
	wd := float32(t.cfg.WeightDecay)
	t.adamT++
	for _, l := range t.layers {
		for _, q := range []struct {
			w, g, m, v Buffer
			n          int
		}{{l.w, l.gw, l.mw, l.vw, l.in * l.out}, {l.b, l.gb, l.mb, l.vb, l.out}} {
			var err error
			switch t.cfg.Optimizer {
			case "sgd":
				err = d.Launch("sgd_f32", grid(int64(q.n)), q.w, Buffer{}, q.g, int64(q.n), float32(lr), wd, float32(0), int32(0))
			case "momentum":
				err = d.Launch("sgd_f32", grid(int64(q.n)), q.w, q.m, q.g, int64(q.n), float32(lr), wd, float32(t.cfg.Momentum), int32(1))
			case "adam":
				b1, b2 := t.cfg.Beta1, t.cfg.Beta2
				c1 := 1 - math.Pow(b1, float64(t.adamT))
				c2 := 1 - math.Pow(b2, float64(t.adamT))
				step := lr * math.Sqrt(c2) / c1
				err = d.Launch("adam_f32", grid(int64(q.n)), q.w, q.m, q.v, q.g, int64(q.n), float32(b1), float32(1-b1), float32(b2), float32(1-b2), float32(step), float32(t.cfg.Eps), wd)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}
