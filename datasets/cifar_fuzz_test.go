package datasets

import (
	"archive/tar"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzReadCIFAR10: any input gives a dataset whose every row is its record decoded alone
// (label byte, then p/255 of each pixel byte), or a one-line ParseError; never a panic.
func FuzzReadCIFAR10(f *testing.F) {
	good := cifarRecords([]byte{3, 9}, 1)
	f.Add(good)
	f.Add(good[:CIFAR10RecordBytes])
	f.Add(good[:CIFAR10RecordBytes+1])
	f.Add(append([]byte{10}, good[1:]...))
	f.Add(gzipBytes(f, good))
	f.Add([]byte{})
	f.Add([]byte{0x1f})
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ReadCIFAR10(bytes.NewReader(data), "fuzz.bin")
		if err != nil {
			if d != nil || !errors.Is(err, ErrFormat) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("result %v, error %q: want nil and a one-line ErrFormat", d, err)
			}
			return
		}
		if len(data) == 0 || len(data)%CIFAR10RecordBytes != 0 || d.N != len(data)/CIFAR10RecordBytes {
			t.Fatalf("accepted %d bytes as %d records", len(data), d.N)
		}
		if err := d.Validate(); err != nil {
			t.Fatal(err)
		}
		for i := range d.N {
			rec := data[i*CIFAR10RecordBytes : (i+1)*CIFAR10RecordBytes]
			if d.Y[i] != int(rec[0]) {
				t.Fatalf("record %d: label %d, byte %d", i, d.Y[i], rec[0])
			}
			row := d.Row(i)
			for j, p := range rec[1:] {
				if row[j] != float32(p)/255 || row[j] < 0 || row[j] > 1 {
					t.Fatalf("record %d feature %d = %v, pixel byte %d", i, j, row[j], p)
				}
			}
		}
	})
}

// FuzzExtractCIFAR10: any input extracts the six batches or is refused with a one-line error;
// either way nothing is written outside dir/cifar-10-batches-bin, nothing but the six batch
// names is written there, a refusal writes nothing, and no temporary file is left.
func FuzzExtractCIFAR10(f *testing.F) {
	files := map[string][]byte{}
	for _, n := range append(CIFAR10TrainFiles(), CIFAR10TestFile) {
		files[n] = cifarRecords([]byte{byte(len(n) % 10)}, len(n))
	}
	base := officialMembers(files)
	f.Add(tarGz(f, base))
	f.Add(tarGz(f, append(slices.Clone(base), tarMember{name: "../escape", body: []byte("x")})))
	f.Add(tarGz(f, append(slices.Clone(base), tarMember{name: CIFAR10Dir + "/l", typ: tar.TypeSymlink, link: "../../escape"})))
	f.Add(tarGz(f, base[:3]))
	f.Add(gzipBytes(f, []byte("not a tar stream")))
	f.Add([]byte{0x1f, 0x8b, 8})
	f.Fuzz(func(t *testing.T, data []byte) {
		root := t.TempDir()
		dir := filepath.Join(root, "x")
		err := extractCIFAR10(bytes.NewReader(data), "fuzz.tar.gz", dir, 1<<20)
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("multi-line error %q", err)
		}
		want := map[string]bool{}
		for _, n := range append(CIFAR10TrainFiles(), CIFAR10TestFile) {
			want[filepath.Join(dir, CIFAR10Dir, n)] = true
		}
		var got []string
		walkErr := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p == root || p == dir || p == filepath.Join(dir, CIFAR10Dir) {
				return nil
			}
			if !want[p] || !d.Type().IsRegular() {
				t.Errorf("unexpected %s (%v)", p, d.Type())
			}
			got = append(got, p)
			return nil
		})
		if walkErr != nil {
			t.Fatal(walkErr)
		}
		if err != nil && len(got) != 0 {
			t.Fatalf("refused (%v) but wrote %v", err, got)
		}
		if err == nil && len(got) != 6 {
			t.Fatalf("accepted but wrote %v", got)
		}
		if err == nil {
			// What was extracted is loadable or refused by the loader, never a panic.
			if _, _, lerr := LoadCIFAR10(dir); lerr != nil && !errors.Is(lerr, ErrFormat) {
				t.Fatalf("extracted batches: %v", lerr)
			}
			for p := range want {
				if st, err := os.Stat(p); err != nil || st.Size()%CIFAR10RecordBytes != 0 {
					t.Fatalf("%s: %v", p, err)
				}
			}
		}
	})
}
