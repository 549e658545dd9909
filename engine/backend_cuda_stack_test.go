package engine

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/kernels"
)

// deviceStackFile is a layer stack with every layer the CUDA backend runs: a first convolution
// (on the raw images), a group normalization, GELU, average pooling, a residual block of a
// later convolution and a tempered sigmoid, max pooling with overlapping windows, flatten,
// dense layers with ReLU, a dense residual block with a layer normalization and tanh, and the
// output layer.
const deviceStackFile = `{"layers": [
	{"type": "conv2d", "filters": 4, "kernel": 3, "stride": 1, "pad": 1}, {"type": "groupnorm", "groups": 2}, {"type": "gelu"},
	{"type": "avgpool", "kernel": 2, "stride": 2},
	{"type": "residual", "body": [{"type": "conv2d", "filters": 4, "kernel": 3, "stride": 1, "pad": 1},
		{"type": "tempered_sigmoid", "scale": 1.5, "temp": 1.2, "offset": 0.6}]},
	{"type": "maxpool", "kernel": 2, "stride": 1}, {"type": "flatten"},
	{"type": "dense", "units": 6}, {"type": "relu"},
	{"type": "residual", "body": [{"type": "dense", "units": 6}, {"type": "layernorm"}, {"type": "tanh"}]},
	{"type": "dense", "units": 4}]}`

// deviceFlatStackFile is a stack on flat inputs: a layer normalization first and a residual
// block (their input errors are not needed), GELU, a residual block ending in a GELU (the
// body's output error is the block's, worked on in place), a lone flatten.
const deviceFlatStackFile = `{"layers": [{"type": "layernorm"},
	{"type": "residual", "body": [{"type": "dense", "units": 12}, {"type": "tempered_sigmoid", "scale": 2, "temp": 0.5, "offset": 1}]},
	{"type": "dense", "units": 9}, {"type": "gelu"},
	{"type": "residual", "body": [{"type": "relu"}, {"type": "dense", "units": 9}, {"type": "gelu"}]},
	{"type": "flatten"}, {"type": "dense", "units": 4}]}`

// deviceTokenStackFile is a stack on token ids: an embedding (the sparse rule), a group
// normalization of its rows, ReLU, flatten, a dense residual block, the output layer.
const deviceTokenStackFile = `{"layers": [{"type": "embedding", "vocab": 7, "dim": 3}, {"type": "groupnorm", "groups": 1},
	{"type": "relu"}, {"type": "flatten"}, {"type": "residual", "body": [{"type": "dense", "units": 18}, {"type": "tanh"}]},
	{"type": "dense", "units": 4}]}`

// tokenProblem is a training set of 240 examples of 6 token ids in [0, 7), some invalid (−1,
// 7, 2.5, NaN: zero rows on both sides), often repeated within an example, labelled by the
// first two ids.
func tokenProblem(t testing.TB) *datasets.Dataset {
	t.Helper()
	const n, l = 240, 6
	ds := &datasets.Dataset{Name: "tokens", X: make([]float32, n*l), Y: make([]int, n), N: n, D: l, Classes: 4, Shape: []int{l}}
	for i := range n {
		for j := range l {
			ds.X[i*l+j] = float32((i*7 + j*j*3 + i/5) % 8) // 7 is out of the vocabulary
		}
		ds.Y[i] = int(ds.X[i*l]+ds.X[i*l+1]) % 4
	}
	ds.X[3*l+2], ds.X[4*l+1], ds.X[6*l] = -1, 2.5, float32(math.NaN())
	return ds
}

// fakeLayer is a layer kind the CUDA backend does not know (as one a later layer library adds).
type fakeLayer struct{ nn.Flatten }

func (*fakeLayer) Kind() string { return "dropout" }

