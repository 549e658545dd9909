package datasets

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
)

// ErrFormat is matched (errors.Is) by every error about malformed input data: bad IDX headers,
// truncated files, malformed CSV rows, labels out of range, count mismatches.
var ErrFormat = errors.New("malformed data")

// ErrChecksum is matched (errors.Is) by every error about a file whose size or SHA-256 differs
// from the expected one.
var ErrChecksum = errors.New("checksum mismatch")

// ParseError reports malformed input: the file, the position and the problem. It matches
// [ErrFormat] under errors.Is and unwraps to the underlying cause (for example
// io.ErrUnexpectedEOF, gzip.ErrChecksum or a *strconv.NumError) when there is one.
type ParseError struct {
	File   string // file name, or a description of the input
	Line   int    // 1-based line number for text formats; 0 when not line-oriented
	Offset int64  // byte offset for binary formats; -1 when not applicable
	Msg    string // what is wrong
	Err    error  // underlying cause, may be nil
}

// Error returns a one-line message "file:line: msg" or "file: offset N: msg".
func (e *ParseError) Error() string {
	loc := e.File
	switch {
	case e.Line > 0:
		loc += ":" + strconv.Itoa(e.Line)
	case e.Offset >= 0:
		loc += ": offset " + strconv.FormatInt(e.Offset, 10)
	}
	msg := e.Msg
	if e.Err != nil {
		if msg == "" {
			msg = e.Err.Error()
		} else {
			msg += ": " + e.Err.Error()
		}
	}
	return "datasets: " + loc + ": " + msg
}

// Unwrap returns the underlying cause.
func (e *ParseError) Unwrap() error { return e.Err }

// Is reports whether target is [ErrFormat].
func (e *ParseError) Is(target error) bool { return target == ErrFormat }

// Dataset is a labelled classification dataset held in memory, row-major.
type Dataset struct {
	Name    string
	X       []float32 // N×D features, row-major: example i is X[i*D : (i+1)*D]
	Y       []int     // N labels in [0, Classes)
	N, D    int
	Classes int
	// Shape is the per-example shape: [D] for tabular data, [C, H, W] for images
	// (MNIST: [1, 28, 28]). Its product is D.
	Shape []int
	// FeatureNames optionally names the D columns (tabular data; nil for images).
	FeatureNames []string
	// User, for user-level privacy, gives each example's user: N dense ids in [0, Users),
	// each id owning at least one example (the CSV loader's user column, AssignUsers). nil
	// for record-level data.
	User []int
	// Users is the number of distinct users in User (0 without User).
	Users int
}

// Row returns example i's features, a slice aliasing d.X. It panics if i is out of range.
func (d *Dataset) Row(i int) []float32 {
	return d.X[i*d.D : (i+1)*d.D : (i+1)*d.D]
}

// Validate checks that the sizes are consistent (len(X) = N·D, len(Y) = N, product of Shape =
// D), that every label is in [0, Classes) and that every feature is finite.
func (d *Dataset) Validate() error {
	if d == nil {
		return errors.New("datasets: nil Dataset")
	}
	name := d.Name
	if name == "" {
		name = "dataset"
	}
	switch {
	case d.N < 0:
		return fmt.Errorf("datasets: %s: N = %d, want N >= 0", name, d.N)
	case d.D < 1:
		return fmt.Errorf("datasets: %s: D = %d, want D >= 1", name, d.D)
	case d.Classes < 1:
		return fmt.Errorf("datasets: %s: Classes = %d, want Classes >= 1", name, d.Classes)
	case d.N > 0 && d.D > math.MaxInt/d.N:
		return fmt.Errorf("datasets: %s: N·D overflows (N = %d, D = %d)", name, d.N, d.D)
	case len(d.X) != d.N*d.D:
		return fmt.Errorf("datasets: %s: len(X) = %d, want N·D = %d·%d = %d", name, len(d.X), d.N, d.D, d.N*d.D)
	case len(d.Y) != d.N:
		return fmt.Errorf("datasets: %s: len(Y) = %d, want N = %d", name, len(d.Y), d.N)
	}
	if d.Shape != nil {
		p := 1
		for k, s := range d.Shape {
			if s < 1 || p > math.MaxInt/s {
				return fmt.Errorf("datasets: %s: Shape[%d] = %d, want a positive extent (Shape %v)", name, k, s, d.Shape)
			}
			p *= s
		}
		if p != d.D {
			return fmt.Errorf("datasets: %s: product of Shape %v = %d, want D = %d", name, d.Shape, p, d.D)
		}
	}
	if d.FeatureNames != nil && len(d.FeatureNames) != d.D {
		return fmt.Errorf("datasets: %s: len(FeatureNames) = %d, want D = %d", name, len(d.FeatureNames), d.D)
	}
	if err := d.validateUsers(name); err != nil {
		return err
	}
	for i, y := range d.Y {
		if y < 0 || y >= d.Classes {
			return fmt.Errorf("datasets: %s: Y[%d] = %d, want a label in [0, %d)", name, i, y, d.Classes)
		}
	}
	for j, v := range d.X {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("datasets: %s: X[%d] (example %d, feature %d) = %v, want a finite value", name, j, j/d.D, j%d.D, v)
		}
	}
	return nil
}

