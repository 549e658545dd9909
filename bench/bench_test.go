package bench

import (
	"context"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dpsgd/dpsgd/cuda"
	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/engine/nn"
	kcuda "github.com/dpsgd/dpsgd/kernels/cuda"
	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/accounting"
	"gonum.org/v1/gonum/stat/distuv"
	"gorgonia.org/tensor"
)

// gdpDelta is δ(ε) of μ-GDP (Dong, Roth & Su 2019, Cor. 2.13), written
// here independently of the privacy package as the oracle for the amplification-free shuffle
// accountant: E epochs of one Gaussian mechanism of σ each are (√E/σ)-GDP.
func gdpDelta(mu, eps float64) float64 {
	n := distuv.UnitNormal
	return n.CDF(-eps/mu+mu/2) - math.Exp(eps)*n.CDF(-eps/mu-mu/2)
}

func TestNewSamplerRefusesInvalidPairs(t *testing.T) {
	for _, c := range []struct{ sampler, method, want string }{
		{"shuffle", "rdp", "assumes poisson"},
		{"shuffle", "pld", "assumes poisson"},
		{"shuffle", "lower", "lower bound"},
		{"allocation", "chisq", "total variation"},
		{"allocation", "berry-esseen", "total variation"},
		{"allocation", "gdp", "approximation"},
		{"poisson", "exact", "not available"},
		{"magic", "", "\"magic\""},
	} {
		_, _, err := NewSampler(c.sampler, c.method, 1000, 100, 1)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.sampler) {
			t.Errorf("%s/%s: %v, want ErrInvalid naming the sampler and %q", c.sampler, c.method, err, c.want)
		}
	}
	for _, s := range DefaultSamplers() {
		smp, spec, err := NewSampler(s, "", 1000, 100, 1)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if spec.Method != accounting.DefaultMethod(s) || smp.Name() != s || smp.DatasetSize() != 1000 {
			t.Errorf("%s: method %s, sampler %s over %d", s, spec.Method, smp.Name(), smp.DatasetSize())
		}
	}
	if _, _, err := NewSampler("shuffle", "", 100, 101, 1); !errors.Is(err, ErrInvalid) {
		t.Errorf("batch above N: %v", err)
	}
}

