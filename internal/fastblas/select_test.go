package fastblas

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/blas/gonum"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/dpsgd/dpsgd/internal/avxgemm"
)

func TestParseName(t *testing.T) {
	for _, n := range Names() {
		got, err := ParseName(string(n))
		if err != nil || got != n {
			t.Errorf("ParseName(%q) = %q, %v", n, got, err)
		}
	}
	for _, s := range []string{"", "Auto", "OPENBLAS", " go", "go ", "gonum", "openblas0", "mkl_rt", "blas"} {
		if n, err := ParseName(s); err == nil {
			t.Errorf("ParseName(%q) = %q, want an error", s, n)
		} else if !strings.Contains(err.Error(), NamesText()) {
			t.Errorf("ParseName(%q): error %q does not list the choices", s, err)
		}
	}
	if NamesText() != "auto, go, asm, openblas, blis or mkl" {
		t.Errorf("NamesText() = %q", NamesText())
	}
}

// FuzzParseName: ParseName accepts exactly the names of Names, and refuses anything else with
// a one-line error listing them.
func FuzzParseName(f *testing.F) {
	for _, s := range []string{"auto", "go", "asm", "openblas", "blis", "mkl", "", "Go", "open blas", "mkl\n", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseName(s)
		known := false
		for _, m := range Names() {
			known = known || s == string(m)
		}
		switch {
		case known && (err != nil || string(n) != s):
			t.Fatalf("ParseName(%q) = %q, %v", s, n, err)
		case !known && err == nil:
			t.Fatalf("ParseName(%q) = %q, want an error", s, n)
		case err != nil && strings.Contains(err.Error(), "\n"):
			t.Fatalf("ParseName(%q): multi-line error %q", s, err)
		}
	})
}

func TestThreadsFor(t *testing.T) {
	for _, c := range []struct{ cores, replicas, want int }{
		{2, 2, 1}, {2, 1, 2}, {16, 4, 4}, {16, 3, 5}, {1, 8, 1}, {8, 0, 8}, {8, -1, 8}, {0, 2, 1},
	} {
		got := ThreadsFor(c.cores, c.replicas)
		if got != c.want {
			t.Errorf("ThreadsFor(%d, %d) = %d, want %d", c.cores, c.replicas, got, c.want)
		}
		if c.cores >= 1 && c.replicas >= 1 && got*c.replicas > max(c.cores, c.replicas) {
			t.Errorf("ThreadsFor(%d, %d) = %d: %d threads in all", c.cores, c.replicas, got, got*c.replicas)
		}
	}
}

// TestOpenNotInstalled: a library whose shared objects cannot be opened is ErrNotInstalled,
// and the error names the sonames and the package to install.
func TestOpenNotInstalled(t *testing.T) {
	_, err := openFrom(OpenBLAS, []string{"/nonexistent/dpsgd-test/libopenblas.so.0"})
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("err = %v, want ErrNotInstalled", err)
	}
	for _, s := range []string{"/nonexistent/dpsgd-test/libopenblas.so.0", "libopenblas0"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %s", err, s)
		}
	}
	if _, err := Open("netlib"); err == nil || errors.Is(err, ErrNotInstalled) {
		t.Errorf("Open(netlib) = %v, want a not-a-library error", err)
	}
}

// TestOpenBroken: a shared object that loads but lacks the CBLAS symbols (the C math library)
// is an error other than ErrNotInstalled, naming the missing symbol.
func TestOpenBroken(t *testing.T) {
	_, err := openFrom(BLIS, []string{"libm.so.6"})
	if err == nil {
		t.Fatal("libm.so.6 accepted as BLIS")
	}
	if errors.Is(err, ErrNotInstalled) {
		t.Skipf("libm.so.6 cannot be opened here: %v", err)
	}
	if !strings.Contains(err.Error(), "lacks cblas_sgemm") {
		t.Errorf("error %q does not name the missing symbol", err)
	}
}

