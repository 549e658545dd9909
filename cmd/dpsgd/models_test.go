package main

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
)

// TestModelsJSON: dpsgd models --json lists every preset on every built-in dataset, its layers'
// parameters add up to its count, exactly one is the default (train's), and the counts on
// MNIST are those worked out by hand.
func TestModelsJSON(t *testing.T) {
	conv := func(in, out, k int) int { return in*k*k*out + out }
	wrnStage := func(in, out int) int {
		return 2*in + conv(in, out, 3) + 2*out + conv(out, out, 3) + conv(in, out, 1) + 2*(2*out+conv(out, out, 3))
	}
	byHand := map[string]int{
		"logreg": 784*10 + 10,
		"mlp":    (784+1)*64 + (64+1)*10,
		// conv1 16×(1·8·8)+16 on 28+2·3 → 14×14, pooled → 13×13; conv2 32×(16·4·4)+32 → 5×5,
		// pooled → 4×4; dense 32·4·4 → 32; out 32 → 10.
		"cnn": (1*8*8+1)*16 + (16*4*4+1)*32 + (32*4*4+1)*32 + (32+1)*10,
		// WideResNet-16-4: a 3×3 conv 1 → 16, three stages (16 → 64, 64 → 128, 128 → 256) of
		// two blocks (GroupNorm γ, β before each 3×3 conv; a 1×1 shortcut in each first
		// block), a final GroupNorm and the dense 256 → 10.
		"wrn16-4": conv(1, 16, 3) + wrnStage(16, 64) + wrnStage(64, 128) + wrnStage(128, 256) + 2*256 + 256*10 + 10,
		// Patches 64×(1·7·7)+64 → 4×4 positions, a 16×64 positional table; per block two
		// LayerNorms (2·64 each), attention 64 → 3·64 and 64 → 64, the MLP 64 → 128 → 64; the
		// final LayerNorm; out 64 → 10.
		"transformer": (49+1)*64 + 16*64 + 2*(2*2*64+(64+1)*192+(64+1)*64+(64+1)*128+(128+1)*64) + 2*64 + (64+1)*10,
		// GroupNorm's γ and β on 81 maps, then dense 81·7·7 → 10.
		"scatternet": 2*81 + (81*7*7+1)*10,
	}
	for _, b := range datasets.Builtins() {
		code, out, errOut := runCmd(t, "models", "--dataset", b.Name, "--json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", b.Name, code, errOut)
		}
		var got modelsJSON
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &got); err != nil {
			t.Fatal(err)
		}
		if got.Dataset != b.Name || got.Classes != b.Classes || len(got.Models) != len(modelPresets()) {
			t.Fatalf("%s: %+v", b.Name, got)
		}
		defaults := 0
		for i, m := range got.Models {
			if m.Name != modelPresets()[i].name {
				t.Errorf("%s: model %d is %s, want the table's order", b.Name, i, m.Name)
			}
			if m.Default {
				defaults++
				if m.Name != defaultModel(b.Name) {
					t.Errorf("%s: default %s, train's is %s", b.Name, m.Name, defaultModel(b.Name))
				}
			}
			if !m.Available {
				if !modelPresets()[i].image || len(b.Shape) == 3 || !strings.Contains(m.Reason, "needs image data") {
					t.Errorf("%s/%s: unavailable: %q", b.Name, m.Name, m.Reason)
				}
				continue
			}
			if modelPresets()[i].stack != nil {
				// A stack preset also names its layers; its count is its builder's.
				a, err := modelPresets()[i].stack(b.Shape, b.Classes)
				if err != nil || m.Stack == "" || m.Params != a.NumParams() || m.Params < 1 {
					t.Errorf("%s/%s: stack %q, %d params (builder: %d, %v)", b.Name, m.Name, m.Stack, m.Params, a.NumParams(), err)
				}
			}
			sum := 0
			if m.Name == "scatternet" && m.OtherParams != 2*81*b.Shape[0] {
				// GroupNorm's γ and β, not a listed (GEMM) layer: other_params.
				t.Errorf("%s/scatternet: other params %d, want GroupNorm's %d", b.Name, m.OtherParams, 2*81*b.Shape[0])
			}
			for _, l := range m.Layers {
				if l.Params != l.In*l.Out+l.Out {
					t.Errorf("%s/%s %s: %d params for %d×%d", b.Name, m.Name, l.Name, l.Params, l.In, l.Out)
				}
				sum += l.Params
			}
			if sum+m.OtherParams != m.Params || m.Params < 1 || m.OtherParams < 0 {
				t.Errorf("%s/%s: layers add up to %d, total %d", b.Name, m.Name, sum, m.Params)
			}
			if last := m.Layers[len(m.Layers)-1]; last.Out != b.Classes {
				t.Errorf("%s/%s: output layer of %d, want %d classes", b.Name, m.Name, last.Out, b.Classes)
			}
			if b.Name == "mnist" && m.Params != byHand[m.Name] {
				t.Errorf("mnist/%s: %d params, by hand %d", m.Name, m.Params, byHand[m.Name])
			}
		}
		if defaults != 1 {
			t.Errorf("%s: %d defaults", b.Name, defaults)
		}
	}
}

