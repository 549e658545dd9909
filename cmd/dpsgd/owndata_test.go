package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/checkpoint"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/model"
)

// The tests of this file run the user's own data end to end: CSV (and IDX) → schema → review →
// train → save → eval → predict, through the command, as README.md's quick start says.

// incomeRow is one record of the quick start's data: a learnable linear rule (more hours, or
// being self-employed, mean a higher income; age is noise).
type incomeRow struct {
	age, hours     float64
	sector, income string
}

// incomeSectors is the codebook of the sector column: the public list a reviewer puts in the
// schema, in this order.
var incomeSectors = []string{"public", "private", "self", "none"}

// incomeSchema is the reviewed schema's public values: age and hours bounded by what a person's
// age and the hours of a week can be, the sectors of the codebook, the two income classes.
var (
	incomeBounds  = map[string][2]float64{"age": {0, 120}, "hours": {0, 168}}
	incomeClasses = []string{"<=50K", ">50K"}
)

// incomeRows draws n records from seed.
func incomeRows(n int, seed uint64) []incomeRow {
	rng := rand.New(rand.NewPCG(seed, 11))
	rows := make([]incomeRow, n)
	for i := range rows {
		r := incomeRow{age: float64(18 + rng.IntN(73)), hours: float64(1+rng.IntN(980)) / 10, sector: incomeSectors[rng.IntN(len(incomeSectors))]}
		score := (r.hours-40)/15 + 0.3*rng.NormFloat64()
		switch r.sector {
		case "self":
			score += 1.5
		case "none":
			score -= 1.5
		}
		r.income = incomeClasses[0]
		if score > 0 {
			r.income = incomeClasses[1]
		}
		rows[i] = r
	}
	return rows
}

// field returns the raw text of column name of r.
func (r incomeRow) field(name string) string {
	switch name {
	case "age":
		return strconv.FormatFloat(r.age, 'g', -1, 64)
	case "hours":
		return strconv.FormatFloat(r.hours, 'g', -1, 64)
	case "sector":
		return r.sector
	}
	return r.income
}

