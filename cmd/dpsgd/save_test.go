package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/engine/checkpoint"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/model"
	"github.com/dpsgd/dpsgd/privacy/accounting"
	"gorgonia.org/tensor"
)

// saveArgs is a small, fast private run on the synthetic data that saves its model.
func saveArgs(path string, extra ...string) []string {
	return append([]string{"train", "--hidden", "8", "--batch-size", "512", "--epochs", "2", "--sigma", "1", "--accountant", "rdp",
		"--schedule", "constant", "--quiet", "--json", "--save", path}, extra...)
}

// syntheticTest is the built-in synthetic test set.
func syntheticTest(t *testing.T) *datasets.Dataset {
	t.Helper()
	_, test, err := datasets.Synthetic(datasets.DefaultSynthetic())
	if err != nil {
		t.Fatal(err)
	}
	return test
}

// writeCSV writes the rows of ds (float32 values, shortest exact form) as a CSV file.
func writeCSV(t *testing.T, path string, ds *datasets.Dataset) {
	t.Helper()
	var b strings.Builder
	for i := range ds.N {
		for j, v := range ds.Row(i) {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatFloat(float64(v), 'g', -1, 32))
		}
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// parsePredictCSV reads predict's CSV output: the header, then row,class[,p…] per line.
func parsePredictCSV(t *testing.T, out string) (header []string, classes []int, proba [][]float64) {
	t.Helper()
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(recs) < 1 {
		t.Fatalf("predict output is not CSV: %v\n%s", err, out)
	}
	for i, r := range recs[1:] {
		if r[0] != strconv.Itoa(i) {
			t.Fatalf("line %d: row %q, want %d", i+2, r[0], i)
		}
		c, err := strconv.Atoi(r[1])
		if err != nil {
			t.Fatal(err)
		}
		classes = append(classes, c)
		var p []float64
		for _, s := range r[2:] {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatal(err)
			}
			p = append(p, v)
		}
		proba = append(proba, p)
	}
	return recs[0], classes, proba
}

