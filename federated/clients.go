package federated

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dpsgd/dpsgd"
	"github.com/dpsgd/dpsgd/internal/boundedio"
)

// MaxClients is the largest number of clients a clients file may hold.
const MaxClients = 1 << 20

// maxClientsFile is the largest clients file ParseClients reads (bytes).
const maxClientsFile = 64 << 20

// ErrClientsFile is matched (errors.Is) by every error about a malformed or invalid clients
// file.
var ErrClientsFile = errors.New("invalid clients file")

// ParseError reports a problem in a clients file: the file, the line (0 when the problem is
// not on one line, e.g. shares that do not sum to 1), the field and what is wrong, including
// the valid range. It matches ErrClientsFile under errors.Is.
type ParseError struct {
	File  string
	Line  int
	Field string
	Msg   string
}

// Error returns "federated: file:line: field: msg".
func (e *ParseError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc += ":" + strconv.Itoa(e.Line)
	}
	if e.Field != "" {
		return "federated: " + loc + ": " + e.Field + ": " + e.Msg
	}
	return "federated: " + loc + ": " + e.Msg
}

// Is reports whether target is ErrClientsFile.
func (e *ParseError) Is(target error) bool { return target == ErrClientsFile }

// clientColumns are the fields a clients file may hold.
var clientColumns = []string{"id", "epsilon", "delta", "delta_prime", "delta_tail", "sample_rate", "share", "sensitivity"}

// ParseClients reads a clients file, CSV or JSON (detected from the first non-blank
// character: '[' or '{' is JSON), and checks every value: the file's form here, the values
// by the front door (dpsgd.Client.Resolve, dpsgd.CheckShares), whose error is reported at the
// client's line.
//
// CSV: a header line naming the columns (any order; id and epsilon required; delta,
// delta_prime, delta_tail, sample_rate, share, sensitivity optional), then one client per line.
// Blank lines and lines starting with # are skipped; an empty cell means "not given".
//
//	id,epsilon,delta,sample_rate,share
//	alice,1,1e-5,0.1,0.25
//
// JSON: an array of objects with the same keys, or an object {"clients": [...]}.
//
// Rules: ids are non-empty, unique, printable and without commas or quotes; ε > 0 and finite;
// every δ in (0, 1), and at least δ or both δ' and δ‴ given (when all three are given they
// must satisfy δ = δ' + δ‴ − δ'·δ‴ to 1e-9 relative); sample_rate in (0, 1]; share in
// (0, 1]; sensitivity ≥ 1. sample_rate and share are given for every client or for none, and
// given shares sum to 1 within dpsgd.ShareTolerance. On return every client has Delta, DeltaPrime
// and DeltaTail set. Errors are *ParseError naming the line, the field and the valid range;
// the function never panics on any input.
func ParseClients(r io.Reader, name string) ([]dpsgd.Client, error) {
	if name == "" {
		name = "clients"
	}
	data, err := boundedio.ReadAll(r, maxClientsFile, "", nil)
	if err != nil {
		return nil, &ParseError{File: name, Msg: err.Error()}
	}
	if !utf8.Valid(data) {
		return nil, &ParseError{File: name, Line: badUTF8Line(data), Msg: "not valid UTF-8 text"}
	}
	trimmed := bytes.TrimLeftFunc(data, unicode.IsSpace)
	trimmed = bytes.TrimPrefix(trimmed, []byte("\ufeff"))
	var rows []clientRow
	if len(trimmed) > 0 && (trimmed[0] == '[' || trimmed[0] == '{') {
		rows, err = parseClientsJSON(data, name)
	} else {
		rows, err = parseClientsCSV(data, name)
	}
	if err != nil {
		return nil, err
	}
	return checkClients(rows, name)
}

// clientRow is one parsed client before the checks: values and which were given.
type clientRow struct {
	line  int
	id    string
	vals  map[string]float64
	given map[string]bool
}

