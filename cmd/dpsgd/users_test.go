package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeUserCSV writes n records of two features (a learnable rule) owned by users users, user
// "u0" owning 40% of them, and a reviewed schema (the user column declared ignored, so that
// a record-level run reads the same file); it returns their paths.
func writeUserCSV(t *testing.T, dir string, n, users int, emptyAt int) (data, schema string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(9, 9))
	var b strings.Builder
	b.WriteString("x1,who,x2,y\n")
	for i := range n {
		x1, x2 := rng.Float64()*10, rng.Float64()*10
		y := "neg"
		if x1+x2 > 10 {
			y = "pos"
		}
		who := fmt.Sprintf("u%d", 1+rng.IntN(users-1))
		if i%5 < 2 {
			who = "u0"
		}
		if i == emptyAt {
			who = " "
		}
		fmt.Fprintf(&b, "%.3f,%s,%.3f,%s\n", x1, who, x2, y)
	}
	data = filepath.Join(dir, "users.csv")
	if err := os.WriteFile(data, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	schema = filepath.Join(dir, "schema.json")
	s := `{"label": {"column": "y", "classes": ["neg", "pos"]}, "columns": [` +
		`{"name": "x1", "type": "numeric", "lo": 0, "hi": 10}, {"name": "x2", "type": "numeric", "lo": 0, "hi": 10}, {"name": "who", "type": "ignore"}]}`
	if err := os.WriteFile(schema, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return data, schema
}

// TestTrainUserColumn: dpsgd train --dataset csv --user-column runs a user-level run end to
// end: the JSON says privacy_unit "user" with the training set's users, the guarantee says
// user-level and counts users; a record-level run of the same file says "record". Bad flags
// exit 2 with one line naming the flag.
func TestTrainUserColumn(t *testing.T) {
	dir := t.TempDir()
	data, schema := writeUserCSV(t, dir, 300, 30, -1)
	common := []string{"train", "--dataset", "csv", "--data", data, "--schema", schema, "--model", "logreg",
		"--epochs", "2", "--sigma", "1", "--clip", "1", "--seed", "1", "--device", "cpu", "--quiet", "--json", "--allow-chance"}
	code, out, errOut := runCmd(t, append(common, "--user-column", "who", "--batch-size", "6", "--max-user-records", "64")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	m := lastJSON(t, out)
	users, _ := m["users"].(float64)
	if m["privacy_unit"] != "user" || users < 20 || users > 30 {
		t.Errorf("privacy_unit %v, users %v: want user and the training set's users", m["privacy_unit"], m["users"])
	}
	g, _ := m["guarantee"].(string)
	for _, w := range []string{"user-level (ε = ", "neighbouring datasets differ in all records of one user", fmt.Sprintf("the number of users N = %d is public", int(users))} {
		if !strings.Contains(g, w) {
			t.Errorf("guarantee %q does not say %q", g, w)
		}
	}
	code, out, errOut = runCmd(t, append(common, "--batch-size", "20")...)
	if code != 0 {
		t.Fatalf("record-level: exit %d: %s", code, errOut)
	}
	if m := lastJSON(t, out); m["privacy_unit"] != "record" || m["users"] != nil || strings.Contains(m["guarantee"].(string), "user") {
		t.Errorf("record-level: privacy_unit %v, users %v, guarantee %v", m["privacy_unit"], m["users"], m["guarantee"])
	}

	bad, _ := writeUserCSV(t, t.TempDir(), 50, 5, 7)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--user-column", "who"}, "--user-column: for --dataset csv or idx"},
		{append(common[:len(common):len(common)], "--max-user-records", "3"), "--max-user-records 3: for a user-level run (--user-column)"},
		{append(common[:len(common):len(common)], "--user-column", "who", "--max-user-records", "0"), "--max-user-records 0: want ≥ 1"},
		{append(common[:len(common):len(common)], "--user-column", "who", "--batch-size", "5", "--max-user-records", "300"), "--max-user-records 300: want a value in [1, 256]"},
		{append(common[:len(common):len(common)], "--user-column", "who", "--batch-size", "500"), "users of the training set"},
		{append(common[:len(common):len(common)], "--user-column", "nobody", "--batch-size", "5"), `no user column "nobody"`},
		{append(common[:len(common):len(common)], "--user-column", "x1", "--batch-size", "5"), `user column "x1" is a feature column`},
		{append(common[:len(common):len(common)], "--user-column", "who", "--batch-size", "5", "--checkpoint", filepath.Join(dir, "ck")), "checkpoints of user-level runs are not supported"},
		{append(common[:len(common):len(common)], "--user-column", "who", "--batch-size", "5", "--device", "cuda"), "user-level runs"},
		{[]string{"train", "--dataset", "csv", "--data", bad, "--schema", schema, "--user-column", "who", "--batch-size", "2"}, "row 7"},
	} {
		code, out, errOut := runCmd(t, tc.args...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and one line naming %q", tc.args, code, out, errOut, tc.want)
		}
	}
}
