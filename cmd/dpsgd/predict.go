package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/internal/boundedio"
	"github.com/dpsgd/dpsgd/model"
)

// maxPredictBytes bounds the --data file dpsgd predict reads (1 GiB).
const maxPredictBytes = 1 << 30

// builtinInput returns the features per row of the built-in dataset name, after checking that
// the model reads them: its input size and classes are the dataset's.
func builtinInput(name string, arch nn.Arch) (int, error) {
	b, err := datasets.LookupBuiltin(name)
	if err != nil {
		return 0, fmt.Errorf("preprocessing of dataset %q: want %s", name, strings.Join(datasets.BuiltinNames(), ", "))
	}
	d, k := b.D(), b.Classes
	if arch.InputSize() != d || arch.Classes != k {
		return 0, fmt.Errorf("the model takes %d features and has %d classes; %s data has %d features and %d classes", arch.InputSize(), arch.Classes, name, d, k)
	}
	return d, nil
}

// inputRows turns the --data file into the model's features, n rows of arch.InputSize(): the
// one place where a model's preprocessing (docs/model-files.md) is applied to raw input.
//
//   - csv: a CSV table with a header, each record encoded alone by the model's schema
//     (datasets.Encoder.ReadFeatures): columns matched by name, the label column optional and
//     never read, an unknown category in the other bucket, a value outside the bounds clamped;
//   - idx: IDX images (raw or gzip), every element scaled by the schema (datasets.IDXFeatures),
//     each image of the model's input shape;
//   - mnist: IDX images, or CSV rows of pixels (rowFeatures);
//   - synthetic, adult: CSV rows (rowFeatures).
//
// Any bad row rejects the whole file with an error naming it.
func inputRows(data []byte, name string, p model.Preprocessing, arch nn.Arch) ([]float32, int, error) {
	switch p.Dataset {
	case model.DatasetCSV:
		s, err := ownSchema(p, arch)
		if err != nil {
			return nil, 0, err
		}
		if len(data) >= 2 && data[0] == 0 && data[1] == 0 {
			return nil, 0, fmt.Errorf("%s: an IDX file; this model reads CSV tables with a header, as it was trained on", name)
		}
		enc, err := s.Encoder()
		if err != nil {
			return nil, 0, fmt.Errorf("the model's schema: %w", err)
		}
		return enc.ReadFeatures(bytes.NewReader(data), name)
	case model.DatasetIDX:
		s, err := ownSchema(p, arch)
		if err != nil {
			return nil, 0, err
		}
		if !isIDX(data) {
			return nil, 0, fmt.Errorf("%s: not an IDX file; this model reads IDX images, as it was trained on", name)
		}
		img, err := datasets.ReadIDX(bytes.NewReader(data))
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", name, err)
		}
		x, shape, err := datasets.IDXFeatures(img, name, s)
		if err != nil {
			return nil, 0, err
		}
		if !inputFits(shape, arch) {
			return nil, 0, fmt.Errorf("%s: images of shape %v; the model takes inputs of shape %v (%d features)", name, shape, arch.Input, arch.InputSize())
		}
		return x, len(x) / arch.InputSize(), nil
	}
	if isIDX(data) {
		return idxRows(data, name, p, arch)
	}
	feat, err := rowFeatures(p, arch)
	if err != nil {
		return nil, 0, err
	}
	return readCSVRows(data, name, feat)
}

// ownSchema reads the schema of a model trained on the user's own data (csv or idx): the
// validated document dpsgd train encoded the data with and stored. It is validated again, and
// must fit the model: its classes, and for a CSV its width D, are the model's.
func ownSchema(p model.Preprocessing, arch nn.Arch) (*datasets.Schema, error) {
	s, err := datasets.ParseSchema(p.Schema)
	if err != nil {
		return nil, fmt.Errorf("the model's schema: %w", err)
	}
	if k := len(s.Label.Classes); k != arch.Classes {
		return nil, fmt.Errorf("the model has %d classes; its schema lists %d", arch.Classes, k)
	}
	if d := s.Dim(); p.Dataset == model.DatasetCSV && d != arch.InputSize() {
		return nil, fmt.Errorf("the model takes %d features; its schema encodes a row as %d", arch.InputSize(), d)
	}
	return s, nil
}

// inputFits reports whether examples of shape are the model's input: of its width for a dense
// model (which reads them flattened), of its shape for a convolutional one.
func inputFits(shape []int, arch nn.Arch) bool {
	if arch.ImageInput() {
		return slices.Equal(shape, arch.Input)
	}
	d := 1
	for _, v := range shape {
		d *= v
	}
	return d == arch.InputSize()
}

