package plots

import (
	"image/color"
	"strings"

	stdfnt "golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Header sizes: the title is set at titleSize, shrunk down to titleMin
// before it is wrapped; the subtitle at subtitleSize in italics.
var (
	titleSize    = vg.Points(12)
	titleMin     = vg.Points(10.5)
	subtitleSize = vg.Points(9.5)
	headerPad    = vg.Points(4) // above the title and below the header
)

// header is the title and subtitle of a panel, wrapped to its width.
type header struct {
	title, subtitle []string
	titleStyle      text.Style
	subtitleStyle   text.Style
}

// newHeader wraps title and subtitle to width.
func newHeader(title, subtitle string, width vg.Length) header {
	h := header{
		titleStyle: text.Style{Color: color.Black, Font: font.From(plot.DefaultFont, titleSize),
			XAlign: draw.XCenter, YAlign: draw.YTop, Handler: plot.DefaultTextHandler},
		subtitleStyle: text.Style{Color: color.RGBA{0x33, 0x33, 0x33, 0xff}, Font: font.From(italic(plot.DefaultFont), subtitleSize),
			XAlign: draw.XCenter, YAlign: draw.YTop, Handler: plot.DefaultTextHandler},
	}
	if title = strings.TrimSpace(title); title != "" {
		for size := titleSize; size >= titleMin; size -= vg.Points(0.5) {
			h.titleStyle.Font.Size = size
			if h.titleStyle.Width(title) <= width {
				break
			}
		}
		if h.titleStyle.Width(title) > width {
			h.titleStyle.Font.Size = titleSize
		}
		h.title = wrap(title, h.titleStyle, width)
	}
	if subtitle = strings.TrimSpace(subtitle); subtitle != "" {
		h.subtitle = wrap(subtitle, h.subtitleStyle, width)
	}
	return h
}

// italic is fnt in italics.
func italic(fnt font.Font) font.Font {
	fnt.Style = stdfnt.StyleItalic
	return fnt
}

// wrap breaks txt at spaces into as few lines no wider than width as
// greedy filling gives (a single word wider than width gets a line of its
// own), made as even in length as that number of lines allows.
func wrap(txt string, sty text.Style, width vg.Length) []string {
	lines := greedy(txt, sty, width)
	if len(lines) < 2 {
		return lines
	}
	lo, hi := width/vg.Length(len(lines)), width
	for range 20 {
		mid := (lo + hi) / 2
		if len(greedy(txt, sty, mid)) == len(lines) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return greedy(txt, sty, hi)
}

// greedy fills lines no wider than width word by word.
func greedy(txt string, sty text.Style, width vg.Length) []string {
	var lines []string
	cur := ""
	for _, w := range strings.Fields(txt) {
		try := w
		if cur != "" {
			try = cur + " " + w
		}
		if cur != "" && sty.Width(try) > width {
			lines = append(lines, cur)
			cur = w
			continue
		}
		cur = try
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	return lines
}

// lineHeight is the height of one line of sty.
func lineHeight(sty text.Style) vg.Length {
	return sty.FontExtents().Height
}

// height is the height of the header band; 0 when there is neither title
// nor subtitle.
func (h header) height() vg.Length {
	if len(h.title)+len(h.subtitle) == 0 {
		return 0
	}
	return 2*headerPad + vg.Length(len(h.title))*lineHeight(h.titleStyle) + vg.Length(len(h.subtitle))*lineHeight(h.subtitleStyle)
}

// draw writes the header, centred, at the top of c.
func (h header) draw(c draw.Canvas) {
	y := c.Max.Y - headerPad
	x := (c.Min.X + c.Max.X) / 2
	for _, l := range h.title {
		c.FillText(h.titleStyle, vg.Point{X: x, Y: y}, l)
		y -= lineHeight(h.titleStyle)
	}
	for _, l := range h.subtitle {
		c.FillText(h.subtitleStyle, vg.Point{X: x, Y: y}, l)
		y -= lineHeight(h.subtitleStyle)
	}
}
