package bench

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteReportWritesEverything: WriteReport writes every file of ReportFiles, non-empty and
// with mode 0644, and a second report over the first replaces it, leaving no temporary file.
func TestWriteReportWritesEverything(t *testing.T) {
	res, err := Samplers(context.Background(), tinyConfig(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	Round(res)
	dir := t.TempDir()
	for range 2 {
		if err := WriteReport(dir, res); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range ReportFiles() {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o644 || st.Size() == 0 {
			t.Errorf("%s: mode %v, %d bytes; want 0644 and some bytes", f, st.Mode().Perm(), st.Size())
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != len(ReportFiles()) {
		for _, e := range ents {
			t.Log(e.Name())
		}
		t.Errorf("%d entries in the directory, want the %d report files", len(ents), len(ReportFiles()))
	}
}
