package datasets

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// DraftWarning is the Warning of every drafted schema.
const DraftWarning = "DRAFTED FROM THE DATA, NOT PRIVATE: the bounds (lo, hi), the categories and the label " +
	"classes below are statistics of the file they were drafted from, and training with them " +
	"leaks that file outside the privacy guarantee. Replace each with a value fixed without " +
	"looking at the records (a codebook, a form's field format, a physical or legal limit), " +
	"then delete this warning: dpsgd train refuses a schema that still has it (docs/datasets.md)."

// DefaultDraftCategories is the default [DraftOptions.MaxCategories].
const DefaultDraftCategories = 64

// draftTracked caps the distinct values counted per column while drafting: beyond it, new
// values are not counted (the most frequent ones of a column with more are approximate).
const draftTracked = 1 << 16

// DraftOptions configures [DraftSchema].
type DraftOptions struct {
	Label string // the label column's name (required)
	// MaxCategories caps the categories proposed for a column: its most frequent values (ties
	// in string order); the rest go to the other bucket. 0 means DefaultDraftCategories.
	MaxCategories int
}

// draftColumn gathers what drafting needs of one column.
type draftColumn struct {
	numeric    bool // every present value so far is a finite plain decimal
	lo, hi     float64
	present    int
	hasMissing bool
	counts     map[string]int
}

// DraftSchema reads a CSV (header required, as [ReadCSV] reads it) and proposes a schema for
// it: the label column opt.Label with every value it holds as a class (in numeric order when
// they are all numbers, else in string order); a numeric column, bounded by the observed
// minimum and maximum, for every column whose present values are all finite plain decimals
// (with missing "lo" when some are empty); a categorical column with the opt.MaxCategories
// most frequent values for every other column; an ignored column where every value is empty.
//
// Every value it proposes is a statistic of the data, so the result carries [DraftWarning]:
// it is a starting point to be reviewed, with each bound, category and class replaced by a
// public value, never a schema to train on as it is (docs/datasets.md). Reading the same file
// with the drafted schema succeeds.
func DraftSchema(r io.Reader, name string, opt DraftOptions) (*Schema, error) {
	maxCat := opt.MaxCategories
	if maxCat == 0 {
		maxCat = DefaultDraftCategories
	}
	if maxCat < 1 || maxCat > MaxSchemaCategories {
		return nil, fmt.Errorf("datasets: DraftSchema: MaxCategories = %d, want 1 to %d", maxCat, MaxSchemaCategories)
	}
	t, closeFn, err := openCSV(r, name)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	header, err := t.header()
	if err != nil {
		return nil, err
	}
	perr := func(format string, args ...any) error {
		return &ParseError{File: name, Line: t.line, Offset: -1, Msg: fmt.Sprintf(format, args...)}
	}
	if len(header) > MaxSchemaColumns {
		return nil, perr("header: %d columns, want at most %d", len(header), MaxSchemaColumns)
	}
	label := -1
	seen := map[string]int{}
	for p, h := range header {
		if msg := checkName(h); msg != "" {
			return nil, perr("header: field %d: name %s", p+1, msg)
		}
		if q, dup := seen[h]; dup {
			return nil, perr("header: columns %d and %d are both named %q", q+1, p+1, clip(h))
		}
		seen[h] = p
		if h == opt.Label {
			label = p
		}
	}
	if label < 0 {
		return nil, perr("header: no column named %q (the label column); the columns are %s", clip(opt.Label), listForError(header))
	}
	cols := make([]draftColumn, len(header))
	for p := range cols {
		cols[p] = draftColumn{numeric: true, lo: math.Inf(1), hi: math.Inf(-1), counts: map[string]int{}}
	}
	records := 0
	for {
		rec, err := t.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(rec) != len(header) {
			return nil, t.fieldCount(len(rec), len(header))
		}
		records++
		for p, raw := range rec {
			v := strings.TrimSpace(raw)
			c := &cols[p]
			if p == label {
				if msg := checkName(v); msg != "" {
					return nil, &ParseError{File: name, Line: t.fieldLine(p), Offset: -1, Msg: fmt.Sprintf("field %d (%q): label %s: every record needs a label", p+1, clip(header[p]), msg)}
				}
				if _, ok := c.counts[v]; !ok && len(c.counts) == MaxSchemaClasses {
					return nil, &ParseError{File: name, Line: t.fieldLine(p), Offset: -1, Msg: fmt.Sprintf("field %d (%q): more than %d distinct labels: not a classification label", p+1, clip(header[p]), MaxSchemaClasses)}
				}
				c.counts[v]++
				continue
			}
			if v == "" {
				c.hasMissing = true
				continue
			}
			c.present++
			if c.numeric {
				if x, nerr := parseDecimal(v); nerr == nil {
					c.lo, c.hi = min(c.lo, x), max(c.hi, x)
				} else {
					c.numeric = false
				}
			}
			if _, ok := c.counts[v]; ok || len(c.counts) < draftTracked {
				c.counts[v]++
			}
		}
	}
	if records == 0 {
		return nil, perr("no records after the header")
	}
	classes := draftClasses(cols[label].counts)
	if len(classes) < 2 {
		return nil, perr("label column %q holds the single value %q: want at least 2 classes", clip(opt.Label), clip(classes[0]))
	}
	s := &Schema{Warning: DraftWarning, Label: Label{Column: opt.Label, Classes: classes}}
	for p, h := range header {
		if p == label {
			continue
		}
		s.Columns = append(s.Columns, cols[p].propose(h, maxCat))
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("datasets: %s: the drafted schema is invalid: %w", name, err)
	}
	return s, nil
}

