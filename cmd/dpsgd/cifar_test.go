package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
)

// fakeCIFAR10 writes the six batches of a small fake CIFAR-10 into dir/cifar-10-batches-bin:
// perTrain records in each training batch, perTest in the test batch, labels cycling 0–9,
// pixels byte(7i + 13j). It returns the pixel bytes of the test batch's first record.
func fakeCIFAR10(t *testing.T, dir string, perTrain, perTest int) []byte {
	t.Helper()
	bdir := filepath.Join(dir, datasets.CIFAR10Dir)
	if err := os.MkdirAll(bdir, 0o755); err != nil {
		t.Fatal(err)
	}
	i := 0
	batch := func(n int) []byte {
		var b []byte
		for range n {
			b = append(b, byte(i%datasets.CIFAR10Classes))
			for j := range datasets.CIFARImageBytes {
				b = append(b, byte(7*i+13*j))
			}
			i++
		}
		return b
	}
	for _, name := range datasets.CIFAR10TrainFiles() {
		if err := os.WriteFile(filepath.Join(bdir, name), batch(perTrain), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	test := batch(perTest)
	if err := os.WriteFile(filepath.Join(bdir, datasets.CIFAR10TestFile), test, 0o644); err != nil {
		t.Fatal(err)
	}
	return test[1:datasets.CIFAR10RecordBytes]
}

// TestCIFAR10CNNArch: the CNN preset is a valid architecture on 3×32×32 inputs, with the
// parameter count worked out by hand from its layers.
func TestCIFAR10CNNArch(t *testing.T) {
	a := nn.CNN([]int{3, 32, 32}, 10, []int{32}, nn.Tanh)
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	// conv1: 16 filters of 3·8·8 on 32+2·3 → 16×16, pooled 2/1 → 15×15; conv2: 32 filters of
	// 16·4·4 on 15 → 6×6, pooled → 5×5; dense 32·5·5 → 32; out 32 → 10.
	want := (3*8*8+1)*16 + (16*4*4+1)*32 + (32*5*5+1)*32 + (32+1)*10
	if got := a.NumParams(); got != want {
		t.Fatalf("CNN on CIFAR-10: %d parameters, want %d", got, want)
	}
}

// TestTrainCIFAR10: train, save, eval and predict on generated CIFAR-10 batches through the
// command, as a user would.
func TestTrainCIFAR10(t *testing.T) {
	dir := t.TempDir()
	first := fakeCIFAR10(t, dir, 8, 10)
	model := filepath.Join(t.TempDir(), "c.dpsgd")
	code, out, errOut := runCmd(t, "train", "--dataset", "cifar10", "--data-dir", dir, "--epochs", "1", "--batch-size", "8",
		"--sigma", "1", "--seed", "1", "--quiet", "--json", "--allow-chance", "--save", model)
	if code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	m := lastJSON(t, out)
	wantParams := nn.CNN([]int{3, 32, 32}, 10, nil, nn.Tanh).NumParams()
	if m["dataset"] != "cifar10" || m["model"] != "cnn" || m["params"] != float64(wantParams) || m["epsilon"] == nil {
		t.Fatalf("dataset %v model %v params %v (want %d) epsilon %v", m["dataset"], m["model"], m["params"], wantParams, m["epsilon"])
	}
	code, out, errOut = runCmd(t, "eval", "--model", model, "--data-dir", dir)
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, errOut)
	}
	if e := lastJSON(t, out); e["dataset"] != "cifar10" || e["n"] != float64(10) || e["classes"] != float64(10) {
		t.Fatalf("eval: %v", e)
	}
	// predict reads CSV rows of 3072 pixel values in a record's order.
	px := make([]string, len(first))
	for j, p := range first {
		px[j] = fmt.Sprint(p)
	}
	rows := filepath.Join(t.TempDir(), "rows.csv")
	if err := os.WriteFile(rows, []byte(strings.Join(px, ",")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCmd(t, "predict", "--model", model, "--data", rows)
	if code != 0 || len(strings.Split(strings.TrimSpace(out), "\n")) != 2 {
		t.Fatalf("predict: exit %d: %s%s", code, out, errOut)
	}
	if err := os.WriteFile(rows, []byte(strings.Join(px[:784], ",")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut = runCmd(t, "predict", "--model", model, "--data", rows); code != 2 || !strings.Contains(errOut, "784 fields, want 3072") {
		t.Fatalf("predict of an MNIST-sized row: exit %d: %s", code, errOut)
	}
}

// TestCIFAR10NeverDownloadsUnasked: without --download a missing dataset is a usage error that
// says how to get it, and nothing is fetched; --download is refused for other datasets.
func TestCIFAR10NeverDownloadsUnasked(t *testing.T) {
	empty := t.TempDir()
	for _, args := range [][]string{
		{"train", "--dataset", "cifar10", "--data-dir", empty, "--allow-chance"},
		{"train", "--dataset", "cifar10", "--cache-dir", empty, "--allow-chance"},
	} {
		code, _, errOut := runCmd(t, args...)
		if code != 2 || !strings.Contains(errOut, "no CIFAR-10 batches in") || !strings.Contains(errOut, "--download") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d: %s", args, code, errOut)
		}
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Fatalf("%d entries written without --download", len(ents))
	}
	// An archive there, not extracted: --download extracts it, nothing else does.
	if err := os.WriteFile(filepath.Join(empty, datasets.CIFAR10Archive), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCmd(t, "train", "--dataset", "cifar10", "--data-dir", empty); code != 2 || !strings.Contains(errOut, "add --download to check and extract it") {
		t.Errorf("archive present: exit %d: %s", code, errOut)
	}
	for _, ds := range []string{"mnist", "synthetic"} {
		if code, _, errOut := runCmd(t, "train", "--dataset", ds, "--download"); code != 2 || !strings.Contains(errOut, "--download: for --dataset cifar10 only") {
			t.Errorf("--dataset %s --download: exit %d: %s", ds, code, errOut)
		}
	}
	// A malformed batch is a usage error naming the file and the record.
	bad := t.TempDir()
	fakeCIFAR10(t, bad, 2, 2)
	p := filepath.Join(bad, datasets.CIFAR10Dir, "data_batch_3.bin")
	b, _ := os.ReadFile(p)
	b[datasets.CIFAR10RecordBytes] = 42
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCmd(t, "train", "--dataset", "cifar10", "--data-dir", bad); code != 2 || !strings.Contains(errOut, "data_batch_3.bin: offset 3073: record 1: label 42") {
		t.Errorf("bad label: exit %d: %s", code, errOut)
	}
}

// TestCIFAR10DownloadOffline: --download with the mirror unreachable is one error that says
// what to do offline and leaves nothing behind; with a mirror it fetches, extracts and loads.
func TestCIFAR10DownloadOffline(t *testing.T) {
	dir := t.TempDir()
	fakeCIFAR10(t, dir, 1, 1)
	// Serve an archive of the fake batches as a mirror would.
	archive := filepath.Join(t.TempDir(), datasets.CIFAR10Archive)
	tarCIFAR10(t, filepath.Join(dir, datasets.CIFAR10Dir), archive)
	body, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body) }))
	src := datasets.Source{Name: "cifar10", Mirrors: []string{srv.URL}, Files: []datasets.RemoteFile{fileOf(t, archive)}}
	ctx := context.Background()
	into := t.TempDir()
	train, test, err := loadCIFAR10From(ctx, src, srv.Client(), into, "", true)
	if err != nil || train.N != 5 || test.N != 1 {
		t.Fatalf("download: %v", err)
	}
	srv.Close()
	offline := t.TempDir()
	_, _, err = loadCIFAR10From(ctx, src, srv.Client(), offline, "", true)
	var ue usageError
	if err == nil || errors.As(err, &ue) || !strings.Contains(err.Error(), "Offline? Fetch cifar-10-binary.tar.gz elsewhere") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("offline: %v", err)
	}
	if ents, _ := os.ReadDir(offline); len(ents) != 0 {
		t.Fatalf("offline: %d entries left", len(ents))
	}
}

// tarCIFAR10 packs the batches of bdir into a .tar.gz laid out as the official archive.
func tarCIFAR10(t *testing.T, bdir, archive string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, name := range append(datasets.CIFAR10TrainFiles(), datasets.CIFAR10TestFile) {
		b, err := os.ReadFile(filepath.Join(bdir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: datasets.CIFAR10Dir + "/" + name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(b))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(archive, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fileOf is the RemoteFile of path: its name, size and sums.
func fileOf(t *testing.T, path string) datasets.RemoteFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sha, md := sha256.Sum256(b), md5.Sum(b)
	return datasets.RemoteFile{Name: filepath.Base(path), Size: int64(len(b)), SHA256: hex.EncodeToString(sha[:]), MD5: hex.EncodeToString(md[:])}
}
