package datasets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Column types of a [Schema].
const (
	ColumnNumeric     = "numeric"     // clamped to public bounds [lo, hi], scaled to [0, 1]
	ColumnCategorical = "categorical" // one-hot over declared categories plus an other bucket
	ColumnIgnore      = "ignore"      // read past, never encoded
)

// Numeric scales of a [Schema] column.
const (
	ScaleLinear = "linear" // t(v) = v (the default)
	ScaleLog    = "log"    // t(v) = ln(1 + v): for amounts spread over orders of magnitude
)

// Missing-value policies of a [Schema] column (see [Column.Missing]).
const (
	MissingError = "error" // a missing value rejects the file (numeric default)
	MissingLo    = "lo"    // numeric: a missing value is encoded as the bound lo (feature 0)
	MissingHi    = "hi"    // numeric: a missing value is encoded as the bound hi (feature 1)
	MissingOther = "other" // categorical: a missing value goes to the other bucket (default)
)

// OtherCategory names the last one-hot column of every categorical column: it takes every
// value the schema does not list (and, by default, missing values).
const OtherCategory = "(other)"

// Limits of a [Schema], so that no schema can make the encoder allocate without bound.
const (
	MaxSchemaDim        = 1 << 24 // largest encoded width D
	MaxSchemaColumns    = 1 << 16 // most columns, ignored ones included
	MaxSchemaCategories = 1 << 16 // most categories of one column
	MaxSchemaClasses    = 1 << 16 // most label classes
)

// ErrSchema is matched (errors.Is) by every error about an invalid [Schema].
var ErrSchema = errors.New("invalid schema")

// Schema is the public description of a tabular dataset: what each column holds and how it is
// encoded, fixed without looking at the records (docs/datasets.md). Encoding a record with it
// reads that record only, so D, the feature order and each row's features never depend on the
// other records. It is written as JSON (see [ParseSchema]); marshalling a valid Schema and
// parsing the result gives the same Schema.
type Schema struct {
	// Warning is set by [DraftSchema] and [DraftIDXSchema]: a drafted schema's bounds,
	// categories and classes are statistics of the data it was drafted from. Delete it once
	// every such value is replaced by a public one; dpsgd train refuses a schema that has it.
	Warning string `json:"warning,omitempty"`
	// Label names the label column and lists its classes: the value Classes[k] is label k.
	Label Label `json:"label"`
	// MissingValues are the spellings of a missing value besides the empty field, for
	// example "?" or "NA" (compared after trimming blanks, case-sensitively).
	MissingValues []string `json:"missing_values,omitempty"`
	// Columns describes the feature columns (and the ignored ones) in the order in which
	// they are encoded; a CSV's columns may come in any order and are matched by name.
	Columns []Column `json:"columns"`
}

// Label is the label column of a [Schema].
type Label struct {
	Column  string   `json:"column"`
	Classes []string `json:"classes"` // at least 2; a value not listed rejects the file
}

// Column is one column of a [Schema].
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"` // ColumnNumeric, ColumnCategorical or ColumnIgnore
	// Lo and Hi are a numeric column's public bounds (lo < hi, both finite): a value is
	// clamped to [Lo, Hi] and mapped to (t(v) − t(Lo)) / (t(Hi) − t(Lo)) in [0, 1]. In JSON
	// both are required for a numeric column.
	Lo float64 `json:"lo"`
	Hi float64 `json:"hi"`
	// Scale is t: ScaleLinear ("" means linear) or ScaleLog, t(v) = ln(1 + v), which needs
	// Lo > −1.
	Scale string `json:"scale,omitempty"`
	// Categories are a categorical column's values, one one-hot column each, in this order,
	// followed by the [OtherCategory] column for every value not listed.
	Categories []string `json:"categories,omitempty"`
	// Missing is what a missing value (an empty field, or one of the schema's
	// MissingValues) becomes: numeric MissingError (the default), MissingLo or MissingHi;
	// categorical MissingOther (the default) or MissingError.
	Missing string `json:"missing,omitempty"`
}

// SchemaError reports an invalid [Schema]: where (the label, a column, a field) and what is
// wrong. It matches [ErrSchema] under errors.Is.
type SchemaError struct {
	Column string // the column's name, or "" for schema-level fields
	Index  int    // the column's 1-based position in "columns"; 0 for schema-level fields
	Field  string // the JSON field at fault ("lo", "categories", "label.classes", …)
	Msg    string
}