// TestModelsIsWhatTrainBuilds: the listing and dpsgd train read the same table: the parameter
// count train reports for each preset is the listed one.
func TestModelsIsWhatTrainBuilds(t *testing.T) {
	code, out, errOut := runCmd(t, "models", "--dataset", "synthetic", "--json")
	if code != 0 {
		t.Fatal(errOut)
	}
	var list modelsJSON
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &list); err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Models {
		if !m.Available {
			if code, _, errOut := runCmd(t, "train", "--model", m.Name, "--epochs", "1", "--quiet"); code != 2 || !strings.Contains(errOut, "needs image data") {
				t.Errorf("train --model %s on synthetic: exit %d: %s", m.Name, code, errOut)
			}
			continue
		}
		code, out, errOut := runCmd(t, "train", "--model", m.Name, "--epochs", "1", "--sigma", "1", "--seed", "1", "--quiet", "--json", "--allow-chance")
		if code != 0 {
			t.Fatalf("train --model %s: exit %d: %s", m.Name, code, errOut)
		}
		if p := lastJSON(t, out)["params"]; p != float64(m.Params) {
			t.Errorf("train --model %s: params %v, listed %d", m.Name, p, m.Params)
		}
	}
}

func TestModelsTextAndErrors(t *testing.T) {
	code, out, errOut := runCmd(t, "models")
	if code != 0 {
		t.Fatal(errOut)
	}
	for _, want := range []string{"on mnist (examples 1×28×28, 10 classes)", "logreg: 7,850 parameters", "mlp: 50,890 parameters, tanh",
		"cnn (the default): 26,010 parameters, tanh", "transformer: 71,946 parameters", "dense 64 → 192 at each of 16 positions", "conv 16 filters of 64 inputs, 8×8 kernel, stride 2, pad 3, 196 positions, max-pool 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if _, out, _ := runCmd(t, "models", "--dataset", "adult"); !strings.Contains(out, "cnn: not for adult: needs image data") {
		t.Errorf("adult:\n%s", out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"models", "--dataset", "cifar100"}, "--dataset cifar100: want synthetic, mnist, adult, cifar10"},
		{[]string{"models", "--dataset", "csv"}, "comes from its schema"},
		{[]string{"models", "mnist"}, `unexpected argument "mnist"`},
		{[]string{"train", "--model", "transformer", "--hidden", "32"}, "--hidden does not apply to --model transformer"},
		{[]string{"train", "--model", "transformer", "--dataset", "mnist", "--activation", "relu"}, "--activation does not apply to --model transformer"},
		{[]string{"train", "--model", "resnet"}, `--model "resnet": want logreg, mlp, cnn, transformer, wrn16-4 or scatternet (dpsgd models lists them)`},
		{[]string{"train", "--model", "wrn16-4", "--hidden", "32"}, "--hidden does not apply to --model wrn16-4"},
	} {
		code, out, errOut := runCmd(t, tc.args...)
		if code != 2 || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and one line with %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// TestGroupDigits: removing the commas gives the number back, and they split it in threes
// from the right.
func TestGroupDigits(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 1000; i++ {
		n := r.IntN(1 << uint(r.IntN(62)+1))
		if i%2 == 1 {
			n = -n
		}
		s := groupDigits(n)
		if strings.ReplaceAll(s, ",", "") != strconv.Itoa(n) {
			t.Fatalf("groupDigits(%d) = %q", n, s)
		}
		parts := strings.Split(strings.TrimPrefix(s, "-"), ",")
		for k, p := range parts {
			if len(p) != 3 && !(k == 0 && len(p) >= 1 && len(p) <= 3) {
				t.Fatalf("groupDigits(%d) = %q", n, s)
			}
		}
	}
}

// TestPresetLR: a preset's own optimizer takes its tuned rate, another optimizer its default
// for it; the SGD presets are unchanged (momentum and SGD take the preset's rate, Adam 1e-3).
func TestPresetLR(t *testing.T) {
	for _, tc := range []struct {
		dataset, model, optimizer string
		want                      float64
	}{
		{"mnist", "transformer", "adam", 1e-2},
		{"mnist", "transformer", "ADAM", 1e-2},
		{"mnist", "cnn", "momentum", 0.5},
		{"mnist", "cnn", "sgd", 0.5},
		{"mnist", "cnn", "adam", 1e-3},
		{"mnist", "mlp", "momentum", 1},
	} {
		if got := presetLR(presetFor(tc.dataset, tc.model), tc.optimizer); got != tc.want {
			t.Errorf("%s/%s with %s: lr %v, want %v", tc.dataset, tc.model, tc.optimizer, got, tc.want)
		}
	}
}
