package datasets

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// cifarRecords builds CIFAR-10 records by hand: record i has label labels[i] and pixel j (in
// file order) byte(seed + 7i + 13j).
func cifarRecords(labels []byte, seed int) []byte {
	b := make([]byte, 0, len(labels)*CIFAR10RecordBytes)
	for i, l := range labels {
		b = append(b, l)
		for j := range CIFARImageBytes {
			b = append(b, byte(seed+7*i+13*j))
		}
	}
	return b
}

// cifarBatches returns the six batch files of a small fake CIFAR-10: training batch k holds
// k+1 records, the test batch 3; labels cycle through 0–9.
func cifarBatches() map[string][]byte {
	files := map[string][]byte{}
	next := byte(0)
	labels := func(n int) []byte {
		l := make([]byte, n)
		for i := range l {
			l[i] = next % CIFAR10Classes
			next++
		}
		return l
	}
	for k, name := range CIFAR10TrainFiles() {
		files[name] = cifarRecords(labels(k+1), 11*k)
	}
	files[CIFAR10TestFile] = cifarRecords(labels(3), 99)
	return files
}

func writeCIFAR10(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// tarMember is one member of a hand-built archive.
type tarMember struct {
	name string
	typ  byte
	body []byte
	size int64 // declared size when body is shorter (the stream then ends early); 0: len(body)
	link string
}

// tarGz builds a .tar.gz of the members, in order.
func tarGz(t testing.TB, members []tarMember) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	truncated := false
	for _, m := range members {
		typ := m.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		size := int64(len(m.body))
		if m.size > 0 {
			size = m.size
		}
		h := &tar.Header{Name: m.name, Typeflag: typ, Size: size, Mode: 0o644, Linkname: m.link, Format: tar.FormatPAX}
		if typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(m.body); err != nil {
			t.Fatal(err)
		}
		if m.size > int64(len(m.body)) {
			truncated = true
			break
		}
	}
	if !truncated {
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// officialMembers lays files out as the official archive does: the folder, the batches, and
// two other files that are not extracted.
func officialMembers(files map[string][]byte) []tarMember {
	ms := []tarMember{{name: CIFAR10Dir + "/", typ: tar.TypeDir}}
	names := append(CIFAR10TrainFiles(), CIFAR10TestFile)
	for _, n := range names {
		ms = append(ms, tarMember{name: CIFAR10Dir + "/" + n, body: files[n]})
	}
	ms = append(ms,
		tarMember{name: CIFAR10Dir + "/batches.meta.txt", body: []byte(strings.Join(CIFAR10ClassNames(), "\n"))},
		tarMember{name: CIFAR10Dir + "/readme.html", body: []byte("<meta HTTP-EQUIV=\"REFRESH\">")})
	return ms
}

func TestReadCIFAR10Oracle(t *testing.T) {
	// One record whose planes are constant: red 10, green 20, blue 30, except one marked
	// pixel per plane at (row 5, column 7).
	rec := make([]byte, CIFAR10RecordBytes)
	rec[0] = 7
	for c, v := range []byte{10, 20, 30} {
		for j := range CIFARRows * CIFARCols {
			rec[1+c*1024+j] = v
		}
		rec[1+c*1024+5*32+7] = 200 + byte(c)
	}
	d, err := ReadCIFAR10(bytes.NewReader(rec), "one.bin")
	if err != nil {
		t.Fatal(err)
	}
	if d.N != 1 || d.D != 3072 || d.Classes != 10 || !slices.Equal(d.Shape, []int{3, 32, 32}) || d.Y[0] != 7 {
		t.Fatalf("N %d D %d classes %d shape %v label %d", d.N, d.D, d.Classes, d.Shape, d.Y[0])
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	at := func(c, h, w int) float32 { return d.X[(c*32+h)*32+w] } // [C, H, W] row-major
	for c, v := range []float32{10, 20, 30} {
		if got := at(c, 0, 0); got != v/255 {
			t.Errorf("channel %d pixel (0,0) = %v, want %v", c, got, v/255)
		}
		if got, want := at(c, 5, 7), float32(200+c)/255; got != want {
			t.Errorf("channel %d pixel (5,7) = %v, want %v", c, got, want)
		}
		if got := at(c, 7, 5); got != v/255 {
			t.Errorf("channel %d pixel (7,5) = %v, want %v (rows and columns swapped?)", c, got, v/255)
		}
	}
	if at(2, 31, 31) != 30.0/255 || at(0, 0, 0) != MNISTPixel(10) {
		t.Error("scaling differs from MNIST's p/255")
	}
}

func TestReadCIFAR10Errors(t *testing.T) {
	good := cifarRecords([]byte{1, 2, 3}, 0)
	bad := slices.Clone(good)
	bad[2*CIFAR10RecordBytes] = 10
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "empty file"},
		{"truncated", good[:2*CIFAR10RecordBytes+100], "offset 6146: record 2 truncated: 100 of 3073 bytes"},
		{"label", bad, "offset 6146: record 2: label 10 out of range [0, 10)"},
		{"gzip", gzipBytes(t, good), "a gzip stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := ReadCIFAR10(bytes.NewReader(tc.in), "b.bin")
			if d != nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "b.bin") {
				t.Fatalf("got %v, %v; want an ErrFormat naming b.bin and %q", d, err, tc.want)
			}
		})
	}
	// A file whose size is not whole records is refused before it is read.
	dir := t.TempDir()
	p := filepath.Join(dir, "x.bin")
	if err := os.WriteFile(p, good[:CIFAR10RecordBytes+5], 0o644); err != nil {
		t.Fatal(err)
	}
	f, size, err := openCIFAR10(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, _, err := appendCIFAR10(nil, nil, f, p, size, MaxCIFAR10Records); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "not a whole number") {
		t.Fatalf("got %v", err)
	}
}

