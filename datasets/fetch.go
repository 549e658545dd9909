package datasets

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/dpsgd/dpsgd/internal/atomicfile"
)

// RemoteFile is one file of a published dataset: its name (a plain file name, no directory),
// its size in bytes (0: not checked), its SHA-256 as 64 hex digits and, where the publisher
// gives one, its MD5 as 32 hex digits (empty: not checked), checked besides the SHA-256.
type RemoteFile struct {
	Name   string
	Size   int64
	SHA256 string
	MD5    string
}

// Source is a published dataset: the files and the base URLs that serve them (tried in order).
type Source struct {
	Name    string
	Mirrors []string
	Files   []RemoteFile
}

// MNISTFiles returns the four original MNIST files (yann.lecun.com/exdb/mnist), with the sizes
// and SHA-256 sums of the originals (they match TFDS).
func MNISTFiles() []RemoteFile {
	return []RemoteFile{
		{Name: "train-images-idx3-ubyte.gz", Size: 9912422, SHA256: "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609"},
		{Name: "train-labels-idx1-ubyte.gz", Size: 28881, SHA256: "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c"},
		{Name: "t10k-images-idx3-ubyte.gz", Size: 1648877, SHA256: "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6"},
		{Name: "t10k-labels-idx1-ubyte.gz", Size: 4542, SHA256: "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6"},
	}
}

// AdultFiles returns the UCI Adult files LoadAdult needs (adult.data, adult.test), with the
// sizes and SHA-256 sums of the UCI originals.
func AdultFiles() []RemoteFile {
	return []RemoteFile{
		{Name: "adult.data", Size: 3974305, SHA256: "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d"},
		{Name: "adult.test", Size: 2003153, SHA256: "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05"},
	}
}

// MNISTSource returns MNIST with its current public mirrors (the original host
// yann.lecun.com no longer serves the files reliably).
func MNISTSource() Source {
	return Source{
		Name: "mnist",
		Mirrors: []string{
			"https://ossci-datasets.s3.amazonaws.com/mnist",
			"https://storage.googleapis.com/cvdf-datasets/mnist",
		},
		Files: MNISTFiles(),
	}
}

// AdultSource returns UCI Adult with the UCI archive as its mirror.
func AdultSource() Source {
	return Source{
		Name:    "adult",
		Mirrors: []string{"https://archive.ics.uci.edu/ml/machine-learning-databases/adult"},
		Files:   AdultFiles(),
	}
}

