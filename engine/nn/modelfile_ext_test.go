package nn

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestModelFileExtErrors: the grouped and standardized convolutions', the shortcut's and the
// loss's fields are refused out of range or of the wrong type, in one line naming the layer
// (or the key) and the field.
func TestModelFileExtErrors(t *testing.T) {
	img := []int{4, 8, 8}
	tail := `, {"type": "flatten"}, {"type": "dense", "units": 3}]}`
	cases := []struct {
		name, file string
		classes    int
		want       string
	}{
		{"groups zero", `{"layers": [{"type": "conv2d", "filters": 4, "kernel": 3, "groups": 0}` + tail, 3, `layer 0 (conv2d): "groups" = 0: want 1 to 4 (the filters)`},
		{"groups above filters", `{"layers": [{"type": "conv2d", "filters": 4, "kernel": 3, "groups": 8}` + tail, 3, `"groups" = 8: want 1 to 4`},
		{"groups float", `{"layers": [{"type": "conv2d", "filters": 4, "kernel": 3, "groups": 1.5}` + tail, 3, `layer 0 (conv2d): "groups": want an integer`},
		{"groups not dividing channels", `{"layers": [{"type": "conv2d", "filters": 6, "kernel": 3, "groups": 3}` + tail, 3, "layer 0.conv2d: groups = 3: want ≥ 1 and dividing the 4 input channels and the 6 filters"},
		{"groups not dividing filters", `{"layers": [{"type": "conv2d", "filters": 3, "kernel": 3, "groups": 2}` + tail, 3, "dividing the 4 input channels and the 3 filters"},
		{"standardize string", `{"layers": [{"type": "conv2d", "filters": 4, "kernel": 3, "standardize": "yes"}` + tail, 3, `layer 0 (conv2d): "standardize": want true or false`},
		{"standardize on dense", `{"layers": [{"type": "flatten"}, {"type": "dense", "units": 3, "standardize": true}]}`, 3, `layer 1 (dense): field "standardize" does not apply`},
		{"groups on dense", `{"layers": [{"type": "flatten"}, {"type": "dense", "units": 3, "groups": 1}]}`, 3, `field "groups" does not apply`},
		{"shortcut empty", `{"layers": [{"type": "conv2d", "filters": 4, "kernel": 1}, {"type": "residual", "body": [{"type": "relu"}], "shortcut": []}` + tail, 3, `layer 1 (residual): "shortcut": want a non-empty list`},
		{"shortcut inner", `{"layers": [{"type": "conv2d", "filters": 4, "kernel": 1}, {"type": "residual", "body": [{"type": "relu"}], "shortcut": [{"type": "conv2d", "filters": 0, "kernel": 1}]}` + tail, 3, `layer 1.shortcut.0 (conv2d): "filters" = 0`},
		{"shortcut shape", `{"layers": [{"type": "conv2d", "filters": 4, "kernel": 1}, {"type": "residual", "body": [{"type": "conv2d", "filters": 8, "kernel": 3, "stride": 2, "pad": 1}], "shortcut": [{"type": "conv2d", "filters": 8, "kernel": 1}]}` + tail, 3, "layer 1.residual: the shortcut maps"},
		{"shortcut on dense", `{"layers": [{"type": "flatten"}, {"type": "shortcut"}` + tail, 3, "unknown layer type"},
		{"loss unknown", `{"loss": "hinge", "layers": [{"type": "flatten"}, {"type": "dense", "units": 3}]}`, 3, `"loss" = "hinge": want softmax_xent (the default), bce or mse`},
		{"loss number", `{"loss": 1, "layers": [{"type": "flatten"}, {"type": "dense", "units": 3}]}`, 3, "model file:"},
		{"loss twice", `{"loss": "mse", "loss": "bce", "layers": [{"type": "flatten"}, {"type": "dense", "units": 3}]}`, 3, `key "loss" twice`},
		{"bce classes", `{"loss": "bce", "layers": [{"type": "flatten"}, {"type": "dense", "units": 1}]}`, 3, "loss bce needs two classes"},
		{"bce units", `{"loss": "bce", "layers": [{"type": "flatten"}, {"type": "dense", "units": 2}]}`, 2, "want one logit for loss bce"},
		{"dropout rate missing", `{"layers": [{"type": "flatten"}, {"type": "dropout"}, {"type": "dense", "units": 3}]}`, 3, `layer 1 (dropout): "rate" is required (0 ≤ rate < 1)`},
		{"dropout rate one", `{"layers": [{"type": "flatten"}, {"type": "dropout", "rate": 1}, {"type": "dense", "units": 3}]}`, 3, `layer 1 (dropout): "rate": want a number with 0 ≤ rate < 1`},
		{"dropout rate negative", `{"layers": [{"type": "flatten"}, {"type": "dropout", "rate": -0.1}, {"type": "dense", "units": 3}]}`, 3, `"rate": want a number with 0 ≤ rate < 1`},
		{"dropout rate string", `{"layers": [{"type": "flatten"}, {"type": "dropout", "rate": "0.5"}, {"type": "dense", "units": 3}]}`, 3, `"rate": want a number`},
		{"dropout on image", `{"layers": [{"type": "dropout", "rate": 0.5}, {"type": "flatten"}, {"type": "dense", "units": 3}]}`, 3, "layer 0.dropout: dropout on the raw image"},
		{"mse units", `{"loss": "mse", "layers": [{"type": "flatten"}, {"type": "dense", "units": 1}]}`, 3, "want the 3 class logits"},
	}
	for _, tc := range cases {
		_, err := ParseModelFile([]byte(tc.file), img, tc.classes)
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %q, want one line containing %q", tc.name, err, tc.want)
		}
	}
}