// fakeLibrary is a Library whose CBLAS products are gonum's (row-major only), whose thread
// count is threads, and whose setThreads does nothing.
func fakeLibrary(name Name, version string, threads int) *Library {
	var g gonum.Implementation
	op := func(t int32) blas.Transpose {
		if t == cblasTrans {
			return blas.Trans
		}
		return blas.NoTrans
	}
	return &Library{name: name, version: version, setThreads: func(int) {}, threads: func() int { return threads },
		sgemm: func(order, tA, tB, m, n, k int32, alpha float32, a []float32, lda int32, b []float32, ldb int32, beta float32, c []float32, ldc int32) {
			g.Sgemm(op(tA), op(tB), int(m), int(n), int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc))
		},
		dgemm: func(order, tA, tB, m, n, k int32, alpha float64, a []float64, lda int32, b []float64, ldb int32, beta float64, c []float64, ldc int32) {
			g.Dgemm(op(tA), op(tB), int(m), int(n), int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc))
		},
	}
}

// positionDependent makes lib's products round every odd row differently (its last bit
// flipped), as a library whose results depend on the row's position would.
func positionDependent(lib *Library) *Library {
	s, d := lib.sgemm, lib.dgemm
	lib.sgemm = func(order, tA, tB, m, n, k int32, alpha float32, a []float32, lda int32, b []float32, ldb int32, beta float32, c []float32, ldc int32) {
		s(order, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		for i := int32(1); i < m; i += 2 {
			for j := range n {
				c[i*ldc+j] = math.Float32frombits(math.Float32bits(c[i*ldc+j]) ^ 1)
			}
		}
	}
	lib.dgemm = func(order, tA, tB, m, n, k int32, alpha float64, a []float64, lda int32, b []float64, ldb int32, beta float64, c []float64, ldc int32) {
		d(order, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		for i := int32(1); i < m; i += 2 {
			for j := range n {
				c[i*ldc+j] = math.Float64frombits(math.Float64bits(c[i*ldc+j]) ^ 1)
			}
		}
	}
	return lib
}

// TestSelect: go is gonum's; a named library that does not load is an error (the loader's);
// auto takes the first library whose rows are position-independent, else the first that loads
// (its sums, gonum's graphs), else gonum with a note that says why: which package to install
// when none is there, the loader's error when one is there but unusable.
func TestSelect(t *testing.T) {
	noAsm := func(int) *avxgemm.Impl { return nil }
	notInstalled := func(n Name) (*Library, error) {
		return nil, fmt.Errorf("%s: %w: gone", n, ErrNotInstalled)
	}
	broken := func(n Name) (*Library, error) {
		if n == BLIS {
			return nil, fmt.Errorf("%s: libblis.so.4 lacks cblas_sgemm", n)
		}
		return notInstalled(n)
	}
	var opened []Name
	blisOnly := func(n Name) (*Library, error) {
		opened = append(opened, n)
		if n == BLIS {
			return fakeLibrary(BLIS, "0.9.0", 1), nil
		}
		return notInstalled(n)
	}

	c, err := selectWith(Go, 1, notInstalled, noAsm)
	if err != nil || c.Impl.Library() != nil || c.Note != "" || c.Describe() != GoDescription {
		t.Errorf("go: %+v, %v", c, err)
	}
	if _, err := selectWith(OpenBLAS, 1, notInstalled, noAsm); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("openblas, not installed: err %v", err)
	}
	if _, err := selectWith(BLIS, 1, broken, noAsm); err == nil || errors.Is(err, ErrNotInstalled) {
		t.Errorf("blis, broken: err %v", err)
	}
	if _, err := selectWith("netlib", 1, notInstalled, noAsm); err == nil {
		t.Error("netlib accepted")
	}

	c, err = selectWith(Auto, 1, notInstalled, noAsm)
	if err != nil || c.Impl.Library() != nil || !strings.Contains(c.Note, "libblis4") || strings.Contains(c.Note, "\n") {
		t.Errorf("auto, none installed: %+v, %v", c, err)
	}
	c, err = selectWith(Auto, 1, broken, noAsm)
	if err != nil || c.Impl.Library() != nil || !strings.Contains(c.Note, "lacks cblas_sgemm") {
		t.Errorf("auto, one broken: %+v, %v", c, err)
	}

	// Both there, OpenBLAS's rows position-dependent: BLIS for everything.
	both := func(n Name) (*Library, error) {
		switch n {
		case OpenBLAS:
			return positionDependent(fakeLibrary(OpenBLAS, "0.3.21", 1)), nil
		case BLIS:
			return fakeLibrary(BLIS, "0.9.0", 1), nil
		}
		return notInstalled(n)
	}
	c, err = selectWith(Auto, 1, both, noAsm)
	if err != nil || c.Impl.Library().Name() != BLIS || c.Graph != c.Impl || c.Describe() != "blis 0.9.0, 1 thread" {
		t.Errorf("auto, OpenBLAS and BLIS: %q, %v", c.Describe(), err)
	}
	// OpenBLAS alone: its sums, gonum's graphs.
	openBLASOnly := func(n Name) (*Library, error) {
		if n == OpenBLAS {
			return both(n)
		}
		return notInstalled(n)
	}
	c, err = selectWith(Auto, 1, openBLASOnly, noAsm)
	if err != nil || c.Impl.Library().Name() != OpenBLAS || c.Graph.s32 || c.Graph.d64 ||
		c.Describe() != "openblas 0.3.21, 1 thread; graph products on gonum (openblas's rows depend on their position)" {
		t.Errorf("auto, OpenBLAS alone: %q, %v", c.Describe(), err)
	}
	// OpenBLAS named: its sums, gonum's graphs.
	c, err = selectWith(OpenBLAS, 1, both, noAsm)
	if err != nil || c.Graph.Library() != c.Impl.Library() || c.Graph.s32 || c.Graph.d64 {
		t.Errorf("openblas named, position-dependent: %q, %v", c.Describe(), err)
	}

	c, err = selectWith(Auto, 1, blisOnly, noAsm)
	if err != nil || c.Impl.Library() == nil || c.Impl.Library().Name() != BLIS || c.Note != "" {
		t.Errorf("auto, BLIS there: %+v, %v", c, err)
	}
	if len(opened) != 3 || opened[0] != OpenBLAS || opened[1] != BLIS || opened[2] != MKL {
		t.Errorf("auto tried %v, want [openblas blis mkl]", opened)
	}
	// The fake computes with gonum: its rows are independent, so the graphs use it too.
	if c.Graph != c.Impl || c.Describe() != "blis 0.9.0, 1 thread" {
		t.Errorf("auto, BLIS there: graph %+v, %q", c.Graph, c.Describe())
	}
}

// TestSelectAsm: with dpsgd's AVX kernels, auto takes them for everything, libraries
// installed or not; a library named computes the sums, the kernels the graphs' products; asm
// names them alone, and is an error (ErrNotInstalled) on a CPU without them.
func TestSelectAsm(t *testing.T) {
	notInstalled := func(n Name) (*Library, error) {
		return nil, fmt.Errorf("%s: %w: gone", n, ErrNotInstalled)
	}
	if _, err := selectWith(Asm, 1, notInstalled, func(int) *avxgemm.Impl { return nil }); !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "AVX") {
		t.Errorf("asm without the kernels: err %v", err)
	}
	if !avxgemm.Available() {
		t.Skip(avxgemm.Missing())
	}
	withAsm := func(th int) *avxgemm.Impl { return avxgemm.New(th) }
	c, err := selectWith(Asm, 2, notInstalled, withAsm)
	if err != nil || c.Impl.asm == nil || c.Impl.lib != nil || c.Graph != c.Impl || c.Note != "" ||
		c.Describe() != AsmDescription(c.Impl.asm)+", 2 threads" {
		t.Errorf("asm: %q, %v", c.Describe(), err)
	}
	c, err = selectWith(Auto, 1, notInstalled, withAsm)
	if err != nil || c.Impl.asm == nil || c.Impl.lib != nil || c.Graph != c.Impl || c.Note != "" {
		t.Errorf("auto, no library: %q, %v", c.Describe(), err)
	}
	openBLAS := func(n Name) (*Library, error) {
		if n == OpenBLAS {
			return positionDependent(fakeLibrary(OpenBLAS, "0.3.21", 1)), nil
		}
		return notInstalled(n)
	}
	c, err = selectWith(Auto, 1, openBLAS, withAsm)
	if err != nil || c.Impl.lib != nil || c.Impl.asm == nil || c.Graph != c.Impl {
		t.Errorf("auto, OpenBLAS and asm: %q, %v", c.Describe(), err)
	}
	c, err = selectWith(OpenBLAS, 1, openBLAS, withAsm)
	if err != nil || c.Impl.Library().Name() != OpenBLAS || c.Graph.lib != nil || c.Graph.asm == nil ||
		c.Describe() != "openblas 0.3.21, 1 thread; graph products on "+AsmDescription(c.Graph.asm)+", 1 thread (openblas's rows depend on their position)" {
		t.Errorf("openblas named, with asm: %q, %v", c.Describe(), err)
	}
	blis := func(n Name) (*Library, error) {
		if n == BLIS {
			return fakeLibrary(BLIS, "0.9.0", 1), nil
		}
		return notInstalled(n)
	}
	c, err = selectWith(BLIS, 1, blis, withAsm)
	if err != nil || c.Impl.Library().Name() != BLIS || c.Graph.asm == nil ||
		c.Describe() != "blis 0.9.0, 1 thread; graph products on "+AsmDescription(c.Graph.asm)+", 1 thread" {
		t.Errorf("blis named, with asm: %q, %v", c.Describe(), err)
	}
	// Kernels whose rows failed the probe would not be used.
	c, err = selectWith(Go, 1, notInstalled, withAsm)
	if err != nil || c.Impl.asm != nil || c.Graph.asm != nil {
		t.Errorf("go with the kernels there: %q, %v", c.Describe(), err)
	}
}

