package model

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/dpsgd/dpsgd/engine/nn"
	"gorgonia.org/tensor"
)

// testStack is a layer-stack model with every kind of parameter tensor: GEMM layers,
// normalizations' γ and β, inside and outside a residual block.
func testStack(t testing.TB) nn.Arch {
	t.Helper()
	a, err := nn.ParseModelFile([]byte(`{"layers": [
		{"type": "conv2d", "filters": 4, "kernel": 3, "stride": 2, "pad": 1}, {"type": "groupnorm", "groups": 2}, {"type": "gelu"},
		{"type": "residual", "body": [{"type": "conv2d", "filters": 4, "kernel": 3, "pad": 1}, {"type": "tanh"}]},
		{"type": "avgpool", "kernel": 2}, {"type": "flatten"}, {"type": "layernorm"}, {"type": "dense", "units": 3}]}`), []int{2, 9, 7}, 3)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestStackRoundTrip: a layer-stack model's file records its architecture; decoding gives the
// same architecture, tensors and logits, and re-encoding the same bytes. Its safetensors export
// is refused with ErrNoTorchLayout (no PyTorch layout is defined for stacks).
func TestStackRoundTrip(t *testing.T) {
	arch := testStack(t)
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		a := testArtifact(t, arch, dt, 4)
		data, err := Encode(a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a.Arch, b.Arch) || len(b.Params.List) != len(a.Params.List) {
			t.Fatalf("decoded arch %+v, %d tensors; want %+v, %d", b.Arch, len(b.Params.List), a.Arch, len(a.Params.List))
		}
		for i, q := range a.Params.List {
			r := b.Params.List[i]
			if q.Name != r.Name || !sameBits(values(q), values(r)) {
				t.Errorf("tensor %d: %s vs %s, or other values", i, q.Name, r.Name)
			}
		}
		if names := a.Params.List[len(a.Params.List)-1].Name; names != "6.layernorm.beta" {
			t.Errorf("last tensor %q, want 6.layernorm.beta", names)
		}
		x := inputs(arch, 2)
		if la, lb := logits(t, arch, a.Params, x, 2), logits(t, arch, b.Params, x, 2); !sameBits(la, lb) {
			t.Errorf("logits %v after the round trip, %v before", lb, la)
		}
		if again, err := Encode(b); err != nil || !bytes.Equal(again, data) {
			t.Errorf("re-encoding: %v", err)
		}
		if _, err := EncodeSafetensors(a); !errors.Is(err, ErrNoTorchLayout) {
			t.Errorf("safetensors of a stack: %v, want ErrNoTorchLayout", err)
		}
	}
}

// TestPresetFileBeforeStacks: a model file written before layer stacks existed (a CNN preset,
// float32, testdata) still decodes, and re-encodes to the same bytes: a preset's arch encodes as
// it did.
func TestPresetFileBeforeStacks(t *testing.T) {
	data, err := os.ReadFile("testdata/preset-cnn-before-stacks.dpsgd")
	if err != nil {
		t.Fatal(err)
	}
	a, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if a.Arch.Kind != "cnn" || a.Arch.Stack != nil || a.Params.Count() != a.Arch.NumParams() {
		t.Errorf("decoded %+v", a.Arch)
	}
	if again, err := Encode(a); err != nil || !bytes.Equal(again, data) {
		t.Errorf("re-encoding the old file: %v (same bytes: %v)", err, bytes.Equal(again, data))
	}
}
