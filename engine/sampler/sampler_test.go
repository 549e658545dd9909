package sampler

import (
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
)

// constructors builds one sampler of every kind for n = 300 from a seed,
// default and secure.
var constructors = []struct {
	name string
	make func(seed uint64) (Sampler, error)
}{
	{NameShuffle, func(seed uint64) (Sampler, error) { return NewShuffle(300, 32, seed) }},
	{NamePoisson, func(seed uint64) (Sampler, error) { return NewPoisson(300, 0.1, seed) }},
	{NameTruncatedPoisson, func(seed uint64) (Sampler, error) { return NewTruncatedPoisson(300, 0.1, 28, seed) }},
	{NameAllocation, func(seed uint64) (Sampler, error) { return NewAllocation(300, 10, seed) }},
	// The secure variants, keyed by a key made from the seed (their own
	// seed is fixed and ignored).
	{NameShuffle, func(seed uint64) (Sampler, error) { return secured(seed)(NewShuffle(300, 32, 0)) }},
	{NamePoisson, func(seed uint64) (Sampler, error) { return secured(seed)(NewPoisson(300, 0.1, 0)) }},
	{NameTruncatedPoisson, func(seed uint64) (Sampler, error) { return secured(seed)(NewTruncatedPoisson(300, 0.1, 28, 0)) }},
	{NameAllocation, func(seed uint64) (Sampler, error) { return secured(seed)(NewAllocation(300, 10, 0)) }},
}

// must returns s, or panics (failing the test) when a constructor that the
// test calls with valid arguments returns an error.
func must(s Sampler, err error) Sampler {
	if err != nil {
		panic(err)
	}
	return s
}

// epochBatches returns all batches of an epoch, steps in the given order
// (stored by step).
func epochBatches(s Sampler, epoch int, steps []int) [][]int {
	out := make([][]int, s.StepsPerEpoch())
	for _, st := range steps {
		out[st] = s.Batch(epoch, st, nil)
	}
	return out
}

func seq(m int) []int {
	s := make([]int, m)
	for i := range s {
		s[i] = i
	}
	return s
}

func TestReproducible(t *testing.T) {
	for _, c := range constructors {
		t.Run(c.name, func(t *testing.T) {
			a := must(c.make(42))
			b := must(c.make(42))
			other := must(c.make(43))
			if a.Name() != c.name {
				t.Fatalf("Name() = %q, want %q", a.Name(), c.name)
			}
			m := a.StepsPerEpoch()
			fwd := seq(m)
			rev := slices.Clone(fwd)
			slices.Reverse(rev)

			// a: epochs 0..3 in order; b: epoch 3 first, then 1, 0, 2, steps
			// reversed. Same seed ⇒ identical batches whatever the order.
			want := make([][][]int, 4)
			for e := range want {
				want[e] = epochBatches(a, e, fwd)
			}
			for _, e := range []int{3, 1, 0, 2} {
				got := epochBatches(b, e, rev)
				for st := range got {
					if !slices.Equal(got[st], want[e][st]) {
						t.Fatalf("epoch %d step %d differs with call order: %v vs %v", e, st, got[st], want[e][st])
					}
				}
			}
			// Interleaved epochs on one sampler (cache thrashing) agree too.
			for st := 0; st < m; st++ {
				for _, e := range []int{2, 0, 3, 1} {
					if got := a.Batch(e, st, nil); !slices.Equal(got, want[e][st]) {
						t.Fatalf("interleaved epoch %d step %d differs", e, st)
					}
				}
			}
			// A different epoch or seed gives different batches.
			if equalEpochs(want[0], want[1]) {
				t.Error("epochs 0 and 1 are identical")
			}
			if equalEpochs(want[0], epochBatches(other, 0, fwd)) {
				t.Error("seeds 42 and 43 give identical epochs")
			}
			// (epoch, step) is not symmetric in the stream key.
			if m > 1 && slices.Equal(a.Batch(0, 1, nil), a.Batch(1, 0, nil)) {
				t.Error("batch (0,1) equals batch (1,0)")
			}
		})
	}
}

