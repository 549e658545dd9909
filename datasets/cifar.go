package datasets

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// CIFAR-10 geometry: the binary version described on the dataset's page
// (https://www.cs.toronto.edu/~kriz/cifar.html; A. Krizhevsky, "Learning Multiple Layers of
// Features from Tiny Images", 2009). Each record is one label byte followed by the 3072 pixel
// bytes of a 32×32 colour image, channel-major: the 1024 red values row by row, then the green,
// then the blue.
const (
	CIFARChannels       = 3
	CIFARRows           = 32
	CIFARCols           = 32
	CIFARImageBytes     = CIFARChannels * CIFARRows * CIFARCols // 3072
	CIFAR10RecordBytes  = 1 + CIFARImageBytes                   // 3073
	CIFAR10Classes      = 10
	CIFAR10BatchRecords = 10000 // records in each official batch file
	// MaxCIFAR10Records bounds the records of one loaded set (the official sets hold 50000
	// and 10000): 2²⁰ records are 12.9 GB of float32 features. Files claiming more are
	// refused before anything is allocated, a stream once it passes the bound.
	MaxCIFAR10Records = 1 << 20
)

// CIFAR10Dir is the folder the official archive unpacks to, and where [LoadCIFAR10] also looks.
const CIFAR10Dir = "cifar-10-batches-bin"

// CIFAR10TestFile is the official test batch.
const CIFAR10TestFile = "test_batch.bin"

// CIFAR10TrainFiles returns the five official training batches, in the order their records
// are concatenated.
func CIFAR10TrainFiles() []string {
	return []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"}
}

// CIFAR10ClassNames returns the names of labels 0–9 (the archive's batches.meta.txt).
func CIFAR10ClassNames() []string {
	return []string{"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"}
}

// DecodeCIFAR10Record decodes one record of CIFAR10RecordBytes bytes: it writes the 3072
// features to dst (len(dst) must be CIFARImageBytes), each pixel byte p mapped to p/255 by
// [MNISTPixel] in the record's channel-major order, which is the [3, 32, 32] Shape of a
// [Dataset], and returns the label. A record of another length or a label above 9 is an
// error; nothing in the record can give a NaN or an out-of-range feature.
func DecodeCIFAR10Record(dst []float32, rec []byte) (int, error) {
	if len(rec) != CIFAR10RecordBytes {
		return 0, fmt.Errorf("record of %d bytes, want %d (1 label byte + %d pixel bytes)", len(rec), CIFAR10RecordBytes, CIFARImageBytes)
	}
	if len(dst) != CIFARImageBytes {
		return 0, fmt.Errorf("destination of %d features, want %d", len(dst), CIFARImageBytes)
	}
	if rec[0] >= CIFAR10Classes {
		return 0, fmt.Errorf("label %d out of range [0, %d)", rec[0], CIFAR10Classes)
	}
	for i, p := range rec[1:] {
		dst[i] = MNISTPixel(p)
	}
	return int(rec[0]), nil
}

// ReadCIFAR10 reads a CIFAR-10 batch in the binary format: whole records of
// CIFAR10RecordBytes bytes until the end of r, at least one. name is used in errors. The
// result has Shape [3, 32, 32], D = 3072, Classes = 10, and pixels scaled by p/255 as
// [LoadMNIST] scales them: a fixed map that reads one pixel (no dataset mean or standard
// deviation; docs/datasets.md says why CIFAR-10's customary channel means are not used).
//
// A label above 9 or a truncated last record rejects the whole input with a [ParseError]
// giving the byte offset and the record's index; so does an empty input. A gzip stream (an
// archive member not yet extracted) is named as such.
func ReadCIFAR10(r io.Reader, name string) (*Dataset, error) {
	return readCIFAR10(r, name, -1)
}

// readCIFAR10 is ReadCIFAR10 with the input's size when known (≥ 0; -1: unknown).
func readCIFAR10(r io.Reader, name string, size int64) (*Dataset, error) {
	var x []float32
	var y []int
	if size > 0 && size%CIFAR10RecordBytes == 0 && size/CIFAR10RecordBytes <= MaxCIFAR10Records {
		n := size / CIFAR10RecordBytes
		x = make([]float32, 0, n*CIFARImageBytes)
		y = make([]int, 0, n)
	}
	x, y, err := appendCIFAR10(x, y, r, name, size, MaxCIFAR10Records)
	if err != nil {
		return nil, err
	}
	return cifar10Dataset(name, x, y), nil
}

func cifar10Dataset(name string, x []float32, y []int) *Dataset {
	return &Dataset{
		Name:    name,
		X:       x,
		Y:       y,
		N:       len(y),
		D:       CIFARImageBytes,
		Classes: CIFAR10Classes,
		Shape:   []int{CIFARChannels, CIFARRows, CIFARCols},
	}
}