// Error returns a one-line message naming the column and the field.
func (e *SchemaError) Error() string {
	var b strings.Builder
	b.WriteString("datasets: schema: ")
	if e.Index > 0 {
		fmt.Fprintf(&b, "columns[%d]", e.Index-1)
		if e.Column != "" {
			fmt.Fprintf(&b, " (%s)", strconv.Quote(clip(e.Column)))
		}
		b.WriteString(": ")
	} else if e.Column != "" {
		fmt.Fprintf(&b, "column %s: ", strconv.Quote(clip(e.Column)))
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Is reports whether target is [ErrSchema].
func (e *SchemaError) Is(target error) bool { return target == ErrSchema }

// columnJSON is a Column as JSON, with the presence of lo and hi visible.
type columnJSON struct {
	Name       string   `json:"name"`
	Type       string   `json:"type"`
	Lo         *float64 `json:"lo,omitempty"`
	Hi         *float64 `json:"hi,omitempty"`
	Scale      string   `json:"scale,omitempty"`
	Categories []string `json:"categories,omitempty"`
	Missing    string   `json:"missing,omitempty"`
}

// MarshalJSON writes lo and hi for a numeric column (0 included) and wherever they are
// non-zero, so that parsing the result gives c back.
func (c Column) MarshalJSON() ([]byte, error) {
	a := columnJSON{Name: c.Name, Type: c.Type, Scale: c.Scale, Categories: c.Categories, Missing: c.Missing}
	if c.Type == ColumnNumeric || c.Lo != 0 {
		a.Lo = &c.Lo
	}
	if c.Type == ColumnNumeric || c.Hi != 0 {
		a.Hi = &c.Hi
	}
	return json.Marshal(a)
}

// UnmarshalJSON reads a column strictly: an unknown field is an error (a misspelt
// "catgories" must not silently drop the list), and so is a numeric column without "lo" or
// "hi". An empty "categories" list reads as none.
func (c *Column) UnmarshalJSON(b []byte) error {
	var name struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(b, &name) // best effort: the name for the error messages
	var a columnJSON
	if err := strictJSON(b, &a); err != nil {
		return &SchemaError{Column: name.Name, Msg: err.Error()}
	}
	if a.Type == ColumnNumeric && (a.Lo == nil || a.Hi == nil) {
		return &SchemaError{Column: a.Name, Msg: `a numeric column needs both "lo" and "hi": its public bounds`}
	}
	*c = Column{Name: a.Name, Type: a.Type, Scale: a.Scale, Categories: a.Categories, Missing: a.Missing}
	if a.Lo != nil {
		c.Lo = *a.Lo
	}
	if a.Hi != nil {
		c.Hi = *a.Hi
	}
	if len(c.Categories) == 0 {
		c.Categories = nil
	}
	return nil
}

// UnmarshalJSON reads a schema strictly: an unknown field is an error, and an error in a
// column names it by position. It checks the structure only; [ParseSchema] and
// [Schema.Validate] check the values.
func (s *Schema) UnmarshalJSON(b []byte) error {
	var p struct {
		Warning       string            `json:"warning"`
		Label         Label             `json:"label"`
		MissingValues []string          `json:"missing_values"`
		Columns       []json.RawMessage `json:"columns"`
	}
	if err := strictJSON(b, &p); err != nil {
		return &SchemaError{Msg: err.Error()}
	}
	out := Schema{Warning: p.Warning, Label: p.Label, MissingValues: p.MissingValues}
	if len(out.MissingValues) == 0 {
		out.MissingValues = nil
	}
	if p.Columns != nil {
		out.Columns = make([]Column, len(p.Columns))
	}
	for i, raw := range p.Columns {
		if err := json.Unmarshal(raw, &out.Columns[i]); err != nil {
			se, ok := err.(*SchemaError)
			if !ok {
				se = &SchemaError{Msg: err.Error()}
			}
			se.Index = i + 1
			return se
		}
	}
	*s = out
	return nil
}

// strictJSON decodes one JSON value from b into v, refusing unknown fields and trailing data.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON value")
	}
	return nil
}