func stackArch(t testing.TB, file string, ds *datasets.Dataset) nn.Arch {
	t.Helper()
	a, err := nn.ParseModelFile([]byte(file), ds.Shape, ds.Classes)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestCUDASupportStacks: the CUDA backend takes the stacks of every layer of the library, and
// refuses a stack with a layer it does not know naming the first such layer, inside a residual
// block by the block's index then its own.
func TestCUDASupportStacks(t *testing.T) {
	img := &datasets.Dataset{Shape: []int{1, 14, 14}, Classes: 4}
	flat := &datasets.Dataset{Shape: []int{12}, Classes: 4}
	for _, tc := range []struct {
		ds   *datasets.Dataset
		file string
		want string // "" accepted
	}{
		{img, deviceStackFile, ""},
		{flat, deviceFlatStackFile, ""},
		{flat, `{"layers": [{"type": "dense", "units": 8}, {"type": "gelu"}, {"type": "dense", "units": 8}, {"type": "layernorm"}, {"type": "dense", "units": 4}]}`, ""},
		{img, `{"layers": [{"type": "conv2d", "filters": 4, "kernel": 3}, {"type": "relu"}, {"type": "residual", "body": [{"type": "conv2d", "filters": 4, "kernel": 3, "pad": 1}, {"type": "groupnorm", "groups": 2}]}, {"type": "flatten"}, {"type": "dense", "units": 4}]}`, ""},
		{&datasets.Dataset{Shape: []int{6}, Classes: 4}, deviceTokenStackFile, ""},
		// Grouped and weight-standardized convolutions, shortcuts and dropout run on the CPU only.
		{img, `{"layers": [{"type": "conv2d", "filters": 4, "kernel": 3}, {"type": "conv2d", "filters": 4, "kernel": 3, "groups": 2}, {"type": "flatten"}, {"type": "dense", "units": 4}]}`, "layer 1 (conv2d): a grouped or weight-standardized convolution runs on the CPU only"},
		{img, `{"layers": [{"type": "conv2d", "filters": 4, "kernel": 3, "standardize": true}, {"type": "flatten"}, {"type": "dense", "units": 4}]}`, "layer 0 (conv2d): a grouped or weight-standardized convolution runs on the CPU only"},
		{img, `{"layers": [{"type": "conv2d", "filters": 4, "kernel": 3}, {"type": "residual", "body": [{"type": "conv2d", "filters": 8, "kernel": 3, "pad": 1}], "shortcut": [{"type": "conv2d", "filters": 8, "kernel": 1}]}, {"type": "flatten"}, {"type": "dense", "units": 4}]}`, "layer 1 (residual): a residual block with a shortcut runs on the CPU only"},
		{flat, `{"layers": [{"type": "dense", "units": 8}, {"type": "dropout", "rate": 0.5}, {"type": "dense", "units": 4}]}`, "layer 1 (dropout) runs on the CPU only"},
		{img, "", "wrn16-4"},
		// Per-position dense and layernorm (the row layout) and attention run on the CPU only.
		{img, `{"layers": [{"type": "conv2d", "filters": 4, "kernel": 3}, {"type": "dense", "units": 4}, {"type": "flatten"}, {"type": "dense", "units": 4}]}`, "layer 1 (dense) runs on the CPU only"},
		{img, `{"layers": [{"type": "conv2d", "filters": 4, "kernel": 3}, {"type": "layernorm"}, {"type": "flatten"}, {"type": "dense", "units": 4}]}`, "layer 1 (layernorm) runs on the CPU only"},
		{img, `{"layers": [{"type": "conv2d", "filters": 4, "kernel": 7, "stride": 7}, {"type": "attention", "heads": 2, "dim": 4}, {"type": "meanpool"}, {"type": "dense", "units": 4}]}`, "layer 1 (attention) runs on the CPU only"},
	} {
		var cfg Config
		switch tc.file {
		case "":
			a, err := nn.WideResNet([]int{3, 32, 32}, 10, 16, 4)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Arch, tc.want = a, "a grouped or weight-standardized convolution runs on the CPU only"
		default:
			cfg.Arch = stackArch(t, tc.file, tc.ds)
		}
		err := CUDASupport(&cfg)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CUDASupport(%s) = %v, want %q", tc.file, err, tc.want)
		}
	}
	in8 := nn.Shape{Layout: nn.Flat, C: 8, H: 1, W: 1}
	for _, tc := range []struct {
		layers []nn.Layer
		want   string
	}{
		{[]nn.Layer{&nn.Dense{Units: 8}, &nn.Act{Fn: "gelu"}, &fakeLayer{}, &nn.Dense{Units: 4}}, "layer 2 (dropout) runs on the CPU only"},
		{[]nn.Layer{&nn.Dense{Units: 8}, &nn.Residual{Body: &nn.Sequential{Layers: []nn.Layer{&nn.Act{Fn: "relu"}, &fakeLayer{}}}}, &nn.Dense{Units: 4}},
			"layer 1.1 (dropout) runs on the CPU only"},
		{[]nn.Layer{&nn.Dense{Units: 8}, &nn.Embedding{Vocab: 3, Dim: 2}}, "layer 1 (embedding) runs on the CPU only"},
	} {
		_, _, err := planSeq(tc.layers, in8, &nn.Decl{}, "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("planSeq: %v, want %q", err, tc.want)
		}
	}
}

