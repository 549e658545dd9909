package main

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/engine/checkpoint"
	"github.com/dpsgd/dpsgd/internal/testkeys"
	"github.com/dpsgd/dpsgd/privacy"
)

// The package's tests write checkpoints: their run keys go to a temporary key store.
func init() { testkeys.Use() }

// ckptArgs is a small, fast training run (RDP accounting: no PLD calibration).
var ckptArgs = []string{"train", "--hidden", "8", "--batch-size", "512", "--accountant", "rdp", "--schedule", "constant", "--quiet", "--json"}

func ckptRun(t *testing.T, extra ...string) (int, map[string]any, string) {
	t.Helper()
	code, out, errOut := runCmd(t, append(append([]string(nil), ckptArgs...), extra...)...)
	if code != 0 && code != 1 {
		return code, nil, errOut
	}
	return code, lastJSON(t, out), errOut
}

// TestCkptResumeCLI: `train --resume PATH --epochs N` continues a finished shorter run to the
// same parameters (digest), ε and history length as an uninterrupted N-epoch run; the flags
// come from the checkpoint; the JSON reports the resume, the checkpoint and the guards; the
// seeded-mode warning is printed exactly once.
func TestCkptResumeCLI(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.ckpt")
	code, ref, errOut := ckptRun(t, "--epochs", "3", "--sigma", "1", "--seed", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if n := strings.Count(errOut, "not for production releases"); n != 1 || !strings.Contains(errOut, "--secure") {
		t.Errorf("seeded-mode warning printed %d times (want once, suggesting --secure): %q", n, errOut)
	}
	code, first, errOut := ckptRun(t, "--epochs", "2", "--sigma", "1", "--seed", "1", "--checkpoint", path, "--checkpoint-every", "10")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if first["resumed_from_step"] != nil || first["checkpoint"] != path || first["last_checkpoint_step"] != first["steps"] {
		t.Errorf("first run JSON: resumed %v, checkpoint %v, last %v, steps %v", first["resumed_from_step"], first["checkpoint"], first["last_checkpoint_step"], first["steps"])
	}
	for _, k := range []string{"diverged", "checkpoints_written", "secure", "params_digest"} {
		if _, ok := first[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	// Only --resume and --epochs: every other flag comes from the checkpoint.
	code, out, errOut := runCmd(t, "train", "--resume", path, "--epochs", "3", "--json", "--quiet")
	if code != 0 {
		t.Fatalf("resume: exit %d: %s", code, errOut)
	}
	got := lastJSON(t, out)
	if got["params_digest"] != ref["params_digest"] || got["epsilon"] != ref["epsilon"] || got["steps"] != ref["steps"] {
		t.Errorf("resumed: digest %v ε %v steps %v; uninterrupted: digest %v ε %v steps %v",
			got["params_digest"], got["epsilon"], got["steps"], ref["params_digest"], ref["epsilon"], ref["steps"])
	}
	if got["resumed_from_step"] != first["steps"] || len(got["history"].([]any)) != 3 {
		t.Errorf("resumed from %v (want %v), history of %d epochs", got["resumed_from_step"], first["steps"], len(got["history"].([]any)))
	}
	ck, err := checkpoint.Load(path)
	if err != nil || ck.Config.Meta["sigma"] != "1" || ck.Config.Meta["epochs"] != "3" {
		t.Fatalf("checkpoint after the resume: %v, meta %v", err, ck.Config.Meta)
	}
}

// TestCkptBadCheckpoints: corrupt, truncated, foreign and mismatched checkpoints, an epoch
// total below the checkpoint, and an unwritable checkpoint path are usage errors (exit 2)
// naming the problem.
func TestCkptBadCheckpoints(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.ckpt")
	if code, _, errOut := ckptRun(t, "--epochs", "2", "--sigma", "1", "--seed", "1", "--checkpoint", path); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flipped := append([]byte(nil), data...)
	flipped[len(flipped)/2] ^= 1
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--resume", write("trunc.ckpt", data[:len(data)-40])}, "truncated"},
		{[]string{"--resume", write("flip.ckpt", flipped)}, "SHA-256 mismatch"},
		{[]string{"--resume", write("foreign.ckpt", []byte("P5\n28 28\n255\n"))}, "not a dpsgd checkpoint"},
		{[]string{"--resume", filepath.Join(dir, "absent.ckpt")}, "no such file"},
		{[]string{"--resume", path, "--epochs", "3", "--key-dir", t.TempDir()}, "--key-dir"},
		{[]string{"--resume", path, "--epochs", "3", "--sigma", "1.5"}, "sigma: checkpoint has 1, this run has 1.5"},
		{[]string{"--resume", path, "--epochs", "3", "--clip", "2"}, "clip"},
		{[]string{"--resume", path, "--epochs", "3", "--batch-size", "256"}, "sampler"},
		{[]string{"--resume", path, "--epochs", "3", "--seed", "9"}, "seed"},
		{[]string{"--resume", path, "--epochs", "3", "--target-epsilon", "5"}, "budget"},
		{[]string{"--resume", path, "--epochs", "1"}, "want a total of at least 2 epochs"},
		{[]string{"--epochs", "1", "--checkpoint", filepath.Join(dir, "no", "dir", "x.ckpt")}, "write failed"},
		{[]string{"--epochs", "1", "--checkpoint-every", "5"}, "needs --checkpoint"},
		{[]string{"--epochs", "1", "--checkpoint", path, "--checkpoint-every", "-1"}, "--checkpoint-every -1"},
	} {
		code, _, errOut := runCmd(t, append([]string{"train", "--quiet", "--json"}, tc.args...)...)
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		last := lines[len(lines)-1]
		if code != 2 || !strings.Contains(last, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %q", tc.args, code, errOut, tc.want)
		}
	}
	// The failed resumes left the checkpoint as it was.
	if now, _ := os.ReadFile(path); string(now) != string(data) {
		t.Errorf("a refused resume changed the checkpoint")
	}
}

// TestCkptDivergence: a diverging run exits 1 with a message naming the divergence and the
// intact checkpoint, and its JSON says where it diverged.
func TestCkptDivergence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.ckpt")
	code, m, errOut := ckptRun(t, "--epochs", "2", "--sigma", "1", "--lr", "1e5", "--weight-decay", "1e5", "--optimizer", "sgd",
		"--checkpoint", path, "--checkpoint-every", "1")
	if code != 1 || !strings.Contains(errOut, "training diverged") || !strings.Contains(errOut, "last good checkpoint") {
		t.Fatalf("exit %d, stderr %q: want exit 1 naming the divergence", code, errOut)
	}
	if m["diverged"] != true || m["diverged_at_step"] == nil {
		t.Fatalf("JSON diverged %v at %v", m["diverged"], m["diverged_at_step"])
	}
	ck, err := checkpoint.Load(path)
	if err != nil || float64(ck.State.Step) != m["last_checkpoint_step"] || float64(ck.State.Step) >= m["diverged_at_step"].(float64) {
		t.Fatalf("checkpoint %v at step %v; JSON last %v diverged at %v", err, ck, m["last_checkpoint_step"], m["diverged_at_step"])
	}
}

// TestCkptSecure: --secure trains with no seed (JSON seed 0, secure true), prints no
// seeded-mode warning, derives its sampler key from the run's key in the key store (the
// checkpoint holds only a keyed fingerprint of it) and resumes (fresh noise: not bitwise);
// it refuses --seed, ball noise, and a seeded checkpoint.
func TestCkptSecure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secure.ckpt")
	code, m, errOut := ckptRun(t, "--secure", "--epochs", "1", "--sigma", "1", "--checkpoint", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if m["secure"] != true || m["seed"] != 0.0 || strings.Contains(errOut, "not for production") {
		t.Errorf("secure %v, seed %v, stderr %q", m["secure"], m["seed"], errOut)
	}
	ck, err := checkpoint.Load(path)
	if err != nil || !ck.Config.Secure || !ck.Config.Sampler.Secure || len(ck.Config.Sampler.KeyMAC) != 64 {
		t.Fatalf("secure checkpoint: %v, secure %v, sampler %+v", err, ck.Config.Secure, ck.Config.Sampler)
	}
	code, m2, errOut := ckptRun(t, "--secure", "--epochs", "1", "--sigma", "1")
	if code != 0 || m2["params_digest"] == m["params_digest"] {
		t.Errorf("two secure runs: exit %d (%s), digests %v and %v (want different: no seed)", code, errOut, m["params_digest"], m2["params_digest"])
	}
	code, out, errOut := runCmd(t, "train", "--resume", path, "--epochs", "2", "--quiet", "--json")
	if code != 0 {
		t.Fatalf("secure resume: exit %d: %s", code, errOut)
	}
	if r := lastJSON(t, out); r["secure"] != true || r["resumed_from_step"] != m["steps"] || r["steps"].(float64) != 2*m["steps"].(float64) {
		t.Errorf("secure resume: %v", r)
	}
	seeded := filepath.Join(dir, "seeded.ckpt")
	if code, _, errOut := ckptRun(t, "--epochs", "1", "--sigma", "1", "--seed", "1", "--checkpoint", seeded); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--secure", "--seed", "3"}, "--seed"},
		{[]string{"--secure", "--noise", "ball"}, "gaussian noise only"},
		{[]string{"--secure", "--resume", seeded}, "seeded run"},
	} {
		code, _, errOut := runCmd(t, append(append([]string(nil), ckptArgs...), tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %q", tc.args, code, errOut, tc.want)
		}
	}
}

// ckptKey loads the run key of the checkpoint at path from the key store at dir ("" = the
// default).
func ckptKey(t *testing.T, dir, path string) (*checkpoint.Checkpoint, *checkpoint.RunKey) {
	t.Helper()
	ck, err := checkpoint.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	store, err := checkpoint.OpenKeyStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	k, err := store.Load(ck.Config.RunID)
	if err != nil {
		t.Fatal(err)
	}
	return ck, k
}

// TestCkptNoSecretsCLI: the checkpoints of `dpsgd train` hold neither a secure run's sampler
// key nor a seeded run's seed (in hex, binary or decimal), nor their own path or the key
// store's; the run's key is in the key store named by --key-dir (mode 0600), and the flags'
// record says the file is private. Without the key store a resume is refused naming
// --key-dir.
func TestCkptNoSecretsCLI(t *testing.T) {
	keys, dir := t.TempDir(), t.TempDir()
	const seed = "8172635445362718"
	seeded, secure := filepath.Join(dir, "seeded.ckpt"), filepath.Join(dir, "secure.ckpt")
	if code, _, errOut := ckptRun(t, "--epochs", "1", "--sigma", "1", "--seed", seed, "--checkpoint", seeded, "--key-dir", keys); code != 0 {
		t.Fatalf("seeded: exit %d: %s", code, errOut)
	}
	if code, _, errOut := ckptRun(t, "--secure", "--epochs", "1", "--sigma", "1", "--checkpoint", secure, "--key-dir", keys); code != 0 {
		t.Fatalf("secure: exit %d: %s", code, errOut)
	}
	for _, path := range []string{seeded, secure} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		ck, k := ckptKey(t, keys, path)
		key := k.SamplerKey()
		leaks := map[string][]byte{"the checkpoint's path": []byte(path), "the key store's path": []byte(keys)}
		if path == secure {
			leaks["the sampler key in hex"], leaks["the sampler key"] = []byte(hex.EncodeToString(key[:])), key[:]
		} else {
			leaks["the seed"] = []byte(seed)
			if s, _, err := ck.Config.Seeds(k); err != nil || s != 8172635445362718 {
				t.Errorf("sealed seed unseals to %d, %v", s, err)
			}
		}
		for what, b := range leaks {
			if bytes.Contains(data, b) {
				t.Errorf("%s holds %s", filepath.Base(path), what)
			}
		}
		if ck.Config.Private != checkpoint.PrivateNotice || !bytes.Contains(data, []byte(`"private":"PRIVATE`)) {
			t.Errorf("%s does not say it is private", filepath.Base(path))
		}
		if fi, err := os.Stat(filepath.Join(keys, ck.Config.RunID, "secret")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: run key %v, mode %v", filepath.Base(path), err, fi.Mode().Perm())
		}
		args := []string{"train", "--resume", path, "--epochs", "2", "--quiet", "--json"}
		if path == secure {
			args = append(args, "--secure")
		}
		code, _, errOut := runCmd(t, append(args, "--key-dir", t.TempDir())...)
		if code != 2 || !strings.Contains(errOut, "--key-dir") || !strings.Contains(errOut, ck.Config.RunID) {
			t.Errorf("%s: resume without its key: exit %d, stderr %q; want exit 2 naming --key-dir and the run", filepath.Base(path), code, errOut)
		}
		if code, _, errOut := runCmd(t, append(args, "--key-dir", keys)...); code != 0 {
			t.Errorf("%s: resume with its key: exit %d: %s", filepath.Base(path), code, errOut)
		}
	}
}

