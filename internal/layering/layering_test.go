package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// edge is one import, importer → imported, as paths relative to the module ("engine/nn").
type edge struct{ from, to string }

// allowlist holds the back edges the code has today (none), each with the reason it exists. The list
// must only shrink: delete an entry when its import goes away (the test fails on an entry whose
// edge no longer exists), and fix an import that breaks a rule instead of adding it here.
var allowlist = map[edge]string{}

// rule is one import rule: no package under one of from imports a package under one of forbid,
// unless it is under one of except.
type rule struct {
	text   string
	from   []string
	forbid []string
	except []string
}

var rules = []rule{
	{"privacy imports none of engine, kernels, cuda, datasets", []string{"privacy"}, []string{"engine", "kernels", "cuda", "datasets"}, nil},
	{"datasets imports none of engine, privacy", []string{"datasets"}, []string{"engine", "privacy"}, nil},
	{"cuda imports none of engine, datasets, and no Go package of kernels", []string{"cuda"}, []string{"engine", "datasets", "kernels"}, nil},
	{"engine imports nothing of cmd, bench, audit, federated, ageaware, model, the front door", []string{"engine"}, []string{"cmd", "bench", "audit", "federated", "ageaware", "model", "."}, nil},
	{"model imports of the engine only engine/nn, and none of cmd, bench, audit, federated, ageaware, the front door, cuda, kernels, datasets",
		[]string{"model"}, []string{"engine", "cmd", "bench", "audit", "federated", "ageaware", ".", "cuda", "kernels", "datasets"}, []string{"engine/nn"}},
}

// ruleNoCmd is the last rule: a command's packages are imported only from inside that command.
const ruleNoCmd = "nothing imports cmd"

// under reports whether the module-relative path p is one of roots or inside one of them.
func under(p string, roots ...string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// broken returns the rule that an import from → to breaks, or "" when it breaks none.
func broken(from, to string) string {
	for _, r := range rules {
		if under(from, r.from...) && under(to, r.forbid...) && !under(to, r.except...) {
			return r.text
		}
	}
	if under(to, "cmd") {
		command := to // cmd/NAME: the command whose package is imported
		if parts := strings.SplitN(to, "/", 3); len(parts) >= 2 {
			command = parts[0] + "/" + parts[1]
		}
		if !under(from, command) {
			return ruleNoCmd
		}
	}
	return ""
}

// pkg is one package of the module: its path and its imports of other packages of the module,
// all relative to the module.
type pkg struct {
	imports []string // by the package's own files
	tests   []string // by its test files only (internal and external tests)
}

// check returns every break of the rules in the graph, sorted, and the allowlisted edges it
// found. An import that breaks a rule is reported unless allow lists it. A dependency is also
// reported when it reaches a forbidden package through imports that break no rule (through a
// package that no rule covers): the path is named. Imports that break a rule are not followed,
// since each is reported (or allowlisted) where it is made.
func check(pkgs map[string]pkg, allow map[edge]string) (bad []string, used map[edge]bool) {
	used = map[edge]bool{}
	paths := make([]string, 0, len(pkgs))
	for p := range pkgs {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		direct := slices.Concat(pkgs[p].imports, pkgs[p].tests)
		slices.Sort(direct)
		direct = slices.Compact(direct)
		for _, to := range direct {
			r := broken(p, to)
			if r == "" || to == p {
				continue
			}
			if _, ok := allow[edge{p, to}]; ok {
				used[edge{p, to}] = true
				continue
			}
			bad = append(bad, fmt.Sprintf("%s imports %s: breaks the rule %q", p, to, r))
		}
		// Breadth first through imports that break no rule; prev gives each package's path back.
		prev := map[string]string{p: ""}
		var queue []string
		visit := func(from, to string) {
			if _, seen := prev[to]; !seen && broken(from, to) == "" {
				prev[to] = from
				queue = append(queue, to)
			}
		}
		for _, to := range direct {
			visit(p, to)
		}
		for len(queue) > 0 {
			q := queue[0]
			queue = queue[1:]
			if r := broken(p, q); r != "" {
				chain := []string{q}
				for at := prev[q]; at != ""; at = prev[at] {
					chain = append(chain, at)
				}
				slices.Reverse(chain)
				bad = append(bad, fmt.Sprintf("%s depends on %s through %s: breaks the rule %q", p, q, strings.Join(chain, " → "), r))
				continue
			}
			for _, to := range pkgs[q].imports {
				visit(q, to)
			}
		}
	}
	return bad, used
}

// load runs `go list -json ./...` at the module root and returns the module's packages.
func load(t *testing.T) map[string]pkg {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the packages: %v", err)
	}
	run := func(dir string, args ...string) []byte {
		cmd := exec.Command(goTool, args...)
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return out
	}
	var mod struct{ Path, Dir string }
	if err := json.Unmarshal(run(".", "list", "-m", "-json"), &mod); err != nil {
		t.Fatalf("go list -m -json: %v", err)
	}
	rel := func(importPath string) (string, bool) {
		if importPath == mod.Path {
			return ".", true // the module's root package
		}
		return strings.CutPrefix(importPath, mod.Path+"/")
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(run(mod.Dir, "list", "-json=ImportPath,Imports,TestImports,XTestImports", "./...")))
	for {
		var p struct {
			ImportPath                         string
			Imports, TestImports, XTestImports []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list -json: %v", err)
		}
		path, ok := rel(p.ImportPath)
		if !ok {
			t.Fatalf("go list: package %s is outside module %s", p.ImportPath, mod.Path)
		}
		var q pkg
		for _, list := range []struct {
			dst  *[]string
			srcs [][]string
		}{{&q.imports, [][]string{p.Imports}}, {&q.tests, [][]string{p.TestImports, p.XTestImports}}} {
			for _, src := range list.srcs {
				for _, imp := range src {
					if r, ok := rel(imp); ok && r != path {
						*list.dst = append(*list.dst, r)
					}
				}
			}
		}
		pkgs[path] = q
	}
	for _, want := range []string{"privacy", "datasets", "cuda", "engine", "cmd/dpsgd"} {
		if _, ok := pkgs[want]; !ok {
			t.Fatalf("go list found no package %s: the rules below would check nothing", want)
		}
	}
	return pkgs
}

