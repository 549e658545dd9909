package main

import (
	"math"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/model"
)

// FuzzPredictRows: dpsgd predict's input parsers — the CSV reader with each built-in
// preprocessing, and the IDX reader of mnist models — never panic; what they accept is whole
// rows of finite features of the model's width, mnist features in [0, 1].
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
		"",
	} {
		f.Add([]byte(s))
	}
	arches := map[string]nn.Arch{
		"synthetic": nn.MLP([]int{32}, 10, []int{4}, nn.Tanh),
		"mnist":     nn.LogReg([]int{784}, 10),
		"adult":     nn.LogReg([]int{datasets.AdultDim}, 2),
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for name, arch := range arches {
			pre := model.Preprocessing{Dataset: name}
			var x []float32
			var n int
			var err error
			if isIDX(data) {
				x, n, err = idxRows(data, "fuzz", pre, arch)
			} else {
				feat, ferr := rowFeatures(pre, arch)
				if ferr != nil {
					t.Fatal(ferr)
				}
				x, n, err = readCSVRows(data, "fuzz", feat)
			}
			if err != nil {
				continue
			}
			if n < 1 || len(x) != n*arch.InputSize() {
				t.Fatalf("%s: %d rows, %d features", name, n, len(x))
			}
			for _, v := range x {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || name == "mnist" && !(v >= 0 && v <= 1) {
					t.Fatalf("%s: feature %v", name, v)
				}
			}
		}
	})
}
