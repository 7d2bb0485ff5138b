package board

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
	"time"
)

// palette colors the runs, in the order given (it repeats past ten runs).
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

func color(i int) string { return palette[i%len(palette)] }

var esc = html.EscapeString

// page is what one answer renders: the runs, the board's own notes, the view asked for.
type page struct {
	runs   []Run
	sweeps []Sweep
	notes  []string
	view   view
	cfg    Config
}

// writePage is the whole page: the view's controls (outside the refreshed body, so a slider is
// not replaced under the pointer), then the body. Without scripts the controls are a plain form.
func writePage(sb *strings.Builder, p page) {
	sb.WriteString(`<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>nitro board</title>` +
		`<link rel="stylesheet" href="/assets/style.css"></head><body>` +
		`<header><h1>nitro board</h1><form id="view" method="get" action="/"><label>x axis <select name="x">`)
	for _, a := range axes {
		sel := ""
		if a.key == p.view.x {
			sel = " selected"
		}
		title := a.label
		if title == "" {
			title = "train per step, validation and data per epoch (per step when a run validates every N steps)"
		}
		fmt.Fprintf(sb, `<option value="%s" title="%s"%s>%s</option>`, a.key, esc(title), sel, esc(a.word))
	}
	fmt.Fprintf(sb, `</select></label> <label>smoothing <input type="range" name="smooth" min="0" max="%g" step="0.01" value="%g">`+
		`<output>%g</output></label><noscript> <button>apply</button></noscript></form><span id="status"></span></header>`,
		maxSmooth, p.view.smooth, p.view.smooth)
	fmt.Fprintf(sb, `<main id="content" data-refresh-ms="%d">`, p.cfg.Refresh.Milliseconds())
	writeContent(sb, p)
	sb.WriteString(`</main><script src="/assets/board.js"></script></body></html>`)
}

// writeContent is the page body: the board's notes, each sweep's view (writeSweeps), the runs
// table, the config diff, then the charts: one per metric, or per family of metrics (see charts).
func writeContent(sb *strings.Builder, p page) {
	now, runs := p.cfg.Now(), p.runs
	for _, n := range p.notes {
		fmt.Fprintf(sb, `<div class="note board">%s</div>`, esc(n))
	}
	writeSweeps(sb, p.sweeps)
	sb.WriteString(`<section><h2>runs</h2><table class="runs"><tr><th>shown</th><th>run</th><th>phase</th><th>epoch</th><th>step</th>` +
		`<th>steps/s</th><th>stop reason</th><th>best checkpoint</th><th>lines</th><th>malformed</th><th>last write</th><th>notes</th></tr>`)
	for i, r := range runs {
		cls, checked := "run", " checked"
		if r.Gone {
			cls += " gone"
		}
		if p.view.hidden[r.Name] {
			cls, checked = cls+" hidden", ""
		}
		fmt.Fprintf(sb, `<tr class="%s" data-run="%s"><td><input type="checkbox" class="toggle" value="%s" title="draw this run"%s>`+
			`<span class="swatch" style="background:%s"></span></td><td title="%s">%s</td>`,
			cls, esc(r.Name), esc(r.Name), checked, color(i), esc(r.Dir), esc(r.Name))
		fmt.Fprintf(sb, `<td class="phase">%s</td><td>%d</td><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td class="malformed">%d</td><td>%s</td><td>`,
			esc(r.Phase), r.Epoch, r.Step, rate(r.StepsPerSecond), orDash(r.StopReason), orDash(r.Best), r.Lines, r.Malformed, age(now, r.LastWrite))
		notes := append(append([]string(nil), r.Warnings...), r.Errors...)
		if p.view.x == "time" && !r.Timed && len(r.Train)+len(r.Validate)+len(r.Data) > 0 {
			notes = append(notes, "no step_seconds in its train lines: not drawn on the time axis")
		}
		if p.view.x == "epoch" && r.ValEvery > 0 && r.StepsPerEpoch == 0 && len(r.Validate)+len(r.Data) > 0 {
			notes = append(notes, fmt.Sprintf("validated every %d steps, its first epoch not over yet: its validation and data points are not drawn on the epoch axis until it is", r.ValEvery))
		}
		for _, w := range notes {
			fmt.Fprintf(sb, `<div class="note">%s</div>`, esc(w))
		}
		sb.WriteString(`</td></tr>`)
	}
	sb.WriteString(`</table></section>`)
	writeDiff(sb, runs)
	for _, ctx := range []struct {
		title, key string
		get        func(Run) map[string][]Point
	}{
		{"train, logged per optimizer step", "train", func(r Run) map[string][]Point { return r.Train }},
		{"validation, logged", "validate", func(r Run) map[string][]Point { return r.Validate }},
		{"data path, logged", "data", func(r Run) map[string][]Point { return r.Data }},
	} {
		names := map[string]*series{}
		var periods []string // how often the runs with points here logged them, each said once
		for _, r := range runs {
			for k := range ctx.get(r) {
				names[k] = nil
			}
			if per := period(r); len(ctx.get(r)) > 0 && !slices.Contains(periods, per) {
				periods = append(periods, per)
			}
		}
		if len(names) == 0 {
			continue
		}
		title, train := ctx.title, ctx.key == "train"
		if !train {
			title += " " + strings.Join(periods, " or ")
		}
		v := p.view.along(train, runs)
		fmt.Fprintf(sb, `<section id="%s"><h2>%s</h2><div class="charts">`, ctx.key, esc(title))
		for _, c := range charts(seriesNames(names)) {
			var lines []line
			for i, r := range runs {
				if p.view.hidden[r.Name] {
					continue
				}
				for j, m := range c.members {
					l := line{run: r.Name, color: color(i), pts: v.onAxis(r, ctx.get(r)[m], train)}
					if len(c.members) > 1 { // a family: color by member, dash by run
						l.member, l.color, l.dash = m, color(j), dash(i)
					}
					lines = append(lines, l)
				}
			}
			writeChart(sb, ctx.key, c, v, lines)
		}
		sb.WriteString(`</div></section>`)
	}
}

