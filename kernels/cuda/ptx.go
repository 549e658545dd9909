// Package cuda holds the device kernels of dpsgd's CUDA backend: dpsgd.cu (the source,
// C-compatible CUDA, see its header) and dpsgd.ptx, built from it by `make ptx` with clang or
// nvcc and committed, embedded here so that one CGO_ENABLED=0 binary carries its kernels. The
// PTX starts with a header recording the source's SHA-256 and the compiler; a test fails when
// dpsgd.cu changed but dpsgd.ptx was not rebuilt. Package github.com/dpsgd/dpsgd/cuda loads
// the PTX with cuModuleLoadData and launches its entries.
package cuda

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"regexp"
	"strings"
)

//go:embed dpsgd.ptx
var ptx string

//go:embed dpsgd.cu
var source string

// PTX returns the embedded PTX text (header included; PTX accepts // comments).
func PTX() string { return ptx }

// Source returns the embedded CUDA source the PTX was built from.
func Source() string { return source }

// header returns the value of the "// key: value" line of the embedded PTX's header, or "".
func header(key string) string { return HeaderOf(ptx, key) }

// HeaderOf returns the value of the "// key: value" line in the header of the PTX text
// (mkptx.sh writes source-sha256 and compiler), or "" when it has none, as a PTX built
// outside make ptx.
func HeaderOf(text, key string) string {
	for _, line := range strings.SplitN(text, "\n", 8) {
		if v, ok := strings.CutPrefix(line, "// "+key+": "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// SourceSHA256Of returns the hex SHA-256 of a kernel source text, as mkptx.sh records it.
func SourceSHA256Of(src string) string {
	sum := sha256.Sum256([]byte(src))
	return hex.EncodeToString(sum[:])
}

// SourceSHA256 returns the hex SHA-256 of the source recorded in the PTX header.
func SourceSHA256() string { return header("source-sha256") }

// Compiler returns the compiler line recorded in the PTX header.
func Compiler() string { return header("compiler") }

var entryRE = regexp.MustCompile(`(?m)^\.visible \.entry ([A-Za-z_][A-Za-z0-9_]*)\(`)

// Entries lists the kernel names (.entry) of the PTX, in file order.
func Entries() []string {
	var out []string
	for _, m := range entryRE.FindAllStringSubmatch(ptx, -1) {
		out = append(out, m[1])
	}
	return out
}
