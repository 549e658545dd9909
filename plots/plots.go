package plots

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Sizes of the written images.
const (
	PanelWidth  = 6 * vg.Inch // width of one panel
	PanelHeight = 4 * vg.Inch // height of the image
	DPI         = 150         // PNG resolution: a panel is 900 × 600 pixels
)

// ErrInvalid is wrapped by every error about a figure that cannot be drawn.
var ErrInvalid = errors.New("plots: invalid figure")

// LineStyle is how a series' line is drawn.
type LineStyle int

// Line styles.
const (
	Solid  LineStyle = iota // continuous line (the zero value)
	Dashed                  // long dashes
	Dotted                  // short dots
)

// Series is one named polyline. X and Y must have the same length. A
// series with no drawable point (empty, or every point NaN, ±Inf or ≤ 0 on
// a log axis) is left out of the figure and its legend.
type Series struct {
	Name  string    // legend entry; empty leaves the series out of the legend
	X, Y  []float64 // the points, drawn in order
	Style LineStyle // Solid, Dashed or Dotted
	// Color picks palette entry Color mod 10 when any series of the figure
	// sets a non-zero Color (so that related series can share a colour);
	// when every Color is 0, series are coloured in order, and series past
	// the tenth also get a distinct dash pattern if Solid.
	Color  int
	Points bool // also mark each point with a glyph
}

// LegendPos is a corner of the data area for the legend.
type LegendPos int

// Legend positions.
const (
	LegendAuto        LegendPos = iota // the corner covering the least data (the zero value)
	LegendTopRight                     // top right
	LegendTopLeft                      // top left
	LegendBottomLeft                   // bottom left
	LegendBottomRight                  // bottom right
)

// Figure is one line plot.
type Figure struct {
	Title, XLabel, YLabel string
	LogX, LogY            bool // logarithmic axes
	Series                []Series
	// XLim and YLim fix the axis ranges when Lim[0] < Lim[1]; the zero
	// value means "fit the data".
	XLim, YLim [2]float64
	// Legend places the legend in a corner of the data area; the zero
	// value, LegendAuto, picks the corner that hides the fewest data.
	Legend LegendPos
}

// palette holds ten colours that stay distinct in print and for the common
// forms of colour blindness (Tableau 10).
var palette = [...]color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff},
	{0xd6, 0x27, 0x28, 0xff}, {0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff},
	{0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff}, {0xbc, 0xbd, 0x22, 0xff},
	{0x17, 0xbe, 0xcf, 0xff},
}

// dashes are the patterns for series past the palette length.
var dashes = [...][]vg.Length{nil, {vg.Points(2), vg.Points(2)}, {vg.Points(8), vg.Points(3), vg.Points(2), vg.Points(3)}}

// styleDashes are the patterns of Dashed and Dotted.
var styleDashes = map[LineStyle][]vg.Length{
	Dashed: {vg.Points(6), vg.Points(3)},
	Dotted: {vg.Points(1.2), vg.Points(2.4)},
}

// glyphs are the point markers, by series index.
var glyphs = [...]draw.GlyphDrawer{
	draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{},
	draw.PlusGlyph{}, draw.RingGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{},
}

// Save writes the figure to pathNoExt+".png" and pathNoExt+".svg". The
// directory must exist.
func (f Figure) Save(pathNoExt string) error {
	return SavePanels(pathNoExt, f)
}

// SavePanels writes the figures side by side, one panel each (6 × 4 in
// apiece), to pathNoExt+".png" and pathNoExt+".svg".
func SavePanels(pathNoExt string, figs ...Figure) error {
	if pathNoExt == "" {
		return fmt.Errorf("plots: pathNoExt is empty, want a file path without extension: %w", ErrInvalid)
	}
	if len(figs) == 0 {
		return fmt.Errorf("plots: no figure given, want at least one: %w", ErrInvalid)
	}
	ps := make([]*plot.Plot, len(figs))
	for i, fig := range figs {
		p, err := fig.build()
		if err != nil {
			if len(figs) > 1 {
				return fmt.Errorf("plots: panel %d: %w", i, err)
			}
			return err
		}
		ps[i] = p
	}
	w := vg.Length(len(ps)) * PanelWidth
	drawAll := func(c vg.CanvasSizer) {
		dc := draw.New(c)
		if len(ps) == 1 {
			ps[0].Draw(dc)
			return
		}
		tiles := draw.Tiles{Rows: 1, Cols: len(ps), PadX: vg.Points(18), PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8)}
		cs := plot.Align([][]*plot.Plot{ps}, tiles, dc)
		for i, p := range ps {
			p.Draw(cs[0][i])
		}
	}

	img := vgimg.NewWith(vgimg.UseWH(w, PanelHeight), vgimg.UseDPI(DPI), vgimg.UseBackgroundColor(color.White))
	drawAll(img)
	if err := writeFile(pathNoExt+".png", vgimg.PngCanvas{Canvas: img}); err != nil {
		return err
	}
	svg := vgsvg.New(w, PanelHeight)
	drawAll(svg)
	return writeFile(pathNoExt+".svg", svg)
}

// writeFile writes wt to path.
func writeFile(path string, wt io.WriterTo) error {
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	if _, err := wt.WriteTo(fh); err != nil {
		fh.Close()
		return fmt.Errorf("plots: writing %s: %w", path, err)
	}
	if err := fh.Close(); err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	return nil
}
