package nn

import (
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/engine/nn/scatter"
)

// TestScatterModelFile: the scatter layer's defaults and shapes, and its errors, each naming
// the layer and the field.
func TestScatterModelFile(t *testing.T) {
	a, err := ParseModelFile([]byte(`{"layers": [{"type": "scatter"}, {"type": "groupnorm", "groups": 27},
		{"type": "flatten"}, {"type": "dense", "units": 10}]}`), []int{1, 28, 28}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if s := a.Stack[0]; s.J != 2 || s.L != 8 {
		t.Errorf("defaults J = %d, L = %d, want 2 and 8", s.J, s.L)
	}
	if !a.ImageInput() {
		t.Error("a scatter model does not read images")
	}
	// 81 maps of 7×7: GroupNorm's γ, β (81 each) and a 3969×10 dense layer.
	if got, want := a.NumParams(), 2*81+81*49*10+10; got != want {
		t.Errorf("%d parameters, want %d", got, want)
	}
	for _, c := range []struct {
		file  string
		input []int
		want  []string
	}{
		{`{"layers": [{"type": "scatter"}, {"type": "flatten"}, {"type": "dense", "units": 10}]}`, []int{784}, []string{"layer 0.scatter", "image"}},
		{`{"layers": [{"type": "scatter", "J": 5}, {"type": "flatten"}, {"type": "dense", "units": 10}]}`, []int{1, 28, 28}, []string{"layer 0.scatter", "J = 5", "J ≤ 4"}},
		{`{"layers": [{"type": "scatter", "J": 7}, {"type": "flatten"}, {"type": "dense", "units": 10}]}`, []int{1, 28, 28}, []string{"layer 0 (scatter)", `"J" = 7`, "1 to 6"}},
		{`{"layers": [{"type": "scatter", "L": 0}, {"type": "flatten"}, {"type": "dense", "units": 10}]}`, []int{1, 28, 28}, []string{"layer 0 (scatter)", `"L" = 0`, "1 to 16"}},
		{`{"layers": [{"type": "scatter", "L": 17}, {"type": "flatten"}, {"type": "dense", "units": 10}]}`, []int{1, 28, 28}, []string{"layer 0 (scatter)", `"L" = 17`}},
		{`{"layers": [{"type": "scatter", "L": 2.5}, {"type": "flatten"}, {"type": "dense", "units": 10}]}`, []int{1, 28, 28}, []string{"layer 0 (scatter)", `"L"`, "integer"}},
		{`{"layers": [{"type": "scatter", "groups": 2}, {"type": "flatten"}, {"type": "dense", "units": 10}]}`, []int{1, 28, 28}, []string{"layer 0 (scatter)", `"groups"`, "J, L"}},
		{`{"layers": [{"type": "flatten"}, {"type": "scatter"}, {"type": "dense", "units": 10}]}`, []int{1, 28, 28}, []string{"layer 1 (scatter)", "first layer"}},
		{`{"layers": [{"type": "conv2d", "filters": 2, "kernel": 3}, {"type": "residual", "body": [{"type": "scatter"}]}, {"type": "flatten"}, {"type": "dense", "units": 10}]}`, []int{1, 28, 28}, []string{"scatter", "first layer"}},
	} {
		_, err := ParseModelFile([]byte(c.file), c.input, 10)
		if err == nil {
			t.Errorf("%s: no error", c.file)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", c.file, err, w)
			}
		}
	}
}

// TestScatterFeatureLayout: the net's input rows hold, at position p of example i, the maps of
// every channel (channel c's map m at column c·Maps + m), as the transform computes them,
// rounded to float32.
func TestScatterFeatureLayout(t *testing.T) {
	arch := Arch{Kind: KindStack, Input: []int{2, 8, 8}, Classes: 2, Stack: []LayerSpec{{Type: "scatter", J: 1, L: 2}, {Type: "flatten"}, {Type: "dense", Units: 2}}}
	g, ok, err := scatterOf(arch)
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	x := make([]float32, 2*g.in)
	for i := range x {
		x[i] = float32((i*37)%11) / 11
	}
	f := make([]float64, 2*g.out)
	featuresInto(g, f, x, 2)
	tr, _ := scatter.New(8, 8, 1, 2)
	maps, plane := tr.Maps(), tr.OutH()*tr.OutW()
	one := make([]float64, maps*plane)
	img := make([]float64, 64)
	for i := 0; i < 2; i++ {
		for c := 0; c < 2; c++ {
			for j := range img {
				img[j] = float64(x[i*g.in+c*64+j])
			}
			tr.Apply(tr.NewWorkspace(), one, img)
			for m := 0; m < maps; m++ {
				for p := 0; p < plane; p++ {
					got := f[i*g.out+p*2*maps+c*maps+m]
					if want := float64(float32(one[m*plane+p])); got != want {
						t.Fatalf("example %d, channel %d, map %d, position %d: %g, want %g", i, c, m, p, got, want)
					}
				}
			}
		}
	}
}