// TestImportRules checks every import of the module (test files included) against the rules.
func TestImportRules(t *testing.T) {
	bad, used := check(load(t), allowlist)
	for _, b := range bad {
		t.Error(b)
	}
	for e, why := range allowlist {
		switch {
		case broken(e.from, e.to) == "":
			t.Errorf("allowlist: %s → %s breaks no rule; delete the entry (%s)", e.from, e.to, why)
		case !used[e]:
			t.Errorf("allowlist: %s no longer imports %s; delete the entry, the list only shrinks (%s)", e.from, e.to, why)
		}
	}
}

// TestRuleFunction: the rule function on synthetic edges, forbidden ones reported with their
// rule and allowed ones not.
func TestRuleFunction(t *testing.T) {
	privacyRule, datasetsRule, cudaRule, engineRule, modelRule := rules[0].text, rules[1].text, rules[2].text, rules[3].text, rules[4].text
	for _, c := range []struct {
		from, to, want string
	}{
		{"privacy", "engine", privacyRule},
		{"privacy/pld", "engine/sampler", privacyRule},
		{"privacy/ball", "kernels", privacyRule},
		{"privacy", "kernels/cuda", privacyRule},
		{"privacy/internal/numeric", "cuda", privacyRule},
		{"privacy/accounting", "datasets", privacyRule},
		{"datasets", "engine/nn", datasetsRule},
		{"datasets", "privacy/pld", datasetsRule},
		{"cuda", "engine", cudaRule},
		{"cuda", "engine/nn", cudaRule},
		{"cuda", "datasets", cudaRule},
		{"cuda", "kernels", cudaRule},
		{"cuda", "kernels/cuda", cudaRule},
		{"engine", "federated", engineRule},
		{"engine/nn", "ageaware", engineRule},
		{"engine/sampler", "bench", engineRule},
		{"engine", "audit", engineRule},
		{"engine/checkpoint", "cmd/dpsgd", engineRule},
		{"bench", "cmd/dpsgd", ruleNoCmd},
		{"federated", "cmd/dpsgd", ruleNoCmd},
		{"cmd/other", "cmd/dpsgd", ruleNoCmd},
		{"cmd/dpsgd", "cmd/dpsgd/internal/flags", ""},
		{"privacy/pld", "privacy", ""},
		{"privacy", "privacy/internal/numeric", ""},
		{"privacy", "internal/seedmix", ""},
		{"datasets", "kernels", ""},
		{"engine", "cuda", ""},
		{"engine", "kernels", ""},
		{"engine", "datasets", ""},
		{"engine/checkpoint", "privacy/accounting", ""},
		{"federated", "engine", ""},
		{"ageaware", "privacy/ageaware", ""},
		{"bench", "cuda", ""},
		{"audit", "engine/sampler", ""},
		{"cmd/dpsgd", "federated", ""},
		{"kernels", "privacy", ""},
		{"engineering", "bench", ""}, // a name that starts like a layer is not in it
		{"privacy", "cudart", ""},
		{"privacyx", "engine", ""},
		{".", "engine", ""}, // the module root package (the front door) may use the engine
		{"engine", ".", engineRule},
		{"engine/sampler", ".", engineRule},
		{".", "cmd/dpsgd", ruleNoCmd},
		{"engine", "model", engineRule},
		{"model", "engine/nn", ""},
		{"model", "engine", modelRule},
		{"model", "engine/checkpoint", modelRule},
		{"model", "engine/nnx", modelRule}, // a name that starts like the exception is not in it
		{"model", ".", modelRule},
		{"model", "datasets", modelRule},
		{"model", "kernels", modelRule},
		{"model", "privacy/accounting", ""},
		{"model", "internal/atomicfile", ""},
		{".", "model", ""},
		{"cmd/dpsgd", "model", ""},
		{"modelx", "engine", ""},
	} {
		if got := broken(c.from, c.to); got != c.want {
			t.Errorf("broken(%q, %q) = %q, want %q", c.from, c.to, got, c.want)
		}
	}
}

