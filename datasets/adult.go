package datasets

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// UCI Adult layout: 15 comma-separated fields per record, 14 features and the income label.
const (
	AdultContinuous  = 6 // continuous feature columns
	AdultCategorical = 8 // categorical feature columns
	// AdultUCIDim is D of the datasets LoadAdult makes from the UCI files: 6 standardized
	// columns and 102 one-hot columns (see AdultEncoder).
	AdultUCIDim = 108
)

const (
	adultFields        = 15
	adultMaxLine       = 1 << 16
	adultMaxAbsValue   = 1e15 // continuous values beyond this are refused as implausible
	adultLabelField    = 14
	adultTrainFileName = "adult.data"
	adultTestFileName  = "adult.test"
)

// AdultColumns are the 15 column names of the UCI files, in file order.
func AdultColumns() []string {
	return []string{"age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
		"occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
		"hours-per-week", "native-country", "income"}
}

// adultContCols returns the file positions of the continuous feature columns.
func adultContCols() [AdultContinuous]int { return [AdultContinuous]int{0, 2, 4, 10, 11, 12} }

// adultCatCols returns the file positions of the categorical feature columns.
func adultCatCols() [AdultCategorical]int {
	return [AdultCategorical]int{1, 3, 5, 6, 7, 8, 9, 13}
}

// AdultRecord is one parsed row of adult.data or adult.test.
type AdultRecord struct {
	// Continuous holds age, fnlwgt, education-num, capital-gain, capital-loss, hours-per-week.
	Continuous [AdultContinuous]float64
	// Categorical holds workclass, education, marital-status, occupation, relationship, race,
	// sex, native-country, as written (missing values are "?").
	Categorical [AdultCategorical]string
	Label       int // 1 for income >50K, 0 for <=50K
	Line        int // 1-based line number in the source
}

// ReadAdultCSV parses UCI Adult records from r; name labels the errors. It accepts both files
// as distributed: fields separated by "," with optional surrounding blanks, LF or CRLF line
// endings, blank lines (skipped), lines starting with "|" (skipped: adult.test's first line
// "|1x3 Cross validator"), labels "<=50K"/">50K" with or without the trailing "." of
// adult.test. A row with the wrong field count, a continuous value that is not a finite number
// (or exceeds 1e15 in magnitude), an empty categorical value or an unknown label gives a
// *ParseError naming the line and the field. "?" (missing) is kept as a category of its own.
func ReadAdultCSV(r io.Reader, name string) ([]AdultRecord, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), adultMaxLine)
	cols := AdultColumns()
	var recs []AdultRecord
	fields := make([]string, 0, adultFields)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if line == 1 {
			text = strings.TrimPrefix(text, "\ufeff")
		}
		text = strings.TrimSpace(text)
		if text == "" || text[0] == '|' {
			continue
		}
		fields = splitAdult(fields[:0], text)
		if len(fields) != adultFields {
			return nil, &ParseError{File: name, Line: line, Offset: -1, Msg: fmt.Sprintf("%d fields, want %d", len(fields), adultFields)}
		}
		rec := AdultRecord{Line: line}
		for k, c := range adultContCols() {
			v, err := strconv.ParseFloat(fields[c], 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > adultMaxAbsValue {
				var cause error
				if err != nil {
					cause = errors.Unwrap(err)
				}
				return nil, &ParseError{File: name, Line: line, Offset: -1, Msg: fmt.Sprintf("field %d (%s): bad number %q, want a finite value of magnitude at most %g", c+1, cols[c], clip(fields[c]), adultMaxAbsValue), Err: cause}
			}
			rec.Continuous[k] = v
		}
		for k, c := range adultCatCols() {
			if fields[c] == "" {
				return nil, &ParseError{File: name, Line: line, Offset: -1, Msg: fmt.Sprintf("field %d (%s): empty value (missing values are written \"?\")", c+1, cols[c])}
			}
			rec.Categorical[k] = fields[c]
		}
		switch strings.TrimSuffix(fields[adultLabelField], ".") {
		case ">50K":
			rec.Label = 1
		case "<=50K":
			rec.Label = 0
		default:
			return nil, &ParseError{File: name, Line: line, Offset: -1, Msg: fmt.Sprintf("field %d (income): label %q, want \"<=50K\" or \">50K\" (optionally with a trailing \".\")", adultFields, clip(fields[adultLabelField]))}
		}
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		msg := "read"
		if errors.Is(err, bufio.ErrTooLong) {
			msg = fmt.Sprintf("line longer than %d bytes", adultMaxLine)
		}
		return nil, &ParseError{File: name, Line: line + 1, Offset: -1, Msg: msg, Err: err}
	}
	return recs, nil
}

