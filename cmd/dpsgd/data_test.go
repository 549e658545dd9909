package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
)

// writeTabular writes a small separable CSV: two numeric columns, a categorical one, an id to
// ignore, and the label last; quoted fields and CRLF line ends included.
func writeTabular(t *testing.T, dir string, n int, seed uint64) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	b.WriteString("x1,x2,color,id,y\r\n")
	for i := range n {
		x1, x2 := rng.Float64()*10, rng.Float64()*10-5
		color := []string{"red", "green", `"blue, dark"`}[rng.IntN(3)]
		y := "neg"
		if x1+x2 > 5 {
			y = "pos"
		}
		fmt.Fprintf(&b, "%.3f,%.3f,%s,%d,%s\r\n", x1, x2, color, i, y)
	}
	path := filepath.Join(dir, fmt.Sprintf("data%d.csv", seed))
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// reviewSchema stands for the user's review of a drafted schema: the warning deleted, the
// numeric bounds replaced by public ones, and the columns named in ignore ignored.
func reviewSchema(t *testing.T, drafted, out string, bounds map[string][2]float64, ignore ...string) {
	t.Helper()
	s, err := datasets.LoadSchema(drafted)
	if err != nil {
		t.Fatal(err)
	}
	if s.Warning == "" {
		t.Fatal("drafted schema without a warning")
	}
	s.Warning = ""
	for i, c := range s.Columns {
		if b, ok := bounds[c.Name]; ok {
			s.Columns[i].Lo, s.Columns[i].Hi = b[0], b[1]
		}
		if slices.Contains(ignore, c.Name) {
			s.Columns[i] = datasets.Column{Name: c.Name, Type: datasets.ColumnIgnore}
		}
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSchemaThenTrainCSV: dpsgd schema drafts a schema (warning on stderr and in the file),
// train refuses the draft, and trains on the reviewed one, with --test-split and with
// --test-data; the model's width is the schema's D.
func TestSchemaThenTrainCSV(t *testing.T) {
	dir := t.TempDir()
	data := writeTabular(t, dir, 300, 1)
	testData := writeTabular(t, dir, 100, 2)
	drafted := filepath.Join(dir, "drafted.json")
	code, out, errOut := runCmd(t, "schema", "--data", data, "--label", "y", "--out", drafted)
	if code != 0 || out != "" || !strings.Contains(errOut, "NOT private") || !strings.Contains(errOut, "3 numeric, 1 categorical and 0 ignored columns; D = 7") {
		t.Fatalf("schema: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// Without --out the schema goes to stdout.
	code, out, _ = runCmd(t, "schema", "--data", data, "--label", "y", "--max-categories", "2")
	if s, err := datasets.ParseSchema([]byte(out)); code != 0 || err != nil || len(s.Columns[2].Categories) != 2 {
		t.Fatalf("schema to stdout: exit %d, %v:\n%s", code, err, out)
	}
	code, _, errOut = runCmd(t, "train", "--data", data, "--schema", drafted, "--epochs", "1", "--quiet")
	if code != 2 || !strings.Contains(errOut, "drafted from the data") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("train on a draft: exit %d, %q; want 2 and one line", code, errOut)
	}
	schema := filepath.Join(dir, "schema.json")
	// The id column was drafted numeric: the review ignores it.
	reviewSchema(t, drafted, schema, map[string][2]float64{"x1": {0, 10}, "x2": {-5, 5}}, "id")
	for _, tc := range []struct {
		extra  []string
		trainN int // the public N of the training set
	}{{[]string{"--test-split", "0.25"}, 225}, {[]string{"--test-data", testData}, 300}, {nil, 240}} {
		args := append([]string{"train", "--data", data, "--schema", schema, "--epochs", "2", "--batch-size", "32",
			"--seed", "1", "--quiet", "--json"}, tc.extra...)
		code, out, errOut := runCmd(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.extra, code, errOut)
		}
		m := lastJSON(t, out)
		// logreg over D = 2 numeric + 3 colors + other = 6 features and 2 classes.
		if m["dataset"] != "csv" || m["model"] != "logreg" || m["params"] != float64(2*6+2) {
			t.Errorf("%v: dataset %v model %v params %v", tc.extra, m["dataset"], m["model"], m["params"])
		}
		if steps, _ := m["steps"].(float64); steps < 1 {
			t.Errorf("%v: %v steps", tc.extra, m["steps"])
		}
		if g, _ := m["guarantee"].(string); !strings.Contains(g, fmt.Sprintf("N = %d is public", tc.trainN)) {
			t.Errorf("%v: guarantee %q does not state N = %d", tc.extra, g, tc.trainN)
		}
	}
}

// TestTrainWithoutSchemaExit2: --data without --schema is refused with exit 2 on one line that
// lists the columns and names dpsgd schema.
func TestTrainWithoutSchemaExit2(t *testing.T) {
	data := writeTabular(t, t.TempDir(), 20, 3)
	code, out, errOut := runCmd(t, "train", "--data", data, "--epochs", "1")
	if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 2 and one line", code, out, errOut)
	}
	for _, want := range []string{"--schema is required", `"x1", "x2", "color", "id", "y"`, "dpsgd schema --data " + data + " --label"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr %q does not contain %q", errOut, want)
		}
	}
}