// TestSaveEvalPredict: train --save writes the model and its safetensors and says so in the
// JSON; eval of the file reports exactly the run's test accuracy, a confusion matrix whose rows
// sum to each label's count (N in all) and whose diagonal is the accuracy, and the file's
// guarantee; predict on every test row (CSV) gives classes that rebuild that confusion matrix,
// and on a few rows the argmax of the engine's logits, in CSV and JSONL, with probabilities
// that sum to 1 and peak at the class.
func TestSaveEvalPredict(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.dpsgd")
	code, out, errOut := runCmd(t, saveArgs(path, "--seed", "4242")...)
	if code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	tr := lastJSON(t, out)
	saved, _ := tr["saved_model"].(map[string]any)
	if saved["file"] != path || saved["safetensors"] != path+".safetensors" {
		t.Fatalf("saved_model %v", tr["saved_model"])
	}
	for _, p := range []string{path, path + ".safetensors"} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o644 {
			t.Fatalf("%s: %v", p, err)
		}
	}
	a, err := model.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if a.Guarantee.Epsilon != tr["epsilon"] || float64(a.Guarantee.Steps) != tr["steps"] || a.Guarantee.Accountant != tr["accountant"] ||
		a.Preprocessing.Dataset != "synthetic" || a.Arch.Hidden[0] != 8 {
		t.Errorf("model file: guarantee %+v, preprocessing %+v; train JSON ε %v steps %v", a.Guarantee, a.Preprocessing, tr["epsilon"], tr["steps"])
	}

	code, out, errOut = runCmd(t, "eval", "--model", path)
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, errOut)
	}
	var ev evalJSON
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &ev); err != nil {
		t.Fatalf("eval output %q: %v", out, err)
	}
	test := syntheticTest(t)
	if ev.Accuracy != tr["test_accuracy"] || ev.N != test.N || ev.Dataset != "synthetic" || ev.Split != "test" || !(ev.MeanLoss > 0) ||
		ev.Epsilon != a.Guarantee.Epsilon || ev.Guarantee != a.Guarantee.Statement {
		t.Errorf("eval %+v; train test accuracy %v", ev, tr["test_accuracy"])
	}
	total, diag := 0, 0
	for i, row := range ev.ConfusionMatrix {
		n := 0
		for j, v := range row {
			n += v
			if i == j {
				diag += v
			}
		}
		if want := countOf(test.Y, i); n != want {
			t.Errorf("confusion row %d sums to %d, label %d has %d test examples", i, n, i, want)
		}
		total += n
	}
	if total != test.N || float64(diag)/float64(test.N) != ev.Accuracy {
		t.Errorf("confusion matrix: total %d, diagonal %d; N %d, accuracy %v", total, diag, test.N, ev.Accuracy)
	}

	rows := filepath.Join(dir, "test.csv")
	writeCSV(t, rows, test)
	code, out, errOut = runCmd(t, "predict", "--model", path, "--data", rows)
	if code != 0 {
		t.Fatalf("predict: exit %d: %s", code, errOut)
	}
	header, classes, _ := parsePredictCSV(t, out)
	if !slices.Equal(header, []string{"row", "class"}) || len(classes) != test.N {
		t.Fatalf("predict: header %v, %d rows for %d", header, len(classes), test.N)
	}
	conf := make([][]int, len(ev.ConfusionMatrix))
	for i := range conf {
		conf[i] = make([]int, len(conf))
	}
	for i, c := range classes {
		conf[test.Y[i]][c]++
	}
	for i := range conf {
		if !slices.Equal(conf[i], ev.ConfusionMatrix[i]) {
			t.Fatalf("confusion row %d from predict %v, eval's %v", i, conf[i], ev.ConfusionMatrix[i])
		}
	}

	few := test.Subset([]int{0, 1, 2, 3, 4})
	writeCSV(t, rows, few)
	logits, err := engine.Predict(a.Arch, a.Params, few.X, 0)
	if err != nil {
		t.Fatal(err)
	}
	k := a.Arch.Classes
	code, out, errOut = runCmd(t, "predict", "--model", path, "--data", rows, "--proba")
	if code != 0 {
		t.Fatalf("predict --proba: exit %d: %s", code, errOut)
	}
	header, classes, proba := parsePredictCSV(t, out)
	if len(header) != 2+k || header[2] != "p0" || len(classes) != few.N {
		t.Fatalf("predict --proba: header %v, %d rows", header, len(classes))
	}
	code, out, errOut = runCmd(t, "predict", "--model", path, "--data", rows, "--proba", "--format", "jsonl")
	if code != 0 {
		t.Fatalf("predict --format jsonl: exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != few.N {
		t.Fatalf("jsonl: %d lines for %d rows", len(lines), few.N)
	}
	for i := range few.N {
		want := engine.Argmax(logits[i*k : (i+1)*k])
		var rec predictJSON
		if err := json.Unmarshal([]byte(lines[i]), &rec); err != nil || rec.Row != i || rec.Class != want || len(rec.Proba) != k {
			t.Errorf("jsonl line %d: %q (%v), want class %d", i, lines[i], err, want)
		}
		sum := 0.0
		for _, p := range proba[i] {
			sum += p
		}
		if classes[i] != want || math.Abs(sum-1) > 1e-12 || slices.Index(proba[i], slices.Max(proba[i])) != want {
			t.Errorf("row %d: class %d, probabilities %v (sum %v); the engine's argmax is %d", i, classes[i], proba[i], sum, want)
		}
	}
}

func countOf(y []int, c int) int {
	n := 0
	for _, v := range y {
		if v == c {
			n++
		}
	}
	return n
}

