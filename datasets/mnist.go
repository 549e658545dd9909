package datasets

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// MNIST geometry.
const (
	MNISTRows    = 28
	MNISTCols    = 28
	MNISTClasses = 10
)

// MNISTPixel is the feature of one MNIST pixel byte p: p/255, a fixed map that depends on nothing
// but the pixel (LoadMNIST encodes every image with it).
func MNISTPixel(p byte) float32 { return float32(p) / 255 }

// mnistCandidates lists the names tried for one MNIST file, in order: the official gzip name,
// the decompressed name, and the dotted variants some mirrors use ("train-images.idx3-ubyte").
func mnistCandidates(base string) []string {
	alt := strings.Replace(base, "-idx", ".idx", 1)
	return []string{base + ".gz", base, alt + ".gz", alt}
}

// findFile returns the first candidate that exists in dir as a regular file.
func findFile(dir string, candidates []string) (string, error) {
	for _, c := range candidates {
		p := filepath.Join(dir, c)
		st, err := os.Stat(p)
		if err == nil && st.Mode().IsRegular() {
			return p, nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("datasets: %s: %w", p, err)
		}
	}
	return "", fmt.Errorf("datasets: none of %v found in %s: %w", candidates, dir, fs.ErrNotExist)
}

func readIDXFile(path string) (*IDX, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	}
	defer f.Close()
	size := int64(-1)
	if st, err := f.Stat(); err == nil {
		size = st.Size()
	}
	return readIDX(f, path, size)
}

// LoadMNIST reads the MNIST training and test sets from dir: train-images-idx3-ubyte,
// train-labels-idx1-ubyte, t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, each either with
// or without the ".gz" suffix (the dotted names "train-images.idx3-ubyte" are accepted too).
// Compression is detected from the content, not the name. Pixels are scaled to [0, 1] by the
// fixed map p/255, which depends on nothing but the pixel (no dataset mean or maximum); the
// per-example Shape is [1, 28, 28], D = 784, Classes = 10.
//
// The images must be IDX type 0x08 with 3 dims (magic 2051) of 28×28, the labels type 0x08
// with 1 dim (magic 2049) and values 0–9, and the counts must match. Since pixels are bytes,
// no NaN, infinite or out-of-range value can reach the features; any other element type is
// refused, and a label outside 0–9 rejects the file with its byte offset and example index.
func LoadMNIST(dir string) (train, test *Dataset, err error) {
	train, err = loadMNISTSplit(dir, "train", "mnist/train")
	if err != nil {
		return nil, nil, err
	}
	test, err = loadMNISTSplit(dir, "t10k", "mnist/test")
	if err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

func loadMNISTSplit(dir, prefix, name string) (*Dataset, error) {
	imgPath, err := findFile(dir, mnistCandidates(prefix+"-images-idx3-ubyte"))
	if err != nil {
		return nil, err
	}
	lblPath, err := findFile(dir, mnistCandidates(prefix+"-labels-idx1-ubyte"))
	if err != nil {
		return nil, err
	}
	lbl, err := readIDXFile(lblPath)
	if err != nil {
		return nil, err
	}
	if lbl.Type != IDXUint8 || len(lbl.Dims) != 1 {
		return nil, &ParseError{File: lblPath, Offset: 0, Msg: fmt.Sprintf("IDX magic 0x%08x (type 0x%02x, %d dims), want 0x00000801 (2049) for MNIST labels", lbl.Magic(), lbl.Type, len(lbl.Dims))}
	}
	img, err := readIDXFile(imgPath)
	if err != nil {
		return nil, err
	}
	if img.Type != IDXUint8 || len(img.Dims) != 3 {
		return nil, &ParseError{File: imgPath, Offset: 0, Msg: fmt.Sprintf("IDX magic 0x%08x (type 0x%02x, %d dims), want 0x00000803 (2051) for MNIST images", img.Magic(), img.Type, len(img.Dims))}
	}
	if img.Dims[1] != MNISTRows || img.Dims[2] != MNISTCols {
		return nil, &ParseError{File: imgPath, Offset: 8, Msg: fmt.Sprintf("images are %d×%d, want %d×%d", img.Dims[1], img.Dims[2], MNISTRows, MNISTCols)}
	}
	n := img.Dims[0]
	if lbl.Dims[0] != n {
		return nil, &ParseError{File: lblPath, Offset: 4, Msg: fmt.Sprintf("%d labels but %s holds %d images", lbl.Dims[0], filepath.Base(imgPath), n)}
	}
	y := make([]int, n)
	for i, b := range lbl.Data {
		if int(b) >= MNISTClasses {
			return nil, &ParseError{File: lblPath, Offset: 8 + int64(i), Msg: fmt.Sprintf("label %d of example %d out of range [0, %d)", b, i, MNISTClasses)}
		}
		y[i] = int(b)
	}
	var lut [256]float32
	for v := range lut {
		lut[v] = MNISTPixel(byte(v))
	}
	x := make([]float32, len(img.Data))
	for i, b := range img.Data {
		x[i] = lut[b]
	}
	const d = MNISTRows * MNISTCols
	return &Dataset{
		Name:    name,
		X:       x,
		Y:       y,
		N:       n,
		D:       d,
		Classes: MNISTClasses,
		Shape:   []int{1, MNISTRows, MNISTCols},
	}, nil
}