func equalEpochs(a, b [][]int) bool {
	for i := range a {
		if !slices.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// TestBatchReusesDst checks the append-to-dst[:0] contract.
func TestBatchReusesDst(t *testing.T) {
	for _, c := range constructors {
		s := must(c.make(7))
		want := s.Batch(1, 0, nil)
		dst := make([]int, 5, 400)
		for i := range dst {
			dst[i] = -1
		}
		got := s.Batch(1, 0, dst)
		if !slices.Equal(got, want) {
			t.Errorf("%s: Batch with a dirty dst = %v, want %v", c.name, got, want)
		}
		if len(got) > 0 && &got[0] != &dst[0] {
			t.Errorf("%s: Batch reallocated although cap(dst) = 400 sufficed", c.name)
		}
	}
}

// TestBatchInvariants: indices distinct, in [0, N), size within
// MaxBatchSize, sorted for the kinds that promise it.
func TestBatchInvariants(t *testing.T) {
	for _, c := range constructors {
		s := must(c.make(11))
		for e := 0; e < 5; e++ {
			for st := 0; st < s.StepsPerEpoch(); st++ {
				b := s.Batch(e, st, nil)
				if mb := s.MaxBatchSize(); mb > 0 && len(b) > mb {
					t.Fatalf("%s: batch of %d > MaxBatchSize %d", c.name, len(b), mb)
				}
				seen := map[int]bool{}
				for _, v := range b {
					if v < 0 || v >= s.DatasetSize() || seen[v] {
						t.Fatalf("%s: bad or repeated index %d in %v", c.name, v, b)
					}
					seen[v] = true
				}
				if c.name != NameShuffle && !slices.IsSorted(b) {
					t.Fatalf("%s: batch not in increasing order: %v", c.name, b)
				}
			}
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	for _, c := range constructors {
		s := must(c.make(5))
		ref := must(c.make(5))
		m := s.StepsPerEpoch()
		const epochs = 6
		want := make([][][]int, epochs)
		for e := range want {
			want[e] = epochBatches(ref, e, seq(m))
		}
		var wg sync.WaitGroup
		errs := make(chan string, epochs)
		for g := 0; g < epochs; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for k := 0; k < 3*m; k++ {
					e, st := (g+k)%epochs, k%m
					if !slices.Equal(s.Batch(e, st, nil), want[e][st]) {
						errs <- c.name
						return
					}
				}
			}(g)
		}
		wg.Wait()
		close(errs)
		for name := range errs {
			t.Errorf("%s: concurrent Batch differs from serial", name)
		}
	}
}

func TestAccessors(t *testing.T) {
	sh := must(NewShuffle(103, 10, 1))
	po := must(NewPoisson(1000, 0.004, 1))
	tr := must(NewTruncatedPoisson(1000, 0.004, 9, 1))
	trBig := must(NewTruncatedPoisson(10, 0.5, 50, 1))
	al := must(NewAllocation(1000, 8, 1))
	cases := []struct {
		s          Sampler
		name       string
		n, m, maxB int
		exp, q     float64
	}{
		{sh, NameShuffle, 103, 10, 10, 10, 10.0 / 103},
		{po, NamePoisson, 1000, 250, 0, 4, 0.004},
		{tr, NameTruncatedPoisson, 1000, 250, 9, 4, 0.004},
		{trBig, NameTruncatedPoisson, 10, 2, 10, 5, 0.5},
		{al, NameAllocation, 1000, 8, 1000, 125, 0.125},
	}
	for _, c := range cases {
		s := c.s
		if s.Name() != c.name || s.DatasetSize() != c.n || s.StepsPerEpoch() != c.m ||
			s.MaxBatchSize() != c.maxB || math.Abs(s.ExpectedBatchSize()-c.exp) > 1e-12 ||
			math.Abs(s.SampleRate()-c.q) > 1e-15 {
			t.Errorf("%s: got (N %d, M %d, max %d, E %g, q %g), want (%d, %d, %d, %g, %g)",
				s.Name(), s.DatasetSize(), s.StepsPerEpoch(), s.MaxBatchSize(), s.ExpectedBatchSize(),
				s.SampleRate(), c.n, c.m, c.maxB, c.exp, c.q)
		}
	}
	// Poisson steps per epoch are round(1/q).
	for _, c := range []struct {
		q float64
		m int
	}{{1, 1}, {0.7, 1}, {0.5, 2}, {0.4, 3}, {0.3, 3}, {0.01, 100}, {1.0 / 3, 3}, {1e-12, 1e12}} {
		p := must(NewPoisson(10, c.q, 0))
		if p.StepsPerEpoch() != c.m {
			t.Errorf("q = %g: StepsPerEpoch = %d, want %d", c.q, p.StepsPerEpoch(), c.m)
		}
	}
}

func TestValidation(t *testing.T) {
	cases := []struct {
		name  string
		err   error
		field string
	}{
		{"shuffle n=0", second(NewShuffle(0, 1, 0)), "dataset size n"},
		{"shuffle n too big", second(NewShuffle(MaxDatasetSize+1, 1, 0)), "dataset size n"},
		{"shuffle B=0", second(NewShuffle(5, 0, 0)), "batch size"},
		{"shuffle B>n", second(NewShuffle(5, 6, 0)), "batch size"},
		{"poisson n=0", second(NewPoisson(0, 0.1, 0)), "dataset size n"},
		{"poisson q=0", second(NewPoisson(10, 0, 0)), "sample rate q"},
		{"poisson q<0", second(NewPoisson(10, -0.5, 0)), "sample rate q"},
		{"poisson q>1", second(NewPoisson(10, 1.5, 0)), "sample rate q"},
		{"poisson q NaN", second(NewPoisson(10, math.NaN(), 0)), "sample rate q"},
		{"poisson q +Inf", second(NewPoisson(10, math.Inf(1), 0)), "sample rate q"},
		{"poisson q tiny", second(NewPoisson(10, 1e-13, 0)), "sample rate q"},
		{"truncated n=-1", second(NewTruncatedPoisson(-1, 0.1, 5, 0)), "dataset size n"},
		{"truncated q=2", second(NewTruncatedPoisson(10, 2, 5, 0)), "sample rate q"},
		{"truncated max=0", second(NewTruncatedPoisson(10, 0.1, 0, 0)), "maxBatch"},
		{"allocation n=0", second(NewAllocation(0, 1, 0)), "dataset size n"},
		{"allocation steps=0", second(NewAllocation(10, 0, 0)), "steps per epoch"},
		{"allocation steps>n", second(NewAllocation(10, 11, 0)), "steps per epoch"},
	}
	for _, c := range cases {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if !errors.Is(c.err, ErrInvalid) {
			t.Errorf("%s: error %q does not wrap ErrInvalid", c.name, c.err)
		}
		if !strings.Contains(c.err.Error(), c.field) || !strings.Contains(c.err.Error(), "must be") {
			t.Errorf("%s: error %q does not name %q and its valid range", c.name, c.err, c.field)
		}
	}
	// Edge values that are valid.
	for _, err := range []error{
		second(NewShuffle(1, 1, 0)), second(NewShuffle(5, 5, 0)), second(NewPoisson(1, 1, 0)),
		second(NewPoisson(1, MinSampleRate, 0)), second(NewTruncatedPoisson(1, 1, 1, 0)),
		second(NewAllocation(1, 1, 0)), second(NewAllocation(7, 7, 0)),
	} {
		if err != nil {
			t.Errorf("valid arguments rejected: %v", err)
		}
	}
}

func second(_ Sampler, err error) error { return err }

func TestBatchPanicsOutOfRange(t *testing.T) {
	for _, c := range constructors {
		s := must(c.make(1))
		for _, es := range [][2]int{{-1, 0}, {0, -1}, {0, s.StepsPerEpoch()}} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: Batch(%d, %d) did not panic", c.name, es[0], es[1])
					}
				}()
				s.Batch(es[0], es[1], nil)
			}()
		}
	}
}

