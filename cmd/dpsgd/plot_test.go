package main

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPlotQuick draws every figure with few points through the code of
// dpsgd plot (once: the accountants behind fig1 and fig3 are slow), checks
// each PNG decodes, each SVG names its series, and that a reader can read
// every panel (checkReadable); then the command's own plumbing on one
// cheap figure.
func TestPlotQuick(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	f, err := parsePlotFlags([]string{"--figure", "all", "--quick", "--out", dir, "--epochs", "2"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	drawn, err := f.draw(context.Background(), figureNames, &out)
	if err != nil {
		t.Fatal(err)
	}
	if len(drawn) != len(figureNames) {
		t.Fatalf("%d figures drawn, want %d", len(drawn), len(figureNames))
	}
	for _, name := range figureNames {
		if !strings.Contains(out.String(), name+".png") {
			t.Errorf("output does not mention %s.png: %s", name, out.String())
		}
		f, err := os.Open(filepath.Join(dir, name+".png"))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil || img.Bounds().Dx() < 600 {
			t.Errorf("%s.png: %v, %v", name, err, img)
		}
		svg, err := os.ReadFile(filepath.Join(dir, name+".svg"))
		if err != nil || !strings.Contains(string(svg), "<svg") {
			t.Errorf("%s.svg: %v", name, err)
		}
	}
	svg, _ := os.ReadFile(filepath.Join(dir, "fig1.svg"))
	if !strings.Contains(string(svg), "σ = 0.75") {
		t.Error("fig1.svg does not name σ = 0.75")
	}
	for _, d := range drawn {
		checkReadable(t, d)
	}

	// The Berry–Esseen bounds at σ = 0.75 and σ = 1.5 differ by 7%: one
	// line would hide the other unless told apart.
	fig1 := drawn[0].layouts[0]
	said := false
	for _, e := range fig1.Legend {
		said = said || strings.HasPrefix(e, "σ = 0.75") && strings.Contains(e, "coincides with σ = 1.5")
	}
	if !said {
		t.Errorf("fig1: legend %q does not say that σ = 0.75's line lies under σ = 1.5's", fig1.Legend)
	}

	code, stdout, stderr := runCmd(t, "plot", "--figure", "ball", "--quick", "--out", filepath.Join(dir, "cli"))
	if code != 0 || !strings.Contains(stdout, "ball.png") || stderr != "" {
		t.Errorf("dpsgd plot --figure ball: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// Text a reader should not meet: figure numbers of files or papers in
// short form, seed or issue references.
var (
	badTitle    = regexp.MustCompile(`(?i)fig|seed 0|issue|#\d`)
	badSubtitle = regexp.MustCompile(`(?i)\bfig\b|fig\.|fig\d|seed 0|issue|#\d`)
)

// checkReadable checks what a reader sees of each panel of d: a title in
// words (a citation only in the subtitle, as "Figure N of AUTHORS"), axis
// labels, unique legend entries, readable ticks (at least two labels on
// each axis, none empty), lines on top of one another told apart in the
// legend, and none of the problems plots.Layout reports (a legend over
// data or crowded tick labels among them).
func checkReadable(t *testing.T, d drawnFigure) {
	t.Helper()
	if len(d.layouts) != len(d.figs) {
		t.Fatalf("%s: %d layouts for %d panels", d.name, len(d.layouts), len(d.figs))
	}
	for i, fig := range d.figs {
		l := d.layouts[i]
		where := d.name + " panel " + string(rune('1'+i))
		if strings.TrimSpace(fig.Title) == "" || badTitle.MatchString(fig.Title) {
			t.Errorf("%s: title %q is empty or names a figure, seed or issue", where, fig.Title)
		}
		if badSubtitle.MatchString(fig.Subtitle) {
			t.Errorf("%s: subtitle %q abbreviates a figure or names a seed or issue", where, fig.Subtitle)
		}
		if strings.TrimSpace(fig.XLabel) == "" || strings.TrimSpace(fig.YLabel) == "" {
			t.Errorf("%s: axis labels %q, %q", where, fig.XLabel, fig.YLabel)
		}
		seen := map[string]bool{}
		for _, e := range l.Legend {
			if strings.TrimSpace(e) == "" || seen[e] {
				t.Errorf("%s: legend entry %q empty or twice", where, e)
			}
			seen[e] = true
		}
		for axis, ticks := range map[string][]string{"x": l.XTicks, "y": l.YTicks} {
			if len(ticks) < 2 {
				t.Errorf("%s: %s tick labels %q, want at least two", where, axis, ticks)
			}
			for _, tk := range ticks {
				if strings.TrimSpace(tk) == "" {
					t.Errorf("%s: empty %s tick label", where, axis)
				}
			}
		}
		for _, c := range l.Coincide {
			under, over := fig.Series[c.Under].Name, fig.Series[c.Over].Name
			told := false
			for _, e := range l.Legend {
				if (under != "" && strings.HasPrefix(e, under) || over != "" && strings.HasPrefix(e, over) || under == "" && over == "") &&
					(strings.Contains(e, "coincide") || strings.Contains(e, "lies")) {
					told = true
				}
			}
			if !told && (under != "" || over != "") {
				t.Errorf("%s: series %d %q lies under series %d %q and the legend %q does not say so", where, c.Under, under, c.Over, over, l.Legend)
			}
		}
		for _, p := range l.Problems {
			t.Errorf("%s: %s", where, p)
		}
	}
}

func TestPlotUsageErrors(t *testing.T) {
	for want, args := range map[string][]string{
		"--figure":     {"plot", "--figure", "fig9"},
		"--sigma":      {"plot", "--sigma", "0"},
		"--batch-size": {"plot", "--batch-size", "100", "--dataset-size", "10"},
		"--sampler":    {"plot", "--sampler", "magic"},
	} {
		code, _, errOut := runCmd(t, args...)
		if code != 2 || !strings.Contains(errOut, want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}
