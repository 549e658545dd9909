package datasets

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// counter counts requests per path.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		if c.n == nil {
			c.n = map[string]int{}
		}
		c.n[r.URL.Path]++
		c.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (c *counter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := 0
	for _, v := range c.n {
		s += v
	}
	return s
}

func (c *counter) get(p string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[p]
}

// dirEntries lists the names in dir (including temporary files).
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestFetchReal serves the real shared files over HTTP and fetches them into a temporary cache.
func TestFetchReal(t *testing.T) {
	root := filepath.Join(sharedDir(t, "mnist"), "..")
	var cnt counter
	srv := httptest.NewServer(cnt.wrap(http.FileServer(http.Dir(root))))
	defer srv.Close()
	ctx := context.Background()
	cache := filepath.Join(t.TempDir(), "cache", "mnist")

	files := MNISTFiles()
	if err := Fetch(ctx, srv.Client(), srv.URL+"/mnist", cache, files); err != nil {
		t.Fatal(err)
	}
	if cnt.total() != 4 {
		t.Errorf("first fetch made %d requests, want 4", cnt.total())
	}
	if err := Verify(cache, files); err != nil {
		t.Fatal(err)
	}
	names := dirEntries(t, cache)
	slices.Sort(names)
	var want []string
	for _, f := range files {
		want = append(want, f.Name)
	}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("cache holds %v, want exactly %v", names, want)
	}

	// Second call: nothing downloaded.
	if err := Fetch(ctx, srv.Client(), srv.URL+"/mnist", cache, files); err != nil {
		t.Fatal(err)
	}
	if cnt.total() != 4 {
		t.Errorf("second fetch made %d more requests, want 0", cnt.total()-4)
	}

	// A corrupted cached file (same size, one byte flipped) is downloaded again, and only it.
	p := filepath.Join(cache, "t10k-labels-idx1-ubyte.gz")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[100] ^= 1
	writeFile(t, cache, "t10k-labels-idx1-ubyte.gz", b)
	if err := Verify(cache, files); !errors.Is(err, ErrChecksum) {
		t.Errorf("Verify on a corrupt file: %v, want ErrChecksum", err)
	}
	// A truncated one too.
	writeFile(t, cache, "train-labels-idx1-ubyte.gz", []byte("short"))
	if err := Fetch(ctx, srv.Client(), srv.URL+"/mnist/", cache, files); err != nil {
		t.Fatal(err)
	}
	if cnt.total() != 6 || cnt.get("/mnist/t10k-labels-idx1-ubyte.gz") != 2 || cnt.get("/mnist/train-labels-idx1-ubyte.gz") != 2 {
		t.Errorf("repair made requests %v, want one more for each corrupt file", cnt.n)
	}
	if err := Verify(cache, files); err != nil {
		t.Fatal(err)
	}

	// Adult through Resolve: the data dir holds no Adult files, so it downloads into the cache.
	adultCache := filepath.Join(t.TempDir(), "adult")
	src := AdultSource()
	src.Mirrors = []string{srv.URL + "/nowhere", srv.URL + "/uci-adult"} // first mirror 404s
	dir, err := Resolve(ctx, srv.Client(), src, t.TempDir(), adultCache)
	if err != nil || dir != adultCache {
		t.Fatalf("Resolve = %q, %v; want %q", dir, err, adultCache)
	}
	if _, _, err := LoadAdult(dir); err != nil {
		t.Fatal(err)
	}
	// A data dir with valid files is used as is, without requests.
	before := cnt.total()
	adultDir := sharedDir(t, "uci-adult")
	if dir, err := Resolve(ctx, srv.Client(), src, adultDir, t.TempDir()); err != nil || dir != adultDir {
		t.Errorf("Resolve(valid dir) = %q, %v", dir, err)
	}
	if cnt.total() != before {
		t.Error("Resolve downloaded although the data dir was valid")
	}
}

// TestFetchWrongBytes: a server serving other bytes gives a checksum error and leaves nothing.
func TestFetchWrongBytes(t *testing.T) {
	body := []byte("these are not the bytes you are looking for")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	cache := t.TempDir()
	ctx := context.Background()
	for _, f := range []RemoteFile{
		{Name: "a.bin", Size: int64(len(body)), SHA256: strings.Repeat("ab", 32)}, // right size, wrong hash
		{Name: "b.bin", Size: 10, SHA256: strings.Repeat("ab", 32)},               // too long
		{Name: "c.bin", Size: 1000, SHA256: strings.Repeat("ab", 32)},             // too short
		{Name: "d.bin", SHA256: strings.Repeat("ab", 32)},                         // size unchecked
	} {
		err := Fetch(ctx, srv.Client(), srv.URL, cache, []RemoteFile{f})
		if !errors.Is(err, ErrChecksum) {
			t.Errorf("%s: error %v, want ErrChecksum", f.Name, err)
		}
		if err != nil && !strings.Contains(err.Error(), f.Name) {
			t.Errorf("%s: error %q does not name the file", f.Name, err)
		}
		if left := dirEntries(t, cache); len(left) != 0 {
			t.Errorf("%s: left %v in the cache", f.Name, left)
		}
	}
	// An existing corrupt file is not replaced by a wrong download.
	writeFile(t, cache, "a.bin", []byte("old"))
	_ = Fetch(ctx, srv.Client(), srv.URL, cache, []RemoteFile{{Name: "a.bin", SHA256: strings.Repeat("ab", 32)}})
	if got := dirEntries(t, cache); !slices.Equal(got, []string{"a.bin"}) {
		t.Errorf("cache holds %v, want only the old a.bin", got)
	}
	if b, _ := os.ReadFile(filepath.Join(cache, "a.bin")); string(b) != "old" {
		t.Errorf("a.bin = %q, want the old content", b)
	}
}

