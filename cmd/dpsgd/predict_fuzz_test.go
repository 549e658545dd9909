package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/model"
)

// FuzzPredictRows: dpsgd predict's input parsers (inputRows) — the CSV reader with each
// built-in preprocessing, the IDX reader of mnist models, and a schema's CSV table and IDX
// images for models of one's own data — never panic; what they accept is whole rows of finite
// features of the model's width, in [0, 1] for mnist and schema-encoded data.
func FuzzPredictRows(f *testing.F) {
	adult := "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, Male, 2174, 0, 40, United-States, <=50K\n"
	for _, s := range []string{
		adult,
		"|1x3 Cross validator\n" + adult + "\n" + strings.TrimSuffix(adult, ", <=50K\n") + "\n",
		"1,2,3\n4,5,6\n",
		strings.Repeat("0.5,", 31) + "-1e3\n",
		strings.Repeat("255,", 783) + "0\n",
		"\"a,b\",c\n",
		"nan,inf\n",
		string([]byte{0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 28, 0, 0, 0, 28}) + strings.Repeat("\x80", 784),
		"age,hours,sector,income\n30,40,self,>50K\n200,-1,retired,\n",
		"sector,hours,age\n\"a,b\",1e3,?\n",
		string([]byte{0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 4, 0, 0, 0, 4}) + strings.Repeat("\x07", 32),
		string([]byte{0, 0, 0x0d, 2, 0, 0, 0, 1, 0, 0, 0, 16, 0x7f, 0xc0, 0, 0}),
		"",
	} {
		f.Add([]byte(s))
	}
	schema, err := json.Marshal(&datasets.Schema{Label: datasets.Label{Column: "income", Classes: []string{"<=50K", ">50K"}}, Columns: []datasets.Column{
		{Name: "age", Type: datasets.ColumnNumeric, Lo: 0, Hi: 120},
		{Name: "hours", Type: datasets.ColumnNumeric, Lo: 0, Hi: 168, Missing: datasets.MissingLo},
		{Name: "sector", Type: datasets.ColumnCategorical, Categories: []string{"public", "private", "self", "none"}},
	}})
	if err != nil {
		f.Fatal(err)
	}
	images, err := json.Marshal(datasets.MNISTSchema())
	if err != nil {
		f.Fatal(err)
	}
	models := map[string]struct {
		arch      nn.Arch
		pre       model.Preprocessing
		unitRange bool // every accepted feature is in [0, 1]
	}{
		"synthetic": {nn.MLP([]int{32}, 10, []int{4}, nn.Tanh), model.Preprocessing{Dataset: "synthetic"}, false},
		"mnist":     {nn.LogReg([]int{784}, 10), model.Preprocessing{Dataset: "mnist"}, true},
		"adult":     {nn.LogReg([]int{datasets.AdultDim}, 2), model.Preprocessing{Dataset: "adult"}, true},
		"csv":       {nn.LogReg([]int{7}, 2), model.Preprocessing{Dataset: model.DatasetCSV, Schema: schema}, true},
		"idx":       {nn.MLP([]int{1, 4, 4}, 10, []int{4}, nn.Tanh), model.Preprocessing{Dataset: model.DatasetIDX, Schema: images}, true},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for name, m := range models {
			x, n, err := inputRows(data, "fuzz", m.pre, m.arch)
			if err != nil {
				if x != nil || strings.Contains(err.Error(), "\n") {
					t.Fatalf("%s: rows with the error, or an error of several lines: %q", name, err)
				}
				continue
			}
			if n < 1 || len(x) != n*m.arch.InputSize() {
				t.Fatalf("%s: %d rows, %d features", name, n, len(x))
			}
			for _, v := range x {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || m.unitRange && !(v >= 0 && v <= 1) {
					t.Fatalf("%s: feature %v", name, v)
				}
			}
		}
	})
}
