package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/internal/fastblas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/gonum"
	"gorgonia.org/gorgonia"
)

// TestBLASChoose: --blas wins over DPSGD_BLAS, auto is the default, and a bad value or a
// library named but absent is a usage error on one line naming the flag or the variable.
func TestBLASChoose(t *testing.T) {
	var asked []fastblas.Name
	sel := func(n fastblas.Name, threads int) (fastblas.Choice, error) {
		asked = append(asked, n)
		if threads != 3 {
			t.Errorf("threads %d, want 3", threads)
		}
		switch n {
		case fastblas.Go, fastblas.Auto:
			return fastblas.Choice{}, nil
		}
		return fastblas.Choice{}, fmt.Errorf("%s: %w: gone", n, fastblas.ErrNotInstalled)
	}
	for _, c := range []struct {
		flag, env string
		want      fastblas.Name // "" when an error is wanted
		errHas    string
	}{
		{"", "", fastblas.Auto, ""},
		{"go", "", fastblas.Go, ""},
		{"", "go", fastblas.Go, ""},
		{"go", "openblas", fastblas.Go, ""}, // the flag wins
		{"go", "nonsense", fastblas.Go, ""}, // even over a bad variable
		{"auto", "mkl", fastblas.Auto, ""},  // auto named on the command line
		{"openblas", "go", "", "--blas: "},  // the flag names an absent library
		{"", "blis", "", "DPSGD_BLAS: "},    // the variable does
		{"", "nonsense", "", `DPSGD_BLAS "nonsense": want auto, go, asm, openblas, blis or mkl`},
		{"", "OpenBLAS", "", `DPSGD_BLAS "OpenBLAS"`},
	} {
		asked = nil
		_, err := blasChoose(c.flag, c.env, 3, sel)
		if c.want != "" {
			if err != nil || len(asked) != 1 || asked[0] != c.want {
				t.Errorf("flag %q env %q: asked %v, err %v; want %s", c.flag, c.env, asked, err, c.want)
			}
			continue
		}
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.errHas) || strings.Contains(err.Error(), "\n") {
			t.Errorf("flag %q env %q: err %v, want a one-line usage error containing %q", c.flag, c.env, err, c.errHas)
		}
	}
}

// TestBLASInstallNote: auto's fallback note goes to stderr on one line unless quiet, the
// description says gonum, and nothing is printed when go is asked for.
func TestBLASInstallNote(t *testing.T) {
	t.Setenv(fastblas.EnvVar, "")
	note := "BLAS: gonum (pure Go); install Debian's libblis4 for a faster CPU path (docs/benchmarks.md)"
	sel := func(n fastblas.Name, _ int) (fastblas.Choice, error) {
		if n == fastblas.Auto {
			return fastblas.Choice{Note: note}, nil
		}
		return fastblas.Choice{}, nil
	}
	for _, c := range []struct {
		flag   string
		quiet  bool
		stderr string
	}{
		{"", false, "dpsgd: " + note + "\n"},
		{"", true, ""},
		{"go", false, ""},
	} {
		ch, err := blasPrepareWith(c.flag, 0, sel)
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		if desc := blasInstall(ch, c.quiet, &stderr); desc != fastblas.GoDescription || stderr.String() != c.stderr {
			t.Errorf("--blas %q quiet %v: %q, stderr %q; want stderr %q", c.flag, c.quiet, desc, stderr.String(), c.stderr)
		}
	}
}

// absentLibrary returns a library that is not installed here, or skips.
func absentLibrary(t *testing.T) fastblas.Name {
	t.Helper()
	for _, n := range fastblas.Libraries() {
		if _, err := fastblas.Open(n); errors.Is(err, fastblas.ErrNotInstalled) {
			return n
		}
	}
	t.Skip("OpenBLAS, BLIS and MKL are all installed: no absent library to ask for")
	return ""
}

// TestTrainBLAS: the train JSON reports the BLAS used; --blas go and DPSGD_BLAS=go give gonum;
// a bad --blas or DPSGD_BLAS, or an absent library asked for, exits 2 naming the flag or the
// variable, before any training.
func TestTrainBLAS(t *testing.T) {
	blasOf := func(args ...string) string {
		t.Helper()
		code, out, errOut := runCmd(t, append([]string{"train", "--epochs", "1", "--sigma", "1", "--quiet", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var m map[string]any
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
			t.Fatal(err)
		}
		s, _ := m["blas"].(string)
		return s
	}
	if got := blasOf("--blas", "go"); got != fastblas.GoDescription {
		t.Errorf("--blas go: blas %q", got)
	}
	t.Setenv(fastblas.EnvVar, "go")
	if got := blasOf(); got != fastblas.GoDescription {
		t.Errorf("DPSGD_BLAS=go: blas %q", got)
	}
	t.Setenv(fastblas.EnvVar, "")
	auto, err := fastblas.Select(fastblas.Auto, fastblas.ThreadsFor(runtime.NumCPU(), runtime.GOMAXPROCS(0)))
	if err != nil {
		t.Fatal(err)
	}
	if got := blasOf(); got != auto.Describe() {
		t.Errorf("auto: blas %q, want %q", got, auto.Describe())
	}
	// The command put gonum's BLAS back when it returned.
	if blas32.Implementation() != (gonum.Implementation{}) || gorgonia.WhichBLAS() != (gonum.Implementation{}) {
		t.Errorf("after dpsgd train: blas32 %T, Gorgonia %T; want gonum's", blas32.Implementation(), gorgonia.WhichBLAS())
	}

	absent := string(absentLibrary(t))
	for _, c := range []struct {
		env  string
		args []string
		has  string
	}{
		{"", []string{"--blas", "nonsense"}, `invalid value "nonsense" for flag --blas: want auto, go, asm, openblas, blis or mkl`},
		{"nonsense", nil, `DPSGD_BLAS "nonsense"`},
		{"", []string{"--blas", absent}, "--blas: " + absent + ": not installed"},
		{absent, nil, "DPSGD_BLAS: " + absent + ": not installed"},
	} {
		t.Setenv(fastblas.EnvVar, c.env)
		code, _, errOut := runCmd(t, append([]string{"train", "--epochs", "1", "--sigma", "1", "--quiet", "--json"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.has) {
			t.Errorf("env %q args %v: exit %d, stderr %q; want 2 and %q", c.env, c.args, code, errOut, c.has)
		}
	}
}

// TestBenchStepBLAS: dpsgd bench step reports the BLAS in its table and JSON.
func TestBenchStepBLAS(t *testing.T) {
	code, out, errOut := runCmd(t, "bench", "step", "--dataset", "synthetic", "--model", "logreg", "--batch-sizes", "8",
		"--min-steps", "1", "--min-time", "0.01", "--device", "cpu", "--blas", "go", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		t.Fatal(err)
	}
	if m["blas"] != fastblas.GoDescription || m["model"] != "logreg" {
		t.Errorf("JSON blas %v model %v", m["blas"], m["model"])
	}
	if !strings.Contains(out, "CPU BLAS: "+fastblas.GoDescription) {
		t.Errorf("table does not name the BLAS:\n%s", out)
	}
}
