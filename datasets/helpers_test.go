package datasets

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// sharedDir returns the directory of the real files of sub (kept outside the repository, in a
// shared/datasets directory beside the checkout), skipping the test if it is absent.
func sharedDir(tb testing.TB, sub string) string {
	tb.Helper()
	dir := filepath.Join("..", "..", "shared", "datasets", sub)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		tb.Skipf("real data not available: %s is absent", dir)
	}
	return dir
}

// mnistCache loads the real MNIST once per test binary (it is ~220 MB as float32).
var mnistCache struct {
	once        sync.Once
	train, test *Dataset
	err         error
}

func realMNIST(t *testing.T) (train, test *Dataset) {
	t.Helper()
	dir := sharedDir(t, "mnist")
	mnistCache.once.Do(func() {
		mnistCache.train, mnistCache.test, mnistCache.err = LoadMNIST(dir)
	})
	if mnistCache.err != nil {
		t.Fatalf("LoadMNIST(%s): %v", dir, mnistCache.err)
	}
	return mnistCache.train, mnistCache.test
}

// idxBytes builds an IDX stream by hand: magic 0 0 typ len(dims), extents, then payload.
func idxBytes(typ byte, dims []uint32, payload []byte) []byte {
	var b bytes.Buffer
	b.Write([]byte{0, 0, typ, byte(len(dims))})
	for _, d := range dims {
		_ = binary.Write(&b, binary.BigEndian, d)
	}
	b.Write(payload)
	return b.Bytes()
}

func gzipBytes(tb testing.TB, data []byte) []byte {
	tb.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write(data); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// checkFormatErr asserts err is a one-line ParseError matching ErrFormat whose message
// contains every fragment.
func checkFormatErr(t *testing.T, err error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got nil error, want an error containing %q", fragments)
	}
	if !errors.Is(err, ErrFormat) {
		t.Errorf("error %q does not match ErrFormat", err)
	}
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Errorf("error %q is not a *ParseError", err)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("error is not one line: %q", msg)
	}
	for _, f := range fragments {
		if !strings.Contains(msg, f) {
			t.Errorf("error %q does not contain %q", msg, f)
		}
	}
}

func writeFile(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
}