// allowedKeys is every key a model file's manifest may hold, as a path ("guarantee.ledger.
// epochs[].epsilon"): the architecture, dtype and tensor shapes, the preprocessing, and the
// guarantee with its public ledger. Nothing about the data, the seed, the keys, the training
// statistics or the machine. A new key must be added here, after checking it is public.
var allowedKeys = map[string]bool{
	"arch": true, "arch.Kind": true, "arch.Input": true, "arch.Classes": true, "arch.Conv": true, "arch.Hidden": true,
	"arch.Activation": true, "arch.Conv[].Filters": true, "arch.Conv[].Kernel": true, "arch.Conv[].Stride": true,
	"arch.Conv[].Pad": true, "arch.Conv[].PoolKernel": true, "arch.Conv[].PoolStride": true,
	"dtype": true, "tensors": true, "tensors[].name": true, "tensors[].shape": true,
	"preprocessing": true, "preprocessing.dataset": true, "preprocessing.schema": true,
	// The schema of the user's own data, as the user wrote it (never its drafted "warning").
	"preprocessing.schema.label": true, "preprocessing.schema.label.column": true, "preprocessing.schema.label.classes": true,
	"preprocessing.schema.missing_values": true, "preprocessing.schema.columns": true, "preprocessing.schema.columns[].name": true,
	"preprocessing.schema.columns[].type": true, "preprocessing.schema.columns[].lo": true, "preprocessing.schema.columns[].hi": true,
	"preprocessing.schema.columns[].scale": true, "preprocessing.schema.columns[].categories": true, "preprocessing.schema.columns[].missing": true,
	"guarantee": true, "guarantee.statement": true, "guarantee.epsilon": true, "guarantee.delta": true, "guarantee.steps": true,
	"guarantee.epsilon_steps": true, "guarantee.accountant": true, "guarantee.sampler": true, "guarantee.adjacency": true,
	"guarantee.mechanism": true, "guarantee.secure": true, "guarantee.ledger": true,
	"guarantee.ledger.version": true, "guarantee.ledger.sampler": true, "guarantee.ledger.accountant": true,
	"guarantee.ledger.sigma": true, "guarantee.ledger.sample_rate": true, "guarantee.ledger.rounds": true,
	"guarantee.ledger.dataset_size": true, "guarantee.ledger.max_batch": true, "guarantee.ledger.mechanism": true,
	"guarantee.ledger.radius": true, "guarantee.ledger.dim": true, "guarantee.ledger.distance": true,
	"guarantee.ledger.public_size": true, "guarantee.ledger.adjacency": true, "guarantee.ledger.kind": true,
	"guarantee.ledger.delta": true, "guarantee.ledger.budget": true, "guarantee.ledger.budget.epsilon": true,
	"guarantee.ledger.budget.delta": true, "guarantee.ledger.steps": true, "guarantee.ledger.epochs": true,
	"guarantee.ledger.epochs[].epoch": true, "guarantee.ledger.epochs[].steps": true, "guarantee.ledger.epochs[].epsilon": true,
}

// allowedMetadata is every key of the safetensors file's "__metadata__".
var allowedMetadata = map[string]bool{"format": true, "dpsgd.arch": true, "dpsgd.sequential": true, "dpsgd.preprocessing": true,
	"dpsgd.guarantee": true, "dpsgd.epsilon": true, "dpsgd.delta": true}

// keyPaths collects the key paths of v into out.
func keyPaths(prefix string, v any, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			out[p] = true
			keyPaths(p, x, out)
		}
	case []any:
		for _, x := range v {
			keyPaths(prefix+"[]", x, out)
		}
	}
}

// manifestByHand reads the model file at path as an attacker would, not through package
// model: the framing (magic, version, manifest, parameters, SHA-256 of the rest), then the
// manifest, every key of which must be on allowedKeys. It returns the file, the manifest and
// the parameter block's length in bytes.
func manifestByHand(t *testing.T, path string) (data []byte, doc map[string]any, paramBytes uint64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(data[:8]) != "DPSGDMDL" || binary.LittleEndian.Uint32(data[8:]) != 1 {
		t.Fatalf("magic %q, version %d", data[:8], binary.LittleEndian.Uint32(data[8:]))
	}
	n := binary.LittleEndian.Uint64(data[12:])
	manifest := data[20 : 20+n]
	m := binary.LittleEndian.Uint64(data[20+n:])
	if sum := sha256.Sum256(data[:len(data)-32]); 28+n+m+32 != uint64(len(data)) || !bytes.Equal(sum[:], data[len(data)-32:]) {
		t.Fatalf("framing: manifest %d, parameters %d, file %d bytes; checksum ok %v", n, m, len(data), bytes.Equal(sum[:], data[len(data)-32:]))
	}
	if err := json.Unmarshal(manifest, &doc); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	keyPaths("", doc, keys)
	for k := range keys {
		if !allowedKeys[k] {
			t.Errorf("the model file holds key %q, which is not on the list of public keys", k)
		}
	}
	return data, doc, m
}

