package datasets

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestLoadMNISTReal checks the real files against published facts: 60000/10000 examples of
// 28×28, first training label 5 and first test label 7, the class counts listed in
// shared/datasets/mnist/README.md, and the training-set pixel mean 0.1307 and standard
// deviation 0.3081 that PyTorch's MNIST examples normalize with.
func TestLoadMNISTReal(t *testing.T) {
	train, test := realMNIST(t)
	for _, c := range []struct {
		d      *Dataset
		n      int
		first  int
		counts []int
	}{
		{train, 60000, 5, []int{5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949}},
		{test, 10000, 7, []int{980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009}},
	} {
		d := c.d
		if err := d.Validate(); err != nil {
			t.Fatal(err)
		}
		if d.N != c.n || d.D != 784 || d.Classes != 10 || !slices.Equal(d.Shape, []int{1, 28, 28}) {
			t.Fatalf("%s: N=%d D=%d Classes=%d Shape=%v", d.Name, d.N, d.D, d.Classes, d.Shape)
		}
		if d.Y[0] != c.first {
			t.Errorf("%s: first label %d, want %d", d.Name, d.Y[0], c.first)
		}
		if got := d.ClassCounts(); !slices.Equal(got, c.counts) {
			t.Errorf("%s: class counts %v, want %v", d.Name, got, c.counts)
		}
		lo, hi := slices.Min(d.X), slices.Max(d.X)
		if lo != 0 || hi != 1 {
			t.Errorf("%s: pixel range [%v, %v], want [0, 1]", d.Name, lo, hi)
		}
	}
	var s, ss float64
	for _, v := range train.X {
		s += float64(v)
		ss += float64(v) * float64(v)
	}
	n := float64(len(train.X))
	mean := s / n
	std := math.Sqrt(ss/n - mean*mean)
	if math.Abs(mean-0.1307) > 1e-4 || math.Abs(std-0.3081) > 1e-4 {
		t.Errorf("train pixel mean %.5f std %.5f, want 0.1307 and 0.3081", mean, std)
	}
	// Every image has ink: no all-zero rows.
	for i := range train.N {
		if slices.Max(train.Row(i)) == 0 {
			t.Fatalf("train image %d is blank", i)
		}
	}
}

// mnistFixture writes a small MNIST-format split under the given file names.
func mnistFixture(t *testing.T, dir, prefix string, n int, gz bool, names ...string) (pixels, labels []byte) {
	t.Helper()
	pixels = make([]byte, n*784)
	for i := range pixels {
		pixels[i] = byte((i*31 + n) % 256)
	}
	labels = make([]byte, n)
	for i := range labels {
		labels[i] = byte((i * 3) % 10)
	}
	img := idxBytes(IDXUint8, []uint32{uint32(n), 28, 28}, pixels)
	lbl := idxBytes(IDXUint8, []uint32{uint32(n)}, labels)
	if gz {
		img, lbl = gzipBytes(t, img), gzipBytes(t, lbl)
	}
	imgName, lblName := prefix+"-images-idx3-ubyte", prefix+"-labels-idx1-ubyte"
	if len(names) == 2 {
		imgName, lblName = names[0], names[1]
	}
	writeFile(t, dir, imgName, img)
	writeFile(t, dir, lblName, lbl)
	return pixels, labels
}

// TestLoadMNISTVariants: raw files, gzip content under a name without ".gz", dotted names.
func TestLoadMNISTVariants(t *testing.T) {
	dir := t.TempDir()
	pTrain, lTrain := mnistFixture(t, dir, "train", 7, false)                                                    // raw, plain names
	pTest, lTest := mnistFixture(t, dir, "t10k", 3, true, "t10k-images.idx3-ubyte", "t10k-labels.idx1-ubyte.gz") // gzip, dotted names
	train, test, err := LoadMNIST(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		d      *Dataset
		pix    []byte
		labels []byte
	}{{train, pTrain, lTrain}, {test, pTest, lTest}} {
		if err := c.d.Validate(); err != nil {
			t.Fatal(err)
		}
		if c.d.N != len(c.labels) {
			t.Fatalf("%s: N = %d, want %d", c.d.Name, c.d.N, len(c.labels))
		}
		for i, p := range c.pix {
			if want := float32(float64(p) / 255); math.Abs(float64(c.d.X[i]-want)) > 1e-7 {
				t.Fatalf("%s: pixel %d = %v, want %v", c.d.Name, i, c.d.X[i], want)
			}
		}
		for i, l := range c.labels {
			if c.d.Y[i] != int(l) {
				t.Fatalf("%s: label %d = %d, want %d", c.d.Name, i, c.d.Y[i], l)
			}
		}
	}
}

