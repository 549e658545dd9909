package fastblas

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ebitengine/purego"
)

// Name is a BLAS choice: Auto, Go or one of the libraries.
type Name string

// The choices of --blas and DPSGD_BLAS.
const (
	Auto     Name = "auto"     // the first library of Libraries that loads, else Go
	Go       Name = "go"       // gonum's pure-Go BLAS
	Asm      Name = "asm"      // dpsgd's AVX kernels (package avxgemm: AVX-512 or AVX2)
	OpenBLAS Name = "openblas" // OpenBLAS (Debian: libopenblas0)
	BLIS     Name = "blis"     // BLIS (Debian: libblis4)
	MKL      Name = "mkl"      // Intel oneMKL's single dynamic library, libmkl_rt
)

// EnvVar is the environment variable that chooses the BLAS when no flag does.
const EnvVar = "DPSGD_BLAS"

// Names lists every choice, in the order the help gives them.
func Names() []Name { return []Name{Auto, Go, Asm, OpenBLAS, BLIS, MKL} }

// Libraries lists the libraries in the order Auto tries them.
func Libraries() []Name { return []Name{OpenBLAS, BLIS, MKL} }

// NamesText is the list of choices as help and errors write it: "auto, go, asm, openblas, blis or mkl".
func NamesText() string {
	ns := Names()
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = string(n)
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
}

// ParseName returns the choice named s (exactly one of Names), or an error that lists them.
func ParseName(s string) (Name, error) {
	for _, n := range Names() {
		if s == string(n) {
			return n, nil
		}
	}
	return "", fmt.Errorf("want %s", NamesText())
}

// sonames are the shared objects tried, in order, for a library.
func sonames(n Name) []string {
	switch n {
	case OpenBLAS:
		// Debian's libopenblas0-pthread, -openmp and -serial all provide libopenblas.so.0.
		return []string{"libopenblas.so.0", "libopenblas.so"}
	case BLIS:
		return []string{"libblis.so.4", "libblis.so"}
	case MKL:
		return []string{"libmkl_rt.so.2", "libmkl_rt.so", "libmkl_rt.so.1"}
	}
	return nil
}

// Package names what to install to get library n.
func Package(n Name) string {
	switch n {
	case OpenBLAS:
		return "Debian's libopenblas0"
	case BLIS:
		return "Debian's libblis4"
	case MKL:
		return "Intel oneMKL (libmkl_rt.so on the library path)"
	}
	return ""
}

// ErrNotInstalled is returned (wrapped) by Open when no shared object of the library could be
// opened; other errors of Open mean that one was opened but cannot be used.
var ErrNotInstalled = errors.New("not installed")

// The CBLAS enumerations (cblas.h): row-major storage and the transpose flags.
const (
	cblasRowMajor = 101
	cblasNoTrans  = 111
	cblasTrans    = 112
)

// Library is a BLAS library loaded into the process. It is never unloaded.
type Library struct {
	name    Name
	path    string // the shared object opened
	version string // the library's own description of itself
	sgemm   func(order, tA, tB, m, n, k int32, alpha float32, a []float32, lda int32, b []float32, ldb int32, beta float32, c []float32, ldc int32)
	dgemm   func(order, tA, tB, m, n, k int32, alpha float64, a []float64, lda int32, b []float64, ldb int32, beta float64, c []float64, ldc int32)
	// setThreads and threads set and read the library's thread count.
	setThreads func(n int)
	threads    func() int
}

// Open loads library n (OpenBLAS, BLIS or MKL) with its 32-bit-integer CBLAS interface, the
// one these sonames export (the 64-bit-integer builds have other names).
func Open(n Name) (*Library, error) {
	return openFrom(n, sonames(n))
}