func badUTF8Line(data []byte) int {
	line := 1
	for len(data) > 0 {
		r, size := utf8.DecodeRune(data)
		if r == utf8.RuneError && size <= 1 {
			return line
		}
		if r == '\n' {
			line++
		}
		data = data[size:]
	}
	return line
}

func parseClientsCSV(data []byte, name string) ([]clientRow, error) {
	cr := csv.NewReader(bytes.NewReader(data))
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if err == io.EOF {
		return nil, &ParseError{File: name, Msg: "empty file: want a header line (id,epsilon,...) and one line per client"}
	}
	if err != nil {
		return nil, csvError(name, err)
	}
	hline, _ := cr.FieldPos(0)
	cols := make([]string, len(header))
	seen := map[string]bool{}
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		if !isColumn(h) {
			return nil, &ParseError{File: name, Line: hline, Field: fmt.Sprintf("column %d", i+1), Msg: fmt.Sprintf("unknown column %q: want one of %s", clip(h), strings.Join(clientColumns, ", "))}
		}
		if seen[h] {
			return nil, &ParseError{File: name, Line: hline, Field: h, Msg: "column given twice"}
		}
		seen[h] = true
		cols[i] = h
	}
	for _, req := range []string{"id", "epsilon"} {
		if !seen[req] {
			return nil, &ParseError{File: name, Line: hline, Field: req, Msg: "required column missing from the header"}
		}
	}
	var rows []clientRow
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, csvError(name, err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue // a blank line inside the file
		}
		if len(rec) != len(cols) {
			return nil, &ParseError{File: name, Line: line, Msg: fmt.Sprintf("%d fields, want %d (the header's columns)", len(rec), len(cols))}
		}
		if len(rows) >= MaxClients {
			return nil, &ParseError{File: name, Line: line, Msg: fmt.Sprintf("more than %d clients", MaxClients)}
		}
		row := clientRow{line: line, vals: map[string]float64{}, given: map[string]bool{}}
		for i, cell := range rec {
			cell = strings.TrimSpace(cell)
			if cols[i] == "id" {
				row.id = cell
				row.given["id"] = cell != ""
				continue
			}
			if cell == "" {
				continue
			}
			v, err := strconv.ParseFloat(cell, 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, &ParseError{File: name, Line: line, Field: cols[i], Msg: fmt.Sprintf("%q is not a finite number (%s)", clip(cell), columnRange(cols[i]))}
			}
			row.vals[cols[i]] = v
			row.given[cols[i]] = true
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		return nil, &ParseError{File: name, Line: hline, Msg: "no clients after the header: want one line per client"}
	}
	return rows, nil
}

func csvError(name string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &ParseError{File: name, Line: pe.Line, Msg: "malformed CSV: " + pe.Err.Error()}
	}
	return &ParseError{File: name, Msg: "malformed CSV: " + err.Error()}
}

func isColumn(s string) bool {
	for _, c := range clientColumns {
		if s == c {
			return true
		}
	}
	return false
}

// clip shortens a value quoted in an error message.
func clip(s string) string {
	if len(s) <= 40 {
		return s
	}
	for i := 40; i > 0; i-- {
		if utf8.RuneStart(s[i]) {
			return s[:i] + "…"
		}
	}
	return ""
}

func columnRange(col string) string {
	switch col {
	case "epsilon":
		return "want a finite value > 0"
	case "delta", "delta_prime", "delta_tail":
		return "want a value in (0, 1)"
	case "sample_rate", "share":
		return "want a value in (0, 1]"
	case "sensitivity":
		return "want a finite value ≥ 1"
	}
	return "want a number"
}

// lineAt is the 1-based line of byte offset off in data.
func lineAt(data []byte, off int64) int {
	if off < 0 {
		off = 0
	}
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	return 1 + bytes.Count(data[:off], []byte{'\n'})
}

