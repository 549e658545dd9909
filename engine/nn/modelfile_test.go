package nn

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"gorgonia.org/tensor"
)

// mnistCNNFile is the MNIST CNN preset (CNN) described as a model file.
const mnistCNNFile = `{"layers": [
  {"type": "conv2d", "filters": 16, "kernel": 8, "stride": 2, "pad": 3}, {"type": "tanh"},
  {"type": "maxpool", "kernel": 2, "stride": 1},
  {"type": "conv2d", "filters": 32, "kernel": 4, "stride": 2}, {"type": "tanh"},
  {"type": "maxpool", "kernel": 2, "stride": 1},
  {"type": "flatten"}, {"type": "dense", "units": 32}, {"type": "tanh"}, {"type": "dense", "units": 10}]}`

// TestModelFileMatchesPreset: the MNIST CNN described as a file has the preset's GEMM layers
// (shapes and positions), parameter count and initial values, and computes the same logits.
func TestModelFileMatchesPreset(t *testing.T) {
	a, err := ParseModelFile([]byte(mnistCNNFile), []int{1, 28, 28}, 10)
	if err != nil {
		t.Fatal(err)
	}
	p := CNN([]int{1, 28, 28}, 10, nil, Tanh)
	la, _ := a.Layers()
	lp, _ := p.Layers()
	if len(la) != len(lp) {
		t.Fatalf("%d GEMM layers, preset %d", len(la), len(lp))
	}
	for i := range la {
		if la[i].In != lp[i].In || la[i].Out != lp[i].Out || la[i].Positions != lp[i].Positions {
			t.Errorf("layer %d: %+v, preset %+v", i, la[i], lp[i])
		}
	}
	if a.NumParams() != p.NumParams() || p.NumParams() != 26010 {
		t.Errorf("parameters: file %d, preset %d, want 26010", a.NumParams(), p.NumParams())
	}
	pa, _ := NewParams(a, tensor.Float64, 5)
	pp, _ := NewParams(p, tensor.Float64, 5)
	for i := range pa.List {
		if !reflect.DeepEqual(pa.List[i].Value.Data(), pp.List[i].Value.Data()) {
			t.Fatalf("tensor %d: different initial values", i)
		}
	}
	logits := func(arch Arch, params *Params) []float64 {
		n, err := Build(arch, params, 2, false)
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		x := tensor.New(tensor.WithShape(2, 1, 28, 28), tensor.Of(tensor.Float64))
		for i, d := 0, x.Data().([]float64); i < len(d); i++ {
			d[i] = float64(i%17) / 17
		}
		if err := n.Run(x, nil); err != nil {
			t.Fatal(err)
		}
		return append([]float64(nil), n.Logits().Data().([]float64)...)
	}
	if la, lp := logits(a, pa), logits(p, pp); !reflect.DeepEqual(la, lp) {
		t.Errorf("logits differ: file %v, preset %v", la[:3], lp[:3])
	}
}

