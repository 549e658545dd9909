package datasets

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadCIFAR10SizeLimit: batch files whose sizes claim more records than
// MaxCIFAR10Records (sparse files: nothing is written) are refused with the limit before
// anything is allocated — the features were allocated from the sizes, so a file of a few
// hundred gigabytes crashed the process out of memory — and so is a stream that runs past the
// limit.
func TestLoadCIFAR10SizeLimit(t *testing.T) {
	for _, c := range []struct {
		name    string
		records int64
	}{{"one file", MaxCIFAR10Records + 1}, {"one file, 1 TB", 1 << 40 / CIFAR10RecordBytes}, {"summed", MaxCIFAR10Records/5 + 1}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, n := range append(CIFAR10TrainFiles(), CIFAR10TestFile) {
				p := filepath.Join(dir, n)
				f, err := os.Create(p)
				if err != nil {
					t.Fatal(err)
				}
				size := int64(CIFAR10RecordBytes)
				if n == "data_batch_1.bin" || c.name == "summed" {
					size = c.records * CIFAR10RecordBytes
				}
				if err := f.Truncate(size); err != nil {
					f.Close()
					t.Skipf("sparse file of %d bytes: %v", size, err)
				}
				f.Close()
			}
			_, _, err := LoadCIFAR10(dir)
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "at most") {
				t.Fatalf("got %v, want a format error naming the limit", err)
			}
		})
	}
	// A stream of unknown size: refused once past the limit (3 here), not read to its end.
	r := &zeroRecords{left: 10 * CIFAR10RecordBytes}
	if _, _, err := appendCIFAR10(nil, nil, r, "stream", -1, 3); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("stream: got %v", err)
	}
	if r.left < 6*CIFAR10RecordBytes {
		t.Fatalf("the stream was read %d bytes past the limit", 7*CIFAR10RecordBytes-r.left)
	}
	// Exactly the limit is accepted.
	r = &zeroRecords{left: 3 * CIFAR10RecordBytes}
	if _, y, err := appendCIFAR10(nil, nil, r, "stream", -1, 3); err != nil || len(y) != 3 {
		t.Fatalf("stream at the limit: %d records, %v", len(y), err)
	}
}

// zeroRecords is a reader of left zero bytes (records of label 0, black images).
type zeroRecords struct{ left int64 }

func (z *zeroRecords) Read(p []byte) (int, error) {
	if z.left == 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), z.left))
	clear(p[:n])
	z.left -= int64(n)
	return n, nil
}