func TestLoadCIFAR10(t *testing.T) {
	files := cifarBatches()
	for _, layout := range []string{"flat", CIFAR10Dir} {
		t.Run(layout, func(t *testing.T) {
			root := t.TempDir()
			dir := root
			if layout != "flat" {
				dir = filepath.Join(root, layout)
			}
			writeCIFAR10(t, dir, files)
			train, test, err := LoadCIFAR10(root)
			if err != nil {
				t.Fatal(err)
			}
			if err := train.Validate(); err != nil {
				t.Fatal(err)
			}
			if err := test.Validate(); err != nil {
				t.Fatal(err)
			}
			if train.N != 1+2+3+4+5 || test.N != 3 || train.Name != "cifar10/train" || test.Name != "cifar10/test" {
				t.Fatalf("train %s N %d, test %s N %d", train.Name, train.N, test.Name, test.N)
			}
			// The batches are concatenated in order: labels 0, 1, 2, … as cifarBatches made them.
			for i, y := range train.Y {
				if y != i%10 {
					t.Fatalf("train label %d = %d, want %d", i, y, i%10)
				}
			}
			// Each row is its record decoded alone: the features of record r of file k.
			i := 0
			for _, name := range CIFAR10TrainFiles() {
				b := files[name]
				for r := 0; r < len(b)/CIFAR10RecordBytes; r++ {
					row := train.Row(i)
					for j, p := range b[r*CIFAR10RecordBytes+1 : (r+1)*CIFAR10RecordBytes] {
						if row[j] != float32(p)/255 {
							t.Fatalf("train row %d feature %d = %v, want %v", i, j, row[j], float32(p)/255)
						}
					}
					i++
				}
			}
		})
	}
	// A missing batch is named.
	dir := t.TempDir()
	partial := cifarBatches()
	delete(partial, "data_batch_4.bin")
	writeCIFAR10(t, dir, partial)
	if _, _, err := LoadCIFAR10(dir); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "data_batch_4.bin") {
		t.Fatalf("missing batch: %v", err)
	}
	if _, _, err := LoadCIFAR10(t.TempDir()); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), CIFAR10TestFile) {
		t.Fatalf("empty dir: %v", err)
	}
	// A malformed batch is named with its offset.
	bad := cifarBatches()
	bad["data_batch_2.bin"][CIFAR10RecordBytes] = 255
	dir = t.TempDir()
	writeCIFAR10(t, dir, bad)
	if _, _, err := LoadCIFAR10(dir); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "data_batch_2.bin: offset 3073: record 1: label 255") {
		t.Fatalf("bad label: %v", err)
	}
}