// TestModelFileErrors: every malformed description is refused with one line naming the layer
// and the field or problem.
func TestModelFileErrors(t *testing.T) {
	img, flat := []int{1, 8, 8}, []int{6}
	cases := []struct {
		name, file string
		input      []int
		want       string
	}{
		{"not json", `{"layers": [`, flat, "model file:"},
		{"unknown top field", `{"layers": [{"type": "dense", "units": 3}], "x": 1}`, flat, `unknown field "x"`},
		{"trailing data", `{"layers": [{"type": "dense", "units": 3}]} {}`, flat, "data after"},
		{"no layers", `{"layers": []}`, flat, "non-empty list"},
		{"unknown layer", `{"layers": [{"type": "lstm"}]}`, flat, `layer 0 (lstm): unknown layer type`},
		{"batchnorm", `{"layers": [{"type": "dense", "units": 4}, {"type": "batchnorm"}]}`, flat, "layer 1 (batchnorm): batchnorm mixes the examples"},
		{"batchnorm2d", `{"layers": [{"type": "BatchNorm2d"}]}`, img, "use groupnorm"},
		{"missing units", `{"layers": [{"type": "dense"}]}`, flat, `layer 0 (dense): "units" is required (1 to 1048576)`},
		{"units zero", `{"layers": [{"type": "dense", "units": 0}]}`, flat, `"units" = 0: want 1 to 1048576`},
		{"units float", `{"layers": [{"type": "dense", "units": 2.5}]}`, flat, `"units": want an integer`},
		{"foreign field", `{"layers": [{"type": "dense", "units": 3, "kernel": 2}]}`, flat, `field "kernel" does not apply (dense takes units)`},
		{"field on flatten", `{"layers": [{"type": "flatten", "units": 3}]}`, flat, "flatten takes no fields"},
		{"last layer", `{"layers": [{"type": "dense", "units": 4}]}`, flat, "the last layer gives [4], want the 3 class logits"},
		{"conv on flat", `{"layers": [{"type": "conv2d", "filters": 2, "kernel": 2}, {"type": "flatten"}, {"type": "dense", "units": 3}]}`, flat, "layer 0.conv2d: conv2d needs an image input"},
		{"kernel too big", `{"layers": [{"type": "conv2d", "filters": 2, "kernel": 9}, {"type": "flatten"}, {"type": "dense", "units": 3}]}`, img, "layer 0.conv2d: kernel 9 does not fit a 8x8 input"},
		{"dense after conv", `{"layers": [{"type": "conv2d", "filters": 2, "kernel": 3}, {"type": "dense", "units": 3}]}`, img, "the last layer gives [3×6×6 rows], want the 3 class logits"},
		{"groups", `{"layers": [{"type": "conv2d", "filters": 3, "kernel": 3}, {"type": "groupnorm", "groups": 2}, {"type": "flatten"}, {"type": "dense", "units": 3}]}`, img, "groups = 2: want ≥ 1 and dividing the 3 channels"},
		{"layernorm on image", `{"layers": [{"type": "layernorm"}, {"type": "flatten"}, {"type": "dense", "units": 3}]}`, img, "layer 0.layernorm: layernorm on the raw image"},
		{"pool too big", `{"layers": [{"type": "conv2d", "filters": 3, "kernel": 7}, {"type": "avgpool", "kernel": 3}, {"type": "flatten"}, {"type": "dense", "units": 3}]}`, img, "layer 1.avgpool: pool 3 does not fit 2x2"},
		{"residual shape", `{"layers": [{"type": "dense", "units": 4}, {"type": "residual", "body": [{"type": "dense", "units": 5}]}, {"type": "dense", "units": 3}]}`, flat, "layer 1.residual: the body maps [4] to [5]"},
		{"residual inner", `{"layers": [{"type": "dense", "units": 4}, {"type": "residual", "body": [{"type": "dense", "units": 0}]}]}`, flat, `layer 1.0 (dense): "units" = 0`},
		{"residual empty", `{"layers": [{"type": "residual", "body": []}]}`, flat, `"body": want a non-empty list`},
		{"tempered", `{"layers": [{"type": "dense", "units": 3}, {"type": "tempered_sigmoid", "scale": -1}]}`, flat, `"scale": want a number in (0, 1e+06]`},
		{"huge", `{"layers": [{"type": "dense", "units": 1048576}, {"type": "dense", "units": 1048576}, {"type": "dense", "units": 3}]}`, flat, "parameters: want at most"},
		{"activation size", `{"layers": [{"type": "conv2d", "filters": 16384, "kernel": 1}, {"type": "flatten"}, {"type": "dense", "units": 3}]}`, []int{1, 64, 64}, "layer 0.conv2d: gives 67108864 values per example"},
		{"patch size", `{"layers": [{"type": "conv2d", "filters": 1, "kernel": 64, "pad": 32}, {"type": "flatten"}, {"type": "dense", "units": 3}]}`, []int{4, 64, 64}, "its patch matrix takes"},
		{"embedding not first", `{"layers": [{"type": "dense", "units": 4}, {"type": "embedding", "vocab": 3, "dim": 2}, {"type": "flatten"}, {"type": "dense", "units": 3}]}`, flat, "layer 1 (embedding): it must be the model's first layer"},
		{"embedding vocab", `{"layers": [{"type": "embedding", "dim": 2}, {"type": "flatten"}, {"type": "dense", "units": 3}]}`, flat, `layer 0 (embedding): "vocab" is required`},
		{"embedding on image", `{"layers": [{"type": "embedding", "vocab": 3, "dim": 2}, {"type": "flatten"}, {"type": "dense", "units": 3}]}`, img, "embedding reads token ids from a flat input"},
		{"layer not object", `{"layers": [3]}`, flat, "layer 0: want a JSON object"},
		// The transformer's layers.
		{"heads not dividing", `{"layers": [{"type": "conv2d", "filters": 4, "kernel": 4, "stride": 4}, {"type": "attention", "heads": 3, "dim": 8}, {"type": "meanpool"}, {"type": "dense", "units": 3}]}`, img, `layer 1 (attention): "heads" = 3 does not divide "dim" = 8`},
		{"heads missing", `{"layers": [{"type": "conv2d", "filters": 4, "kernel": 4, "stride": 4}, {"type": "attention", "dim": 8}, {"type": "meanpool"}, {"type": "dense", "units": 3}]}`, img, `layer 1 (attention): "heads" is required`},
		{"heads zero", `{"layers": [{"type": "conv2d", "filters": 4, "kernel": 4, "stride": 4}, {"type": "attention", "heads": 0, "dim": 8}, {"type": "meanpool"}, {"type": "dense", "units": 3}]}`, img, `layer 1 (attention): "heads" = 0: want 1 to`},
		{"dim missing", `{"layers": [{"type": "conv2d", "filters": 4, "kernel": 4, "stride": 4}, {"type": "attention", "heads": 2}, {"type": "meanpool"}, {"type": "dense", "units": 3}]}`, img, `layer 1 (attention): "dim" is required`},
		{"attention field", `{"layers": [{"type": "conv2d", "filters": 4, "kernel": 4, "stride": 4}, {"type": "attention", "heads": 2, "dim": 8, "units": 3}, {"type": "meanpool"}, {"type": "dense", "units": 3}]}`, img, `layer 1 (attention): field "units" does not apply (attention takes heads, dim)`},
		{"attention on flat", `{"layers": [{"type": "dense", "units": 4}, {"type": "attention", "heads": 2, "dim": 4}, {"type": "dense", "units": 3}]}`, flat, "layer 1.attention: attention needs positions"},
		{"attention on image", `{"layers": [{"type": "attention", "heads": 1, "dim": 4}, {"type": "flatten"}, {"type": "dense", "units": 3}]}`, img, "layer 0.attention: attention needs positions"},
		{"attention nested", `{"layers": [{"type": "dense", "units": 4}, {"type": "residual", "body": [{"type": "attention", "heads": 2, "dim": 4}]}, {"type": "dense", "units": 3}]}`, flat, "layer 1.residual.0.attention: attention needs positions"},
		{"attention positions", `{"layers": [{"type": "conv2d", "filters": 2, "kernel": 1}, {"type": "attention", "heads": 1, "dim": 2}, {"type": "meanpool"}, {"type": "dense", "units": 3}]}`, []int{1, 65, 65}, "layer 1.attention: attention over 4225 positions: want at most 4096"},
		{"position on flat", `{"layers": [{"type": "position"}, {"type": "dense", "units": 3}]}`, flat, "layer 0.position: position needs positions"},
		{"position field", `{"layers": [{"type": "position", "dim": 3}]}`, flat, `layer 0 (position): field "dim" does not apply (position takes no fields)`},
		{"meanpool on flat", `{"layers": [{"type": "dense", "units": 4}, {"type": "meanpool"}, {"type": "dense", "units": 3}]}`, flat, "layer 1.meanpool: meanpool needs positions"},
		// Duplicated keys: encoding/json keeps the last, so a reader of the file and the run
		// could see different models.
		{"duplicate field", `{"layers": [{"type": "dense", "units": 3, "units": 1048576}]}`, flat, `layer 0 (dense): field "units" twice`},
		{"duplicate type", `{"layers": [{"type": "flatten", "type": "dense", "units": 3}]}`, flat, `field "type" twice`},
		{"duplicate nested", `{"layers": [{"type": "dense", "units": 4}, {"type": "residual", "body": [{"type": "dense", "units": 4, "units": 5}]}, {"type": "dense", "units": 3}]}`, flat, `layer 1.0 (dense): field "units" twice`},
		{"duplicate body", `{"layers": [{"type": "dense", "units": 4}, {"type": "residual", "body": [{"type": "relu"}], "body": [{"type": "dense", "units": 5}]}, {"type": "dense", "units": 3}]}`, flat, `field "body" twice`},
		{"duplicate layers", `{"layers": [{"type": "dense", "units": 3}], "layers": [{"type": "dense", "units": 4}, {"type": "dense", "units": 3}]}`, flat, `key "layers" twice`},
		{"number overflow", `{"layers": [{"type": "dense", "units": 1e400}]}`, flat, `"units": want an integer`},
		{"float overflow", `{"layers": [{"type": "dense", "units": 3}, {"type": "tempered_sigmoid", "temp": 1e400}]}`, flat, `"temp": want a number`},
		{"nesting", `{"layers": [` + strings.Repeat(`{"type": "residual", "body": [`, 9) + `{"type": "relu"}` + strings.Repeat(`]}`, 9) + `, {"type": "dense", "units": 3}]}`, flat, "nested deeper than 8"},
	}
	for _, tc := range cases {
		_, err := ParseModelFile([]byte(tc.file), tc.input, 3)
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %q, want one line containing %q", tc.name, err, tc.want)
		}
	}
}

