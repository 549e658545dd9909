package checkpoint

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/dpsgd/dpsgd/internal/atomicfile"
)

// The key store keeps what a checkpoint must not hold: one 256-bit secret per run, and the
// run's resume generations. It is a directory (DefaultKeyDir, or one the caller names) that is
// not beside the checkpoints; each run has a subdirectory named by its random run id, which
// the checkpoint records (Config.RunID):
//
//	DIR/                      mode 0700
//	DIR/RUNID/                mode 0700
//	DIR/RUNID/secret          mode 0600  {"format", "run_id", "secret" (64 hex digits), "created"}
//	DIR/RUNID/gen-N           mode 0600  one per resume of a secure run (N = 1, 2, …)
//
// The secret keys every fingerprint a checkpoint holds (HMAC-SHA256: of the training data, of
// the sampler's batches, of a secure sampler's key), so that the file is no membership test
// for someone who can guess the data, and a secure sampler's key is derived from it
// (RunKey.SamplerKey) rather than stored anywhere.
//
// Generations: a checkpoint records its generation (State.Generation); the store's current
// generation is the largest N of its gen-N files (0 without one). A secure resume requires the
// two to be equal and claims the next one by creating gen-(N+1) exclusively (O_EXCL, so two
// resumes racing for it cannot both win); the checkpoints written after carry it. A resume
// from a stale copy is refused (ErrStale). The store cannot tell copies of itself apart: a user
// who copies the key store along with the checkpoint can resume each copy once.

// KeyDirEnv names the environment variable that overrides the default key store directory.
const KeyDirEnv = "DPSGD_KEY_DIR"

// Errors of the key store.
var (
	// ErrKeyStore: the key store is unusable (unreadable, a file with loose permissions, a
	// malformed record), or the run's key is not in it.
	ErrKeyStore = errors.New("checkpoint: key store")
	// ErrNoKey (wrapping ErrKeyStore): the run's key is not in the key store.
	ErrNoKey = fmt.Errorf("%w: run key not found", ErrKeyStore)
	// ErrStale: the checkpoint is not of the run's current generation — it, or a copy of it,
	// was already resumed — or another process took the run's generation while this one ran.
	ErrStale = errors.New("checkpoint: stale generation")
)

// DefaultKeyDir returns the key store directory: $DPSGD_KEY_DIR if set, else
// $XDG_STATE_HOME/dpsgd/keys, else ~/.local/state/dpsgd/keys on Unix systems other than macOS,
// else the user configuration directory (os.UserConfigDir)/dpsgd/keys.
func DefaultKeyDir() (string, error) {
	if d := os.Getenv(KeyDirEnv); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "dpsgd", "keys"), nil
	}
	if runtime.GOOS != "windows" && runtime.GOOS != "darwin" && runtime.GOOS != "ios" && runtime.GOOS != "plan9" {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, ".local", "state", "dpsgd", "keys"), nil
		}
	}
	d, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("%w: no default directory (set %s or pass a key directory): %w", ErrKeyStore, KeyDirEnv, err)
	}
	return filepath.Join(d, "dpsgd", "keys"), nil
}

// KeyStore is a key store directory.
type KeyStore struct{ dir string }

// OpenKeyStore returns the key store at dir ("" = DefaultKeyDir()). Nothing is created until a
// run is.
func OpenKeyStore(dir string) (*KeyStore, error) {
	if dir == "" {
		d, err := DefaultKeyDir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrKeyStore, dir, err)
	}
	return &KeyStore{dir: abs}, nil
}

// Dir returns the store's absolute directory.
func (s *KeyStore) Dir() string { return s.dir }

// Holds reports whether path (a checkpoint) lies in the store's directory: a key store beside
// its checkpoints protects nothing.
func (s *KeyStore) Holds(path string) bool {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(s.dir, abs)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// RunKey is one run's secret, as the key store holds it.
type RunKey struct {
	id     string
	secret [32]byte
	store  *KeyStore
}

// runKeyFile is the JSON of DIR/RUNID/secret.
type runKeyFile struct {
	Format  string `json:"format"`
	RunID   string `json:"run_id"`
	Secret  string `json:"secret"`
	Created string `json:"created"`
}

const runKeyFormat = "dpsgd run key 1"

// validRunID reports whether id is 32 lowercase hex digits (a 128-bit random id).
func validRunID(id string) bool {
	if len(id) != 32 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.ToLower(id) == id
}

// NewRun makes a run: a random 128-bit id and a 256-bit secret from the operating system's
// generator, written atomically to DIR/RUNID/secret with mode 0600 (the directories 0700).
func (s *KeyStore) NewRun() (*RunKey, error) {
	var raw [16]byte
	k := &RunKey{store: s}
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, fmt.Errorf("%w: reading the OS generator: %w", ErrKeyStore, err)
	}
	if _, err := rand.Read(k.secret[:]); err != nil {
		return nil, fmt.Errorf("%w: reading the OS generator: %w", ErrKeyStore, err)
	}
	k.id = hex.EncodeToString(raw[:])
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyStore, err)
	}
	rd := filepath.Join(s.dir, k.id)
	if err := os.Mkdir(rd, 0o700); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyStore, err)
	}
	data, err := json.Marshal(runKeyFile{Format: runKeyFormat, RunID: k.id, Secret: hex.EncodeToString(k.secret[:]),
		Created: time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyStore, err)
	}
	// Mode 0600: Load refuses a key file readable by others.
	if err := atomicfile.WriteFile(filepath.Join(rd, "secret"), append(data, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("%w: writing the run key: %w", ErrKeyStore, err)
	}
	return k, nil
}

