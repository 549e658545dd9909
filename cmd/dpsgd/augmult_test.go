package main

import (
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
)

// writeImageIDX writes n 8×8 byte images of 3 classes (a learnable brightness rule) and their
// labels, with a reviewed schema; it returns the three paths.
func writeImageIDX(t *testing.T, dir string, n int) (images, labels, schema string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(6, 6))
	img, lbl := make([]byte, n*64), make([]byte, n)
	for i := range lbl {
		lbl[i] = byte(rng.IntN(3))
		for k := range 64 {
			img[i*64+k] = byte(min(255, int(lbl[i])*80+rng.IntN(60)))
		}
	}
	images, labels = filepath.Join(dir, "images"), filepath.Join(dir, "labels")
	writeIDX(t, images, []uint32{uint32(n), 8, 8}, img)
	writeIDX(t, labels, []uint32{uint32(n)}, lbl)
	drafted := filepath.Join(dir, "drafted.json")
	schema = filepath.Join(dir, "schema.json")
	if code, _, errOut := runCmd(t, "schema", "--data", images, "--labels", labels, "--out", drafted); code != 0 {
		t.Fatalf("schema: exit %d: %s", code, errOut)
	}
	reviewSchema(t, drafted, schema, nil)
	return images, labels, schema
}

// TestTrainAugMult: dpsgd train --augmult runs on image data and says augmult in the JSON
// (1 without it), with the same guarantee as without; the flags that do not fit exit 2 with
// one line naming the flag.
func TestTrainAugMult(t *testing.T) {
	dir := t.TempDir()
	images, labels, schema := writeImageIDX(t, dir, 120)
	common := []string{"train", "--data", images, "--labels", labels, "--schema", schema, "--epochs", "1", "--batch-size", "16",
		"--sigma", "1", "--seed", "2", "--device", "cpu", "--quiet", "--json", "--allow-chance"}
	code, out, errOut := runCmd(t, append(common, "--augmult", "3", "--augment-pad", "2", "--augment-flip")...)
	if code != 0 {
		t.Fatalf("--augmult 3: exit %d: %s", code, errOut)
	}
	aug := lastJSON(t, out)
	code, out, errOut = runCmd(t, common...)
	if code != 0 {
		t.Fatalf("without --augmult: exit %d: %s", code, errOut)
	}
	plain := lastJSON(t, out)
	if aug["augmult"] != float64(3) || plain["augmult"] != float64(1) {
		t.Errorf("augmult %v and %v: want 3 and 1", aug["augmult"], plain["augmult"])
	}
	if aug["guarantee"] != plain["guarantee"] || aug["epsilon"] != plain["epsilon"] || aug["privacy_unit"] != "record" {
		t.Errorf("guarantee %v (ε %v, unit %v) with --augmult, %v (ε %v) without: want the same record-level guarantee", aug["guarantee"], aug["epsilon"], aug["privacy_unit"], plain["guarantee"], plain["epsilon"])
	}
	if aug["params_digest"] == plain["params_digest"] {
		t.Error("--augmult 3 trained the same parameters as without it")
	}

	with := func(extra ...string) []string { return append(common[:len(common):len(common)], extra...) }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--augmult", "2", "--epochs", "1"}, "--augmult 2: for image data"},
		{with("--augmult", "0"), "--augmult 0: want a value in [1, 64]"},
		{with("--augmult", "65"), "--augmult 65: want a value in [1, 64]"},
		{with("--augment-pad", "2"), "--augment-pad: for an augmented run (--augmult K, K ≥ 2)"},
		{with("--augment-flip"), "--augment-flip: for an augmented run"},
		{with("--augmult", "2", "--augment-pad", "9"), "--augment-pad 9: want a value in [0, 8]"},
		{with("--augmult", "2", "--augment-pad", "-1"), "--augment-pad -1: want a value in [0, 8]"},
		{with("--augmult", "4", "--physical-batch", "3"), "--augmult 4: want at most --physical-batch 3"},
		{with("--augmult", "2", "--checkpoint", filepath.Join(dir, "ck")), "--augmult 2 with --checkpoint or --resume"},
		{with("--augmult", "2", "--device", "cuda"), "--device cuda: augmented runs"},
	} {
		code, out, errOut := runCmd(t, tc.args...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and one line naming %q", tc.args, code, out, errOut, tc.want)
		}
	}
}