// TestModelFileDefaults: defaults are filled, and a stack's architecture survives its JSON
// encoding (checkpoints and model files store it so).
func TestModelFileDefaults(t *testing.T) {
	a, err := ParseModelFile([]byte(`{"layers": [{"type": "conv2d", "filters": 4, "kernel": 3}, {"type": "tempered_sigmoid"},
		{"type": "avgpool", "kernel": 2}, {"type": "flatten"}, {"type": "dense", "units": 3}]}`), []int{2, 7, 7}, 3)
	if err != nil {
		t.Fatal(err)
	}
	c, ts, pool := a.Stack[0], a.Stack[1], a.Stack[2]
	if c.Stride != 1 || c.Pad != 0 || ts.Scale != 2 || ts.Temp != 2 || ts.Offset != 1 || pool.Stride != 2 {
		t.Errorf("defaults not filled: %+v %+v %+v", c, ts, pool)
	}
	if !a.ImageInput() {
		t.Error("a stack starting with conv2d on an image reads images")
	}
	js, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var b Arch
	if err := json.Unmarshal(js, &b); err != nil || !reflect.DeepEqual(a, b) {
		t.Errorf("round trip: %v, %+v ≠ %+v", err, b, a)
	}
	// A preset's encoding has no Stack key (files written before stacks decode the same).
	js, _ = json.Marshal(MLP([]int{4}, 2, []int{3}, Tanh))
	if strings.Contains(string(js), "Stack") {
		t.Errorf("preset encoding mentions Stack: %s", js)
	}
}

