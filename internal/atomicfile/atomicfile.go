// Package atomicfile is the one home of the module's crash-safe file writes: the new contents
// go to a temporary file in the target's directory, which is synced, closed and renamed over
// the target, and the directory is then synced so that the rename itself is durable. A crash,
// a full disk or a failed sync at any point leaves the target with either its previous
// contents or the new ones, never a mixture, and a failed write leaves no temporary file.
// Checkpoints and run keys (engine/checkpoint), dataset downloads (datasets) and benchmark
// reports (bench) are written through it.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// File is what a write needs of its temporary file; *os.File is one.
type File interface {
	io.Writer
	Sync() error
	Close() error
	Name() string
}

// Writer makes atomic writes. CreateTemp makes the temporary file (os.CreateTemp's contract);
// nil means os.CreateTemp, and tests set one that injects faults. The zero Writer is ready
// to use; so are the package-level Create and WriteFile.
type Writer struct {
	CreateTemp func(dir, pattern string) (File, error)
}

// Pending is a write in progress: what is written to it replaces its target only at Commit.
type Pending struct {
	f      File
	target string
	done   bool // committed, or aborted
}

// Create begins an atomic write of path with permissions perm: a temporary file
// ".BASE.tmp-*" in path's directory. Write to it, then Commit it, or Abort it on any error.
func (w Writer) Create(path string, perm fs.FileMode) (*Pending, error) {
	create := w.CreateTemp
	if create == nil {
		create = func(dir, pattern string) (File, error) { return os.CreateTemp(dir, pattern) }
	}
	f, err := create(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	p := &Pending{f: f, target: path}
	if err := os.Chmod(f.Name(), perm); err != nil {
		p.Abort()
		return nil, err
	}
	return p, nil
}

// WriteFile writes data to path with permissions perm atomically. On any error the temporary
// file is removed and path keeps its previous contents, unless the error is the directory's
// sync after the rename: then path has the new contents, whose rename may not survive a crash.
func (w Writer) WriteFile(path string, data []byte, perm fs.FileMode) error {
	p, err := w.Create(path, perm)
	if err != nil {
		return err
	}
	if _, err := p.Write(data); err != nil {
		p.Abort()
		return err
	}
	return p.Commit()
}

// Create is Writer{}.Create.
func Create(path string, perm fs.FileMode) (*Pending, error) { return Writer{}.Create(path, perm) }

// WriteFile is Writer{}.WriteFile.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return Writer{}.WriteFile(path, data, perm)
}

// Write writes to the temporary file.
func (p *Pending) Write(b []byte) (int, error) { return p.f.Write(b) }

// Abort closes and removes the temporary file; the target is untouched. It does nothing after
// Commit or another Abort.
func (p *Pending) Abort() {
	if p.done {
		return
	}
	p.done = true
	_ = p.f.Close()
	_ = os.Remove(p.f.Name())
}

// Commit replaces the target by what was written: see CommitAll.
func (p *Pending) Commit() error { return CommitAll(p) }

// CommitAll syncs and closes every temporary file, and only when all are complete renames
// each over its target, in order, then syncs each target directory once. An error before the
// renames aborts every write, so that no target changes; an error in a rename aborts the
// writes not yet renamed (the earlier targets already have their new contents). An error
// syncing a directory is returned after all the renames.
func CommitAll(ps ...*Pending) error {
	for _, p := range ps {
		if p.done {
			return fmt.Errorf("atomicfile: %s: write already committed or aborted", p.target)
		}
	}
	for _, p := range ps {
		err := p.f.Sync()
		if cerr := p.f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(p.f.Name())
			p.done = true
			abortAll(ps)
			return err
		}
	}
	var dirs []string
	for i, p := range ps {
		if err := os.Rename(p.f.Name(), p.target); err != nil {
			abortAll(ps[i:])
			return err
		}
		p.done = true
		if d := filepath.Dir(p.target); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	// A rename is durable once its directory is synced; the files are complete either way.
	var errs []error
	for _, dir := range dirs {
		d, err := os.Open(dir)
		if err != nil {
			continue
		}
		if err := d.Sync(); err != nil {
			errs = append(errs, fmt.Errorf("syncing directory %s after the rename: %w", dir, err))
		}
		_ = d.Close()
	}
	return errors.Join(errs...)
}

// abortAll aborts the writes of ps not yet done; the closed files are closed again harmlessly.
func abortAll(ps []*Pending) {
	for _, p := range ps {
		p.Abort()
	}
}