// splitAdult splits one line at commas and trims blanks around each field.
func splitAdult(dst []string, s string) []string {
	for {
		i := strings.IndexByte(s, ',')
		if i < 0 {
			return append(dst, strings.TrimSpace(s))
		}
		dst = append(dst, strings.TrimSpace(s[:i]))
		s = s[i+1:]
	}
}

// clip shortens a value for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// AdultEncoder turns [AdultRecord]s into feature vectors: continuous columns standardized with
// the training mean and (population) standard deviation, categorical columns one-hot encoded
// over the categories seen in the training records (a category not seen in training encodes
// as all zeros). Columns keep the file's order: age, workclass=…, fnlwgt, education=…, …;
// within a categorical column the categories are sorted bytewise ("?" sorts first).
//
// Fitted on the full adult.data, D = 108: 6 continuous columns plus 102 one-hot columns
// (workclass 9, education 16, marital-status 7, occupation 15, relationship 6, race 5, sex 2,
// native-country 42, each count including "?" where it occurs).
type AdultEncoder struct {
	mean, std  [AdultContinuous]float64
	categories [AdultCategorical][]string
	index      [AdultCategorical]map[string]int
	offset     [adultFields - 1]int // output offset of each file column
	dim        int
}

// FitAdultEncoder fits an encoder on the training records. It fails on an empty slice.
// A continuous column with zero spread is scaled by 1 instead of 1/0.
func FitAdultEncoder(train []AdultRecord) (*AdultEncoder, error) {
	if len(train) == 0 {
		return nil, errors.New("datasets: FitAdultEncoder: no training records, want at least 1")
	}
	e := &AdultEncoder{}
	n := float64(len(train))
	for k := range AdultContinuous {
		var s float64
		for i := range train {
			s += train[i].Continuous[k]
		}
		m := s / n
		var ss float64
		for i := range train {
			d := train[i].Continuous[k] - m
			ss += d * d
		}
		sd := math.Sqrt(ss / n)
		if !(sd > 0) || math.IsInf(1/sd, 0) {
			sd = 1
		}
		e.mean[k], e.std[k] = m, sd
	}
	for k := range AdultCategorical {
		set := make(map[string]struct{})
		for i := range train {
			set[train[i].Categorical[k]] = struct{}{}
		}
		cats := make([]string, 0, len(set))
		for c := range set {
			cats = append(cats, c)
		}
		slices.Sort(cats)
		e.categories[k] = cats
		e.index[k] = make(map[string]int, len(cats))
		for j, c := range cats {
			e.index[k][c] = j
		}
	}
	off := 0
	ci, ki := 0, 0
	contCols := adultContCols()
	for col := range adultFields - 1 {
		e.offset[col] = off
		if ci < AdultContinuous && contCols[ci] == col {
			off++
			ci++
		} else {
			off += len(e.categories[ki])
			ki++
		}
	}
	e.dim = off
	return e, nil
}

// Dim returns the number of encoded features D.
func (e *AdultEncoder) Dim() int { return e.dim }

// Mean and Std return the training mean and standard deviation of the continuous columns
// (age, fnlwgt, education-num, capital-gain, capital-loss, hours-per-week).
func (e *AdultEncoder) Mean() [AdultContinuous]float64 { return e.mean }

// Std returns the training standard deviations used for scaling; see [AdultEncoder.Mean].
func (e *AdultEncoder) Std() [AdultContinuous]float64 { return e.std }

// Categories returns a copy of the training categories of categorical column k (0 ≤ k < 8, in
// the order of [AdultRecord.Categorical]).
func (e *AdultEncoder) Categories(k int) []string { return slices.Clone(e.categories[k]) }

