// Package boundedio reads whole inputs of bounded size: every file format dpsgd parses (model
// files and their safetensors, checkpoints, ledgers, clients files, the rows given to
// dpsgd predict) is read through ReadAll, so that an input larger than its format's bound is
// refused after reading one byte more than the bound, never read whole into memory; Parse
// hands the bytes to a format's decoder; ReadFile opens a file, reads it with a format's reader
// and names the path in any error.
//
// Role: a shared helper of the module's parsers (internal/: not part of the API).
package boundedio

import (
	"fmt"
	"io"
	"os"
)

// ReadAll reads r to its end, at most limit ≥ 0 bytes. An input of more than limit bytes is
// refused with "invalid: larger than limit bytes", wrapping invalid (the format's error for
// bytes it does not accept, whose text names the format, so that an oversized input matches
// it under errors.Is), or with "what: larger than limit bytes" when invalid is nil; a read
// error is returned as "what: reading: err", wrapping err. what may be "" (no prefix).
func ReadAll(r io.Reader, limit int64, what string, invalid error) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%sreading: %w", prefix(what), err)
	}
	if int64(len(data)) > limit {
		if invalid != nil {
			return nil, fmt.Errorf("%w: larger than %d bytes", invalid, limit)
		}
		return nil, fmt.Errorf("%slarger than %d bytes", prefix(what), limit)
	}
	return data, nil
}

// Parse reads r with ReadAll and gives the bytes to decode: a format's reader from its decoder.
func Parse[T any](r io.Reader, limit int64, what string, invalid error, decode func([]byte) (T, error)) (T, error) {
	data, err := ReadAll(r, limit, what, invalid)
	if err != nil {
		var zero T
		return zero, err
	}
	return decode(data)
}

// ReadFile opens the file at path and reads it with read. An error of opening is returned as
// "what: err" (err, from os.Open, names the path), one of read as "path: err"; both wrap err.
// what may be "" (no prefix).
func ReadFile[T any](path, what string, read func(io.Reader) (T, error)) (T, error) {
	var zero T
	f, err := os.Open(path)
	if err != nil {
		if what == "" {
			return zero, err
		}
		return zero, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	v, err := read(f)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// prefix is "what: ", or "" for an empty what.
func prefix(what string) string {
	if what == "" {
		return ""
	}
	return what + ": "
}
