package datasets

import (
	"bytes"
	"encoding/csv"
	"errors"
	"slices"
	"strings"
	"testing"
)

// dropColumn rewrites a CSV without column name (a second method for the user column: the
// table a record-level reader would have been given).
func dropColumn(t testing.TB, text, name string) (string, []string, bool) {
	t.Helper()
	r := csv.NewReader(strings.NewReader(text))
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil || len(recs) == 0 {
		return "", nil, false
	}
	p := -1
	for i, h := range recs[0] {
		if strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")) == name {
			p = i
		}
	}
	if p < 0 {
		return "", nil, false
	}
	var ids []string
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	for k, rec := range recs {
		if p >= len(rec) {
			return "", nil, false
		}
		if k > 0 {
			ids = append(ids, strings.TrimSpace(rec[p]))
		}
		_ = w.Write(slices.Delete(slices.Clone(rec), p, p+1))
	}
	w.Flush()
	return b.String(), ids, true
}

// TestReadCSVUsers: the user column is taken out of the features (they equal a record-level
// read of the table without it), its ids become dense ints in order of first appearance, and
// the schema's ignored column may serve as the user column.
func TestReadCSVUsers(t *testing.T) {
	const text = "y,color,u,id,income,age\n" +
		"yes,red, alice ,1,10,20\n" +
		"no,blue,bob,2,30,40\n" +
		"yes,green,alice,3,?,50\n" +
		"no,red,\"c,arol\",4,1,1\n"
	ds, err := ReadCSVUsersString(text, "u")
	if err != nil {
		t.Fatal(err)
	}
	rest, _, _ := dropColumn(t, text, "u")
	want, err := ReadCSV(strings.NewReader(rest), "t.csv", smallSchema())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ds.X, want.X) || !slices.Equal(ds.Y, want.Y) || ds.D != want.D {
		t.Errorf("features or labels differ from the table without the user column")
	}
	if !slices.Equal(ds.User, []int{0, 1, 0, 2}) || ds.Users != 3 {
		t.Errorf("users %v (%d), want [0 1 0 2] (3)", ds.User, ds.Users)
	}
	if err := ds.Validate(); err != nil {
		t.Error(err)
	}
	byID, err := ReadCSVUsersString(rest, "id")
	if err != nil || byID.Users != 4 {
		t.Errorf("the ignored column as user column: %v users, %v", byID, err)
	}
	plain, err := ReadCSV(strings.NewReader(rest), "t.csv", smallSchema())
	if err != nil || plain.User != nil || plain.Users != 0 {
		t.Errorf("a record-level read has users: %v %d (%v)", plain.User, plain.Users, err)
	}
}

// ReadCSVUsersString reads text with smallSchema and the user column.
func ReadCSVUsersString(text, col string) (*Dataset, error) {
	enc, err := smallSchema().Encoder()
	if err != nil {
		return nil, err
	}
	return enc.ReadCSVUsers(strings.NewReader(text), "t.csv", col)
}

// TestReadCSVUsersErrors: every refusal names the file, the line and what is wrong (the row
// and the column for an id).
func TestReadCSVUsersErrors(t *testing.T) {
	const header = "y,color,u,id,income,age\n"
	const row = "yes,red,alice,1,10,20\n"
	for _, tc := range []struct {
		name, text, col string
		want            []string
	}{
		{"empty id", header + row + "no,red,,1,10,20\n", "u", []string{"t.csv:3:", "row 1", `user column "u" (field 3)`, "empty"}},
		{"blank id", header + row + row + "no,red,  ,1,10,20\n", "u", []string{"t.csv:4:", "row 2", "empty"}},
		{"long id", header + "no,red," + strings.Repeat("x", MaxUserID+1) + ",1,10,20\n", "u", []string{"t.csv:2:", "row 0", "257 bytes long, want at most 256"}},
		{"no such column", header + row, "user", []string{"t.csv:1:", `no user column "user"`}},
		{"label", header + row, "y", []string{"t.csv:1:", `user column "y" is the label column`}},
		{"feature", header + row, "age", []string{"t.csv:1:", `user column "age" is a feature column`}},
		{"too few fields", header + row + "yes,red,alice,1,10\n", "u", []string{"t.csv:3:", "5 fields, want 6"}},
		{"bad value after the user field", header + "yes,red,\"al\nice\",1,10,x\n", "u", []string{"t.csv:3:", `field 5 ("age")`}},
		{"bad value before the user field", header + "maybe,red,alice,1,10,20\n", "u", []string{"t.csv:2:", `label "maybe"`}},
	} {
		_, err := ReadCSVUsersString(tc.text, tc.col)
		t.Run(tc.name, func(t *testing.T) { checkFormatErr(t, err, tc.want...) })
	}
}