func TestFetchHTTPErrorAndBadInput(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	cache := t.TempDir()
	ctx := context.Background()
	ok := strings.Repeat("0", 64)
	err := Fetch(ctx, srv.Client(), srv.URL, cache, []RemoteFile{{Name: "x", SHA256: ok}})
	if err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "/x") {
		t.Errorf("404: error %v", err)
	}
	for _, f := range []RemoteFile{
		{Name: "../evil", SHA256: ok},
		{Name: "a/b", SHA256: ok},
		{Name: "", SHA256: ok},
		{Name: "..", SHA256: ok},
		{Name: "x", SHA256: "abc"},
		{Name: "x", SHA256: strings.Repeat("g", 64)},
		{Name: "x", Size: -1, SHA256: ok},
	} {
		if err := Fetch(ctx, srv.Client(), srv.URL, cache, []RemoteFile{f}); err == nil {
			t.Errorf("Fetch accepted %+v", f)
		}
	}
	if err := Fetch(ctx, nil, srv.URL, "", nil); err == nil {
		t.Error("empty cacheDir accepted")
	}
	if left := dirEntries(t, cache); len(left) != 0 {
		t.Errorf("left %v in the cache", left)
	}
	// Resolve with nothing usable.
	src := Source{Name: "none", Files: []RemoteFile{{Name: "x", SHA256: ok}}}
	if _, err := Resolve(ctx, nil, src, t.TempDir(), ""); err == nil {
		t.Error("Resolve without cache dir and without files: no error")
	}
	if _, err := Resolve(ctx, nil, src, "", t.TempDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Resolve without mirrors: %v, want fs.ErrNotExist", err)
	}
	src.Mirrors = []string{srv.URL + "/a", srv.URL + "/b"}
	_, err = Resolve(ctx, srv.Client(), src, "", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "/a/x") || !strings.Contains(err.Error(), "/b/x") || strings.Contains(err.Error(), "\n") {
		t.Errorf("Resolve with failing mirrors: %q, want one line naming both", err)
	}
}

// TestFetchCancel: cancelling the context stops a download in progress and leaves no file.
func TestFetchCancel(t *testing.T) {
	started := make(chan struct{})
	var once sync.Once
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Length", "1000000")
		_, _ = w.Write(make([]byte, 1000))
		w.(http.Flusher).Flush()
		once.Do(func() { close(started) })
		<-r.Context().Done() // stall until the client goes away
	}))
	defer srv.Close()
	cache := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Fetch(ctx, srv.Client(), srv.URL, cache, []RemoteFile{{Name: "big", Size: 1000000, SHA256: strings.Repeat("0", 64)}})
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("download did not start")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Fetch did not return after cancel")
	}
	if left := dirEntries(t, cache); len(left) != 0 {
		t.Errorf("left %v in the cache", left)
	}
	// An already-cancelled context makes no request.
	n := hits.Load()
	if err := Fetch(ctx, srv.Client(), srv.URL, cache, []RemoteFile{{Name: "big", SHA256: strings.Repeat("0", 64)}}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: %v", err)
	}
	if hits.Load() != n {
		t.Error("request made with a cancelled context")
	}
}

func TestSourceTables(t *testing.T) {
	for _, src := range []Source{MNISTSource(), AdultSource()} {
		if len(src.Mirrors) == 0 || len(src.Files) == 0 {
			t.Errorf("%s: empty table", src.Name)
		}
		for _, f := range src.Files {
			if err := f.check(); err != nil || f.Size <= 0 {
				t.Errorf("%s: %+v: %v", src.Name, f, err)
			}
		}
	}
	// The tables agree with the shared copies (which the READMEs say are byte-identical to
	// upstream).
	if err := Verify(sharedDir(t, "mnist"), MNISTFiles()); err != nil {
		t.Error(err)
	}
	if err := Verify(sharedDir(t, "uci-adult"), AdultFiles()); err != nil {
		t.Error(err)
	}
	// Tables are fresh copies: changing one does not change the next.
	a := MNISTFiles()
	a[0].Name = "changed"
	if MNISTFiles()[0].Name == "changed" {
		t.Error("MNISTFiles returns shared state")
	}
}

func BenchmarkVerifyMNIST(b *testing.B) {
	dir := sharedDir(b, "mnist")
	files := MNISTFiles()
	var n int64
	for _, f := range files {
		n += f.Size
	}
	b.SetBytes(n)
	for b.Loop() {
		if err := Verify(dir, files); err != nil {
			b.Fatal(err)
		}
	}
}