// FuzzParseModelFile: the parser never panics; what it accepts is a valid architecture whose
// JSON encoding round-trips, and (when small) builds and runs.
func FuzzParseModelFile(f *testing.F) {
	f.Add([]byte(mnistCNNFile), uint8(1))
	f.Add([]byte(`{"layers": [{"type": "dense", "units": 4}, {"type": "layernorm"}, {"type": "gelu"}, {"type": "residual", "body": [{"type": "dense", "units": 4}, {"type": "relu"}]}, {"type": "dense", "units": 3}]}`), uint8(0))
	f.Add([]byte(`{"layers": [{"type": "conv2d", "filters": 4, "kernel": 3, "stride": 2, "pad": 1}, {"type": "groupnorm", "groups": 2}, {"type": "tempered_sigmoid", "scale": 1.5}, {"type": "avgpool", "kernel": 2}, {"type": "flatten"}, {"type": "dense", "units": 3}]}`), uint8(2))
	f.Add([]byte(`{"layers": [{"type": "batchnorm"}]}`), uint8(2))
	f.Add([]byte(`{"layers": [{"type": "dense", "units": 3, "units": 4}], "layers": []}`), uint8(0))
	f.Add([]byte(`{"layers": [{"type": "dense", "units": 1e400}, {"type": "tempered_sigmoid", "temp": -0, "offset": 1e-320}]}`), uint8(0))
	f.Add([]byte(`{"layers": [{"type": "residual", "body": [{"type": "residual", "body": [{"type": "residual", "body": [{"type": "gelu"}]}]}]}, {"type": "flatten"}, {"type": "dense", "units": 3}]}`), uint8(2))
	f.Add([]byte(`{"layers": [{"type": "conv2d", "filters": 3, "kernel": 1, "pad": 1000}`+strings.Repeat(`, {"type": "relu"}`, 200)+`, {"type": "avgpool", "kernel": 1024, "stride": 1024}, {"type": "flatten"}, {"type": "dense", "units": 3}]}`), uint8(1))
	f.Add([]byte(`{"layers": [{"type": "conv2d", "filters": 16384, "kernel": 1024, "stride": 1024, "pad": 1024}, {"type": "avgpool", "kernel": 1}, {"type": "flatten"}, {"type": "dense", "units": 1048576}]}`), uint8(1))
	f.Add([]byte(`{"layers": [{"type": "embedding", "vocab": 7, "dim": 3}, {"type": "groupnorm", "groups": 3}, {"type": "flatten"}, {"type": "dense", "units": 3}]}`), uint8(0))
	f.Add([]byte(transformerFile), uint8(1))
	f.Add([]byte(`{"layers": [{"type": "embedding", "vocab": 5, "dim": 4}, {"type": "position"}, {"type": "residual", "body": [{"type": "layernorm"}, {"type": "attention", "heads": 2, "dim": 6}]}, {"type": "dense", "units": 5}, {"type": "meanpool"}, {"type": "dense", "units": 3}]}`), uint8(0))
	f.Add([]byte(`{"layers": [{"type": "conv2d", "filters": 3, "kernel": 7, "stride": 7}, {"type": "attention", "heads": 4, "dim": 6}, {"type": "position", "heads": 1}, {"type": "meanpool"}, {"type": "dense", "units": 3}]}`), uint8(2))
	f.Add([]byte(`{"layers": [{"type": "conv2d", "filters": 2, "kernel": 1}, {"type": "attention", "heads": 16384, "dim": 16384}, {"type": "meanpool"}, {"type": "dense", "units": 3}]}`), uint8(1))
	f.Add([]byte(`{"loss": "mse", "layers": [{"type": "conv2d", "filters": 4, "kernel": 3, "groups": 2, "standardize": true}, {"type": "residual", "body": [{"type": "conv2d", "filters": 8, "kernel": 3, "stride": 2, "pad": 1, "groups": 4}], "shortcut": [{"type": "conv2d", "filters": 8, "kernel": 1, "stride": 2, "standardize": true}]}, {"type": "flatten"}, {"type": "dense", "units": 3}]}`), uint8(2))
	f.Add([]byte(`{"layers": [{"type": "dense", "units": 4}, {"type": "dropout", "rate": 0.999999}, {"type": "dense", "units": 3}]}`), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, in uint8) {
		input := [][]int{{6}, {1, 28, 28}, {2, 7, 7}}[int(in)%3]
		a, err := ParseModelFile(data, input, 3)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if err := a.Validate(); err != nil {
			t.Fatalf("accepted an invalid architecture: %v", err)
		}
		n := a.NumParams()
		if n < 1 {
			t.Fatalf("accepted a model of %d parameters", n)
		}
		js, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		var b Arch
		if err := json.Unmarshal(js, &b); err != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("round trip: %v", err)
		}
		// Small models only are built: few parameters, and few values per example (a model of
		// 18 parameters can hold 10⁸ values per example: a padded convolution, then many
		// activations).
		v, err := a.StepValues()
		if err != nil || !(v >= float64(a.InputSize())) {
			t.Fatalf("StepValues = %v, %v", v, err)
		}
		if n > 20000 || v > 1e6 {
			return
		}
		p, err := NewParams(a, tensor.Float64, 1)
		if err != nil {
			t.Fatal(err)
		}
		net, err := Build(a, p, 2, true)
		if err != nil {
			t.Fatalf("accepted a model that does not build: %v", err)
		}
		defer net.Close()
	})
}

