package plots

import (
	"errors"
	"fmt"
	"image/color"
	"io"

	"github.com/dpsgd/dpsgd/internal/atomicfile"
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

// String is the style's name in legend notes: "solid", "dashed", "dotted".
func (s LineStyle) String() string {
	switch s {
	case Solid:
		return "solid"
	case Dashed:
		return "dashed"
	case Dotted:
		return "dotted"
	}
	return fmt.Sprintf("LineStyle(%d)", int(s))
}

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

// KeyEntry is a legend entry that explains a line style shared by several
// series (when colour tells one parameter and style another: one colour per
// σ, solid for a bound and dashed for the exact value, say). It is drawn as
// a dark grey line of that style after the series' entries.
type KeyEntry struct {
	Name  string
	Style LineStyle
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

// String names the corner: "auto", "top right", ….
func (p LegendPos) String() string {
	switch p {
	case LegendAuto:
		return "auto"
	case LegendTopRight:
		return "top right"
	case LegendTopLeft:
		return "top left"
	case LegendBottomLeft:
		return "bottom left"
	case LegendBottomRight:
		return "bottom right"
	}
	return fmt.Sprintf("LegendPos(%d)", int(p))
}

// Figure is one line plot.
type Figure struct {
	// Title says in words what the figure shows; it is shrunk, then
	// wrapped, to fit the panel.
	Title string
	// Subtitle is a caption under the title in a smaller italic font: the
	// setting, what the line styles mean, the paper a figure follows.
	Subtitle   string
	XLabel     string
	YLabel     string
	LogX, LogY bool // logarithmic axes
	Series     []Series
	Key        []KeyEntry // legend entries for the line styles, after the series'
	// XLim and YLim fix the axis ranges when Lim[0] < Lim[1]; the zero
	// value means "fit the data" (and, for YLim, make room for the legend).
	XLim, YLim [2]float64
	// Legend places the legend in a corner of the data area, unless it
	// would hide data there that making room (see YLim) cannot clear; the
	// zero value, LegendAuto, picks the corner that needs the least room.
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

// keyColor is the colour of the Key entries' lines.
var keyColor = color.RGBA{0x44, 0x44, 0x44, 0xff}

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

// tiles is the tiling of a multi-panel image (Cols set per image).
var tiles = draw.Tiles{Rows: 1, PadX: vg.Points(18), PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8)}

// tileWidth is the width of one of n panels side by side.
func tileWidth(n int) vg.Length {
	if n <= 1 {
		return PanelWidth
	}
	return (vg.Length(n)*PanelWidth - tiles.PadLeft - tiles.PadRight - vg.Length(n-1)*tiles.PadX) / vg.Length(n)
}

// buildAll validates and lays out the panels of one image.
func buildAll(figs []Figure) ([]*panel, error) {
	if len(figs) == 0 {
		return nil, fmt.Errorf("plots: no figure given, want at least one: %w", ErrInvalid)
	}
	ps := make([]*panel, len(figs))
	w := tileWidth(len(figs))
	for i, fig := range figs {
		p, err := fig.build(w)
		if err != nil {
			if len(figs) > 1 {
				return nil, fmt.Errorf("plots: panel %d: %w", i, err)
			}
			return nil, err
		}
		ps[i] = p
	}
	return ps, nil
}

// Layouts lays the figures out as SavePanels would draw them side by side,
// without drawing, and returns what a reader will see of each: see Layout.
func Layouts(figs ...Figure) ([]Layout, error) {
	ps, err := buildAll(figs)
	if err != nil {
		return nil, err
	}
	out := make([]Layout, len(ps))
	for i, p := range ps {
		out[i] = p.layout
	}
	return out, nil
}

// SavePanels writes the figures side by side, one panel each (6 × 4 in
// apiece), to pathNoExt+".png" and pathNoExt+".svg".
func SavePanels(pathNoExt string, figs ...Figure) error {
	if pathNoExt == "" {
		return fmt.Errorf("plots: pathNoExt is empty, want a file path without extension: %w", ErrInvalid)
	}
	ps, err := buildAll(figs)
	if err != nil {
		return err
	}
	w := vg.Length(len(ps)) * PanelWidth
	img := vgimg.NewWith(vgimg.UseWH(w, PanelHeight), vgimg.UseDPI(DPI), vgimg.UseBackgroundColor(color.White))
	drawPanels(draw.New(img), ps)
	if err := writeFile(pathNoExt+".png", vgimg.PngCanvas{Canvas: img}); err != nil {
		return err
	}
	svg := vgsvg.New(w, PanelHeight)
	drawPanels(draw.New(svg), ps)
	return writeFile(pathNoExt+".svg", svg)
}

// drawPanels draws the panels side by side on dc: a header band as tall as
// the tallest panel's title and subtitle, then the plots, their data areas
// aligned.
func drawPanels(dc draw.Canvas, ps []*panel) {
	headH := vg.Length(0)
	for _, p := range ps {
		headH = max(headH, p.header.height())
	}
	if len(ps) == 1 {
		ps[0].header.draw(dc)
		ps[0].plot.Draw(draw.Crop(dc, 0, 0, 0, -headH))
		return
	}
	t := tiles
	t.Cols = len(ps)
	for i, p := range ps {
		p.header.draw(t.At(dc, i, 0))
	}
	plots := make([]*plot.Plot, len(ps))
	for i, p := range ps {
		plots[i] = p.plot
	}
	cs := plot.Align([][]*plot.Plot{plots}, t, draw.Crop(dc, 0, 0, 0, -headH))
	for i, p := range ps {
		p.plot.Draw(cs[0][i])
	}
}

// writeFile writes wt to path atomically (internal/atomicfile): a figure on disk is always
// whole, and an earlier one stays until the new one is complete.
func writeFile(path string, wt io.WriterTo) error {
	p, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	if _, err := wt.WriteTo(p); err != nil {
		p.Abort()
		return fmt.Errorf("plots: writing %s: %w", path, err)
	}
	if err := p.Commit(); err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	return nil
}
