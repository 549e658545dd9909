package main

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/dpsgd/dpsgd/engine/checkpoint"
)

// TestDefaultPhysBatch checks defaultPhysBatch against a brute-force search over the number
// of physical batches: the fewest rounds of the replicas whose physical batches of at most
// 256 rows hold the batch and its slack, unless that leaves fewer than 32 rows each.
func TestDefaultPhysBatch(t *testing.T) {
	for _, fixed := range []bool{true, false} {
		for r := 1; r <= 9; r++ {
			for b := 1; b <= 5000; b += 1 + b/40 {
				hi := b
				if !fixed {
					hi = b + int(math.Ceil(3*math.Sqrt(float64(b))))
				}
				k := r
				for (hi+k-1)/k > 256 {
					k += r
				}
				for k > 1 && k*32 > hi {
					k--
				}
				want := (hi + k - 1) / k
				got := defaultPhysBatch(b, r, fixed)
				if got != want {
					t.Fatalf("defaultPhysBatch(%d, %d, %v) = %d, want %d", b, r, fixed, got, want)
				}
				if got < 1 || got > 256 || k*got < hi {
					t.Fatalf("defaultPhysBatch(%d, %d, %v) = %d: %d batches do not hold %d rows within 256 each", b, r, fixed, got, k, hi)
				}
			}
		}
	}
	// The cases the default was changed for: 256 on 2 replicas, one physical batch each.
	for _, c := range []struct {
		b, r  int
		fixed bool
		want  int
	}{{256, 2, true, 128}, {256, 2, false, 152}, {1024, 2, false, 187}, {2048, 2, false, 219}, {60000, 1, true, 256}} {
		if got := defaultPhysBatch(c.b, c.r, c.fixed); got != c.want {
			t.Errorf("defaultPhysBatch(%d, %d, %v) = %d, want %d", c.b, c.r, c.fixed, got, c.want)
		}
	}
	// Nonsense in (the flags are checked before): still a usable size.
	if got := defaultPhysBatch(0, 0, false); got != 1 {
		t.Errorf("defaultPhysBatch(0, 0, false) = %d, want 1", got)
	}
}

// TestTrainDefaultPhysBatch: without --physical-batch a CPU run of batch 256 on 2 replicas
// splits into two physical batches (the JSON says which), the same seed gives the same
// digest, the checkpoint records the physical batch, and a resume on another replica count
// keeps it (a new run there would choose another), reaching the uninterrupted run's digest
// when the replicas match; --physical-batch given wins.
func TestTrainDefaultPhysBatch(t *testing.T) {
	args := []string{"--batch-size", "256", "--sigma", "1", "--seed", "3", "--device", "cpu", "--replicas", "2"}
	code, ref, errOut := ckptRun(t, append(args, "--epochs", "2")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if ref["physical_batch"] != float64(152) {
		t.Fatalf("physical_batch %v, want 152 (256 + 48 rows of slack over 2 replicas)", ref["physical_batch"])
	}
	_, again, _ := ckptRun(t, append(args, "--epochs", "2")...)
	if again["params_digest"] != ref["params_digest"] {
		t.Errorf("same seed, digests %v and %v", again["params_digest"], ref["params_digest"])
	}
	path := filepath.Join(t.TempDir(), "run.ckpt")
	if code, _, errOut := ckptRun(t, append(args, "--epochs", "1", "--checkpoint", path)...); code != 0 {
		t.Fatalf("first half: exit %d: %s", code, errOut)
	}
	ck, err := checkpoint.Load(path)
	if err != nil || ck.Config.PhysicalBatch != 152 || ck.Config.Meta["physical-batch"] != "152" {
		t.Fatalf("checkpoint: %v, physical batch %d, meta %q", err, ck.Config.PhysicalBatch, ck.Config.Meta["physical-batch"])
	}
	// On 3 replicas a new run would take ⌈304/3⌉ = 102 rows; the resume keeps the run's 152.
	code, out, errOut := runCmd(t, "train", "--resume", path, "--epochs", "2", "--replicas", "3", "--json", "--quiet")
	if code != 0 {
		t.Fatalf("resume on 3 replicas: exit %d: %s", code, errOut)
	}
	if got := lastJSON(t, out); got["physical_batch"] != float64(152) {
		t.Errorf("resume on 3 replicas: physical_batch %v, want the checkpoint's 152", got["physical_batch"])
	}
	if code, _, errOut := ckptRun(t, append(args, "--epochs", "1", "--checkpoint", path)...); code != 0 {
		t.Fatalf("first half again: exit %d: %s", code, errOut)
	}
	code, out, errOut = runCmd(t, "train", "--resume", path, "--epochs", "2", "--json", "--quiet")
	if code != 0 {
		t.Fatalf("resume: exit %d: %s", code, errOut)
	}
	if got := lastJSON(t, out); got["params_digest"] != ref["params_digest"] || got["physical_batch"] != float64(152) {
		t.Errorf("resumed: digest %v, physical batch %v; uninterrupted %v, 152", got["params_digest"], got["physical_batch"], ref["params_digest"])
	}
	// Shuffling's batches are all of 256: two of 128, no slack.
	code, out, errOut = runCmd(t, "train", "--sampler", "shuffle", "--hidden", "8", "--batch-size", "256", "--epochs", "1", "--sigma", "1",
		"--seed", "3", "--device", "cpu", "--replicas", "2", "--json", "--quiet")
	if code != 0 {
		t.Fatalf("shuffle: exit %d: %s", code, errOut)
	}
	if got := lastJSON(t, out); got["physical_batch"] != float64(128) {
		t.Errorf("shuffle: physical_batch %v, want 128", got["physical_batch"])
	}
	_, given, _ := ckptRun(t, append(args, "--epochs", "1", "--physical-batch", "64")...)
	if given["physical_batch"] != float64(64) {
		t.Errorf("--physical-batch 64: physical_batch %v", given["physical_batch"])
	}
}