func TestChunks(t *testing.T) {
	const phys = 4
	for _, n := range []int{0, 1, 3, 4, 5, 8, 9, 13} {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = 100 + 7*i // distinct, non-zero
		}
		wantK := max(1, (n+phys-1)/phys)
		// Dirty buffers with spare capacity must be reused and cleaned.
		rowsBuf := make([]int, 3, 64)
		maskBuf := make([]float64, 3, 64)
		for i := range rowsBuf[:cap(rowsBuf)] {
			rowsBuf[:cap(rowsBuf)][i] = -5
			maskBuf[:cap(maskBuf)][i] = 9
		}
		for _, bufs := range []struct {
			rows []int
			mask []float64
		}{{nil, nil}, {rowsBuf, maskBuf}} {
			rows, mask, k := Chunks(idx, phys, bufs.rows, bufs.mask)
			if k != wantK || len(rows) != k*phys || len(mask) != k*phys {
				t.Fatalf("n=%d: k=%d len(rows)=%d len(mask)=%d, want k=%d and %d rows", n, k, len(rows), len(mask), wantK, wantK*phys)
			}
			if bufs.rows != nil && (&rows[0] != &rowsBuf[:1][0] || &mask[0] != &maskBuf[:1][0]) {
				t.Errorf("n=%d: buffers with enough capacity were not reused", n)
			}
			real := 0.0
			for i := range rows {
				switch {
				case i < n:
					if rows[i] != idx[i] || mask[i] != 1 {
						t.Errorf("n=%d: row %d = (%d, %g), want (%d, 1)", n, i, rows[i], mask[i], idx[i])
					}
				default:
					if rows[i] != 0 || mask[i] != 0 {
						t.Errorf("n=%d: padding row %d = (%d, %g), want (0, 0)", n, i, rows[i], mask[i])
					}
				}
				real += mask[i]
			}
			if real != float64(n) {
				t.Errorf("n=%d: mask sums to %g", n, real)
			}
		}
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Chunks with phys = 0 did not panic")
			}
		}()
		Chunks([]int{1}, 0, nil, nil)
	}()
}