// writeIDX writes an IDX file of bytes with the given dims.
func writeIDX(t *testing.T, path string, dims []uint32, payload []byte) {
	t.Helper()
	var b bytes.Buffer
	b.Write([]byte{0, 0, 0x08, byte(len(dims))})
	for _, d := range dims {
		_ = binary.Write(&b, binary.BigEndian, d)
	}
	b.Write(payload)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSchemaThenTrainIDX: the same path for an IDX pair: images 4×4 bytes, 3 classes.
func TestSchemaThenTrainIDX(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(4, 5))
	const n = 120
	img, lbl := make([]byte, n*16), make([]byte, n)
	for i := range lbl {
		lbl[i] = byte(rng.IntN(3))
		for k := range 16 {
			img[i*16+k] = byte(min(255, int(lbl[i])*80+rng.IntN(60)))
		}
	}
	images, labels := filepath.Join(dir, "images"), filepath.Join(dir, "labels")
	writeIDX(t, images, []uint32{n, 4, 4}, img)
	writeIDX(t, labels, []uint32{n}, lbl)
	code, _, errOut := runCmd(t, "train", "--data", images, "--labels", labels, "--epochs", "1")
	if code != 2 || !strings.Contains(errOut, "dpsgd schema --data "+images+" --labels "+labels) {
		t.Fatalf("without schema: exit %d, %q", code, errOut)
	}
	drafted, schema := filepath.Join(dir, "drafted.json"), filepath.Join(dir, "schema.json")
	if code, _, errOut := runCmd(t, "schema", "--data", images, "--labels", labels, "--out", drafted); code != 0 || !strings.Contains(errOut, "NOT private") {
		t.Fatalf("schema: exit %d: %s", code, errOut)
	}
	reviewSchema(t, drafted, schema, nil)
	code, out, errOut := runCmd(t, "train", "--data", images, "--labels", labels, "--schema", schema,
		"--test-data", images, "--test-labels", labels, "--epochs", "1", "--batch-size", "16", "--seed", "2", "--quiet", "--json")
	if code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	m := lastJSON(t, out)
	// mlp 16-64-3 (the preset's hidden width): 16·64 + 64 + 64·3 + 3 parameters.
	if m["dataset"] != "idx" || m["model"] != "mlp" || m["params"] != float64(16*64+64+64*3+3) {
		t.Errorf("dataset %v model %v params %v", m["dataset"], m["model"], m["params"])
	}
}

