package main

import (
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/plots"
)

// TestPlotBall draws the ball figure and checks its data against closed forms
// (d = 1: δ = Δ/2; d = 3: 1 − (4 + Δ)(2 − Δ)²/16) and the written files.
func TestPlotBall(t *testing.T) {
	f := &plotFlags{quick: true}
	figs, err := f.ball()
	if err != nil {
		t.Fatal(err)
	}
	if len(figs) != 2 || len(figs[0].Series) != len(ballPlotDims) {
		t.Fatalf("%d panels, %d series", len(figs), len(figs[0].Series))
	}
	for _, fig := range figs {
		for i, s := range fig.Series {
			for k, x := range s.X {
				var want float64
				switch ballPlotDims[i] {
				case 1:
					want = math.Min(1, x/2)
				case 3:
					want = 1 - (4+x)*(2-x)*(2-x)/16
				default:
					// Between d = 1 and 1, and above the previous d.
					prev := fig.Series[i-1].Y[k]
					if s.Y[k] < prev*(1-1e-12) || s.Y[k] > 1 {
						t.Errorf("d = %d, Δ = %g: δ = %g below δ(previous d) = %g", ballPlotDims[i], x, s.Y[k], prev)
					}
					continue
				}
				if math.Abs(s.Y[k]-want) > 1e-14 {
					t.Errorf("d = %d, Δ = %g: δ = %.16g, want %.16g", ballPlotDims[i], x, s.Y[k], want)
				}
			}
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "ball")
	if err := plots.SavePanels(path, figs...); err != nil {
		t.Fatal(err)
	}
	r, err := os.Open(path + ".png")
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(r)
	r.Close()
	if err != nil || img.Bounds().Dx() < 1200 {
		t.Errorf("ball.png: %v, %v", err, img)
	}
	svg, err := os.ReadFile(path + ".svg")
	if err != nil || !strings.Contains(string(svg), "d = 1000") {
		t.Errorf("ball.svg: %v, does not name d = 1000", err)
	}
}