// TestLoadMNISTLeaveOneOut: MNIST's preprocessing (p/255) is fixed, so removing one training
// image leaves the shape and every other example's features and label unchanged; the pixel
// values 0 and 255, the extremes a byte can hold, map to 0 and 1.
func TestLoadMNISTLeaveOneOut(t *testing.T) {
	const n, j = 9, 4
	pixels := make([]byte, n*784)
	for i := range pixels {
		pixels[i] = byte(i * 37 % 256)
	}
	pixels[j*784] = 255 // the removed image holds the only 255
	for i := range pixels {
		if i/784 != j && pixels[i] == 255 {
			pixels[i] = 254
		}
	}
	labels := []byte{0, 1, 2, 3, 4, 5, 6, 7, 8}
	write := func(dir string, pix, lbl []byte) {
		writeFile(t, dir, "train-images-idx3-ubyte", idxBytes(IDXUint8, []uint32{uint32(len(lbl)), 28, 28}, pix))
		writeFile(t, dir, "train-labels-idx1-ubyte", idxBytes(IDXUint8, []uint32{uint32(len(lbl))}, lbl))
		mnistFixture(t, dir, "t10k", 3, false)
	}
	dir, dirOut := t.TempDir(), t.TempDir()
	write(dir, pixels, labels)
	write(dirOut, slices.Delete(slices.Clone(pixels), j*784, (j+1)*784), slices.Delete(slices.Clone(labels), j, j+1))
	train, test, err := LoadMNIST(dir)
	if err != nil {
		t.Fatal(err)
	}
	trainOut, testOut, err := LoadMNIST(dirOut)
	if err != nil {
		t.Fatal(err)
	}
	if trainOut.N != n-1 || trainOut.D != train.D || !slices.Equal(trainOut.Shape, train.Shape) || !slices.Equal(test.X, testOut.X) {
		t.Fatalf("N %d, D %d → %d, Shape %v → %v, or the test set changed", trainOut.N, train.D, trainOut.D, train.Shape, trainOut.Shape)
	}
	for i := range trainOut.N {
		src := i
		if i >= j {
			src = i + 1
		}
		if !slices.Equal(trainOut.Row(i), train.Row(src)) || trainOut.Y[i] != train.Y[src] {
			t.Fatalf("removing image %d changed example %d", j, src)
		}
	}
	if train.X[j*784] != 1 || slices.Min(train.X) != 0 {
		t.Errorf("pixel 255 → %v, min %v; want 1 and 0", train.X[j*784], slices.Min(train.X))
	}
}

func TestLoadMNISTErrors(t *testing.T) {
	t.Run("missing", func(t *testing.T) {
		_, _, err := LoadMNIST(t.TempDir())
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("empty dir: %v does not match fs.ErrNotExist", err)
		}
	})
	t.Run("missing test split", func(t *testing.T) {
		dir := t.TempDir()
		mnistFixture(t, dir, "train", 2, true)
		_, _, err := LoadMNIST(dir)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%v does not match fs.ErrNotExist", err)
		}
	})
	// Each case writes a valid test split and a broken train split.
	cases := []struct {
		name     string
		img, lbl []byte
		want     []string
	}{
		{"count mismatch",
			idxBytes(IDXUint8, []uint32{2, 28, 28}, make([]byte, 2*784)),
			idxBytes(IDXUint8, []uint32{3}, []byte{1, 2, 3}),
			[]string{"train-labels-idx1-ubyte", "3 labels", "2 images"}},
		{"label out of range",
			idxBytes(IDXUint8, []uint32{3, 28, 28}, make([]byte, 3*784)),
			idxBytes(IDXUint8, []uint32{3}, []byte{1, 10, 3}),
			[]string{"train-labels-idx1-ubyte", "offset 9", "label 10 of example 1"}},
		{"wrong image size",
			idxBytes(IDXUint8, []uint32{1, 27, 28}, make([]byte, 27*28)),
			idxBytes(IDXUint8, []uint32{1}, []byte{1}),
			[]string{"train-images-idx3-ubyte", "27×28"}},
		{"labels with image magic",
			idxBytes(IDXUint8, []uint32{1, 28, 28}, make([]byte, 784)),
			idxBytes(IDXUint8, []uint32{1, 1, 1}, []byte{1}),
			[]string{"train-labels-idx1-ubyte", "0x00000803", "want 0x00000801"}},
		{"float images",
			idxBytes(IDXFloat32, []uint32{1, 28, 28}, make([]byte, 4*784)),
			idxBytes(IDXUint8, []uint32{1}, []byte{1}),
			[]string{"train-images-idx3-ubyte", "0x00000d03"}},
		{"bad magic",
			append([]byte{0x08, 0x03, 0, 0}, make([]byte, 12)...),
			idxBytes(IDXUint8, []uint32{1}, []byte{1}),
			[]string{"train-images-idx3-ubyte", "offset 0", "bad IDX magic"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			mnistFixture(t, dir, "t10k", 1, false)
			writeFile(t, dir, "train-images-idx3-ubyte", c.img)
			writeFile(t, dir, "train-labels-idx1-ubyte", c.lbl)
			_, _, err := LoadMNIST(dir)
			checkFormatErr(t, err, c.want...)
		})
	}
	t.Run("truncated gz", func(t *testing.T) {
		dir := t.TempDir()
		mnistFixture(t, dir, "t10k", 1, false)
		_, _ = mnistFixture(t, dir, "train", 5, true)
		p := filepath.Join(dir, "train-images-idx3-ubyte")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir, "train-images-idx3-ubyte", b[:len(b)-20])
		_, _, err = LoadMNIST(dir)
		checkFormatErr(t, err, "train-images-idx3-ubyte")
	})
}

func BenchmarkLoadMNIST(b *testing.B) {
	dir := sharedDir(b, "mnist")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := LoadMNIST(dir); err != nil {
			b.Fatal(err)
		}
	}
}