// TestDataFlagErrors: the data flags that do not fit together are usage errors (exit 2, one
// line naming the flag).
func TestDataFlagErrors(t *testing.T) {
	dir := t.TempDir()
	data := writeTabular(t, dir, 20, 6)
	txt := filepath.Join(dir, "data.txt")
	if err := os.WriteFile(txt, []byte("a,y\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badSchema := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(badSchema, []byte(`{"label": {"column": "y", "classes": ["neg", "pos"]}, "columns": [{"name": "x1", "type": "numeric", "lo": 3, "hi": 1}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--dataset", "adult", "--data", data}, "--data: for --dataset csv or idx"},
		{[]string{"train", "--schema", "s.json"}, "--schema: for --dataset csv or idx"},
		{[]string{"train", "--data", txt}, "give --dataset csv, or --dataset idx"},
		{[]string{"train", "--dataset", "csv"}, "--dataset csv needs --data FILE"},
		{[]string{"train", "--dataset", "tsv"}, "want synthetic, mnist, adult, cifar10, csv or idx"},
		{[]string{"train", "--data", data, "--test-split", "1.5"}, "--test-split 1.5: want a fraction in (0, 1)"},
		{[]string{"train", "--data", data, "--test-split", "0.2", "--test-data", data}, "give one of them"},
		{[]string{"train", "--dataset", "csv", "--data", data, "--labels", "l"}, "--labels: for --dataset idx"},
		{[]string{"train", "--data", data, "--data-dir", dir}, "--data-dir and --cache-dir are for --dataset mnist, adult or cifar10"},
		{[]string{"train", "--dataset", "idx", "--data", data}, "--dataset idx needs --labels FILE"},
		{[]string{"train", "--data", "img", "--labels", "l", "--label", "y"}, "--label names a CSV column"},
		{[]string{"train", "--data", "img", "--labels", "l", "--test-data", "t"}, "--test-data and --test-labels go together"},
		{[]string{"train", "--data", data, "--schema", filepath.Join(dir, "absent.json")}, "--schema: datasets: schema: open"},
		{[]string{"train", "--data", data, "--schema", badSchema}, `columns[0] ("x1"): hi: 1, want hi > lo = 3`},
		{[]string{"train", "--data", filepath.Join(dir, "absent.csv")}, "--data: datasets: open"},
		{[]string{"schema"}, "--data FILE is required"},
		{[]string{"schema", "--data", data}, "--label COLUMN is required"},
		{[]string{"schema", "--data", data, "--label", "nope"}, `no column named "nope" (the label column); the columns are ["x1" "x2" "color" "id" "y"]`},
		{[]string{"schema", "--data", data, "--label", "y", "--max-categories", "0"}, "--max-categories 0: want 1 to 65536"},
		{[]string{"schema", "--data", "img", "--labels", "l", "--label", "y"}, "--label names a CSV column"},
		{[]string{"schema", "--data", data, "--label", "y", "--out", filepath.Join(dir, "no", "such", "dir", "s.json")}, "--out"},
	} {
		code, out, errOut := runCmd(t, tc.args...)
		wantCode := 2
		if slices.Contains(tc.args, "--out") {
			wantCode = 1 // a file that cannot be written is a failure, not a usage error
		}
		if code != wantCode || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d and one line naming %q", tc.args, code, out, errOut, wantCode, tc.want)
		}
	}
}

// TestSchemaHelp: dpsgd schema --help prints its usage and flags on stdout and exits 0; the
// train help lists the data flags.
func TestSchemaHelp(t *testing.T) {
	code, out, errOut := runCmd(t, "schema", "--help")
	if code != 0 || errOut != "" || !strings.Contains(out, "Usage: dpsgd schema") || !strings.Contains(out, "NOT private") || !strings.Contains(out, "\nFlags:\n  --data") {
		t.Fatalf("exit %d, stderr %q:\n%s", code, errOut, out)
	}
	_, out, _ = runCmd(t, "train", "--help")
	for _, name := range ownDataFlags {
		if helpEntry(out, name) == "" {
			t.Errorf("train --help does not list --%s", name)
		}
	}
	if _, out, _ := runCmd(t, "help"); !strings.Contains(out, "dpsgd schema") {
		t.Errorf("the command list does not name schema:\n%s", out)
	}
}
