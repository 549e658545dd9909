package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
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

// TestPTXConstants checks that the constants of the noise kernels reach the PTX with the
// bits of the CPU kernels' constants (package kernels), computed here independently of the
// decimal literals of dpsgd.cu: a mistyped digit of (π/4)·2⁻⁵⁰ once moved every normal by
// ~10⁻¹² relative, which float32 rounding hid except under cancellation.
func TestPTXConstants(t *testing.T) {
	for _, c := range []struct {
		name string
		v    float64
	}{
		{"(π/4)·2⁻⁵⁰ (sincos_2pi)", math.Pi / 4 / (1 << 50)},
		{"2⁻⁵³ (u₁)", 0x1p-53},
		{"2⁻⁵² (Laplace u)", 0x1p-52},
		{"1/ln 2 (exp_neg)", 1 / math.Ln2},
		{"ln2Hi", math.Float64frombits(0x3fe62e42fee00000)},
		{"ln2Lo", math.Float64frombits(0x3dea39ef35793c76)},
	} {
		lit := fmt.Sprintf("0d%016X", math.Float64bits(c.v))
		if !strings.Contains(PTX(), lit) {
			t.Errorf("PTX lacks %s = %v (%s)", c.name, c.v, lit)
		}
	}
}

// TestPTXRoundingModes checks that every floating-point add, sub, mul, div and sqrt of the
// PTX names its rounding mode (.rn), which ptxas never contracts into an FMA, and that no
// approximate or fused form (mad, div.approx, sqrt.approx, rcp.approx) slipped in: the noise
// must be the CPU's numbers bit for bit on a real GPU too.
func TestPTXRoundingModes(t *testing.T) {
	op := regexp.MustCompile(`(?m)^\s*(add|sub|mul|div|sqrt|fma|mad|rcp)((?:\.[a-z0-9]+)*)\.f(32|64)\b`)
	n := 0
	for _, m := range op.FindAllStringSubmatch(PTX(), -1) {
		n++
		if m[1] == "mad" || !strings.HasPrefix(m[2], ".rn") {
			t.Errorf("PTX instruction %s%s.f%s: want an explicitly rounded (.rn) form", m[1], m[2], m[3])
		}
	}
	if n < 100 {
		t.Fatalf("found only %d floating-point instructions in the PTX", n)
	}
}