// appendCIFAR10 reads the records of r, appending their features to x and labels to y, at
// most limit records. A known size (≥ 0) that is not a whole, positive number of records, or
// more than limit, is refused before anything is read.
func appendCIFAR10(x []float32, y []int, r io.Reader, name string, size, limit int64) ([]float32, []int, error) {
	empty := "empty file: want at least one record of " + strconv.Itoa(CIFAR10RecordBytes) + " bytes"
	if size == 0 {
		return nil, nil, &ParseError{File: name, Offset: 0, Msg: empty}
	}
	if size > 0 && size%CIFAR10RecordBytes != 0 {
		return nil, nil, &ParseError{File: name, Offset: size - size%CIFAR10RecordBytes,
			Msg: fmt.Sprintf("size %d bytes is not a whole number of %d-byte records (%d records and %d bytes more)", size, CIFAR10RecordBytes, size/CIFAR10RecordBytes, size%CIFAR10RecordBytes)}
	}
	if size > 0 && size/CIFAR10RecordBytes > limit {
		return nil, nil, &ParseError{File: name, Offset: limit * CIFAR10RecordBytes, Msg: tooManyCIFAR10(size / CIFAR10RecordBytes)}
	}
	rec := make([]byte, CIFAR10RecordBytes)
	for i := 0; ; i++ {
		off := int64(i) * CIFAR10RecordBytes
		if int64(i) == limit {
			// One byte more than the limit allows is enough to refuse.
			if n, _ := io.ReadFull(r, rec[:1]); n == 1 {
				return nil, nil, &ParseError{File: name, Offset: off, Msg: tooManyCIFAR10(-1)}
			}
		}
		n, err := io.ReadFull(r, rec)
		if err == io.EOF {
			if i == 0 {
				return nil, nil, &ParseError{File: name, Offset: 0, Msg: empty}
			}
			return x, y, nil
		}
		if i == 0 && n >= 2 && rec[0] == 0x1f && rec[1] == 0x8b {
			return nil, nil, &ParseError{File: name, Offset: 0, Msg: "a gzip stream, not a CIFAR-10 batch: extract the archive first (dpsgd train --dataset cifar10 --download does)"}
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, nil, &ParseError{File: name, Offset: off, Msg: fmt.Sprintf("record %d truncated: %d of %d bytes", i, n, CIFAR10RecordBytes), Err: err}
		}
		if err != nil {
			return nil, nil, &ParseError{File: name, Offset: off, Msg: fmt.Sprintf("record %d", i), Err: err}
		}
		start := len(x)
		x = append(x, make([]float32, CIFARImageBytes)...)
		label, err := DecodeCIFAR10Record(x[start:], rec)
		if err != nil {
			return nil, nil, &ParseError{File: name, Offset: off, Msg: fmt.Sprintf("record %d: %v", i, err)}
		}
		y = append(y, label)
	}
}

// tooManyCIFAR10 says that a set holds more records than MaxCIFAR10Records (n of them when
// known, n ≥ 0).
func tooManyCIFAR10(n int64) string {
	if n >= 0 {
		return fmt.Sprintf("%d records: want at most %d in one set (MaxCIFAR10Records)", n, MaxCIFAR10Records)
	}
	return fmt.Sprintf("more records than a set may hold: want at most %d (MaxCIFAR10Records)", MaxCIFAR10Records)
}

// openCIFAR10 opens a batch file and returns its size.
func openCIFAR10(path string) (*os.File, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("datasets: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("datasets: %w", err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("datasets: %s: not a regular file", path)
	}
	return f, st.Size(), nil
}

// CIFAR10BatchDir returns the directory holding the CIFAR-10 batches: dir itself when it holds
// test_batch.bin, else dir/cifar-10-batches-bin (where the official archive unpacks) when that
// does. Otherwise the error matches fs.ErrNotExist.
func CIFAR10BatchDir(dir string) (string, error) {
	for _, d := range []string{dir, filepath.Join(dir, CIFAR10Dir)} {
		st, err := os.Stat(filepath.Join(d, CIFAR10TestFile))
		if err == nil && st.Mode().IsRegular() {
			return d, nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("datasets: %w", err)
		}
	}
	return "", fmt.Errorf("datasets: cifar10: no %s in %s nor in %s: %w", CIFAR10TestFile, dir, filepath.Join(dir, CIFAR10Dir), fs.ErrNotExist)
}

// LoadCIFAR10 reads the CIFAR-10 training set (data_batch_1.bin to data_batch_5.bin, in that
// order) and test set (test_batch.bin) from dir, or from dir/cifar-10-batches-bin
// ([CIFAR10BatchDir]). Every example has Shape [3, 32, 32] (channel-major, as stored), D =
// 3072, Classes = 10, and features p/255 (see [ReadCIFAR10]). Any file may hold any whole
// number of records (the official ones hold 10000); a missing file or a malformed one rejects
// the load with its name.
func LoadCIFAR10(dir string) (train, test *Dataset, err error) {
	bdir, err := CIFAR10BatchDir(dir)
	if err != nil {
		return nil, nil, err
	}
	train, err = loadCIFAR10Files(bdir, CIFAR10TrainFiles(), "cifar10/train")
	if err != nil {
		return nil, nil, err
	}
	test, err = loadCIFAR10Files(bdir, []string{CIFAR10TestFile}, "cifar10/test")
	if err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

// loadCIFAR10Files reads the batch files names of dir, in order, into one dataset: every file
// is opened and its size checked first, so the features are allocated once.
func loadCIFAR10Files(dir string, names []string, name string) (*Dataset, error) {
	files := make([]*os.File, len(names))
	sizes := make([]int64, len(names))
	defer func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}()
	var total int64
	for i, n := range names {
		f, size, err := openCIFAR10(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		files[i], sizes[i] = f, size
		if size%CIFAR10RecordBytes == 0 {
			if total += size / CIFAR10RecordBytes; total > MaxCIFAR10Records {
				return nil, &ParseError{File: f.Name(), Offset: 0, Msg: fmt.Sprintf("the files up to this one hold %s", tooManyCIFAR10(total))}
			}
		}
	}
	x := make([]float32, 0, total*CIFARImageBytes)
	y := make([]int, 0, total)
	for i, f := range files {
		var err error
		if x, y, err = appendCIFAR10(x, y, f, f.Name(), sizes[i], MaxCIFAR10Records-int64(len(y))); err != nil {
			return nil, err
		}
	}
	return cifar10Dataset(name, x, y), nil
}
