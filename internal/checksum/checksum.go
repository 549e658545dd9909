// Package checksum checks the SHA-256 trailer that closes dpsgd's binary files (model files,
// docs/model-files.md, and checkpoints, docs/reliability.md): after a decoder has parsed the sections of a file, what
// is left must be exactly the 32-byte SHA-256 of everything before it.
//
// Role: a shared helper of the module's decoders (internal/: not part of the API).
package checksum

import (
	"bytes"
	"crypto/sha256"
	"fmt"
)

// CheckTrailer checks that rest, the unparsed end of data, is the SHA-256 of the bytes of data
// before it. Its errors wrap errFormat (the decoder's format error) and say whether the
// trailer is cut short, followed by trailing data, or does not match.
func CheckTrailer(data, rest []byte, errFormat error) error {
	if len(rest) < sha256.Size {
		return fmt.Errorf("%w: truncated: %d bytes where the %d-byte SHA-256 should be", errFormat, len(rest), sha256.Size)
	}
	if len(rest) > sha256.Size {
		return fmt.Errorf("%w: %d bytes of trailing data after the SHA-256", errFormat, len(rest)-sha256.Size)
	}
	if sum := sha256.Sum256(data[:len(data)-sha256.Size]); !bytes.Equal(sum[:], rest) {
		return fmt.Errorf("%w: corrupt: SHA-256 mismatch (the file was altered or damaged)", errFormat)
	}
	return nil
}
