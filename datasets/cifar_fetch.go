package datasets

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dpsgd/dpsgd/internal/atomicfile"
)

// CIFAR10Archive is the official archive of the binary version, "cifar-10-binary.tar.gz".
const CIFAR10Archive = "cifar-10-binary.tar.gz"

// CIFAR10Files returns the official archive with its size and sums. The MD5 is the one the
// dataset's page (https://www.cs.toronto.edu/~kriz/cifar.html) publishes for the binary
// version; the size and SHA-256 are those TensorFlow Datasets records for the same URL (its
// url_checksums/cifar10.txt). Both sums are checked.
func CIFAR10Files() []RemoteFile {
	return []RemoteFile{{
		Name:   CIFAR10Archive,
		Size:   170052171,
		SHA256: "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd",
		MD5:    "c32a1d4ab5d03f1284b67883e8d87530",
	}}
}

// CIFAR10Source returns CIFAR-10's binary version with the authors' site as its mirror.
func CIFAR10Source() Source {
	return Source{
		Name:    "cifar10",
		Mirrors: []string{"https://www.cs.toronto.edu/~kriz"},
		Files:   CIFAR10Files(),
	}
}

// Limits of ExtractCIFAR10. The official archive unpacks to 184,380,000 bytes of batches and
// a few hundred bytes of other files, plus tar headers.
const (
	// maxCIFAR10Unpacked bounds the decompressed stream: a larger one (a gzip bomb, a member
	// padded with zeros) is refused once this many bytes have been read.
	maxCIFAR10Unpacked = 192 << 20
	// maxCIFAR10Batch bounds one batch member: the official batches hold 10000 records.
	maxCIFAR10Batch = CIFAR10BatchRecords * CIFAR10RecordBytes
)

// ExtractCIFAR10 unpacks the six batch files (data_batch_1.bin … data_batch_5.bin,
// test_batch.bin) of a CIFAR-10 archive in the format of cifar-10-binary.tar.gz, read from r
// (name is used in errors), into dir/cifar-10-batches-bin. It writes nothing else: the
// archive's other regular files are read past, not written.
//
// It refuses, with an error matching [ErrFormat] that names the member, and before any file
// is replaced: a member whose path is absolute, climbs out with "..", or holds a backslash;
// a link, device or other non-regular member; a batch member twice, of zero size, of a size
// that is not a whole number of records, or larger than an official batch (10000 records);
// a decompressed stream longer than 192 MiB (a size bomb); a missing batch; a gzip checksum
// error anywhere in the stream. The files are written to temporary files and renamed into
// place together only once the whole stream has been read and checked (internal/atomicfile).
func ExtractCIFAR10(r io.Reader, name, dir string) error {
	return extractCIFAR10(r, name, dir, maxCIFAR10Unpacked)
}

