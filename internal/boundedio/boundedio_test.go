package boundedio

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// TestReadAll: inputs up to the limit come back whole, byte for byte; a longer one is refused
// after reading at most limit+1 bytes, wrapping the format's error; a read error is wrapped.
func TestReadAll(t *testing.T) {
	invalid := errors.New("bad format")
	for _, limit := range []int64{0, 1, 7, 4096} {
		for _, n := range []int64{0, 1, limit - 1, limit, limit + 1, 3*limit + 5} {
			if n < 0 {
				continue
			}
			in := bytes.Repeat([]byte{'x'}, int(n))
			cr := &countingReader{r: bytes.NewReader(in)}
			got, err := ReadAll(cr, limit, "fmt", invalid)
			if n <= limit {
				if err != nil || !bytes.Equal(got, in) {
					t.Errorf("limit %d, %d bytes: %d bytes back, %v", limit, n, len(got), err)
				}
				continue
			}
			if !errors.Is(err, invalid) || err.Error() != fmt.Sprintf("bad format: larger than %d bytes", limit) || got != nil {
				t.Errorf("limit %d, %d bytes: error %v", limit, n, err)
			}
			if cr.n > limit+1 {
				t.Errorf("limit %d: read %d bytes of an oversized input, want at most %d", limit, cr.n, limit+1)
			}
		}
	}
	if _, err := ReadAll(strings.NewReader("abc"), 2, "", nil); err == nil || err.Error() != "larger than 2 bytes" {
		t.Errorf("no format error, no prefix: %v", err)
	}
	boom := errors.New("disk on fire")
	if _, err := ReadAll(io.MultiReader(strings.NewReader("ab"), errReader{boom}), 10, "fmt", invalid); !errors.Is(err, boom) || errors.Is(err, invalid) || !strings.HasPrefix(err.Error(), "fmt: reading: ") {
		t.Errorf("read error: %v", err)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// TestReadFile: the reader gets the file's bytes; a missing file is fs.ErrNotExist with the
// prefix; the reader's error is prefixed with the path.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	read := func(r io.Reader) (string, error) {
		b, err := ReadAll(r, 10, "", nil)
		return string(b), err
	}
	if s, err := ReadFile(path, "fmt", read); err != nil || s != "hello" {
		t.Errorf("ReadFile: %q, %v", s, err)
	}
	_, err := ReadFile(filepath.Join(dir, "missing"), "fmt", read)
	if !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "fmt: open ") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing"), "", read); !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "open ") {
		t.Errorf("missing file, no prefix: %v", err)
	}
	bad := errors.New("not a greeting")
	_, err = ReadFile(path, "fmt", func(io.Reader) (int, error) { return 0, bad })
	if !errors.Is(err, bad) || err.Error() != path+": not a greeting" {
		t.Errorf("reader error: %v", err)
	}
}

// TestParse: the decoder gets exactly the bytes read; an oversized input never reaches it.
func TestParse(t *testing.T) {
	invalid := errors.New("bad format")
	calls := 0
	decode := func(b []byte) (int, error) { calls++; return len(b), nil }
	if n, err := Parse(strings.NewReader("12345"), 5, "fmt", invalid, decode); n != 5 || err != nil || calls != 1 {
		t.Errorf("Parse: %d, %v, %d calls", n, err, calls)
	}
	if _, err := Parse(strings.NewReader("123456"), 5, "fmt", invalid, decode); !errors.Is(err, invalid) || calls != 1 {
		t.Errorf("oversized: %v, %d calls", err, calls)
	}
}