// TestDeviceStepEqualsCPUStacks is TestDeviceStepEqualsCPU's check of one step's parts
// (per-example norms, clipped sums, the noise and the rounded gradient) for the layer stacks
// above, on the CPU backend (engine/nn's graphs) and the CUDA backend (fake driver). The
// clipped sums' floor is 1e-1 of the tensor's largest value rather than 1e-2: a normalization
// divides the float32 differences of its input (GEMM summation orders) by each example's σ, and
// an entry of 1% of the largest then differs by up to 1.4e-5 relative (measured), 1.6e-7 of the
// largest; a wrong term moves the sums by 1e-3 of the largest or more.
func TestDeviceStepEqualsCPUStacks(t *testing.T) {
	dense, _ := deviceProblem(t)
	img, _ := imageProblem(t, []int{1, 14, 14})
	for _, ds := range []*datasets.Dataset{dense, img} {
		ds.X[5*ds.D+3] = float32(math.Inf(1)) // example 5: non-finite gradient
	}
	stepEqualsCPU(t, "stack-image", stackArch(t, deviceStackFile, img), img, 1e-1, 1)
	stepEqualsCPU(t, "stack-flat", stackArch(t, deviceFlatStackFile, dense), dense, 1e-1, 1)
	tok := tokenProblem(t)
	stepEqualsCPU(t, "stack-tokens", stackArch(t, deviceTokenStackFile, tok), tok, 1e-1, 0)
}

// TestDeviceMatchesCPUStack trains the image stack two epochs with Adam and a moving average,
// and the token stack one epoch with momentum, on the CPU and on the CUDA backend: the same
// steps, ε and counts, the parameters, moments and average to float32 tolerance
// (deviceMatchesCPU).
func TestDeviceMatchesCPUStack(t *testing.T) {
	train, test := imageProblem(t, []int{1, 14, 14})
	c := deviceCase{"stack-adam-ema", func(ds *datasets.Dataset) nn.Arch { return stackArch(t, deviceStackFile, ds) },
		OptimizerConfig{Name: "adam", LR: 0.01, EMA: 0.9}, "poisson", true, ""}
	deviceMatchesCPU(t, c, train, test, 2)
	tok := tokenProblem(t)
	c = deviceCase{"tokens-momentum", func(ds *datasets.Dataset) nn.Arch { return stackArch(t, deviceTokenStackFile, ds) },
		OptimizerConfig{Name: "momentum", LR: 0.1, Momentum: 0.9}, "shuffle", true, ""}
	deviceMatchesCPU(t, c, tok, tok, 1)
}

// TestDeviceAdversarialStack: one record holding NaN, +Inf, −Inf, 1e30 or −1e30 at one feature,
// at every row position of a physical batch, moves the device's clipped sums of the image
// stack and of the token stack (where the value is an invalid id) by at most C (a non-finite
// gradient is dropped, counted alike on the CPU), with the same non-finite and clipped counts
// as the CPU backend.
func TestDeviceAdversarialStack(t *testing.T) {
	img, _ := imageProblem(t, []int{1, 14, 14})
	tok := tokenProblem(t)
	adversarialStack(t, stackArch(t, deviceStackFile, img), img, img.D/2)
	adversarialStack(t, stackArch(t, deviceTokenStackFile, tok), tok, 2)
}

func adversarialStack(t *testing.T, arch nn.Arch, base *datasets.Dataset, feature int) {
	const clip, rows = 0.5, 6
	cpu := stepRun(t, arch, OptimizerConfig{Name: OptimizerSGD, LR: 0.1}, base, DeviceCPU, func(c *Config) { c.PhysicalBatch, c.Replicas = rows, 1 })
	gpu := stepRun(t, arch, OptimizerConfig{Name: OptimizerSGD, LR: 0.1}, base, DeviceCUDA, func(c *Config) { c.PhysicalBatch, c.Replicas = rows, 1 })
	rec := 7
	for _, v := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 1e30, -1e30} {
		for pos := range rows {
			ds := &datasets.Dataset{Name: base.Name, X: append([]float32(nil), base.X...), Y: base.Y, N: base.N, D: base.D, Classes: base.Classes, Shape: base.Shape}
			ds.X[rec*ds.D+feature] = v
			var idx []int
			for i := range rows - 1 {
				idx = append(idx, 20+i)
			}
			with := append(append(append([]int(nil), idx[:pos]...), rec), idx[pos:]...)
			name := fmt.Sprintf("value %v at row %d", v, pos)
			sums := map[string][2][][]float64{}
			for dev, be := range map[string]backend{"cpu": cpu.be, "cuda": gpu.be} {
				sums[dev] = [2][][]float64{backendSums(t, be, ds, with, clip), backendSums(t, be, ds, idx, clip)}
			}
			for dev, s := range sums {
				d2 := 0.0
				for p := range s[0] {
					for j := range s[0][p] {
						d := s[0][p][j] - s[1][p][j]
						d2 += d * d
					}
				}
				if !(math.Sqrt(d2) <= clip*(1+1e-6)) {
					t.Errorf("%s, %s: the record moved the clipped sum by %v > C = %v", dev, name, math.Sqrt(d2), clip)
				}
			}
			c := kernels.ClipBound[float32](clip)
			sc, err := cpu.be.clippedSum(ds, with, c)
			if err != nil {
				t.Fatal(err)
			}
			sg, err := gpu.be.clippedSum(ds, with, c)
			if err != nil {
				t.Fatal(err)
			}
			if sc.NonFinite != sg.NonFinite || sc.Clipped != sg.Clipped || sc.BatchSize != sg.BatchSize {
				t.Errorf("%s: CPU %+v, device %+v", name, sc, sg)
			}
		}
	}
}