func parseClientsJSON(data []byte, name string) ([]clientRow, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	jsonErr := func(err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return &ParseError{File: name, Line: lineAt(data, se.Offset), Msg: "malformed JSON: " + se.Error()}
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return &ParseError{File: name, Line: lineAt(data, int64(len(data))), Msg: "malformed JSON: unexpected end of input"}
		}
		return &ParseError{File: name, Line: lineAt(data, dec.InputOffset()), Msg: "malformed JSON: " + err.Error()}
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, jsonErr(err)
	}
	wrapped := false
	if d, ok := tok.(json.Delim); ok && d == '{' {
		// {"clients": [...]}: the only key allowed.
		wrapped = true
		key, err := dec.Token()
		if err != nil {
			return nil, jsonErr(err)
		}
		if k, ok := key.(string); !ok || k != "clients" {
			return nil, &ParseError{File: name, Line: lineAt(data, dec.InputOffset()), Msg: fmt.Sprintf("top-level key %v: want an array of clients or {\"clients\": [...]}", key)}
		}
		if tok, err = dec.Token(); err != nil {
			return nil, jsonErr(err)
		}
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, &ParseError{File: name, Line: lineAt(data, dec.InputOffset()), Msg: "want an array of client objects"}
	}
	var rows []clientRow
	for dec.More() {
		start := dec.InputOffset()
		// The element starts after any whitespace and the separating comma.
		for start < int64(len(data)) && (data[start] == ',' || data[start] == ' ' || data[start] == '\t' || data[start] == '\n' || data[start] == '\r') {
			start++
		}
		line := lineAt(data, start)
		if len(rows) >= MaxClients {
			return nil, &ParseError{File: name, Line: line, Msg: fmt.Sprintf("more than %d clients", MaxClients)}
		}
		var obj map[string]json.RawMessage
		if err := dec.Decode(&obj); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return nil, &ParseError{File: name, Line: line, Msg: fmt.Sprintf("client %d: want a JSON object with keys %s", len(rows)+1, strings.Join(clientColumns, ", "))}
			}
			return nil, jsonErr(err)
		}
		if obj == nil {
			return nil, &ParseError{File: name, Line: line, Msg: fmt.Sprintf("client %d: null, want an object", len(rows)+1)}
		}
		row := clientRow{line: line, vals: map[string]float64{}, given: map[string]bool{}}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			raw := obj[k]
			if !isColumn(k) {
				return nil, &ParseError{File: name, Line: line, Field: clip(k), Msg: fmt.Sprintf("unknown key: want one of %s", strings.Join(clientColumns, ", "))}
			}
			if k == "id" {
				var s string
				if err := json.Unmarshal(raw, &s); err != nil {
					// A numeric id is accepted as its text.
					var n json.Number
					if err2 := json.Unmarshal(raw, &n); err2 != nil {
						return nil, &ParseError{File: name, Line: line, Field: "id", Msg: "want a string"}
					}
					s = n.String()
				}
				row.id = strings.TrimSpace(s)
				row.given["id"] = row.id != ""
				continue
			}
			if string(raw) == "null" {
				continue
			}
			var n json.Number
			if len(raw) > 0 && raw[0] == '"' {
				return nil, &ParseError{File: name, Line: line, Field: k, Msg: fmt.Sprintf("%s is a string, not a number (%s)", clip(string(raw)), columnRange(k))}
			}
			if err := json.Unmarshal(raw, &n); err != nil {
				return nil, &ParseError{File: name, Line: line, Field: k, Msg: fmt.Sprintf("%s is not a number (%s)", clip(string(raw)), columnRange(k))}
			}
			v, err := n.Float64()
			if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
				return nil, &ParseError{File: name, Line: line, Field: k, Msg: fmt.Sprintf("%s is not a finite number (%s)", clip(n.String()), columnRange(k))}
			}
			row.vals[k] = v
			row.given[k] = true
		}
		rows = append(rows, row)
	}
	if _, err := dec.Token(); err != nil { // the closing ]
		return nil, jsonErr(err)
	}
	if wrapped {
		tok, err := dec.Token()
		if err != nil {
			return nil, jsonErr(err)
		}
		if d, ok := tok.(json.Delim); !ok || d != '}' {
			return nil, &ParseError{File: name, Line: lineAt(data, dec.InputOffset()), Msg: "want only the key \"clients\" at the top level"}
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &ParseError{File: name, Line: lineAt(data, dec.InputOffset()), Msg: "trailing data after the clients"}
	}
	if len(rows) == 0 {
		return nil, &ParseError{File: name, Line: 1, Msg: "no clients: want at least one"}
	}
	return rows, nil
}

