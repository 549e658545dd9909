package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dpsgd/dpsgd/cuda"
	"github.com/dpsgd/dpsgd/engine/checkpoint"
	kcuda "github.com/dpsgd/dpsgd/kernels/cuda"
)

// TestMain points DPSGD_LIBCUDA, unless the environment sets it, at a library that does not
// exist, so that every test not asking for the fake GPU runs `--device auto` on the CPU. Tests
// that want the fake driver set DPSGD_LIBCUDA to it (selftestFake, t.Setenv). Without this,
// once a test has loaded the fake libcuda.so.1 into the process the loader would find it again
// by its soname, and every later `dpsgd train` would run on the (slow) fake GPU.
func TestMain(m *testing.M) {
	if os.Getenv(cuda.EnvLibCUDA) == "" {
		os.Setenv(cuda.EnvLibCUDA, "/nonexistent/dpsgd-test-no-gpu/libcuda.so.1")
	}
	os.Exit(m.Run())
}

// deviceAdultDir writes a small Adult-format dataset (adult.data, adult.test) whose label
// depends on a few columns: `dpsgd train --dataset adult --data-dir` then runs on a few
// hundred examples, small enough for the fake CUDA driver, which runs every GPU thread as a
// fiber on the CPU (milliseconds per example).
func deviceAdultDir(t *testing.T, train, test int) string {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(5, 6))
	pick := func(s ...string) (string, int) { i := rng.IntN(len(s)); return s[i], i }
	row := func(testFile bool) string {
		age := 18 + rng.IntN(60)
		work, _ := pick("Private", "Self-emp-not-inc", "State-gov")
		edu, ei := pick("HS-grad", "Bachelors", "Masters")
		marital, mi := pick("Never-married", "Married-civ-spouse", "Divorced")
		occ, oi := pick("Adm-clerical", "Exec-managerial", "Sales")
		rel, _ := pick("Husband", "Not-in-family", "Own-child")
		race, _ := pick("White", "Black")
		sex, _ := pick("Male", "Female")
		country, _ := pick("United-States", "Mexico")
		hours := 20 + rng.IntN(40)
		score := float64(ei+mi%2+oi%2) + float64(age-40)/20 + float64(hours-40)/20 + rng.NormFloat64()*0.5
		label := "<=50K"
		if score > 2 {
			label = ">50K"
		}
		if testFile {
			label += "."
		}
		return fmt.Sprintf("%d, %s, %d, %s, %d, %s, %s, %s, %s, %s, %d, 0, %d, %s, %s\n", age, work, 50000+rng.IntN(200000), edu, 9+2*ei,
			marital, occ, rel, race, sex, rng.IntN(3)*1000, hours, country, label)
	}
	var a, b strings.Builder
	for range train {
		a.WriteString(row(false))
	}
	b.WriteString("|1x3 Cross validator\n")
	for range test {
		b.WriteString(row(true))
	}
	for name, s := range map[string]string{"adult.data": a.String(), "adult.test": b.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// deviceTrainArgs is a short private MLP run on the small Adult data (momentum, cosine
// schedule, moving average, weight decay: every host-side piece of the device loop).
// The seed is fixed (runs are compared digest for digest) except in secure mode, which takes none.
func deviceTrainArgs(dir string, extra ...string) []string {
	args := []string{"train", "--dataset", "adult", "--data-dir", dir, "--model", "mlp", "--hidden", "8",
		"--epochs", "2", "--batch-size", "60", "--physical-batch", "32", "--sigma", "1.2", "--ema", "0.9",
		"--weight-decay", "1e-3", "--quiet", "--json",
		"--allow-chance"} // devices are under test: 240 rows may end at chance (secure noise varies)
	if !slices.Contains(extra, "--secure") {
		args = append(args, "--seed", "1")
	}
	return append(args, extra...)
}

func keysOf(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TestTrainDeviceCUDAMatchesCPU: `dpsgd train --device cuda` on the fake driver trains end to
// end, and its result equals the CPU run's: the same JSON keys, ε, σ, steps, epochs and
// ledger exactly; device "cuda" naming the GPU; test accuracy within one test example; final
// parameters (from the two runs' checkpoints) within 2e-6·(1 + |w|): float32 sums in another
// order differ by a few ulps per step (see engine's TestDeviceMatchesCPU), while a wrong noise
// key, clip or optimizer constant differs by 1e-3 or more.
func TestTrainDeviceCUDAMatchesCPU(t *testing.T) {
	selftestFake(t)
	dir := deviceAdultDir(t, 240, 200)
	ckDir := t.TempDir()
	res := map[string]map[string]any{}
	for _, dev := range []string{"cpu", "cuda"} {
		ck := filepath.Join(ckDir, dev+".ckpt")
		code, out, errOut := runCmd(t, deviceTrainArgs(dir, "--device", dev, "--checkpoint", ck)...)
		if code != 0 {
			t.Fatalf("--device %s: exit %d: %s", dev, code, errOut)
		}
		res[dev] = lastJSON(t, out)
	}
	cpu, dev := res["cpu"], res["cuda"]
	if cpu["device"] != "cpu" || dev["device"] != "cuda" || !strings.Contains(fmt.Sprint(dev["device_name"]), "FakeGPU") {
		t.Fatalf("devices %v and %v (%v)", cpu["device"], dev["device"], dev["device_name"])
	}
	if !strings.Contains(fmt.Sprint(cpu["device_name"]), "CPU") {
		t.Fatalf("cpu device_name %v", cpu["device_name"])
	}
	if ck, dk := keysOf(cpu), keysOf(dev); !reflect.DeepEqual(ck, dk) {
		t.Fatalf("JSON keys differ:\n cpu  %v\n cuda %v", ck, dk)
	}
	for _, k := range []string{"epsilon", "sigma", "steps", "epochs_run", "ledger", "sample_rate", "stopped_by_budget"} {
		if !reflect.DeepEqual(cpu[k], dev[k]) {
			t.Errorf("%s: cuda %v, cpu %v", k, dev[k], cpu[k])
		}
	}
	// The same sentence: the device sums and adds the noise in float64, as the CPU does.
	if gc, gd := cpu["guarantee"].(string), dev["guarantee"].(string); gc != gd || strings.Contains(gd, "APPROXIMATE") {
		t.Errorf("guarantee: cuda %q, cpu %q", gd, gc)
	}
	if cpu["params_digest"] == dev["params_digest"] {
		t.Errorf("cuda and cpu parameters are bit-identical: the device did not run")
	}
	if d := math.Abs(dev["test_accuracy"].(float64) - cpu["test_accuracy"].(float64)); d > 1.0/200+1e-12 {
		t.Errorf("test accuracy: cuda %v, cpu %v", dev["test_accuracy"], cpu["test_accuracy"])
	}
	a, err := checkpoint.Load(filepath.Join(ckDir, "cuda.ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := checkpoint.Load(filepath.Join(ckDir, "cpu.ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range b.Params {
		for j, w := range b.Params[i] {
			if d := math.Abs(a.Params[i][j]-w) / (1 + math.Abs(w)); !(d <= 2e-6) {
				t.Fatalf("parameter %d[%d]: cuda %v, cpu %v", i, j, a.Params[i][j], w)
			}
		}
	}
}

// TestTrainDeviceAutoNoDriver: --device auto without a driver says so in exactly one stderr
// line and gives the --device cpu run's result bit for bit; --device cuda is exit 2 naming
// the library; configurations the device does not run are one line under auto and exit 2
// under cuda.
func TestTrainDeviceAutoNoDriver(t *testing.T) {
	t.Setenv(cuda.EnvLibCUDA, "/nonexistent/libcuda.so.1")
	dir := deviceAdultDir(t, 240, 200)
	code, outCPU, errCPU := runCmd(t, deviceTrainArgs(dir, "--device", "cpu")...)
	if code != 0 {
		t.Fatalf("cpu: exit %d: %s", code, errCPU)
	}
	code, outAuto, errAuto := runCmd(t, deviceTrainArgs(dir, "--device", "auto")...)
	if code != 0 {
		t.Fatalf("auto: exit %d: %s", code, errAuto)
	}
	extra := strings.Replace(withoutLoadLine(errAuto), withoutLoadLine(errCPU), "", 1)
	if strings.Count(extra, "\n") != 1 || !strings.Contains(extra, "running on the CPU") || !strings.Contains(extra, "nonexistent") {
		t.Fatalf("auto without a driver: stderr beyond the cpu run's %q, want one line saying why", extra)
	}
	c, a := lastJSON(t, outCPU), lastJSON(t, outAuto)
	if a["device"] != "cpu" || a["params_digest"] != c["params_digest"] || a["epsilon"] != c["epsilon"] {
		t.Fatalf("auto: device %v digest %v ε %v; cpu digest %v ε %v", a["device"], a["params_digest"], a["epsilon"], c["params_digest"], c["epsilon"])
	}
	code, _, errOut := runCmd(t, deviceTrainArgs(dir, "--device", "cuda")...)
	if code != 2 || !strings.Contains(errOut, "nonexistent") {
		t.Fatalf("cuda without a driver: exit %d, %q; want 2 naming the library", code, errOut)
	}
	for _, tc := range []struct{ flag, why string }{{"--float64", "float64"}, {"--secure", "secure"}} {
		args := deviceTrainArgs(dir, tc.flag)
		code, _, errOut := runCmd(t, append(args, "--device", "cuda")...)
		if code != 2 || !strings.Contains(errOut, "--device cuda") || !strings.Contains(errOut, tc.why) {
			t.Fatalf("--device cuda %s: exit %d, %q; want 2 naming %s", tc.flag, code, errOut, tc.why)
		}
		code, out, errOut := runCmd(t, append(args, "--device", "auto")...)
		if code != 0 || strings.Count(errOut, "device auto: running on the CPU") != 1 || !strings.Contains(errOut, tc.why) || lastJSON(t, out)["device"] != "cpu" {
			t.Fatalf("--device auto %s: exit %d, %q", tc.flag, code, errOut)
		}
	}
	if code, _, errOut := runCmd(t, deviceTrainArgs(dir, "--device", "tpu")...); code != 2 || !strings.Contains(errOut, "--device") {
		t.Fatalf("--device tpu: exit %d, %q", code, errOut)
	}
}

// TestTrainDeviceFaults runs `dpsgd train` in child processes with the fake driver's fault
// injection: a kernel launch failing in the middle of the run is a run error (exit 1, the
// CUDA error named), not a hang, a panic or a usage error; device memory exhausted while the
// trainer uploads the data, no device, and a driver that hangs while the device opens (past
// --device-timeout 2s) are one line and a CPU run under auto, and exit 2 under cuda; a driver
// that hangs in the middle of the run is a run error after the deadline (exit 1), whose JSON
// still reports the ledger's ε.
func TestTrainDeviceFaults(t *testing.T) {
	// The children load their own build (this process may have loaded the shared one from a
	// directory since removed).
	libcuda, libcublas, err := cuda.BuildFakeDriver(t.TempDir(), kcuda.Source())
	if err != nil {
		t.Skip("fake CUDA driver unavailable: " + err.Error())
	}
	dir := deviceAdultDir(t, 240, 200)
	for _, tc := range []struct {
		name, fault, device string
		code                int
		stderr              string
	}{
		{"launch-fail-mid-run", "FAKECUDA_LAUNCH_FAIL=400", "cuda", 1, "CUDA_ERROR_LAUNCH_FAILED"},
		{"launch-fail-mid-run-auto", "FAKECUDA_LAUNCH_FAIL=400", "auto", 1, "CUDA_ERROR_LAUNCH_FAILED"},
		{"oom-at-start-auto", "FAKECUDA_OOM_AT=12", "auto", 0, "running on the CPU"},
		{"oom-at-start-cuda", "FAKECUDA_OOM_AT=12", "cuda", 2, "CUDA_ERROR_OUT_OF_MEMORY"},
		{"no-device-auto", "FAKECUDA_NO_DEVICE=1", "auto", 0, "CUDA_ERROR_NO_DEVICE"},
		{"no-device-cuda", "FAKECUDA_NO_DEVICE=1", "cuda", 2, "CUDA_ERROR_NO_DEVICE"},
		{"hang-at-open-auto", "FAKECUDA_HANG_INIT=1", "auto", 0, "opening the device took longer than 2s"},
		{"hang-at-open-cuda", "FAKECUDA_HANG_INIT=1", "cuda", 2, "opening the device took longer than 2s"},
		{"hang-at-probe-cuda", "FAKECUDA_HANG_SYNC=1", "cuda", 2, "timed out"},
		{"hang-mid-run-cuda", "FAKECUDA_HANG_SYNC=30", "cuda", 1, "did not finish within 2s"},
		{"hang-mid-run-auto", "FAKECUDA_HANG_SYNC=30", "auto", 1, "did not finish within 2s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestTrainDeviceChild$", "-test.v")
			cmd.Env = append(os.Environ(), tc.fault, "DPSGD_DEVICE_CHILD="+dir, "DPSGD_DEVICE_CHILD_DEVICE="+tc.device,
				"DPSGD_DEVICE_CHILD_ARGS=--device-timeout 2s",
				cuda.EnvLibCUDA+"="+libcuda, cuda.EnvLibCUBLAS+"="+libcublas)
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("the run hung (%v):\n%s", ctx.Err(), out)
			}
			if err != nil || strings.Contains(string(out), "panic") {
				t.Fatalf("child: %v\n%s", err, out)
			}
			if _, e, ok := strings.Cut(string(out), "stderr:\n"); ok {
				t.Logf("child's stderr:\n%s", e)
			}
			want := fmt.Sprintf("child exit %d\n", tc.code)
			if !strings.Contains(string(out), want) || !strings.Contains(string(out), tc.stderr) {
				t.Fatalf("want %q and %q in the child's output:\n%s", strings.TrimSpace(want), tc.stderr, out)
			}
			if tc.code == 0 && (!strings.Contains(string(out), `"device":"cpu"`) || strings.Count(string(out), "running on the CPU") != 1) {
				t.Fatalf("auto after a device failure at the start: want one line and a CPU run:\n%s", out)
			}
			if tc.code == 1 && !strings.Contains(string(out), `"epsilon":`) {
				t.Fatalf("a run error without the ledger's ε:\n%s", out)
			}
		})
	}
}

// TestTrainDeviceChild is the child process of TestTrainDeviceFaults (skipped otherwise): it
// runs dpsgd train and prints the exit status, stdout and stderr.
func TestTrainDeviceChild(t *testing.T) {
	dir := os.Getenv("DPSGD_DEVICE_CHILD")
	if dir == "" {
		t.Skip("child process of TestTrainDeviceFaults")
	}
	args := append([]string{"--device", os.Getenv("DPSGD_DEVICE_CHILD_DEVICE")}, strings.Fields(os.Getenv("DPSGD_DEVICE_CHILD_ARGS"))...)
	code, out, errOut := runCmd(t, deviceTrainArgs(dir, args...)...)
	fmt.Printf("child exit %d\nstdout:\n%s\nstderr:\n%s\n", code, out, errOut)
}

// withoutLoadLine drops the start-up line of a slow data load from stderr (printed only when the
// load takes longer than loadSilence, so on a loaded machine in one run and not the other).
func withoutLoadLine(stderr string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(stderr, "\n") {
		if !strings.HasPrefix(l, "dpsgd train: loading ") && !strings.HasPrefix(l, "dpsgd train: generating ") {
			b.WriteString(l)
		}
	}
	return b.String()
}

// TestTrainPrecision: --precision fp32|bf16 on train and bench step. bf16 is the GPU's: with
// --device cpu or --float64 it is a usage error naming the flag, as are an unknown precision
// and a --device-timeout ≤ 0; under auto without a GPU the one line says bf16 does not apply
// and the run reports fp32. On the fake GPU a bf16 run reports "precision": "bf16", the fp32
// run's ε and steps, and other parameters than the fp32 run's (the rounding is there); the
// bench's GPU rows say bf16.
func TestTrainPrecision(t *testing.T) {
	dir := deviceAdultDir(t, 240, 200)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--precision", "bf16", "--device", "cpu"}, "--precision bf16"},
		{[]string{"--precision", "bf16", "--float64"}, "--precision bf16 with --float64"},
		{[]string{"--precision", "fp16"}, "--precision \"fp16\": want fp32 or bf16"},
		{[]string{"--device-timeout", "0s"}, "--device-timeout"},
	} {
		if code, _, errOut := runCmd(t, deviceTrainArgs(dir, tc.args...)...); code != 2 || !strings.Contains(errOut, tc.want) {
			t.Fatalf("%v: exit %d, %q; want 2 naming %q", tc.args, code, errOut, tc.want)
		}
	}
	if code, _, errOut := runCmd(t, "bench", "step", "--precision", "bf16", "--device", "cpu"); code != 2 || !strings.Contains(errOut, "--precision bf16") {
		t.Fatalf("bench step --precision bf16 --device cpu: exit %d, %q", code, errOut)
	}
	t.Setenv(cuda.EnvLibCUDA, "/nonexistent/libcuda.so.1")
	code, out, errOut := runCmd(t, deviceTrainArgs(dir, "--precision", "bf16", "--device", "auto")...)
	if code != 0 || strings.Count(errOut, "bf16 applies on the GPU only") != 1 || lastJSON(t, out)["precision"] != "fp32" {
		t.Fatalf("auto bf16 without a GPU: exit %d, precision %v, %q", code, lastJSON(t, out)["precision"], errOut)
	}
	selftestFake(t)
	res := map[string]map[string]any{}
	for _, p := range []string{"fp32", "bf16"} {
		code, out, errOut := runCmd(t, deviceTrainArgs(dir, "--device", "cuda", "--precision", p)...)
		if code != 0 {
			t.Fatalf("--precision %s: exit %d: %s", p, code, errOut)
		}
		res[p] = lastJSON(t, out)
		if res[p]["precision"] != p || res[p]["device"] != "cuda" {
			t.Fatalf("--precision %s: precision %v, device %v", p, res[p]["precision"], res[p]["device"])
		}
	}
	for _, k := range []string{"epsilon", "steps", "sigma", "guarantee"} {
		if !reflect.DeepEqual(res["fp32"][k], res["bf16"][k]) {
			t.Errorf("%s: bf16 %v, fp32 %v", k, res["bf16"][k], res["fp32"][k])
		}
	}
	if res["fp32"]["params_digest"] == res["bf16"]["params_digest"] {
		t.Error("bf16 and fp32 parameters are bit-identical: bf16 not used")
	}
	code, out, errOut = runCmd(t, "bench", "step", "--device", "cuda", "--precision", "bf16", "--dataset", "synthetic", "--model", "mlp", "--hidden", "8",
		"--batch-sizes", "16", "--min-steps", "1", "--min-time", "0.01", "--json")
	if code != 0 {
		t.Fatalf("bench step bf16: exit %d: %s", code, errOut)
	}
	rows := lastJSON(t, out)["rows"].([]any)
	if len(rows) != 1 || rows[0].(map[string]any)["precision"] != "bf16" || !strings.Contains(out, "cuda (bf16)") {
		t.Fatalf("bench step bf16 rows %v\n%s", rows, out)
	}
}