// extractCIFAR10 is ExtractCIFAR10 with the bound on the decompressed stream as a parameter
// (tests make a bomb of a few MiB against a small bound).
func extractCIFAR10(r io.Reader, name, dir string, maxUnpacked int64) (err error) {
	fail := func(format string, args ...any) error {
		return &ParseError{File: name, Offset: -1, Msg: fmt.Sprintf(format, args...)}
	}
	gz, err := gzip.NewReader(r)
	if err != nil {
		return &ParseError{File: name, Offset: 0, Msg: "not a gzip stream", Err: err}
	}
	lim := &io.LimitedReader{R: gz, N: maxUnpacked + 1}
	// bomb reports the limit when the stream reached it: any error is then that.
	bomb := func(err error) error {
		if lim.N <= 0 {
			return fail("unpacks to more than %d bytes, more than the official archive: refused", maxUnpacked)
		}
		return err
	}
	want := append(CIFAR10TrainFiles(), CIFAR10TestFile)
	pending := make(map[string]*atomicfile.Pending, len(want))
	defer func() {
		if err != nil {
			for _, p := range pending {
				p.Abort()
			}
		}
	}()
	out := filepath.Join(dir, CIFAR10Dir)
	tr := tar.NewReader(lim)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return bomb(&ParseError{File: name, Offset: -1, Msg: "reading the tar stream", Err: err})
		}
		clean, err := memberPath(hdr.Name)
		if err != nil {
			return fail("member %q: %v: refused", hdr.Name, err)
		}
		switch hdr.Typeflag {
		case tar.TypeDir, tar.TypeXGlobalHeader:
			continue
		case tar.TypeReg:
		default:
			return fail("member %q: type %q is not a regular file or a directory (links and devices are refused)", hdr.Name, hdr.Typeflag)
		}
		dirName, base := path.Split(clean)
		if dirName != CIFAR10Dir+"/" || !slices.Contains(want, base) {
			continue // another file of the archive (readme.html, batches.meta.txt): not written
		}
		switch {
		case pending[base] != nil:
			return fail("member %q: a second copy of %s", hdr.Name, base)
		case hdr.Size <= 0 || hdr.Size%CIFAR10RecordBytes != 0:
			return fail("member %q: size %d bytes, want a positive whole number of %d-byte records", hdr.Name, hdr.Size, CIFAR10RecordBytes)
		case hdr.Size > maxCIFAR10Batch:
			return fail("member %q: size %d bytes, more than an official batch (%d records, %d bytes): refused", hdr.Name, hdr.Size, CIFAR10BatchRecords, maxCIFAR10Batch)
		}
		if err := os.MkdirAll(out, 0o755); err != nil {
			return fmt.Errorf("datasets: %s: %w", name, err)
		}
		p, err := atomicfile.Create(filepath.Join(out, base), 0o644)
		if err != nil {
			return fmt.Errorf("datasets: %s: %w", name, err)
		}
		pending[base] = p
		n, err := io.Copy(p, tr)
		if err != nil {
			return bomb(&ParseError{File: name, Offset: -1, Msg: fmt.Sprintf("member %q: after %d of %d bytes", hdr.Name, n, hdr.Size), Err: err})
		}
	}
	// The rest of the stream, to its end: gzip checks its CRC only there.
	if _, err := io.Copy(io.Discard, lim); err != nil {
		return bomb(&ParseError{File: name, Offset: -1, Msg: "after the tar stream", Err: err})
	}
	if lim.N <= 0 {
		return bomb(nil)
	}
	var missing []string
	ps := make([]*atomicfile.Pending, 0, len(want))
	for _, w := range want {
		if pending[w] == nil {
			missing = append(missing, CIFAR10Dir+"/"+w)
		}
		ps = append(ps, pending[w])
	}
	if len(missing) > 0 {
		return fail("no member %s: not a CIFAR-10 binary archive", strings.Join(missing, ", "))
	}
	if err := atomicfile.CommitAll(ps...); err != nil {
		return fmt.Errorf("datasets: %s: writing into %s: %w", name, out, err)
	}
	return nil
}

// memberPath checks an archive member's path and returns it cleaned: a relative, local path
// (filepath.IsLocal: not absolute, no ".." out of the directory, not empty) with forward
// slashes only.
func memberPath(name string) (string, error) {
	switch {
	case strings.ContainsAny(name, "\\\x00"):
		return "", errors.New("a backslash or NUL in the path")
	case strings.HasPrefix(name, "/"):
		return "", errors.New("an absolute path")
	}
	clean := path.Clean(name)
	if !filepath.IsLocal(clean) || slices.Contains(strings.Split(name, "/"), "..") {
		return "", errors.New("a path that is not inside the extraction directory")
	}
	return clean, nil
}

// cifar10Present reports whether dir (or dir/cifar-10-batches-bin) holds all six batches.
func cifar10Present(dir string) bool {
	bdir, err := CIFAR10BatchDir(dir)
	if err != nil {
		return false
	}
	for _, f := range append(CIFAR10TrainFiles(), CIFAR10TestFile) {
		st, err := os.Stat(filepath.Join(bdir, f))
		if err != nil || !st.Mode().IsRegular() {
			return false
		}
	}
	return true
}

// FetchCIFAR10 makes sure dir holds the CIFAR-10 batches and returns the directory that
// [LoadCIFAR10] reads. If dir (or dir/cifar-10-batches-bin) already holds all six, nothing
// is fetched. Otherwise the archive of src ([CIFAR10Source]) is looked for in dir, checked
// (size, SHA-256, MD5), downloaded from src's mirrors only when it is missing or wrong (see
// [Resolve]), and extracted by [ExtractCIFAR10]; the archive is kept, so a second call
// downloads nothing. Nothing calls it without being asked: `dpsgd train --download` does.
func FetchCIFAR10(ctx context.Context, client *http.Client, src Source, dir string) (string, error) {
	if dir == "" {
		return "", errors.New("datasets: FetchCIFAR10: empty directory, want a path")
	}
	if cifar10Present(dir) {
		return CIFAR10BatchDir(dir)
	}
	if len(src.Files) != 1 {
		return "", fmt.Errorf("datasets: FetchCIFAR10: source %q has %d files, want the archive alone", src.Name, len(src.Files))
	}
	if _, err := Resolve(ctx, client, src, "", dir); err != nil {
		return "", err
	}
	archive := filepath.Join(dir, src.Files[0].Name)
	f, err := os.Open(archive)
	if err != nil {
		return "", fmt.Errorf("datasets: %w", err)
	}
	defer f.Close()
	if err := ExtractCIFAR10(f, archive, dir); err != nil {
		return "", err
	}
	return filepath.Join(dir, CIFAR10Dir), nil
}