// TestModelFileExtRoundTrip: the new fields parse (softmax_xent stored as the default ""),
// build, and survive the architecture's JSON encoding; a file without them encodes without
// the new keys.
func TestModelFileExtRoundTrip(t *testing.T) {
	file := `{"loss": "mse", "layers": [{"type": "conv2d", "filters": 4, "kernel": 3, "groups": 2, "standardize": true},
		{"type": "groupnorm", "groups": 2}, {"type": "relu"},
		{"type": "residual", "body": [{"type": "conv2d", "filters": 8, "kernel": 3, "stride": 2, "pad": 1, "groups": 4}],
		 "shortcut": [{"type": "conv2d", "filters": 8, "kernel": 1, "stride": 2, "standardize": true}]},
		{"type": "flatten"}, {"type": "dense", "units": 3}]}`
	a, err := ParseModelFile([]byte(file), []int{4, 8, 8}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if a.Loss != LossMSE || a.Stack[0].Groups != 2 || !a.Stack[0].Standardize || len(a.Stack[3].Shortcut) != 1 {
		t.Fatalf("parsed %+v", a)
	}
	js, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var back Arch
	if err := json.Unmarshal(js, &back); err != nil || !reflect.DeepEqual(back, a) {
		t.Fatalf("round trip: %v\n%+v\n%+v", err, back, a)
	}
	// (4/2)·9·2 + 2 per group ×2, GroupNorm 8, (4/4)·9·2 + 2 per group ×4, 4·8 + 8 shortcut,
	// dense (8·3·3)·3 + 3 (8×8 → 6×6 → 3×3).
	if want := 2*(2*9*2+2) + 8 + 4*(1*9*2+2) + (4*8 + 8) + (8*3*3*3 + 3); a.NumParams() != want {
		t.Errorf("%d parameters, want %d", a.NumParams(), want)
	}
	x, err := ParseModelFile([]byte(`{"loss": "softmax_xent", "layers": [{"type": "flatten"}, {"type": "dense", "units": 3}]}`), []int{4, 8, 8}, 3)
	if err != nil || x.Loss != "" {
		t.Fatalf("softmax_xent: %+v, %v", x, err)
	}
	js, _ = json.Marshal(x)
	for _, k := range []string{"Loss", "standardize", "shortcut", "groups", "rate"} {
		if strings.Contains(string(js), k) {
			t.Errorf("a plain file's architecture encodes %q: %s", k, js)
		}
	}
}
