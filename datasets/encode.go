package datasets

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// numericScale is the public map of a numeric column: clamp to [lo, hi], then
// (t(v) − t(lo)) / (t(hi) − t(lo)) with t the identity or ln(1 + v).
type numericScale struct {
	lo, hi float64
	log    bool
}

// apply clamps v to the bounds and maps it to [0, 1]. v must not be NaN.
func (b numericScale) apply(v float64) float64 {
	v = min(max(v, b.lo), b.hi)
	lo, hi := b.lo, b.hi
	if b.log {
		v, lo, hi = math.Log1p(v), math.Log1p(lo), math.Log1p(hi)
	}
	return min(max((v-lo)/(hi-lo), 0), 1)
}

// columnCodec encodes one schema column into its slice of the feature vector.
type columnCodec struct {
	name    string
	typ     string
	off     int // first feature of the column
	width   int // 1 (numeric), categories + 1 (categorical), 0 (ignore)
	num     numericScale
	index   map[string]int // categorical: category → position in the column
	missing string         // the resolved policy
}

// putNumber writes the feature of a finite value v.
func (c *columnCodec) putNumber(row []float32, v float64) {
	row[c.off] = float32(c.num.apply(v))
}

// putCategory sets the one-hot feature of value s: its category, or the other bucket.
func (c *columnCodec) putCategory(row []float32, s string) {
	j, ok := c.index[s]
	if !ok {
		j = c.width - 1 // OtherCategory
	}
	row[c.off+j] = 1
}

// Encoder encodes records with a validated [Schema]: each record's features are computed
// from that record's fields alone (docs/datasets.md). Build one with [Schema.Encoder]; it is
// safe for concurrent use.
type Encoder struct {
	schema  *Schema
	cols    []columnCodec
	dim     int
	classes map[string]int
	missing map[string]bool
}

// Encoder validates s and returns its encoder. s is copied: later changes to s do not
// affect the encoder.
func (s *Schema) Encoder() (*Encoder, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	s = s.Clone()
	e := &Encoder{schema: s, cols: make([]columnCodec, len(s.Columns)), classes: map[string]int{}, missing: map[string]bool{"": true}}
	for k, c := range s.Label.Classes {
		e.classes[c] = k
	}
	for _, v := range s.MissingValues {
		e.missing[v] = true
	}
	for i, c := range s.Columns {
		cc := columnCodec{name: c.Name, typ: c.Type, off: e.dim, missing: c.Missing}
		switch c.Type {
		case ColumnNumeric:
			cc.width = 1
			cc.num = numericScale{lo: c.Lo, hi: c.Hi, log: c.Scale == ScaleLog}
			if cc.missing == "" {
				cc.missing = MissingError
			}
		case ColumnCategorical:
			cc.width = len(c.Categories) + 1
			cc.index = make(map[string]int, len(c.Categories))
			for j, v := range c.Categories {
				cc.index[v] = j
			}
			if cc.missing == "" {
				cc.missing = MissingOther
			}
		}
		e.dim += cc.width
		e.cols[i] = cc
	}
	return e, nil
}

// Dim returns the encoded width D, a constant of the schema.
func (e *Encoder) Dim() int { return e.dim }

// Classes returns the number of label classes K: labels are in [0, K).
func (e *Encoder) Classes() int { return len(e.schema.Label.Classes) }

// Schema returns a copy of the encoder's schema.
func (e *Encoder) Schema() *Schema { return e.schema.Clone() }

// FeatureNames names the D features in order: a numeric column's name; "name=category" for
// each category of a categorical column, then "name=(other)".
func (e *Encoder) FeatureNames() []string {
	names := make([]string, 0, e.dim)
	for _, c := range e.schema.Columns {
		switch c.Type {
		case ColumnNumeric:
			names = append(names, c.Name)
		case ColumnCategorical:
			for _, v := range c.Categories {
				names = append(names, c.Name+"="+v)
			}
			names = append(names, c.Name+"="+OtherCategory)
		}
	}
	return names
}

// Label returns the class index of the raw label value s (blanks around it are ignored).
func (e *Encoder) Label(s string) (int, error) {
	s = strings.TrimSpace(s)
	k, ok := e.classes[s]
	if ok {
		return k, nil
	}
	if e.missing[s] {
		return -1, errors.New("missing label")
	}
	return -1, fmt.Errorf("label %q, want one of the schema's classes %s", clip(s), listForError(e.schema.Label.Classes))
}