// TestDocsModelFile: the model file that docs/models.md shows parses on MNIST's shape and
// builds.
func TestDocsModelFile(t *testing.T) {
	doc, err := os.ReadFile("../../docs/models.md")
	if err != nil {
		t.Skipf("docs/models.md: %v", err)
	}
	s := string(doc)
	i := strings.Index(s, "```json\n")
	j := strings.Index(s[i+8:], "```")
	if i < 0 || j < 0 {
		t.Fatal("no JSON block in docs/models.md")
	}
	a, err := ParseModelFile([]byte(s[i+8:i+8+j]), []int{1, 28, 28}, 10)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewParams(a, tensor.Float32, 1)
	if err != nil {
		t.Fatal(err)
	}
	n, err := Build(a, p, 2, true)
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	t.Logf("docs/models.md's model: %d parameters", a.NumParams())
}

// transformerFile is a small ViT-style stack on MNIST's shape: patches, positions, one pre-LN
// block, the mean over positions.
const transformerFile = `{"layers": [
  {"type": "conv2d", "filters": 8, "kernel": 7, "stride": 7},
  {"type": "position"},
  {"type": "residual", "body": [{"type": "layernorm"}, {"type": "attention", "heads": 2, "dim": 8}]},
  {"type": "residual", "body": [{"type": "layernorm"}, {"type": "dense", "units": 16}, {"type": "gelu"}, {"type": "dense", "units": 8}]},
  {"type": "layernorm"},
  {"type": "meanpool"},
  {"type": "dense", "units": 3}
]}`

