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
	"strings"
)

// UCI Adult layout: 15 comma-separated fields per record, 14 features and the income label.
const (
	AdultContinuous  = 6 // continuous feature columns
	AdultCategorical = 8 // categorical feature columns
	// AdultDim is D of every dataset an [AdultEncoder] makes, a constant of the public schema
	// (see [AdultCategoryLists] and [AdultNumericBounds]): 6 scaled continuous columns and
	// 107 one-hot columns, the 99 categories that adult.names lists plus one
	// [AdultOtherCategory] bucket for each of the 8 categorical columns. It does not depend
	// on the records.
	AdultDim = AdultContinuous + 99 + AdultCategorical
	// AdultUCIDim is AdultDim, under its former name.
	//
	// Deprecated: use AdultDim. D no longer depends on the files.
	AdultUCIDim = AdultDim
	// AdultOtherCategory names the last one-hot column of every categorical column: it holds
	// "?" (missing) and any value that adult.names does not list.
	AdultOtherCategory = OtherCategory
)

const (
	adultFields        = 15
	adultMaxLine       = 1 << 16
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
// endings, blank lines (skipped), a first line starting with "|" (skipped: adult.test's
// "|1x3 Cross validator"; a later line starting with "|" is a bad record), labels
// "<=50K"/">50K" with or without the trailing "." of adult.test. Categorical values are kept
// as written ("?" for missing); the encoder maps them onto the public schema.
//
// Bad input rejects the whole file with a *ParseError naming the line and the field, and no
// records are returned: a row with the wrong field count, an empty categorical value, an
// unknown label, or a continuous value that is not a plain decimal number that fits a float64
// (optional sign, digits, optional fraction and exponent). So "NaN", "Inf", "-inf",
// "Infinity", hexadecimal ("0x1p4") and digit-separated ("1_000") forms, which
// strconv.ParseFloat would accept, are refused, and so is "1e400" (beyond float64). A finite
// value outside the column's public bounds is not an error: the encoder clamps it (see
// [AdultNumericBounds]). Either way, what happens to one record depends on that record alone.
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
		if text == "" || line == 1 && text[0] == '|' {
			continue
		}
		if text[0] == '|' {
			return nil, &ParseError{File: name, Line: line, Offset: -1, Msg: "line starts with \"|\" (only a file's first line may: adult.test's \"|1x3 Cross validator\")"}
		}
		fields = splitAdult(fields[:0], text)
		if len(fields) != adultFields {
			return nil, &ParseError{File: name, Line: line, Offset: -1, Msg: fmt.Sprintf("%d fields, want %d", len(fields), adultFields)}
		}
		rec := AdultRecord{Line: line}
		for k, c := range adultContCols() {
			v, err := parseDecimal(fields[c])
			if err != nil {
				return nil, &ParseError{File: name, Line: line, Offset: -1, Msg: fmt.Sprintf("field %d (%s): bad number %q: %s", c+1, cols[c], clip(fields[c]), err.msg), Err: err.cause}
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

// The public schema of the UCI Adult data. Nothing in it is computed from the records: the
// category lists are those of adult.names, the description distributed with the data by Ronny
// Kohavi and Barry Becker (UCI Machine Learning Repository, "Adult" / "Census Income"; first
// cited in R. Kohavi, "Scaling Up the Accuracy of Naive-Bayes Classifiers: a Decision-Tree
// Hybrid", KDD 1996), and the numeric bounds follow from that description and from the
// field formats of the Census Bureau's Current Population Survey extract it describes. So the
// encoded width D (= [AdultDim]) and the encoding of each record are the same whichever
// records a file holds: removing or changing one record changes its own row and nothing else.

// AdultCategoryLists returns the categories of the 8 categorical columns (workclass,
// education, marital-status, occupation, relationship, race, sex, native-country: the order
// of [AdultRecord.Categorical]) exactly as adult.names lists them, in its order. The encoder
// adds an [AdultOtherCategory] column after each list.
func AdultCategoryLists() [AdultCategorical][]string {
	return [AdultCategorical][]string{
		{"Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov", "State-gov", "Without-pay", "Never-worked"},
		{"Bachelors", "Some-college", "11th", "HS-grad", "Prof-school", "Assoc-acdm", "Assoc-voc", "9th", "7th-8th", "12th", "Masters", "1st-4th", "10th", "Doctorate", "5th-6th", "Preschool"},
		{"Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed", "Married-spouse-absent", "Married-AF-spouse"},
		{"Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial", "Prof-specialty", "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical", "Farming-fishing", "Transport-moving", "Priv-house-serv", "Protective-serv", "Armed-Forces"},
		{"Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried"},
		{"White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"},
		{"Female", "Male"},
		{"United-States", "Cambodia", "England", "Puerto-Rico", "Canada", "Germany", "Outlying-US(Guam-USVI-etc)", "India", "Japan", "Greece", "South", "China", "Cuba", "Iran", "Honduras", "Philippines", "Italy", "Poland", "Jamaica", "Vietnam", "Mexico", "Portugal", "Ireland", "France", "Dominican-Republic", "Laos", "Ecuador", "Taiwan", "Haiti", "Columbia", "Hungary", "Guatemala", "Nicaragua", "Scotland", "Thailand", "Yugoslavia", "El-Salvador", "Trinadad&Tobago", "Peru", "Hong", "Holand-Netherlands"},
	}
}

// AdultNumericBound is the public range of one continuous Adult column. A value v is clamped
// to [Lo, Hi] and mapped to [0, 1] by (t(v) − t(Lo)) / (t(Hi) − t(Lo)), with t(v) = v, or
// t(v) = ln(1 + v) when Log is set.
type AdultNumericBound struct {
	Name   string // column name, as in AdultColumns
	Lo, Hi float64
	Log    bool // scale ln(1 + v): for dollar amounts spread over orders of magnitude
}

// AdultNumericBounds returns the public bounds of the 6 continuous columns, in the order of
// [AdultRecord.Continuous]. They were fixed from the data's description, not from its
// statistics:
//
//   - age [17, 90]: adult.names states the extraction kept AAGE > 16; 90 is the top code of
//     age in the Current Population Survey public-use files of the time.
//   - fnlwgt [1, 1e7], log scale: the CPS final sampling weight (adult.names, "Description of
//     fnlwgt"), kept only when AFNLWGT > 1; it is a population count that varies by orders of
//     magnitude, hence the log scale, and 1e7 is a round, deliberately generous ceiling.
//   - education-num [1, 16]: the ordinal code of education, whose 16 levels adult.names lists.
//   - capital-gain and capital-loss [0, 99999], log scale: dollar amounts in five-digit CPS
//     income fields, 99999 being the largest value (the top code); most people have none, the
//     rest range over orders of magnitude.
//   - hours-per-week [1, 99]: adult.names states the extraction kept HRSWK > 0; the CPS hours
//     field has two digits.
//
// Clamping only ever moves a value to the nearer bound, so a record's encoding depends on that
// record alone.
func AdultNumericBounds() [AdultContinuous]AdultNumericBound {
	return [AdultContinuous]AdultNumericBound{
		{Name: "age", Lo: 17, Hi: 90},
		{Name: "fnlwgt", Lo: 1, Hi: 1e7, Log: true},
		{Name: "education-num", Lo: 1, Hi: 16},
		{Name: "capital-gain", Lo: 0, Hi: 99999, Log: true},
		{Name: "capital-loss", Lo: 0, Hi: 99999, Log: true},
		{Name: "hours-per-week", Lo: 1, Hi: 99},
	}
}

// scale clamps v to the bounds and maps it to [0, 1], as the schema's numeric columns do. v
// must not be NaN.
func (b AdultNumericBound) scale(v float64) float64 {
	return numericScale{lo: b.Lo, hi: b.Hi, log: b.Log}.apply(v)
}

// AdultSchema returns the public schema of the UCI Adult data as a [Schema]: the label
// "income" with classes "<=50K" (0) and ">50K" (1), "?" as a missing value, and the 14
// feature columns in file order, numeric ones with [AdultNumericBounds] and categorical ones
// with [AdultCategoryLists]. [NewAdultEncoder] encodes with it; written as JSON it is the
// example of docs/datasets.md.
func AdultSchema() *Schema {
	cols := AdultColumns()
	bounds, lists := AdultNumericBounds(), AdultCategoryLists()
	s := &Schema{
		Label:         Label{Column: cols[adultLabelField], Classes: []string{"<=50K", ">50K"}},
		MissingValues: []string{"?"},
	}
	ci, ki := 0, 0
	contCols := adultContCols()
	for col := range adultFields - 1 {
		if ci < AdultContinuous && contCols[ci] == col {
			b := bounds[ci]
			c := Column{Name: cols[col], Type: ColumnNumeric, Lo: b.Lo, Hi: b.Hi}
			if b.Log {
				c.Scale = ScaleLog
			}
			s.Columns = append(s.Columns, c)
			ci++
		} else {
			s.Columns = append(s.Columns, Column{Name: cols[col], Type: ColumnCategorical, Categories: slices.Clone(lists[ki])})
			ki++
		}
	}
	return s
}

// AdultEncoder turns [AdultRecord]s into feature vectors with the public schema
// ([AdultSchema]): each continuous column clamped to its public bounds and scaled to [0, 1]
// ([AdultNumericBounds]), each categorical column one-hot over the categories adult.names
// lists ([AdultCategoryLists]) plus an [AdultOtherCategory] column for "?" and for any value
// not listed. Columns keep the file's order: age, workclass=…, fnlwgt, education=…, …; within
// a categorical column the categories keep adult.names' order and the other bucket comes
// last. D = [AdultDim] = 113 always, and each row depends on its own record only.
type AdultEncoder struct {
	enc    *Encoder // the schema's encoder; its columns are the file's feature columns
	bounds [AdultContinuous]AdultNumericBound
}

// NewAdultEncoder returns the encoder of the public schema.
func NewAdultEncoder() *AdultEncoder {
	enc, err := AdultSchema().Encoder()
	if err != nil {
		panic("datasets: the Adult schema is invalid: " + err.Error()) // a constant of the package
	}
	return &AdultEncoder{enc: enc, bounds: AdultNumericBounds()}
}

// FitAdultEncoder returns [NewAdultEncoder]() and ignores train: the encoding no longer
// depends on the data (fitting a vocabulary or scaling statistics on private training records
// made the model's width and every record's features depend on the other records). It fails
// on an empty slice, as it used to.
//
// Deprecated: use NewAdultEncoder.
func FitAdultEncoder(train []AdultRecord) (*AdultEncoder, error) {
	if len(train) == 0 {
		return nil, errors.New("datasets: FitAdultEncoder: no training records, want at least 1")
	}
	return NewAdultEncoder(), nil
}

// Dim returns the number of encoded features D, always [AdultDim].
func (e *AdultEncoder) Dim() int { return e.enc.Dim() }

// Bounds returns the public bounds of the continuous columns (see [AdultNumericBounds]).
func (e *AdultEncoder) Bounds() [AdultContinuous]AdultNumericBound { return e.bounds }

// Categories returns a copy of the one-hot categories of categorical column k (0 ≤ k < 8, in
// the order of [AdultRecord.Categorical]): adult.names' list followed by [AdultOtherCategory].
func (e *AdultEncoder) Categories(k int) []string {
	c := e.enc.schema.Columns[adultCatCols()[k]].Categories
	return append(slices.Clone(c), AdultOtherCategory)
}

// FeatureNames names the D encoded columns: "age", "workclass=Private", …,
// "workclass=(other)", "fnlwgt", ….
func (e *AdultEncoder) FeatureNames() []string { return e.enc.FeatureNames() }

// encodeRow writes record r's D features into row (which must be zero): the only input is r.
// On a bad record it returns the file column at fault and what is wrong.
func (e *AdultEncoder) encodeRow(row []float32, r *AdultRecord) (field int, msg string) {
	for k, col := range adultContCols() {
		v := r.Continuous[k]
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return col, fmt.Sprintf("value %v, want a finite number", v)
		}
		e.enc.cols[col].putNumber(row, v)
	}
	for k, col := range adultCatCols() {
		e.enc.cols[col].putCategory(row, r.Categorical[k])
	}
	if r.Label != 0 && r.Label != 1 {
		return adultLabelField, fmt.Sprintf("label %d, want 0 or 1", r.Label)
	}
	return -1, ""
}

// Encode returns the records as a Dataset named name (Classes = 2, Shape = [D], D =
// [AdultDim]). Each row is computed from its own record only. A record whose continuous value
// is NaN or ±Inf (which [ReadAdultCSV] never returns) or whose label is not 0 or 1 fails the
// whole call with a *ParseError naming the record, its line and the field; finite values
// outside the public bounds are clamped.
func (e *AdultEncoder) Encode(name string, recs []AdultRecord) (*Dataset, error) {
	d := e.Dim()
	x := make([]float32, len(recs)*d)
	y := make([]int, len(recs))
	cols := AdultColumns()
	for i := range recs {
		r := &recs[i]
		if col, msg := e.encodeRow(x[i*d:(i+1)*d], r); msg != "" {
			return nil, &ParseError{File: name, Line: r.Line, Offset: -1, Msg: fmt.Sprintf("record %d: field %d (%s): %s", i, col+1, cols[col], msg)}
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
// Income files as distributed (gzip-compressed copies under the same names are accepted), and
// encodes both with the public schema of [NewAdultEncoder]: nothing is fitted on the records,
// so D = [AdultDim] = 113 whatever the files hold and each row depends on its own record only.
// With the UCI files, train N = 32561 (24.1% positive), test N = 16281 (23.6% positive). Label
// 1 means >50K. Rows with missing values ("?") are kept; "?" goes to the other bucket. Bad
// numbers are handled as [ReadAdultCSV] describes: malformed or non-finite ones reject the
// file naming the line and field, finite ones outside the public bounds are clamped.
func LoadAdult(dir string) (train, test *Dataset, err error) {
	trainRecs, err := readAdultFile(dir, adultTrainFileName)
	if err != nil {
		return nil, nil, err
	}
	testRecs, err := readAdultFile(dir, adultTestFileName)
	if err != nil {
		return nil, nil, err
	}
	enc := NewAdultEncoder()
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
