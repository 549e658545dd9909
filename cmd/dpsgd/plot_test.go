package main

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlotQuick draws every figure with few points and checks each PNG decodes
// and each SVG names its series.
func TestPlotQuick(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCmd(t, "plot", "--figure", "all", "--quick", "--out", dir, "--epochs", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, name := range figureNames {
		if !strings.Contains(out, name+".png") {
			t.Errorf("output does not mention %s.png: %s", name, out)
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
