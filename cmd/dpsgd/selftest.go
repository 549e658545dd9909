package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"time"

	"github.com/dpsgd/dpsgd/cuda"
	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/kernels"
	kcuda "github.com/dpsgd/dpsgd/kernels/cuda"
	"gorgonia.org/tensor"
)

const selftestHeader = `dpsgd selftest: say which PTX the device loaded (embedded, or --ptx FILE) and check every
CUDA kernel against the CPU backend on random inputs (dense and convolution layers, GELU and the tempered
sigmoid: float32 within 1e-5 relative; data movements, pooling, residual sums, group normalization and the embedding lookup bit for bit; noise: the CPU's stream bit for bit, then mean/std/kurtosis over
--draws normals), then benchmark the clip+noise part of a step (bytes counted, CUDA events) against the
device's copy bandwidth measured in the same run, noise
generation and the DP step against the non-private step on the device.

Usage: dpsgd selftest [flags]`

// selftestCheck is one kernel comparison.
type selftestCheck struct {
	Kernel string   `json:"kernel"`
	MaxErr *float64 `json:"max_rel_err"`
	Tol    float64  `json:"tolerance"`
	// Mismatches counts the values whose bits differ from the CPU's (noise checks only,
	// which must be bit-exact: ok only when it is 0).
	Mismatches *int `json:"mismatches,omitempty"`
	OK         bool `json:"ok"`
}

// selftestPTX says which kernel module the device loaded: its origin (the PTX embedded in
// the binary, or the file --ptx named) and what its header records (kernels/cuda, mkptx.sh).
type selftestPTX struct {
	Source       string `json:"source"`
	Compiler     string `json:"compiler"`
	SourceSHA256 string `json:"source_sha256"`
	// SourceMatches is whether the PTX was built from the dpsgd.cu this binary embeds.
	SourceMatches bool `json:"source_matches"`
	Kernels       int  `json:"kernels"`
}

type selftestResult struct {
	Device      string          `json:"device"`
	PTX         selftestPTX     `json:"ptx"`
	Checks      []selftestCheck `json:"checks"`
	Draws       int             `json:"draws"`
	Mean        *float64        `json:"noise_mean"`
	Std         *float64        `json:"noise_std"`
	Kurtosis    *float64        `json:"noise_kurtosis"`
	NoiseOK     bool            `json:"noise_ok"`
	ClipNoiseGB *float64        `json:"clip_noise_gb_per_s"`
	ClipNoiseMs *float64        `json:"clip_noise_ms"`
	NoiseGS     *float64        `json:"noise_gsamples_per_s"`
	// CopyGB is the device's copy bandwidth (cuMemcpyDtoD, bytes read plus written), measured
	// in the same run, and ClipNoiseOfCopy the clip+noise bandwidth as a fraction of it.
	CopyGB          *float64 `json:"copy_gb_per_s"`
	ClipNoiseOfCopy *float64 `json:"clip_noise_over_copy"`
	DPStepMs        *float64 `json:"dp_step_ms"`
	PlainStepMs     *float64 `json:"nonprivate_step_ms"`
	Ratio           *float64 `json:"dp_over_nonprivate"`
	Batch           int      `json:"batch"`
	OK              bool     `json:"ok"`
}

