package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"regexp"
	"slices"
	"testing"
)

// TestPTXMatchesSource fails when dpsgd.cu changed but dpsgd.ptx (its header's hash) did not:
// run `make ptx`.
func TestPTXMatchesSource(t *testing.T) {
	src, err := os.ReadFile("dpsgd.cu")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(src)
	if got, want := SourceSHA256(), hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("dpsgd.ptx was built from a source with SHA-256 %q, dpsgd.cu has %s: run `make ptx`", got, want)
	}
	if string(src) != Source() {
		t.Fatal("embedded source differs from dpsgd.cu on disk")
	}
	if Compiler() == "" {
		t.Fatal("PTX header records no compiler")
	}
}

// TestEntriesAreTheSourceKernels checks that every KERNEL of the source is an .entry of the
// PTX and nothing else is.
func TestEntriesAreTheSourceKernels(t *testing.T) {
	re := regexp.MustCompile(`(?m)^KERNEL void ([A-Za-z_][A-Za-z0-9_]*)\(`)
	var want []string
	for _, m := range re.FindAllStringSubmatch(Source(), -1) {
		want = append(want, m[1])
	}
	got := Entries()
	slices.Sort(want)
	slices.Sort(got)
	if len(want) < 15 || !slices.Equal(got, want) {
		t.Fatalf("PTX entries %v, source kernels %v", got, want)
	}
}

// TestNoExternalCalls checks that the PTX is self-contained: no libdevice or other external
// functions that cuModuleLoadData could not resolve.
func TestNoExternalCalls(t *testing.T) {
	if regexp.MustCompile(`(?m)^\s*\.extern\s`).MatchString(PTX()) {
		t.Fatal("PTX declares external symbols")
	}
}
