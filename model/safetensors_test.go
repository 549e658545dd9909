package model

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/engine/nn"
	"gorgonia.org/tensor"
)

// torchForward is the oracle: PyTorch's semantics of the nn.Sequential equivalent to arch
// (Conv2d with zero padding, MaxPool2d, Flatten in channel-major order, Linear as x·Wᵀ + b), run
// one example at a time on C×H×W arrays over the named tensors as WriteSafetensors lays them
// out. It is written from PyTorch's definitions, not from engine/nn's layouts.
func torchForward(t *testing.T, arch nn.Arch, ts map[string]Tensor, x []float64) []float64 {
	t.Helper()
	act := math.Tanh
	if arch.Activation == nn.ReLU {
		act = func(v float64) float64 { return max(v, 0) }
	}
	get := func(name string, shape ...int) []float64 {
		tt, ok := ts[name]
		if !ok || !slices.Equal(tt.Shape, shape) {
			t.Fatalf("tensor %s: %v, want shape %v", name, tt.Shape, shape)
		}
		return tt.Data
	}
	idx := 0
	vec := x
	if len(arch.Conv) > 0 {
		c, h, w := arch.Input[0], arch.Input[1], arch.Input[2]
		img := x // img[(ch·h + y)·w + x]
		for _, cs := range arch.Conv {
			k, s, p, f := cs.Kernel, cs.Stride, cs.Pad, cs.Filters
			wt := get(fmt.Sprintf("%d.weight", idx), f, c, k, k)
			bias := get(fmt.Sprintf("%d.bias", idx), f)
			oh, ow := (h+2*p-k)/s+1, (w+2*p-k)/s+1
			out := make([]float64, f*oh*ow)
			for o := range f {
				for oy := range oh {
					for ox := range ow {
						sum := bias[o]
						for ch := range c {
							for ky := range k {
								for kx := range k {
									y, xx := oy*s-p+ky, ox*s-p+kx
									if y >= 0 && y < h && xx >= 0 && xx < w {
										sum += wt[((o*c+ch)*k+ky)*k+kx] * img[(ch*h+y)*w+xx]
									}
								}
							}
						}
						out[(o*oh+oy)*ow+ox] = act(sum)
					}
				}
			}
			img, c, h, w = out, f, oh, ow
			idx += 2
			if cs.PoolKernel > 0 {
				pk, ps := cs.PoolKernel, cs.PoolStride
				ph, pw := (h-pk)/ps+1, (w-pk)/ps+1
				pooled := make([]float64, c*ph*pw)
				for ch := range c {
					for y := range ph {
						for xx := range pw {
							m := math.Inf(-1)
							for ky := range pk {
								for kx := range pk {
									m = max(m, img[(ch*h+y*ps+ky)*w+xx*ps+kx])
								}
							}
							pooled[(ch*ph+y)*pw+xx] = m
						}
					}
				}
				img, h, w = pooled, ph, pw
				idx++
			}
		}
		vec = img // Flatten: channel, row, column
		idx++
	}
	widths := append(append([]int(nil), arch.Hidden...), arch.Classes)
	for i, out := range widths {
		in := len(vec)
		wt := get(fmt.Sprintf("%d.weight", idx), out, in)
		bias := get(fmt.Sprintf("%d.bias", idx), out)
		y := make([]float64, out)
		for o := range out {
			sum := bias[o]
			for j := range in {
				sum += wt[o*in+j] * vec[j]
			}
			y[o] = sum
			if i < len(widths)-1 {
				y[o] = act(sum)
			}
		}
		vec = y
		idx += 2
	}
	return vec
}