// rowFeatures returns the preprocessing of a built-in dataset as a map from one input row, the
// fields of one CSV record, to the model's features: the fixed public encodings of package
// datasets (docs/datasets.md):
//
//   - synthetic: the D feature values, as they are;
//   - mnist: the 784 pixel bytes (integers 0–255, row-major), mapped by datasets.MNISTPixel;
//   - cifar10: the 3072 pixel bytes (integers 0–255) in the order of a CIFAR-10 record
//     (channel-major: the red plane row by row, then green, then blue), mapped likewise;
//   - adult: a record of the UCI files (14 features, or 15 with the income label, which is
//     ignored), parsed by datasets.ReadAdultCSV and encoded by datasets.NewAdultEncoder.
func rowFeatures(p model.Preprocessing, arch nn.Arch) (func(fields []string) ([]float32, error), error) {
	d, err := builtinInput(p.Dataset, arch)
	if err != nil {
		return nil, err
	}
	count := func(fields []string, want, or int) error {
		if len(fields) == want || len(fields) == or {
			return nil
		}
		if want == or {
			return fmt.Errorf("%d fields, want %d (a %s row)", len(fields), want, p.Dataset)
		}
		return fmt.Errorf("%d fields, want %d or %d (a %s row)", len(fields), want, or, p.Dataset)
	}
	switch p.Dataset {
	case "synthetic":
		return func(fields []string) ([]float32, error) {
			if err := count(fields, d, d); err != nil {
				return nil, err
			}
			x := make([]float32, d)
			for j, s := range fields {
				v, err := strconv.ParseFloat(strings.TrimSpace(s), 32)
				if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
					return nil, fmt.Errorf("field %d: %q: want a finite number", j+1, s)
				}
				x[j] = float32(v)
			}
			return x, nil
		}, nil
	case "mnist", "cifar10":
		return func(fields []string) ([]float32, error) {
			if err := count(fields, d, d); err != nil {
				return nil, err
			}
			x := make([]float32, d)
			for j, s := range fields {
				v, err := strconv.Atoi(strings.TrimSpace(s))
				if err != nil || v < 0 || v > 255 {
					return nil, fmt.Errorf("field %d: %q: want a pixel value, an integer in [0, 255]", j+1, s)
				}
				x[j] = datasets.MNISTPixel(byte(v))
			}
			return x, nil
		}, nil
	}
	enc := datasets.NewAdultEncoder()
	const features = datasets.AdultContinuous + datasets.AdultCategorical
	return func(fields []string) ([]float32, error) {
		if err := count(fields, features, features+1); err != nil {
			return nil, err
		}
		// The label is ignored: a placeholder takes its place for the parser.
		line := strings.Join(append(fields[:features:features], "<=50K"), ",")
		recs, err := datasets.ReadAdultCSV(strings.NewReader(line), "row")
		if err == nil && len(recs) != 1 {
			err = errors.New("not one record")
		}
		var ds *datasets.Dataset
		if err == nil {
			ds, err = enc.Encode("row", recs)
		}
		if err != nil {
			var pe *datasets.ParseError
			if errors.As(err, &pe) {
				return nil, errors.New(pe.Msg)
			}
			return nil, err
		}
		return ds.X, nil
	}, nil
}

// readCSVRows reads the --data CSV into features: one record per row (blank lines skipped; a
// first line starting with "|", the UCI Adult test file's, skipped too), each through feat.
func readCSVRows(data []byte, name string, feat func([]string) ([]float32, error)) ([]float32, int, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	r.TrimLeadingSpace = true
	r.ReuseRecord = true
	var x []float32
	n := 0
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", name, err)
		}
		line, _ := r.FieldPos(0)
		if line == 1 && len(rec) == 1 && strings.HasPrefix(strings.TrimSpace(rec[0]), "|") {
			continue
		}
		row, err := feat(rec)
		if err != nil {
			return nil, 0, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		x = append(x, row...)
		n++
	}
	if n == 0 {
		return nil, 0, fmt.Errorf("%s: no rows", name)
	}
	return x, n, nil
}

// isIDX reports whether data looks like an IDX file (two zero bytes, then a type and a rank) or
// a gzip stream (which only an IDX input may be).
func isIDX(data []byte) bool {
	return len(data) >= 2 && (data[0] == 0 && data[1] == 0 || data[0] == 0x1f && data[1] == 0x8b)
}

// idxRows reads an IDX images file (MNIST's t10k-images-idx3-ubyte, raw or gzip) into the
// features of an mnist model.
func idxRows(data []byte, name string, p model.Preprocessing, arch nn.Arch) ([]float32, int, error) {
	if p.Dataset != "mnist" {
		return nil, 0, fmt.Errorf("%s: an IDX file is read for models of MNIST images or of idx data; this model's preprocessing is %s's", name, p.Dataset)
	}
	d, err := builtinInput(p.Dataset, arch)
	if err != nil {
		return nil, 0, err
	}
	img, err := datasets.ReadIDX(bytes.NewReader(data))
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", name, err)
	}
	if img.Type != datasets.IDXUint8 || len(img.Dims) != 3 || img.Dims[1] != datasets.MNISTRows || img.Dims[2] != datasets.MNISTCols {
		return nil, 0, fmt.Errorf("%s: IDX of type 0x%02x and dimensions %v: want unsigned bytes, N×%d×%d (MNIST images)", name, img.Type, img.Dims, datasets.MNISTRows, datasets.MNISTCols)
	}
	n := img.Dims[0]
	if n == 0 {
		return nil, 0, fmt.Errorf("%s: no images", name)
	}
	x := make([]float32, n*d)
	for i, b := range img.Data[:n*d] {
		x[i] = datasets.MNISTPixel(b)
	}
	return x, n, nil
}