// TestSolveSigmaAgainstGDPOracle: the calibrated σ of shuffling meets the target by the
// independent GDP formula, and is tight: 1% less noise would miss it. The coarse search
// (quick runs) returns at least accounting.SolveSigma's σ and within its tolerance of it.
func TestSolveSigmaAgainstGDPOracle(t *testing.T) {
	const epochs, m, delta = 5, 20, 1e-5
	_, spec, err := NewSampler("shuffle", "", 2000, 100, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, eps := range []float64{0.5, 2, 8} {
		target := privacy.Budget{Epsilon: eps, Delta: delta}
		exact, err := solveSigma(context.Background(), spec, epochs*m, target, 0)
		if err != nil {
			t.Fatal(err)
		}
		mu := math.Sqrt(epochs) / exact
		if d := gdpDelta(mu, eps); d > delta*(1+1e-9) {
			t.Errorf("ε %g: σ %g gives δ %g by the oracle, above %g", eps, exact, d, delta)
		}
		if d := gdpDelta(math.Sqrt(epochs)/(exact*0.99), eps); d <= delta {
			t.Errorf("ε %g: σ %g is not tight, 0.99σ still gives δ %g", eps, exact, d)
		}
		coarse, err := solveSigma(context.Background(), spec, epochs*m, target, 1e-2)
		if err != nil {
			t.Fatal(err)
		}
		if coarse < exact*(1-1e-4) || coarse > exact*1.0101 {
			t.Errorf("ε %g: coarse σ %g, exact %g", eps, coarse, exact)
		}
	}
	_, err = solveSigma(context.Background(), spec, epochs*m, privacy.Budget{Epsilon: 1e-7, Delta: delta}, 1e-2)
	if !errors.Is(err, privacy.ErrUnreachable) {
		t.Errorf("unreachable target: %v", err)
	}
}

// TestPrivacyCurves: labels and validity, shuffle's guarantee against the GDP oracle, the
// lower bound below the guarantee, and "Poisson accounting for shuffling" equal to the Poisson
// accountant with q = 1/M (which is what it claims), growing with the epochs.
func TestPrivacyCurves(t *testing.T) {
	const n, b, sigma, delta, epochs = 4000, 200, 1.0, 1e-5, 3
	pc, err := PrivacyCurves(PrivacyConfig{DatasetSize: n, BatchSize: b, Sigma: sigma, Delta: delta, Epochs: epochs})
	if err != nil {
		t.Fatal(err)
	}
	if len(pc.Curves) != 6 {
		t.Fatalf("%d curves, want 4 samplers + lower bound + Poisson-for-shuffle", len(pc.Curves))
	}
	by := map[string]Curve{}
	for _, c := range pc.Curves {
		by[c.Sampler+"/"+c.Accountant] = c
		if len(c.Epsilon) != epochs || len(c.TV) != epochs {
			t.Fatalf("%s/%s: %d points", c.Sampler, c.Accountant, len(c.Epsilon))
		}
		for i := range c.Epsilon {
			if c.Epsilon[i] == nil {
				t.Fatalf("%s/%s epoch %d: no ε (%s)", c.Sampler, c.Accountant, i+1, c.Note)
			}
			if i > 0 && *c.Epsilon[i] < *c.Epsilon[i-1] {
				t.Errorf("%s/%s: ε decreases from epoch %d", c.Sampler, c.Accountant, i)
			}
		}
	}
	inv := by["shuffle/pld"]
	if inv.Valid || inv.Kind != string(accounting.KindAssumesPoisson) || !strings.Contains(inv.Label, "NOT a valid guarantee") {
		t.Errorf("Poisson-for-shuffle curve %+v not labelled invalid", inv)
	}
	lb := by["shuffle/lower"]
	if lb.Valid || lb.Kind != string(accounting.KindLowerBound) {
		t.Errorf("lower bound curve %+v", lb)
	}
	g := by["shuffle/gdp"]
	for i := range g.Epsilon {
		e := float64(i + 1)
		if d := gdpDelta(math.Sqrt(e)/sigma, *g.Epsilon[i]); math.Abs(d-delta) > 1e-3*delta {
			t.Errorf("shuffle gdp epoch %d: ε %g gives δ %g by the oracle, want %g", i+1, *g.Epsilon[i], d, delta)
		}
		if *lb.Epsilon[i] > *g.Epsilon[i] {
			t.Errorf("epoch %d: lower bound %g above the guarantee %g", i+1, *lb.Epsilon[i], *g.Epsilon[i])
		}
		// The point of the comparison: Poisson accounting understates shuffling's ε here.
		if *inv.Epsilon[i] >= *lb.Epsilon[i] {
			t.Errorf("epoch %d: Poisson claim %g not below the shuffle lower bound %g at σ = 1, M = 20", i+1, *inv.Epsilon[i], *lb.Epsilon[i])
		}
		if p := by["poisson/pld"]; math.Abs(*p.Epsilon[i]-*inv.Epsilon[i]) > 1e-9 {
			t.Errorf("epoch %d: Poisson-for-shuffle %g, Poisson with q = 1/M %g", i+1, *inv.Epsilon[i], *p.Epsilon[i])
		}
	}
	for _, bad := range []PrivacyConfig{
		{DatasetSize: n, BatchSize: b, Sigma: 0, Delta: delta, Epochs: 1},
		{DatasetSize: n, BatchSize: b, Sigma: 1, Delta: 1, Epochs: 1},
		{DatasetSize: n, BatchSize: b, Sigma: 1, Delta: delta, Epochs: 0},
		{DatasetSize: n, BatchSize: b, Sigma: math.Inf(1), Delta: delta, Epochs: 1},
	} {
		if _, err := PrivacyCurves(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

func TestTableEpochs(t *testing.T) {
	if got := TableEpochs(3); len(got) != 3 || got[2] != 3 {
		t.Errorf("TableEpochs(3) = %v", got)
	}
	for _, e := range []int{11, 20, 60, 1000} {
		got := TableEpochs(e)
		if got[0] != 1 || got[len(got)-1] != e || len(got) > 10 {
			t.Errorf("TableEpochs(%d) = %v", e, got)
		}
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				t.Errorf("TableEpochs(%d) = %v not increasing", e, got)
			}
		}
	}
}

func TestRounding(t *testing.T) {
	for _, c := range []struct {
		x    float64
		n    int
		want float64
	}{{0.123456, 4, 0.1235}, {123456, 4, 123500}, {2.99996, 4, 3}, {0, 4, 0}, {-1.23456, 3, -1.23}} {
		if got := sig(c.x, c.n); got != c.want {
			t.Errorf("sig(%v, %d) = %v, want %v", c.x, c.n, got, c.want)
		}
	}
	if got := dec(0.93175, 4); got != 0.9318 && got != 0.9317 {
		t.Errorf("dec = %v", got)
	}
	for _, v := range []float64{0.00001, 123500, 0.9318, 7.999} {
		if s := Num(v); strings.ContainsAny(s, "eE") {
			t.Errorf("Num(%v) = %q has an exponent", v, s)
		}
	}
}

// TestWriteReportNothingHalfWritten: a result whose figure cannot be drawn makes WriteReport
// fail after it wrote the JSON, CSV and Markdown to temporary files: none of them, and no
// temporary file, is left in the directory.
func TestWriteReportNothingHalfWritten(t *testing.T) {
	dir := t.TempDir()
	r := &SamplersResult{Dataset: "x", Model: "y", Samplers: []string{"shuffle"}, Delta: 1e-5} // no cells, no curves
	err := WriteReport(dir, r)
	if err == nil {
		t.Fatal("WriteReport of an empty result succeeded")
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		t.Errorf("left behind: %s", e.Name())
	}
	if err := CheckWritable(""); !errors.Is(err, ErrUnwritable) {
		t.Errorf("empty dir: %v", err)
	}
	f := dir + "/file"
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{f, f + "/sub"} {
		if err := CheckWritable(d); !errors.Is(err, ErrUnwritable) {
			t.Errorf("%s: %v", d, err)
		}
	}
}

// tinyConfig is a two-sampler, one-seed comparison on a small synthetic problem.
func tinyConfig(t *testing.T) SamplersConfig {
	t.Helper()
	sc := datasets.DefaultSynthetic()
	sc.Train, sc.Test = 1000, 200
	train, test, err := datasets.Synthetic(sc)
	if err != nil {
		t.Fatal(err)
	}
	return SamplersConfig{
		Dataset: "synthetic", Model: "logreg", Train: train, Test: test, BatchSize: 100,
		Engine: engine.Config{Arch: nn.LogReg(train.Shape, train.Classes), PhysicalBatch: 100, Epochs: 2, Clip: 1,
			Optimizer: engine.OptimizerConfig{Name: "sgd", LR: 0.5}},
		Samplers: []string{"shuffle", "poisson-truncated"}, Targets: []float64{2, 8}, Delta: 1e-5, Seeds: []uint64{3},
		PrivacyEpochs: 2, PrivacySigma: 1, SigmaTolerance: 1e-2,
	}
}

// recorder counts the progress events.
type recorder struct {
	cells, starts, dones int
}

func (r *recorder) Calibrated(Cell) { r.cells++ }
func (r *recorder) RunStart(int, int, Run) engine.Progress {
	r.starts++
	return nil
}
func (r *recorder) RunDone(Run) { r.dones++ }

// TestSamplersSmall: a small comparison runs every cell and seed, spends at most each target,
// reports a training throughput at least the wall one, and an interrupted run returns the
// context's error.
func TestSamplersSmall(t *testing.T) {
	cfg := tinyConfig(t)
	rec := &recorder{}
	res, err := Samplers(context.Background(), cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	if rec.cells != 4 || rec.starts != 4 || rec.dones != 4 || len(res.Cells) != 4 || len(res.Runs) != 4 {
		t.Fatalf("events %+v, %d cells, %d runs", rec, len(res.Cells), len(res.Runs))
	}
	for _, r := range res.Runs {
		if r.Epsilon == nil || *r.Epsilon > r.TargetEpsilon || r.EpochsRun != 2 || r.StoppedByBudget {
			t.Errorf("run %+v", r)
		}
		if r.ExamplesPerSecond < 0.9*r.WallExamplesPerSecond || r.ExamplesPerSecond <= 0 {
			t.Errorf("run %s ε %g: training throughput %g below the wall one %g", r.Sampler, r.TargetEpsilon, r.ExamplesPerSecond, r.WallExamplesPerSecond)
		}
	}
	for i, c := range res.Cells { // one seed: the cell is its run
		if r := res.Runs[i]; c.Sampler != r.Sampler || c.TargetEpsilon != r.TargetEpsilon || c.AccuracyMean != r.TestAccuracy {
			t.Errorf("cell %d %+v, run %+v", i, c, r)
		}
		if c.Runs != 1 || c.AccuracySD != 0 || c.ExamplesPerSecSD != 0 || c.EpsilonSpent == nil || *c.EpsilonSpent > c.TargetEpsilon {
			t.Errorf("cell %+v", c)
		}
	}

	bad := cfg
	bad.Targets = []float64{1e-7}
	if _, err := Samplers(context.Background(), bad, nil); !errors.Is(err, privacy.ErrUnreachable) ||
		!strings.Contains(err.Error(), "shuffle") || !strings.Contains(err.Error(), "1e-07") {
		t.Errorf("unreachable target: %v", err)
	}
	bad = cfg
	bad.Accountants = map[string]string{"shuffle": "rdp"}
	if _, err := Samplers(context.Background(), bad, nil); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "shuffle with accountant rdp") {
		t.Errorf("shuffle with rdp: %v", err)
	}
	for _, mutate := range []func(*SamplersConfig){
		func(c *SamplersConfig) { c.Seeds = nil },
		func(c *SamplersConfig) { c.Seeds = []uint64{1, 1} },
		func(c *SamplersConfig) { c.Targets = []float64{math.NaN()} },
		func(c *SamplersConfig) { c.Delta = 0 },
		func(c *SamplersConfig) { c.BatchSize = 5000 },
		func(c *SamplersConfig) { c.Samplers = []string{"shuffle", "shuffle"} },
		func(c *SamplersConfig) { c.Accountants = map[string]string{"allocation": "exact"} },
		func(c *SamplersConfig) { c.SigmaTolerance = 0.5 },
	} {
		b := cfg
		mutate(&b)
		if _, err := Samplers(context.Background(), b, nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("bad config: %v", err)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Samplers(ctx, cfg, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// TestStep: one row per batch size with consistent times, throughputs and ratio; cuda rows
// are unavailable; bad input is ErrInvalid.
func TestStep(t *testing.T) {
	arch := nn.MLP([]int{20}, 5, []int{16}, nn.Tanh)
	res, err := Step(context.Background(), StepConfig{Model: "mlp", Arch: arch, BatchSizes: []int{16, 64}, Device: "cpu",
		MinTime: 20 * time.Millisecond, MinSteps: 3, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 2 {
		t.Fatalf("%d rows", len(res.Rows))
	}
	for _, r := range res.Rows {
		if !r.Available || r.Steps < 3 || r.DPMs == nil || r.NonPrivateMs == nil {
			t.Fatalf("row %+v", r)
		}
		dp, np := *r.DPMs, *r.NonPrivateMs
		if rel := math.Abs(*r.Ratio-dp/np) / *r.Ratio; rel > 2e-3 {
			t.Errorf("ratio %g, times %g/%g", *r.Ratio, dp, np)
		}
		if rel := math.Abs(*r.DPExamplesPerSec-1000*float64(r.BatchSize)/dp) / *r.DPExamplesPerSec; rel > 2e-3 {
			t.Errorf("DP examples/s %g, %g ms for %d examples", *r.DPExamplesPerSec, dp, r.BatchSize)
		}
		if r.PhysicalBatch != min(256, r.BatchSize) {
			t.Errorf("physical batch %d", r.PhysicalBatch)
		}
	}
	if !strings.Contains(StepTable(res), "| cpu | 64 |") {
		t.Errorf("table:\n%s", StepTable(res))
	}
	cu, err := Step(context.Background(), StepConfig{Arch: arch, BatchSizes: []int{8}, Device: "cuda"})
	if err != nil || len(cu.Rows) != 1 || cu.Rows[0].Available || cu.Rows[0].DPMs != nil {
		t.Errorf("cuda: %+v, %v", cu, err)
	}
	for _, bad := range []StepConfig{
		{Arch: arch, BatchSizes: nil},
		{Arch: arch, BatchSizes: []int{0}},
		{Arch: arch, BatchSizes: []int{8}, Device: "tpu"},
		{Arch: arch, BatchSizes: []int{8}, MinSteps: -1},
		{Arch: nn.Arch{}, BatchSizes: []int{8}},
	} {
		if _, err := Step(context.Background(), bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

// TestSafe: a panic inside an accountant becomes an error naming what was run.
func TestSafe(t *testing.T) {
	_, err := safe("poisson/pld after 3 epochs", func() (float64, error) {
		var s []int
		return float64(s[1]), nil
	})
	if err == nil || !strings.Contains(err.Error(), "poisson/pld after 3 epochs") || !strings.Contains(err.Error(), "panic") {
		t.Errorf("safe: %v", err)
	}
	v, err := safe("ok", func() (float64, error) { return 2, nil })
	if v != 2 || err != nil {
		t.Errorf("safe passes values on: %v, %v", v, err)
	}
}

// TestStepCUDAFake: with a GPU (here the fake driver, which runs dpsgd.cu on the CPU) the
// auto device times both the CPU and the GPU step of every batch size, interleaving DP and
// non-private steps on each.
func TestStepCUDAFake(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the fake CUDA driver")
	}
	libcuda, libcublas, err := cuda.BuildFakeDriver(t.TempDir(), kcuda.Source())
	if err != nil && strings.Contains(err.Error(), "gcc not found") {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
	arch := nn.MLP([]int{12}, 3, []int{8}, nn.Tanh)
	res, err := Step(context.Background(), StepConfig{Model: "mlp", Arch: arch, BatchSizes: []int{4, 8}, Device: DeviceAuto,
		MinTime: time.Millisecond, MinSteps: 2, Warmup: 1, Seed: 1, CUDA: cuda.Options{LibCUDA: libcuda, LibCUBLAS: libcublas}})
	if err != nil {
		t.Fatal(err)
	}
	var cpu, gpu int
	for _, r := range res.Rows {
		if !r.Available || r.DPMs == nil || !(*r.DPMs > 0) || !(*r.NonPrivateMs > 0) || r.Steps < 2 {
			t.Fatalf("row %+v", r)
		}
		switch r.Device {
		case DeviceCPU:
			cpu++
		case DeviceCUDA:
			gpu++
			if !strings.Contains(r.Note, "FakeGPU") {
				t.Errorf("GPU row's note %q does not name the device", r.Note)
			}
		}
	}
	if cpu != 2 || gpu != 2 {
		t.Fatalf("%d CPU rows and %d GPU rows, want 2 and 2: %+v", cpu, gpu, res.Rows)
	}
	// A run the GPU step cannot take (float64) is one unavailable row saying why.
	res, err = Step(context.Background(), StepConfig{Model: "mlp", Arch: arch, Dtype: tensor.Float64, BatchSizes: []int{4}, Device: DeviceCUDA,
		MinTime: time.Millisecond, MinSteps: 1, Seed: 1, CUDA: cuda.Options{LibCUDA: libcuda, LibCUBLAS: libcublas}})
	if err != nil || len(res.Rows) != 1 || res.Rows[0].Available || !strings.Contains(res.Rows[0].Note, "float64") {
		t.Fatalf("float64 mlp on cuda: %v %+v", err, res)
	}
}
