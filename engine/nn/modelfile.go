package nn

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/dpsgd/dpsgd/engine/nn/scatter"
)

// MaxModelFileBytes bounds a model description.
const MaxModelFileBytes = 1 << 20

// ParseModelFile reads a model description (docs/models.md): a JSON object
//
//	{"layers": [{"type": "conv2d", "filters": 16, "kernel": 8, "stride": 2, "pad": 3},
//	            {"type": "tanh"}, {"type": "maxpool", "kernel": 2, "stride": 1},
//	            {"type": "flatten"}, {"type": "dense", "units": 10}]}
//
// and returns the stack model (Kind KindStack) on examples of shape input with classes
// classes, the data's. Every layer takes only its own fields (LayerKinds), as JSON integers
// (numbers for tempered_sigmoid), in the ranges the errors state; conv2d's stride defaults to
// 1 and pad to 0, a pool's stride to its kernel, tempered_sigmoid's scale, temp and offset to
// 2, 2 and 1 (tanh), scatter's J and L to 2 and 8. The last layer must give the class logits. Every error names the layer (its
// index, or its path inside residual blocks) and the field.
func ParseModelFile(data []byte, input []int, classes int) (Arch, error) {
	if len(data) > MaxModelFileBytes {
		return Arch{}, fmt.Errorf("model file: %d bytes, want at most %d", len(data), MaxModelFileBytes)
	}
	if k, ok := duplicateKey(data); ok {
		return Arch{}, fmt.Errorf("model file: key %q twice: want each key once", k)
	}
	var top struct {
		Layers []json.RawMessage `json:"layers"`
		Loss   *string           `json:"loss"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&top); err != nil {
		return Arch{}, fmt.Errorf("model file: %w (want {\"layers\": [...]})", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Arch{}, errors.New("model file: data after the JSON object")
	}
	if len(top.Layers) == 0 {
		return Arch{}, errors.New("model file: \"layers\": want a non-empty list of layers")
	}
	count := 0
	specs, err := parseLayers(top.Layers, "", 0, &count)
	if err != nil {
		return Arch{}, fmt.Errorf("model file: %w", err)
	}
	loss, err := parseLoss(top.Loss)
	if err != nil {
		return Arch{}, fmt.Errorf("model file: %w", err)
	}
	a := Arch{Kind: KindStack, Input: append([]int(nil), input...), Classes: classes, Stack: specs, Loss: loss}
	if err := a.Validate(); err != nil {
		return Arch{}, fmt.Errorf("model file: %w", err)
	}
	return a, nil
}

func parseLayers(raw []json.RawMessage, parent string, depth int, count *int) ([]LayerSpec, error) {
	var out []LayerSpec
	for i, r := range raw {
		where := fmt.Sprintf("%s%d", parent, i)
		s, err := parseLayer(r, where, depth, count)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func parseLayer(raw json.RawMessage, where string, depth int, count *int) (LayerSpec, error) {
	*count++
	if *count > MaxStackLayers {
		return LayerSpec{}, fmt.Errorf("more than %d layers", MaxStackLayers)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return LayerSpec{}, fmt.Errorf("layer %s: want a JSON object with a \"type\"", where)
	}
	var s LayerSpec
	if err := json.Unmarshal(fields["type"], &s.Type); err != nil || s.Type == "" {
		return LayerSpec{}, fmt.Errorf("layer %s: \"type\": want a layer kind (%s)", where, kindList())
	}
	where = fmt.Sprintf("%s (%s)", where, s.Type)
	if k, ok := duplicateKey(raw); ok {
		return LayerSpec{}, fmt.Errorf("layer %s: field %q twice: want each field once", where, k)
	}
	takes, ok := layerKinds[s.Type]
	if !ok {
		if strings.HasPrefix(strings.ToLower(s.Type), "batch") {
			return LayerSpec{}, fmt.Errorf("layer %s: %w", where, errBatchNorm)
		}
		return LayerSpec{}, fmt.Errorf("layer %s: unknown layer type: want one of %s", where, kindList())
	}
	allowed := map[string]bool{"type": true}
	for _, f := range strings.Split(takes, ", ") {
		if f != "" {
			allowed[f] = true
		}
	}
	for f := range fields {
		if !allowed[f] {
			want := takes
			if want == "" {
				want = "no fields"
			}
			return LayerSpec{}, fmt.Errorf("layer %s: field %q does not apply (%s takes %s)", where, f, s.Type, want)
		}
	}
	intField := func(name string, def, lo, hi int, dst *int) error {
		v, ok := fields[name]
		if !ok {
			if def < lo {
				return fmt.Errorf("layer %s: %q is required (%d to %d)", where, name, lo, hi)
			}
			*dst = def
			return nil
		}
		var n int64
		if err := json.Unmarshal(v, &n); err != nil {
			return fmt.Errorf("layer %s: %q: want an integer from %d to %d", where, name, lo, hi)
		}
		if n < int64(lo) || n > int64(hi) {
			return fmt.Errorf("layer %s: %q = %d: want %d to %d", where, name, n, lo, hi)
		}
		*dst = int(n)
		return nil
	}
	numField := func(name string, def, lo, hi float64, loOpen bool, dst *float64) error {
		v, ok := fields[name]
		if !ok {
			*dst = def
			return nil
		}
		var x float64
		if err := json.Unmarshal(v, &x); err != nil || x < lo || x > hi || (loOpen && x == lo) {
			lb := "["
			if loOpen {
				lb = "("
			}
			return fmt.Errorf("layer %s: %q: want a number in %s%g, %g]", where, name, lb, lo, hi)
		}
		*dst = x
		return nil
	}
	var err error
	switch s.Type {
	case "dense":
		err = intField("units", -1, 1, MaxUnits, &s.Units)
	case "conv2d":
		err = firstErr(intField("filters", -1, 1, MaxFilters, &s.Filters), intField("kernel", -1, 1, MaxWindow, &s.Kernel),
			intField("stride", 1, 1, MaxWindow, &s.Stride), intField("pad", 0, 0, MaxWindow, &s.Pad),
			convExtFields(fields, where, &s))
	case "maxpool", "avgpool":
		if err = intField("kernel", -1, 1, MaxWindow, &s.Kernel); err == nil {
			err = intField("stride", s.Kernel, 1, MaxWindow, &s.Stride)
		}
	case "groupnorm":
		err = intField("groups", -1, 1, MaxFilters, &s.Groups)
	case "scatter":
		err = firstErr(intField("J", 2, 1, scatter.MaxJ, &s.J), intField("L", 8, 1, scatter.MaxL, &s.L))
	case "embedding":
		err = firstErr(intField("vocab", -1, 1, MaxUnits, &s.Vocab), intField("dim", -1, 1, MaxFilters, &s.Dim))
	case "attention":
		err = firstErr(intField("heads", -1, 1, MaxFilters, &s.Heads), intField("dim", -1, 1, MaxFilters, &s.Dim))
		if err == nil && s.Dim%s.Heads != 0 {
			err = fmt.Errorf("layer %s: \"heads\" = %d does not divide \"dim\" = %d: want heads dividing dim", where, s.Heads, s.Dim)
		}
	case "tempered_sigmoid":
		err = firstErr(numField("scale", 2, 0, 1e6, true, &s.Scale), numField("temp", 2, 0, 1e6, true, &s.Temp),
			numField("offset", 1, -1e6, 1e6, false, &s.Offset))
	case "dropout":
		err = dropoutField(fields, where, &s)
	case "residual":
		if depth >= MaxStackDepth {
			return LayerSpec{}, fmt.Errorf("layer %s: residual blocks nested deeper than %d", where, MaxStackDepth)
		}
		var body []json.RawMessage
		if e := json.Unmarshal(fields["body"], &body); e != nil || len(body) == 0 {
			return LayerSpec{}, fmt.Errorf("layer %s: \"body\": want a non-empty list of layers", where)
		}
		s.Body, err = parseLayers(body, strings.SplitN(where, " ", 2)[0]+".", depth+1, count)
		if err == nil {
			s.Shortcut, err = parseShortcut(fields, where, depth, count)
		}
	}
	if err != nil {
		return LayerSpec{}, err
	}
	return s, nil
}

func kindList() string {
	ks := make([]string, 0, len(layerKinds))
	for k := range layerKinds {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

// duplicateKey returns a key that the JSON object data holds twice at its top level (which
// encoding/json would resolve silently, the last one winning, so that a reader of the file and
// the run could disagree on the model). Malformed JSON is left to the decoder's own errors.
func duplicateKey(data []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", false
		}
		k, ok := t.(string)
		if !ok {
			return "", false
		}
		if seen[k] {
			return k, true
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", false
		}
	}
	return "", false
}
