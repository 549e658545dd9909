package cuda

import (
	"fmt"
	"math"
)

// PhiloxKey names one stream of the counter-based Philox generator that the noise kernels draw
// from (dpsgd.cu): the same fields, in the same roles, as the CPU kernels' NoiseKey, which the
// engine passes field by field so that the device draws the CPU's numbers.
type PhiloxKey struct {
	Seed, Step uint64
	Tensor     uint32
}

// Limits of the noise kernels (dpsgd.cu), equal to the CPU kernels' (kernels/cuda's tests
// check it): the length of one stream, the largest ball radius, and the tensor id that keys
// the ball's radius draw.
const (
	MaxStreamLen     = 1 << 33
	MaxBallRadius    = 1e270
	BallRadiusTensor = ^uint32(0)
)

// Launch shapes of the kernels (dpsgd.cu): row kernels take one block of rowThreads threads
// per row; the others are grid-stride loops over blocks of blockThreads threads.
const (
	rowThreads   = 128
	blockThreads = 256
	maxGrid      = 1 << 16
)

// Grid is the launch shape of a grid-stride kernel over n elements.
func Grid(n int64) Dim {
	g := (n + blockThreads - 1) / blockThreads
	return Dim{Grid: uint32(min(max(g, 1), maxGrid)), Block: blockThreads}
}

