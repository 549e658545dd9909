package main

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/model"
)

// TestModelsLayerKinds: dpsgd models lists the layer kinds of model files, BatchNorm not among
// them (it is refused, and the text says what to use instead).
func TestModelsLayerKinds(t *testing.T) {
	code, out, errOut := runCmd(t, "models", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		LayerKinds map[string]string `json:"layer_kinds"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got.LayerKinds["groupnorm"]; !ok || got.LayerKinds["conv2d"] == "" {
		t.Errorf("layer kinds %v", got.LayerKinds)
	}
	if _, ok := got.LayerKinds["batchnorm"]; ok {
		t.Error("batchnorm listed as a layer kind")
	}
	code, out, _ = runCmd(t, "models")
	if code != 0 || !strings.Contains(out, "batchnorm         refused") || !strings.Contains(out, "groupnorm") {
		t.Errorf("table: exit %d\n%s", code, out)
	}
}

const stackFile = `{"layers": [{"type": "dense", "units": 32}, {"type": "layernorm"}, {"type": "gelu"},
 {"type": "residual", "body": [{"type": "dense", "units": 32}, {"type": "tempered_sigmoid"}]},
 {"type": "dense", "units": 10}]}`

// TestTrainModelFile: dpsgd train --model FILE trains the described stack (its parameter
// count, worked by hand, in the JSON), saves it without safetensors, and eval and predict read
// the saved model: eval's accuracy is the run's.
func TestTrainModelFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "stack.json")
	if err := os.WriteFile(file, []byte(stackFile), 0o644); err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(dir, "stack.dpsgd")
	code, out, errOut := runCmd(t, "train", "--model", file, "--epochs", "1", "--seed", "1", "--quiet", "--json", "--allow-chance", "--save", saved)
	if code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	m := lastJSON(t, out)
	// dense 32·32+32, layernorm 2·32, dense 32·32+32, dense 32·10+10 (synthetic: 32 features, 10 classes)
	if m["model"] != file || m["params"] != float64((32*32+32)+64+(32*32+32)+(32*10+10)) {
		t.Errorf("model %v, params %v", m["model"], m["params"])
	}
	sm, _ := m["saved_model"].(map[string]any)
	if sm["file"] != saved || sm["safetensors"] != "" {
		t.Errorf("saved_model %v: want the file and no safetensors", sm)
	}
	if _, err := os.Stat(saved + ".safetensors"); !os.IsNotExist(err) {
		t.Errorf("a safetensors file was written for a stack: %v", err)
	}
	code, out, errOut = runCmd(t, "eval", "--model", saved)
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, errOut)
	}
	var ev evalJSON
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Accuracy != m["test_accuracy"] {
		t.Errorf("eval accuracy %v, train's %v", ev.Accuracy, m["test_accuracy"])
	}
	a, err := model.ReadFile(saved)
	if err != nil || a.Arch.Kind != nn.KindStack || len(a.Arch.Stack) != 5 {
		t.Fatalf("saved arch: %v %+v", err, a)
	}
}

// TestTrainModelFileErrors: a bad model file or flag is one line on stderr naming the layer
// and the problem, exit 2, before any training.
func TestTrainModelFileErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", stackFile)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--model", filepath.Join(dir, "absent.json")}, "or a model file (docs/models.md); no such file"},
		{[]string{"--model", write("bn.json", `{"layers": [{"type": "dense", "units": 8}, {"type": "batchnorm"}, {"type": "dense", "units": 10}]}`)}, "layer 1 (batchnorm): batchnorm mixes the examples"},
		{[]string{"--model", write("classes.json", `{"layers": [{"type": "dense", "units": 7}]}`)}, "the last layer gives [7], want the 10 class logits"},
		{[]string{"--model", write("conv.json", `{"layers": [{"type": "conv2d", "filters": 2, "kernel": 3}, {"type": "flatten"}, {"type": "dense", "units": 10}]}`)}, "layer 0.conv2d: conv2d needs an image input"},
		{[]string{"--model", write("units.json", `{"layers": [{"type": "dense", "units": -3}]}`)}, `layer 0 (dense): "units" = -3: want 1 to 1048576`},
		// Within every per-layer limit, but 250 activations of 2²⁰ values each at the default
		// physical batch: about 1 TiB for one step.
		{[]string{"--model", write("wide.json", `{"layers": [{"type": "dense", "units": 1048576}`+strings.Repeat(`, {"type": "relu"}`, 250)+`, {"type": "dense", "units": 10}]}`)}, "GiB: want at most 64 GiB (lower the physical batch"},
		{[]string{"--model", good, "--hidden", "16"}, "--hidden shapes the presets only"},
		// A stack is the device's too: without a driver, the refusal names the library.
		{[]string{"--model", good, "--device", "cuda", "--sigma", "1"}, "dpsgd-test-no-gpu"},
	}
	for _, tc := range cases {
		args := append([]string{"train", "--epochs", "1", "--quiet", "--allow-chance"}, tc.args...)
		code, _, errOut := runCmd(t, args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line with %q", tc.args, code, errOut, tc.want)
		}
	}
}

// TestPredictStackImages: predict on a saved image stack model (conv2d first, groupnorm, average
// pooling) reads MNIST IDX images and gives the engine's classes.
func TestPredictStackImages(t *testing.T) {
	arch, err := nn.ParseModelFile([]byte(`{"layers": [{"type": "conv2d", "filters": 4, "kernel": 5, "stride": 3, "pad": 1},
		{"type": "groupnorm", "groups": 2}, {"type": "relu"}, {"type": "avgpool", "kernel": 2}, {"type": "flatten"}, {"type": "dense", "units": 10}]}`), []int{1, 28, 28}, 10)
	if err != nil {
		t.Fatal(err)
	}
	a := handArtifact(t, arch, "mnist", 7)
	dir := t.TempDir()
	path := filepath.Join(dir, "m.dpsgd")
	if err := model.WriteFile(path, a); err != nil {
		t.Fatal(err)
	}
	const n, d = 5, 28 * 28
	pixels := make([]byte, n*d)
	x := make([]float32, n*d)
	for i := range pixels {
		pixels[i] = byte((i*13 + i/d*57) % 256)
		x[i] = datasets.MNISTPixel(pixels[i])
	}
	idx := append([]byte{0, 0, 8, 3}, binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, n), 28), 28)...)
	p := filepath.Join(dir, "images.idx")
	if err := os.WriteFile(p, append(idx, pixels...), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := predictClasses(t, "--model", path, "--data", p), argmaxes(t, a, x); !slices.Equal(got, want) || len(got) != n {
		t.Errorf("classes %v, the engine's %v", got, want)
	}
}