// period is how often r logs its validate and data lines, for a section's title.
func period(r Run) string {
	if r.ValEvery > 0 {
		return fmt.Sprintf("per validation (every %d steps)", r.ValEvery)
	}
	return "per epoch"
}

// dashes tell the runs apart on a family chart, where color tells the members apart.
var dashes = []string{"", "6 3", "2 2", "8 3 2 3"}

func dash(i int) string { return dashes[i%len(dashes)] }

func rate(v float64) string {
	if v <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.3g", v)
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return esc(s)
}

func age(now, t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String() + " ago"
}

// writeDiff lists the config fields that differ between the runs, one column per run.
func writeDiff(sb *strings.Builder, runs []Run) {
	differ, same := diff(runs)
	sb.WriteString(`<section><h2>config</h2>`)
	if len(runs) == 0 {
		sb.WriteString(`<p>no runs yet</p></section>`)
		return
	}
	if len(runs) < 2 {
		fmt.Fprintf(sb, `<p>one run: %d fields (give two or more runs to see which differ)</p>`, same)
	} else {
		fmt.Fprintf(sb, `<p><span id="differ">%d</span> fields differ, %d agree</p>`, len(differ), same)
	}
	rows := differ
	if len(runs) < 2 {
		rows = fields(runs)
	}
	if len(rows) == 0 {
		sb.WriteString(`</section>`)
		return
	}
	sb.WriteString(`<table class="diff"><tr><th>field</th>`)
	for i, r := range runs {
		fmt.Fprintf(sb, `<th><span class="swatch" style="background:%s"></span>%s</th>`, color(i), esc(r.Name))
	}
	sb.WriteString(`</tr>`)
	for _, f := range rows {
		fmt.Fprintf(sb, `<tr class="field" data-field="%s"><td>%s</td>`, esc(f.name), esc(f.name))
		for _, r := range runs {
			v, spelling, ok := value(r, f)
			if !ok {
				v = "—"
			}
			if note := r.Overridden[spelling]; note != "" {
				fmt.Fprintf(sb, `<td title="%s">%s</td>`, esc("the run used this; also logged: "+note), esc(v))
				continue
			}
			fmt.Fprintf(sb, `<td>%s</td>`, esc(v))
		}
		sb.WriteString(`</tr>`)
	}
	sb.WriteString(`</table></section>`)
}

// Chart geometry, in SVG user units.
const (
	chartW, chartH         = 560.0, 260.0
	padL, padR, padT, padB = 62.0, 12.0, 24.0, 32.0
	plotW, plotH           = chartW - padL - padR, chartH - padT - padB
	logDecades             = 2.0 // a y range spanning more decades than this is drawn on a log scale
	markersBelow           = 60  // series with fewer points get a dot per point
)

// line is one curve of a chart: a run's metric (a family member's, when member is set), its
// points already on the view's x axis. A sweep's trial curve also has its state (data-state, and a
// cross where a pruned trial stopped) and an extra class (the best trial's is "best").
type line struct {
	run, member, color, dash string
	state, cls               string
	pts                      []Point
}