// TestCkptSecureResumeOnceCLI: resuming two copies of one --secure checkpoint would release
// the same epochs twice with independent noise, which neither ledger records: the second is
// refused (exit 2) saying why, and the first's checkpoint, of the new generation, resumes.
func TestCkptSecureResumeOnceCLI(t *testing.T) {
	dir := t.TempDir()
	path, dup := filepath.Join(dir, "run.ckpt"), filepath.Join(dir, "copy.ckpt")
	if code, _, errOut := ckptRun(t, "--secure", "--epochs", "1", "--sigma", "1", "--checkpoint", path); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	data, _ := os.ReadFile(path)
	if err := os.WriteFile(dup, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCmd(t, "train", "--secure", "--resume", path, "--epochs", "2", "--quiet", "--json"); code != 0 {
		t.Fatalf("first resume: exit %d: %s", code, errOut)
	}
	code, _, errOut := runCmd(t, "train", "--secure", "--resume", dup, "--epochs", "2", "--quiet", "--json")
	if code == 0 {
		t.Fatalf("a second resume of the same --secure checkpoint ran: the same epoch was released twice with fresh noise")
	}
	if code != 2 || !strings.Contains(errOut, "already resumed") || !strings.Contains(errOut, "twice") {
		t.Errorf("second resume: exit %d, stderr %q; want exit 2 saying the epochs would be released twice", code, errOut)
	}
	if now, _ := os.ReadFile(dup); !bytes.Equal(now, data) {
		t.Errorf("the refused resume changed its checkpoint")
	}
	if code, _, errOut := runCmd(t, "train", "--secure", "--resume", path, "--epochs", "3", "--quiet", "--json"); code != 0 {
		t.Errorf("resume of the newest checkpoint: exit %d: %s", code, errOut)
	}
}

// TestCkptResumeCopyCLI: resuming a copy never writes over the file it was copied from:
// --resume alone continues in the resumed file, --checkpoint names another, and the path
// recorded by the first run is neither stored nor restored.
func TestCkptResumeCopyCLI(t *testing.T) {
	dir := t.TempDir()
	orig, dup, other := filepath.Join(dir, "orig.ckpt"), filepath.Join(dir, "copy.ckpt"), filepath.Join(dir, "other.ckpt")
	if code, _, errOut := ckptRun(t, "--epochs", "1", "--sigma", "1", "--seed", "1", "--checkpoint", orig); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	before, _ := os.ReadFile(orig)
	if err := os.WriteFile(dup, before, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, "train", "--resume", dup, "--epochs", "2", "--quiet", "--json")
	if code != 0 {
		t.Fatalf("resume of the copy: exit %d: %s", code, errOut)
	}
	if now, _ := os.ReadFile(orig); !bytes.Equal(now, before) {
		t.Fatalf("resuming a copy wrote over the original checkpoint")
	}
	got := lastJSON(t, out)
	ck, err := checkpoint.Load(dup)
	if err != nil || float64(ck.State.Step) != got["steps"] || got["checkpoint"] != dup {
		t.Fatalf("the copy after its resume: %v, step %v; JSON steps %v, checkpoint %v", err, ck, got["steps"], got["checkpoint"])
	}
	if _, ok := ck.Config.Meta["checkpoint"]; ok {
		t.Errorf("the checkpoint records its path: %v", ck.Config.Meta)
	}
	copied, _ := os.ReadFile(dup)
	if code, _, errOut := runCmd(t, "train", "--resume", dup, "--epochs", "3", "--checkpoint", other, "--quiet", "--json"); code != 0 {
		t.Fatalf("resume to another path: exit %d: %s", code, errOut)
	}
	if now, _ := os.ReadFile(dup); !bytes.Equal(now, copied) {
		t.Errorf("--checkpoint %s: the resumed file changed", other)
	}
	if ck, err := checkpoint.Load(other); err != nil || ck.State.Epoch != 3 {
		t.Errorf("--checkpoint %s: %v, %v", other, err, ck)
	}
}

// TestCkptResumeBeyondBudget: a resume with more epochs keeps the checkpoint's σ and budget.
// When σ was calibrated to the budget over the first run's epochs, the next epoch does not fit:
// the run reports the guarantee and the JSON, then exits 1 saying which epoch, the ε it would
// reach (the RDP accountant's, recomputed here from the JSON's σ and q), the budget, σ, and what
// to do instead. With room in the budget (--sigma given), the same resume extends the run; a
// resume with nothing left to train says so; a fresh run that the budget stops before its first
// step exits 1.
func TestCkptResumeBeyondBudget(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.ckpt")
	code, first, errOut := ckptRun(t, "--epochs", "1", "--target-epsilon", "2", "--seed", "1", "--checkpoint", path, "--allow-chance")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	code, out, errOut := runCmd(t, "train", "--resume", path, "--epochs", "3", "--json", "--quiet")
	if code != 1 {
		t.Fatalf("resume: exit %d, want 1 (the budget fits no more epoch): %s", code, errOut)
	}
	m := lastJSON(t, out)
	if m["epsilon"] != first["epsilon"] || m["steps"] != first["steps"] || m["stopped_by_budget"] != true {
		t.Errorf("resume report: ε %v steps %v stopped %v; first run ε %v steps %v", m["epsilon"], m["steps"], m["stopped_by_budget"], first["epsilon"], first["steps"])
	}
	sigma, q, steps := m["sigma"].(float64), m["sample_rate"].(float64), int(m["steps"].(float64))
	acc, err := privacy.NewPoissonRDP(q, sigma, nil)
	if err != nil {
		t.Fatal(err)
	}
	next, err := acc.Epsilon(2*steps, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		fmt.Sprintf("stopped by the budget: epoch 2 would take ε from %.4g to %.4g, above the budget ε = 2 at δ = 1e-05 (σ = %.4g); no step taken", first["epsilon"], next, sigma),
		fmt.Sprintf("a resume keeps the checkpoint's σ = %.4g and budget ε = 2 at δ = 1e-05 (the checkpoint was written by a run of --epochs 1)", sigma),
		"cannot go past epoch 1 of the 3 asked", "start a new run with --epochs 3",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	// σ given, budget to spare: the resume extends the run.
	path2 := filepath.Join(dir, "run2.ckpt")
	if code, _, errOut := ckptRun(t, "--epochs", "1", "--sigma", "2", "--target-epsilon", "5", "--seed", "1", "--checkpoint", path2); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	code, out, errOut = runCmd(t, "train", "--resume", path2, "--epochs", "2", "--json", "--quiet")
	if m := lastJSON(t, out); code != 0 || m["steps"].(float64) != 2*m["resumed_from_step"].(float64) || m["stopped_by_budget"] != false {
		t.Fatalf("extended resume: exit %d, %v: %s", code, m, errOut)
	}
	code, _, errOut = runCmd(t, "train", "--resume", path2, "--epochs", "2", "--json", "--quiet")
	if code != 0 || !strings.Contains(errOut, "nothing to train: the run of "+path2+" already has its 2 epochs") {
		t.Errorf("resume of a finished run: exit %d: %s", code, errOut)
	}
	// A fresh run whose budget fits no epoch.
	code, fresh, errOut := ckptRun(t, "--epochs", "1", "--sigma", "0.3", "--target-epsilon", "0.5")
	if code != 1 || fresh["steps"] != 0.0 || !strings.Contains(errOut, "stopped by the budget: epoch 1 would take ε from 0 to") || !strings.Contains(errOut, "no step taken") {
		t.Errorf("no epoch fits: exit %d, steps %v: %s", code, fresh["steps"], errOut)
	}
}