// TestSavedModelHoldsNothingPrivate is the attacker's look at a saved model: it reads every byte
// of both files by hand (not through package model) and finds only the allowed keys, a
// parameter block of exactly the architecture's size, and neither the seed (in decimal, in hex,
// as bytes), nor the data's location, nor the run's training statistics, nor the checkpoint's
// run id, even for a run with --private-stats and a checkpoint, whose key store and checkpoint
// do hold such things. The checkpoint does not record --save either.
func TestSavedModelHoldsNothingPrivate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.dpsgd")
	ckpt := filepath.Join(dir, "run.ckpt")
	const seed = 987654321012345
	code, out, errOut := runCmd(t, saveArgs(path, "--seed", strconv.Itoa(seed), "--private-stats", "--checkpoint", ckpt, "--model", "mlp", "--ema", "0.9")...)
	if code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	tr := lastJSON(t, out)
	data, doc, m := manifestByHand(t, path)
	ck, err := checkpoint.Load(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if ck.Config.Arch.NumParams()*4 != int(m) || doc["dtype"] != "float32" {
		t.Errorf("parameter block of %d bytes, the architecture's %d float32 values take %d", m, ck.Config.Arch.NumParams(), 4*ck.Config.Arch.NumParams())
	}
	if _, ok := ck.Config.Meta["save"]; ok {
		t.Errorf("the checkpoint records --save: %v", ck.Config.Meta)
	}

	st, err := os.ReadFile(path + ".safetensors")
	if err != nil {
		t.Fatal(err)
	}
	hn := binary.LittleEndian.Uint64(st)
	var header map[string]json.RawMessage
	if err := json.Unmarshal(st[8:8+hn], &header); err != nil {
		t.Fatal(err)
	}
	tensorName := regexp.MustCompile(`^[0-9]+\.(weight|bias)$`)
	covered := 0
	for k, v := range header {
		if k == "__metadata__" {
			var meta map[string]string
			if err := json.Unmarshal(v, &meta); err != nil {
				t.Fatal(err)
			}
			for mk := range meta {
				if !allowedMetadata[mk] {
					t.Errorf("the safetensors metadata holds key %q, which is not on the list", mk)
				}
			}
			continue
		}
		var e struct {
			Dtype       string   `json:"dtype"`
			Shape       []int    `json:"shape"`
			DataOffsets [2]int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(v, &e); err != nil || !tensorName.MatchString(k) || e.Dtype != "F32" {
			t.Errorf("safetensors entry %q: %s (%v)", k, v, err)
		}
		covered += int(e.DataOffsets[1] - e.DataOffsets[0])
	}
	if covered != len(st)-8-int(hn) || covered != int(m) {
		t.Errorf("the safetensors tensors cover %d bytes of a %d-byte buffer; the parameters are %d bytes", covered, len(st)-8-int(hn), m)
	}

	// Values that must appear in neither file.
	var seedLE [8]byte
	binary.LittleEndian.PutUint64(seedLE[:], seed)
	secrets := map[string][]byte{
		"the seed":              []byte(strconv.Itoa(seed)),
		"the seed in hex":       []byte(strconv.FormatUint(seed, 16)),
		"the seed's bytes":      seedLE[:],
		"the directory":         []byte(dir),
		"the checkpoint's path": []byte(ckpt),
		"the run id":            []byte(ck.Config.RunID),
		"the data fingerprint":  []byte(ck.Config.DataMAC),
		"the params digest":     []byte(tr["params_digest"].(string)),
	}
	for _, h := range tr["history"].([]any) {
		e := h.(map[string]any)
		for _, k := range []string{"train_loss", "train_accuracy", "clipped_fraction"} {
			v, ok := e[k].(float64)
			if !ok {
				t.Fatalf("--private-stats history lacks %s: %v", k, e)
			}
			secrets[k] = []byte(strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
	for what, b := range secrets {
		for name, file := range map[string][]byte{"model file": data, "safetensors": st} {
			if bytes.Contains(file, b) {
				t.Errorf("the %s holds %s (%q)", name, what, b)
			}
		}
	}
	if s := doc["guarantee"].(map[string]any)["statement"].(string); !strings.Contains(s, "a seed that is not in this file") {
		t.Errorf("statement %q", s)
	}
}

// TestSaveRefusals: --save is refused before the run with --non-private, a missing directory, a
// directory, or the checkpoint's path (exit 2); a run that diverges or stops before its first
// step saves nothing, saying why.
func TestSaveRefusals(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.dpsgd")
	for _, c := range []struct {
		args []string
		want string
	}{
		{saveArgs(path, "--non-private"), "--save with --non-private"},
		{saveArgs(filepath.Join(dir, "absent", "m.dpsgd")), "does not exist"},
		{saveArgs(dir), "is a directory"},
		{saveArgs(path, "--checkpoint", path), "the same file as the checkpoint"},
	} {
		code, _, errOut := runCmd(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
	// The budget fits no epoch: no step, no model (exit 1: the model asked for was not written).
	code, _, errOut := runCmd(t, saveArgs(path, "--target-epsilon", "0.01")...)
	if code != 1 || !strings.Contains(errOut, "no model saved") || !strings.Contains(errOut, "no step taken") {
		t.Errorf("no step: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runCmd(t, saveArgs(path, "--model", "mlp", "--lr", "1e30", "--weight-decay", "1")...)
	if code != 1 || !strings.Contains(errOut, "diverged") || !strings.Contains(errOut, "no model saved") {
		t.Errorf("diverged: exit %d, stderr %q", code, errOut)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a model was written: %v", err)
	}
}

// TestSaveInterrupted: an interrupted run (exit 130) saves the model of the steps charged, and
// the file states the ε the run reports, covering the epoch in progress.
func TestSaveInterrupted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.dpsgd")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	errOut := &cancelOnWrite{needle: "epoch   1", cancel: cancel}
	code := run(ctx, []string{"train", "--model", "logreg", "--epochs", "50", "--sigma", "1", "--json", "--save", path}, &out, errOut)
	if code != 130 {
		t.Fatalf("exit %d, want 130: %s", code, errOut.buf.String())
	}
	tr := lastJSON(t, out.String())
	a, err := model.ReadFile(path)
	if err != nil {
		t.Fatalf("no model after the interrupt: %v\n%s", err, errOut.buf.String())
	}
	g := a.Guarantee
	if tr["interrupted"] != true || g.Epsilon != tr["epsilon"] || float64(g.Steps) != tr["steps"] || float64(g.EpsilonSteps) != tr["epsilon_steps"] ||
		g.EpsilonSteps <= g.Steps || !strings.Contains(g.Statement, "the run stopped inside an epoch") {
		t.Errorf("interrupted run: guarantee %+v; JSON ε %v steps %v covering %v", g, tr["epsilon"], tr["steps"], tr["epsilon_steps"])
	}
}

// TestEvalPredictErrors: missing, corrupt and foreign model files, a dataset that is not the
// model's, bad rows and bad flags are usage errors (exit 2) that name the problem.
func TestEvalPredictErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.dpsgd")
	if code, _, errOut := runCmd(t, saveArgs(path, "--epochs", "1")...); code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), good...)
	bad[len(bad)/2] ^= 1
	corrupt := filepath.Join(dir, "corrupt.dpsgd")
	if err := os.WriteFile(corrupt, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	rows := filepath.Join(dir, "rows.csv")
	if err := os.WriteFile(rows, []byte("1,2,3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(dir, "images.idx")
	if err := os.WriteFile(idx, []byte{0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 28, 0, 0, 0, 28}, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"eval"}, "--model: want the file"},
		{[]string{"eval", "--model", filepath.Join(dir, "absent")}, "no such file"},
		{[]string{"eval", "--model", corrupt}, "SHA-256 mismatch"},
		{[]string{"eval", "--model", path + ".safetensors"}, "not a dpsgd model file"},
		{[]string{"eval", "--model", path, "--dataset", "mnist"}, "trained on synthetic data"},
		{[]string{"predict", "--model", path}, "--data: want the file"},
		{[]string{"predict", "--model", path, "--data", rows}, "rows.csv:1: 3 fields, want 32"},
		{[]string{"predict", "--model", path, "--data", rows, "--format", "xml"}, `--format "xml"`},
		{[]string{"predict", "--model", path, "--data", idx}, "an IDX file is read for models of MNIST images"},
		{[]string{"predict", "--model", corrupt, "--data", rows}, "SHA-256 mismatch"},
	} {
		code, _, errOut := runCmd(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

// handArtifact is a model of arch for dataset with parameters drawn from seed and a valid
// guarantee (Poisson, RDP, one epoch of 10 steps): for the commands that read models.
func handArtifact(t *testing.T, arch nn.Arch, dataset string, seed uint64) *model.Artifact {
	t.Helper()
	params, err := nn.NewParams(arch, tensor.Float32, seed)
	if err != nil {
		t.Fatal(err)
	}
	spec := accounting.Spec{Sampler: "poisson", Method: "rdp", Sigma: 1, SampleRate: 0.01, PublicSize: true}
	led, err := accounting.NewLedger(spec, 1e-5, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := led.Record(1, 10, 0.5); err != nil {
		t.Fatal(err)
	}
	return &model.Artifact{Arch: arch, Params: params, Preprocessing: model.Preprocessing{Dataset: dataset}, Guarantee: model.Guarantee{
		Statement: "(ε = 0.5, δ = 1e-05)-DP after 10 steps", Epsilon: 0.5, Delta: 1e-5, Steps: 10, EpsilonSteps: 10,
		Accountant: "rdp", Sampler: "poisson", Adjacency: led.Adjacency, Mechanism: model.MechanismGaussian, Ledger: led,
	}}
}

// predictClasses runs dpsgd predict and returns the classes it printed.
func predictClasses(t *testing.T, args ...string) []int {
	t.Helper()
	code, out, errOut := runCmd(t, append([]string{"predict"}, args...)...)
	if code != 0 {
		t.Fatalf("predict %v: exit %d: %s", args, code, errOut)
	}
	_, classes, _ := parsePredictCSV(t, out)
	return classes
}

// argmaxes returns the engine's classes of the rows of x.
func argmaxes(t *testing.T, a *model.Artifact, x []float32) []int {
	t.Helper()
	logits, err := engine.Predict(a.Arch, a.Params, x, 0)
	if err != nil {
		t.Fatal(err)
	}
	k := a.Arch.Classes
	var out []int
	for i := 0; i < len(logits); i += k {
		out = append(out, engine.Argmax(logits[i:i+k]))
	}
	return out
}

// TestPredictBuiltinInputs: the built-in preprocessings on their raw inputs — MNIST images as
// an IDX file (raw and gzip) and as a CSV of pixel bytes, Adult records as the UCI test file
// writes them (its first "|" line, 15 fields with the label, 14 without) — give the classes of
// the engine on the features the datasets package makes of the same inputs. A pixel out of
// range and an unparsable Adult number are refused naming the line and the field.
func TestPredictBuiltinInputs(t *testing.T) {
	dir := t.TempDir()
	mnist := handArtifact(t, nn.CNN([]int{1, 28, 28}, 10, nil, nn.Tanh), "mnist", 3)
	mpath := filepath.Join(dir, "mnist.dpsgd")
	if err := model.WriteFile(mpath, mnist); err != nil {
		t.Fatal(err)
	}
	const n, d = 4, 28 * 28
	pixels := make([]byte, n*d)
	for i := range pixels {
		pixels[i] = byte((i*7 + i/d*31) % 256)
	}
	idx := append([]byte{0, 0, 8, 3}, binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, n), 28), 28)...)
	idx = append(idx, pixels...)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(idx); err != nil || zw.Close() != nil {
		t.Fatal(err)
	}
	var csvText strings.Builder
	x := make([]float32, n*d)
	for i, p := range pixels {
		x[i] = datasets.MNISTPixel(p)
		csvText.WriteString(strconv.Itoa(int(p)))
		if i%d == d-1 {
			csvText.WriteByte('\n')
		} else {
			csvText.WriteByte(',')
		}
	}
	want := argmaxes(t, mnist, x)
	for name, content := range map[string][]byte{"images.idx": idx, "images.idx.gz": gz.Bytes(), "images.csv": []byte(csvText.String())} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
		if got := predictClasses(t, "--model", mpath, "--data", p); !slices.Equal(got, want) {
			t.Errorf("mnist %s: classes %v, the engine's %v", name, got, want)
		}
	}
	badPixel := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(badPixel, []byte("0"+strings.Repeat(",0", d-2)+",256\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCmd(t, "predict", "--model", mpath, "--data", badPixel); code != 2 || !strings.Contains(errOut, "bad.csv:1: field 784") {
		t.Errorf("pixel 256: exit %d, %q", code, errOut)
	}

	adult := handArtifact(t, nn.LogReg([]int{datasets.AdultDim}, 2), "adult", 5)
	apath := filepath.Join(dir, "adult.dpsgd")
	if err := model.WriteFile(apath, adult); err != nil {
		t.Fatal(err)
	}
	records := "|1x3 Cross validator\n" +
		"25, Private, 226802, 11th, 7, Never-married, Machine-op-inspct, Own-child, Black, Male, 0, 0, 40, United-States, <=50K.\n" +
		"44, Private, 160323, Some-college, 10, Married-civ-spouse, Machine-op-inspct, Husband, Black, Male, 7688, 0, 40, United-States, >50K.\n" +
		"\n" +
		"61, ?, 1e7, Doctorate, 16, Widowed, ?, Unmarried, Other, Female, 99999, 4356, 99, Holand-Netherlands, <=50K\n" +
		"17, Nowhere, 12285, 7th-8th, 4, Never-married, Sales, Own-child, White, Female, 0, 0, 1, Mars, <=50K\n"
	recs, err := datasets.ReadAdultCSV(strings.NewReader(records), "records")
	if err != nil {
		t.Fatal(err)
	}
	ds, err := datasets.NewAdultEncoder().Encode("records", recs)
	if err != nil {
		t.Fatal(err)
	}
	want = argmaxes(t, adult, ds.X)
	// The same records without their labels, after the labelled ones.
	var unlabelled strings.Builder
	for _, line := range strings.Split(records, "\n")[1:] {
		if i := strings.LastIndex(line, ","); i > 0 {
			unlabelled.WriteString(line[:i] + "\n")
		}
	}
	p := filepath.Join(dir, "adult.test")
	if err := os.WriteFile(p, []byte(records+unlabelled.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := predictClasses(t, "--model", apath, "--data", p); !slices.Equal(got, append(slices.Clone(want), want...)) {
		t.Errorf("adult: classes %v, the engine's %v twice", got, want)
	}
	_ = os.WriteFile(p, []byte("25, Private, 2e, 11th, 7, Never-married, Machine-op-inspct, Own-child, Black, Male, 0, 0, 40, United-States\n"), 0o644)
	if code, _, errOut := runCmd(t, "predict", "--model", apath, "--data", p); code != 2 || !strings.Contains(errOut, "adult.test:1: field 3 (fnlwgt)") {
		t.Errorf("bad number: exit %d, %q", code, errOut)
	}
}

// sharedData returns the directory of the real files of sub (a shared/datasets directory beside
// the checkout), skipping the test when it is absent.
func sharedData(t *testing.T, sub string) string {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "shared", "datasets", sub)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Skipf("real data not available: %s is absent", dir)
	}
	return dir
}

// TestSaveEvalPredictAdult: on the real UCI Adult files, eval of a saved model gives the run's
// test accuracy, and predict on adult.test as distributed (one record a line, through the
// adult preprocessing row by row) rebuilds eval's confusion matrix exactly.
func TestSaveEvalPredictAdult(t *testing.T) {
	data := sharedData(t, "uci-adult")
	path := filepath.Join(t.TempDir(), "adult.dpsgd")
	code, out, errOut := runCmd(t, "train", "--dataset", "adult", "--data-dir", data, "--epochs", "1", "--sigma", "1",
		"--accountant", "rdp", "--quiet", "--json", "--save", path)
	if code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	tr := lastJSON(t, out)
	code, out, errOut = runCmd(t, "eval", "--model", path, "--data-dir", data)
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, errOut)
	}
	var ev evalJSON
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Accuracy != tr["test_accuracy"] || ev.N != 16281 {
		t.Errorf("eval accuracy %v on %d, train's %v", ev.Accuracy, ev.N, tr["test_accuracy"])
	}
	_, test, err := datasets.LoadAdult(data)
	if err != nil {
		t.Fatal(err)
	}
	classes := predictClasses(t, "--model", path, "--data", filepath.Join(data, "adult.test"))
	if len(classes) != test.N {
		t.Fatalf("%d predictions for %d records", len(classes), test.N)
	}
	conf := [][]int{{0, 0}, {0, 0}}
	for i, c := range classes {
		conf[test.Y[i]][c]++
	}
	if !slices.Equal(conf[0], ev.ConfusionMatrix[0]) || !slices.Equal(conf[1], ev.ConfusionMatrix[1]) {
		t.Errorf("confusion from predict %v, eval's %v", conf, ev.ConfusionMatrix)
	}
}