// cmdSelftest runs `dpsgd selftest`: exit 0 when every check passes, 1 when one fails, 2 for
// a usage error or no usable GPU.
func cmdSelftest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("selftest")
	draws, batch, reps, copyMiB := 1_000_000, 256, 5, 256
	asJSON, bench := false, true
	ptxFile := ""
	fs.Var(countFlag{&draws, 1000}, "draws", "normals drawn for the moment tests (default 1000000; 10^8 on a real GPU)")
	fs.Var(countFlag{&batch, 1}, "batch", "batch size of the benchmark (default 256)")
	fs.Var(countFlag{&reps, 1}, "reps", "repetitions of each timed benchmark (default 5)")
	fs.Var(countFlag{&copyMiB, 1}, "copy-mib", "MiB copied device to device to measure the copy bandwidth (default 256)")
	fs.BoolVar(&bench, "bench", true, "run the benchmark after the checks (--bench=false: the checks only)")
	fs.BoolVar(&asJSON, "json", false, "print one JSON object")
	fs.StringVar(&ptxFile, "ptx", "", "load the kernels from this PTX file (e.g. an nvcc build by make ptx) instead of the embedded one")
	if _, err := parseFlags(fs, args, stdout, selftestHeader); err != nil {
		return err // pflag.ErrHelp after --help: report exits 0
	}
	if draws > 1<<33 {
		return usagef("--draws %d: want at most 2^33", draws)
	}
	opts, ptx := cuda.Options{}, selftestPTX{Source: "embedded (kernels/cuda/dpsgd.ptx)"}
	text := kcuda.PTX()
	if ptxFile != "" {
		b, err := os.ReadFile(ptxFile)
		if err != nil {
			return usagef("--ptx: %v", err)
		}
		text, opts.PTX, ptx.Source = string(b), string(b), ptxFile
	}
	ptx.Compiler, ptx.SourceSHA256 = kcuda.HeaderOf(text, "compiler"), kcuda.HeaderOf(text, "source-sha256")
	ptx.SourceMatches = ptx.SourceSHA256 == kcuda.SourceSHA256Of(kcuda.Source())
	d, err := engine.OpenDevice(opts)
	if err != nil {
		return usagef("selftest needs a GPU: %v", err)
	}
	defer d.Close()
	ptx.Kernels = d.Info().Kernels
	res := selftestResult{Device: d.Info().String(), PTX: ptx, Draws: draws, Batch: batch}
	res.Checks, err = selftestKernels(d)
	if err != nil {
		return err
	}
	m, s, k, err := selftestMoments(ctx, d, draws)
	if err != nil {
		return err
	}
	res.Mean, res.Std, res.Kurtosis = num(m), num(s), num(k)
	// 5 standard errors: mean σ/√n, std ≈ σ/√(2n), kurtosis ≈ √(24/n).
	n := float64(draws)
	res.NoiseOK = math.Abs(m) < 5/math.Sqrt(n) && math.Abs(s-1) < 5/math.Sqrt(2*n) && math.Abs(k-3) < 5*math.Sqrt(24/n)
	res.OK = res.NoiseOK
	for _, c := range res.Checks {
		res.OK = res.OK && c.OK
	}
	if bench {
		if err := selftestBench(d, batch, reps, copyMiB, &res); err != nil {
			return err
		}
	}
	if asJSON {
		if err := printJSON(stdout, res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "device: %s\n", res.Device)
		fmt.Fprintf(stdout, "PTX: %s, %d kernels, built by %s from dpsgd.cu %.12s (this binary's source: %v)\n",
			res.PTX.Source, res.PTX.Kernels, res.PTX.Compiler, res.PTX.SourceSHA256, res.PTX.SourceMatches)
		for _, c := range res.Checks {
			verdict := map[bool]string{true: "ok", false: "FAIL"}[c.OK]
			if c.Mismatches != nil {
				fmt.Fprintf(stdout, "  %-22s max rel err %-10s bit-exact: %d values differ  %s\n", c.Kernel, selftestFmt(c.MaxErr), *c.Mismatches, verdict)
				continue
			}
			fmt.Fprintf(stdout, "  %-22s max rel err %-10s tol %g  %s\n", c.Kernel, selftestFmt(c.MaxErr), c.Tol, verdict)
		}
		fmt.Fprintf(stdout, "noise over %d draws: mean %s std %s kurtosis %s  %s\n", draws, selftestFmt(res.Mean), selftestFmt(res.Std), selftestFmt(res.Kurtosis), map[bool]string{true: "ok", false: "FAIL"}[res.NoiseOK])
		if bench {
			fmt.Fprintf(stdout, "clip+noise (batch %d, MLP 784-256-10): %s ms, %s GB/s (%s of the copy bandwidth, %s GB/s); noise %s G samples/s; DP step %s ms vs non-private %s ms (ratio %s)\n",
				batch, selftestFmt(res.ClipNoiseMs), selftestFmt(res.ClipNoiseGB), selftestFmt(res.ClipNoiseOfCopy), selftestFmt(res.CopyGB),
				selftestFmt(res.NoiseGS), selftestFmt(res.DPStepMs), selftestFmt(res.PlainStepMs), selftestFmt(res.Ratio))
		}
	}
	if !res.OK {
		return errors.New("selftest: some checks failed")
	}
	return nil
}

func selftestFmt(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.4g", *v)
}

// selftestMismatches counts the i with got[i] and want[i] not the same float32 bits.
func selftestMismatches(got, want []float32) int {
	n := 0
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			n++
		}
	}
	return n
}

// selftestMaxRel is max_i |g_i − w_i| / max(|w_i|, floor), the floor being 1e-2·max|w| so
// that sums that cancel are judged against the vector's scale.
func selftestMaxRel(got, want []float32) float64 {
	scale := 0.0
	for _, v := range want {
		scale = math.Max(scale, math.Abs(float64(v)))
	}
	worst := 0.0
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(g) != math.IsNaN(w) {
			return math.Inf(1)
		}
		if math.IsNaN(g) {
			continue
		}
		worst = math.Max(worst, math.Abs(g-w)/math.Max(math.Max(math.Abs(w), scale*1e-2), 1e-30))
	}
	return worst
}

// selftestMaxRel64 is selftestMaxRel for float64 vectors.
func selftestMaxRel64(got, want []float64) float64 {
	scale := 0.0
	for _, v := range want {
		scale = math.Max(scale, math.Abs(v))
	}
	worst := 0.0
	for i, w := range want {
		g := got[i]
		if math.IsNaN(g) != math.IsNaN(w) {
			return math.Inf(1)
		}
		worst = math.Max(worst, math.Abs(g-w)/math.Max(math.Max(math.Abs(w), scale*1e-2), 1e-300))
	}
	return worst
}

