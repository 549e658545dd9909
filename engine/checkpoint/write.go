package checkpoint

import (
	"fmt"

	"github.com/dpsgd/dpsgd/internal/atomicfile"
)

// Write encodes c and writes it atomically to path, with mode 0600 (package
// internal/atomicfile): a temporary file in path's directory is written, synced and renamed
// over path, then the directory is synced. On any error the temporary file is removed, path
// keeps its previous contents, and the error wraps ErrWrite.
func Write(path string, c *Checkpoint) error {
	return write(path, c, atomicfile.Writer{})
}

// write is Write through w; tests pass a Writer that injects faults.
func write(path string, c *Checkpoint, w atomicfile.Writer) error {
	data, err := Encode(c)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrWrite, path, err)
	}
	if err := w.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrWrite, path, err)
	}
	return nil
}
