package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dpsgd/dpsgd/cuda"
	kcuda "github.com/dpsgd/dpsgd/kernels/cuda"
)

// selftestFake builds the fake CUDA driver (cuda/testdata/fake) and points DPSGD_LIBCUDA and
// DPSGD_LIBCUBLAS at it.
//
// It is built once per test binary: a process must not load two fake drivers (the second
// cuBLAS would bind to the first driver by soname). Later tests reuse the paths of the first
// build; the loader finds the libraries already loaded under those names.
func selftestFake(t *testing.T) {
	t.Helper()
	selftestFakeOnce.Do(func() {
		selftestFakeLibs[0], selftestFakeLibs[1], selftestFakeErr = cuda.BuildFakeDriver(t.TempDir(), kcuda.Source())
	})
	if selftestFakeErr != nil {
		t.Skip("fake CUDA driver unavailable: " + selftestFakeErr.Error())
	}
	t.Setenv(cuda.EnvLibCUDA, selftestFakeLibs[0])
	t.Setenv(cuda.EnvLibCUBLAS, selftestFakeLibs[1])
}

var (
	selftestFakeOnce sync.Once
	selftestFakeLibs [2]string
	selftestFakeErr  error
)

func TestSelftestFake(t *testing.T) {
	selftestFake(t)
	var o, e strings.Builder
	err := cmdSelftest(t.Context(), []string{"--draws", "200000", "--batch", "16", "--reps", "1", "--copy-mib", "4", "--json"}, &o, &e)
	if err != nil {
		t.Fatalf("selftest: %v\n%s%s", err, o.String(), e.String())
	}
	m := lastJSON(t, o.String())
	if m["ok"] != true || m["noise_ok"] != true || !strings.Contains(m["device"].(string), "FakeGPU-0") {
		t.Fatalf("result %v", m)
	}
	ptx := m["ptx"].(map[string]any)
	if !strings.Contains(ptx["source"].(string), "embedded") || ptx["source_matches"] != true || ptx["kernels"].(float64) != float64(len(kcuda.Entries())) ||
		!strings.Contains(ptx["compiler"].(string), "clang") && !strings.Contains(ptx["compiler"].(string), "nvcc") {
		t.Fatalf("ptx %v", ptx)
	}
	checks := m["checks"].([]any)
	noise, exact := 0, map[string]bool{}
	if len(checks) < 9 {
		t.Fatalf("%d checks", len(checks))
	}
	for _, c := range checks {
		c := c.(map[string]any)
		if c["ok"] != true || c["max_rel_err"] == nil {
			t.Fatalf("check %v", c)
		}
		// Same stream: every value bit-identical to the CPU's (kernels.AddGaussianAt,
		// AddLaplace, AddBall), so no error at all and no mismatching value.
		if strings.Contains(c["kernel"].(string), "same") {
			if c["max_rel_err"].(float64) != 0 || c["tolerance"].(float64) != 0 || c["mismatches"] != 0.0 {
				t.Fatalf("noise stream differs from the CPU's: %v", c)
			}
			noise++
		}
		if k := c["kernel"].(string); strings.Contains(k, "bit-exact") {
			if c["mismatches"] != 0.0 {
				t.Fatalf("%s differs from engine/nn: %v", k, c)
			}
			exact[k] = true
		}
	}
	if noise != 3 {
		t.Fatalf("%d noise checks (gaussian, laplace, ball), want 3", noise)
	}
	// Every convolution kernel of the MNIST CNN's two layers is checked: im2col (images,
	// then row layout), col2im, max pooling both ways, the per-example gradients and Σcᵢ·Ĝᵢ.
	for _, k := range []string{"conv1 im2col", "conv1 maxpool", "conv1 maxpool backward", "conv1 clipped sum Σcᵢ·Ĝᵢ",
		"conv2 im2col", "conv2 col2im", "conv2 maxpool", "conv2 maxpool backward", "conv2 clipped sum Σcᵢ·Ĝᵢ",
		"avgpool", "avgpool backward", "residual sum add_f32", "groupnorm", "groupnorm backward", "embedding"} {
		if !exact[k+" (bit-exact)"] {
			t.Fatalf("no bit-exact check %q among %v", k, exact)
		}
	}
	found := false
	for _, c := range checks {
		found = found || strings.HasPrefix(c.(map[string]any)["kernel"].(string), "conv2 per-example grads")
	}
	if !found {
		t.Fatal("no check of the strided-batched per-example gradients")
	}
	// The layer stacks' functions, both ways.
	for k, tol := range map[string]float64{"gelu": 1e-5, "gelu backward": 1e-5, "tempered_sigmoid": 1e-5, "tempered_sigmoid backward": 1e-5,
		"embedding norms (grouped by id)": 1e-12} {
		found := false
		for _, c := range checks {
			c := c.(map[string]any)
			found = found || c["kernel"] == k && c["tolerance"] == tol
		}
		if !found {
			t.Fatalf("no check %q", k)
		}
	}
	for _, k := range []string{"clip_noise_gb_per_s", "noise_gsamples_per_s", "dp_over_nonprivate", "copy_gb_per_s", "clip_noise_over_copy"} {
		if v, ok := m[k].(float64); !ok || !(v > 0) {
			t.Fatalf("%s = %v", k, m[k])
		}
	}
}

