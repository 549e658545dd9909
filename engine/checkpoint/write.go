package checkpoint

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// file is what the atomic writer needs of a temporary file.
type file interface {
	io.Writer
	Sync() error
	Close() error
	Name() string
}

// createTemp makes the temporary file; tests substitute a fault-injecting one.
type createTemp func(dir, pattern string) (file, error)

func osCreateTemp(dir, pattern string) (file, error) { return os.CreateTemp(dir, pattern) }

// Write encodes c and writes it atomically to path: a temporary file in path's directory is
// written, synced and renamed over path, then the directory is synced. On any error the
// temporary file is removed, path keeps its previous contents, and the error wraps ErrWrite.
func Write(path string, c *Checkpoint) error {
	return write(path, c, osCreateTemp)
}

func write(path string, c *Checkpoint, create createTemp) error {
	data, err := Encode(c)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrWrite, path, err)
	}
	if err := writeAtomic(path, data, create); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrWrite, path, err)
	}
	return nil
}

// writeAtomic writes data to path through a synced temporary file and a rename.
func writeAtomic(path string, data []byte, create createTemp) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := create(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	// The rename is durable once the directory is synced. The file is complete either way.
	d, derr := os.Open(dir)
	if derr != nil {
		return nil
	}
	defer d.Close()
	if serr := d.Sync(); serr != nil {
		return fmt.Errorf("syncing directory %s after the rename: %w", dir, serr)
	}
	return nil
}