// predictJSON is one line of --format jsonl.
type predictJSON struct {
	Row   int       `json:"row"`
	Class int       `json:"class"`
	Proba []float64 `json:"proba,omitempty"`
}

// predictFlags are dpsgd predict's flags.
type predictFlags struct {
	model, data, format string
	proba               bool
}

func parsePredictFlags(args []string, stdout io.Writer) (*predictFlags, error) {
	f := &predictFlags{}
	fs := newFlagSet("dpsgd predict")
	fs.StringVar(&f.model, "model", "", "the model file (dpsgd train --save)")
	fs.StringVar(&f.data, "data", "", "the rows to predict, raw, as the model's preprocessing reads them: for your own data a CSV with a header "+
		"(the label column may be absent) or IDX images, as trained on; synthetic: a CSV of the D features; mnist: 784 pixel values 0–255 a row, "+
		"or an IDX images file (raw or gzip); cifar10: 3072 pixel values 0–255 a row, in a CIFAR-10 record's order (red plane, green, blue, each row by row); adult: UCI Adult records, with or without their label")
	fs.BoolVar(&f.proba, "proba", false, "also print each class's probability (the softmax of the logits)")
	fs.StringVar(&f.format, "format", "csv", "csv (a header, then row,class[,p0,…]) or jsonl (one JSON object per row)")
	if _, err := parseFlags(fs, args, stdout, "Usage: dpsgd predict --model FILE --data FILE [flags]\n\n"+
		"Prints the model's predicted class of every input row, in input order (row counts from 0), with the model's\n"+
		"own preprocessing (docs/model-files.md). A bad row rejects the whole file (exit 2) and nothing is printed."); err != nil {
		return nil, err
	}
	if f.format != "csv" && f.format != "jsonl" {
		return nil, usagef("--format %q: want csv or jsonl", f.format)
	}
	return f, nil
}

func cmdPredict(_ context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parsePredictFlags(args, stdout)
	if err != nil {
		return err // pflag.ErrHelp after --help: report exits 0
	}
	a, err := loadModel(f.model)
	if err != nil {
		return err
	}
	if f.data == "" {
		return usagef("--data: want the file of rows to predict")
	}
	raw, err := readBounded(f.data)
	if err != nil {
		return usagef("--data: %v", err)
	}
	x, n, err := inputRows(raw, f.data, a.Preprocessing, a.Arch)
	if err != nil {
		return usagef("--data: %v", err)
	}
	logits, err := engine.Predict(a.Arch, a.Params, x, 0)
	if err != nil {
		return err
	}
	// Every line is made before any is printed: an error prints nothing.
	var buf bytes.Buffer
	if err := writePredictions(&buf, logits, n, a.Arch.Classes, f.proba, f.format); err != nil {
		return err
	}
	_, err = stdout.Write(buf.Bytes())
	return err
}

// readBounded reads the file at path, at most maxPredictBytes.
func readBounded(path string) ([]byte, error) {
	return boundedio.ReadFile(path, "", func(r io.Reader) ([]byte, error) {
		return boundedio.ReadAll(r, maxPredictBytes, "", nil)
	})
}

// writePredictions prints one line per row: its class (engine.Argmax of the logits) and, with
// proba, the softmax of its logits.
func writePredictions(w io.Writer, logits []float64, n, k int, proba bool, format string) error {
	bw := bufio.NewWriter(w)
	if format == "csv" {
		bw.WriteString("row,class")
		if proba {
			for j := range k {
				fmt.Fprintf(bw, ",p%d", j)
			}
		}
		bw.WriteByte('\n')
	}
	p := make([]float64, k)
	for i := range n {
		z := logits[i*k : (i+1)*k]
		c := engine.Argmax(z)
		if proba {
			nn.Softmax(p, z)
			for j, v := range p {
				if math.IsNaN(v) {
					return fmt.Errorf("row %d: probability of class %d is NaN: a logit is not finite", i, j)
				}
			}
		}
		if format == "jsonl" {
			rec := predictJSON{Row: i, Class: c}
			if proba {
				rec.Proba = p
			}
			if err := json.NewEncoder(bw).Encode(rec); err != nil {
				return fmt.Errorf("row %d: %w", i, err)
			}
			continue
		}
		bw.WriteString(strconv.Itoa(i) + "," + strconv.Itoa(c))
		if proba {
			for _, v := range p {
				bw.WriteString("," + strconv.FormatFloat(v, 'g', -1, 64))
			}
		}
		bw.WriteByte('\n')
	}
	return bw.Flush()
}