// TestCIFAR10RecordLocal: changing one record changes its own row and nothing else (the
// preprocessing never looks at other records).
func TestCIFAR10RecordLocal(t *testing.T) {
	a := cifarRecords([]byte{0, 1, 2, 3, 4}, 5)
	b := slices.Clone(a)
	for j := 2 * CIFAR10RecordBytes; j < 3*CIFAR10RecordBytes; j++ {
		b[j] = 255 - b[j]
	}
	b[2*CIFAR10RecordBytes] = 9
	da, err := ReadCIFAR10(bytes.NewReader(a), "a")
	if err != nil {
		t.Fatal(err)
	}
	db, err := ReadCIFAR10(bytes.NewReader(b), "b")
	if err != nil {
		t.Fatal(err)
	}
	for i := range da.N {
		same := slices.Equal(da.Row(i), db.Row(i)) && da.Y[i] == db.Y[i]
		if same != (i != 2) {
			t.Errorf("row %d: same = %v", i, same)
		}
	}
}

func TestExtractCIFAR10(t *testing.T) {
	files := cifarBatches()
	archive := tarGz(t, officialMembers(files))
	dir := t.TempDir()
	if err := ExtractCIFAR10(bytes.NewReader(archive), "a.tar.gz", dir); err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, CIFAR10Dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %d bytes, %v; want %d bytes", name, len(got), err, len(want))
		}
	}
	// Only the batches are written.
	ents, err := os.ReadDir(filepath.Join(dir, CIFAR10Dir))
	if err != nil || len(ents) != 6 {
		t.Fatalf("%d entries, %v; want the 6 batches", len(ents), err)
	}
	if _, _, err := LoadCIFAR10(dir); err != nil {
		t.Fatal(err)
	}
}

func TestExtractCIFAR10Refusals(t *testing.T) {
	files := cifarBatches()
	base := officialMembers(files)
	with := func(extra ...tarMember) []tarMember { return append(slices.Clone(base), extra...) }
	batch := CIFAR10Dir + "/data_batch_1.bin"
	replace := func(name string, m tarMember) []tarMember {
		out := slices.Clone(base)
		for i := range out {
			if out[i].name == name {
				out[i] = m
			}
		}
		return out
	}
	drop := func(name string) []tarMember {
		return slices.DeleteFunc(slices.Clone(base), func(m tarMember) bool { return m.name == name })
	}
	big := make([]byte, 100)
	for _, tc := range []struct {
		name    string
		members []tarMember
		want    string
	}{
		{"dotdot", with(tarMember{name: "../evil.bin", body: files["test_batch.bin"]}), `member "../evil.bin"`},
		{"dotdot inside", with(tarMember{name: CIFAR10Dir + "/../../x", body: []byte("x")}), "not inside the extraction directory"},
		{"absolute", with(tarMember{name: "/tmp/cifar-evil", body: []byte("x")}), "an absolute path"},
		{"backslash", with(tarMember{name: `..\evil`, body: []byte("x")}), "a backslash"},
		{"symlink", with(tarMember{name: CIFAR10Dir + "/link", typ: tar.TypeSymlink, link: "/etc/passwd"}), "links and devices are refused"},
		{"symlink batch", replace(batch, tarMember{name: batch, typ: tar.TypeSymlink, link: "/etc/passwd"}), "links and devices are refused"},
		{"hardlink", with(tarMember{name: CIFAR10Dir + "/hard", typ: tar.TypeLink, link: batch}), "links and devices are refused"},
		{"fifo", with(tarMember{name: CIFAR10Dir + "/fifo", typ: tar.TypeFifo}), "links and devices are refused"},
		{"duplicate", with(tarMember{name: "./" + batch, body: files["data_batch_1.bin"]}), "a second copy of data_batch_1.bin"},
		{"empty batch", replace(batch, tarMember{name: batch}), "size 0 bytes"},
		{"partial record", replace(batch, tarMember{name: batch, body: files["data_batch_1.bin"][:100]}), "size 100 bytes"},
		{"oversized batch", replace(batch, tarMember{name: batch, body: big, size: maxCIFAR10Batch + CIFAR10RecordBytes}), "more than an official batch"},
		{"missing", drop(CIFAR10Dir + "/test_batch.bin"), "no member cifar-10-batches-bin/test_batch.bin"},
		{"not gzip", nil, "not a gzip stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "x")
			// An earlier extraction's file must survive a refused archive unchanged.
			writeCIFAR10(t, filepath.Join(dir, CIFAR10Dir), map[string][]byte{"test_batch.bin": []byte("old")})
			in := []byte("plain text")
			if tc.members != nil {
				in = tarGz(t, tc.members)
			}
			err := ExtractCIFAR10(bytes.NewReader(in), "a.tar.gz", dir)
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v; want one line matching ErrFormat with %q", err, tc.want)
			}
			checkOnlyOld(t, root, dir)
		})
	}
}