// TestSelftestPTXFile: --ptx loads another module and the result says which; a PTX without
// mkptx.sh's header is reported as not built from this binary's source; a missing file is a
// usage error naming the flag.
func TestSelftestPTXFile(t *testing.T) {
	selftestFake(t)
	text := kcuda.PTX()
	body := text[strings.Index(text, "\n//\n")+1:] // the PTX without mkptx.sh's three header lines
	path := filepath.Join(t.TempDir(), "other.ptx")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var o strings.Builder
	if err := cmdSelftest(t.Context(), []string{"--ptx", path, "--draws", "1000", "--bench=false", "--json"}, &o, &strings.Builder{}); err != nil {
		t.Fatalf("selftest --ptx: %v\n%s", err, o.String())
	}
	ptx := lastJSON(t, o.String())["ptx"].(map[string]any)
	if ptx["source"] != path || ptx["source_matches"] != false || ptx["compiler"] != "" || ptx["kernels"].(float64) != float64(len(kcuda.Entries())) {
		t.Fatalf("ptx %v", ptx)
	}
	err := cmdSelftest(t.Context(), []string{"--ptx", path + ".missing"}, &strings.Builder{}, &strings.Builder{})
	if _, ok := err.(usageError); !ok || !strings.Contains(err.Error(), "--ptx") {
		t.Fatalf("missing --ptx file: %T %v, want a usage error naming --ptx", err, err)
	}
}

func TestSelftestNoGPUIsUsageError(t *testing.T) {
	t.Setenv(cuda.EnvLibCUDA, "/nonexistent/libcuda.so.1")
	err := cmdSelftest(t.Context(), []string{"--bench=false"}, &strings.Builder{}, &strings.Builder{})
	if _, ok := err.(usageError); !ok || !strings.Contains(err.Error(), "nonexistent") {
		t.Fatalf("err = %v, want a usage error naming the library", err)
	}
	if err := cmdSelftest(t.Context(), []string{"--draws", "5"}, &strings.Builder{}, &strings.Builder{}); err == nil {
		t.Fatal("--draws 5 accepted")
	}
}

func TestDeviceResolve(t *testing.T) {
	t.Setenv(cuda.EnvLibCUDA, "/nonexistent/libcuda.so.1")
	var e strings.Builder
	use, err := deviceResolve("auto", cuda.Options{}, "", &e)
	if use || err != nil || !strings.Contains(e.String(), "running on the CPU") || strings.Count(e.String(), "\n") != 1 {
		t.Fatalf("auto without a GPU: %v %v %q", use, err, e.String())
	}
	if _, err := deviceResolve("cuda", cuda.Options{}, "", &e); err == nil {
		t.Fatal("--device cuda without a GPU accepted")
	} else if _, ok := err.(usageError); !ok {
		t.Fatalf("--device cuda: %T %v, want a usage error", err, err)
	}
	e.Reset()
	if use, err := deviceResolve("cpu", cuda.Options{}, "", &e); use || err != nil || e.Len() != 0 {
		t.Fatalf("cpu: %v %v %q", use, err, e.String())
	}
	if _, err := deviceResolve("tpu", cuda.Options{}, "", &e); err == nil {
		t.Fatal("--device tpu accepted")
	}
	selftestFake(t)
	for _, name := range []string{"auto", "cuda"} {
		e.Reset()
		if use, err := deviceResolve(name, cuda.Options{}, "", &e); !use || err != nil || e.Len() != 0 {
			t.Fatalf("%s with the fake GPU: %v %v %q", name, use, err, e.String())
		}
	}
}