// FuzzChunks checks Chunks' invariants on arbitrary batch and physical sizes.
func FuzzChunks(f *testing.F) {
	f.Add(uint16(0), uint8(1))
	f.Add(uint16(17), uint8(4))
	f.Add(uint16(64), uint8(64))
	f.Fuzz(func(t *testing.T, n uint16, phys uint8) {
		if phys == 0 {
			return
		}
		idx := seq(int(n))
		rows, mask, k := Chunks(idx, int(phys), nil, nil)
		if k < 1 || (k-1)*int(phys) >= max(int(n), 1) || k*int(phys) < int(n) || len(rows) != k*int(phys) || len(mask) != len(rows) {
			t.Fatalf("n=%d phys=%d: k=%d len=%d", n, phys, k, len(rows))
		}
		for i := range rows {
			if (i < int(n)) != (mask[i] == 1) || (i >= int(n) && (mask[i] != 0 || rows[i] != 0)) || (i < int(n) && rows[i] != i) {
				t.Fatalf("n=%d phys=%d: row %d = (%d, %g)", n, phys, i, rows[i], mask[i])
			}
		}
	})
}

// TestEpochGeometry: the helpers the command and the accountants use agree
// with what the samplers do, and the default truncation cap lies above the
// expected batch and within n.
func TestEpochGeometry(t *testing.T) {
	for _, c := range []struct{ n, b int }{{60000, 256}, {1000, 7}, {10, 10}, {5, 3}} {
		s, err := NewShuffle(c.n, c.b, 1)
		if err != nil {
			t.Fatal(err)
		}
		if s.StepsPerEpoch() != ShuffleSteps(c.n, c.b) {
			t.Errorf("shuffle %v: %d steps, helper %d", c, s.StepsPerEpoch(), ShuffleSteps(c.n, c.b))
		}
		q := float64(c.b) / float64(c.n)
		p, err := NewPoisson(c.n, q, 1)
		if err != nil {
			t.Fatal(err)
		}
		if p.StepsPerEpoch() != PoissonSteps(q) {
			t.Errorf("poisson %v: %d steps, helper %d", c, p.StepsPerEpoch(), PoissonSteps(q))
		}
		if m := DefaultMaxBatch(c.n, q); m < c.b || m > c.n {
			t.Errorf("DefaultMaxBatch%v = %d, want in [%d, %d]", c, m, c.b, c.n)
		}
		if a := AllocationSteps(c.n, c.b); a < 1 || a > c.n {
			t.Errorf("AllocationSteps%v = %d", c, a)
		}
	}
}