// openFrom is Open trying the shared objects names, in order.
func openFrom(n Name, names []string) (*Library, error) {
	if sonames(n) == nil {
		return nil, fmt.Errorf("fastblas: %q is not a library (want openblas, blis or mkl)", n)
	}
	var (
		h    uintptr
		path string
		errs []string
	)
	for _, s := range names {
		var err error
		if h, err = purego.Dlopen(s, purego.RTLD_NOW|purego.RTLD_LOCAL); err == nil {
			path = s
			break
		}
		// dlerror's "name: reason": the reasons, once each (usually one: no such file).
		if why := strings.TrimPrefix(err.Error(), s+": "); !slices.Contains(errs, why) {
			errs = append(errs, why)
		}
	}
	if path == "" {
		return nil, fmt.Errorf("%s: %w: cannot load %s (%s); install %s", n, ErrNotInstalled,
			strings.Join(names, " or "), strings.Join(errs, "; "), Package(n))
	}
	lib := &Library{name: n, path: path}
	syms := []symbol{{&lib.sgemm, "cblas_sgemm"}, {&lib.dgemm, "cblas_dgemm"}}
	var describe func() string
	switch n {
	case OpenBLAS:
		var (
			config, core func() string
			parallel     func() int32
			set          func(int32)
			get          func() int32
		)
		syms = append(syms, symbol{&config, "openblas_get_config"}, symbol{&core, "openblas_get_corename"},
			symbol{&parallel, "openblas_get_parallel"}, symbol{&set, "openblas_set_num_threads"},
			symbol{&get, "openblas_get_num_threads"})
		lib.setThreads = func(t int) { set(int32(t)) }
		lib.threads = func() int { return int(get()) }
		describe = func() string { return openBLASVersion(config(), core(), parallel()) }
	case BLIS:
		var (
			version func() string
			set     func(int64) // dim_t
			get     func() int64
		)
		syms = append(syms, symbol{&version, "bli_info_get_version_str"},
			symbol{&set, "bli_thread_set_num_threads"}, symbol{&get, "bli_thread_get_num_threads"})
		lib.setThreads = func(t int) { set(int64(t)) }
		lib.threads = func() int { return int(get()) }
		describe = func() string { return version() }
	case MKL:
		var (
			version func(buf []byte, n int32)
			set     func(int32)
			get     func() int32
		)
		syms = append(syms, symbol{&version, "MKL_Get_Version_String"},
			symbol{&set, "MKL_Set_Num_Threads"}, symbol{&get, "MKL_Get_Max_Threads"})
		lib.setThreads = func(t int) { set(int32(t)) }
		lib.threads = func() int { return int(get()) }
		describe = func() string {
			buf := make([]byte, 256)
			version(buf, int32(len(buf)))
			s, _, _ := strings.Cut(string(buf), "\x00")
			return strings.TrimSpace(s)
		}
	}
	for _, s := range syms {
		if _, err := purego.Dlsym(h, s.name); err != nil {
			return nil, fmt.Errorf("%s: %s lacks %s: %w", n, path, s.name, err)
		}
	}
	for _, s := range syms {
		purego.RegisterLibFunc(s.fn, h, s.name)
	}
	lib.version = describe()
	return lib, nil
}

// symbol is a function of a library and the Go variable it is bound to.
type symbol struct {
	fn   any
	name string
}

// openBLASVersion condenses openblas_get_config ("OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY
// Haswell MAX_THREADS=64"), the core in use and the threading model into "0.3.21 (Haswell,
// pthreads)".
func openBLASVersion(config, core string, parallel int32) string {
	f := strings.Fields(config)
	v := config
	if len(f) >= 2 && strings.EqualFold(f[0], "OpenBLAS") {
		v = f[1]
	}
	model := map[int32]string{0: "sequential", 1: "pthreads", 2: "OpenMP"}[parallel]
	if model == "" {
		model = fmt.Sprintf("parallel mode %d", parallel)
	}
	if core == "" {
		return fmt.Sprintf("%s (%s)", v, model)
	}
	return fmt.Sprintf("%s (%s, %s)", v, core, model)
}

// Name is the library's choice name (openblas, blis or mkl).
func (l *Library) Name() Name { return l.name }

// Path is the shared object that was opened.
func (l *Library) Path() string { return l.path }

// Version is the library's description of its version (and, for OpenBLAS, the kernel set and
// threading model in use).
func (l *Library) Version() string { return l.version }

// SetThreads sets the number of threads the library runs one call on (n ≥ 1). The setting is
// the library's, hence process-wide.
func (l *Library) SetThreads(n int) { l.setThreads(max(n, 1)) }

// Threads is the library's current thread count.
func (l *Library) Threads() int { return l.threads() }

// Describe is the library in one phrase, as the train JSON's "blas" key gives it:
// "openblas 0.3.21 (Haswell, pthreads), 1 thread".
func (l *Library) Describe() string {
	if t := l.Threads(); t >= 1 {
		return fmt.Sprintf("%s %s, %s", l.name, l.version, threadsText(t))
	}
	// BLIS answers −1 until its thread count is set: its environment variables decide.
	return fmt.Sprintf("%s %s, threads unset", l.name, l.version)
}