// TestSafetensorsMatchesTorchOracle: the safetensors weights, run by the PyTorch-semantics
// oracle, give the engine's logits (float64: to 1e-12 relative), for every kind of model;
// the names and shapes are those of the equivalent nn.Sequential, and the file's metadata names
// that module.
func TestSafetensorsMatchesTorchOracle(t *testing.T) {
	for name, arch := range testArches() {
		a := testArtifact(t, arch, tensor.Float64, 11)
		data, err := EncodeSafetensors(a)
		if err != nil {
			t.Fatal(err)
		}
		st, err := DecodeSafetensors(data)
		if err != nil {
			t.Fatal(err)
		}
		const n = 3
		x := inputs(arch, n)
		want := logits(t, arch, a.Params, x, n)
		d, k := arch.InputSize(), arch.Classes
		for i := range n {
			got := torchForward(t, arch, st.Tensors, x[i*d:(i+1)*d])
			for j := range k {
				if w := want[i*k+j]; math.Abs(got[j]-w) > 1e-12*(1+math.Abs(w)) {
					t.Errorf("%s: example %d logit %d: oracle %v, engine %v", name, i, j, got[j], w)
				}
			}
		}
		if len(st.Tensors) != 2*(len(arch.Conv)+len(arch.Hidden)+1) {
			t.Errorf("%s: %d tensors", name, len(st.Tensors))
		}
		seq, _ := TorchSequential(arch)
		if st.Metadata["dpsgd.sequential"] != seq || st.Metadata["format"] != "pt" {
			t.Errorf("%s: metadata %v", name, st.Metadata)
		}
	}
	if seq, _ := TorchSequential(testArches()["mlp"]); seq != "nn.Sequential(nn.Linear(9, 6), nn.ReLU(), nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 4))" {
		t.Errorf("mlp: %s", seq)
	}
	want := "nn.Sequential(nn.Conv2d(1, 16, kernel_size=8, stride=2, padding=3), nn.Tanh(), nn.MaxPool2d(kernel_size=2, stride=1), " +
		"nn.Conv2d(16, 32, kernel_size=4, stride=2, padding=0), nn.Tanh(), nn.MaxPool2d(kernel_size=2, stride=1), nn.Flatten(), " +
		"nn.Linear(512, 32), nn.Tanh(), nn.Linear(32, 10))"
	if seq, _ := TorchSequential(testArches()["cnn-mnist"]); seq != want {
		t.Errorf("mnist cnn: %s\nwant %s", seq, want)
	}
}

// TestSafetensorsLayout: the header length is a multiple of 8 and the header is padded with
// spaces; the float32 weights are the dense weights transposed, bit for bit; the metadata holds
// the public description only; a float64 model is written as F64.
func TestSafetensorsLayout(t *testing.T) {
	a := testArtifact(t, testArches()["logreg"], tensor.Float32, 4)
	data, err := EncodeSafetensors(a)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(data)
	if n%8 != 0 || int(n) > len(data)-8 {
		t.Fatalf("header length %d", n)
	}
	head := string(data[8 : 8+n])
	if trimmed := strings.TrimRight(head, " "); !strings.HasSuffix(trimmed, "}") || len(head)-len(trimmed) >= 8 {
		t.Errorf("header %q: want JSON padded with fewer than 8 spaces", head)
	}
	st, err := DecodeSafetensors(data)
	if err != nil {
		t.Fatal(err)
	}
	w := a.Params.List[0].Value.Data().([]float32) // 7×3
	tw := st.Tensors["0.weight"]
	if tw.Dtype != DtypeF32 || !slices.Equal(tw.Shape, []int{3, 7}) {
		t.Fatalf("0.weight: %s %v", tw.Dtype, tw.Shape)
	}
	for i := range 7 {
		for o := range 3 {
			if tw.Data[o*7+i] != float64(w[i*3+o]) {
				t.Fatalf("0.weight[%d][%d] = %v, want W[%d][%d] = %v", o, i, tw.Data[o*7+i], i, o, w[i*3+o])
			}
		}
	}
	if b := st.Tensors["0.bias"]; !slices.Equal(b.Shape, []int{3}) || b.Data[2] != float64(a.Params.List[1].Value.Data().([]float32)[2]) {
		t.Errorf("0.bias: %v %v", b.Shape, b.Data)
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range st.Metadata {
			if !yield(k) {
				return
			}
		}
	})
	if want := []string{"dpsgd.arch", "dpsgd.delta", "dpsgd.epsilon", "dpsgd.guarantee", "dpsgd.preprocessing", "dpsgd.sequential", "format"}; !slices.Equal(keys, want) {
		t.Errorf("metadata keys %v, want %v", keys, want)
	}
	if st.Metadata["dpsgd.epsilon"] != strconv.FormatFloat(a.Guarantee.Epsilon, 'g', -1, 64) || st.Metadata["dpsgd.guarantee"] != a.Guarantee.Statement {
		t.Errorf("metadata %v", st.Metadata)
	}
	b := testArtifact(t, testArches()["logreg"], tensor.Float64, 4)
	data, err = EncodeSafetensors(b)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := DecodeSafetensors(data); err != nil || st.Tensors["0.bias"].Dtype != DtypeF64 {
		t.Errorf("float64 model: %v", err)
	}
	var buf bytes.Buffer
	if err := WriteSafetensors(&buf, a); err != nil {
		t.Fatal(err)
	}
	if st2, err := ReadSafetensors(&buf); err != nil || !reflect.DeepEqual(st2, st) && len(st2.Tensors) != 2 {
		t.Errorf("ReadSafetensors: %v", err)
	}
}