// deviceMNISTDir writes a small MNIST-format dataset (IDX files of 28×28 images whose label
// is the position of a bright square) for the CNN on the fake driver.
func deviceMNISTDir(t *testing.T, train, test int) string {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(8, 9))
	write := func(prefix string, n int) {
		img, lbl := make([]byte, n*28*28), make([]byte, n)
		for i := range lbl {
			lbl[i] = byte(rng.IntN(10))
			for k := range 28 * 28 {
				img[i*784+k] = byte(rng.IntN(40))
			}
			y0, x0 := 2+int(lbl[i])/5*12, 2+int(lbl[i])%5*5
			for y := y0; y < y0+8; y++ {
				for x := x0; x < x0+4; x++ {
					img[i*784+y*28+x] = byte(200 + rng.IntN(56))
				}
			}
		}
		writeIDX(t, filepath.Join(dir, prefix+"-images-idx3-ubyte"), []uint32{uint32(n), 28, 28}, img)
		writeIDX(t, filepath.Join(dir, prefix+"-labels-idx1-ubyte"), []uint32{uint32(n)}, lbl)
	}
	write("train", train)
	write("t10k", test)
	return dir
}

// TestTrainDeviceCNN: `dpsgd train --model cnn` on MNIST-format data trains on the fake GPU
// with --device cuda, and --device auto picks the GPU for it too (no line on stderr saying
// otherwise); both give the --device cpu run's steps, ε and guarantee exactly and its test
// accuracy within one test example per 1% (the float32 sums of the forward and backward
// passes differ in order only).
func TestTrainDeviceCNN(t *testing.T) {
	selftestFake(t)
	dir := deviceMNISTDir(t, 240, 100)
	res := map[string]map[string]any{}
	for _, dev := range []string{"cpu", "cuda", "auto"} {
		code, out, errOut := runCmd(t, "train", "--dataset", "mnist", "--data-dir", dir, "--model", "cnn", "--hidden", "16", "--epochs", "1",
			"--batch-size", "60", "--physical-batch", "32", "--sigma", "1.2", "--seed", "1", "--quiet", "--json", "--allow-chance", "--device", dev)
		if code != 0 {
			t.Fatalf("--device %s: exit %d: %s", dev, code, errOut)
		}
		if strings.Contains(errOut, "running on the CPU") {
			t.Fatalf("--device %s: %q", dev, errOut)
		}
		res[dev] = lastJSON(t, out)
	}
	for _, dev := range []string{"cuda", "auto"} {
		if res[dev]["device"] != "cuda" || res[dev]["model"] != "cnn" {
			t.Fatalf("--device %s: device %v, model %v", dev, res[dev]["device"], res[dev]["model"])
		}
		for _, k := range []string{"epsilon", "steps", "sigma", "guarantee", "epochs_run"} {
			if !reflect.DeepEqual(res["cpu"][k], res[dev][k]) {
				t.Errorf("--device %s: %s %v, cpu %v", dev, k, res[dev][k], res["cpu"][k])
			}
		}
		if d := math.Abs(res[dev]["test_accuracy"].(float64) - res["cpu"]["test_accuracy"].(float64)); d > 1.0/100+1e-12 {
			t.Errorf("--device %s: test accuracy %v, cpu %v", dev, res[dev]["test_accuracy"], res["cpu"]["test_accuracy"])
		}
	}
	if res["cuda"]["params_digest"] != res["auto"]["params_digest"] {
		t.Error("--device auto and cuda: different parameters (the device runs are deterministic)")
	}
}

