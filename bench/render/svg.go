package render

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// palette colours series in order; the first is turnstile's, and no
// other is near it.
var palette = []string{"#d9480f", "#1c7ed6", "#2f9e44", "#7048e8", "#c2255c", "#0c8599", "#868e96"}

const (
	chartW   = 640 // the narrowest chart
	chartH   = 260
	padLeft  = 64
	padRight = 12
	padTop   = 28
	padBot   = 48
)

// scale maps values to the plot's height, linear from zero or
// logarithmic over the data's decades.
type scale struct {
	log    bool
	lo, hi float64
}

func newScale(values []float64, log bool) scale {
	hi, lo := 0.0, math.Inf(1)
	for _, v := range values {
		if v > 0 {
			hi, lo = max(hi, v), min(lo, v)
		}
	}
	if hi == 0 {
		return scale{hi: 1, lo: 1}
	}
	if log {
		return scale{log: true, lo: math.Pow(10, math.Floor(math.Log10(lo))), hi: math.Pow(10, math.Ceil(math.Log10(hi)+1e-9))}
	}
	step := niceStep(hi / 4)
	return scale{hi: math.Ceil(hi/step) * step}
}

// y returns the height above the baseline, in pixels, of v.
func (s scale) y(v float64) float64 {
	h := float64(chartH - padTop - padBot)
	if s.log {
		if v <= 0 {
			return 0
		}
		return h * math.Max(0, math.Log10(v/s.lo)) / math.Log10(s.hi/s.lo)
	}
	return h * v / s.hi
}

// ticks are the gridline values.
func (s scale) ticks() []float64 {
	var t []float64
	if s.log {
		for v := s.lo; v <= s.hi*1.0001; v *= 10 {
			t = append(t, v)
		}
		return t
	}
	step := niceStep(s.hi / 4)
	for v := 0.0; v <= s.hi*1.0001; v += step {
		t = append(t, v)
	}
	return t
}

func niceStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

func short(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 3, 64) + "M"
	case a >= 1e3:
		return strconv.FormatFloat(v/1e3, 'g', 3, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// frame starts an SVG with a title, axes and gridlines.
func frame(b *strings.Builder, title, unit string, s scale, width int) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img"><title>%s</title>`, width, chartH, width, chartH, html.EscapeString(title))
	fmt.Fprintf(b, `<text x="%d" y="18" class="t">%s</text>`, padLeft, html.EscapeString(title))
	base := float64(chartH - padBot)
	for _, v := range s.ticks() {
		y := base - s.y(v)
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" class="g"/><text x="%d" y="%.1f" class="a" text-anchor="end">%s</text>`, padLeft, width-padRight, y, y, padLeft-6, y+4, short(v))
	}
	fmt.Fprintf(b, `<text x="12" y="%d" class="a" transform="rotate(-90 12 %d)" text-anchor="middle">%s</text>`, chartH/2, chartH/2, html.EscapeString(unit))
}

// legend writes the series names at the foot of a chart.
func legend(b *strings.Builder, series []string) {
	x := padLeft
	for i, name := range series {
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d" class="a">%s</text>`, x, chartH-14, palette[i%len(palette)], x+14, chartH-5, html.EscapeString(name))
		x += legendStep(name)
	}
}

// legendStep is the room one name takes in a legend.
func legendStep(name string) int { return 24 + 7*len(name) }

// legendWidth is the chart width a legend of series needs.
func legendWidth(series []string) int {
	w := padLeft + padRight
	for _, name := range series {
		w += legendStep(name)
	}
	return w
}

// bars draws grouped bars: values[g][s] is series s in group g; a value
// of NaN is drawn as no bar.
func bars(title, unit string, groups, series []string, values [][]float64, log bool) string {
	var all []float64
	for _, row := range values {
		all = append(all, row...)
	}
	s := newScale(all, log)
	// Wide enough that no two group labels overlap.
	label := 0
	for _, g := range groups {
		label = max(label, len(g))
	}
	width := max(chartW, padLeft+padRight+len(groups)*(7*label+16), legendWidth(series))
	var b strings.Builder
	frame(&b, title, unit, s, width)
	base := float64(chartH - padBot)
	gw := float64(width-padLeft-padRight) / float64(max(len(groups), 1))
	bw := (gw - 12) / float64(max(len(series), 1))
	for g, name := range groups {
		x0 := float64(padLeft) + float64(g)*gw + 6
		for si := range series {
			v := values[g][si]
			if math.IsNaN(v) {
				continue
			}
			h := s.y(v)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %s %s</title></rect>`,
				x0+float64(si)*bw, base-h, math.Max(bw-2, 1), h, palette[si%len(palette)], html.EscapeString(name), html.EscapeString(series[si]), short(v), html.EscapeString(unit))
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="a" text-anchor="middle">%s</text>`, x0+gw/2-6, base+14, html.EscapeString(name))
	}
	legend(&b, series)
	b.WriteString("</svg>")
	return b.String()
}

// lines draws one polyline per series over categorical x values:
// values[s][x]; NaN leaves a gap.
func lines(title, unit string, xs, series []string, values [][]float64) string {
	var all []float64
	for _, row := range values {
		all = append(all, row...)
	}
	s := newScale(all, false)
	width := max(chartW, legendWidth(series))
	var b strings.Builder
	frame(&b, title, unit, s, width)
	base := float64(chartH - padBot)
	step := float64(width-padLeft-padRight-40) / float64(max(len(xs)-1, 1))
	px := func(i int) float64 { return float64(padLeft+20) + float64(i)*step }
	for i, x := range xs {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="a" text-anchor="middle">%s</text>`, px(i), base+14, html.EscapeString(x))
	}
	for si, row := range values {
		var pts []string
		for i, v := range row {
			if math.IsNaN(v) {
				continue
			}
			y := base - s.y(v)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(i), y))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s at %s: %s %s</title></circle>`, px(i), y, palette[si%len(palette)], html.EscapeString(series[si]), html.EscapeString(xs[i]), short(v), html.EscapeString(unit))
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`, strings.Join(pts, " "), palette[si%len(palette)])
	}
	legend(&b, series)
	b.WriteString("</svg>")
	return b.String()
}