// TestCheckSynthetic: check on a synthetic graph reports a forbidden import, a forbidden test
// import and a dependency through an unruled package, and not an allowlisted edge, a legal one
// or a stale allowlist entry.
func TestCheckSynthetic(t *testing.T) {
	pkgs := map[string]pkg{
		"privacy":   {imports: []string{"plots"}},
		"plots":     {imports: []string{"engine"}},
		"engine":    {imports: []string{"bench", "cuda", "kernels"}},
		"bench":     {imports: []string{"engine"}, tests: []string{"cmd/dpsgd"}},
		"cuda":      {imports: []string{"datasets"}},
		"datasets":  {},
		"kernels":   {},
		"cmd/dpsgd": {imports: []string{"engine", "bench"}},
	}
	allow := map[edge]string{
		{"cuda", "datasets"}:  "allowed",
		{"cuda", "engine/nn"}: "stale: not in the graph",
	}
	bad, used := check(pkgs, allow)
	want := []string{
		`bench imports cmd/dpsgd: breaks the rule "nothing imports cmd"`,
		`engine imports bench: breaks the rule "engine imports nothing of cmd, bench, audit, federated, ageaware, model, the front door"`,
		`privacy depends on engine through privacy → plots → engine: breaks the rule "privacy imports none of engine, kernels, cuda, datasets"`,
	}
	if !slices.Equal(bad, want) {
		t.Errorf("check reported\n%s\nwant\n%s", strings.Join(bad, "\n"), strings.Join(want, "\n"))
	}
	if !used[edge{"cuda", "datasets"}] || used[edge{"cuda", "engine/nn"}] || len(used) != 1 {
		t.Errorf("allowlisted edges found: %v, want only cuda → datasets", used)
	}
	// Without the allowlist the same edge is reported.
	bad, _ = check(pkgs, nil)
	if !slices.Contains(bad, `cuda imports datasets: breaks the rule "cuda imports none of engine, datasets, and no Go package of kernels"`) {
		t.Errorf("without the allowlist, cuda → datasets is not reported: %q", bad)
	}
}
