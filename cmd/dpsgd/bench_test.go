package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/bench"
	"github.com/dpsgd/dpsgd/privacy/accounting"
)

// benchRun calls cmdBench as main's dispatch would and returns the exit status.
func benchRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = report(cmdBench(context.Background(), args, &o, &e), "bench", &e)
	return code, o.String(), e.String()
}

// benchMDTable returns the rows (cells split on "|", trimmed) of the Markdown table whose
// header line starts with header.
func benchMDTable(t *testing.T, md, header string) [][]string {
	t.Helper()
	var rows [][]string
	sc := bufio.NewScanner(strings.NewReader(md))
	in := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, header):
			in = true
		case in && strings.HasPrefix(line, "| ---"):
		case in && strings.HasPrefix(line, "|"):
			parts := strings.Split(strings.Trim(line, "|"), "|")
			for i := range parts {
				parts[i] = strings.TrimSpace(parts[i])
			}
			rows = append(rows, parts)
		case in:
			return rows
		}
	}
	if !in {
		t.Fatalf("no table with header %q in the report", header)
	}
	return rows
}

func benchParse(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("table value %q: %v", s, err)
	}
	return v
}

// TestBenchSamplersQuick runs --quick end to end and checks every file of the report: the
// figures decode (PNG) and parse (SVG), the Markdown tables hold exactly the numbers of
// results.json, the CSV has one row per run, every calibrated cell spent at most its target,
// and the Poisson-for-shuffle row of the privacy table is labelled as not valid.
func TestBenchSamplersQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 16 small models")
	}
	out := filepath.Join(t.TempDir(), "report")
	code, stdout, stderr := benchRun(t, "samplers", "--quick", "--out", out, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if stderr != "" {
		t.Errorf("--json should be quiet, stderr: %s", stderr)
	}
	sum := lastJSON(t, stdout)
	if sum["out"] != out {
		t.Errorf("summary out %v, want %s", sum["out"], out)
	}
	for _, name := range bench.ReportFiles() {
		st, err := os.Stat(filepath.Join(out, name))
		if err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	ents, _ := os.ReadDir(out)
	if len(ents) != len(bench.ReportFiles()) {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("out dir holds %v, want exactly %v (no temporary files left)", names, bench.ReportFiles())
	}
	for _, fig := range []string{bench.FigAccuracy, bench.FigPrivacy, bench.FigSpeed} {
		fh, err := os.Open(filepath.Join(out, fig+".png"))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(fh)
		fh.Close()
		if err != nil {
			t.Errorf("%s.png: %v", fig, err)
		} else if b := img.Bounds(); b.Dx() < 600 || b.Dy() < 400 {
			t.Errorf("%s.png is %v, want at least 600×400", fig, b)
		}
		svg, err := os.ReadFile(filepath.Join(out, fig+".svg"))
		if err != nil {
			t.Fatal(err)
		}
		dec := xml.NewDecoder(bytes.NewReader(svg))
		for {
			_, err := dec.Token()
			if err != nil {
				if err.Error() != "EOF" {
					t.Errorf("%s.svg does not parse: %v", fig, err)
				}
				break
			}
		}
		if !bytes.Contains(svg, []byte("<svg")) {
			t.Errorf("%s.svg has no <svg element", fig)
		}
	}

	var res bench.SamplersResult
	js, err := os.ReadFile(filepath.Join(out, bench.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js, &res); err != nil {
		t.Fatal(err)
	}
	wantRuns := 4 * 2 * 2 // samplers × targets × seeds of --quick
	if len(res.Runs) != wantRuns || len(res.Cells) != 8 {
		t.Fatalf("%d runs and %d cells, want %d and 8", len(res.Runs), len(res.Cells), wantRuns)
	}
	for _, c := range res.Cells {
		if c.EpsilonSpent == nil || *c.EpsilonSpent > c.TargetEpsilon || *c.EpsilonSpent <= 0 {
			t.Errorf("%s at target %g: ε spent %v, want in (0, target]", c.Sampler, c.TargetEpsilon, c.EpsilonSpent)
		}
		if c.Accountant != accounting.DefaultMethod(c.Sampler) {
			t.Errorf("%s calibrated with %s, want its default proven accountant %s", c.Sampler, c.Accountant, accounting.DefaultMethod(c.Sampler))
		}
		if c.AccuracyMean < 0.3 {
			t.Errorf("%s at ε %g: accuracy %g on the synthetic problem (chance 0.1)", c.Sampler, c.TargetEpsilon, c.AccuracyMean)
		}
	}
	for _, r := range res.Runs {
		if r.Epsilon == nil || *r.Epsilon > r.TargetEpsilon {
			t.Errorf("run %s seed %d: ε %v above target %g", r.Sampler, r.Seed, r.Epsilon, r.TargetEpsilon)
		}
	}
	// σ is non-increasing in the target for every sampler.
	for i := 1; i < len(res.Cells); i++ {
		a, b := res.Cells[i-1], res.Cells[i]
		if a.Sampler == b.Sampler && a.TargetEpsilon < b.TargetEpsilon && a.Sigma < b.Sigma {
			t.Errorf("%s: σ %g at ε %g < σ %g at ε %g", a.Sampler, a.Sigma, a.TargetEpsilon, b.Sigma, b.TargetEpsilon)
		}
	}

	// report.md holds exactly the numbers of results.json.
	md, err := os.ReadFile(filepath.Join(out, bench.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	rows := benchMDTable(t, string(md), bench.CellsHeader)
	if len(rows) != len(res.Cells) {
		t.Fatalf("report has %d cell rows, JSON %d", len(rows), len(res.Cells))
	}
	for i, row := range rows {
		c := res.Cells[i]
		if row[0] != c.Sampler || row[1] != c.Accountant {
			t.Errorf("row %d: %v, JSON %s/%s", i, row[:2], c.Sampler, c.Accountant)
		}
		got := []float64{benchParse(t, row[2]), benchParse(t, row[3]), benchParse(t, row[4]), benchParse(t, row[5]), benchParse(t, row[6]),
			benchParse(t, row[7]), benchParse(t, row[8]), benchParse(t, row[9]), benchParse(t, row[10]), benchParse(t, row[11])}
		want := []float64{c.TargetEpsilon, c.Sigma, *c.EpsilonSpent, c.AccuracyMean, c.AccuracySD, float64(c.Runs), c.ExamplesPerSecond,
			c.WallExamplesPerSecond, c.SecondsPerEpoch, c.CalibrationSeconds}
		for k := range got {
			if got[k] != want[k] {
				t.Errorf("row %d column %d: report %v, JSON %v", i, k+2, got[k], want[k])
			}
		}
	}
	prow := benchMDTable(t, string(md), bench.PrivacyHeader)
	if len(prow) != len(res.Privacy.Curves) {
		t.Fatalf("privacy table has %d rows, JSON %d curves", len(prow), len(res.Privacy.Curves))
	}
	epochs := bench.TableEpochs(len(res.Privacy.Curves[0].Epochs))
	sawInvalid := false
	for i, row := range prow {
		c := res.Privacy.Curves[i]
		if c.Kind == string(accounting.KindAssumesPoisson) {
			sawInvalid = true
			if c.Sampler != "shuffle" || c.Valid || row[4] != "NO" || !strings.Contains(row[0], "NOT a valid guarantee") {
				t.Errorf("Poisson-for-shuffle row not labelled invalid: %v (valid %v)", row, c.Valid)
			}
		} else if c.Kind == string(accounting.KindGuarantee) != c.Valid || (c.Valid && row[4] != "yes") {
			t.Errorf("row %v: kind %s valid %v", row[:5], c.Kind, c.Valid)
		}
		for k, e := range epochs {
			cell := row[5+k]
			if c.Epsilon[e-1] == nil {
				if !strings.HasPrefix(cell, "TV") && cell != "—" {
					t.Errorf("row %d epoch %d: %q for a null ε", i, e, cell)
				}
				continue
			}
			if v := benchParse(t, cell); v != *c.Epsilon[e-1] {
				t.Errorf("row %d epoch %d: report %v, JSON %v", i, e, v, *c.Epsilon[e-1])
			}
		}
	}
	if !sawInvalid {
		t.Error("no Poisson-for-shuffle curve in the privacy comparison")
	}
	// The shuffle lower bound never exceeds shuffle's own guarantee (a sanity check of both).
	var guar, lower *bench.Curve
	for i := range res.Privacy.Curves {
		c := &res.Privacy.Curves[i]
		if c.Sampler == "shuffle" && c.Valid {
			guar = c
		}
		if c.Kind == string(accounting.KindLowerBound) {
			lower = c
		}
	}
	if guar == nil || lower == nil {
		t.Fatal("missing shuffle guarantee or lower bound curve")
	}
	for i := range guar.Epsilon {
		if guar.Epsilon[i] != nil && lower.Epsilon[i] != nil && *lower.Epsilon[i] > *guar.Epsilon[i]*1.001 {
			t.Errorf("epoch %d: shuffle lower bound %v above its guarantee %v", i+1, *lower.Epsilon[i], *guar.Epsilon[i])
		}
	}

	// One CSV row per run, with the JSON's values.
	fh, err := os.Open(filepath.Join(out, bench.CSVFile))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(fh).ReadAll()
	fh.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(res.Runs)+1 || strings.Join(recs[0], ",") != strings.Join(bench.CSVHeader(), ",") {
		t.Fatalf("CSV has %d lines (header %v), want %d runs + header", len(recs), recs[0], len(res.Runs))
	}
	for i, rec := range recs[1:] {
		r := res.Runs[i]
		if rec[0] != r.Sampler || benchParse(t, rec[8]) != r.TestAccuracy || benchParse(t, rec[6]) != r.Sigma || rec[5] != strconv.FormatUint(r.Seed, 10) {
			t.Errorf("CSV row %d %v does not match run %+v", i, rec, r)
		}
	}
}

// TestBenchSamplersBadInput: every bad input exits 2 with a message naming the problem and
// leaves the output directory without any file.
func TestBenchSamplersBadInput(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unreachable target", []string{"--targets", "1e-6", "--samplers", "shuffle"}, "unreachable for sampler shuffle"},
		{"accountant not a guarantee", []string{"--accountants", "shuffle=rdp", "--samplers", "shuffle"}, "sampler shuffle is assumes poisson"},
		{"accountant TV only", []string{"--accountants", "allocation=chisq", "--samplers", "allocation"}, "total variation"},
		{"unknown sampler", []string{"--samplers", "shuffle,magic"}, "--samplers"},
		{"zero target", []string{"--targets", "0,3"}, "--targets"},
		{"NaN delta", []string{"--delta", "NaN"}, "--delta"},
		{"delta one", []string{"--delta", "1"}, "--delta"},
		{"zero epochs", []string{"--epochs", "0"}, "--epochs"},
		{"negative sigma", []string{"--sigma", "-1"}, "--sigma"},
		{"huge batch", []string{"--batch-size", "100000"}, "--batch-size"},
		{"bad seed list", []string{"--seed-list", "1,x"}, "--seed-list"},
		{"seeds twice", []string{"--seed-list", "1,1"}, "seed 1 given twice"},
		{"zero seeds", []string{"--seeds", "0"}, "--seeds"},
		{"bad dataset", []string{"--dataset", "cifar"}, "--dataset"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
			args := append([]string{"samplers", "--quick", "--quiet", "--out", out}, c.args...)
			code, _, stderr := benchRun(t, args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2; stderr %s", code, stderr)
			}
			if !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Errorf("stderr %q: want one line containing %q", stderr, c.want)
			}
			ents, _ := os.ReadDir(out)
			if len(ents) != 0 {
				t.Errorf("out dir holds %d entries after a bad input", len(ents))
			}
		})
	}
	// An output path that cannot be a directory fails before any training.
	for _, out := range []string{file, filepath.Join(file, "sub")} {
		code, _, stderr := benchRun(t, "samplers", "--quick", "--quiet", "--out", out)
		if code != 2 || !strings.Contains(stderr, "--out") {
			t.Errorf("--out %s: exit %d, stderr %q; want 2 naming --out", out, code, stderr)
		}
	}
	if b, _ := os.ReadFile(file); string(b) != "x" {
		t.Error("the plain file given as --out was changed")
	}
	code, _, stderr := benchRun(t, "samplers", "--quick")
	if code != 2 || !strings.Contains(stderr, "--out") {
		t.Errorf("no --out: exit %d %q", code, stderr)
	}
	code, _, stderr = benchRun(t, "frobnicate")
	if code != 2 || !strings.Contains(stderr, "unknown subcommand") {
		t.Errorf("unknown subcommand: exit %d %q", code, stderr)
	}
}

// TestBenchSamplersMatchTrain: the samplers and accountants of the comparison are those of
// dpsgd train: the plan of `dpsgd train --sampler S` and bench.NewSampler give the same
// sampler and accounting spec (both come from the front door, package dpsgd).
func TestBenchSamplersMatchTrain(t *testing.T) {
	f, err := parseBenchSamplerFlags([]string{"--quick", "--out", t.TempDir()}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.config(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range bench.DefaultSamplers() {
		tf := &trainFlags{samplerName: s, batch: cfg.BatchSize, seed: 7}
		smp, spec, err := tf.plan(0).NewSampler(cfg.Train.N)
		if err != nil {
			t.Fatal(err)
		}
		lsmp, lspec, err := bench.NewSampler(s, "", cfg.Train.N, cfg.BatchSize, 7)
		if err != nil {
			t.Fatal(err)
		}
		if spec != lspec || smp.Name() != lsmp.Name() || smp.StepsPerEpoch() != lsmp.StepsPerEpoch() {
			t.Errorf("%s: train gives %+v (%d steps), bench.NewSampler %+v (%d steps)", s, spec, smp.StepsPerEpoch(), lspec, lsmp.StepsPerEpoch())
		}
		if b1, b2 := smp.Batch(1, 2, nil), lsmp.Batch(1, 2, nil); !slices.Equal(b1, b2) {
			t.Errorf("%s: batches differ with the same seed", s)
		}
	}
}

// TestBenchStep: the step table has one CPU row per batch size with positive times, and cuda
// is reported as unavailable (the tests run without a driver: see TestMain).
func TestBenchStep(t *testing.T) {
	code, out, errOut := benchRun(t, "step", "--dataset", "synthetic", "--hidden", "16", "--batch-sizes", "32,64", "--min-time", "0.05", "--min-steps", "3", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	m := lastJSON(t, out)
	var rows []any
	for _, r := range m["rows"].([]any) {
		if r.(map[string]any)["device"] == "cpu" {
			rows = append(rows, r)
		} else if r.(map[string]any)["available"] != false {
			t.Errorf("--device auto without a GPU: row %v", r)
		}
	}
	if len(rows) != 2 {
		t.Fatalf("rows %v", m["rows"])
	}
	for _, r := range rows {
		row := r.(map[string]any)
		dp, _ := row["dp_ms_per_step"].(float64)
		np, _ := row["nonprivate_ms_per_step"].(float64)
		ratio, _ := row["ratio_dp_to_nonprivate"].(float64)
		if !(dp > 0 && np > 0 && ratio > 0) || row["device"] != "cpu" || row["available"] != true {
			t.Errorf("row %v", row)
		}
		if d := ratio - dp/np; d > 0.01*ratio || d < -0.01*ratio {
			t.Errorf("ratio %v, times %v/%v", ratio, dp, np)
		}
	}
	code, out, _ = benchRun(t, "step", "--device", "cuda", "--batch-sizes", "256", "--json")
	if code != 0 {
		t.Fatalf("cuda: exit %d", code)
	}
	m = lastJSON(t, out)
	row := m["rows"].([]any)[0].(map[string]any)
	if row["available"] != false || row["dp_ms_per_step"] != nil || !strings.Contains(row["note"].(string), "unavailable") {
		t.Errorf("cuda row %v", row)
	}
	for _, bad := range [][]string{{"--batch-sizes", "0"}, {"--device", "tpu"}, {"--min-time", "0"}, {"--model", "rnn"}, {"--hidden", "0"}} {
		if code, _, _ := benchRun(t, append([]string{"step"}, bad...)...); code != 2 {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
}

// TestBenchStepEachModelOnceEachBatch: the step table names the model once, and under --device
// auto without a GPU every batch size has its cuda row, marked unavailable, with the reason
// given once under the table; the JSON has one cpu and one cuda row per batch size.
func TestBenchStepEachModelOnceEachBatch(t *testing.T) {
	args := []string{"step", "--dataset", "synthetic", "--hidden", "8", "--batch-sizes", "16,32", "--min-time", "0.01", "--min-steps", "1"}
	code, out, errOut := benchRun(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	head, _, _ := strings.Cut(out, "\n")
	if !strings.HasPrefix(head, "mlp 32-8-10 (") || strings.Count(head, "mlp") != 1 {
		t.Errorf("header %q: want the model named once", head)
	}
	for _, b := range []string{"16", "32"} {
		if !strings.Contains(out, "| cpu | "+b+" |") || !strings.Contains(out, "| cuda (unavailable) | "+b+" | — |") {
			t.Errorf("batch %s: want a cpu row and an unavailable cuda row:\n%s", b, out)
		}
	}
	if strings.Count(out, "unavailable: cuda") != 1 {
		t.Errorf("the reason should be given once:\n%s", out)
	}
	code, out, errOut = benchRun(t, append(args, "--json", "--quiet")...)
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errOut)
	}
	rows := map[string]int{}
	for _, r := range lastJSON(t, out)["rows"].([]any) {
		row := r.(map[string]any)
		rows[fmt.Sprint(row["device"], row["batch_size"])]++
		if row["device"] == "cuda" && (row["available"] != false || !strings.Contains(row["note"].(string), "unavailable")) {
			t.Errorf("cuda row %v", row)
		}
	}
	for _, k := range []string{"cpu16", "cpu32", "cuda16", "cuda32"} {
		if rows[k] != 1 {
			t.Errorf("rows per device and batch size %v: want one of each of cpu, cuda × 16, 32", rows)
		}
	}
}