// listForError quotes the first entries of a list for an error message.
func listForError(list []string) string {
	const show = 8
	q := make([]string, 0, show+1)
	for k, v := range list {
		if k == show {
			q = append(q, fmt.Sprintf("… (%d in all)", len(list)))
			break
		}
		q = append(q, strconv.Quote(clip(v)))
	}
	return "[" + strings.Join(q, " ") + "]"
}

// encodeField writes the features of column c for the raw field value raw.
func (e *Encoder) encodeField(row []float32, c *columnCodec, raw string) error {
	s := strings.TrimSpace(raw)
	if e.missing[s] {
		switch c.missing {
		case MissingLo:
			row[c.off] = 0
		case MissingHi:
			row[c.off] = 1
		case MissingOther:
			row[c.off+c.width-1] = 1
		default:
			if c.typ == ColumnNumeric {
				return fmt.Errorf("missing value %q (the column's \"missing\" policy is %q; %q or %q would accept it)", clip(s), MissingError, MissingLo, MissingHi)
			}
			return fmt.Errorf("missing value %q (the column's \"missing\" policy is %q)", clip(s), MissingError)
		}
		return nil
	}
	switch c.typ {
	case ColumnNumeric:
		v, nerr := parseDecimal(s)
		if nerr != nil {
			if nerr.cause != nil {
				return fmt.Errorf("bad number %q: %s: %w", clip(s), nerr.msg, nerr.cause)
			}
			return fmt.Errorf("bad number %q: %s", clip(s), nerr.msg)
		}
		c.putNumber(row, v)
	case ColumnCategorical:
		c.putCategory(row, s)
	}
	return nil
}

// FieldError reports a bad field of one record: its 1-based position in the record, the
// column's name and the problem. It matches [ErrFormat].
type FieldError struct {
	Field  int    // 1-based position of the field in the record
	Column string // the column's name
	Err    error
}

// Error returns "field N (name): problem".
func (e *FieldError) Error() string {
	return fmt.Sprintf("field %d (%s): %v", e.Field, strconv.Quote(clip(e.Column)), e.Err)
}

// Unwrap returns the problem.
func (e *FieldError) Unwrap() error { return e.Err }

// Is reports whether target is [ErrFormat].
func (e *FieldError) Is(target error) bool { return target == ErrFormat }

// RowEncoder encodes the records of one table whose header an [Encoder] has matched with
// the schema's columns ([Encoder.Bind]). [RowEncoder.Encode] preprocesses one record of raw
// string fields: the function a model's predictions use on new data.
type RowEncoder struct {
	e      *Encoder
	header []string
	col    []int // for each field: the schema column it holds, or -1 (label, ignored column)
	label  int   // the label's field, or -1 when the header has no label column
}

// Bind matches header (a table's column names, blanks around them ignored) with the schema:
// every numeric and categorical column of the schema must be in it, every name in it must be
// the schema's (a column or the label), and no name may repeat. The label column may be
// absent (data to predict on); [RowEncoder.HasLabel] tells. The error names every column at
// fault.
func (e *Encoder) Bind(header []string) (*RowEncoder, error) {
	r := &RowEncoder{e: e, header: make([]string, len(header)), col: make([]int, len(header)), label: -1}
	byName := make(map[string]int, len(e.cols))
	for i, c := range e.cols {
		byName[c.name] = i
	}
	seen := make(map[string]int, len(header))
	var unknown []string
	for p, h := range header {
		if p == 0 {
			h = strings.TrimPrefix(h, "\ufeff")
		}
		h = strings.TrimSpace(h)
		r.header[p] = h
		if q, dup := seen[h]; dup {
			return nil, fmt.Errorf("header: columns %d and %d are both named %q", q+1, p+1, clip(h))
		}
		seen[h] = p
		r.col[p] = -1
		if h == e.schema.Label.Column {
			r.label = p
			continue
		}
		i, ok := byName[h]
		if !ok {
			unknown = append(unknown, strconv.Quote(clip(h)))
			continue
		}
		if e.cols[i].typ != ColumnIgnore {
			r.col[p] = i
		}
	}
	var absent []string
	for _, c := range e.cols {
		if _, ok := seen[c.name]; !ok && c.typ != ColumnIgnore {
			absent = append(absent, strconv.Quote(clip(c.name)))
		}
	}
	var msgs []string
	if len(absent) > 0 {
		msgs = append(msgs, "no column named "+strings.Join(absent, ", ")+" (is the first line a header?)")
	}
	if len(unknown) > 0 {
		msgs = append(msgs, "columns not in the schema: "+strings.Join(unknown, ", ")+" (declare each, with type \"ignore\" to skip it)")
	}
	if len(msgs) > 0 {
		return nil, errors.New("header: " + strings.Join(msgs, "; "))
	}
	return r, nil
}