// checkOnlyOld checks that root holds nothing but dir/cifar-10-batches-bin/test_batch.bin with
// its old contents: no file written, none replaced, no temporary file left.
func checkOnlyOld(t *testing.T, root, dir string) {
	t.Helper()
	var got []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			got = append(got, p)
		}
		return nil
	})
	old := filepath.Join(dir, CIFAR10Dir, "test_batch.bin")
	if err != nil || !slices.Equal(got, []string{old}) {
		t.Fatalf("files after a refused extraction: %v (%v), want only %s", got, err, old)
	}
	if b, _ := os.ReadFile(old); string(b) != "old" {
		t.Fatalf("%s was replaced", old)
	}
}

func TestExtractCIFAR10Bomb(t *testing.T) {
	files := cifarBatches()
	// A member of zeros that compresses to a few kB but unpacks past the bound.
	ms := append(officialMembers(files), tarMember{name: CIFAR10Dir + "/padding", body: make([]byte, 4<<20)})
	archive := tarGz(t, ms)
	if len(archive) > 64<<10 {
		t.Fatalf("the bomb is %d bytes compressed", len(archive))
	}
	root := t.TempDir()
	dir := filepath.Join(root, "x")
	writeCIFAR10(t, filepath.Join(dir, CIFAR10Dir), map[string][]byte{"test_batch.bin": []byte("old")})
	err := extractCIFAR10(bytes.NewReader(archive), "bomb.tar.gz", dir, 2<<20)
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "unpacks to more than 2097152 bytes") {
		t.Fatalf("got %v", err)
	}
	checkOnlyOld(t, root, dir)
	// The same archive is within the real bound.
	if err := ExtractCIFAR10(bytes.NewReader(archive), "ok.tar.gz", dir); err != nil {
		t.Fatal(err)
	}
}

func TestExtractCIFAR10CorruptGzip(t *testing.T) {
	archive := tarGz(t, officialMembers(cifarBatches()))
	archive[len(archive)-6] ^= 1 // the CRC-32 in the gzip trailer
	root := t.TempDir()
	dir := filepath.Join(root, "x")
	writeCIFAR10(t, filepath.Join(dir, CIFAR10Dir), map[string][]byte{"test_batch.bin": []byte("old")})
	err := ExtractCIFAR10(bytes.NewReader(archive), "crc.tar.gz", dir)
	if !errors.Is(err, gzip.ErrChecksum) || !errors.Is(err, ErrFormat) {
		t.Fatalf("got %v", err)
	}
	checkOnlyOld(t, root, dir)
}