// TestDeviceAdversarialSparse is TestAdversarialSparseCancellation and the id attack on the
// device: a record whose two positions share an id, with dense weights of ±1e20 that make their
// errors huge and opposite, moves the device's float64 sums by at most C (its rows are grouped
// by id before the scaling, as on the CPU); and a record holding any invalid or extreme id
// (embeddingIDs) at either position moves them by at most C, with the CPU's counts.
func TestDeviceAdversarialSparse(t *testing.T) {
	const l, vocab, dim, k, n = 2, 3, 2, 2, 6
	arch := nn.Arch{Kind: nn.KindStack, Input: []int{l}, Classes: k, Stack: []nn.LayerSpec{
		{Type: "embedding", Vocab: vocab, Dim: dim}, {Type: "flatten"}, {Type: "dense", Units: k},
	}}
	ds := &datasets.Dataset{Name: "tokens", X: make([]float32, n*l), Y: make([]int, n), N: n, D: l, Classes: k, Shape: []int{l}}
	for i := range n - 1 {
		ds.X[i*l], ds.X[i*l+1] = 0, 1
		ds.Y[i] = i % k
	}
	rec := n - 1
	moved := func(be backend, ds *datasets.Dataset, clip float64) float64 {
		with, without := backendSums(t, be, ds, []int{0, 1, 2, 3, 4, rec}, clip), backendSums(t, be, ds, []int{0, 1, 2, 3, 4}, clip)
		s := 0.0
		for p := range with {
			for j := range with[p] {
				s += (with[p][j] - without[p][j]) * (with[p][j] - without[p][j])
			}
		}
		return math.Sqrt(s) / clip
	}
	runs := map[string]*run[float32]{}
	for _, dev := range []string{DeviceCPU, DeviceCUDA} {
		r := stepRun(t, arch, OptimizerConfig{Name: OptimizerSGD, LR: 0.1}, ds, dev, func(c *Config) { c.PhysicalBatch, c.Replicas = n, 1 })
		setParam(r.params.List[0], func(j int) float64 {
			row, col := j/k, j%k
			v := 1e20 * float64(1+row%dim+col)
			if row >= dim {
				v = -v
			}
			return v
		})
		if gb, ok := r.be.(*cudaBackend); ok {
			if err := gb.push(); err != nil {
				t.Fatal(err)
			}
		}
		runs[dev] = r
	}
	gpu, cpu := runs[DeviceCUDA].be, runs[DeviceCPU].be
	for _, clip := range []float64{1, 1e-3} {
		x := &datasets.Dataset{Name: ds.Name, X: append([]float32(nil), ds.X...), Y: ds.Y, N: n, D: l, Classes: k, Shape: ds.Shape}
		x.X[rec*l], x.X[rec*l+1] = 0, 0
		if d := moved(gpu, x, clip); !(d <= 1+1e-9) {
			t.Errorf("C = %g: the repeated-id record moved the device's clipped sum by %.6g·C", clip, d)
		}
	}
	for _, id := range embeddingIDs(vocab) {
		for pos := range l {
			x := &datasets.Dataset{Name: ds.Name, X: append([]float32(nil), ds.X...), Y: ds.Y, N: n, D: l, Classes: k, Shape: ds.Shape}
			x.X[rec*l+pos] = id.v
			if d := moved(gpu, x, 1); !(d <= 1+1e-9) {
				t.Errorf("id %s at position %d: moved the device's clipped sum by %.6g·C", id.name, pos, d)
			}
			c := kernels.ClipBound[float32](1)
			sc, err := cpu.clippedSum(x, []int{0, 1, 2, 3, 4, rec}, c)
			if err != nil {
				t.Fatal(err)
			}
			sg, err := gpu.clippedSum(x, []int{0, 1, 2, 3, 4, rec}, c)
			if err != nil {
				t.Fatal(err)
			}
			// The weights of 1e20 tie some logits, so which class wins (and whether a record is
			// clipped) rests on the products' roundings: the fake device's equal gonum's, which
			// the CPU's graphs use unless the suite runs with another BLAS (DPSGD_BLAS).
			if graphsOnGonum() && (sc.NonFinite != sg.NonFinite || sc.Clipped != sg.Clipped) {
				t.Errorf("id %s at position %d: CPU %+v, device %+v", id.name, pos, sc, sg)
			}
		}
	}
}
