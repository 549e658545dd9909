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
func (t *csvTable) fieldCount(got, want int) error {
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
	t, closeFn, err := openCSV(r, name)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	header, err := t.header()
	if err != nil {
		return nil, err
	}
	row, err := e.Bind(header)
	if err != nil {
		return nil, &ParseError{File: name, Line: t.line, Offset: -1, Msg: err.Error()}
	}
	if !row.HasLabel() {
		return nil, &ParseError{File: name, Line: t.line, Offset: -1, Msg: fmt.Sprintf("header: no label column %q (label.column of the schema)", clip(e.schema.Label.Column))}
	}
	d := e.dim
	var x []float32
	var y []int
	for {
		rec, err := t.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(rec) != row.Fields() {
			return nil, t.fieldCount(len(rec), row.Fields())
		}
		n := len(y)
		x = slices.Grow(x, d)[:(n+1)*d]
		label, err := row.Encode(x[n*d:], rec)
		if err != nil {
			var fe *FieldError
			line := t.line
			if errors.As(err, &fe) {
				line = t.fieldLine(fe.Field - 1)
			}
			return nil, &ParseError{File: name, Line: line, Offset: -1, Err: err}
		}
		y = append(y, label)
	}
	if len(y) == 0 {
		return nil, &ParseError{File: name, Line: t.line, Offset: -1, Msg: "no records after the header"}
	}
	return &Dataset{
		Name:         name,
		X:            x,
		Y:            y,
		N:            len(y),
		D:            d,
		Classes:      e.Classes(),
		Shape:        []int{d},
		FeatureNames: e.FeatureNames(),
	}, nil
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
