package datasets

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// csvTable reads a CSV the way every reader here does: encoding/csv (RFC 4180: comma
// separator, quoted fields with "" for a quote and line breaks inside quotes, LF or CRLF,
// blank lines skipped), a UTF-8 byte order mark before the header dropped, gzip detected by
// its magic bytes, and every error a *ParseError with the file and line.
type csvTable struct {
	cr   *csv.Reader
	name string
	line int // line of the last record read
}

// openCSV starts reading a CSV from r (gzip-compressed or not); close releases the gzip
// reader.
func openCSV(r io.Reader, name string) (t *csvTable, closeFn func(), err error) {
	src, closeFn, err := maybeGunzip(r, name)
	if err != nil {
		return nil, nil, err
	}
	cr := csv.NewReader(src)
	cr.FieldsPerRecord = -1 // checked against the header here, with a clearer message
	cr.ReuseRecord = true
	return &csvTable{cr: cr, name: name}, closeFn, nil
}

// header reads the first record: the column names, trimmed, with a byte order mark dropped.
func (t *csvTable) header() ([]string, error) {
	rec, err := t.next()
	if err == io.EOF {
		return nil, &ParseError{File: t.name, Line: 1, Offset: -1, Msg: "empty file: want a header line naming the columns"}
	}
	if err != nil {
		return nil, err
	}
	h := make([]string, len(rec))
	for i, v := range rec {
		if i == 0 {
			v = strings.TrimPrefix(v, "\ufeff")
		}
		h[i] = strings.TrimSpace(v)
	}
	return h, nil
}

// next reads the next record (valid until the next call), or io.EOF at the end.
func (t *csvTable) next() ([]string, error) {
	rec, err := t.cr.Read()
	if err == io.EOF {
		return nil, io.EOF
	}
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return nil, &ParseError{File: t.name, Line: pe.Line, Offset: -1, Msg: fmt.Sprintf("byte %d of the line", pe.Column), Err: pe.Err}
		}
		return nil, &ParseError{File: t.name, Line: t.line + 1, Offset: -1, Msg: "read", Err: err}
	}
	t.line, _ = t.cr.FieldPos(0)
	return rec, nil
}

// fieldLine returns the line on which field i of the last record starts.
func (t *csvTable) fieldLine(i int) int {
	line, _ := t.cr.FieldPos(i)
	return line
}

// fieldCount is the error of a record whose field count differs from the header's.
func (t *csvTable) fieldCount(got, want int) *ParseError {
	return &ParseError{File: t.name, Line: t.line, Offset: -1, Msg: fmt.Sprintf("%d fields, want %d as in the header", got, want)}
}

// ReadCSV reads a labelled table from r with schema s; name labels the errors and the
// dataset. The first line must be a header naming the columns; the columns are matched with
// the schema by name, in any order (see [Encoder.Bind]). Each record is encoded from its own
// fields only ([RowEncoder.Encode]): D, the feature order and the classes come from the
// schema, never from the data.
//
// Bad input rejects the whole file with a *ParseError naming the file, the line and the field
// (its position and column name), and nothing is returned: malformed CSV (a bare quote, an
// unterminated quoted field), a record whose field count differs from the header's, a label
// the schema does not list, a missing value under the policy "error", and a numeric value
// that is not a finite plain decimal (so "NaN", "Inf", "0x1p4", "1_000" and "1e400" are
// refused). A finite value outside its column's bounds is clamped; a categorical value the
// schema does not list goes to the column's other bucket.
func ReadCSV(r io.Reader, name string, s *Schema) (*Dataset, error) {
	enc, err := s.Encoder()
	if err != nil {
		return nil, err
	}
	return enc.ReadCSV(r, name)
}

// LoadCSV reads the CSV file path ([ReadCSV]); a gzip-compressed file is detected by its
// content.
func LoadCSV(path string, s *Schema) (*Dataset, error) {
	enc, err := s.Encoder()
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	}
	defer f.Close()
	return enc.ReadCSV(f, path)
}

// ReadCSV is [ReadCSV] with the encoder's schema.
func (e *Encoder) ReadCSV(r io.Reader, name string) (*Dataset, error) {
	x, y, err := e.readTable(r, name, true)
	if err != nil {
		return nil, err
	}
	return &Dataset{
		Name:         name,
		X:            x,
		Y:            y,
		N:            len(y),
		D:            e.dim,
		Classes:      e.Classes(),
		Shape:        []int{e.dim},
		FeatureNames: e.FeatureNames(),
	}, nil
}

// ReadFeatures reads a table to predict on: the CSV rules and the header of [ReadCSV], but
// the label column may be absent, and its values, when it is there, are not read
// ([RowEncoder.Features]). It returns the n records' features, row-major (n·D values). The
// errors are ReadCSV's; those about one record also give its row, counted from 0 among the
// records (the header and blank lines are not rows).
func (e *Encoder) ReadFeatures(r io.Reader, name string) (x []float32, n int, err error) {
	x, _, err = e.readTable(r, name, false)
	if err != nil {
		return nil, 0, err
	}
	return x, len(x) / e.dim, nil
}

// readTable reads a CSV with a header through the encoder: with labelled, the label column
// is required and each record's label read (y); without, the label is not read and y is nil.
func (e *Encoder) readTable(r io.Reader, name string, labelled bool) (x []float32, y []int, err error) {
	t, closeFn, err := openCSV(r, name)
	if err != nil {
		return nil, nil, err
	}
	defer closeFn()
	header, err := t.header()
	if err != nil {
		return nil, nil, err
	}
	row, err := e.Bind(header)
	if err != nil {
		return nil, nil, &ParseError{File: name, Line: t.line, Offset: -1, Msg: err.Error()}
	}
	if labelled && !row.HasLabel() {
		return nil, nil, &ParseError{File: name, Line: t.line, Offset: -1, Msg: fmt.Sprintf("header: no label column %q (label.column of the schema)", clip(e.schema.Label.Column))}
	}
	d := e.dim
	// where names a bad record: its row too when predicting, where rows are what the output
	// counts.
	where := func(n int) string {
		if labelled {
			return ""
		}
		return fmt.Sprintf("row %d", n)
	}
	for n := 0; ; n++ {
		rec, err := t.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		if len(rec) != row.Fields() {
			pe := t.fieldCount(len(rec), row.Fields())
			if w := where(n); w != "" {
				pe.Msg = w + ": " + pe.Msg
			}
			return nil, nil, pe
		}
		x = slices.Grow(x, d)[:(n+1)*d]
		label := -1
		if labelled {
			label, err = row.Encode(x[n*d:], rec)
		} else {
			err = row.Features(x[n*d:], rec)
		}
		if err != nil {
			var fe *FieldError
			line := t.line
			if errors.As(err, &fe) {
				line = t.fieldLine(fe.Field - 1)
			}
			return nil, nil, &ParseError{File: name, Line: line, Offset: -1, Msg: where(n), Err: err}
		}
		if labelled {
			y = append(y, label)
		}
	}
	if len(x) == 0 {
		return nil, nil, &ParseError{File: name, Line: t.line, Offset: -1, Msg: "no records after the header"}
	}
	return x, y, nil
}

// CSVHeader returns the column names of the CSV file path (its first line, trimmed; gzip
// detected by its content). It reads no record.
func CSVHeader(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	}
	defer f.Close()
	t, closeFn, err := openCSV(f, path)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	return t.header()
}