// TestDescribe: the JSON's "blas" phrase, including which graph products stay on gonum.
func TestDescribe(t *testing.T) {
	lib := fakeLibrary(OpenBLAS, "0.3.21 (Haswell, pthreads)", 2)
	im := lib.Implementation()
	for _, c := range []struct {
		s32, d64 bool
		want     string
	}{
		{true, true, "openblas 0.3.21 (Haswell, pthreads), 2 threads"},
		{false, false, "openblas 0.3.21 (Haswell, pthreads), 2 threads; graph products on gonum (openblas's rows depend on their position)"},
		{false, true, "openblas 0.3.21 (Haswell, pthreads), 2 threads; float32 graph products on gonum (openblas's rows depend on their position)"},
		{true, false, "openblas 0.3.21 (Haswell, pthreads), 2 threads; float64 graph products on gonum (openblas's rows depend on their position)"},
	} {
		g := im
		g.s32, g.d64 = c.s32, c.d64
		if got := (Choice{Impl: im, Graph: g, dependent: !c.s32 || !c.d64}).Describe(); got != c.want {
			t.Errorf("Describe = %q, want %q", got, c.want)
		}
	}
	if got := fakeLibrary(OpenBLAS, "0.3.21", 1).Describe(); got != "openblas 0.3.21, 1 thread" {
		t.Errorf("one thread: %q", got)
	}
	if got := fakeLibrary(BLIS, "0.9.0", -1).Describe(); got != "blis 0.9.0, threads unset" {
		t.Errorf("BLIS before its threads are set: %q", got)
	}
	for _, c := range []struct {
		config, core string
		parallel     int32
		want         string
	}{
		{"OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64", "Haswell", 1, "0.3.21 (Haswell, pthreads)"},
		{"OpenBLAS 0.3.26 NO_AFFINITY USE_OPENMP Zen MAX_THREADS=128", "Zen", 2, "0.3.26 (Zen, OpenMP)"},
		{"OpenBLAS 0.3.21", "", 0, "0.3.21 (sequential)"},
		{"something else", "", 7, "something else (parallel mode 7)"},
	} {
		if got := openBLASVersion(c.config, c.core, c.parallel); got != c.want {
			t.Errorf("openBLASVersion(%q, %q, %d) = %q, want %q", c.config, c.core, c.parallel, got, c.want)
		}
	}
}

// TestInstall: Install puts Impl under gonum's blas32 and blas64 and Graph under Gorgonia and
// gorgonia.org/tensor; the zero Choice puts gonum's own back everywhere.
func TestInstall(t *testing.T) {
	defer Install(Choice{})
	lib := fakeLibrary(OpenBLAS, "test", 1)
	im := lib.Implementation()
	g := im
	g.s32 = false
	Install(Choice{Impl: im, Graph: g})
	if blas32.Implementation() != im || blas64.Implementation() != im {
		t.Error("blas32/blas64 do not have Impl")
	}
	if gorgonia.WhichBLAS() != g || tensor.WhichBLAS() != g {
		t.Error("Gorgonia or tensor does not have Graph")
	}
	Install(Choice{})
	var want gonum.Implementation
	if blas32.Implementation() != want || blas64.Implementation() != want || gorgonia.WhichBLAS() != want || tensor.WhichBLAS() != want {
		t.Error("the zero Choice did not restore gonum's BLAS")
	}
}