// FeatureNames names the D encoded columns: "age", "workclass=Private", ….
func (e *AdultEncoder) FeatureNames() []string {
	cols := AdultColumns()
	names := make([]string, 0, e.dim)
	ci, ki := 0, 0
	contCols := adultContCols()
	for col := range adultFields - 1 {
		if ci < AdultContinuous && contCols[ci] == col {
			names = append(names, cols[col])
			ci++
		} else {
			for _, c := range e.categories[ki] {
				names = append(names, cols[col]+"="+c)
			}
			ki++
		}
	}
	return names
}

// Encode returns the records as a Dataset named name (Classes = 2, Shape = [D]). It fails if a
// standardized value does not fit a finite float32, naming the line and the column.
func (e *AdultEncoder) Encode(name string, recs []AdultRecord) (*Dataset, error) {
	d := e.dim
	x := make([]float32, len(recs)*d)
	y := make([]int, len(recs))
	cols := AdultColumns()
	for i := range recs {
		r := &recs[i]
		row := x[i*d : (i+1)*d]
		for k, col := range adultContCols() {
			v := float32((r.Continuous[k] - e.mean[k]) / e.std[k])
			if math.IsInf(float64(v), 0) || math.IsNaN(float64(v)) {
				return nil, &ParseError{File: name, Line: r.Line, Offset: -1, Msg: fmt.Sprintf("record %d: field %d (%s): value %g standardizes to %v with the training mean %g and std %g", i, col+1, cols[col], r.Continuous[k], v, e.mean[k], e.std[k])}
			}
			row[e.offset[col]] = v
		}
		for k, col := range adultCatCols() {
			if j, ok := e.index[k][r.Categorical[k]]; ok {
				row[e.offset[col]+j] = 1
			}
		}
		if r.Label != 0 && r.Label != 1 {
			return nil, &ParseError{File: name, Line: r.Line, Offset: -1, Msg: fmt.Sprintf("record %d: label %d, want 0 or 1", i, r.Label)}
		}
		y[i] = r.Label
	}
	return &Dataset{
		Name:         name,
		X:            x,
		Y:            y,
		N:            len(recs),
		D:            d,
		Classes:      2,
		Shape:        []int{d},
		FeatureNames: e.FeatureNames(),
	}, nil
}

func readAdultFile(dir, base string) ([]AdultRecord, error) {
	path := filepath.Join(dir, base)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("datasets: adult: %w", err)
	}
	defer f.Close()
	src, closeFn, err := maybeGunzip(f, path)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	recs, err := ReadAdultCSV(src, path)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, &ParseError{File: path, Offset: -1, Msg: "no records"}
	}
	return recs, nil
}

// LoadAdult reads adult.data (train) and adult.test (test) from dir, the UCI Adult / Census
// Income files as distributed (gzip-compressed copies under the same names are accepted). The
// encoder is fitted on adult.data only (see [AdultEncoder]): with the UCI files, D = 108,
// train N = 32561 (24.1% positive), test N = 16281 (23.6% positive). Label 1 means >50K.
// Rows with missing values ("?") are kept; "?" is a category of its own.
func LoadAdult(dir string) (train, test *Dataset, err error) {
	trainRecs, err := readAdultFile(dir, adultTrainFileName)
	if err != nil {
		return nil, nil, err
	}
	testRecs, err := readAdultFile(dir, adultTestFileName)
	if err != nil {
		return nil, nil, err
	}
	enc, err := FitAdultEncoder(trainRecs)
	if err != nil {
		return nil, nil, err
	}
	train, err = enc.Encode("adult/train", trainRecs)
	if err != nil {
		return nil, nil, renameParseError(err, filepath.Join(dir, adultTrainFileName))
	}
	test, err = enc.Encode("adult/test", testRecs)
	if err != nil {
		return nil, nil, renameParseError(err, filepath.Join(dir, adultTestFileName))
	}
	return train, test, nil
}

// renameParseError makes a *ParseError name the file it came from.
func renameParseError(err error, file string) error {
	var pe *ParseError
	if errors.As(err, &pe) {
		pe.File = file
	}
	return err
}
