package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/dpsgd/dpsgd/cuda"
	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/kernels"
	kcuda "github.com/dpsgd/dpsgd/kernels/cuda"
	"gorgonia.org/tensor"
)

// cudaLayer is one GEMM layer's device memory (nn.LayerShape): a dense layer, one row per
// example, or a convolution, rows output positions per example in the row layout (conv set).
type cudaLayer struct {
	in, out int
	rows    int         // rows per example: 1, or the convolution's output positions
	w, b    cuda.Buffer // parameters
	acc     cuda.Buffer // the clipped sum, then its noise, in float64: (in+1)·out, the weights then the bias
	gw, gb  cuda.Buffer // the step's gradient: acc over the expected batch size, rounded to float32
	mw, mb  cuda.Buffer // optimizer state: momentum / Adam first moment
	vw, vb  cuda.Buffer // Adam second moment
	z, e    cuda.Buffer // pre-activation and the error at it, E (phys·rows rows)
	a       cuda.Buffer // the input rows A: a dense layer's input, a convolution's patch matrix
	conv    *cudaConv
	wh      cuda.Buffer // the weights in bfloat16 (--precision bf16), converted at each forward pass
}

// cudaConv is a convolution layer's own device memory and geometry, in engine/nn's row layout:
// activations are (examples·positions) × channels matrices.
type cudaConv struct {
	win    cuda.Window // the convolution's window on the layer's input
	a      cuda.Buffer // the patch matrix: phys·rows × in
	dpatch cuda.Buffer // the error at the patch matrix, phys·rows × in (not the first layer)
	g      cuda.Buffer // the per-example gradients Ĝᵢ, phys × (in+1)·out
}

// cudaBackend is the CUDA backend of the DP step (backend): a float32 model (a preset or a
// layer stack of the layers CUDASupport names) on one device, with the training set, the
// parameters, the gradient sums and the optimizer's moments in device memory; a step uploads
// only the batch's indices and reads back per-example statistics. The step's logic (which noise, its key, the learning
// rate, the guards) is run.dpStep's; this type runs its numbers with the kernels of
// kernels/cuda through the driver layer (package cuda). It is not safe for concurrent use.
type cudaBackend struct {
	d      *cuda.Device
	name   string
	phys   int
	bf16   bool       // the forward and backward GEMMs in bfloat16 (PrecisionBF16)
	params *nn.Params // the host mirror, float32
	opt    *optimizer[float32]

	ds      *datasets.Dataset // the training set on the device (X, Y)
	layers  []*cudaLayer      // the GEMM layers, in Params order
	nodes   []*cudaNode       // the layer stack (backend_cuda_stack.go)
	others  []*cudaOther      // the other layers' parameters, in Params order after the GEMM layers'
	norms   []*cudaNode       // the normalization layers (the materialized rule), in stack order
	embeds  []*cudaNode       // the embedding (the sparse rule)
	logits  cuda.Buffer       // the last node's output and the error at it
	dlogits cuda.Buffer
	x, y    cuda.Buffer // phys×D input, phys×K one-hot targets
	X, Y    cuda.Buffer // the training set
	idx     cuda.Buffer // phys int32
	mask    cuda.Buffer
	asq     cuda.Buffer
	esq     cuda.Buffer
	norm2   cuda.Buffer
	coef    cuda.Buffer
	loss    cuda.Buffer
	correct cuda.Buffer
	scratch cuda.Buffer
	wideA   cuda.Buffer // a dense layer's input widened to float64, phys × (in+1)
	wideS   cuda.Buffer // its scaled errors widened to float64, phys × out
	half    cuda.Buffer // a GEMM's activation or error operand in bfloat16 (bf16 only)
	flag    cuda.Buffer
	owned   []cuda.Buffer

	hIdx  []int32
	hCoef []float64
	hNorm []float64
	hLoss []float64
	hCorr []int32
	hFlag []int32
}

// OpenDevice opens the CUDA device of opts with dpsgd's kernels (kernels/cuda's PTX, unless
// opts.PTX names another module).
func OpenDevice(opts cuda.Options) (*cuda.Device, error) {
	if opts.PTX == "" {
		opts.PTX = kcuda.PTX()
	}
	return cuda.Open(opts)
}

