package plots

import (
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
)

// Tick label limits: at most this many labels on an axis, and at least
// this much space between neighbouring labels.
const (
	maxLinLabels = 8
	maxLogLabels = 10
)

var (
	labelGapX = vg.Points(12) // between the ends of labels side by side
	labelGapY = vg.Points(5)  // between labels one above the other
)

// chooseTicks sets the ticks of ax, an axis length points long (its range
// in axis coordinates, see toAxis): the densest of its candidate tick sets
// (tickSets) whose labels neither crowd nor overlap; if none fits, the
// densest that fits with only every k-th label kept (k = 2, 3, …; at least
// two labels); else the sparsest.
func chooseTicks(ax *plot.Axis, length vg.Length, horizontal, log bool) {
	sets := tickSets(fromAxis(ax.Min, log), fromAxis(ax.Max, log), log)
	for _, ts := range sets {
		for i := range ts {
			ts[i].Value = toAxis(ts[i].Value, log)
		}
	}
	if len(sets) == 0 {
		ax.Tick.Marker = plot.DefaultTicks{}
		return
	}
	for _, ts := range sets {
		if labelsFit(ax, ts, length, horizontal) {
			ax.Tick.Marker = plot.ConstantTicks(ts)
			return
		}
	}
	for k := 2; k <= maxLogLabels; k++ {
		for _, ts := range sets {
			if th := thin(ts, k); labelsFit(ax, th, length, horizontal) {
				ax.Tick.Marker = plot.ConstantTicks(th)
				return
			}
		}
	}
	ax.Tick.Marker = plot.ConstantTicks(sets[len(sets)-1])
}

// thin returns ts with only every k-th label kept (the others become minor
// ticks), starting from the label that keeps the most.
func thin(ts []plot.Tick, k int) []plot.Tick {
	n := len(labelled(ts))
	best, bestN := 0, 0
	for off := range k {
		if m := (n - off + k - 1) / k; m > bestN {
			best, bestN = off, m
		}
	}
	out := make([]plot.Tick, len(ts))
	j := 0
	for i, t := range ts {
		out[i] = t
		if t.Label != "" {
			if (j-best)%k != 0 || j < best {
				out[i].Label = ""
			}
			j++
		}
	}
	return out
}

// labelled returns the labels of ts, in order.
func labelled(ts []plot.Tick) []plot.Tick {
	var out []plot.Tick
	for _, t := range ts {
		if t.Label != "" {
			out = append(out, t)
		}
	}
	return out
}

// labelsFit reports whether the labels of ts, on ax of the given length,
// are at least labelGap apart.
func labelsFit(ax *plot.Axis, ts []plot.Tick, length vg.Length, horizontal bool) bool {
	ls := labelled(ts)
	return len(ls) >= 2 && len(crowded(ax, ls, length, horizontal)) == 0
}

// crowded returns the pairs of neighbouring labels of ls (labelled ticks in
// increasing order) closer than the label gap on ax of the given length.
func crowded(ax *plot.Axis, ls []plot.Tick, length vg.Length, horizontal bool) [][2]string {
	sty := ax.Tick.Label
	var out [][2]string
	for i := 1; i < len(ls); i++ {
		d := vg.Length(ax.Norm(ls[i].Value)-ax.Norm(ls[i-1].Value)) * length
		need := (sty.Width(ls[i].Label)+sty.Width(ls[i-1].Label))/2 + labelGapX
		if !horizontal {
			need = (sty.Height(ls[i].Label)+sty.Height(ls[i-1].Label))/2 + labelGapY
		}
		if d < need {
			out = append(out, [2]string{ls[i-1].Label, ls[i].Label})
		}
	}
	return out
}

// tickSets returns the candidate tick sets of [lo, hi], densest first.
// A linear axis gets labels at the multiples of 1, 2, 2.5 or 5 × 10ᵏ (with
// minor ticks between), at most maxLinLabels of them. A log axis gets
// labels at 1, 2 and 5 × 10ᵏ, then at every power of ten, then at every
// second, third, fifth, tenth … power, at most maxLogLabels of them, with
// minor ticks at the other multiples (or powers) of ten; a log range too
// narrow for two powers of ten or two of 1, 2, 5 × 10ᵏ gets the linear sets.
func tickSets(lo, hi float64, log bool) [][]plot.Tick {
	if !(lo < hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) || (log && !(lo > 0)) {
		return nil
	}
	if !log {
		return linSets(lo, hi)
	}
	var sets [][]plot.Tick
	kLo := int(math.Floor(math.Log10(lo)))
	kHi := int(math.Ceil(math.Log10(hi)))
	decades := kHi - kLo
	in := func(v float64) bool { return v >= lo*(1-1e-9) && v <= hi*(1+1e-9) }
	if decades <= 12 {
		var ts []plot.Tick
		for k := kLo; k <= kHi; k++ {
			base := math.Pow(10, float64(k))
			for m := 1; m <= 9; m++ {
				if v := float64(m) * base; in(v) {
					t := plot.Tick{Value: v}
					if m == 1 || m == 2 || m == 5 {
						t.Label = formatTick(v)
					}
					ts = append(ts, t)
				}
			}
		}
		if n := len(labelled(ts)); n >= 2 && n <= maxLogLabels {
			sets = append(sets, ts)
		}
	}
	for _, step := range []int{1, 2, 3, 5, 10, 20, 25, 50, 100} {
		var ts []plot.Tick
		for k := kLo; k <= kHi; k++ {
			base := math.Pow(10, float64(k))
			if in(base) {
				t := plot.Tick{Value: base}
				if k%step == 0 {
					t.Label = formatTick(base)
				}
				if t.Label != "" || decades <= 40 {
					ts = append(ts, t)
				}
			}
			if step == 1 && decades <= 10 {
				for m := 2; m <= 9; m++ {
					if v := float64(m) * base; in(v) {
						ts = append(ts, plot.Tick{Value: v})
					}
				}
			}
		}
		n := len(labelled(ts))
		if n < 2 {
			break
		}
		if n <= maxLogLabels {
			sets = append(sets, ts)
		}
	}
	if len(sets) == 0 {
		sets = linSets(lo, hi)
	}
	return sets
}