// Load returns the key of run id. A missing key wraps ErrNoKey and says where it was looked
// for; a key file readable by others than its owner is refused (Unix).
func (s *KeyStore) Load(id string) (*RunKey, error) {
	if !validRunID(id) {
		return nil, fmt.Errorf("%w: run id %q: want 32 hex digits", ErrKeyStore, id)
	}
	path := filepath.Join(s.dir, id, "secret")
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: run %s has no key in the key store %s", ErrNoKey, id, s.dir)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyStore, err)
	}
	if runtime.GOOS != "windows" && runtime.GOOS != "plan9" && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %#o: the run key must be readable by its owner only (chmod 600 %s)",
			ErrKeyStore, path, fi.Mode().Perm(), path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyStore, err)
	}
	var f runKeyFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrKeyStore, path, err)
	}
	b, err := hex.DecodeString(f.Secret)
	if f.Format != runKeyFormat || f.RunID != id || err != nil || len(b) != 32 {
		return nil, fmt.Errorf("%w: %s: not a run key of run %s (format %q)", ErrKeyStore, path, id, f.Format)
	}
	k := &RunKey{id: id, store: s}
	copy(k.secret[:], b)
	return k, nil
}

// ID returns the run id (public: the checkpoint records it).
func (k *RunKey) ID() string { return k.id }

// Store returns the key store holding the key.
func (k *RunKey) Store() *KeyStore { return k.store }

// MAC returns an HMAC-SHA256 under the run's secret, with label (a domain separator) and a
// zero byte already written.
func (k *RunKey) MAC(label string) hash.Hash {
	h := hmac.New(sha256.New, k.secret[:])
	h.Write([]byte(label))
	h.Write([]byte{0})
	return h
}

// SamplerKey returns the key of the run's secure sampler (sampler.Secure), derived from the
// secret: HMAC-SHA256(secret, "dpsgd/sampler-key/v1"). Neither it nor the secret is in any
// checkpoint.
func (k *RunKey) SamplerKey() [32]byte {
	var key [32]byte
	copy(key[:], k.MAC("dpsgd/sampler-key/v1").Sum(nil))
	return key
}

// Labels of the values a checkpoint seals (RunKey.Seal).
const (
	SeedLabel        = "dpsgd/seal/seed/v1"
	SamplerSeedLabel = "dpsgd/seal/sampler-seed/v1"
)

// Seal returns v sealed under the run's secret for label: v XOR the first 8 bytes of
// HMAC-SHA256(secret, label), in hex. Each label seals one value of the run (a one-time pad),
// so the sealed value says nothing about v without the secret, while equal values seal
// equally, which lets a resume compare them.
func (k *RunKey) Seal(label string, v uint64) string {
	var b [8]byte
	copy(b[:], k.MAC(label).Sum(nil))
	for i := range b {
		b[i] ^= byte(v >> (8 * i))
	}
	return hex.EncodeToString(b[:])
}

// Unseal inverts Seal.
func (k *RunKey) Unseal(label, sealed string) (uint64, error) {
	b, err := hex.DecodeString(sealed)
	if err != nil || len(b) != 8 {
		return 0, fmt.Errorf("%w: sealed value %q: want 16 hex digits", ErrKeyStore, sealed)
	}
	pad := k.MAC(label).Sum(nil)
	var v uint64
	for i := range b {
		v |= uint64(b[i]^pad[i]) << (8 * i)
	}
	return v, nil
}

const genPrefix = "gen-"

// Generation returns the run's current generation: the largest N of its gen-N files, 0 without
// one.
func (k *RunKey) Generation() (uint64, error) {
	ents, err := os.ReadDir(filepath.Join(k.store.dir, k.id))
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrKeyStore, err)
	}
	var g uint64
	for _, e := range ents {
		name, ok := strings.CutPrefix(e.Name(), genPrefix)
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(name, 10, 63)
		if err != nil || strconv.FormatUint(n, 10) != name {
			continue
		}
		g = max(g, n)
	}
	return g, nil
}

// genClaim is the JSON of DIR/RUNID/gen-N (informative: the file's existence is the claim).
type genClaim struct {
	Generation uint64 `json:"generation"`
	FromStep   int    `json:"from_step"`
	Claimed    string `json:"claimed"`
}

// Claim advances the run from generation from to from+1 for a resume at step: it fails with
// ErrStale unless from is the current generation, and creates DIR/RUNID/gen-(from+1) with
// O_EXCL, so of two resumes of one generation at most one succeeds, however they race.
func (k *RunKey) Claim(from uint64, step int) (uint64, error) {
	cur, err := k.Generation()
	if err != nil {
		return 0, err
	}
	if cur != from {
		return 0, staleErr(k.id, from, cur)
	}
	next := from + 1
	dir := filepath.Join(k.store.dir, k.id)
	path := filepath.Join(dir, genPrefix+strconv.FormatUint(next, 10))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return 0, staleErr(k.id, from, next)
	}
	if err != nil {
		return 0, fmt.Errorf("%w: claiming generation %d: %w", ErrKeyStore, next, err)
	}
	data, _ := json.Marshal(genClaim{Generation: next, FromStep: step, Claimed: time.Now().UTC().Format(time.RFC3339)})
	_, werr := f.Write(append(data, '\n'))
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		// The claim stands (the file exists): a retry of this checkpoint is refused, which is
		// the safe side.
		return 0, fmt.Errorf("%w: recording generation %d: %w", ErrKeyStore, next, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return next, nil
}

func staleErr(id string, have, cur uint64) error {
	return fmt.Errorf("%w: the checkpoint is of generation %d of run %s, the key store's is %d: this checkpoint, or a copy "+
		"of it, was already resumed. A secure resume draws fresh noise, so resuming it again would release the same epochs "+
		"twice with independent noise, which the privacy ledger would not cover; resume the run's newest checkpoint instead",
		ErrStale, have, id, cur)
}