// DraftCSVSchema drafts a schema for the CSV file path ([DraftSchema]).
func DraftCSVSchema(path string, opt DraftOptions) (*Schema, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	}
	defer f.Close()
	return DraftSchema(f, path, opt)
}

// propose returns the column drafted from what was seen.
func (c *draftColumn) propose(name string, maxCat int) Column {
	switch {
	case c.present == 0:
		return Column{Name: name, Type: ColumnIgnore}
	case c.numeric:
		col := Column{Name: name, Type: ColumnNumeric, Lo: c.lo, Hi: c.hi}
		if col.Lo == col.Hi { // a constant column: widen to a valid range holding it
			switch {
			case col.Lo > 0:
				col.Lo = 0
			case col.Lo < 0:
				col.Hi = 0
			default:
				col.Hi = 1
			}
		}
		if c.hasMissing {
			col.Missing = MissingLo
		}
		return col
	}
	type kv struct {
		v string
		n int
	}
	var vals []kv
	for v, n := range c.counts {
		if checkName(v) == "" && v != OtherCategory {
			vals = append(vals, kv{v, n})
		}
	}
	slices.SortFunc(vals, func(a, b kv) int {
		return cmp.Or(cmp.Compare(b.n, a.n), strings.Compare(a.v, b.v))
	})
	col := Column{Name: name, Type: ColumnCategorical}
	for _, e := range vals[:min(len(vals), maxCat)] {
		col.Categories = append(col.Categories, e.v)
	}
	if len(col.Categories) == 0 { // only values a schema cannot list: nothing to encode
		return Column{Name: name, Type: ColumnIgnore}
	}
	return col
}

// draftClasses lists the label values: in numeric order when all are plain decimals, else in
// string order.
func draftClasses(counts map[string]int) []string {
	classes := make([]string, 0, len(counts))
	numeric := true
	for v := range counts {
		classes = append(classes, v)
		if _, nerr := parseDecimal(v); nerr != nil {
			numeric = false
		}
	}
	slices.SortFunc(classes, func(a, b string) int {
		if numeric {
			x, _ := strconv.ParseFloat(a, 64)
			y, _ := strconv.ParseFloat(b, 64)
			if c := cmp.Compare(x, y); c != 0 {
				return c
			}
		}
		return strings.Compare(a, b)
	})
	return classes
}