// HasLabel reports whether the header holds the label column.
func (r *RowEncoder) HasLabel() bool { return r.label >= 0 }

// Fields returns the number of fields of each record: the header's.
func (r *RowEncoder) Fields() int { return len(r.header) }

// Encode writes the D features of one record, given as raw string fields in the header's
// order, into dst (len D), and returns its label (−1 without a label column). Missing values
// follow each column's policy; a value that is not a finite decimal number in a numeric
// column, an unknown or missing label, and a missing value under the policy "error" are
// errors (a *FieldError naming the field). dst depends on record alone.
func (r *RowEncoder) Encode(dst []float32, record []string) (label int, err error) {
	if err := r.Features(dst, record); err != nil {
		return -1, err
	}
	label = -1
	if r.label >= 0 {
		if label, err = r.e.Label(record[r.label]); err != nil {
			return -1, &FieldError{Field: r.label + 1, Column: r.header[r.label], Err: err}
		}
	}
	return label, nil
}

// Features writes the D features of one record into dst (len D) as [RowEncoder.Encode] does,
// without reading the label field: the preprocessing of data to predict on, whose label
// column may be absent, empty or hold values the schema does not list.
func (r *RowEncoder) Features(dst []float32, record []string) error {
	if len(dst) != r.e.dim {
		return fmt.Errorf("datasets: RowEncoder.Features: len(dst) = %d, want D = %d", len(dst), r.e.dim)
	}
	if len(record) != len(r.header) {
		return fmt.Errorf("%d fields, want %d as in the header: %w", len(record), len(r.header), ErrFormat)
	}
	clear(dst)
	for p, i := range r.col {
		if i < 0 {
			continue
		}
		if err := r.e.encodeField(dst, &r.e.cols[i], record[p]); err != nil {
			return &FieldError{Field: p + 1, Column: r.header[p], Err: err}
		}
	}
	return nil
}

// numberError says why a field is not an accepted number.
type numberError struct {
	msg   string
	cause error
}

// parseDecimal parses a plain decimal number, the only spelling of a number any text loader
// here accepts: an optional sign, digits with an optional decimal point (at least one digit),
// an optional exponent. Other spellings that strconv.ParseFloat accepts (NaN, Inf, Infinity,
// hexadecimal, "_" separators) and values beyond the float64 range are refused; the result is
// always finite.
func parseDecimal(s string) (float64, *numberError) {
	if !isPlainDecimal(s) {
		return 0, &numberError{msg: "want a finite decimal number (NaN, Inf and hexadecimal forms are refused)"}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		var cause error
		if err != nil {
			cause = errors.Unwrap(err)
		}
		return 0, &numberError{msg: "beyond the float64 range", cause: cause}
	}
	return v, nil
}

// isPlainDecimal reports whether s matches [+-]?(d+(\.d*)?|\.d+)([eE][+-]?d+)?.
func isPlainDecimal(s string) bool {
	i := skipSign(s, 0)
	j := skipDigits(s, i)
	digits := j - i
	if i = j; i < len(s) && s[i] == '.' {
		j = skipDigits(s, i+1)
		digits += j - (i + 1)
		i = j
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i = skipSign(s, i+1)
		if j = skipDigits(s, i); j == i {
			return false
		}
		i = j
	}
	return i == len(s)
}

// skipSign returns the index after an optional + or - at s[i].
func skipSign(s string, i int) int {
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	return i
}

// skipDigits returns the index after the run of ASCII digits starting at s[i].
func skipDigits(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// clip shortens a value for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