// area maps data onto a chart's plot rectangle; the curve charts and the sweep's scatters share it.
type area struct {
	x0, x1, y0, y1 float64
	logX, logY     bool
}

// fit is the area over the data's ranges: y on a log scale when positive and spanning more than
// logDecades, x on one when asked and positive; a flat range is widened so it has a middle.
func fit(x0, x1, y0, y1 float64, logX bool) area {
	a := area{x0: x0, x1: x1, y0: y0, y1: y1, logX: logX && x0 > 0, logY: y0 > 0 && math.Log10(y1/y0) > logDecades}
	switch {
	case a.x1 == a.x0 && a.logX:
		a.x0, a.x1 = a.x0/2, a.x1*2
	case a.x1 == a.x0:
		a.x0, a.x1 = a.x0-1, a.x1+1
	}
	if a.y1 == a.y0 {
		d := math.Abs(a.y0) * 0.05
		if d == 0 {
			d = 1
		}
		a.y0, a.y1 = a.y0-d, a.y1+d
	}
	return a
}

func (a area) tx(x float64) float64 {
	if a.logX {
		return padL + plotW*(math.Log10(x)-math.Log10(a.x0))/(math.Log10(a.x1)-math.Log10(a.x0))
	}
	return padL + plotW*(x-a.x0)/(a.x1-a.x0)
}

func (a area) ty(y float64) float64 {
	if a.logY {
		return padT + plotH*(1-(math.Log10(y)-math.Log10(a.y0))/(math.Log10(a.y1)-math.Log10(a.y0)))
	}
	return padT + plotH*(1-(y-a.y0)/(a.y1-a.y0))
}

// tick is an x axis label: where, and what it says (a number, or a category's text).
type tick struct {
	at   float64
	text string
}

// numberTicks are ticks' values on a's x axis, as numbers.
func (a area) numberTicks() []tick {
	var out []tick
	for _, v := range ticks(a.x0, a.x1, a.logX) {
		out = append(out, tick{v, fmt.Sprintf("%.4g", v)})
	}
	return out
}

// writeFrame draws the plot's frame, the y grid and its values, the x ticks and the x axis's label
// (which says already whether y is on a log scale).
func (a area) writeFrame(sb *strings.Builder, xticks []tick, label string) {
	fmt.Fprintf(sb, `<rect class="frame" x="%g" y="%g" width="%g" height="%g"/>`, padL, padT, plotW, plotH)
	for _, yv := range ticks(a.y0, a.y1, a.logY) {
		py := a.ty(yv)
		fmt.Fprintf(sb, `<line class="grid" x1="%g" y1="%.1f" x2="%g" y2="%.1f"/><text class="tick" x="%g" y="%.1f" text-anchor="end">%.4g</text>`,
			padL, py, padL+plotW, py, padL-4, py+4, yv)
	}
	for _, t := range xticks {
		fmt.Fprintf(sb, `<text class="tick" x="%.1f" y="%g" text-anchor="middle">%s</text>`, a.tx(t.at), padT+plotH+14, esc(t.text))
	}
	fmt.Fprintf(sb, `<text class="axis" x="%g" y="%g" text-anchor="middle">%s</text>`, padL+plotW/2, chartH-4, esc(label))
}