// linSets returns the linear tick sets of [lo, hi], densest first: labels
// at the multiples of step = m × 10ᵏ, m ∈ {1, 2, 2.5, 5}, with two to
// maxLinLabels labels, and minor ticks at a fifth of the step (a quarter
// for m = 2).
func linSets(lo, hi float64) [][]plot.Tick {
	var sets [][]plot.Tick
	k0 := int(math.Floor(math.Log10(hi-lo))) - 2
	for k := k0; k <= k0+4; k++ {
		for _, m := range []float64{1, 2, 2.5, 5} {
			step := m * math.Pow(10, float64(k))
			minor := step / 5
			if m == 2 {
				minor = step / 4
			}
			first, last := math.Ceil(lo/minor-1e-9), math.Floor(hi/minor+1e-9)
			if last-first > 200 {
				continue
			}
			var ts []plot.Tick
			per := int(math.Round(step / minor))
			// Enough digits to tell neighbours apart, few enough to drop
			// rounding noise (0.30000000000000004).
			sig := int(math.Ceil(math.Log10(math.Max(math.Abs(lo), math.Abs(hi))/step))) + 2
			sig = max(3, min(15, sig))
			for i := first; i <= last; i++ {
				v := i * minor
				if v == 0 {
					v = 0 // not −0
				}
				t := plot.Tick{Value: v}
				if int(math.Mod(math.Abs(i), float64(per))) == 0 {
					t.Label = formatSig(v, sig)
				}
				ts = append(ts, t)
			}
			if n := len(labelled(ts)); n >= 2 && n <= maxLinLabels {
				sets = append(sets, ts)
			}
		}
	}
	return sets
}

// formatTick prints v to 10 significant digits, trailing zeros dropped, as
// a plain number in [10⁻³, 10⁴) and as "10^k" or "m×10^k" outside it (the
// exponent after "^", with a minus sign "−"; powText draws it raised).
func formatTick(v float64) string { return formatSig(v, 10) }

// formatSig is formatTick to sig significant digits.
func formatSig(v float64, sig int) string {
	v, _ = strconv.ParseFloat(strconv.FormatFloat(v, 'g', sig, 64), 64) // round to sig digits
	if v != 0 && (math.Abs(v) < 1e-3 || math.Abs(v) >= 1e4) {
		m := strconv.FormatFloat(v, 'e', -1, 64)
		i := strings.IndexByte(m, 'e')
		e, _ := strconv.Atoi(m[i+1:])
		pow := "10^" + strings.Replace(strconv.Itoa(e), "-", "−", 1)
		switch m[:i] {
		case "1":
			return pow
		case "-1":
			return "-" + pow
		}
		return m[:i] + "×" + pow
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// powText draws tick labels: plain text, except that what follows a "^"
// is an exponent, set smaller and raised (the fonts lack some superscript
// digits, and gonum's LaTeX handler lacks superscripts).
type powText struct{ text.Plain }

// expScale and expRaise size and lift the exponent, relative to the font size.
const expScale, expRaise = 0.72, 0.42

// split returns the base and the exponent of txt, and the exponent's font.
func (h powText) split(txt string, fnt font.Font) (base, exp string, efnt font.Font) {
	base, exp, _ = strings.Cut(txt, "^")
	efnt = fnt
	efnt.Size = fnt.Size * expScale
	return base, exp, efnt
}

// Box is text.Plain's box of the base widened by the exponent.
func (h powText) Box(txt string, fnt font.Font) (width, height, depth vg.Length) {
	base, exp, efnt := h.split(txt, fnt)
	width, height, depth = h.Plain.Box(base, fnt)
	if exp != "" {
		ew, eh, _ := h.Plain.Box(exp, efnt)
		width += ew
		height = max(height, fnt.Size*expRaise+eh)
	}
	return width, height, depth
}

// Draw draws txt (one line, not rotated) aligned at pt as sty says.
func (h powText) Draw(c vg.Canvas, txt string, sty text.Style, pt vg.Point) {
	if sty.Rotation != 0 || !strings.Contains(txt, "^") {
		h.Plain.Draw(c, strings.Replace(txt, "^", "", 1), sty, pt)
		return
	}
	base, exp, efnt := h.split(txt, sty.Font)
	w, ht, dp := h.Box(txt, sty.Font)
	baseline := pt.Y + vg.Length(sty.YAlign)*(ht+dp) + dp
	x := pt.X + vg.Length(sty.XAlign)*w
	c.SetColor(sty.Color)
	face := h.Fonts.Lookup(sty.Font, sty.Font.Size)
	c.FillString(face, vg.Point{X: x, Y: baseline}, base)
	c.FillString(h.Fonts.Lookup(efnt, efnt.Size), vg.Point{X: x + face.Width(base), Y: baseline + sty.Font.Size*expRaise}, exp)
}