// TestModelFileTransformer: the transformer's layers parse, plan on positions (16 patches of
// MNIST), count their parameters, and build.
func TestModelFileTransformer(t *testing.T) {
	a, err := ParseModelFile([]byte(transformerFile), []int{1, 28, 28}, 3)
	if err != nil {
		t.Fatal(err)
	}
	const c = 8
	want := (49*c + c) + 16*c + // patches, positions
		2*c + (c*3*c + 3*c) + (c*c + c) + // LayerNorm, attention
		2*c + (c*16 + 16) + (16*c + c) + // LayerNorm, MLP
		2*c + (c*3 + 3) // final LayerNorm, classifier
	if n := a.NumParams(); n != want {
		t.Errorf("%d parameters, want %d", n, want)
	}
	ls, err := a.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls[:len(ls)-1] {
		if l.Positions != 16 {
			t.Errorf("GEMM layer %s: %d positions, want 16", l.Name, l.Positions)
		}
	}
	if ls[len(ls)-1].Positions != 1 {
		t.Errorf("classifier: %d positions, want 1", ls[len(ls)-1].Positions)
	}
	p, err := NewParams(a, tensor.Float32, 1)
	if err != nil {
		t.Fatal(err)
	}
	n, err := Build(a, p, 3, true)
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
}