// safetensorsFile builds a file from a header object and a buffer.
func safetensorsFile(header string, buf []byte) []byte {
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(out, header...), buf...)
}

// TestDecodeSafetensorsRefuses: every deviation from the specification (and dtypes other than
// F32 and F64) is an error wrapping ErrFormat that says what is wrong.
func TestDecodeSafetensorsRefuses(t *testing.T) {
	buf8 := make([]byte, 8)
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"short", []byte{1, 2, 3}, "shorter than"},
		{"header too long", binary.LittleEndian.AppendUint64(nil, 1<<40), "header of"},
		{"header past the file", safetensorsFile(`{}`, nil)[:9], "header of"},
		{"not an object", safetensorsFile(`[1]`, nil), "JSON object"},
		{"bad JSON", safetensorsFile(`{"a":`, nil), "header JSON"},
		{"trailing JSON", safetensorsFile(`{} {}`, nil), "after the header"},
		{"duplicate", safetensorsFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, buf8), "twice"},
		{"dtype", safetensorsFile(`{"a":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]}}`, buf8), `dtype "BF16"`},
		{"missing field", safetensorsFile(`{"a":{"dtype":"F32","shape":[2]}}`, buf8), "want dtype, shape and data_offsets"},
		{"unknown field", safetensorsFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}}`, buf8), "unknown field"},
		{"negative dim", safetensorsFile(`{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, buf8), "shape"},
		{"wrong span", safetensorsFile(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, buf8), "data offsets"},
		{"past the buffer", safetensorsFile(`{"a":{"dtype":"F64","shape":[2],"data_offsets":[0,16]}}`, buf8), "data offsets"},
		{"hole", safetensorsFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, buf8), "without holes"},
		{"overlap", safetensorsFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, buf8), "without holes"},
		{"uncovered tail", safetensorsFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, buf8), "want all of it"},
		{"metadata not strings", safetensorsFile(`{"__metadata__":{"a":1}}`, nil), "__metadata__"},
		{"metadata null", safetensorsFile(`{"__metadata__":null}`, nil), "__metadata__"},
	} {
		_, err := DecodeSafetensors(c.data)
		if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an ErrFormat saying %q", c.name, err, c.want)
		}
	}
	st, err := DecodeSafetensors(safetensorsFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}, "e":{"dtype":"F64","shape":[0,5],"data_offsets":[8,8]}}  `, buf8))
	if err != nil || len(st.Tensors["a"].Data) != 2 || len(st.Tensors["e"].Data) != 0 || len(st.Metadata) != 0 {
		t.Errorf("a valid file with an empty tensor: %+v, %v", st, err)
	}
}

// FuzzSafetensors: DecodeSafetensors never panics and refuses with ErrFormat; a file it
// accepts has tensors whose values fill their shapes, and encoding what it read gives a file
// that reads back the same.
func FuzzSafetensors(f *testing.F) {
	for _, name := range []string{"logreg", "cnn"} {
		data, err := EncodeSafetensors(testArtifact(f, testArches()[name], tensor.Float32, 1))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add(safetensorsFile(`{"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},"__metadata__":{"k":"v"}}`, make([]byte, 8)))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := DecodeSafetensors(data)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		var names []string
		var ts []Tensor
		for name, tt := range st.Tensors {
			n := 1
			for _, d := range tt.Shape {
				n *= d
			}
			if n != len(tt.Data) {
				t.Fatalf("tensor %s: shape %v, %d values", name, tt.Shape, len(tt.Data))
			}
			names = append(names, name)
			ts = append(ts, tt)
		}
		again, err := encodeSafetensors(names, ts, st.Metadata)
		if err != nil {
			t.Fatalf("re-encoding: %v", err)
		}
		st2, err := DecodeSafetensors(again)
		if err != nil {
			t.Fatalf("re-encoded file: %v", err)
		}
		for name, tt := range st.Tensors {
			u := st2.Tensors[name]
			if u.Dtype != tt.Dtype || !slices.Equal(u.Shape, tt.Shape) || !sameBits(u.Data, tt.Data) {
				t.Fatalf("tensor %s changed in the round trip", name)
			}
		}
		if !reflect.DeepEqual(st.Metadata, st2.Metadata) {
			t.Fatalf("metadata changed in the round trip")
		}
	})
}