func TestCIFAR10Table(t *testing.T) {
	src := CIFAR10Source()
	if len(src.Mirrors) == 0 || len(src.Files) != 1 || src.Files[0].Name != CIFAR10Archive {
		t.Fatalf("%+v", src)
	}
	f := src.Files[0]
	if err := f.check(); err != nil || f.Size <= 0 || len(f.MD5) != 32 || len(f.SHA256) != 64 {
		t.Fatalf("%+v: %v", f, err)
	}
	// The tables are fresh copies.
	CIFAR10Files()[0].Name = "changed"
	CIFAR10TrainFiles()[0] = "changed"
	if CIFAR10Files()[0].Name != CIFAR10Archive || CIFAR10TrainFiles()[0] != "data_batch_1.bin" {
		t.Error("CIFAR-10 tables return shared state")
	}
}

// fakeCIFAR10Source serves a generated archive as a mirror would, with its true sums.
func fakeCIFAR10Source(t *testing.T, archive []byte) (Source, *httptest.Server, *atomic.Int32) {
	t.Helper()
	hits := new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path != "/kriz/"+CIFAR10Archive {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(archive)
	}))
	t.Cleanup(srv.Close)
	sha := sha256.Sum256(archive)
	md := md5.Sum(archive)
	return Source{
		Name:    "cifar10",
		Mirrors: []string{srv.URL + "/kriz"},
		Files:   []RemoteFile{{Name: CIFAR10Archive, Size: int64(len(archive)), SHA256: hex.EncodeToString(sha[:]), MD5: hex.EncodeToString(md[:])}},
	}, srv, hits
}

func TestFetchCIFAR10(t *testing.T) {
	archive := tarGz(t, officialMembers(cifarBatches()))
	src, srv, hits := fakeCIFAR10Source(t, archive)
	ctx := context.Background()
	dir := t.TempDir()
	bdir, err := FetchCIFAR10(ctx, srv.Client(), src, dir)
	if err != nil || bdir != filepath.Join(dir, CIFAR10Dir) || hits.Load() != 1 {
		t.Fatalf("FetchCIFAR10 = %q, %v after %d requests", bdir, err, hits.Load())
	}
	if _, _, err := LoadCIFAR10(dir); err != nil {
		t.Fatal(err)
	}
	// Present: nothing is fetched, even offline.
	srv.Close()
	if _, err := FetchCIFAR10(ctx, srv.Client(), src, dir); err != nil || hits.Load() != 1 {
		t.Fatalf("second call: %v after %d requests", err, hits.Load())
	}
	// The archive alone (downloaded by hand): checked and extracted offline.
	dir2 := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir2, CIFAR10Archive), archive, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := FetchCIFAR10(ctx, srv.Client(), src, dir2); err != nil {
		t.Fatalf("archive present, offline: %v", err)
	}
	if _, _, err := LoadCIFAR10(dir2); err != nil {
		t.Fatal(err)
	}
	// Offline with nothing there: an error, no file left.
	dir3 := t.TempDir()
	if _, err := FetchCIFAR10(ctx, srv.Client(), src, dir3); err == nil || !strings.Contains(err.Error(), "download failed") {
		t.Fatalf("offline: %v", err)
	}
	if ents, _ := os.ReadDir(dir3); len(ents) != 0 {
		t.Fatalf("offline: %d entries left", len(ents))
	}
}

func TestFetchCIFAR10WrongArchive(t *testing.T) {
	archive := tarGz(t, officialMembers(cifarBatches()))
	src, srv, _ := fakeCIFAR10Source(t, archive)
	ctx := context.Background()
	// A wrong MD5 alone is caught (the SHA-256 and size are right).
	bad := src
	bad.Files = slices.Clone(src.Files)
	bad.Files[0].MD5 = strings.Repeat("0", 32)
	dir := t.TempDir()
	if _, err := FetchCIFAR10(ctx, srv.Client(), bad, dir); !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "md5") {
		t.Fatalf("wrong MD5: %v", err)
	}
	// A corrupt archive already in the directory is replaced by a download, then extracted.
	if err := os.WriteFile(filepath.Join(dir, CIFAR10Archive), archive[:100], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := FetchCIFAR10(ctx, srv.Client(), src, dir); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadCIFAR10(dir); err != nil {
		t.Fatal(err)
	}
}
