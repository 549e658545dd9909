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
)

// ClientSpec is one client's privacy request and participation parameters, as given by a
// clients file or by flags.
//
// The total δᵢ of the guarantee is δᵢ = δ'ᵢ + δ‴ᵢ − δ'ᵢ·δ‴ᵢ (the personalized-DP FL appendix, Theorem 1):
// δ'ᵢ is the Gaussian mechanism's δ and δ‴ᵢ the probability that the client's selection
// count exceeds Lemma 1's bound Rᵢ. Any two of the three determine the third; a clients file
// may give δᵢ alone, which is split evenly (see [SplitDelta]).
type ClientSpec struct {
	ID         string  `json:"id"`
	Epsilon    float64 `json:"epsilon"`     // εᵢ > 0
	Delta      float64 `json:"delta"`       // δᵢ ∈ (0, 1), the total
	DeltaPrime float64 `json:"delta_prime"` // δ'ᵢ ∈ (0, 1)
	DeltaTail  float64 `json:"delta_tail"`  // δ‴ᵢ ∈ (0, 1)
	// SampleRate is qᵢ ∈ (0, 1], the probability that one draw selects the client; 0 means
	// not given (the federation then uses 1/N for every client).
	SampleRate float64 `json:"sample_rate,omitempty"`
	// Share is pᵢ ∈ (0, 1], the client's weight in the global objective; 0 means not given
	// (the federation then uses the client's fraction of the training examples). Given
	// shares must sum to 1 within ShareTolerance.
	Share float64 `json:"share,omitempty"`
	// Sensitivity is the sensitivity factor sᵢ ≥ 1 of the client's updates (the
	// personalized-DP FL appendix); 0 means 1.
	Sensitivity float64 `json:"sensitivity,omitempty"`
}

// ShareTolerance is how far from 1 the sum of the data shares (and, for categorical client
// sampling, of the sample rates) may be.
const ShareTolerance = 1e-6

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

// SplitDelta splits a total δ ∈ (0, 1) evenly into δ' = δ‴ = 1 − √(1 − δ) (computed as
// δ/(1 + √(1 − δ)), without cancellation), the split for which δ' + δ‴ − δ'·δ‴ = δ
// exactly (the appendix's Theorem 1 δ composition).
func SplitDelta(delta float64) (deltaPrime, deltaTail float64) {
	x := delta / (1 + math.Sqrt(1-delta))
	return x, x
}

// DeltaTotal is δ' + δ‴ − δ'·δ‴ (the personalized-DP FL appendix, Theorem 1).
func DeltaTotal(deltaPrime, deltaTail float64) float64 {
	return deltaPrime + deltaTail - deltaPrime*deltaTail
}

// clientColumns are the fields a clients file may hold.
var clientColumns = []string{"id", "epsilon", "delta", "delta_prime", "delta_tail", "sample_rate", "share", "sensitivity"}

// ParseClients reads a clients file, CSV or JSON (detected from the first non-blank
// character: '[' or '{' is JSON), and checks every value.
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
// given shares sum to 1 within ShareTolerance. On return every client has Delta, DeltaPrime
// and DeltaTail set. Errors are *ParseError naming the line, the field and the valid range;
// the function never panics on any input.
func ParseClients(r io.Reader, name string) ([]ClientSpec, error) {
	if name == "" {
		name = "clients"
	}
	data, err := io.ReadAll(io.LimitReader(r, maxClientsFile+1))
	if err != nil {
		return nil, &ParseError{File: name, Msg: "reading: " + err.Error()}
	}
	if len(data) > maxClientsFile {
		return nil, &ParseError{File: name, Msg: fmt.Sprintf("file larger than %d bytes", maxClientsFile)}
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

// checkClients validates the rows and resolves the δ split.
func checkClients(rows []clientRow, name string) ([]ClientSpec, error) {
	out := make([]ClientSpec, 0, len(rows))
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
		c := ClientSpec{ID: r.id}
		if !r.given["epsilon"] {
			return nil, perr("epsilon", "missing: want a finite value > 0")
		}
		c.Epsilon = r.vals["epsilon"]
		if !(c.Epsilon > 0) {
			return nil, perr("epsilon", "%v: want a finite value > 0", c.Epsilon)
		}
		for _, k := range []string{"delta", "delta_prime", "delta_tail"} {
			if v, ok := r.vals[k]; ok && !(v > 0 && v < 1) {
				return nil, perr(k, "%v: want a value in (0, 1)", v)
			}
		}
		d, dp, dt := r.vals["delta"], r.vals["delta_prime"], r.vals["delta_tail"]
		hd, hp, ht := r.given["delta"], r.given["delta_prime"], r.given["delta_tail"]
		switch {
		case hp && ht:
			total := DeltaTotal(dp, dt)
			if hd && math.Abs(total-d) > 1e-9*d {
				return nil, perr("delta", "%v, but delta_prime %v and delta_tail %v give δ' + δ‴ − δ'δ‴ = %v: give two of the three, or consistent values", d, dp, dt, total)
			}
			d = total
		case hd && hp:
			if dp >= d {
				return nil, perr("delta_prime", "%v: want a value in (0, delta = %v)", dp, d)
			}
			dt = (d - dp) / (1 - dp)
		case hd && ht:
			if dt >= d {
				return nil, perr("delta_tail", "%v: want a value in (0, delta = %v)", dt, d)
			}
			dp = (d - dt) / (1 - dt)
		case hd:
			dp, dt = SplitDelta(d)
		default:
			return nil, perr("delta", "missing: want delta in (0, 1), or both delta_prime and delta_tail")
		}
		if !(dp > 0 && dp < 1 && dt > 0 && dt < 1) {
			return nil, perr("delta", "%v splits into delta_prime %v and delta_tail %v: want both in (0, 1)", d, dp, dt)
		}
		c.Delta, c.DeltaPrime, c.DeltaTail = d, dp, dt
		if v, ok := r.vals["sample_rate"]; ok {
			if !(v > 0 && v <= 1) {
				return nil, perr("sample_rate", "%v: want a value in (0, 1]", v)
			}
			c.SampleRate = v
		}
		if v, ok := r.vals["share"]; ok {
			if !(v > 0 && v <= 1) {
				return nil, perr("share", "%v: want a value in (0, 1]", v)
			}
			c.Share = v
		}
		if v, ok := r.vals["sensitivity"]; ok {
			if !(v >= 1) {
				return nil, perr("sensitivity", "%v: want a finite value ≥ 1", v)
			}
			c.Sensitivity = v
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
	if out[0].Share > 0 {
		if err := checkShares(out); err != nil {
			return nil, &ParseError{File: name, Field: "share", Msg: err.Error()}
		}
	}
	return out, nil
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

// checkShares checks that the data shares sum to 1 within ShareTolerance.
func checkShares(cs []ClientSpec) error {
	var s float64
	for _, c := range cs {
		s += c.Share
	}
	if math.Abs(s-1) > ShareTolerance {
		return fmt.Errorf("the shares sum to %.9g: want 1 (within %g)", s, ShareTolerance)
	}
	return nil
}