// runTorchCheck runs testdata/torch_check.py with args under the first Python that imports
// torch ($DPSGD_PYTHON, python3, Debian's /usr/bin/python3) and returns what it printed; the
// test is skipped when none does.
func runTorchCheck(t *testing.T, args []string) []byte {
	t.Helper()
	for _, py := range []string{os.Getenv("DPSGD_PYTHON"), "python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(py)
		if py == "" || err != nil {
			continue
		}
		cmd := exec.Command(path, append([]string{filepath.Join("testdata", "torch_check.py")}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil && strings.Contains(stderr.String(), "No module named 'torch'") {
			continue
		}
		if err != nil {
			t.Fatalf("%s torch_check.py: %v\n%s", path, err, stderr.String())
		}
		return out
	}
	t.Skip("no python3 with torch (set DPSGD_PYTHON, or apt-get install python3-torch)")
	return nil
}

// TestPyTorchLoadsSafetensors: real PyTorch builds the module the metadata names, loads the
// weights strictly (every name and shape) from a pure-Python parse of the file
// (testdata/torch_check.py), and gives the engine's logits: float32 to 2e-5, float64 to 1e-10
// (relative to the logits' scale), for every kind of model.
func TestPyTorchLoadsSafetensors(t *testing.T) {
	dir := t.TempDir()
	type want struct {
		name  string
		dt    tensor.Dtype
		n, k  int
		value []float64
	}
	var args []string
	var wants []want
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range testArches() {
			if !yield(k) {
				return
			}
		}
	}) {
		arch := testArches()[name]
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			a := testArtifact(t, arch, dt, 21)
			data, err := EncodeSafetensors(a)
			if err != nil {
				t.Fatal(err)
			}
			base := filepath.Join(dir, fmt.Sprintf("%s-%v", name, dt))
			if err := os.WriteFile(base+".safetensors", data, 0o644); err != nil {
				t.Fatal(err)
			}
			const n = 4
			x := inputs(arch, n)
			if dt == tensor.Float32 {
				for i, v := range x {
					x[i] = float64(float32(v))
				}
			}
			shape := append([]int{n}, arch.Input...)
			in, _ := json.Marshal(map[string]any{"shape": shape, "x": x})
			if err := os.WriteFile(base+".json", in, 0o644); err != nil {
				t.Fatal(err)
			}
			args = append(args, base+".safetensors", base+".json")
			wants = append(wants, want{name, dt, n, arch.Classes, logits(t, arch, a.Params, x, n)})
		}
	}
	out := runTorchCheck(t, args)
	var res struct {
		Logits [][][]float64 `json:"logits"`
		Torch  string        `json:"torch"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res.Logits) != len(wants) {
		t.Fatalf("torch_check.py printed %q: %v", out, err)
	}
	for i, w := range wants {
		tol := 1e-10
		if w.dt == tensor.Float32 {
			tol = 2e-5
		}
		got := res.Logits[i]
		if len(got) != w.n {
			t.Fatalf("%s %v: %d rows of logits", w.name, w.dt, len(got))
		}
		for r := range w.n {
			for j := range w.k {
				if e := w.value[r*w.k+j]; len(got[r]) != w.k || math.Abs(got[r][j]-e) > tol*(1+math.Abs(e)) {
					t.Errorf("%s %v (torch %s): row %d: logits %v, engine %v", w.name, w.dt, res.Torch, r, got[r], w.value[r*w.k:(r+1)*w.k])
					break
				}
			}
		}
	}
}
