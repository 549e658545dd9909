package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// TestKeyStoreRoundTrip: a new run's key is written with mode 0600 in a 0700 directory, loads
// back with the same secret (same sampler key and MACs), and two runs differ in id and secret.
func TestKeyStoreRoundTrip(t *testing.T) {
	s, err := OpenKeyStore(filepath.Join(t.TempDir(), "keys"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.NewRun()
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.NewRun()
	if err != nil {
		t.Fatal(err)
	}
	if !validRunID(a.ID()) || a.ID() == b.ID() || a.SamplerKey() == b.SamplerKey() {
		t.Fatalf("two runs: ids %s %s, sampler keys equal %v", a.ID(), b.ID(), a.SamplerKey() == b.SamplerKey())
	}
	got, err := s.Load(a.ID())
	if err != nil {
		t.Fatal(err)
	}
	if got.SamplerKey() != a.SamplerKey() || string(got.MAC("x").Sum(nil)) != string(a.MAC("x").Sum(nil)) {
		t.Fatalf("loaded key differs from the new one")
	}
	if string(a.MAC("x").Sum(nil)) == string(a.MAC("y").Sum(nil)) {
		t.Fatalf("MAC ignores its label")
	}
	if runtime.GOOS != "windows" {
		fi, err := os.Stat(filepath.Join(s.Dir(), a.ID(), "secret"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("secret file: %v, mode %v; want 0600", err, fi.Mode().Perm())
		}
		for _, d := range []string{s.Dir(), filepath.Join(s.Dir(), a.ID())} {
			if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
				t.Fatalf("%s: %v, mode %v; want 0700", d, err, fi.Mode().Perm())
			}
		}
		// A key readable by others is refused, naming the fix.
		path := filepath.Join(s.Dir(), a.ID(), "secret")
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Load(a.ID()); !errors.Is(err, ErrKeyStore) || !strings.Contains(err.Error(), "chmod 600") {
			t.Fatalf("loose mode: err = %v", err)
		}
	}
	if _, err := s.Load(strings.Repeat("0c", 16)); !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), s.Dir()) {
		t.Fatalf("missing run: err = %v, want ErrNoKey naming the store", err)
	}
	if _, err := s.Load("../etc"); !errors.Is(err, ErrKeyStore) {
		t.Fatalf("bad run id: err = %v", err)
	}
}

// TestSeal: a sealed value unseals with its run's key and label only, and does not show.
func TestSeal(t *testing.T) {
	s, _ := OpenKeyStore(t.TempDir())
	a, _ := s.NewRun()
	b, _ := s.NewRun()
	const v = 0x0123456789abcdef
	sealed := a.Seal(SeedLabel, v)
	if got, err := a.Unseal(SeedLabel, sealed); err != nil || got != v {
		t.Fatalf("unseal: %x, %v", got, err)
	}
	if got, _ := b.Unseal(SeedLabel, sealed); got == v {
		t.Errorf("another run's key unseals the seed")
	}
	if got, _ := a.Unseal(SamplerSeedLabel, sealed); got == v {
		t.Errorf("another label unseals the seed")
	}
	if strings.Contains(sealed, "0123456789abcdef") || sealed == a.Seal(SeedLabel, v+1) {
		t.Errorf("sealed %s", sealed)
	}
	if _, err := a.Unseal(SeedLabel, "xyz"); !errors.Is(err, ErrKeyStore) {
		t.Errorf("malformed sealed value: %v", err)
	}
}

// TestKeyStoreClaim: generations advance one claim at a time; a claim from a stale generation
// is refused with ErrStale saying why; of many concurrent claims of one generation exactly one
// wins.
func TestKeyStoreClaim(t *testing.T) {
	s, _ := OpenKeyStore(t.TempDir())
	k, err := s.NewRun()
	if err != nil {
		t.Fatal(err)
	}
	if g, err := k.Generation(); g != 0 || err != nil {
		t.Fatalf("new run: generation %d, %v", g, err)
	}
	if g, err := k.Claim(0, 10); g != 1 || err != nil {
		t.Fatalf("claim 0 → %d, %v", g, err)
	}
	_, err = k.Claim(0, 10)
	if !errors.Is(err, ErrStale) || !strings.Contains(err.Error(), "already resumed") || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("second claim of generation 0: err = %v", err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, stale := 0, 0
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := k.Claim(1, 20)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				wins++
			} else if errors.Is(err, ErrStale) {
				stale++
			}
		}()
	}
	wg.Wait()
	if wins != 1 || stale != 15 {
		t.Fatalf("concurrent claims: %d won, %d stale; want 1 and 15", wins, stale)
	}
	if g, _ := k.Generation(); g != 2 {
		t.Fatalf("generation %d after two claims", g)
	}
}

// TestDefaultKeyDir: DPSGD_KEY_DIR wins, then XDG_STATE_HOME; the store recognizes a
// checkpoint inside itself.
func TestDefaultKeyDir(t *testing.T) {
	t.Setenv(KeyDirEnv, "/tmp/k")
	t.Setenv("XDG_STATE_HOME", "/tmp/state")
	if d, _ := DefaultKeyDir(); d != "/tmp/k" {
		t.Errorf("with %s: %s", KeyDirEnv, d)
	}
	t.Setenv(KeyDirEnv, "")
	if d, _ := DefaultKeyDir(); d != filepath.Join("/tmp/state", "dpsgd", "keys") {
		t.Errorf("with XDG_STATE_HOME: %s", d)
	}
	s, _ := OpenKeyStore("/tmp/k")
	if !s.Holds("/tmp/k/run.ckpt") || !s.Holds("/tmp/k/a/run.ckpt") || s.Holds("/tmp/run.ckpt") || s.Holds("/tmp/kk/run.ckpt") {
		t.Errorf("Holds")
	}
}