func (f RemoteFile) check() error {
	if f.Name == "" || f.Name == "." || f.Name == ".." || strings.ContainsAny(f.Name, `/\`) || filepath.Base(f.Name) != f.Name {
		return fmt.Errorf("datasets: RemoteFile.Name = %q, want a plain file name without directories", f.Name)
	}
	if f.Size < 0 {
		return fmt.Errorf("datasets: %s: RemoteFile.Size = %d, want >= 0 (0: not checked)", f.Name, f.Size)
	}
	if b, err := hex.DecodeString(f.SHA256); err != nil || len(b) != sha256.Size {
		return fmt.Errorf("datasets: %s: RemoteFile.SHA256 = %q, want 64 hex digits", f.Name, f.SHA256)
	}
	if b, err := hex.DecodeString(f.MD5); f.MD5 != "" && (err != nil || len(b) != md5.Size) {
		return fmt.Errorf("datasets: %s: RemoteFile.MD5 = %q, want 32 hex digits or empty", f.Name, f.MD5)
	}
	return nil
}

// digests hashes what is written to it with SHA-256 and, when the file has one, MD5.
type digests struct {
	sha, md hash.Hash // md is nil without an MD5 to check
	f       RemoteFile
}

func newDigests(f RemoteFile) *digests {
	d := &digests{sha: sha256.New(), f: f}
	if f.MD5 != "" {
		d.md = md5.New()
	}
	return d
}

func (d *digests) Write(p []byte) (int, error) {
	d.sha.Write(p) // hash.Hash writes never fail
	if d.md != nil {
		d.md.Write(p)
	}
	return len(p), nil
}

// check compares the sums with the file's; what names the data in the error.
func (d *digests) check(what string) error {
	if got := hex.EncodeToString(d.sha.Sum(nil)); !strings.EqualFold(got, d.f.SHA256) {
		return fmt.Errorf("datasets: %s: %w: sha256 %s, want %s", what, ErrChecksum, got, strings.ToLower(d.f.SHA256))
	}
	if d.md != nil {
		if got := hex.EncodeToString(d.md.Sum(nil)); !strings.EqualFold(got, d.f.MD5) {
			return fmt.Errorf("datasets: %s: %w: md5 %s, want %s", what, ErrChecksum, got, strings.ToLower(d.f.MD5))
		}
	}
	return nil
}

// verifyFile checks one file's size and SHA-256. A missing file gives an error matching
// fs.ErrNotExist; a wrong one an error matching ErrChecksum.
func verifyFile(path string, f RemoteFile) error {
	fh, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("datasets: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return fmt.Errorf("datasets: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("datasets: %s: not a regular file: %w", path, ErrChecksum)
	}
	if f.Size > 0 && st.Size() != f.Size {
		return fmt.Errorf("datasets: %s: %w: size %d bytes, want %d", path, ErrChecksum, st.Size(), f.Size)
	}
	h := newDigests(f)
	if _, err := io.Copy(h, fh); err != nil {
		return fmt.Errorf("datasets: %s: %w", path, err)
	}
	return h.check(path)
}

// Verify checks that every file is in dir with the right size and SHA-256. It returns the
// first problem: an error matching fs.ErrNotExist for a missing file, ErrChecksum for a wrong
// one.
func Verify(dir string, files []RemoteFile) error {
	for _, f := range files {
		if err := f.check(); err != nil {
			return err
		}
		if err := verifyFile(filepath.Join(dir, f.Name), f); err != nil {
			return err
		}
	}
	return nil
}

// Fetch makes sure every file is in cacheDir (created if needed) with the right size and
// SHA-256. A missing or corrupt file is downloaded from baseURL+"/"+Name with client (nil:
// http.DefaultClient) into a temporary file in cacheDir, hashed while it is written, verified,
// and only then renamed into place; on any failure the temporary file is removed, so no
// half-written or unverified file is ever left under the final name. ctx cancels the
// downloads. A wrong download gives an error matching ErrChecksum.
func Fetch(ctx context.Context, client *http.Client, baseURL, cacheDir string, files []RemoteFile) error {
	if client == nil {
		client = http.DefaultClient
	}
	if cacheDir == "" {
		return errors.New("datasets: Fetch: cacheDir is empty, want a directory path")
	}
	for _, f := range files {
		if err := f.check(); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return fmt.Errorf("datasets: Fetch: %w", err)
	}
	base := strings.TrimRight(baseURL, "/")
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("datasets: Fetch: %w", err)
		}
		dst := filepath.Join(cacheDir, f.Name)
		if err := verifyFile(dst, f); err == nil {
			continue
		}
		if err := download(ctx, client, base+"/"+f.Name, dst, f); err != nil {
			return err
		}
	}
	return nil
}

// download fetches url into a temporary file next to dst, verifies it and renames it to dst
// (internal/atomicfile: synced first, and the directory after).
func download(ctx context.Context, client *http.Client, url, dst string, f RemoteFile) (err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("datasets: download %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("datasets: download %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("datasets: download %s: HTTP status %q, want 200 OK", url, resp.Status)
	}
	tmp, err := atomicfile.Create(dst, 0o644)
	if err != nil {
		return fmt.Errorf("datasets: download %s: %w", url, err)
	}
	defer func() {
		if err != nil {
			tmp.Abort()
		}
	}()
	h := newDigests(f)
	body := io.Reader(resp.Body)
	if f.Size > 0 {
		body = io.LimitReader(resp.Body, f.Size+1) // one byte more reveals an oversized body
	}
	n, err := io.Copy(io.MultiWriter(tmp, h), body)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("datasets: download %s: after %d bytes: %w", url, n, ctxErr)
		}
		return fmt.Errorf("datasets: download %s: after %d bytes: %w", url, n, err)
	}
	if f.Size > 0 && n != f.Size {
		return fmt.Errorf("datasets: download %s: %w: got %d bytes or more, want %d", url, ErrChecksum, n, f.Size)
	}
	if err := h.check("download " + url); err != nil {
		return err
	}
	if err = tmp.Commit(); err != nil {
		return fmt.Errorf("datasets: download %s: %w", url, err)
	}
	return nil
}

// Resolve finds the directory holding src's files. If dir is not empty and holds every file
// with the right size and SHA-256, it returns dir. Otherwise it makes sure the files are in
// cacheDir, downloading what is missing or corrupt from src.Mirrors in order (see [Fetch]),
// and returns cacheDir. With an empty cacheDir it only checks dir. Uncompressed or renamed
// copies do not pass the checksum; load them directly with LoadMNIST or LoadAdult.
func Resolve(ctx context.Context, client *http.Client, src Source, dir, cacheDir string) (string, error) {
	var dirErr error
	if dir != "" {
		dirErr = Verify(dir, src.Files)
		if dirErr == nil {
			return dir, nil
		}
	}
	if cacheDir == "" {
		if dirErr == nil {
			dirErr = errors.New("no data directory given")
		}
		return "", fmt.Errorf("datasets: %s: no cache directory to download into, and the data directory is not usable: %w", src.Name, dirErr)
	}
	if Verify(cacheDir, src.Files) == nil {
		return cacheDir, nil
	}
	if len(src.Mirrors) == 0 {
		return "", fmt.Errorf("datasets: %s: files missing or corrupt in %s and no mirror to download from: %w", src.Name, cacheDir, fs.ErrNotExist)
	}
	var errs []any
	for _, m := range src.Mirrors {
		err := Fetch(ctx, client, m, cacheDir, src.Files)
		if err == nil {
			return cacheDir, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	// One line, every mirror's error wrapped (errors.Is sees them all).
	format := "datasets: %s: download failed: " + strings.TrimSuffix(strings.Repeat("%w; ", len(errs)), "; ")
	return "", fmt.Errorf(format, append([]any{src.Name}, errs...)...)
}