// writeIncome writes rows as a CSV file with the columns of header, in that order.
func writeIncome(t *testing.T, path string, header []string, rows []incomeRow) {
	t.Helper()
	var b strings.Builder
	b.WriteString(strings.Join(header, ",") + "\n")
	for _, r := range rows {
		for j, h := range header {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(r.field(h))
		}
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// reviewIncomeSchema is the user's review of the draft at path, done on the JSON as a person
// edits the file: the drafted bounds, categories and classes, statistics of the data, are
// replaced by the public values above, and the "warning" field is deleted.
func reviewIncomeSchema(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if _, ok := doc["warning"]; !ok {
		t.Fatalf("the draft has no warning field: %s", data)
	}
	delete(doc, "warning")
	doc["label"].(map[string]any)["classes"] = incomeClasses
	for _, c := range doc["columns"].([]any) {
		col := c.(map[string]any)
		if b, ok := incomeBounds[col["name"].(string)]; ok {
			col["lo"], col["hi"] = b[0], b[1]
		}
		if col["name"] == "sector" {
			col["categories"] = incomeSectors
		}
	}
	if data, err = json.MarshalIndent(doc, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// handFeatures is the oracle of a schema's encoding, written from docs/datasets.md rather than
// by the encoder: per column in the schema's order, a numeric value clamped to [lo, hi] and
// mapped to (v − lo)/(hi − lo), a category one-hot over the listed ones and the other bucket.
func handFeatures(s *datasets.Schema, r incomeRow) []float32 {
	var x []float32
	for _, c := range s.Columns {
		switch c.Type {
		case datasets.ColumnNumeric:
			v, _ := strconv.ParseFloat(r.field(c.Name), 64)
			v = min(max(v, c.Lo), c.Hi)
			x = append(x, float32((v-c.Lo)/(c.Hi-c.Lo)))
		case datasets.ColumnCategorical:
			hot := make([]float32, len(c.Categories)+1)
			j := slices.Index(c.Categories, r.field(c.Name))
			if j < 0 {
				j = len(c.Categories)
			}
			hot[j] = 1
			x = append(x, hot...)
		}
	}
	return x
}

// readmeQuickstart returns the commands of README.md's own-data quick start: the lines of the
// fenced block between its markers, without comments, split into words.
func readmeQuickstart(t *testing.T) [][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	i := strings.Index(text, "<!-- own-data-quickstart:")
	j := strings.Index(text, "<!-- end own-data-quickstart -->")
	if i < 0 || j < i {
		t.Fatal("README.md: no own-data-quickstart block between markers")
	}
	var cmds [][]string
	sc := bufio.NewScanner(strings.NewReader(text[i:j]))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		words := strings.Fields(line)
		if len(words) == 0 || strings.HasPrefix(words[0], "<!--") || strings.HasPrefix(words[0], "```") {
			continue
		}
		if words[0] != "dpsgd" {
			t.Fatalf("README.md quick start: %q is not a dpsgd command", sc.Text())
		}
		cmds = append(cmds, words[1:])
	}
	return cmds
}

// flagValue returns the value of --name in args ("" when absent).
func flagValue(args []string, name string) string {
	if k := slices.Index(args, "--"+name); k >= 0 && k+1 < len(args) {
		return args[k+1]
	}
	return ""
}

// TestReadmeOwnData runs README.md's own-data quick start as written, in a directory holding
// the files it names: train.csv (400 records of a learnable rule), test.csv (100) and new.csv
// (60, columns in another order, no label column, sectors and hours outside the schema).
// dpsgd schema drafts a schema that train refuses; the test reviews it as a user would; train
// (with --seed and --json added) learns the rule with DP and saves the model, which holds the
// reviewed schema exactly and the dataset kind; eval on test.csv gives train's test accuracy
// exactly; predict writes exactly one line per row of new.csv, the classes of the model on the
// features computed by hand from the schema.
func TestReadmeOwnData(t *testing.T) {
	cmds := readmeQuickstart(t)
	var names []string
	for _, c := range cmds {
		names = append(names, c[0])
	}
	if !slices.Equal(names, []string{"schema", "train", "eval", "predict"}) {
		t.Fatalf("README.md quick start runs %v, want schema, train, eval, predict", names)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	writeIncome(t, "train.csv", []string{"age", "hours", "sector", "income"}, incomeRows(400, 1))
	writeIncome(t, "test.csv", []string{"age", "hours", "sector", "income"}, incomeRows(100, 2))
	fresh := incomeRows(60, 3)
	fresh[0].sector, fresh[1].hours, fresh[2].age = "retired", 200, -3
	writeIncome(t, "new.csv", []string{"sector", "age", "hours"}, fresh)

	var tr map[string]any
	var saved *model.Artifact
	for _, c := range cmds {
		args := slices.Clone(c)
		var redirect string
		if k := slices.Index(args, ">"); k >= 0 {
			redirect, args = args[k+1], args[:k]
		}
		if args[0] == "train" {
			args = append(args, "--seed", "7", "--json")
		}
		code, out, errOut := runCmd(t, args...)
		if code != 0 {
			t.Fatalf("dpsgd %s: exit %d: %s", strings.Join(args, " "), code, errOut)
		}
		if redirect != "" {
			if err := os.WriteFile(redirect, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		switch args[0] {
		case "schema":
			schema := flagValue(args, "out")
			code, _, errOut := runCmd(t, "train", "--data", "train.csv", "--schema", schema)
			if code != 2 || !strings.Contains(errOut, `"warning" field is still there`) {
				t.Fatalf("train on the unreviewed draft: exit %d, %q", code, errOut)
			}
			reviewIncomeSchema(t, schema)
		case "train":
			tr = lastJSON(t, out)
			if flagValue(args, "test-data") != "test.csv" || tr["dataset"] != "csv" || tr["non_private"] == true || !(tr["test_accuracy"].(float64) > 0.8) {
				t.Fatalf("train: %v", tr)
			}
			var err error
			if saved, err = model.ReadFile(flagValue(args, "save")); err != nil {
				t.Fatal(err)
			}
			reviewed, err := datasets.LoadSchema(flagValue(args, "schema"))
			if err != nil {
				t.Fatal(err)
			}
			canonical, err := json.Marshal(reviewed)
			if err != nil {
				t.Fatal(err)
			}
			stored, err := datasets.ParseSchema(saved.Preprocessing.Schema)
			if saved.Preprocessing.Dataset != model.DatasetCSV || !bytes.Equal(saved.Preprocessing.Schema, canonical) || err != nil ||
				!reflect.DeepEqual(stored, reviewed) {
				t.Fatalf("the model's preprocessing %s %s (%v), want csv and the reviewed schema %s", saved.Preprocessing.Dataset, saved.Preprocessing.Schema, err, canonical)
			}
		case "eval":
			var ev evalJSON
			if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &ev); err != nil {
				t.Fatalf("eval output %q: %v", out, err)
			}
			n := 0
			for _, row := range ev.ConfusionMatrix {
				for _, v := range row {
					n += v
				}
			}
			if ev.Accuracy != tr["test_accuracy"] || ev.N != 100 || n != 100 || ev.Dataset != "csv" || ev.Data != "test.csv" ||
				ev.Classes != 2 || !(ev.MeanLoss > 0) || ev.Epsilon != tr["epsilon"] {
				t.Errorf("eval %+v; train's test accuracy %v, ε %v", ev, tr["test_accuracy"], tr["epsilon"])
			}
		case "predict":
			if redirect == "" {
				t.Fatal("the quick start's predict does not write a file")
			}
			text, err := os.ReadFile(redirect)
			if err != nil {
				t.Fatal(err)
			}
			header, classes, _ := parsePredictCSV(t, string(text))
			s, err := datasets.ParseSchema(saved.Preprocessing.Schema)
			if err != nil {
				t.Fatal(err)
			}
			var x []float32
			for _, r := range fresh {
				x = append(x, handFeatures(s, r)...)
			}
			if want := argmaxes(t, saved, x); !slices.Equal(header, []string{"row", "class"}) || !slices.Equal(classes, want) {
				t.Errorf("predict: header %v, %d classes %v for %d rows; by hand %v", header, len(classes), classes, len(fresh), want)
			}
		}
	}
}

// TestOwnDataLeaveOneOut: removing one record of the training CSV — the only one with an
// unlisted sector and the largest hours — changes neither the preprocessing of the other
// records (their features through the schema the model stores) nor the saved model's
// preprocessing, architecture, tensor names and shapes or parameter count. The draft of a
// schema, by contrast, differs between the two files: that is why train refuses it.
func TestOwnDataLeaveOneOut(t *testing.T) {
	dir := t.TempDir()
	rows := incomeRows(300, 4)
	rows[17].sector, rows[17].hours = "retired", 99.9
	header := []string{"age", "hours", "sector", "income"}
	full, less := filepath.Join(dir, "full.csv"), filepath.Join(dir, "less.csv")
	writeIncome(t, full, header, rows)
	writeIncome(t, less, header, slices.Delete(slices.Clone(rows), 17, 18))
	schema := filepath.Join(dir, "schema.json")
	if code, _, errOut := runCmd(t, "schema", "--data", full, "--label", "income", "--out", schema); code != 0 {
		t.Fatalf("schema: %s", errOut)
	}
	reviewIncomeSchema(t, schema)

	var models []*model.Artifact
	for _, data := range []string{full, less} {
		path := data + ".dpsgd"
		code, _, errOut := runCmd(t, "train", "--data", data, "--schema", schema, "--batch-size", "64", "--epochs", "2", "--sigma", "1",
			"--accountant", "rdp", "--seed", "3", "--quiet", "--json", "--save", path)
		if code != 0 {
			t.Fatalf("train on %s: exit %d: %s", data, code, errOut)
		}
		a, err := model.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		models = append(models, a)
	}
	a, b := models[0], models[1]
	if !reflect.DeepEqual(a.Arch, b.Arch) || a.Arch.NumParams() != b.Arch.NumParams() || !reflect.DeepEqual(a.Preprocessing, b.Preprocessing) {
		t.Fatalf("the models differ in shape or preprocessing: %+v %d %s vs %+v %d %s", a.Arch, a.Arch.NumParams(), a.Preprocessing.Schema,
			b.Arch, b.Arch.NumParams(), b.Preprocessing.Schema)
	}
	for i, q := range a.Params.List {
		r := b.Params.List[i]
		if q.Name != r.Name || !q.Value.Shape().Eq(r.Value.Shape()) {
			t.Errorf("tensor %d: %s %v vs %s %v", i, q.Name, q.Value.Shape(), r.Name, r.Value.Shape())
		}
	}
	s, err := datasets.ParseSchema(a.Preprocessing.Schema)
	if err != nil {
		t.Fatal(err)
	}
	dFull, err := datasets.LoadCSV(full, s)
	if err != nil {
		t.Fatal(err)
	}
	dLess, err := datasets.LoadCSV(less, s)
	if err != nil {
		t.Fatal(err)
	}
	if dFull.D != dLess.D || dLess.N != dFull.N-1 || !slices.Equal(dFull.FeatureNames, dLess.FeatureNames) {
		t.Fatalf("D %d vs %d, N %d vs %d", dFull.D, dLess.D, dFull.N, dLess.N)
	}
	for i := range dLess.N {
		j := i
		if i >= 17 {
			j = i + 1
		}
		if !slices.Equal(dLess.Row(i), dFull.Row(j)) || dLess.Y[i] != dFull.Y[j] {
			t.Fatalf("record %d of the smaller file encodes to %v, in the full file %v", i, dLess.Row(i), dFull.Row(j))
		}
	}
	if want := handFeatures(s, rows[17]); !slices.Equal(dFull.Row(17), want) {
		t.Errorf("the removed record encodes to %v, by hand %v", dFull.Row(17), want)
	}
	draftFull, err := datasets.DraftCSVSchema(full, datasets.DraftOptions{Label: "income", MaxCategories: datasets.DefaultDraftCategories})
	if err != nil {
		t.Fatal(err)
	}
	draftLess, err := datasets.DraftCSVSchema(less, datasets.DraftOptions{Label: "income", MaxCategories: datasets.DefaultDraftCategories})
	if err != nil {
		t.Fatal(err)
	}
	if draftFull.Dim() == draftLess.Dim() || reflect.DeepEqual(draftFull, draftLess) {
		t.Errorf("the drafts of the two files agree (D %d and %d): the record would not show", draftFull.Dim(), draftLess.Dim())
	}
}

// digits writes n 4×4 byte images and their labels as IDX files (gzip for the images when gz):
// the label is 1 when the top half is brighter than the bottom half. It returns the pixels.
func digits(t *testing.T, images, labels string, n int, seed uint64, gz bool) []byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 5))
	pix := make([]byte, n*16)
	lbl := make([]byte, n)
	for i := range n {
		top, bottom := 0, 0
		for j := range 16 {
			v := rng.IntN(256)
			pix[i*16+j] = byte(v)
			if j < 8 {
				top += v
			} else {
				bottom += v
			}
		}
		if top > bottom {
			lbl[i] = 1
		}
	}
	img := append([]byte{0, 0, 8, 3}, binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(n)), 4), 4)...)
	img = append(img, pix...)
	if gz {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		if _, err := zw.Write(img); err != nil || zw.Close() != nil {
			t.Fatal(err)
		}
		img = b.Bytes()
	}
	if err := os.WriteFile(images, img, 0o644); err != nil {
		t.Fatal(err)
	}
	if labels != "" {
		lb := append([]byte{0, 0, 8, 1}, binary.BigEndian.AppendUint32(nil, uint32(n))...)
		if err := os.WriteFile(labels, append(lb, lbl...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return pix
}

// TestOwnDataIDX: the same path for IDX data. The drafted schema, reviewed, encodes the
// training pair; the model stores the dataset kind idx and that schema; eval on a labelled
// pair gives train's test accuracy; predict on images alone (gzip) prints one line per image,
// the classes of the model on pixels/255 computed by hand.
func TestOwnDataIDX(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	digits(t, p("img"), p("lbl"), 400, 1, false)
	digits(t, p("t-img"), p("t-lbl"), 100, 2, false)
	pix := digits(t, p("new-img.gz"), "", 30, 3, true)
	if code, _, errOut := runCmd(t, "schema", "--data", p("img"), "--labels", p("lbl"), "--out", p("schema.json")); code != 0 {
		t.Fatalf("schema: %s", errOut)
	}
	s, err := datasets.LoadSchema(p("schema.json"))
	if err != nil || s.Warning == "" || s.Columns[0].Lo != 0 || s.Columns[0].Hi != 255 {
		t.Fatalf("draft %+v, %v", s, err)
	}
	s.Warning = "" // the review: bytes have the public range [0, 255], the classes are 0 and 1
	js, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p("schema.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, "train", "--data", p("img"), "--labels", p("lbl"), "--schema", p("schema.json"),
		"--test-data", p("t-img"), "--test-labels", p("t-lbl"), "--epochs", "3", "--sigma", "1", "--accountant", "rdp", "--seed", "5", "--quiet", "--json", "--save", p("m.dpsgd"),
		"--allow-chance") // the path is under test, not the accuracy: the chance guard may not stop it
	if code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	tr := lastJSON(t, out)
	a, err := model.ReadFile(p("m.dpsgd"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Preprocessing.Dataset != model.DatasetIDX || !bytes.Equal(a.Preprocessing.Schema, js) || !slices.Equal(a.Arch.Input, []int{16}) {
		t.Fatalf("model: preprocessing %s %s, input %v", a.Preprocessing.Dataset, a.Preprocessing.Schema, a.Arch.Input)
	}
	code, out, errOut = runCmd(t, "eval", "--model", p("m.dpsgd"), "--data", p("t-img"), "--labels", p("t-lbl"))
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, errOut)
	}
	var ev evalJSON
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Accuracy != tr["test_accuracy"] || ev.N != 100 || ev.Dataset != "idx" {
		t.Errorf("eval %+v; train's test accuracy %v", ev, tr["test_accuracy"])
	}
	x := make([]float32, len(pix))
	for i, v := range pix {
		x[i] = float32(float64(v) / 255)
	}
	if got, want := predictClasses(t, "--model", p("m.dpsgd"), "--data", p("new-img.gz")), argmaxes(t, a, x); !slices.Equal(got, want) {
		t.Errorf("predict: %v, by hand %v", got, want)
	}
}

// TestOwnDataPredictEvalErrors: bad input to predict and eval of a model of one's own data —
// ragged rows, wrong columns, bad numbers and labels, the other kind of file, a truncated model
// file, a model whose architecture is not the data's width or shape, flags of the other kind —
// is one line on stderr naming the problem, exit 2, and nothing on stdout.
func TestOwnDataPredictEvalErrors(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	s := &datasets.Schema{Label: datasets.Label{Column: "income", Classes: incomeClasses}, Columns: []datasets.Column{
		{Name: "age", Type: datasets.ColumnNumeric, Lo: 0, Hi: 120},
		{Name: "hours", Type: datasets.ColumnNumeric, Lo: 0, Hi: 168},
		{Name: "sector", Type: datasets.ColumnCategorical, Categories: incomeSectors},
	}}
	js, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	save := func(name string, arch nn.Arch, kind string, schema []byte) string {
		a := handArtifact(t, arch, kind, 9)
		a.Preprocessing.Schema = schema
		if err := model.WriteFile(p(name), a); err != nil {
			t.Fatal(err)
		}
		return p(name)
	}
	csvModel := save("csv.dpsgd", nn.LogReg([]int{s.Dim()}, 2), "csv", js)
	wide := save("wide.dpsgd", nn.LogReg([]int{s.Dim() + 2}, 2), "csv", js)
	three := save("three.dpsgd", nn.LogReg([]int{s.Dim()}, 3), "csv", js)
	idxSchema, err := json.Marshal(datasets.MNISTSchema())
	if err != nil {
		t.Fatal(err)
	}
	idxModel := save("idx.dpsgd", nn.MLP([]int{1, 5, 5}, 10, []int{4}, nn.Tanh), "idx", idxSchema)
	cnn := save("cnn.dpsgd", nn.CNN([]int{1, 28, 28}, 10, nil, nn.Tanh), "idx", idxSchema)
	synthetic := save("synthetic.dpsgd", nn.LogReg([]int{32}, 10), "synthetic", nil)
	good, err := os.ReadFile(csvModel)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p("truncated.dpsgd"), good[:len(good)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"good.csv":      "age,hours,sector,income\n30,40,self,>50K\n50,20,none,<=50K\n",
		"ragged.csv":    "age,hours,sector\n30,40,self\n\n50,20\n",
		"missing.csv":   "age,sector\n30,self\n",
		"unknown.csv":   "age,hours,sector,zip\n30,40,self,12345\n",
		"badnumber.csv": "sector,hours,age\nself,40,30\nnone,20,50\npublic,forty,30\n",
		"nan.csv":       "age,hours,sector\n30,NaN,self\n",
		"nolabel.csv":   "age,hours,sector\n30,40,self\n",
		"ragged-y.csv":  "age,hours,sector,income\n30,40,self,>50K\n50,20,none\n",
		"badlabel.csv":  "age,hours,sector,income\n30,40,self,rich\n",
		"empty.csv":     "age,hours,sector\n",
	}
	for name, text := range files {
		if err := os.WriteFile(p(name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	digits(t, p("img"), p("lbl"), 3, 1, false)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"predict", "--model", csvModel, "--data", p("ragged.csv")}, "ragged.csv:4: row 1: 2 fields, want 3 as in the header"},
		{[]string{"predict", "--model", csvModel, "--data", p("missing.csv")}, `no column named "hours"`},
		{[]string{"predict", "--model", csvModel, "--data", p("unknown.csv")}, `columns not in the schema: "zip"`},
		{[]string{"predict", "--model", csvModel, "--data", p("badnumber.csv")}, `badnumber.csv:4: row 2: field 2 ("hours"): bad number "forty"`},
		{[]string{"predict", "--model", csvModel, "--data", p("nan.csv")}, `row 0: field 2 ("hours"): bad number "NaN"`},
		{[]string{"predict", "--model", csvModel, "--data", p("empty.csv")}, "no records after the header"},
		{[]string{"predict", "--model", csvModel, "--data", p("img")}, "an IDX file; this model reads CSV tables"},
		{[]string{"predict", "--model", p("truncated.dpsgd"), "--data", p("good.csv")}, "truncated"},
		{[]string{"predict", "--model", wide, "--data", p("good.csv")}, "the model takes 9 features; its schema encodes a row as 7"},
		{[]string{"predict", "--model", three, "--data", p("good.csv")}, "the model has 3 classes; its schema lists 2"},
		{[]string{"predict", "--model", idxModel, "--data", p("img")}, "images of shape [1 4 4]; the model takes inputs of shape [25] (25 features)"},
		{[]string{"predict", "--model", idxModel, "--data", p("good.csv")}, "not an IDX file"},
		{[]string{"predict", "--model", cnn, "--data", p("img")}, "images of shape [1 4 4]; the model takes inputs of shape [1 28 28] (784 features)"},
		{[]string{"predict", "--model", synthetic, "--data", p("good.csv")}, "good.csv:1: 4 fields, want 32"},
		{[]string{"eval", "--model", csvModel, "--data", p("nolabel.csv")}, `no label column "income"`},
		{[]string{"eval", "--model", csvModel, "--data", p("badlabel.csv")}, `field 4 ("income"): label "rich"`},
		{[]string{"eval", "--model", csvModel, "--data", p("ragged-y.csv")}, "ragged-y.csv:3: 3 fields, want 4 as in the header"},
		{[]string{"eval", "--model", csvModel}, "--data: want the labelled CSV"},
		{[]string{"eval", "--model", csvModel, "--data", p("good.csv"), "--labels", p("lbl")}, "--labels: for a model of idx data"},
		{[]string{"eval", "--model", csvModel, "--data", p("good.csv"), "--data-dir", dir}, "--data-dir: the model was trained on your own csv data"},
		{[]string{"eval", "--model", csvModel, "--data", p("good.csv"), "--dataset", "adult"}, "--dataset: the model was trained on your own csv data"},
		{[]string{"eval", "--model", p("truncated.dpsgd"), "--data", p("good.csv")}, "truncated"},
		{[]string{"eval", "--model", wide, "--data", p("good.csv")}, "the model takes 9 features"},
		{[]string{"eval", "--model", idxModel, "--data", p("img")}, "--labels: want the IDX labels file"},
		{[]string{"eval", "--model", idxModel, "--data", p("img"), "--labels", p("lbl")}, "examples of shape [1 4 4]; the model takes inputs of shape [25]"},
		{[]string{"eval", "--model", synthetic, "--data", p("good.csv")}, "--data and --labels are for models of your own data"},
	} {
		code, out, errOut := runCmd(t, c.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%s %s: exit %d, stdout %q, stderr %q; want 2, nothing, and one line with %q",
				c.args[0], strings.Join(c.args[1:], " "), code, out, errOut, c.want)
		}
	}
	// The good file goes through, and its label column is not read: the same classes without it.
	withLabel := predictClasses(t, "--model", csvModel, "--data", p("good.csv"))
	if err := os.WriteFile(p("good.csv"), []byte("income,sector,hours,age\nunknown,self,40,30\n,none,20,50\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := predictClasses(t, "--model", csvModel, "--data", p("good.csv")); len(got) != 2 || !slices.Equal(got, withLabel) {
		t.Errorf("predict: %v with the label column, %v with it reordered and unreadable", withLabel, got)
	}
}

// TestSavedCSVModelHoldsNothingPrivate is the attacker's look (manifestByHand) at a model
// trained on a CSV with a checkpoint: every key is on the public list, the stored schema is the
// reviewed schema file's and nothing else (its drafted warning, bounds and categories gone), and
// neither the model file nor its safetensors holds the paths of the data, the schema or the
// directory, the data's SHA-256 or its fingerprint in the checkpoint, the seed or the run id, a
// sector that only the data holds, the data's largest hours, or the drafted bounds.
func TestSavedCSVModelHoldsNothingPrivate(t *testing.T) {
	dir := t.TempDir()
	data, schema, path, ckpt := filepath.Join(dir, "private-records.csv"), filepath.Join(dir, "reviewed-schema.json"),
		filepath.Join(dir, "m.dpsgd"), filepath.Join(dir, "run.ckpt")
	rows := incomeRows(300, 6)
	rows[5].sector, rows[9].hours = "Atlantis", 123.4
	writeIncome(t, data, []string{"age", "hours", "sector", "income"}, rows)
	if code, _, errOut := runCmd(t, "schema", "--data", data, "--label", "income", "--out", schema); code != 0 {
		t.Fatalf("schema: %s", errOut)
	}
	drafted, err := datasets.LoadSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	reviewIncomeSchema(t, schema)
	const seed = 918273645546372
	code, out, errOut := runCmd(t, "train", "--data", data, "--schema", schema, "--batch-size", "64", "--epochs", "2", "--sigma", "1",
		"--accountant", "rdp", "--seed", strconv.Itoa(seed), "--private-stats", "--checkpoint", ckpt, "--quiet", "--json", "--save", path,
		"--allow-chance") // the file's contents are under test, not the accuracy
	if code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	tr := lastJSON(t, out)
	file, doc, _ := manifestByHand(t, path)
	reviewed, err := datasets.LoadSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(reviewed)
	if err != nil {
		t.Fatal(err)
	}
	pre := doc["preprocessing"].(map[string]any)
	stored, err := json.Marshal(pre["schema"])
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if json.Unmarshal(stored, &a) != nil || json.Unmarshal(want, &b) != nil || !reflect.DeepEqual(a, b) || pre["dataset"] != "csv" {
		t.Fatalf("preprocessing %v, want csv and the reviewed schema %s", pre, want)
	}
	st, err := os.ReadFile(path + ".safetensors")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Load(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	secrets := map[string]string{
		"the directory": dir, "the data's name": "private-records", "the schema's name": "reviewed-schema",
		"the data's SHA-256": hex.EncodeToString(sum[:]), "the data fingerprint": ck.Config.DataMAC, "the run id": ck.Config.RunID,
		"the seed": strconv.Itoa(seed), "the params digest": tr["params_digest"].(string),
		"a sector only the data holds": "Atlantis", "the data's largest hours": "123.4", "the drafted warning": drafted.Warning,
	}
	for _, c := range drafted.Columns {
		if c.Type == datasets.ColumnNumeric {
			secrets["the drafted bounds of "+c.Name] = fmt.Sprintf(`"lo":%s,"hi":%s`, strconv.FormatFloat(c.Lo, 'g', -1, 64), strconv.FormatFloat(c.Hi, 'g', -1, 64))
		}
	}
	// The search finds what is there: the reviewed bounds, in both files.
	for name, b := range map[string][]byte{"model file": file, "safetensors": st} {
		if !bytes.Contains(b, []byte(`"lo":0,"hi":168`)) && !bytes.Contains(b, []byte(`\"lo\":0,\"hi\":168`)) {
			t.Errorf("the %s does not hold the reviewed bounds of hours", name)
		}
	}
	for what, s := range secrets {
		for name, b := range map[string][]byte{"model file": file, "safetensors": st} {
			if s == "" || bytes.Contains(b, []byte(s)) {
				t.Errorf("the %s holds %s (%q)", name, what, s)
			}
		}
	}
}
