package board

import (
	"fmt"
	"html"
	"math"
	"strings"
	"time"
)

// palette colors the runs, in the order given (it repeats past ten runs).
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

func color(i int) string { return palette[i%len(palette)] }

var esc = html.EscapeString

func writePage(sb *strings.Builder, runs []Run, cfg Config) {
	sb.WriteString(`<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>nitro board</title>` +
		`<link rel="stylesheet" href="/assets/style.css"></head><body>` +
		`<header><h1>nitro board</h1><span id="status"></span></header>`)
	fmt.Fprintf(sb, `<main id="content" data-refresh-ms="%d">`, cfg.Refresh.Milliseconds())
	writeContent(sb, runs, cfg)
	sb.WriteString(`</main><script src="/assets/board.js"></script></body></html>`)
}

// writeContent is the page body: the runs table, the config diff, then one chart per metric.
func writeContent(sb *strings.Builder, runs []Run, cfg Config) {
	now := cfg.Now()
	sb.WriteString(`<section><h2>runs</h2><table class="runs"><tr><th></th><th>run</th><th>phase</th><th>epoch</th><th>step</th>` +
		`<th>steps/s</th><th>stop reason</th><th>best checkpoint</th><th>lines</th><th>malformed</th><th>last write</th><th>notes</th></tr>`)
	for i, r := range runs {
		cls := "run"
		if r.Gone {
			cls += " gone"
		}
		fmt.Fprintf(sb, `<tr class="%s" data-run="%s"><td><span class="swatch" style="background:%s"></span></td><td title="%s">%s</td>`,
			cls, esc(r.Name), color(i), esc(r.Dir), esc(r.Name))
		fmt.Fprintf(sb, `<td class="phase">%s</td><td>%d</td><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td class="malformed">%d</td><td>%s</td><td>`,
			esc(r.Phase), r.Epoch, r.Step, rate(r.StepsPerSecond), orDash(r.StopReason), orDash(r.Best), r.Lines, r.Malformed, age(now, r.LastWrite))
		for _, w := range append(append([]string(nil), r.Warnings...), r.Errors...) {
			fmt.Fprintf(sb, `<div class="note">%s</div>`, esc(w))
		}
		sb.WriteString(`</td></tr>`)
	}
	sb.WriteString(`</table></section>`)
	writeDiff(sb, runs)
	for _, ctx := range []struct {
		title, key, x string
		get           func(Run) map[string][]Point
	}{
		{"train, per optimizer step", "train", "step", func(r Run) map[string][]Point { return r.Train }},
		{"validation, per epoch", "validate", "epoch", func(r Run) map[string][]Point { return r.Validate }},
		{"data path, per epoch", "data", "epoch", func(r Run) map[string][]Point { return r.Data }},
	} {
		names := map[string]*series{}
		for _, r := range runs {
			for k := range ctx.get(r) {
				names[k] = nil
			}
		}
		if len(names) == 0 {
			continue
		}
		fmt.Fprintf(sb, `<section><h2>%s</h2><div class="charts">`, esc(ctx.title))
		for _, name := range seriesNames(names) {
			per := make([][]Point, len(runs))
			for i, r := range runs {
				per[i] = ctx.get(r)[name]
			}
			writeChart(sb, ctx.key, name, ctx.x, runs, per)
		}
		sb.WriteString(`</div></section>`)
	}
}

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

// writeChart draws one metric of every run as an SVG: a polyline per run in the run's color,
// with data-run and data-points attributes so a reader (or a test) can count what is drawn.
func writeChart(sb *strings.Builder, ctx, name, xlabel string, runs []Run, per [][]Point) {
	x0, x1, y0, y1 := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, pts := range per {
		for _, p := range pts {
			x0, x1 = math.Min(x0, p.X), math.Max(x1, p.X)
			y0, y1 = math.Min(y0, p.Y), math.Max(y1, p.Y)
		}
	}
	fmt.Fprintf(sb, `<figure><svg class="chart" data-context="%s" data-metric="%s" viewBox="0 0 %g %g" width="%g" height="%g" xmlns="http://www.w3.org/2000/svg">`,
		esc(ctx), esc(name), chartW, chartH, chartW, chartH)
	fmt.Fprintf(sb, `<text class="title" x="%g" y="16">%s</text>`, padL, esc(name))
	if math.IsInf(x0, 1) {
		fmt.Fprintf(sb, `<text x="%g" y="%g">no points yet</text></svg></figure>`, padL+10, padT+plotH/2)
		return
	}
	logY := y0 > 0 && math.Log10(y1/y0) > logDecades
	if x1 == x0 {
		x0, x1 = x0-1, x1+1
	}
	if y1 == y0 {
		d := math.Abs(y0) * 0.05
		if d == 0 {
			d = 1
		}
		y0, y1 = y0-d, y1+d
	}
	ty := func(y float64) float64 {
		if logY {
			return padT + plotH*(1-(math.Log10(y)-math.Log10(y0))/(math.Log10(y1)-math.Log10(y0)))
		}
		return padT + plotH*(1-(y-y0)/(y1-y0))
	}
	tx := func(x float64) float64 { return padL + plotW*(x-x0)/(x1-x0) }
	fmt.Fprintf(sb, `<rect class="frame" x="%g" y="%g" width="%g" height="%g"/>`, padL, padT, plotW, plotH)
	for _, yv := range ticks(y0, y1, logY) {
		py := ty(yv)
		fmt.Fprintf(sb, `<line class="grid" x1="%g" y1="%.1f" x2="%g" y2="%.1f"/><text class="tick" x="%g" y="%.1f" text-anchor="end">%.4g</text>`,
			padL, py, padL+plotW, py, padL-4, py+4, yv)
	}
	for _, xv := range ticks(x0, x1, false) {
		fmt.Fprintf(sb, `<text class="tick" x="%.1f" y="%g" text-anchor="middle">%.4g</text>`, tx(xv), padT+plotH+14, xv)
	}
	scale := ""
	if logY {
		scale = "; y on a log scale"
	}
	fmt.Fprintf(sb, `<text class="axis" x="%g" y="%g" text-anchor="middle">%s%s</text>`, padL+plotW/2, chartH-4, esc(xlabel), scale)
	for i, pts := range per {
		if len(pts) == 0 {
			continue
		}
		fmt.Fprintf(sb, `<polyline class="series" data-run="%s" data-points="%d" stroke="%s" points="`, esc(runs[i].Name), len(pts), color(i))
		for j, p := range pts {
			if j > 0 {
				sb.WriteByte(' ')
			}
			fmt.Fprintf(sb, "%.1f,%.1f", tx(p.X), ty(p.Y))
		}
		sb.WriteString(`"/>`)
		if len(pts) < markersBelow {
			for _, p := range pts {
				fmt.Fprintf(sb, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`, tx(p.X), ty(p.Y), color(i))
			}
		}
	}
	sb.WriteString(`</svg></figure>`)
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