// fits checks that b holds elems elements of size bytes (the zero Buffer fits nothing but 0).
func fits(name string, b Buffer, elems, size int) error {
	if elems < 0 {
		return fmt.Errorf("cuda: %s: negative length %d", name, elems)
	}
	if elems*size > b.bytes {
		return fmt.Errorf("cuda: %s holds %d bytes, need %d (%d elements)", name, b.bytes, elems*size, elems)
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// RowSqNorms sets dst[i] = Σⱼ a[i·cols+j]² (float64) for the rows×cols float32 matrix a, as
// kernels.RowSqNorms (summed in double, in a tree order).
func (d *Device) RowSqNorms(dst, a Buffer, rows, cols int) error {
	if err := firstErr(fits("RowSqNorms dst", dst, rows, 8), fits("RowSqNorms a", a, rows*cols, 4)); err != nil {
		return err
	}
	if rows == 0 {
		return nil
	}
	return d.Launch("row_sqnorm_f32", Dim{Grid: uint32(rows), Block: rowThreads}, dst, a, int32(rows), int32(cols))
}

// GhostAccum sets norm2[i] += (asq[i] + β)·esq[i], β = 1 with a bias (kernels.GhostAccum).
func (d *Device) GhostAccum(norm2, asq, esq Buffer, n int, hasBias bool) error {
	if err := firstErr(fits("GhostAccum norm2", norm2, n, 8), fits("GhostAccum asq", asq, n, 8), fits("GhostAccum esq", esq, n, 8)); err != nil {
		return err
	}
	beta := 0.0
	if hasBias {
		beta = 1
	}
	return d.Launch("ghost_accum", Grid(int64(n)), norm2, asq, esq, int32(n), beta)
}

// ClipCoefs sets coef[i] = mask[i]·min(1, clip/√norm2[i]), 0 where norm2[i] is NaN, ±Inf or
// negative (kernels.ClipCoefs); the zero Buffer as mask means all ones. clip must be > 0.
func (d *Device) ClipCoefs(coef, norm2, mask Buffer, clip float64, n int) error {
	if !(clip > 0) {
		return fmt.Errorf("cuda: ClipCoefs clip %v: want > 0 or +Inf", clip)
	}
	if err := firstErr(fits("ClipCoefs coef", coef, n, 8), fits("ClipCoefs norm2", norm2, n, 8)); err != nil {
		return err
	}
	if mask.ptr != 0 {
		if err := fits("ClipCoefs mask", mask, n, 8); err != nil {
			return err
		}
	}
	return d.Launch("clip_coef", Grid(int64(n)), coef, norm2, mask, clip, int32(n))
}

// ScaleRows sets dst row i = c[i]·src row i as kernels.ClipScaleRow forms it, bit for bit:
// exactly 0 where c[i] = 0, a copy where c[i] = 1, float32(c[i])·src rounded to nearest where
// float32(c[i]) and the product are normal, else the exact product rounded toward zero (a
// subnormal float32(c) can be twice c). dst may be src.
func (d *Device) ScaleRows(dst, src Buffer, rows, cols int, c Buffer) error {
	if err := firstErr(fits("ScaleRows dst", dst, rows*cols, 4), fits("ScaleRows src", src, rows*cols, 4), fits("ScaleRows c", c, rows, 8)); err != nil {
		return err
	}
	return d.Launch("scale_rows_f32", Grid(int64(rows*cols)), dst, src, int32(rows), int32(cols), c)
}

// ClippedSumWide computes one dense layer's clipped sums in float64, as kernels.ClippedSumWide
// does on the CPU: scratch = diag(c)·E in float32 (ScaleRows, the CPU's scaled error rows bit
// for bit), both A (rows with c = 0 zeroed: a dropped row may hold NaN) and scratch widened
// exactly to float64 (wideA b×(din+1), its last column 1, and wideS b×h), then one cuBLAS
// DGEMM acc = [A, 1]ᵀ·diag(c)·E (+ acc unless first): the weights din×h then the bias h, the
// layout of CoefSum's accumulator. Every product of two float32 values is exact in float64,
// so acc is the exact sum of the per-example clipped gradients up to float64 rounding of the
// sum (γ_b·Σ|terms|, γ_b = b·2⁻⁵³/(1 − b·2⁻⁵³)): the CPU's sum within that bound.
func (d *Device) ClippedSumWide(acc, a, e Buffer, b, din, h int, c, scratch, wideA, wideS Buffer, first bool) error {
	if err := firstErr(fits("ClippedSumWide acc", acc, (din+1)*h, 8), fits("ClippedSumWide a", a, b*din, 4), fits("ClippedSumWide e", e, b*h, 4),
		fits("ClippedSumWide c", c, b, 8), fits("ClippedSumWide scratch", scratch, b*h, 4), fits("ClippedSumWide wideA", wideA, b*(din+1), 8),
		fits("ClippedSumWide wideS", wideS, b*h, 8)); err != nil {
		return err
	}
	if b == 0 {
		if first {
			return d.Zero(acc, (din+1)*h*8)
		}
		return nil
	}
	if err := firstErr(d.ScaleRows(scratch, e, b, h, c), d.WidenRows(wideA, a, b, din, c, true), d.WidenRows(wideS, scratch, b, h, Buffer{}, false)); err != nil {
		return err
	}
	beta := 1.0
	if first {
		beta = 0
	}
	return d.Dgemm(true, false, din+1, h, b, 1, wideA, din+1, wideS, h, beta, acc, h)
}

// WidenRows sets the float64 out, rows × (cols + 1 with ones), to the float32 a (rows×cols)
// widened exactly, rows with c[i] = 0 zeroed (c the zero Buffer: none), and with ones a last
// column of 1.
func (d *Device) WidenRows(out, a Buffer, rows, cols int, c Buffer, ones bool) error {
	w, o := cols, int32(0)
	if ones {
		w, o = cols+1, 1
	}
	if err := firstErr(fits("WidenRows out", out, rows*w, 8), fits("WidenRows a", a, rows*cols, 4)); err != nil {
		return err
	}
	if c.ptr != 0 {
		if err := fits("WidenRows c", c, rows, 8); err != nil {
			return err
		}
	}
	return d.Launch("widen_rows_f32", Grid(int64(rows*w)), out, a, int32(rows), int32(cols), c, o)
}

// RoundScale sets the float32 w[j] = float32(acc[j]·inv) for j < nw and bias[j − nw] for
// nw ≤ j < nw + nb: the step's gradient from its noisy float64 sums, as the CPU rounds it.
func (d *Device) RoundScale(w, bias, acc Buffer, nw, nb int, inv float64) error {
	if err := firstErr(fits("RoundScale w", w, nw, 4), fits("RoundScale bias", bias, nb, 4), fits("RoundScale acc", acc, nw+nb, 8)); err != nil {
		return err
	}
	return d.Launch("round_scale_f64", Grid(int64(nw+nb)), w, bias, acc, int32(nw+nb), int32(nw), inv)
}

// ToBF16 sets the bfloat16 out[k] (2 bytes each) to the float32 x[k] rounded to nearest, ties
// to even (NaN stays NaN), k < n: GemmBF16's operands.
func (d *Device) ToBF16(out, x Buffer, n int) error {
	if err := firstErr(fits("ToBF16 out", out, n, 2), fits("ToBF16 x", x, n, 4)); err != nil {
		return err
	}
	return d.Launch("to_bf16", Grid(int64(n)), out, x, int64(n))
}

func checkStream(n int, offset uint64) error {
	if offset > MaxStreamLen || uint64(n) > MaxStreamLen-offset {
		return fmt.Errorf("cuda: noise window [%d, %d) exceeds MaxStreamLen = 2³³", offset, offset+uint64(n))
	}
	return nil
}

// AddGaussian adds std·z_{offset+k} to the float32 g[k], k < n, from the stream key: the same
// numbers as kernels.AddGaussianAt (one float64 FMA, then the rounding to float32). std must
// be finite.
func (d *Device) AddGaussian(g Buffer, n int, std float64, key PhiloxKey, offset uint64) error {
	if math.IsNaN(std) || math.IsInf(std, 0) {
		return fmt.Errorf("cuda: AddGaussian std %v: want a finite value", std)
	}
	return d.gaussian(g, n, std, Buffer{}, key, offset, false)
}

// FillGaussian sets the float32 g[k] = z_{offset+k}, k < n (kernels.FillGaussianAt).
func (d *Device) FillGaussian(g Buffer, n int, key PhiloxKey, offset uint64) error {
	return d.gaussian(g, n, 0, Buffer{}, key, offset, true)
}

// AddGaussianF64 adds std·z_{offset+k} to the float64 g[k], k < n, from the stream key: one
// FMA each, the very numbers of kernels.AddGaussianAt[float64] (the step's noise on its
// float64 sums). std must be finite.
func (d *Device) AddGaussianF64(g Buffer, n int, std float64, key PhiloxKey, offset uint64) error {
	if math.IsNaN(std) || math.IsInf(std, 0) {
		return fmt.Errorf("cuda: AddGaussianF64 std %v: want a finite value", std)
	}
	return d.gaussianOf(g, 8, n, std, Buffer{}, key, offset, false)
}

func (d *Device) gaussian(g Buffer, n int, std float64, stdp Buffer, key PhiloxKey, offset uint64, fill bool) error {
	return d.gaussianOf(g, 4, n, std, stdp, key, offset, fill)
}

// gaussianOf launches gaussian_f32 (size 4) or gaussian_f64 (size 8) on g.
func (d *Device) gaussianOf(g Buffer, size, n int, std float64, stdp Buffer, key PhiloxKey, offset uint64, fill bool) error {
	if err := firstErr(fits("AddGaussian g", g, n, size), checkStream(n, offset)); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	blocks := int64((offset+uint64(n)+1)>>1 - offset>>1)
	f := int32(0)
	if fill {
		f = 1
	}
	name := "gaussian_f32"
	if size == 8 {
		name = "gaussian_f64"
	}
	return d.Launch(name, Grid(blocks), g, int64(n), std, stdp, key.Seed, key.Step, key.Tensor, offset, f)
}

// AddLaplace adds scale·x_k to the float32 g[k], k < n, x the unit Laplace stream of key
// (kernels.AddLaplace). scale must be finite and ≥ 0.
func (d *Device) AddLaplace(g Buffer, n int, scale float64, key PhiloxKey) error {
	if !(scale >= 0) || math.IsInf(scale, 0) {
		return fmt.Errorf("cuda: AddLaplace scale %v: want a finite value ≥ 0", scale)
	}
	if err := firstErr(fits("AddLaplace g", g, n, 4), checkStream(n, 0)); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return d.Launch("laplace_f32", Grid(int64((n+1)/2)), g, int64(n), scale, key.Seed, key.Step, key.Tensor, uint64(0))
}

// AddBall adds to the float32 tensors gs (lengths lens), together one vector of dimension
// d = Σ lens, one draw uniform in the d-ball of the given radius, exactly as kernels.AddBall
// keys and sums it (the ‖g‖² partial sums, their order and the scale are computed on the
// device; nothing goes back to the host).
func (d *Device) AddBall(gs []Buffer, lens []int, radius float64, key PhiloxKey) error {
	return d.addBall(gs, 4, lens, radius, key)
}

// AddBallF64 is AddBall on float64 tensors (the step's float64 sums): the CPU's draw
// (kernels.AddBall[float64]) bit for bit.
func (d *Device) AddBallF64(gs []Buffer, lens []int, radius float64, key PhiloxKey) error {
	return d.addBall(gs, 8, lens, radius, key)
}

func (d *Device) addBall(gs []Buffer, size int, lens []int, radius float64, key PhiloxKey) error {
	if len(gs) != len(lens) {
		return fmt.Errorf("cuda: AddBall: %d tensors, %d lengths", len(gs), len(lens))
	}
	if !(radius >= 0 && radius <= MaxBallRadius) {
		return fmt.Errorf("cuda: AddBall radius %v: want a value in [0, %g]", radius, MaxBallRadius)
	}
	if uint64(key.Tensor)+uint64(len(gs)) > uint64(BallRadiusTensor) {
		return fmt.Errorf("cuda: AddBall tensor ids %d…%d reach BallRadiusTensor", key.Tensor, uint64(key.Tensor)+uint64(len(gs))-1)
	}
	total, chunks := 0, 0
	for p, n := range lens {
		if err := firstErr(fits(fmt.Sprintf("AddBall tensor %d", p), gs[p], n, size), checkStream(n, 0)); err != nil {
			return err
		}
		total += n
		chunks += (n + 4095) / 4096
	}
	if total == 0 || radius == 0 {
		return nil
	}
	lanes, err := d.Alloc(4 * chunks * 8)
	if err != nil {
		return err
	}
	defer d.Free(lanes)
	scale, err := d.Alloc(8)
	if err != nil {
		return err
	}
	defer d.Free(scale)
	off := 0
	for p, n := range lens {
		if n == 0 {
			continue
		}
		c := (n + 4095) / 4096
		sub := Buffer{ptr: lanes.ptr + uint64(off*4*8), bytes: c * 4 * 8}
		if err := d.Launch("ball_lanes", Grid(int64(4*c)), sub, int64(n), key.Seed, key.Step, key.Tensor+uint32(p)); err != nil {
			return err
		}
		off += c
	}
	if err := d.Launch("ball_scale", Dim{Grid: 1, Block: 1}, scale, lanes, int64(chunks), float64(total), radius, key.Seed, key.Step, key.Tensor); err != nil {
		return err
	}
	for p, n := range lens {
		if n == 0 {
			continue
		}
		k := PhiloxKey{Seed: key.Seed, Step: key.Step, Tensor: key.Tensor + uint32(p)}
		if err := d.gaussianOf(gs[p], size, n, 0, scale, k, 0, false); err != nil {
			return err
		}
	}
	return nil
}

// PadMask sets mask[i] = 1 for i < n and 0 for n ≤ i < total (float64): the mask of a
// fixed-shape batch holding the n examples a Poisson or allocation sampler drew.
func (d *Device) PadMask(mask Buffer, n, total int) error {
	if n < 0 || n > total {
		return fmt.Errorf("cuda: PadMask: %d examples in a batch of %d", n, total)
	}
	if err := fits("PadMask mask", mask, total, 8); err != nil {
		return err
	}
	return d.Launch("pad_mask", Grid(int64(total)), mask, int32(n), int32(total))
}

// Activation codes of the layer kernels.
const (
	actReLU int32 = 0
	actTanh int32 = 1
)

// Activate sets out[k] = act(z[k]) (float32), act ReLU or tanh.
func (d *Device) Activate(out, z Buffer, n int, tanh bool) error {
	if err := firstErr(fits("Activate out", out, n, 4), fits("Activate z", z, n, 4)); err != nil {
		return err
	}
	a := actReLU
	if tanh {
		a = actTanh
	}
	return d.Launch("activate_f32", Grid(int64(n)), out, z, int64(n), a)
}

// ActivateBackward multiplies e[k] by act'(z[k]): 1{z > 0} for ReLU, 1 − h² for tanh, where
// h = tanh(z) is the layer's output.
func (d *Device) ActivateBackward(e, z, h Buffer, n int, tanh bool) error {
	if err := firstErr(fits("ActivateBackward e", e, n, 4), fits("ActivateBackward z", z, n, 4), fits("ActivateBackward h", h, n, 4)); err != nil {
		return err
	}
	a := actReLU
	if tanh {
		a = actTanh
	}
	return d.Launch("activate_bwd_f32", Grid(int64(n)), e, z, h, int64(n), a)
}

// BiasAdd adds b (cols) to every row of the rows×cols z.
func (d *Device) BiasAdd(z, b Buffer, rows, cols int) error {
	if err := firstErr(fits("BiasAdd z", z, rows*cols, 4), fits("BiasAdd b", b, cols, 4)); err != nil {
		return err
	}
	return d.Launch("bias_add_f32", Grid(int64(rows*cols)), z, b, int32(rows), int32(cols))
}

// SoftmaxXent computes, for logits z and targets y (rows×k float32), the errors of the summed
// cross-entropy e = softmax(z)·Σy − y, each row's loss (float64) and whether its argmax is
// right (int32).
func (d *Device) SoftmaxXent(e, loss, correct, z, y Buffer, rows, k int) error {
	if err := firstErr(fits("SoftmaxXent e", e, rows*k, 4), fits("SoftmaxXent loss", loss, rows, 8), fits("SoftmaxXent correct", correct, rows, 4),
		fits("SoftmaxXent z", z, rows*k, 4), fits("SoftmaxXent y", y, rows*k, 4)); err != nil {
		return err
	}
	if rows == 0 {
		return nil
	}
	return d.Launch("softmax_xent_f32", Dim{Grid: uint32(rows), Block: rowThreads}, e, loss, correct, z, y, int32(rows), int32(k))
}

// GatherBatch fills the rows×d float32 batch x and its rows×k one-hot targets y from the
// device's training set (X: n×d float32, labels: n int32) at the rows idx (int32); a row whose
// mask (float64) is 0 is a padding row: x and y zero.
func (d *Device) GatherBatch(x, y, X, labels, idx, mask Buffer, rows, cols, k int) error {
	if err := firstErr(fits("GatherBatch x", x, rows*cols, 4), fits("GatherBatch y", y, rows*k, 4), fits("GatherBatch idx", idx, rows, 4),
		fits("GatherBatch mask", mask, rows, 8)); err != nil {
		return err
	}
	return d.Launch("gather_batch_f32", Grid(int64(rows*max(cols, k))), x, y, X, labels, idx, mask, int32(rows), int32(cols), int32(k))
}

// FlagNonFinite sets the int32 flag[0] to 1 when one of the float32 g[k], k < n, is NaN or
// ±Inf; it never clears it (the caller zeroes the flag first).
func (d *Device) FlagNonFinite(flag, g Buffer, n int) error {
	if err := firstErr(fits("FlagNonFinite flag", flag, 1, 4), fits("FlagNonFinite g", g, n, 4)); err != nil {
		return err
	}
	return d.Launch("nonfinite_f32", Grid(int64(n)), flag, g, int64(n))
}

// SGDUpdate applies one step of SGD to the float32 w[k], k < n, with gradient g: with m the
// zero Buffer, w ← w − lr·(g + wd·w); with a momentum buffer m, m ← μ·m + g + wd·w and
// w ← w − lr·m (heavy ball, PyTorch's convention).
func (d *Device) SGDUpdate(w, m, g Buffer, n int, lr, wd, mu float32) error {
	if err := firstErr(fits("SGDUpdate w", w, n, 4), fits("SGDUpdate g", g, n, 4)); err != nil {
		return err
	}
	useM := int32(0)
	if m.ptr != 0 {
		if err := fits("SGDUpdate m", m, n, 4); err != nil {
			return err
		}
		useM = 1
	}
	return d.Launch("sgd_f32", Grid(int64(n)), w, m, g, int64(n), lr, wd, mu, useM)
}

// AdamUpdate applies one step of Adam to the float32 w[k], k < n, with gradient g and moments
// m, v: g′ = g + wd·w, m ← β₁m + (1−β₁)g′, v ← β₂v + (1−β₂)g′², w ← w − step·m/(√v + eps), where
// step is the bias-corrected rate the caller computes. The kernel computes in float32 with
// β and 1−β each rounded from float64, as the CPU's float32 update does.
func (d *Device) AdamUpdate(w, m, v, g Buffer, n int, beta1, beta2 float64, step, eps, wd float32) error {
	if err := firstErr(fits("AdamUpdate w", w, n, 4), fits("AdamUpdate m", m, n, 4), fits("AdamUpdate v", v, n, 4), fits("AdamUpdate g", g, n, 4)); err != nil {
		return err
	}
	return d.Launch("adam_f32", Grid(int64(n)), w, m, v, g, int64(n), float32(beta1), float32(1-beta1), float32(beta2), float32(1-beta2), step, eps, wd)
}

// Window is the geometry of a sliding-window op on b inputs of H×W positions with C channels:
// K×K windows at stride S, with Pad zeros on every side (pooling takes none). It has
// OH = (H + 2·Pad − K)/S + 1 by OW output positions.
type Window struct {
	C, H, W int
	K, S    int
	Pad     int
}

// Out returns the output positions OH, OW.
func (w Window) Out() (oh, ow int) {
	return (w.H+2*w.Pad-w.K)/w.S + 1, (w.W+2*w.Pad-w.K)/w.S + 1
}

// check refuses sizes below 1 (pad below 0) and sizes beyond the kernels' int32 arguments, and,
// with fit, a window larger than its input: pooling reads every position of its window (the
// patch kernels read zeros outside the input instead, as engine/nn's do).
func (w Window) check(name string, b int, fit bool) error {
	if w.C < 1 || w.H < 1 || w.W < 1 || w.K < 1 || w.S < 1 || w.Pad < 0 || b < 0 {
		return fmt.Errorf("cuda: %s: window %+v on %d inputs: want sizes ≥ 1 and pad ≥ 0", name, w, b)
	}
	if fit && (w.H+2*w.Pad < w.K || w.W+2*w.Pad < w.K) {
		return fmt.Errorf("cuda: %s: a %d×%d window does not fit a %d×%d input with pad %d", name, w.K, w.K, w.H, w.W, w.Pad)
	}
	oh, ow := w.Out()
	if oh < 1 || ow < 1 || int64(b)*int64(max(w.H*w.W, oh*ow))*int64(w.C*w.K*w.K) > math.MaxInt32 {
		return fmt.Errorf("cuda: %s: %d inputs of window %+v: no output position, or beyond the kernels' int32 sizes", name, b, w)
	}
	return nil
}

// args are the kernels' geometry arguments after the buffers: b, c, h, w, k, s, [pad,] oh, ow.
func (w Window) args(b int, pad bool) []any {
	oh, ow := w.Out()
	a := []any{int32(b), int32(w.C), int32(w.H), int32(w.W), int32(w.K), int32(w.S)}
	if pad {
		a = append(a, int32(w.Pad))
	}
	return append(a, int32(oh), int32(ow))
}

// Im2Col writes the patch matrix of the b inputs x into out, (b·OH·OW) × (K·K·C), rows example
// by example, then output row, then column, zero outside the input. With chw, each input is a
// C×H×W image (a dataset row) and the columns are ordered (channel, kernel row, kernel column),
// as the first convolution of engine/nn; otherwise the input is in the row layout, (b·H·W)×C,
// and the columns are ordered (kernel row, kernel column, channel), as its later ones.
func (d *Device) Im2Col(out, x Buffer, b int, w Window, chw bool) error {
	if err := w.check("Im2Col", b, false); err != nil {
		return err
	}
	oh, ow := w.Out()
	n := b * oh * ow * w.K * w.K * w.C
	if err := firstErr(fits("Im2Col out", out, n, 4), fits("Im2Col x", x, b*w.C*w.H*w.W, 4)); err != nil {
		return err
	}
	f := int32(0)
	if chw {
		f = 1
	}
	return d.Launch("im2col_f32", Grid(int64(n)), append(append([]any{out, x}, w.args(b, true)...), f)...)
}

// Col2Im sets dx, (b·H·W)×C in the row layout, to the gradient of Im2Col (row layout) given the
// patch matrix's gradient dp: each input value's patch entries summed, in the order of the
// output positions that read it (engine/nn's, bit for bit).
func (d *Device) Col2Im(dx, dp Buffer, b int, w Window) error {
	if err := w.check("Col2Im", b, false); err != nil {
		return err
	}
	oh, ow := w.Out()
	n := b * w.H * w.W * w.C
	if err := firstErr(fits("Col2Im dx", dx, n, 4), fits("Col2Im dp", dp, b*oh*ow*w.K*w.K*w.C, 4)); err != nil {
		return err
	}
	return d.Launch("col2im_f32", Grid(int64(n)), append([]any{dx, dp}, w.args(b, true)...)...)
}

// MaxPool writes the max pooling of x, (b·H·W)×C in the row layout, into out, (b·OH·OW)×C, and
// each maximum's position y·W + x in its input into idx (int32): the first maximum of its
// window in scan order, as engine/nn's. w.Pad must be 0.
func (d *Device) MaxPool(out, idx, x Buffer, b int, w Window) error {
	if err := w.check("MaxPool", b, true); err != nil {
		return err
	}
	if w.Pad != 0 {
		return fmt.Errorf("cuda: MaxPool: pad %d: pooling takes none", w.Pad)
	}
	oh, ow := w.Out()
	n := b * oh * ow * w.C
	if err := firstErr(fits("MaxPool out", out, n, 4), fits("MaxPool idx", idx, n, 4), fits("MaxPool x", x, b*w.H*w.W*w.C, 4)); err != nil {
		return err
	}
	return d.Launch("maxpool_f32", Grid(int64(n)), append([]any{out, idx, x}, w.args(b, false)...)...)
}

// MaxPoolBackward sets dx, (b·H·W)×C, to the gradient of MaxPool given dy, (b·OH·OW)×C, and its
// idx: each window's gradient routed to its maximum, the windows' terms added in scan order.
func (d *Device) MaxPoolBackward(dx, dy, idx Buffer, b int, w Window) error {
	if err := w.check("MaxPoolBackward", b, true); err != nil {
		return err
	}
	if w.Pad != 0 {
		return fmt.Errorf("cuda: MaxPoolBackward: pad %d: pooling takes none", w.Pad)
	}
	oh, ow := w.Out()
	n := b * w.H * w.W * w.C
	if err := firstErr(fits("MaxPoolBackward dx", dx, n, 4), fits("MaxPoolBackward dy", dy, b*oh*ow*w.C, 4), fits("MaxPoolBackward idx", idx, b*oh*ow*w.C, 4)); err != nil {
		return err
	}
	return d.Launch("maxpool_bwd_f32", Grid(int64(n)), append([]any{dx, dy, idx}, w.args(b, false)...)...)
}

// ExampleGrads materializes the per-example gradients of a GEMM layer Z = A·W + b with p rows
// per example, A (b·p)×din and E = ∂L/∂Z (b·p)×h: g[i] = Ĝᵢ = [Aᵢ, 1]ᵀ·Eᵢ, (din+1)·h floats at
// i·(din+1)·h, the weights din×h (one cublasSgemmStridedBatched over the examples) then the
// bias, Eᵢ's column sums in row order.
func (d *Device) ExampleGrads(g, a, e Buffer, b, p, din, h int) error {
	n := (din + 1) * h
	if b < 0 || p < 1 || din < 1 || h < 1 || int64(b)*int64(max(n, p*max(din, h))) > math.MaxInt32 {
		return fmt.Errorf("cuda: ExampleGrads: %d examples of %d rows, %d×%d weights: out of range", b, p, din, h)
	}
	if err := firstErr(fits("ExampleGrads g", g, b*n, 4), fits("ExampleGrads a", a, b*p*din, 4), fits("ExampleGrads e", e, b*p*h, 4)); err != nil {
		return err
	}
	if b == 0 {
		return nil
	}
	if err := d.SgemmStridedBatched(true, false, din, h, p, 1, a, din, p*din, e, h, p*h, 0, g, h, n, b); err != nil {
		return err
	}
	bias := Buffer{ptr: g.ptr + uint64(din*h*4), bytes: g.bytes - din*h*4}
	return d.Launch("example_col_sum_f32", Grid(int64(b*h)), bias, e, int32(b), int32(p), int32(h), int64(n))
}

// AddF64 sets dst[k] += src[k] for the float64 dst, src, k < n.
func (d *Device) AddF64(dst, src Buffer, n int) error {
	if err := firstErr(fits("AddF64 dst", dst, n, 8), fits("AddF64 src", src, n, 8)); err != nil {
		return err
	}
	return d.Launch("add_f64", Grid(int64(n)), dst, src, int32(n))
}

// CoefSum adds the clipped sum Σᵢ cᵢ·Ĝᵢ of b materialized per-example gradients g (ExampleGrads'
// layout, (din+1)·h each) to the float64 accumulator acc ((din+1)·h; set when first), each
// column in float64 and in example order, skipping the examples with cᵢ = 0 (whose gradient
// may hold NaN), and writes acc rounded to float32 into w (din×h) and bias (h).
func (d *Device) CoefSum(acc, w, bias, g, c Buffer, b, din, h int, first bool) error {
	n := (din + 1) * h
	if b < 0 || din < 1 || h < 1 || int64(b)*int64(n) > math.MaxInt32 {
		return fmt.Errorf("cuda: CoefSum: %d examples of %d×%d weights: out of range", b, din, h)
	}
	if err := firstErr(fits("CoefSum acc", acc, n, 8), fits("CoefSum w", w, din*h, 4), fits("CoefSum bias", bias, h, 4),
		fits("CoefSum g", g, b*n, 4), fits("CoefSum c", c, b, 8)); err != nil {
		return err
	}
	f := int32(0)
	if first {
		f = 1
	}
	return d.Launch("coef_sum_f32", Grid(int64(n)), acc, w, bias, g, c, int32(b), int32(n), int32(din*h), f)
}

// Pointwise functions of Point and PointBackward (engine/nn's pointOp).
const (
	PointGELU            = 0 // x·Φ(x), the exact GELU
	PointTemperedSigmoid = 1 // Scale·σ(Temp·x) − Offset
)

// PointFn is a pointwise function of the layer library: Fn PointGELU, or PointTemperedSigmoid
// with its scale, temperature and offset.
type PointFn struct {
	Fn                  int32
	Scale, Temp, Offset float64
}

func (f PointFn) check(name string) error {
	switch f.Fn {
	case PointGELU:
	case PointTemperedSigmoid:
		if !(f.Scale > 0 && f.Temp > 0) || math.IsInf(f.Scale, 0) || math.IsInf(f.Temp, 0) || math.IsNaN(f.Offset) || math.IsInf(f.Offset, 0) {
			return fmt.Errorf("cuda: %s: tempered sigmoid scale %v, temp %v, offset %v: want finite scale and temp > 0 and a finite offset", name, f.Scale, f.Temp, f.Offset)
		}
	default:
		return fmt.Errorf("cuda: %s: function %d: want PointGELU or PointTemperedSigmoid", name, f.Fn)
	}
	return nil
}

// Point sets out[k] = f(x[k]), k < n, computed in float64 from the float32 x[k] and rounded to
// float32, as engine/nn's pointOp does (GELU's erfc by the algorithm of Go's math.Erfc, the
// exponentials within an ulp or so of math.Exp). out may be x.
func (d *Device) Point(out, x Buffer, n int, f PointFn) error {
	if err := firstErr(f.check("Point"), fits("Point out", out, n, 4), fits("Point x", x, n, 4)); err != nil {
		return err
	}
	return d.Launch("point_f32", Grid(int64(n)), out, x, int64(n), f.Fn, f.Scale, f.Temp, f.Offset)
}

// PointBackward sets e[k] = e[k]·float32(f′(x[k])) in place, k < n: the error at f's output
// becomes the error at its input x.
func (d *Device) PointBackward(e, x Buffer, n int, f PointFn) error {
	if err := firstErr(f.check("PointBackward"), fits("PointBackward e", e, n, 4), fits("PointBackward x", x, n, 4)); err != nil {
		return err
	}
	return d.Launch("point_bwd_f32", Grid(int64(n)), e, x, int64(n), f.Fn, f.Scale, f.Temp, f.Offset)
}

// AvgPool writes the average pooling of x, (b·H·W)×C in the row layout, into out, (b·OH·OW)×C:
// each window summed in scan order, times 1/(K·K) (float32), as engine/nn's. w.Pad must be 0.
func (d *Device) AvgPool(out, x Buffer, b int, w Window) error {
	if err := w.check("AvgPool", b, true); err != nil {
		return err
	}
	if w.Pad != 0 {
		return fmt.Errorf("cuda: AvgPool: pad %d: pooling takes none", w.Pad)
	}
	oh, ow := w.Out()
	n := b * oh * ow * w.C
	if err := firstErr(fits("AvgPool out", out, n, 4), fits("AvgPool x", x, b*w.H*w.W*w.C, 4)); err != nil {
		return err
	}
	return d.Launch("avgpool_f32", Grid(int64(n)), append([]any{out, x}, w.args(b, false)...)...)
}

// AvgPoolBackward sets dx, (b·H·W)×C, to the gradient of AvgPool given dy, (b·OH·OW)×C: each
// position's dy·(1/(K·K)) terms added in scan order of the windows that hold it.
func (d *Device) AvgPoolBackward(dx, dy Buffer, b int, w Window) error {
	if err := w.check("AvgPoolBackward", b, true); err != nil {
		return err
	}
	if w.Pad != 0 {
		return fmt.Errorf("cuda: AvgPoolBackward: pad %d: pooling takes none", w.Pad)
	}
	oh, ow := w.Out()
	n := b * w.H * w.W * w.C
	if err := firstErr(fits("AvgPoolBackward dx", dx, n, 4), fits("AvgPoolBackward dy", dy, b*oh*ow*w.C, 4)); err != nil {
		return err
	}
	return d.Launch("avgpool_bwd_f32", Grid(int64(n)), append([]any{dx, dy}, w.args(b, false)...)...)
}

// AddF32 sets the float32 out[k] = a[k] + b[k], k < n (a residual block's sum); out may be a
// or b.
func (d *Device) AddF32(out, a, b Buffer, n int) error {
	if err := firstErr(fits("AddF32 out", out, n, 4), fits("AddF32 a", a, n, 4), fits("AddF32 b", b, n, 4)); err != nil {
		return err
	}
	return d.Launch("add_f32", Grid(int64(n)), out, a, b, int64(n))
}

// normCheck checks a normalization's geometry: b examples of p rows of c channels in groups.
func normCheck(name string, b, p, c, groups int) error {
	if b < 0 || p < 1 || c < 1 || groups < 1 || c%groups != 0 || int64(b)*int64(p)*int64(c) > math.MaxInt32 {
		return fmt.Errorf("cuda: %s: %d examples of %d×%d in %d groups: want groups dividing the channels, within int32", name, b, p, c, groups)
	}
	return nil
}

// Norm sets xh to the normalization of x, b examples of p rows × c channels ((b·p)×c float32,
// engine/nn's row layout; p = 1 for a flat input), each example's channel groups by their own
// mean and variance in float64: x̂ = (x − μ)/√(σ² + 1e-5), rounded to float32, as engine/nn's
// normOp.
func (d *Device) Norm(xh, x Buffer, b, p, c, groups int) error {
	if err := firstErr(normCheck("Norm", b, p, c, groups), fits("Norm xh", xh, b*p*c, 4), fits("Norm x", x, b*p*c, 4)); err != nil {
		return err
	}
	return d.Launch("norm_f32", Grid(int64(b*groups)), xh, x, Buffer{}, int32(b), int32(p), int32(c), int32(groups), int32(0))
}

// NormBackward sets dx to the gradient of Norm at x given gx = ∂L/∂x̂, as engine/nn's normOp
// gradient: (gx − mean(gx) − x̂·mean(gx⊙x̂))/√(σ² + 1e-5) over each group, in float64.
func (d *Device) NormBackward(dx, x, gx Buffer, b, p, c, groups int) error {
	if err := firstErr(normCheck("NormBackward", b, p, c, groups), fits("NormBackward dx", dx, b*p*c, 4), fits("NormBackward x", x, b*p*c, 4),
		fits("NormBackward gx", gx, b*p*c, 4)); err != nil {
		return err
	}
	return d.Launch("norm_f32", Grid(int64(b*groups)), dx, x, gx, int32(b), int32(p), int32(c), int32(groups), int32(1))
}

// Affine sets out = xh⊙γ + β on rows×c (each product rounded to float32, then the sum), or,
// with beta the zero Buffer, out = xh⊙γ (the error at x̂ from the error at the output).
func (d *Device) Affine(out, xh, gamma, beta Buffer, rows, c int) error {
	mode := int32(0)
	if beta.ptr == 0 {
		mode = 1
	} else if err := fits("Affine beta", beta, c, 4); err != nil {
		return err
	}
	if err := firstErr(fits("Affine out", out, rows*c, 4), fits("Affine xh", xh, rows*c, 4), fits("Affine gamma", gamma, c, 4)); err != nil {
		return err
	}
	return d.Launch("affine_f32", Grid(int64(rows*c)), out, xh, gamma, beta, int64(rows), int32(c), mode)
}

// NormGrads materializes a normalization's per-example gradients (engine/nn's normRule): for
// each of the b examples, 2c float64 values at g + i·2c, Σ e⊙x̂ (γ) then Σ e (β) over its p
// rows, from the float32 error e at the output and x̂.
func (d *Device) NormGrads(g, e, xh Buffer, b, p, c int) error {
	if err := firstErr(normCheck("NormGrads", b, p, c, 1), fits("NormGrads g", g, b*2*c, 8), fits("NormGrads e", e, b*p*c, 4), fits("NormGrads xh", xh, b*p*c, 4)); err != nil {
		return err
	}
	return d.Launch("norm_grads_f64", Grid(int64(b*c)), g, e, xh, int32(b), int32(p), int32(c))
}

// RowSqNormsAddF64 adds to out[i] the squared norm of row i of the rows×cols float64 a.
func (d *Device) RowSqNormsAddF64(out, a Buffer, rows, cols int) error {
	if err := firstErr(fits("RowSqNormsAddF64 out", out, rows, 8), fits("RowSqNormsAddF64 a", a, rows*cols, 8)); err != nil {
		return err
	}
	return d.Launch("row_sqnorm_add_f64", Grid(int64(rows)), out, a, int32(rows), int32(cols))
}

// CoefSumF64 is CoefSum on float64 per-example gradients g (b × n), without the float32 copy:
// acc (n float64; set when first, else added to) gets Σᵢ cᵢ·gᵢ over the examples with cᵢ ≠ 0
// in example order.
func (d *Device) CoefSumF64(acc, g, c Buffer, b, n int, first bool) error {
	if b < 0 || n < 1 || int64(b)*int64(n) > math.MaxInt32 {
		return fmt.Errorf("cuda: CoefSumF64: %d examples of %d values: out of range", b, n)
	}
	if err := firstErr(fits("CoefSumF64 acc", acc, n, 8), fits("CoefSumF64 g", g, b*n, 8), fits("CoefSumF64 c", c, b, 8)); err != nil {
		return err
	}
	f := int32(0)
	if first {
		f = 1
	}
	return d.Launch("coef_sum_f64", Grid(int64(n)), acc, g, c, int32(b), int32(n), f)
}

// embedCheck checks an embedding's geometry: b examples of l ids into a vocab×dim table.
func embedCheck(name string, b, l, vocab, dim int) error {
	if b < 0 || l < 1 || vocab < 1 || dim < 1 || int64(b)*int64(l)*int64(dim) > math.MaxInt32 || int64(vocab)*int64(dim) > math.MaxInt32 {
		return fmt.Errorf("cuda: %s: %d examples of %d ids into a %d×%d table: out of range", name, b, l, vocab, dim)
	}
	return nil
}

// Embed sets out ((b·l)×dim float32, engine/nn's row layout) to the table's rows (vocab×dim)
// of the b·l ids x (float32 values; one that is not an integer in [0, vocab) gives a zero row),
// as engine/nn's Embedding.
func (d *Device) Embed(out, x, table Buffer, b, l, vocab, dim int) error {
	if err := firstErr(embedCheck("Embed", b, l, vocab, dim), fits("Embed out", out, b*l*dim, 4), fits("Embed x", x, b*l, 4), fits("Embed table", table, vocab*dim, 4)); err != nil {
		return err
	}
	return d.Launch("embed_f32", Grid(int64(b*l*dim)), out, x, table, int32(b), int32(l), int32(vocab), int32(dim))
}

// EmbedNorms adds to norm2[i] the squared norm of example i's gradient of the table (the
// sparse rule): its error rows e ((b·l)×dim) summed by id in float64, squared.
func (d *Device) EmbedNorms(norm2, x, e Buffer, b, l, vocab, dim int) error {
	if err := firstErr(embedCheck("EmbedNorms", b, l, vocab, dim), fits("EmbedNorms norm2", norm2, b, 8), fits("EmbedNorms x", x, b*l, 4), fits("EmbedNorms e", e, b*l*dim, 4)); err != nil {
		return err
	}
	return d.Launch("embed_norm_f64", Grid(int64(b)), norm2, x, e, int32(b), int32(l), int32(vocab), int32(dim))
}

// EmbedCoefSum sets (first) or adds to acc (vocab×dim float64) the clipped sum of the table's
// gradients: for each example with cᵢ ≠ 0, cᵢ times each of its rows grouped by id (the row
// whose norm EmbedNorms took), in example order.
func (d *Device) EmbedCoefSum(acc, x, e, c Buffer, b, l, vocab, dim int, first bool) error {
	if err := firstErr(embedCheck("EmbedCoefSum", b, l, vocab, dim), fits("EmbedCoefSum acc", acc, vocab*dim, 8), fits("EmbedCoefSum x", x, b*l, 4),
		fits("EmbedCoefSum e", e, b*l*dim, 4), fits("EmbedCoefSum c", c, b, 8)); err != nil {
		return err
	}
	f := int32(0)
	if first {
		f = 1
	}
	return d.Launch("embed_coef_sum_f64", Grid(int64(vocab*dim)), acc, x, e, c, int32(b), int32(l), int32(vocab), int32(dim), f)
}