// validateUsers checks User and Users: both absent, or N ids in [0, Users) using every id.
func (d *Dataset) validateUsers(name string) error {
	if d.User == nil {
		if d.Users != 0 {
			return fmt.Errorf("datasets: %s: Users = %d without User ids, want 0", name, d.Users)
		}
		return nil
	}
	if len(d.User) != d.N {
		return fmt.Errorf("datasets: %s: len(User) = %d, want N = %d", name, len(d.User), d.N)
	}
	if d.Users < 1 || d.Users > d.N {
		return fmt.Errorf("datasets: %s: Users = %d, want a value in [1, %d]", name, d.Users, d.N)
	}
	seen := make([]bool, d.Users)
	for i, u := range d.User {
		if u < 0 || u >= d.Users {
			return fmt.Errorf("datasets: %s: User[%d] = %d, want an id in [0, %d)", name, i, u, d.Users)
		}
		seen[u] = true
	}
	if k := slices.Index(seen, false); k >= 0 {
		return fmt.Errorf("datasets: %s: user %d of %d owns no example, want dense ids", name, k, d.Users)
	}
	return nil
}

// denseUsers maps ids (any non-negative ints) to dense ids in order of first appearance and
// returns them with their count.
func denseUsers(ids []int) ([]int, int) {
	out := make([]int, len(ids))
	dense := make(map[int]int)
	for i, u := range ids {
		k, ok := dense[u]
		if !ok {
			k = len(dense)
			dense[u] = k
		}
		out[i] = k
	}
	return out, len(dense)
}

// AssignUsers gives d's examples to users dense users reproducibly from seed (tests and
// benchmarks of user-level privacy): example i < users goes to user i, so every user owns one,
// and each later example to a user drawn uniformly (math/rand/v2's PCG). It replaces any
// earlier assignment.
func AssignUsers(d *Dataset, users int, seed uint64) error {
	if users < 1 || users > d.N {
		return fmt.Errorf("datasets: AssignUsers: users = %d, want a value in [1, %d] (the examples)", users, d.N)
	}
	r := rand.New(rand.NewPCG(seed, userStream))
	d.User = make([]int, d.N)
	for i := range d.User {
		if i < users {
			d.User[i] = i
		} else {
			d.User[i] = r.IntN(users)
		}
	}
	d.Users = users
	return nil
}

// userStream is AssignUsers' PCG stream constant.
const userStream = 0x7573_6572_7331_0001

// Subset returns a new dataset holding the examples idx, in that order (indices may repeat).
// Features and labels are copied; Shape and FeatureNames are shared with d (treat them as
// read-only). User ids are kept, renumbered densely in order of first appearance (the users
// with no example in idx dropped). It panics if an index is outside [0, N), which is a
// programming error.
func (d *Dataset) Subset(idx []int) *Dataset {
	out := &Dataset{
		Name:         d.Name,
		X:            make([]float32, len(idx)*d.D),
		Y:            make([]int, len(idx)),
		N:            len(idx),
		D:            d.D,
		Classes:      d.Classes,
		Shape:        d.Shape,
		FeatureNames: d.FeatureNames,
	}
	for k, i := range idx {
		if i < 0 || i >= d.N {
			panic(fmt.Sprintf("datasets: Subset: index %d (position %d) out of range [0, %d)", i, k, d.N))
		}
		copy(out.X[k*d.D:(k+1)*d.D], d.X[i*d.D:(i+1)*d.D])
		out.Y[k] = d.Y[i]
	}
	if d.User != nil {
		ids := make([]int, len(idx))
		for k, i := range idx {
			ids[k] = d.User[i]
		}
		out.User, out.Users = denseUsers(ids)
	}
	return out
}

// ClassCounts returns the number of examples of each class.
func (d *Dataset) ClassCounts() []int {
	c := make([]int, d.Classes)
	for _, y := range d.Y {
		if y >= 0 && y < d.Classes {
			c[y]++
		}
	}
	return c
}

// splitStream is the PCG stream constant of TrainTestSplit (any fixed value works; it keeps
// the split's random numbers apart from other uses of the same seed).
const splitStream = 0x5d1f_7a3c_0b2e_9481

// TrainTestSplit splits d into a training and a test set at random, reproducibly: the
// permutation is drawn from math/rand/v2's PCG seeded with seed, so the same (d, testFraction,
// seed) always gives the same split on every machine. The test set gets
// round(testFraction·N) examples; both parts must be non-empty, so testFraction must be in
// (0, 1) and N ≥ 2. Within each part the examples keep their original relative order.
func TrainTestSplit(d *Dataset, testFraction float64, seed uint64) (train, test *Dataset, err error) {
	if d == nil {
		return nil, nil, errors.New("datasets: TrainTestSplit: nil Dataset")
	}
	if !(testFraction > 0 && testFraction < 1) {
		return nil, nil, fmt.Errorf("datasets: TrainTestSplit: testFraction = %v, want a value in (0, 1)", testFraction)
	}
	if d.N < 0 || len(d.Y) != d.N || len(d.X) != d.N*d.D {
		return nil, nil, fmt.Errorf("datasets: TrainTestSplit: inconsistent dataset %q: %w", d.Name, d.Validate())
	}
	nTest := int(math.Round(testFraction * float64(d.N)))
	if nTest < 1 || nTest > d.N-1 {
		return nil, nil, fmt.Errorf("datasets: TrainTestSplit: testFraction = %v of N = %d gives %d test examples, want between 1 and N-1", testFraction, d.N, nTest)
	}
	rng := rand.New(rand.NewPCG(seed, splitStream))
	perm := rng.Perm(d.N)
	testIdx := perm[:nTest]
	trainIdx := perm[nTest:]
	slices.Sort(testIdx)
	slices.Sort(trainIdx)
	train = d.Subset(trainIdx)
	test = d.Subset(testIdx)
	train.Name = d.Name + "/train"
	test.Name = d.Name + "/test"
	return train, test, nil
}