// ParseSchema reads a schema from its JSON text and validates it ([Schema.Validate]). Unknown
// fields, a numeric column without "lo" or "hi", and text after the object are errors.
// Errors match [ErrSchema] and name the column and the field.
func ParseSchema(data []byte) (*Schema, error) {
	var s Schema
	if err := strictJSON(data, &s); err != nil {
		var se *SchemaError
		if errors.As(err, &se) {
			return nil, err
		}
		return nil, &SchemaError{Msg: err.Error()}
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// LoadSchema reads and validates the schema file path ([ParseSchema]).
func LoadSchema(path string) (*Schema, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("datasets: schema: %w", err)
	}
	s, err := ParseSchema(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Clone returns a deep copy of s.
func (s *Schema) Clone() *Schema {
	c := *s
	c.Label.Classes = slices.Clone(s.Label.Classes)
	c.MissingValues = slices.Clone(s.MissingValues)
	c.Columns = slices.Clone(s.Columns)
	for i := range c.Columns {
		c.Columns[i].Categories = slices.Clone(s.Columns[i].Categories)
	}
	return &c
}

// Dim returns the encoded width D of a valid schema: 1 per numeric column, the number of
// categories + 1 per categorical column.
func (s *Schema) Dim() int {
	d := 0
	for _, c := range s.Columns {
		switch c.Type {
		case ColumnNumeric:
			d++
		case ColumnCategorical:
			d += len(c.Categories) + 1
		}
	}
	return d
}

// checkName checks one name, category or class: non-empty, valid UTF-8 (JSON could not carry
// it otherwise) and without surrounding blanks (fields are compared after trimming them).
func checkName(s string) string {
	switch {
	case s == "":
		return "empty, want a non-empty string"
	case !utf8.ValidString(s):
		return fmt.Sprintf("%q is not valid UTF-8", clip(s))
	case strings.TrimSpace(s) != s:
		return fmt.Sprintf("%q has surrounding blanks (fields are compared after trimming them)", clip(s))
	}
	return ""
}

// Validate checks s: the label column and at least 2 distinct classes; each column's name
// (non-empty, unique, not the label's), type, and the fields its type takes: a numeric
// column finite bounds lo < hi (lo > −1 with the log scale), a categorical column at least
// one distinct category other than [OtherCategory], and a missing policy its type accepts.
// Fields that a type does not take must be absent. D must be between 1 and [MaxSchemaDim].
// The error is a *SchemaError naming the column and the field.
func (s *Schema) Validate() error {
	if s == nil {
		return &SchemaError{Msg: "nil schema"}
	}
	if msg := checkName(s.Label.Column); msg != "" {
		return &SchemaError{Field: "label.column", Msg: msg}
	}
	missing := map[string]bool{}
	for k, v := range s.MissingValues {
		if msg := checkName(v); msg != "" {
			return &SchemaError{Field: fmt.Sprintf("missing_values[%d]", k), Msg: msg + " (the empty field is always missing)"}
		}
		if missing[v] {
			return &SchemaError{Field: fmt.Sprintf("missing_values[%d]", k), Msg: fmt.Sprintf("%q listed twice", clip(v))}
		}
		missing[v] = true
	}
	if err := checkList(s.Label.Classes, missing, "label.classes", 2, MaxSchemaClasses); err != nil {
		return err
	}
	if len(s.Columns) > MaxSchemaColumns {
		return &SchemaError{Field: "columns", Msg: fmt.Sprintf("%d columns, want at most %d", len(s.Columns), MaxSchemaColumns)}
	}
	names := map[string]int{}
	dim := 0
	for i := range s.Columns {
		c := &s.Columns[i]
		fail := func(field, format string, args ...any) error {
			return &SchemaError{Column: c.Name, Index: i + 1, Field: field, Msg: fmt.Sprintf(format, args...)}
		}
		if msg := checkName(c.Name); msg != "" {
			return fail("name", "%s", msg)
		}
		if c.Name == s.Label.Column {
			return fail("name", "is the label column (label.column); a column is a feature or the label, not both")
		}
		if j, ok := names[c.Name]; ok {
			return fail("name", "also the name of columns[%d]", j)
		}
		names[c.Name] = i
		switch c.Type {
		case ColumnNumeric:
			if err := c.validateNumeric(fail); err != nil {
				return err
			}
			dim++
		case ColumnCategorical:
			if c.Lo != 0 || c.Hi != 0 || c.Scale != "" {
				return fail("lo/hi/scale", "apply to numeric columns only; a categorical column takes categories")
			}
			switch c.Missing {
			case "", MissingOther, MissingError:
			default:
				return fail("missing", "%q, want %q (the default) or %q for a categorical column", clip(c.Missing), MissingOther, MissingError)
			}
			if err := checkList(c.Categories, missing, "categories", 1, MaxSchemaCategories); err != nil {
				var se *SchemaError
				errors.As(err, &se)
				se.Column, se.Index = c.Name, i+1
				return se
			}
			dim += len(c.Categories) + 1
		case ColumnIgnore:
			if c.Lo != 0 || c.Hi != 0 || c.Scale != "" || len(c.Categories) > 0 || c.Missing != "" {
				return fail("type", "an ignored column takes no lo, hi, scale, categories or missing")
			}
		case "":
			return fail("type", "missing, want %q, %q or %q", ColumnNumeric, ColumnCategorical, ColumnIgnore)
		default:
			return fail("type", "%q, want %q, %q or %q", clip(c.Type), ColumnNumeric, ColumnCategorical, ColumnIgnore)
		}
		if dim > MaxSchemaDim {
			return fail("", "the encoded width D exceeds the limit of %d", MaxSchemaDim)
		}
	}
	if dim == 0 {
		return &SchemaError{Field: "columns", Msg: "no numeric or categorical column: D would be 0"}
	}
	return nil
}

// validateNumeric checks a numeric column's bounds, scale and missing policy.
func (c *Column) validateNumeric(fail func(field, format string, args ...any) error) error {
	if len(c.Categories) > 0 {
		return fail("categories", "apply to categorical columns only; a numeric column takes lo and hi")
	}
	switch {
	case math.IsNaN(c.Lo) || math.IsInf(c.Lo, 0):
		return fail("lo", "%v, want a finite number", c.Lo)
	case math.IsNaN(c.Hi) || math.IsInf(c.Hi, 0):
		return fail("hi", "%v, want a finite number", c.Hi)
	case !(c.Lo < c.Hi):
		return fail("hi", "%v, want hi > lo = %v", c.Hi, c.Lo)
	case math.IsInf(c.Hi-c.Lo, 0):
		return fail("hi", "hi − lo = %v − (%v) overflows float64", c.Hi, c.Lo)
	}
	switch c.Scale {
	case "", ScaleLinear:
	case ScaleLog:
		if !(c.Lo > -1) {
			return fail("lo", "%v, want lo > −1 with the log scale ln(1 + v)", c.Lo)
		}
		if !(math.Log1p(c.Hi) > math.Log1p(c.Lo)) {
			return fail("hi", "ln(1 + hi) = ln(1 + lo) in float64 (lo = %v, hi = %v): the log scale cannot tell them apart", c.Lo, c.Hi)
		}
	default:
		return fail("scale", "%q, want %q (the default) or %q", clip(c.Scale), ScaleLinear, ScaleLog)
	}
	switch c.Missing {
	case "", MissingError, MissingLo, MissingHi:
	default:
		return fail("missing", "%q, want %q (the default), %q or %q for a numeric column", clip(c.Missing), MissingError, MissingLo, MissingHi)
	}
	return nil
}

// checkList checks a list of classes or categories: between least and most entries, each a
// valid name, distinct, not a missing value, not [OtherCategory] (for categories).
func checkList(list []string, missing map[string]bool, field string, least, most int) error {
	if len(list) < least || len(list) > most {
		return &SchemaError{Field: field, Msg: fmt.Sprintf("%d entries, want %d to %d", len(list), least, most)}
	}
	seen := make(map[string]bool, len(list))
	for k, v := range list {
		at := fmt.Sprintf("%s[%d]", field, k)
		if msg := checkName(v); msg != "" {
			return &SchemaError{Field: at, Msg: msg}
		}
		switch {
		case seen[v]:
			return &SchemaError{Field: at, Msg: fmt.Sprintf("%q listed twice", clip(v))}
		case missing[v]:
			return &SchemaError{Field: at, Msg: fmt.Sprintf("%q is also in missing_values", clip(v))}
		case field == "categories" && v == OtherCategory:
			return &SchemaError{Field: at, Msg: fmt.Sprintf("%q names the other bucket, which every categorical column has", OtherCategory)}
		}
		seen[v] = true
	}
	return nil
}