// TestTrainDeviceStack: `dpsgd train --model FILE` with a layer stack of the layers the device
// runs (conv2d, groupnorm, gelu, avgpool, a residual block of a convolution and a tempered sigmoid,
// maxpool, flatten, dense) trains on the fake GPU with --device cuda, and --device auto picks
// the GPU for it (no line saying otherwise); both give the --device cpu run's steps, ε and
// ledger exactly, and its final parameters (checkpoints) within 2e-6·(1 + |w|).
func TestTrainDeviceStack(t *testing.T) {
	selftestFake(t)
	dir := deviceMNISTDir(t, 240, 100)
	file := filepath.Join(t.TempDir(), "stack.json")
	if err := os.WriteFile(file, []byte(`{"layers": [{"type": "conv2d", "filters": 4, "kernel": 5, "stride": 2, "pad": 1}, {"type": "groupnorm", "groups": 2}, {"type": "gelu"},
		{"type": "avgpool", "kernel": 2}, {"type": "residual", "body": [{"type": "conv2d", "filters": 4, "kernel": 3, "pad": 1}, {"type": "tempered_sigmoid"}]},
		{"type": "maxpool", "kernel": 2, "stride": 1}, {"type": "flatten"}, {"type": "dense", "units": 10}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ckDir := t.TempDir()
	res := map[string]map[string]any{}
	for _, dev := range []string{"cpu", "cuda", "auto"} {
		code, out, errOut := runCmd(t, "train", "--dataset", "mnist", "--data-dir", dir, "--model", file, "--epochs", "1",
			"--batch-size", "60", "--physical-batch", "32", "--sigma", "1.2", "--seed", "1", "--quiet", "--json", "--allow-chance",
			"--device", dev, "--checkpoint", filepath.Join(ckDir, dev+".ckpt"))
		if code != 0 {
			t.Fatalf("--device %s: exit %d: %s", dev, code, errOut)
		}
		if strings.Contains(errOut, "running on the CPU") {
			t.Fatalf("--device %s: %q", dev, errOut)
		}
		res[dev] = lastJSON(t, out)
	}
	cpuCk, err := checkpoint.Load(filepath.Join(ckDir, "cpu.ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dev := range []string{"cuda", "auto"} {
		if res[dev]["device"] != "cuda" {
			t.Fatalf("--device %s: device %v", dev, res[dev]["device"])
		}
		for _, k := range []string{"epsilon", "steps", "sigma", "guarantee", "epochs_run", "ledger"} {
			if !reflect.DeepEqual(res["cpu"][k], res[dev][k]) {
				t.Errorf("--device %s: %s %v, cpu %v", dev, k, res[dev][k], res["cpu"][k])
			}
		}
		ck, err := checkpoint.Load(filepath.Join(ckDir, dev+".ckpt"))
		if err != nil {
			t.Fatal(err)
		}
		if len(ck.Params) != len(cpuCk.Params) {
			t.Fatalf("--device %s: %d parameter tensors, cpu %d", dev, len(ck.Params), len(cpuCk.Params))
		}
		for i := range cpuCk.Params {
			for j, w := range cpuCk.Params[i] {
				if d := math.Abs(ck.Params[i][j]-w) / (1 + math.Abs(w)); !(d <= 2e-6) {
					t.Fatalf("--device %s: parameter %d[%d]: %v, cpu %v", dev, i, j, ck.Params[i][j], w)
				}
			}
		}
	}
	if res["cuda"]["params_digest"] == res["cpu"]["params_digest"] {
		t.Error("cuda and cpu parameters are bit-identical: the device did not run")
	}
}