// TestUsersValidateSubsetAssign: Validate refuses ids out of range, users without a record and
// a count without ids; Subset renumbers the users it keeps; AssignUsers gives every user one.
func TestUsersValidateSubsetAssign(t *testing.T) {
	base := func() *Dataset {
		return &Dataset{N: 4, D: 1, Classes: 2, X: make([]float32, 4), Y: []int{0, 1, 0, 1}, User: []int{0, 1, 0, 2}, Users: 3}
	}
	if err := base().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(d *Dataset)
		want string
	}{
		{"out of range", func(d *Dataset) { d.User[1] = 3 }, "User[1] = 3"},
		{"negative", func(d *Dataset) { d.User[1] = -1 }, "User[1] = -1"},
		{"unused id", func(d *Dataset) { d.User[3] = 1 }, "user 2 of 3 owns no example"},
		{"short", func(d *Dataset) { d.User = d.User[:3] }, "len(User) = 3"},
		{"count without ids", func(d *Dataset) { d.User = nil }, "Users = 3 without User ids"},
		{"zero users", func(d *Dataset) { d.Users = 0 }, "Users = 0"},
	} {
		d := base()
		tc.edit(d)
		if err := d.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	s := base().Subset([]int{3, 1, 0})
	if !slices.Equal(s.User, []int{0, 1, 2}) || s.Users != 3 || s.Validate() != nil {
		t.Errorf("subset users %v (%d)", s.User, s.Users)
	}
	s = base().Subset([]int{0, 2})
	if !slices.Equal(s.User, []int{0, 0}) || s.Users != 1 {
		t.Errorf("subset of one user: %v (%d)", s.User, s.Users)
	}
	d := base()
	d.User, d.Users = nil, 0
	if err := AssignUsers(d, 4, 1); err != nil || d.Validate() != nil || d.Users != 4 {
		t.Errorf("AssignUsers: %v %v", err, d.Validate())
	}
	if err := AssignUsers(d, 5, 1); err == nil {
		t.Error("AssignUsers with more users than examples: no error")
	}
}

// FuzzCSVUserColumn: whatever the text, ReadCSVUsers either refuses it with a one-line
// ErrFormat, or gives a valid dataset whose users are the distinct trimmed ids of the column
// in order of first appearance and whose features and labels are those of the same table read
// without the column.
func FuzzCSVUserColumn(f *testing.F) {
	const header = "y,color,u,id,income,age\n"
	f.Add(header + "yes,red,alice,1,10,20\nno,blue,bob,2,30,40\n")
	f.Add(header + "yes,red,\"a,b\",1,10,20\nno,blue,\"a,b\",2,30,40\n")
	f.Add(header + "yes,red,,1,10,20\n")
	f.Add(header + "yes,red, x ,1,10,20\nno,red,x,1,1,1\n")
	f.Add("u,y,color,id,income,age\n\ufeffz,yes,red,1,10,20\n")
	f.Add(header + "yes,red,alice,1,10\n")
	f.Add("y,color,id,income,age\nyes,red,1,10,20\n")
	f.Fuzz(func(t *testing.T, text string) {
		ds, err := ReadCSVUsersString(text, "u")
		if err != nil {
			if ds != nil {
				t.Fatal("result and error")
			}
			if !errors.Is(err, ErrFormat) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q: want one line matching ErrFormat", err)
			}
			return
		}
		if err := ds.Validate(); err != nil {
			t.Fatalf("invalid dataset: %v", err)
		}
		rest, ids, ok := dropColumn(t, text, "u")
		if !ok {
			t.Fatalf("read, but encoding/csv could not: %q", text)
		}
		if len(ids) != ds.N {
			t.Fatalf("%d ids, %d records", len(ids), ds.N)
		}
		seen := map[string]int{}
		for i, id := range ids {
			k, ok := seen[id]
			if !ok {
				k = len(seen)
				seen[id] = k
			}
			if ds.User[i] != k || id == "" {
				t.Fatalf("record %d: user %d, want %d (id %q)", i, ds.User[i], k, id)
			}
		}
		if ds.Users != len(seen) {
			t.Fatalf("Users %d, want %d", ds.Users, len(seen))
		}
		want, err := ReadCSV(strings.NewReader(rest), "t.csv", smallSchema())
		if err != nil {
			t.Fatalf("the table without the user column is refused: %v", err)
		}
		if !slices.Equal(ds.Y, want.Y) || !slices.Equal(ds.X, want.X) {
			t.Fatalf("features or labels differ from the table without the user column")
		}
	})
}
