// Package testkeys points the checkpoint key store of a test binary at a shared temporary
// directory, so that tests which write checkpoints never touch the user's state directory.
package testkeys

import (
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/dpsgd/dpsgd/engine/checkpoint"
)

// Use sets the key store (checkpoint.KeyDirEnv) to a directory of the system's temporary
// directory shared by this user's test binaries (each run has its own random id), unless the
// environment already names one, and removes the runs left there more than an hour ago. Call
// it from a test package's init. Tests that look at the store itself use their own directory.
func Use() {
	if os.Getenv(checkpoint.KeyDirEnv) != "" {
		return
	}
	dir := filepath.Join(os.TempDir(), "dpsgd-test-keys-"+strconv.Itoa(os.Getuid()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > time.Hour {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	os.Setenv(checkpoint.KeyDirEnv, dir)
}