func selftestF32(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// selftestKernels compares every kernel group with the CPU kernels on random inputs.
func selftestKernels(d *cuda.Device) ([]selftestCheck, error) {
	rng := rand.New(rand.NewPCG(2026, 11))
	var out []selftestCheck
	add := func(name string, err float64, tol float64) {
		out = append(out, selftestCheck{Kernel: name, MaxErr: num(err), Tol: tol, OK: err <= tol})
	}
	var bufs []cuda.Buffer
	defer func() {
		for _, b := range bufs {
			d.Free(b)
		}
	}()
	alloc := func(bytes int) (cuda.Buffer, error) {
		b, err := d.Alloc(bytes)
		if err == nil {
			bufs = append(bufs, b)
		}
		return b, err
	}
	const b, din, h = 256, 784, 64
	a, e := selftestF32(rng, b*din), selftestF32(rng, b*h)
	asq, esq, norm2, coef := make([]float64, b), make([]float64, b), make([]float64, b), make([]float64, b)
	kernels.RowSqNorms(asq, a, b, din)
	kernels.RowSqNorms(esq, e, b, h)
	kernels.GhostAccum(norm2, asq, esq, true)
	kernels.ClipCoefs(coef, norm2, nil, 30)
	wantW, wantB := make([]float64, din*h), make([]float64, h)
	kernels.ClippedSumWide(wantW, wantB, a, e, b, din, h, coef, make([]float32, b*h), make([]float64, b*(din+h)))
	A, err := alloc(b * din * 4)
	if err != nil {
		return nil, err
	}
	E, _ := alloc(b * h * 4)
	Asq, _ := alloc(b * 8)
	Esq, _ := alloc(b * 8)
	N2, _ := alloc(b * 8)
	C, _ := alloc(b * 8)
	ACC, _ := alloc((din + 1) * h * 8)
	WA, _ := alloc(b * (din + 1) * 8)
	WS, _ := alloc(b * h * 8)
	S, err := alloc(b * h * 4)
	if err != nil {
		return nil, err
	}
	if err := errors.Join(cuda.Upload(d, A, a), cuda.Upload(d, E, e), d.RowSqNorms(Asq, A, b, din), d.RowSqNorms(Esq, E, b, h),
		d.Zero(N2, b*8), d.GhostAccum(N2, Asq, Esq, b, true), d.ClipCoefs(C, N2, cuda.Buffer{}, 30, b),
		d.ClippedSumWide(ACC, A, E, b, din, h, C, S, WA, WS, true)); err != nil {
		return nil, err
	}
	gn2, gc, acc := make([]float64, b), make([]float64, b), make([]float64, (din+1)*h)
	if err := errors.Join(cuda.Download(d, gn2, N2), cuda.Download(d, gc, C), cuda.Download(d, acc, ACC)); err != nil {
		return nil, err
	}
	rel := func(x, y []float64) float64 {
		w := 0.0
		for i := range x {
			w = math.Max(w, math.Abs(x[i]-y[i])/math.Max(math.Abs(y[i]), 1e-300))
		}
		return w
	}
	add("row_sqnorm+ghost_accum", rel(gn2, norm2), 1e-12)
	add("clip_coef", rel(gc, coef), 1e-12)
	// The float64 clipped sums: exact products, so only the order of the float64 sums differs.
	add("clipped_sum float64 (widen + cuBLAS DGEMM)", selftestMaxRel64(acc[:din*h], wantW), 1e-12)
	add("clipped_sum float64 (bias)", selftestMaxRel64(acc[din*h:], wantB), 1e-12)

	const n = 1 << 16
	key := kernels.NoiseKey{Seed: rng.Uint64(), Step: 7, Tensor: 2}
	x := selftestF32(rng, n)
	G, err := alloc(n * 4)
	if err != nil {
		return nil, err
	}
	for _, c := range []struct {
		name string
		cpu  func([]float32)
		dev  func() error
	}{
		{"gaussian (same stream)", func(v []float32) { kernels.AddGaussianAt(v, 2, key, 3) }, func() error { return d.AddGaussian(G, n, 2, cuda.PhiloxKey(key), 3) }},
		{"laplace (same stream)", func(v []float32) { kernels.AddLaplace(v, 0.5, key) }, func() error { return d.AddLaplace(G, n, 0.5, cuda.PhiloxKey(key)) }},
		{"ball (same draw)", func(v []float32) { kernels.AddBall([][]float32{v}, 3, key) }, func() error { return d.AddBall([]cuda.Buffer{G}, []int{n}, 3, cuda.PhiloxKey(key)) }},
	} {
		want := append([]float32(nil), x...)
		c.cpu(want)
		got := make([]float32, n)
		if err := errors.Join(cuda.Upload(d, G, x), c.dev(), cuda.Download(d, got, G)); err != nil {
			return nil, err
		}
		// The device computes the CPU's numbers with the same operations (dpsgd.cu): every
		// value must be bit-identical, not merely close.
		miss := selftestMismatches(got, want)
		out = append(out, selftestCheck{Kernel: c.name, MaxErr: num(selftestMaxRel(got, want)), Mismatches: &miss, OK: miss == 0})
	}
	// A one-step check of the whole dense DP step against the CPU oracle is in the cuda
	// package's tests; here the layer kernels are checked against closed forms.
	z := selftestF32(rng, n)
	Z, _ := alloc(n * 4)
	H, err := alloc(n * 4)
	if err != nil {
		return nil, err
	}
	for _, tanh := range []bool{false, true} {
		got := make([]float32, n)
		if err := errors.Join(cuda.Upload(d, Z, z), d.Activate(H, Z, n, tanh), cuda.Download(d, got, H)); err != nil {
			return nil, err
		}
		want := make([]float32, n)
		for i, v := range z {
			if tanh {
				want[i] = float32(math.Tanh(float64(v)))
			} else {
				want[i] = float32(math.Max(float64(v), 0))
			}
		}
		name := map[bool]string{false: "relu", true: "tanh"}[tanh]
		add(name, selftestMaxRel(got, want), 1e-5)
	}
	conv, err := selftestConv(d, rng, alloc)
	if err != nil {
		return nil, err
	}
	stack, err := selftestStack(d, rng, alloc)
	return append(append(out, conv...), stack...), err
}

// selftestStack checks the kernels of the layer stacks' layers beyond the presets': GELU and
// the tempered sigmoid and their derivatives against their closed forms in float64 (engine/nn's
// definitions, x·Φ(x) = x·½·erfc(−x/√2) and scale·σ(temp·x) − offset) within 1e-5 relative;
// average pooling (a 3×3 window at stride 2 on 2×9×9 inputs) and its gradient, the residual
// sum, a group normalization both ways and an embedding lookup, against engine/nn's operations
// in its order, bit for bit; and the embedding's per-example norms (rows grouped by id) within
// 1e-12.
func selftestStack(d *cuda.Device, rng *rand.Rand, alloc func(int) (cuda.Buffer, error)) ([]selftestCheck, error) {
	var out []selftestCheck
	up := func(x []float32) (cuda.Buffer, error) {
		buf, err := alloc(max(len(x), 1) * 4)
		if err == nil {
			err = cuda.Upload(d, buf, x)
		}
		return buf, err
	}
	const n = 1 << 14
	x := selftestF32(rng, n)
	for i := range x {
		x[i] *= 3
	}
	e := selftestF32(rng, n)
	sigmoid := func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
	for _, c := range []struct {
		name  string
		fn    cuda.PointFn
		f, df func(float64) float64
	}{
		{"gelu", cuda.PointFn{Fn: cuda.PointGELU}, func(v float64) float64 { return v * 0.5 * math.Erfc(-v/math.Sqrt2) },
			func(v float64) float64 { return 0.5*math.Erfc(-v/math.Sqrt2) + v*math.Exp(-v*v/2)/math.Sqrt(2*math.Pi) }},
		{"tempered_sigmoid", cuda.PointFn{Fn: cuda.PointTemperedSigmoid, Scale: 2, Temp: 2, Offset: 1}, func(v float64) float64 { return 2*sigmoid(2*v) - 1 },
			func(v float64) float64 { s := sigmoid(2 * v); return 4 * s * (1 - s) }},
	} {
		X, err := up(x)
		if err != nil {
			return nil, err
		}
		Y, err := alloc(n * 4)
		if err != nil {
			return nil, err
		}
		E, err := up(e)
		if err != nil {
			return nil, err
		}
		y, ge := make([]float32, n), make([]float32, n)
		if err := errors.Join(d.Point(Y, X, n, c.fn), d.PointBackward(E, X, n, c.fn), cuda.Download(d, y, Y), cuda.Download(d, ge, E)); err != nil {
			return nil, err
		}
		wy, we := make([]float32, n), make([]float32, n)
		for i, v := range x {
			wy[i] = float32(c.f(float64(v)))
			we[i] = e[i] * float32(c.df(float64(v)))
		}
		for _, r := range []struct {
			name      string
			got, want []float32
		}{{c.name, y, wy}, {c.name + " backward", ge, we}} {
			m := selftestMaxRel(r.got, r.want)
			out = append(out, selftestCheck{Kernel: r.name, MaxErr: num(m), Tol: 1e-5, OK: m <= 1e-5})
		}
	}
	const b = 4
	w := cuda.Window{C: 2, H: 9, W: 9, K: 3, S: 2}
	oh, ow := w.Out()
	px, dy := selftestF32(rng, b*w.H*w.W*w.C), selftestF32(rng, b*oh*ow*w.C)
	wantY, wantDx := make([]float32, len(dy)), make([]float32, len(px))
	inv := 1 / float32(w.K*w.K)
	for i := range b {
		for oy := range oh {
			for ox := range ow {
				for ch := range w.C {
					o := ((i*oh+oy)*ow+ox)*w.C + ch
					var acc float32
					for ky := range w.K {
						for kx := range w.K {
							at := ((i*w.H+oy*w.S+ky)*w.W+ox*w.S+kx)*w.C + ch
							acc += px[at]
							v := dy[o] * inv
							wantDx[at] += v
						}
					}
					wantY[o] = acc * inv
				}
			}
		}
	}
	PX, err := up(px)
	if err != nil {
		return nil, err
	}
	DY, err := up(dy)
	if err != nil {
		return nil, err
	}
	PY, err := alloc(len(dy) * 4)
	if err != nil {
		return nil, err
	}
	DX, err := alloc(len(px) * 4)
	if err != nil {
		return nil, err
	}
	gy, gdx := make([]float32, len(dy)), make([]float32, len(px))
	if err := errors.Join(d.AvgPool(PY, PX, b, w), d.AvgPoolBackward(DX, DY, b, w), cuda.Download(d, gy, PY), cuda.Download(d, gdx, DX)); err != nil {
		return nil, err
	}
	sum := make([]float32, len(px))
	for i := range px {
		sum[i] = px[i] + wantDx[i]
	}
	gs := make([]float32, len(px))
	if err := errors.Join(d.AddF32(DX, PX, DX, len(px)), cuda.Download(d, gs, DX)); err != nil {
		return nil, err
	}
	// A group normalization of 4 groups on 4 examples of 9 positions × 8 channels, both ways,
	// against engine/nn's normOp operations in float64, in its order.
	const np, nc, ng = 9, 8, 4
	nx, ngx := selftestF32(rng, b*np*nc), selftestF32(rng, b*np*nc)
	wantN, wantNB := selftestNormRef(nx, nil, b, np, nc, ng), selftestNormRef(nx, ngx, b, np, nc, ng)
	NX, err := up(nx)
	if err != nil {
		return nil, err
	}
	NGX, err := up(ngx)
	if err != nil {
		return nil, err
	}
	NO, err := alloc(len(nx) * 4)
	if err != nil {
		return nil, err
	}
	gn, gnb := make([]float32, len(nx)), make([]float32, len(nx))
	if err := errors.Join(d.Norm(NO, NX, b, np, nc, ng), cuda.Download(d, gn, NO), d.NormBackward(NO, NX, NGX, b, np, nc, ng), cuda.Download(d, gnb, NO)); err != nil {
		return nil, err
	}
	// An embedding of 4 examples of 8 ids (some repeated, some invalid) into a 5×6 table: the
	// lookup bit for bit, each example's norm of its rows grouped by id within 1e-12.
	const el, ev, ed = 8, 5, 6
	ex := make([]float32, b*el)
	for i := range ex {
		ex[i] = float32(rng.IntN(ev+1)) - 0.5*float32(i%11/10) // ev and x.5: invalid
	}
	et, ee := selftestF32(rng, ev*ed), selftestF32(rng, b*el*ed)
	wantE, wantEN := make([]float32, b*el*ed), make([]float64, b)
	for i := range b {
		rows := make([]float64, ev*ed)
		for q := i * el; q < (i+1)*el; q++ {
			v := float64(ex[q])
			if !(v >= 0 && v < ev) || v != math.Trunc(v) {
				continue
			}
			id := int(v)
			copy(wantE[q*ed:(q+1)*ed], et[id*ed:(id+1)*ed])
			for k := range ed {
				rows[id*ed+k] += float64(ee[q*ed+k])
			}
		}
		for _, r := range rows {
			wantEN[i] += r * r
		}
	}
	EX, err := up(ex)
	if err != nil {
		return nil, err
	}
	ET, err := up(et)
	if err != nil {
		return nil, err
	}
	EE, err := up(ee)
	if err != nil {
		return nil, err
	}
	EO, err := alloc(len(wantE) * 4)
	if err != nil {
		return nil, err
	}
	EN, err := alloc(b * 8)
	if err != nil {
		return nil, err
	}
	gotE, gotEN := make([]float32, len(wantE)), make([]float64, b)
	if err := errors.Join(d.Embed(EO, EX, ET, b, el, ev, ed), d.Zero(EN, b*8), d.EmbedNorms(EN, EX, EE, b, el, ev, ed),
		cuda.Download(d, gotE, EO), cuda.Download(d, gotEN, EN)); err != nil {
		return nil, err
	}
	en := selftestMaxRel64(gotEN, wantEN)
	out = append(out, selftestCheck{Kernel: "embedding norms (grouped by id)", MaxErr: num(en), Tol: 1e-12, OK: en <= 1e-12})
	for _, r := range []struct {
		name      string
		got, want []float32
	}{{"embedding (bit-exact)", gotE, wantE}, {"avgpool (bit-exact)", gy, wantY}, {"avgpool backward (bit-exact)", gdx, wantDx}, {"residual sum add_f32 (bit-exact)", gs, sum},
		{"groupnorm (bit-exact)", gn, wantN}, {"groupnorm backward (bit-exact)", gnb, wantNB}} {
		miss := selftestMismatches(r.got, r.want)
		out = append(out, selftestCheck{Kernel: r.name, MaxErr: num(selftestMaxRel(r.got, r.want)), Mismatches: &miss, OK: miss == 0})
	}
	return out, nil
}

// selftestConv checks the convolution kernels on the MNIST CNN's two layers (engine/nn's
// nn.CNN on 1×28×28 images) against engine/nn's CPU reference: the data movements (im2col of
// the images and of a row-layout input, its gradient col2im, max pooling with its argmax and
// the pooling gradient) bit for bit, since they move the same values and add the same terms
// in the same order; the per-example gradients Ĝᵢ (one strided-batched GEMM and the bias
// column sums) against kernels.Gemm within 1e-5 relative; and the clipped sum Σ cᵢ·Ĝᵢ
// (coef_sum) bit for bit against float64 sums of the device's own Ĝᵢ in example order.
func selftestConv(d *cuda.Device, rng *rand.Rand, alloc func(int) (cuda.Buffer, error)) ([]selftestCheck, error) {
	const b = 4
	layouts, err := nn.CNN([]int{1, 28, 28}, 10, nil, nn.ReLU).ConvLayouts()
	if err != nil {
		return nil, err
	}
	var out []selftestCheck
	exact := func(name string, got, want []float32) {
		miss := selftestMismatches(got, want)
		out = append(out, selftestCheck{Kernel: name, MaxErr: num(selftestMaxRel(got, want)), Mismatches: &miss, OK: miss == 0})
	}
	// run uploads the inputs, runs fn and downloads n float32 values of res.
	up := func(x []float32) (cuda.Buffer, error) {
		buf, err := alloc(max(len(x), 1) * 4)
		if err == nil {
			err = cuda.Upload(d, buf, x)
		}
		return buf, err
	}
	down := func(buf cuda.Buffer, n int) ([]float32, error) {
		v := make([]float32, n)
		return v, cuda.Download(d, v, buf)
	}
	for li, l := range layouts {
		name := fmt.Sprintf("conv%d", li+1)
		win := cuda.Window{C: l.InC, H: l.InH, W: l.InW, K: l.Spec.Kernel, S: l.Spec.Stride, Pad: l.Spec.Pad}
		cols, rows := l.InC*l.Spec.Kernel*l.Spec.Kernel, l.OutH*l.OutW
		x := selftestF32(rng, b*l.InC*l.InH*l.InW)
		want := make([]float32, b*rows*cols)
		if li == 0 {
			nn.Im2Col(want, x, b, l)
		} else {
			nn.Patches(want, x, b, l)
		}
		X, err := up(x)
		if err != nil {
			return nil, err
		}
		P, err := alloc(len(want) * 4)
		if err != nil {
			return nil, err
		}
		if err := d.Im2Col(P, X, b, win, li == 0); err != nil {
			return nil, err
		}
		got, err := down(P, len(want))
		if err != nil {
			return nil, err
		}
		exact(name+" im2col (bit-exact)", got, want)
		if li > 0 {
			dp := selftestF32(rng, len(want))
			dx := make([]float32, len(x))
			nn.PatchesGrad(dx, dp, b, l)
			DP, err := up(dp)
			if err != nil {
				return nil, err
			}
			if err := d.Col2Im(X, DP, b, win); err != nil {
				return nil, err
			}
			if got, err = down(X, len(x)); err != nil {
				return nil, err
			}
			exact(name+" col2im (bit-exact)", got, dx)
		}
		// Per-example gradients of the layer: A the patch matrix P, E random errors.
		h := l.Spec.Filters
		n := (cols + 1) * h
		e := selftestF32(rng, b*rows*h)
		E, err := up(e)
		if err != nil {
			return nil, err
		}
		G, err := alloc(b * n * 4)
		if err != nil {
			return nil, err
		}
		if err := d.ExampleGrads(G, P, E, b, rows, cols, h); err != nil {
			return nil, err
		}
		g, err := down(G, b*n)
		if err != nil {
			return nil, err
		}
		wantG := make([]float32, b*n)
		for i := range b {
			gi := wantG[i*n : (i+1)*n]
			kernels.Gemm(true, false, cols, h, rows, 1, want[i*rows*cols:(i+1)*rows*cols], cols, e[i*rows*h:(i+1)*rows*h], h, 0, gi[:cols*h], h)
			for r := range rows {
				for j := range h {
					gi[cols*h+j] += e[(i*rows+r)*h+j]
				}
			}
		}
		out = append(out, selftestCheck{Kernel: name + " per-example grads (strided-batched GEMM)", MaxErr: num(selftestMaxRel(g, wantG)), Tol: 1e-5,
			OK: selftestMaxRel(g, wantG) <= 1e-5})
		coef := []float64{1, 0.5, 0, 0.125}
		acc := make([]float64, n)
		for i, c := range coef {
			if c == 0 {
				continue
			}
			for j := range acc {
				acc[j] += c * float64(g[i*n+j])
			}
		}
		wantSum := make([]float32, n)
		for j, v := range acc {
			wantSum[j] = float32(v)
		}
		C, err := alloc(b * 8)
		if err != nil {
			return nil, err
		}
		ACC, err := alloc(n * 8)
		if err != nil {
			return nil, err
		}
		W, err := alloc(n * 4)
		if err != nil {
			return nil, err
		}
		bias, err := alloc(h * 4)
		if err != nil {
			return nil, err
		}
		if err := errors.Join(cuda.Upload(d, C, coef), d.CoefSum(ACC, W, bias, G, C, b, cols, h, true)); err != nil {
			return nil, err
		}
		gw, err := down(W, cols*h)
		if err != nil {
			return nil, err
		}
		gb, err := down(bias, h)
		if err != nil {
			return nil, err
		}
		exact(name+" clipped sum Σcᵢ·Ĝᵢ (bit-exact)", append(gw, gb...), wantSum)
		if l.Spec.PoolKernel == 0 {
			continue
		}
		pw := cuda.Window{C: h, H: l.OutH, W: l.OutW, K: l.Spec.PoolKernel, S: l.Spec.PoolStride}
		z := selftestF32(rng, b*rows*h)
		pooled := make([]float32, b*l.PoolH*l.PoolW*h)
		nn.Pool(pooled, z, b, l)
		Z, err := up(z)
		if err != nil {
			return nil, err
		}
		O, err := alloc(len(pooled) * 4)
		if err != nil {
			return nil, err
		}
		I, err := alloc(len(pooled) * 4)
		if err != nil {
			return nil, err
		}
		if err := d.MaxPool(O, I, Z, b, pw); err != nil {
			return nil, err
		}
		if got, err = down(O, len(pooled)); err != nil {
			return nil, err
		}
		exact(name+" maxpool (bit-exact)", got, pooled)
		dy := selftestF32(rng, len(pooled))
		dz := make([]float32, len(z))
		nn.PoolGrad(dz, z, dy, b, l)
		DY, err := up(dy)
		if err != nil {
			return nil, err
		}
		if err := d.MaxPoolBackward(Z, DY, I, b, pw); err != nil {
			return nil, err
		}
		if got, err = down(Z, len(z)); err != nil {
			return nil, err
		}
		exact(name+" maxpool backward (bit-exact)", got, dz)
	}
	return out, nil
}

// selftestNormRef is engine/nn's normOp on b examples of p rows × c channels in groups: the
// normalization, or with gx (∂L/∂x̂) its gradient, in float64 in its order.
func selftestNormRef(x, gx []float32, b, p, c, groups int) []float32 {
	out := make([]float32, len(x))
	per, cg := p*c, c/groups
	m := float64(p * cg)
	for i := range b {
		xi, oi := x[i*per:(i+1)*per], out[i*per:(i+1)*per]
		for grp := range groups {
			lo, hi := grp*cg, (grp+1)*cg
			var mu, v2 float64
			for r := range p {
				for _, v := range xi[r*c+lo : r*c+hi] {
					mu += float64(v)
				}
			}
			mu /= m
			for r := range p {
				for _, v := range xi[r*c+lo : r*c+hi] {
					d := float64(v) - mu
					v2 += d * d
				}
			}
			inv := 1 / math.Sqrt(v2/m+1e-5)
			var sg, sgx float64
			if gx != nil {
				for r := range p {
					for j := lo; j < hi; j++ {
						gv := float64(gx[i*per+r*c+j])
						sg += gv
						sgx += gv * (float64(xi[r*c+j]) - mu) * inv
					}
				}
				sg /= m
				sgx /= m
			}
			for r := range p {
				for j := lo; j < hi; j++ {
					xh := (float64(xi[r*c+j]) - mu) * inv
					if gx == nil {
						oi[r*c+j] = float32(xh)
					} else {
						oi[r*c+j] = float32((float64(gx[i*per+r*c+j]) - sg - xh*sgx) * inv)
					}
				}
			}
		}
	}
	return out
}

// selftestMoments draws `draws` standard normals on the device (FillGaussian, chunks of 2²²)
// and returns their mean, standard deviation and kurtosis (3 for a normal).
func selftestMoments(ctx context.Context, d *cuda.Device, draws int) (mean, std, kurt float64, err error) {
	const chunk = 1 << 22
	g, err := d.Alloc(min(draws, chunk) * 4)
	if err != nil {
		return 0, 0, 0, err
	}
	defer d.Free(g)
	buf := make([]float32, min(draws, chunk))
	var s1, s2, s4 float64
	key := kernels.NoiseKey{Seed: 0x5e1f7e57, Step: 1}
	for off := 0; off < draws; off += chunk {
		if err := ctx.Err(); err != nil {
			return 0, 0, 0, err
		}
		m := min(chunk, draws-off)
		if err := errors.Join(d.FillGaussian(g, m, cuda.PhiloxKey(key), uint64(off)), cuda.Download(d, buf[:m], g)); err != nil {
			return 0, 0, 0, err
		}
		for _, v := range buf[:m] {
			x := float64(v)
			s1 += x
			x2 := x * x
			s2 += x2
			s4 += x2 * x2
		}
	}
	n := float64(draws)
	mean = s1 / n
	v := s2/n - mean*mean
	return mean, math.Sqrt(v), (s4 / n) / (v * v), nil
}

// selftestBench times, on an MLP 784-256-10 at the given batch: the clip+noise part (ghost
// norms of both layers, clip coefficients, clipped sums, Gaussian noise) with CUDA events and
// its bytes; noise generation (min(2²⁴, max(draws, 2¹⁶)) normals); the whole DP step against the non-private step.
func selftestBench(d *cuda.Device, batch, reps, copyMiB int, res *selftestResult) error {
	arch := nn.MLP([]int{784}, 10, []int{256}, nn.ReLU)
	ds := &datasets.Dataset{Name: "bench", N: 4 * batch, D: 784, Classes: 10, X: make([]float32, 4*batch*784), Y: make([]int, 4*batch), Shape: []int{784}}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range ds.X {
		ds.X[i] = float32(rng.Float64())
	}
	for i := range ds.Y {
		ds.Y[i] = rng.IntN(10)
	}
	idx := make([]int, batch)
	for i := range idx {
		idx[i] = i
	}
	timeSteps := func(nonPrivate bool) (float64, error) {
		sigma := 1.0
		if nonPrivate {
			sigma = 0
		}
		l, err := engine.NewLearner(engine.Config{Arch: arch, Dtype: tensor.Float32, PhysicalBatch: batch, Replicas: 1, Clip: 1, Sigma: 1,
			NonPrivate: nonPrivate, Seed: 3, Optimizer: engine.OptimizerConfig{Name: engine.OptimizerSGD, LR: 0.01}, Device: engine.DeviceCUDA})
		if err != nil {
			return 0, err
		}
		defer l.Close()
		step := func(s int) error {
			_, err := l.Step(ds, idx, sigma, kernels.NoiseKey{Seed: 3, Step: uint64(s)}, 0.01, float64(batch))
			return err
		}
		if err := step(0); err != nil { // warm-up: opens the device, uploads the data
			return 0, err
		}
		start := time.Now()
		for s := range reps {
			if err := step(s + 1); err != nil {
				return 0, err
			}
		}
		return float64(time.Since(start).Microseconds()) / 1e3 / float64(reps), nil
	}
	dp, err := timeSteps(false)
	if err != nil {
		return err
	}
	plain, err := timeSteps(true)
	if err != nil {
		return err
	}
	res.DPStepMs, res.PlainStepMs, res.Ratio = num(dp), num(plain), num(dp/plain)

	// The clip+noise part alone, layer 1 (784→256) and layer 2 (256→10).
	type lay struct{ in, out int }
	ls := []lay{{784, 256}, {256, 10}}
	var bufs []cuda.Buffer
	defer func() {
		for _, b := range bufs {
			d.Free(b)
		}
	}()
	alloc := func(n int) cuda.Buffer {
		b, e := d.Alloc(n)
		if e != nil && err == nil {
			err = e
		}
		bufs = append(bufs, b)
		return b
	}
	var A, E, Acc []cuda.Buffer
	for _, l := range ls {
		a := alloc(batch * l.in * 4)
		e := alloc(batch * l.out * 4)
		if err == nil {
			err = errors.Join(cuda.Upload(d, a, selftestF32(rng, batch*l.in)), cuda.Upload(d, e, selftestF32(rng, batch*l.out)))
		}
		A, E, Acc = append(A, a), append(E, e), append(Acc, alloc((l.in+1)*l.out*8))
	}
	asq, esq, n2, c, s := alloc(batch*8), alloc(batch*8), alloc(batch*8), alloc(batch*8), alloc(batch*256*4)
	wa, ws := alloc(batch*(784+1)*8), alloc(batch*256*8)
	if err != nil {
		return err
	}
	var bytes float64
	for _, l := range ls {
		// norms read A and E (float32); the clipped sum reads E, writes S (float32), reads A and S
		// and writes them widened (float64), which the DGEMM reads, writing the float64 sums;
		// the noise reads and writes the sums (float64).
		bytes += 4*float64(2*batch*l.in+4*batch*l.out) + 8*float64(2*batch*(l.in+1)+2*batch*l.out+3*(l.in+1)*l.out)
	}
	el, err := d.Elapsed(func() error {
		for r := range reps {
			if err := d.Zero(n2, batch*8); err != nil {
				return err
			}
			for i, l := range ls {
				if err := errors.Join(d.RowSqNorms(asq, A[i], batch, l.in), d.RowSqNorms(esq, E[i], batch, l.out), d.GhostAccum(n2, asq, esq, batch, true)); err != nil {
					return err
				}
			}
			if err := d.ClipCoefs(c, n2, cuda.Buffer{}, 1, batch); err != nil {
				return err
			}
			for i, l := range ls {
				nw := l.in * l.out
				if err := errors.Join(d.ClippedSumWide(Acc[i], A[i], E[i], batch, l.in, l.out, c, s, wa, ws, true),
					d.AddGaussianF64(Acc[i].Sub(0, nw*8), nw, 1, cuda.PhiloxKey{Seed: 1, Step: uint64(r), Tensor: uint32(2 * i)}, 0),
					d.AddGaussianF64(Acc[i].Sub(nw*8, l.out*8), l.out, 1, cuda.PhiloxKey{Seed: 1, Step: uint64(r), Tensor: uint32(2*i + 1)}, 0)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	ms := el.Seconds() * 1e3 / float64(reps)
	res.ClipNoiseMs = num(ms)
	res.ClipNoiseGB = num(bytes / (ms * 1e-3) / 1e9)

	nn24 := min(1<<24, max(res.Draws, 1<<16))
	g := alloc(nn24 * 4)
	if err != nil {
		return err
	}
	el, err = d.Elapsed(func() error {
		for r := range reps {
			if err := d.FillGaussian(g, nn24, cuda.PhiloxKey{Seed: 9, Step: uint64(r)}, 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	res.NoiseGS = num(float64(nn24) * float64(reps) / el.Seconds() / 1e9)

	// The copy bandwidth: copyMiB MiB from one buffer to another, reps times.
	size := copyMiB << 20
	src, dst := alloc(size), alloc(size)
	if err != nil {
		return err
	}
	if err := d.Zero(src, size); err != nil {
		return err
	}
	el, err = d.Elapsed(func() error {
		for range reps {
			if err := d.Copy(dst, src, size); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	res.CopyGB = num(2 * float64(size) * float64(reps) / el.Seconds() / 1e9)
	res.ClipNoiseOfCopy = num(*res.ClipNoiseGB / *res.CopyGB)
	return nil
}