// writeChart draws one chart as an SVG: a polyline per line, with data-run, data-member and
// data-points attributes so a reader (or a test) can count what is drawn; with smoothing, the
// raw curve faint under the smoothed one. A family's chart has a legend below it. The x axis is
// the view's, or c.xlabel's when set (a sweep's reported steps).
func writeChart(sb *strings.Builder, ctx string, c chart, v view, lines []line) {
	x0, x1, y0, y1 := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, l := range lines {
		for _, p := range l.pts {
			x0, x1 = math.Min(x0, p.X), math.Max(x1, p.X)
			y0, y1 = math.Min(y0, p.Y), math.Max(y1, p.Y)
		}
	}
	fmt.Fprintf(sb, `<figure><svg class="chart" data-context="%s" data-metric="%s" viewBox="0 0 %g %g" width="%g" height="%g" xmlns="http://www.w3.org/2000/svg">`,
		esc(ctx), esc(c.key), chartW, chartH, chartW, chartH)
	fmt.Fprintf(sb, `<text class="title" x="%g" y="16">%s</text>`, padL, esc(c.title))
	if math.IsInf(x0, 1) {
		fmt.Fprintf(sb, `<text x="%g" y="%g">no points yet</text></svg>`, padL+10, padT+plotH/2)
		writeLegend(sb, c, lines)
		return
	}
	a := fit(x0, x1, y0, y1, false)
	label := c.xlabel
	if label == "" {
		label = v.label(ctx == "train")
	}
	if a.logY {
		label += "; y on a log scale"
	}
	if v.smooth > 0 {
		label += fmt.Sprintf("; smoothed %g", v.smooth)
	}
	a.writeFrame(sb, a.numberTicks(), label)
	for _, l := range lines {
		if len(l.pts) == 0 {
			continue
		}
		curve := func(cls string, pts []Point) {
			if l.cls != "" {
				cls += " " + l.cls
			}
			fmt.Fprintf(sb, `<polyline class="%s" data-run="%s" data-points="%d"`, cls, esc(l.run), len(pts))
			if l.member != "" {
				fmt.Fprintf(sb, ` data-member="%s"`, esc(l.member))
			}
			if l.state != "" {
				fmt.Fprintf(sb, ` data-state="%s"`, esc(l.state))
			}
			if l.dash != "" {
				fmt.Fprintf(sb, ` stroke-dasharray="%s"`, l.dash)
			}
			fmt.Fprintf(sb, ` stroke="%s" points="`, l.color)
			for j, p := range pts {
				if j > 0 {
					sb.WriteByte(' ')
				}
				fmt.Fprintf(sb, "%.1f,%.1f", a.tx(p.X), a.ty(p.Y))
			}
			sb.WriteString(`"/>`)
		}
		if v.smooth > 0 && len(l.pts) > 1 {
			curve("series raw", l.pts)
			curve("series smoothed", ema(l.pts, v.smooth))
			continue
		}
		curve("series", l.pts)
		if len(l.pts) < markersBelow {
			for _, p := range l.pts {
				fmt.Fprintf(sb, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`, a.tx(p.X), a.ty(p.Y), l.color)
			}
		}
		if l.state == "PRUNED" {
			// Where the pruner stopped the trial: its curve ends there, and the cross says why.
			last := l.pts[len(l.pts)-1]
			x, y := a.tx(last.X), a.ty(last.Y)
			fmt.Fprintf(sb, `<path class="pruned-end" data-run="%s" d="M%.1f,%.1fl8,8m0,-8l-8,8" stroke="%s"/>`, esc(l.run), x-4, y-4, l.color)
		}
	}
	sb.WriteString(`</svg>`)
	writeLegend(sb, c, lines)
}

// writeLegend closes a chart's figure, under a family's chart with its legend: a swatch per
// member, and a dash sample per run when more than one run is drawn; under a lone metric's, its
// caption if any.
func writeLegend(sb *strings.Builder, c chart, lines []line) {
	if len(c.members) < 2 {
		if c.caption != "" {
			fmt.Fprintf(sb, `<figcaption class="legend">%s</figcaption>`, c.caption) // HTML its writer escaped
		}
		sb.WriteString(`</figure>`)
		return
	}
	sb.WriteString(`<figcaption class="legend">`)
	for j, m := range c.members {
		fmt.Fprintf(sb, `<span class="key" data-member="%s"><span class="swatch" style="background:%s"></span>%s</span>`, esc(m), color(j), esc(m))
	}
	var runs []line
	for _, l := range lines {
		if len(runs) == 0 || runs[len(runs)-1].run != l.run {
			runs = append(runs, l)
		}
	}
	if len(runs) > 1 {
		for _, l := range runs {
			fmt.Fprintf(sb, `<span class="key" data-legend-run="%s"><svg width="28" height="8"><line x1="0" y1="4" x2="28" y2="4" stroke="#444" stroke-width="1.5" stroke-dasharray="%s"/></svg>%s</span>`,
				esc(l.run), l.dash, esc(l.run))
		}
	}
	sb.WriteString(`</figcaption></figure>`)
}

// ticks are about five round values inside [lo, hi]: multiples of 1, 2 or 5 times a power of ten,
// or on a log axis the powers of ten inside (each 1-2-5 multiple when the range spans under two).
func ticks(lo, hi float64, log bool) []float64 {
	if log {
		var out []float64
		for e := math.Ceil(math.Log10(lo)); e <= math.Floor(math.Log10(hi)); e++ {
			out = append(out, math.Pow(10, e))
		}
		if len(out) >= 3 {
			return out
		}
		return ticks(lo, hi, false)
	}
	raw := (hi - lo) / 4
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{2, 5, 10} {
		if step >= raw {
			break
		}
		step = m * mag
	}
	var out []float64
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9 && len(out) < 12; v += step {
		out = append(out, v)
	}
	return out
}
