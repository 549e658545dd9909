package avxgemm

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
)

// TestAsmIsGenerated: gemm_amd64.s is what asmgen/main.go writes, so the kernels and the
// generator that documents them cannot drift apart.
func TestAsmIsGenerated(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the Go toolchain")
	}
	out, err := exec.Command("go", "run", "asmgen/main.go").Output()
	if err != nil {
		t.Fatalf("go run asmgen/main.go: %v", err)
	}
	have, err := os.ReadFile("gemm_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, have) {
		t.Fatal("gemm_amd64.s differs from the generator's output: run `go run asmgen/main.go > gemm_amd64.s` in internal/avxgemm")
	}
}
