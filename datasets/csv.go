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
	return e.ReadCSVUsers(r, name, "")
}

// LoadCSVUsers reads the CSV file path as [Encoder.ReadCSVUsers] does.
func LoadCSVUsers(path string, s *Schema, userColumn string) (*Dataset, error) {
	enc, err := s.Encoder()
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	}
	defer f.Close()
	return enc.ReadCSVUsers(f, path, userColumn)
}

// MaxUserID bounds the length of one user id of a CSV's user column, in bytes.
const MaxUserID = 256

// ReadCSVUsers is [Encoder.ReadCSV] with a user column (userColumn ≠ ""; "" reads no user
// column): the column, which must be in the header and must not be the label or a numeric or
// categorical column of the schema (an ignored one is fine), is removed before the record is encoded, and its values — opaque strings,
// trimmed, compared byte for byte — become the dataset's dense user ids (Dataset.User), in
// order of first appearance. An empty id, or one longer than MaxUserID bytes, is an error
// naming the row (counted from 0 among the records), its line and the column.
func (e *Encoder) ReadCSVUsers(r io.Reader, name, userColumn string) (*Dataset, error) {
	x, y, users, err := e.readTable(r, name, true, userColumn)
	if err != nil {
		return nil, err
	}
	ds := &Dataset{
		Name:         name,
		X:            x,
		Y:            y,
		N:            len(y),
		D:            e.dim,
		Classes:      e.Classes(),
		Shape:        []int{e.dim},
		FeatureNames: e.FeatureNames(),
	}
	if userColumn != "" {
		ds.User, ds.Users = users.ids, len(users.dense)
	}
	return ds, nil
}

// userIDs maps a user column's values to dense ids in order of first appearance.
type userIDs struct {
	dense map[string]int
	ids   []int
}

func (u *userIDs) add(id string) {
	k, ok := u.dense[id]
	if !ok {
		k = len(u.dense)
		u.dense[id] = k
	}
	u.ids = append(u.ids, k)
}

// userField finds the user column in header and refuses a name the schema also uses.
func (e *Encoder) userField(header []string, userColumn string) (int, error) {
	userColumn = strings.TrimSpace(userColumn)
	if userColumn == e.schema.Label.Column {
		return -1, fmt.Errorf("user column %q is the label column", clip(userColumn))
	}
	for _, c := range e.cols {
		if c.name == userColumn && c.typ != ColumnIgnore {
			return -1, fmt.Errorf("user column %q is a feature column of the schema: the user id must not be a feature", clip(userColumn))
		}
	}
	p := slices.Index(header, userColumn)
	if p < 0 {
		return -1, fmt.Errorf("header: no user column %q", clip(userColumn))
	}
	return p, nil
}

// ReadFeatures reads a table to predict on: the CSV rules and the header of [ReadCSV], but
// the label column may be absent, and its values, when it is there, are not read
// ([RowEncoder.Features]). It returns the n records' features, row-major (n·D values). The
// errors are ReadCSV's; those about one record also give its row, counted from 0 among the
// records (the header and blank lines are not rows).
func (e *Encoder) ReadFeatures(r io.Reader, name string) (x []float32, n int, err error) {
	x, _, _, err = e.readTable(r, name, false, "")
	if err != nil {
		return nil, 0, err
	}
	return x, len(x) / e.dim, nil
}

// readTable reads a CSV with a header through the encoder: with labelled, the label column
// is required and each record's label read (y); without, the label is not read and y is nil.
// With userColumn ≠ "", that column is taken out of every record and its ids returned.
func (e *Encoder) readTable(r io.Reader, name string, labelled bool, userColumn string) (x []float32, y []int, users userIDs, err error) {
	t, closeFn, err := openCSV(r, name)
	if err != nil {
		return nil, nil, users, err
	}
	defer closeFn()
	header, err := t.header()
	if err != nil {
		return nil, nil, users, err
	}
	uf := -1
	if userColumn != "" {
		if uf, err = e.userField(header, userColumn); err != nil {
			return nil, nil, users, &ParseError{File: name, Line: t.line, Offset: -1, Msg: err.Error()}
		}
		header = slices.Delete(slices.Clone(header), uf, uf+1)
		users.dense = make(map[string]int)
	}
	row, err := e.Bind(header)
	if err != nil {
		return nil, nil, users, &ParseError{File: name, Line: t.line, Offset: -1, Msg: err.Error()}
	}
	if labelled && !row.HasLabel() {
		return nil, nil, users, &ParseError{File: name, Line: t.line, Offset: -1, Msg: fmt.Sprintf("header: no label column %q (label.column of the schema)", clip(e.schema.Label.Column))}
	}
	var rest []string // a record without its user field
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
			return nil, nil, users, err
		}
		if uf >= 0 {
			if len(rec) != row.Fields()+1 {
				return nil, nil, users, t.fieldCount(len(rec), row.Fields()+1)
			}
			id := strings.TrimSpace(rec[uf])
			if id == "" || len(id) > MaxUserID {
				what := "empty"
				if id != "" {
					what = fmt.Sprintf("%d bytes long, want at most %d", len(id), MaxUserID)
				}
				return nil, nil, users, &ParseError{File: name, Line: t.fieldLine(uf), Offset: -1,
					Msg: fmt.Sprintf("row %d: user column %q (field %d): the user id is %s; every record needs its user", n, clip(userColumn), uf+1, what)}
			}
			users.add(id)
			rest = append(append(rest[:0], rec[:uf]...), rec[uf+1:]...)
			rec = rest
		}
		if len(rec) != row.Fields() {
			pe := t.fieldCount(len(rec), row.Fields())
			if w := where(n); w != "" {
				pe.Msg = w + ": " + pe.Msg
			}
			return nil, nil, users, pe
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
				f := fe.Field - 1
				if uf >= 0 && f >= uf {
					f++ // the field's position in the file, user field included
				}
				line = t.fieldLine(f)
			}
			return nil, nil, users, &ParseError{File: name, Line: line, Offset: -1, Msg: where(n), Err: err}
		}
		if labelled {
			y = append(y, label)
		}
	}
	if len(x) == 0 {
		return nil, nil, users, &ParseError{File: name, Line: t.line, Offset: -1, Msg: "no records after the header"}
	}
	return x, y, users, nil
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
