package atomicfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

// faultyFile fails a write past limit bytes with ENOSPC (a full disk), and Sync or Close with
// EIO when asked.
type faultyFile struct {
	*os.File
	limit               int
	failSync, failClose bool
}

func (f *faultyFile) Write(p []byte) (int, error) {
	if len(p) > f.limit {
		n, _ := f.File.Write(p[:f.limit])
		f.limit = 0
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	f.limit -= len(p)
	return f.File.Write(p)
}

func (f *faultyFile) Sync() error {
	if f.failSync {
		return &os.PathError{Op: "sync", Path: f.Name(), Err: syscall.EIO}
	}
	return f.File.Sync()
}

func (f *faultyFile) Close() error {
	err := f.File.Close()
	if f.failClose {
		return &os.PathError{Op: "close", Path: f.Name(), Err: syscall.EIO}
	}
	return err
}

// faulty returns a Writer whose temporary files are fault-injecting ones.
func faulty(limit int, failSync, failClose bool) Writer {
	return Writer{CreateTemp: func(dir, pattern string) (File, error) {
		f, err := os.CreateTemp(dir, pattern)
		if err != nil {
			return nil, err
		}
		return &faultyFile{File: f, limit: limit, failSync: failSync, failClose: failClose}, nil
	}}
}

// entries returns the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestWriteFileCrashSafe: a write that fails at any point (disk full at any byte, a failed
// sync, a failed close) returns the cause, leaves the previous contents byte for byte and no
// temporary file; a good write replaces them with the requested permissions.
func TestWriteFileCrashSafe(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state")
	old := []byte("previous contents\n")
	if err := WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("new contents "), 100)
	type fault struct {
		name string
		w    Writer
		want error
	}
	var faults []fault
	for _, limit := range []int{0, 1, len(data) / 2, len(data) - 1} {
		faults = append(faults, fault{"disk full", faulty(limit, false, false), syscall.ENOSPC})
	}
	faults = append(faults, fault{"sync", faulty(1<<30, true, false), syscall.EIO}, fault{"close", faulty(1<<30, false, true), syscall.EIO})
	for _, tc := range faults {
		if err := tc.w.WriteFile(path, data, 0o644); !errors.Is(err, tc.want) {
			t.Fatalf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, old) {
			t.Fatalf("%s: the previous contents changed", tc.name)
		}
		if names := entries(t, dir); len(names) != 1 {
			t.Fatalf("%s: directory holds %q, want only the target", tc.name, names)
		}
	}
	// An abandoned write (the process dies before Commit) leaves the target as it was.
	p, err := Create(path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write(data); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, old) {
		t.Fatal("an uncommitted write changed the target")
	}
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
		t.Fatal("after Commit the target does not hold the new contents")
	}
	if st, err := os.Stat(path); err != nil || runtime.GOOS != "windows" && st.Mode().Perm() != 0o644 {
		t.Fatalf("mode after Commit: %v, %v, want 0644", st.Mode(), err)
	}
	if err := p.Commit(); err == nil {
		t.Fatal("a second Commit succeeded")
	}
	p.Abort() // no effect after Commit
	if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
		t.Fatal("Abort after Commit changed the target")
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Fatalf("directory holds %q, want only the target", names)
	}
	// A failed rename (the target is a directory that is not empty) removes the temporary file.
	sub := filepath.Join(dir, "sub")
	if err := os.MkdirAll(filepath.Join(sub, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(sub, data, 0o644); err == nil {
		t.Fatal("renaming over a directory succeeded")
	}
	if names := entries(t, dir); len(names) != 2 {
		t.Fatalf("after a failed rename the directory holds %q, want the target and sub", names)
	}
	// A missing directory is an error, and creates nothing.
	if err := WriteFile(filepath.Join(dir, "no", "such", "file"), data, 0o644); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing directory: err = %v", err)
	}
}

// TestCommitAllAllOrNothing: when one of several writes fails before the renames, no target
// changes and no temporary file remains; when all succeed, every target has its new contents.
func TestCommitAllAllOrNothing(t *testing.T) {
	dir := t.TempDir()
	names := []string{"a.json", "b.csv", "c.md"}
	for _, n := range names {
		if err := WriteFile(filepath.Join(dir, n), []byte("old "+n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for bad := range names {
		var ps []*Pending
		for i, n := range names {
			w := Writer{}
			if i == bad {
				w = faulty(1<<30, true, false)
			}
			p, err := w.Create(filepath.Join(dir, n), 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Write([]byte("new " + n)); err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
		}
		if err := CommitAll(ps...); !errors.Is(err, syscall.EIO) {
			t.Fatalf("sync of %s fails: err = %v, want EIO", names[bad], err)
		}
		for _, n := range names {
			if got, _ := os.ReadFile(filepath.Join(dir, n)); string(got) != "old "+n {
				t.Fatalf("sync of %s fails: %s holds %q", names[bad], n, got)
			}
		}
		if got := entries(t, dir); len(got) != len(names) {
			t.Fatalf("sync of %s fails: directory holds %q", names[bad], got)
		}
	}
	var ps []*Pending
	for _, n := range names {
		p, err := Create(filepath.Join(dir, n), 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Write([]byte("new " + n)); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if err := CommitAll(ps...); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if got, _ := os.ReadFile(filepath.Join(dir, n)); string(got) != "new "+n {
			t.Fatalf("%s holds %q after CommitAll", n, got)
		}
	}
}