// ProbeDevice opens the device of opts (OpenDevice) and closes it again, returning its
// description, or why it cannot be opened.
func ProbeDevice(opts cuda.Options) (string, error) {
	d, err := OpenDevice(opts)
	if err != nil {
		return "", err
	}
	name := d.Info().String()
	if err := d.Close(); err != nil {
		return "", err
	}
	return name, nil
}

// newCUDABackend puts the run's model on d: it uploads the training set, the parameters
// (float32, as nn.NewParams makes them for cfg.Arch) and the optimizer's state. d stays the
// caller's (close does not close it).
func newCUDABackend(d *cuda.Device, cfg *Config, params *nn.Params, opt *optimizer[float32], train *datasets.Dataset) (*cudaBackend, error) {
	if err := CUDASupport(cfg); err != nil {
		return nil, err
	}
	nodes, decl, err := planCUDA(cfg.Arch)
	if err != nil {
		return nil, err
	}
	shapes := decl.Gemm
	want, err := cfg.Arch.Layers()
	if err != nil {
		return nil, err
	}
	if !slices.EqualFunc(shapes, want, func(a, b nn.LayerShape) bool { return a.In == b.In && a.Out == b.Out && a.Positions == b.Positions }) {
		return nil, fmt.Errorf("engine: cuda backend: the stack's GEMM layers %v are not the model's %v", shapes, want)
	}
	shapes = want
	if params.Dtype != tensor.Float32 || len(params.List) != 2*len(shapes)+len(decl.Other) {
		return nil, fmt.Errorf("engine: cuda backend: %d %v parameter tensors for %d GEMM layers and %d others: want 2 float32 per GEMM layer and the others", len(params.List), params.Dtype, len(shapes), len(decl.Other))
	}
	b := &cudaBackend{d: d, name: d.Info().String(), phys: cfg.PhysicalBatch, bf16: cfg.Precision == PrecisionBF16,
		params: params, opt: opt, nodes: nodes}
	if err := b.setup(shapes, decl.Other, train); err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

func (b *cudaBackend) alloc(bytes int) (cuda.Buffer, error) {
	buf, err := b.d.Alloc(max(bytes, 4))
	if err == nil {
		b.owned = append(b.owned, buf)
	}
	return buf, err
}

func (b *cudaBackend) setup(shapes []nn.LayerShape, others []nn.ParamDecl, train *datasets.Dataset) error {
	p := b.phys
	var err error
	a := func(bytes int) cuda.Buffer {
		if err != nil {
			return cuda.Buffer{}
		}
		var buf cuda.Buffer
		buf, err = b.alloc(bytes)
		return buf
	}
	d, k := train.D, train.Classes
	b.x, b.y = a(p*d*4), a(p*k*4)
	b.idx, b.mask = a(p*4), a(p*8)
	b.asq, b.esq, b.norm2, b.coef = a(p*8), a(p*8), a(p*8), a(p*8)
	b.loss, b.correct, b.flag = a(p*8), a(p*4), a(4)
	maxOut, maxIn := 0, 0
	for _, s := range shapes {
		maxOut = max(maxOut, s.Out)
		if s.Positions == 1 {
			maxIn = max(maxIn, s.In)
		}
	}
	b.scratch = a(p * maxOut * 4)
	b.wideA, b.wideS = a(p*(maxIn+1)*8), a(p*maxOut*8)
	if b.bf16 {
		maxOp := 0
		for _, s := range shapes {
			maxOp = max(maxOp, p*s.Positions*max(s.In, s.Out))
		}
		b.half = a(maxOp * 2)
	}
	moments := b.opt.kind.moments
	convs := b.convNodes(b.nodes, map[int]*cudaNode{})
	for li, s := range shapes {
		l := &cudaLayer{in: s.In, out: s.Out, rows: s.Positions}
		rows := p * s.Positions
		l.w, l.b = a(s.In*s.Out*4), a(s.Out*4)
		l.gw, l.gb = a(s.In*s.Out*4), a(s.Out*4)
		l.acc = a((s.In + 1) * s.Out * 8)
		if b.bf16 {
			l.wh = a(s.In * s.Out * 2)
		}
		l.z, l.e = a(rows*s.Out*4), a(rows*s.Out*4)
		if moments >= 1 {
			l.mw, l.mb = a(s.In*s.Out*4), a(s.Out*4)
		}
		if moments >= 2 {
			l.vw, l.vb = a(s.In*s.Out*4), a(s.Out*4)
		}
		if n := convs[li]; n != nil {
			w := n.win
			oh, ow := w.Out()
			if oh*ow != s.Positions || w.C*w.K*w.K != s.In {
				return fmt.Errorf("engine: cuda backend: convolution %d: window %+v does not match layer %+v", li, w, s)
			}
			l.conv = &cudaConv{win: w, a: a(rows * s.In * 4), g: a(p * (s.In + 1) * s.Out * 4)}
		}
		b.layers = append(b.layers, l)
	}
	for _, o := range others {
		n := o.Rows * o.Cols
		q := &cudaOther{n: n, w: a(n * 4), g: a(n * 4)}
		if moments >= 1 {
			q.m = a(n * 4)
		}
		if moments >= 2 {
			q.v = a(n * 4)
		}
		b.others = append(b.others, q)
	}
	if err != nil {
		return err
	}
	b.logits, b.dlogits = b.allocNodes(b.nodes, b.x, cuda.Buffer{}, a)
	if err != nil {
		return err
	}
	b.hIdx, b.hCoef, b.hNorm = make([]int32, p), make([]float64, p), make([]float64, p)
	b.hLoss, b.hCorr, b.hFlag = make([]float64, p), make([]int32, p), make([]int32, 1)
	if err := b.bind(train); err != nil {
		return err
	}
	return b.push()
}

// bind uploads ds as the training set the steps read, once per *Dataset: a step on the bound
// dataset uploads nothing, so a dataset changed in place is not seen (engine.Learner says so).
func (b *cudaBackend) bind(ds *datasets.Dataset) error {
	if ds == b.ds {
		return nil
	}
	if ds.N > math.MaxInt32 {
		return fmt.Errorf("engine: cuda backend: %d examples: at most %d", ds.N, math.MaxInt32)
	}
	labels := make([]int32, len(ds.Y))
	for i, v := range ds.Y {
		if v < 0 || v >= ds.Classes {
			return fmt.Errorf("engine: cuda backend: label %d of example %d: want [0, %d)", v, i, ds.Classes)
		}
		labels[i] = int32(v)
	}
	// The old set's buffers go first; whatever fails below leaves no set bound and no
	// buffer of a half-uploaded one.
	b.free(b.X, b.Y)
	b.X, b.Y, b.ds = cuda.Buffer{}, cuda.Buffer{}, nil
	var err error
	if b.X, err = b.alloc(len(ds.X) * 4); err == nil {
		if b.Y, err = b.alloc(len(labels) * 4); err == nil {
			err = firstErr(cuda.Upload(b.d, b.X, ds.X), cuda.Upload(b.d, b.Y, labels))
		}
	}
	if err != nil {
		b.free(b.X, b.Y)
		b.X, b.Y = cuda.Buffer{}, cuda.Buffer{}
		return err
	}
	b.ds = ds
	return nil
}

// free frees bufs (the zero Buffer is skipped) and forgets them.
func (b *cudaBackend) free(bufs ...cuda.Buffer) {
	for _, f := range bufs {
		if f == (cuda.Buffer{}) {
			continue
		}
		_ = b.d.Free(f)
		for i, o := range b.owned {
			if o == f {
				b.owned = append(b.owned[:i], b.owned[i+1:]...)
				break
			}
		}
	}
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// clippedSum runs the batch idx of ds in physical batches of phys rows (the last padded and
// masked): forward, per-example errors, per-example norms, clip coefficients aiming at clip
// (+Inf: no clipping), and the clipped sums in float64 into the layers' acc.
func (b *cudaBackend) clippedSum(ds *datasets.Dataset, idx []int, clip float64) (StepStats, error) {
	var st StepStats
	if err := b.bind(ds); err != nil {
		return st, err
	}
	p := b.phys
	k := max((len(idx)+p-1)/p, 1)
	for c := range k {
		lo, hi := c*p, min((c+1)*p, len(idx))
		n := max(hi-lo, 0)
		for i := range p {
			b.hIdx[i] = 0
			if i < n {
				j := idx[lo+i]
				if j < 0 || j >= ds.N {
					return st, fmt.Errorf("engine: cuda backend: index %d: want [0, %d)", j, ds.N)
				}
				b.hIdx[i] = int32(j)
			}
		}
		if err := b.physical(n, clip, c == 0); err != nil {
			return st, err
		}
		if err := firstErr(cuda.Download(b.d, b.hCoef, b.coef), cuda.Download(b.d, b.hNorm, b.norm2), cuda.Download(b.d, b.hLoss, b.loss),
			cuda.Download(b.d, b.hCorr, b.correct)); err != nil {
			return st, err
		}
		for i := range n {
			v := b.hNorm[i]
			// A non-finite example has clipping coefficient 0: counted among the clipped, as
			// on the CPU.
			// Its loss and prediction are not counted (cpuBackend counts alike).
			if !(v >= 0 && v <= math.MaxFloat64) {
				st.NonFinite++
				st.Clipped++
				continue
			}
			if b.hCoef[i] < 1 {
				st.Clipped++
			}
			st.Loss += b.hLoss[i]
			st.Correct += int(b.hCorr[i])
		}
		st.BatchSize += n
	}
	return st, nil
}

// physical runs one physical batch of n real rows (the indices in b.hIdx) and adds its
// clipped sums to the gradients (first: sets them).
func (b *cudaBackend) physical(n int, clip float64, first bool) error {
	d, p, ds := b.d, b.phys, b.ds
	if err := firstErr(cuda.Upload(d, b.idx, b.hIdx), d.PadMask(b.mask, n, p)); err != nil {
		return err
	}
	if err := d.GatherBatch(b.x, b.y, b.X, b.Y, b.idx, b.mask, p, ds.D, ds.Classes); err != nil {
		return err
	}
	// Forward through the layer stack: a GEMM layer's Z = A·W + b (a convolution's A the patch
	// matrix of its input, the images for a first one), the functions, poolings and residual
	// sums between them; then the errors at every GEMM layer's pre-activation, backward through
	// them (col2im, each window's maximum or average, the functions' derivatives, a block's
	// body and skip).
	if err := firstErr(b.forward(b.nodes), d.SoftmaxXent(b.dlogits, b.loss, b.correct, b.logits, b.y, p, ds.Classes), b.backward(b.nodes)); err != nil {
		return err
	}
	// Per-example norms: ghost norms for dense layers; a convolution's per-example gradients
	// Ĝᵢ = [Aᵢ, 1]ᵀEᵢ materialized and their squared norms taken (docs/design.md step 3).
	if err := d.Zero(b.norm2, p*8); err != nil {
		return err
	}
	for _, l := range b.layers {
		if cv := l.conv; cv != nil {
			if err := firstErr(d.ExampleGrads(cv.g, cv.a, l.e, p, l.rows, l.in, l.out), d.RowSqNorms(b.asq, cv.g, p, (l.in+1)*l.out),
				d.AddF64(b.norm2, b.asq, p)); err != nil {
				return err
			}
			continue
		}
		if err := firstErr(d.RowSqNorms(b.asq, l.a, p, l.in), d.RowSqNorms(b.esq, l.e, p, l.out), d.GhostAccum(b.norm2, b.asq, b.esq, p, true)); err != nil {
			return err
		}
	}
	// A normalization's per-example gradients of (γ, β), materialized in float64 from the
	// error at its output and x̂ (docs/models.md, the normalization rule).
	for _, n := range b.norms {
		rows, c := n.out.Positions(), n.out.C
		if err := firstErr(d.NormGrads(n.mat, n.dy, n.xh, p, rows, c), d.RowSqNormsAddF64(b.norm2, n.mat, p, 2*c)); err != nil {
			return err
		}
	}
	// An embedding's per-example table gradients: its error rows grouped by id (the sparse
	// rule), never the table.
	for _, n := range b.embeds {
		if err := d.EmbedNorms(b.norm2, n.x, n.dy, p, n.in.C, n.vocab, n.out.C); err != nil {
			return err
		}
	}
	if err := d.ClipCoefs(b.coef, b.norm2, b.mask, clip, p); err != nil {
		return err
	}
	// Clipped sums, in float64 as on the CPU (docs/design.md step 5): the first physical batch
	// sets acc, later ones add. A convolution adds cᵢ·Ĝᵢ of the very gradients whose norms
	// were taken; a dense layer adds [Aᵢ, 1]ᵀ·cᵢEᵢ of the very rows its ghost norm read, by
	// one float64 GEMM of the exactly widened float32 operands.
	for _, l := range b.layers {
		if cv := l.conv; cv != nil {
			if err := d.CoefSum(l.acc, l.gw, l.gb, cv.g, b.coef, p, l.in, l.out, first); err != nil {
				return err
			}
			continue
		}
		if err := d.ClippedSumWide(l.acc, l.a, l.e, p, l.in, l.out, b.coef, b.scratch, b.wideA, b.wideS, first); err != nil {
			return err
		}
	}
	for _, n := range b.norms {
		if err := d.CoefSumF64(n.acc, n.mat, b.coef, p, 2*n.out.C, first); err != nil {
			return err
		}
	}
	for _, n := range b.embeds {
		if err := d.EmbedCoefSum(n.acc, n.x, n.dy, b.coef, p, n.in.C, n.vocab, n.out.C, first); err != nil {
			return err
		}
	}
	return nil
}

// gemmForward sets l.z = A·W for the rows×in activation a (bias not added): in float32, or
// with bf16 from a and W rounded to bfloat16, accumulated in float32 (the weights' bf16 copy
// kept for the backward pass).
func (b *cudaBackend) gemmForward(l *cudaLayer, a cuda.Buffer, rows int) error {
	d := b.d
	if !b.bf16 {
		return d.Sgemm(false, false, rows, l.out, l.in, 1, a, l.in, l.w, l.out, 0, l.z, l.out)
	}
	return firstErr(d.ToBF16(l.wh, l.w, l.in*l.out), d.ToBF16(b.half, a, rows*l.in),
		d.GemmBF16(false, false, rows, l.out, l.in, 1, b.half, l.in, l.wh, l.out, 0, l.z, l.out))
}

// gemmBackward sets dst = E·Wᵀ, the error at layer l's input (rows·positions × in), from its
// error l.e: in float32, or with bf16 from E and the forward pass's bf16 weights.
func (b *cudaBackend) gemmBackward(l *cudaLayer, dst cuda.Buffer) error {
	d, rows := b.d, b.phys*l.rows
	if !b.bf16 {
		return d.Sgemm(false, true, rows, l.in, l.out, 1, l.e, l.out, l.w, l.out, 0, dst, l.in)
	}
	return firstErr(d.ToBF16(b.half, l.e, rows*l.out), d.GemmBF16(false, true, rows, l.in, l.out, 1, b.half, l.out, l.wh, l.out, 0, dst, l.in))
}

// convNodes maps each convolution's GEMM index to its node, into m.
func (b *cudaBackend) convNodes(nodes []*cudaNode, m map[int]*cudaNode) map[int]*cudaNode {
	for _, n := range nodes {
		if n.kind == nodeGemm && n.win.K > 0 {
			m[n.gemm] = n
		}
		if n.kind == nodeResidual {
			b.convNodes(n.body, m)
		}
	}
	return m
}

// philox is key as the device's noise kernels take it.
func philox(key kernels.NoiseKey) cuda.PhiloxKey {
	return cuda.PhiloxKey(key)
}

// sums are the float64 sums of the layers' parameters, in nn.Params order (weights, bias).
func (b *cudaBackend) sums() (bufs []cuda.Buffer, lens []int) {
	for _, l := range b.layers {
		nw := l.in * l.out
		bufs = append(bufs, l.acc.Sub(0, nw*8), l.acc.Sub(nw*8, l.out*8))
		lens = append(lens, nw, l.out)
	}
	for _, o := range b.others {
		bufs = append(bufs, o.acc)
		lens = append(lens, o.n)
	}
	return bufs, lens
}

// addGaussian adds N(0, std²) noise to the float64 sums, parameter p from key with Tensor = p:
// one float64 FMA per value, the CPU's numbers bit for bit.
func (b *cudaBackend) addGaussian(std float64, key kernels.NoiseKey) error {
	bufs, lens := b.sums()
	for p, g := range bufs {
		k := key
		k.Tensor = uint32(p)
		if err := b.d.AddGaussianF64(g, lens[p], std, philox(k), 0); err != nil {
			return err
		}
	}
	return nil
}

// addBall adds one draw uniform in the ball of the given radius over all the float64 sums
// together (the CPU's draw bit for bit).
func (b *cudaBackend) addBall(radius float64, key kernels.NoiseKey) error {
	bufs, lens := b.sums()
	return b.d.AddBallF64(bufs, lens, radius, philox(key))
}

// addSecure is refused: the secure source draws on the CPU (CUDASupport keeps such runs off
// the device).
func (b *cudaBackend) addSecure(*kernels.SecureSource, float64) error {
	return errors.New("engine: cuda backend: secure noise is drawn on the CPU only")
}

// apply rounds the noisy float64 sums over the expected batch size to float32 (the CPU's
// float32(v·(1/expected)), bit for bit), checks them (ErrDiverged when one is not finite) and
// applies u with the optimizer kernels, in float32 as the CPU's float32 update.
func (b *cudaBackend) apply(expected float64, u update) error {
	d := b.d
	inv := 1 / expected
	if err := d.Zero(b.flag, 4); err != nil {
		return err
	}
	for _, l := range b.layers {
		if err := firstErr(d.RoundScale(l.gw, l.gb, l.acc, l.in*l.out, l.out, inv), d.FlagNonFinite(b.flag, l.gw, l.in*l.out),
			d.FlagNonFinite(b.flag, l.gb, l.out)); err != nil {
			return err
		}
	}
	for _, o := range b.others {
		if err := firstErr(d.RoundScale(o.g, o.g, o.acc, o.n, 0, inv), d.FlagNonFinite(b.flag, o.g, o.n)); err != nil {
			return err
		}
	}
	if err := cuda.Download(d, b.hFlag, b.flag); err != nil {
		return err
	}
	if b.hFlag[0] != 0 {
		return fmt.Errorf("engine: %w: non-finite clipped gradient on the device", ErrDiverged)
	}
	lr, wd := float32(u.lr), float32(u.wd)
	type tensorBufs struct {
		w, g, m, v cuda.Buffer
		n          int
	}
	var all []tensorBufs
	for _, l := range b.layers {
		all = append(all, tensorBufs{l.w, l.gw, l.mw, l.vw, l.in * l.out}, tensorBufs{l.b, l.gb, l.mb, l.vb, l.out})
	}
	for _, o := range b.others {
		all = append(all, tensorBufs{o.w, o.g, o.m, o.v, o.n})
	}
	for _, q := range all {
		var err error
		switch u.kind {
		case updateSGD:
			err = d.SGDUpdate(q.w, cuda.Buffer{}, q.g, q.n, lr, wd, 0)
		case updateMomentum:
			err = d.SGDUpdate(q.w, q.m, q.g, q.n, lr, wd, float32(u.mu))
		case updateAdam:
			err = d.AdamUpdate(q.w, q.m, q.v, q.g, q.n, u.beta1, u.beta2, lr, float32(u.eps), wd)
		default:
			err = fmt.Errorf("engine: cuda backend: update kind %d", u.kind)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// paramsFinite reports whether every parameter on the device is finite, by the nonfinite
// kernel and one 4-byte download.
func (b *cudaBackend) paramsFinite() (bool, error) {
	d := b.d
	if err := d.Zero(b.flag, 4); err != nil {
		return false, err
	}
	for _, l := range b.layers {
		if err := firstErr(d.FlagNonFinite(b.flag, l.w, l.in*l.out), d.FlagNonFinite(b.flag, l.b, l.out)); err != nil {
			return false, err
		}
	}
	for _, o := range b.others {
		if err := d.FlagNonFinite(b.flag, o.w, o.n); err != nil {
			return false, err
		}
	}
	if err := cuda.Download(d, b.hFlag, b.flag); err != nil {
		return false, err
	}
	return b.hFlag[0] == 0, nil
}

// gradients downloads the last step's gradient (the noisy clipped sum over the expected batch
// size), one slice per parameter tensor in nn.Params order.
func (b *cudaBackend) gradients() ([][]float32, error) {
	var out [][]float32
	for _, l := range b.layers {
		w, g := make([]float32, l.in*l.out), make([]float32, l.out)
		if err := firstErr(cuda.Download(b.d, w, l.gw), cuda.Download(b.d, g, l.gb)); err != nil {
			return nil, err
		}
		out = append(out, w, g)
	}
	for _, o := range b.others {
		g := make([]float32, o.n)
		if err := cuda.Download(b.d, g, o.g); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// close frees the backend's device memory (the device stays open).
func (b *cudaBackend) close() {
	for _, buf := range b.owned {
		_ = b.d.Free(buf)
	}
	b.owned = nil
}
