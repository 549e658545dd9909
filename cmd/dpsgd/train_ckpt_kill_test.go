package main

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/dpsgd/dpsgd/engine/checkpoint"
)

// The kill test re-executes this test binary as `dpsgd`: with DPSGD_CKPT_KILL_CHILD=1 it runs
// the command line in DPSGD_CKPT_KILL_ARGS (a JSON array) and exits with its status.
func init() {
	if os.Getenv("DPSGD_CKPT_KILL_CHILD") != "1" {
		return
	}
	var args []string
	if err := json.Unmarshal([]byte(os.Getenv("DPSGD_CKPT_KILL_ARGS")), &args); err != nil {
		os.Exit(3)
	}
	os.Exit(run(context.Background(), args, os.Stdout, os.Stderr))
}

func ckptChild(t *testing.T, args []string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := json.Marshal(args)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "DPSGD_CKPT_KILL_CHILD=1", "DPSGD_CKPT_KILL_ARGS="+string(enc))
	return cmd
}

// TestCkptKill: `dpsgd train --checkpoint-every 1` is killed with SIGKILL at random points
// (delays from a fixed seed, spread over a whole run); after each kill the checkpoint on disk,
// if any, loads, is never ahead of its ledger, and resuming from it ends with the digest of the
// uninterrupted run. DPSGD_KILL_RUNS sets the number of kills (default 6; 3 with -short).
func TestCkptKill(t *testing.T) {
	runs := 6
	if testing.Short() {
		runs = 3
	}
	if v := os.Getenv("DPSGD_KILL_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("DPSGD_KILL_RUNS=%q: want a whole number ≥ 1", v)
		}
		runs = n
	}
	base := append(append([]string(nil), ckptArgs...), "--epochs", "2", "--sigma", "1", "--seed", "1")
	code, ref, errOut := ckptRun(t, "--epochs", "2", "--sigma", "1", "--seed", "1")
	if code != 0 {
		t.Fatalf("reference run: exit %d: %s", code, errOut)
	}
	want := ref["params_digest"]

	// One child run to completion: its length spreads the kill delays, and a child with
	// checkpoints after every step ends with the reference digest too.
	dir := t.TempDir()
	path := filepath.Join(dir, "full.ckpt")
	start := time.Now()
	out, err := ckptChild(t, append(append([]string(nil), base...), "--checkpoint", path, "--checkpoint-every", "1")).Output()
	full := time.Since(start)
	if err != nil {
		t.Fatalf("child run: %v", err)
	}
	if got := lastJSON(t, string(out))["params_digest"]; got != want {
		t.Fatalf("child run digest %v, in-process %v", got, want)
	}

	rng := rand.New(rand.NewPCG(2026, 9))
	var killed, early, finished, resumed, failures, leftovers int
	for i := range runs {
		path := filepath.Join(dir, "run"+strconv.Itoa(i)+".ckpt")
		cmd := ckptChild(t, append(append([]string(nil), base...), "--checkpoint", path, "--checkpoint-every", "1"))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.Float64() * float64(full)))
		_ = cmd.Process.Kill() // SIGKILL
		var ee *exec.ExitError
		if err := cmd.Wait(); err == nil {
			finished++
		} else if errors.As(err, &ee) && !ee.Exited() {
			killed++
		}
		ck, err := checkpoint.Load(path)
		if errors.Is(err, fs.ErrNotExist) {
			early++ // killed before the first checkpoint: nothing to resume, nothing to check
			continue
		}
		if err != nil {
			failures++
			t.Errorf("kill %d: the checkpoint does not load: %v", i, err)
			continue
		}
		if ck.Ledger == nil || ck.Ledger.Steps < ck.State.Step {
			failures++
			t.Errorf("kill %d: checkpoint at step %d ahead of its ledger %v", i, ck.State.Step, ck.Ledger)
			continue
		}
		if tmps, _ := filepath.Glob(filepath.Join(dir, ".run"+strconv.Itoa(i)+".ckpt.tmp-*")); len(tmps) > 0 {
			leftovers++ // a write cut by the kill: harmless, the checkpoint itself is whole
		}
		code, out, errOut := runCmd(t, "train", "--resume", path, "--quiet", "--json")
		if code != 0 {
			failures++
			t.Errorf("kill %d: resume from step %d: exit %d: %s", i, ck.State.Step, code, errOut)
			continue
		}
		if got := lastJSON(t, out)["params_digest"]; got != want {
			failures++
			t.Errorf("kill %d: resumed from step %d to digest %v, uninterrupted %v", i, ck.State.Step, got, want)
			continue
		}
		resumed++
	}
	t.Logf("kill test: %d runs (full run %.2fs): %d killed, %d finished before the kill, %d killed before the first checkpoint, "+
		"%d resumed to the uninterrupted digest, %d left a cut temporary file, %d failures",
		runs, full.Seconds(), killed, finished, early, resumed, leftovers, failures)
}