// checkClients checks the rows' form (ids, missing values, a value given as 0) and has the
// front door check the values and resolve the δ split.
func checkClients(rows []clientRow, name string) ([]dpsgd.Client, error) {
	out := make([]dpsgd.Client, 0, len(rows))
	ids := map[string]int{}
	for _, r := range rows {
		perr := func(field, format string, args ...any) error {
			return &ParseError{File: name, Line: r.line, Field: field, Msg: fmt.Sprintf(format, args...)}
		}
		if !r.given["id"] {
			return nil, perr("id", "missing or empty: want a non-empty name")
		}
		if err := checkID(r.id); err != nil {
			return nil, perr("id", "%q: %v", clip(r.id), err)
		}
		if prev, dup := ids[r.id]; dup {
			return nil, perr("id", "%q given twice (first on line %d): want unique ids", clip(r.id), prev)
		}
		ids[r.id] = r.line
		if !r.given["epsilon"] {
			return nil, perr("epsilon", "missing: want a finite value > 0")
		}
		// In a Client, 0 means "not given": a value given as 0 is out of every column's range.
		for _, col := range clientColumns[1:] {
			if r.given[col] && r.vals[col] == 0 {
				return nil, perr(col, "0: %s", columnRange(col))
			}
		}
		c := dpsgd.Client{
			ID: r.id, Epsilon: r.vals["epsilon"], Delta: r.vals["delta"], DeltaPrime: r.vals["delta_prime"],
			DeltaTail: r.vals["delta_tail"], SampleRate: r.vals["sample_rate"], Share: r.vals["share"],
			Sensitivity: r.vals["sensitivity"],
		}
		c, err := c.Resolve()
		if err != nil {
			return nil, fieldErr(name, r.line, err)
		}
		out = append(out, c)
	}
	for _, col := range []string{"sample_rate", "share"} {
		n := 0
		var missing clientRow
		for _, r := range rows {
			if r.given[col] {
				n++
			} else {
				missing = r
			}
		}
		if n > 0 && n < len(rows) {
			return nil, &ParseError{File: name, Line: missing.line, Field: col, Msg: fmt.Sprintf("missing for client %q but given for %d others: give it for every client or for none", clip(missing.id), n)}
		}
	}
	if err := dpsgd.CheckShares(out); err != nil {
		return nil, fieldErr(name, 0, err)
	}
	return out, nil
}

// fieldErr is the ParseError at line of the front door's error about a client's field (named
// by its column).
func fieldErr(name string, line int, err error) error {
	var fe *dpsgd.FieldError
	if errors.As(err, &fe) {
		return &ParseError{File: name, Line: line, Field: fe.Field, Msg: fe.Reason}
	}
	return &ParseError{File: name, Line: line, Msg: err.Error()}
}

// checkID accepts printable ids without commas, quotes or control characters (they appear in
// CSV and JSON reports).
func checkID(id string) error {
	if len(id) > 256 {
		return fmt.Errorf("%d bytes: want at most 256", len(id))
	}
	for _, r := range id {
		if !unicode.IsPrint(r) || r == ',' || r == '"' || r == '\\' {
			return fmt.Errorf("character %q: want printable characters other than , \" and \\", r)
		}
	}
	return nil
}
