package plot

import (
	"bufio"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/nitro-go/nitro/tensorfile"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The defaults of Options.
const (
	DefaultWidth  = 960 // pixels
	DefaultHeight = 600 // pixels
	maxWindow     = 501 // the widest automatic smoothing window, in points
)

// maxSide bounds a PNG's width and height, in pixels.
const maxSide = 8192

// IndexFile is the name of the index Write writes beside the PNGs.
const IndexFile = "index.md"

// Options sets how Write draws. The zero value draws with the defaults.
type Options struct {
	Width, Height int // each PNG's size in pixels, at most 8192; 0 means DefaultWidth x DefaultHeight
	// Window is how many points the train curves' smoothing averages, an odd number; 0 means
	// one twentieth of the points, at least 5 and at most 501.
	Window int
}

// Write draws run's figures with the default Options; see Options.Write.
func Write(run *Run, outDir string) ([]string, error) { return Options{}.Write(run, outDir) }

// Write draws run's figures into outDir (created if needed), one PNG a figure, then IndexFile
// listing them, and returns the paths written in that order:
//
//   - train_loss.png: the training loss per optimizer step, raw (thin, light) and smoothed by a
//     centered moving average (the mean of the Window points around each one, fewer where the
//     series ends, so the curve does not lag), dotted lines at epoch ends; train_<name>.png the
//     same for each other train metric; a loss (a name ending in "loss", val_loss too) whose
//     values are all positive and span more than two decades gets a log y axis, its label and
//     the index saying so;
//   - val_<name>.png: each validation metric per epoch, with markers;
//   - steps_per_second.png: Run.StepsPerSecond, when the file had timing;
//   - data_<name>.png (data_wait_frac.png): each data-line value per epoch, timing aside; mfu
//     (a fraction of the device's peak) as a percentage;
//   - confusion.png: the last confusion line's matrix as a heat map, true class down, predicted
//     class across, each cell's count written in it and its shade the fraction of its row.
//
// A step-based run's (Run.ValEvery > 0) validation, steps/s and data figures are per validation
// period instead, on an optimizer-step axis spanning the train figures' steps, with the epoch
// ends dotted as there.
//
// Metric names are made safe for file names (characters outside [A-Za-z0-9._-] become '_').
// Each file is written to a temporary file in outDir and renamed over its name, so a reader
// never sees half a file; files from an earlier call that this one does not draw are left as
// they are (the index lists what this call drew). On error it returns the paths written before.
func (o Options) Write(run *Run, outDir string) ([]string, error) {
	if run == nil {
		return nil, errors.New("plot: Write: nil Run")
	}
	o, err := o.resolved()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("plot: %w", err)
	}
	figs, skipped := o.figures(run)
	var written []string
	for _, f := range figs {
		img, err := render(f.plot, o.Width, o.Height)
		if err != nil {
			return written, fmt.Errorf("plot: %s: %w", f.file, err)
		}
		path := filepath.Join(outDir, f.file)
		if err := writeAtomic(path, func(w io.Writer) error { return png.Encode(w, img) }); err != nil {
			return written, err
		}
		written = append(written, path)
	}
	path := filepath.Join(outDir, IndexFile)
	index := indexText(run, figs, skipped)
	if err := writeAtomic(path, func(w io.Writer) error { _, err := io.WriteString(w, index); return err }); err != nil {
		return written, err
	}
	return append(written, path), nil
}

func (o Options) resolved() (Options, error) {
	if o.Width == 0 && o.Height == 0 {
		o.Width, o.Height = DefaultWidth, DefaultHeight
	}
	if o.Width <= 0 || o.Height <= 0 || o.Width > maxSide || o.Height > maxSide {
		return o, fmt.Errorf("plot: size %dx%d: want both sides in 1..%d pixels", o.Width, o.Height, maxSide)
	}
	if o.Window < 0 || o.Window > 0 && o.Window%2 == 0 {
		return o, fmt.Errorf("plot: smoothing window %d: want an odd number of points, or 0 for the default", o.Window)
	}
	return o, nil
}

// figure is one PNG to draw and its index entry.
type figure struct {
	file   string
	about  string // what it shows, one line
	values string // the values' range
	plot   *gplot.Plot
}

var (
	rawColor    = color.RGBA{R: 0x9c, G: 0xc3, B: 0xe6, A: 0xff}
	smoothColor = color.RGBA{R: 0x1f, G: 0x4e, B: 0x9a, A: 0xff}
	epochColor  = color.RGBA{R: 0xa0, G: 0xa0, B: 0xa0, A: 0xff}
	pointColor  = color.RGBA{R: 0xc0, G: 0x50, B: 0x10, A: 0xff}
	epochLine   = draw.LineStyle{Color: epochColor, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(2), vg.Points(3)}}
)

// percent is pts with each value times 100.
func percent(pts []Point) []Point {
	out := make([]Point, len(pts))
	for i, pt := range pts {
		out[i] = Point{X: pt.X, Y: 100 * pt.Y}
	}
	return out
}

// figures lays out run's figures, and says which it left out.
func (o Options) figures(run *Run) (figs []figure, skipped []string) {
	names := newFileNames()
	// drawable keeps a series out when its values span more than a float64 holds: no axis can
	// show it (and gonum/plot's layout does not cope).
	drawable := func(file string, pts []Point) bool {
		if len(pts) == 0 {
			return false
		}
		if lo, hi := yRange(pts); math.IsInf(hi-lo, 0) {
			skipped = append(skipped, fmt.Sprintf("%s is left out: its values span more than a float64 holds (%s to %s)", file, num(lo), num(hi)))
			return false
		}
		return true
	}
	trainNames := sortedNames(run.Train)
	sort.SliceStable(trainNames, func(i, j int) bool { return trainNames[i] == "loss" && trainNames[j] != "loss" })
	for _, n := range trainNames {
		if file, pts := names.take("train_", n), run.Train[n]; drawable(file, pts) {
			figs = append(figs, o.trainFigure(file, n, pts, run.EpochEnds))
		}
	}
	axis := newPeriodAxis(run)
	for _, n := range sortedNames(run.Validate) {
		if file, pts := names.take("val_", n), run.Validate[n]; drawable(file, pts) {
			title := "Validation " + label(strings.TrimPrefix(n, "val_")) + " per epoch"
			if axis.every > 0 {
				title = fmt.Sprintf("Validation %s every %d steps", label(strings.TrimPrefix(n, "val_")), axis.every)
			}
			figs = append(figs, axis.figure(file, n, title, "validation "+code(n)+" "+axis.per(), pts))
		}
	}
	if file := names.take("", "steps_per_second"); drawable(file, run.StepsPerSecond) {
		figs = append(figs, axis.figure(file, "steps/s", "Optimizer steps per second per "+axis.span(),
			"optimizer steps per second of wall time, "+axis.per(), run.StepsPerSecond))
	}
	for _, n := range sortedNames(run.Data) {
		switch n {
		case keyStepsPerSecond, keyEpochSeconds, keySeconds:
			continue // drawn as steps_per_second.png
		}
		pts, yLabel := run.Data[n], n
		title, about := label(n)+" per "+axis.span(), "data-path value "+code(n)+" "+axis.per()
		switch n {
		case "data_wait_frac":
			title = "Fraction of the " + axis.span() + " spent waiting for data"
			about = "fraction of each " + axis.span() + "'s training time spent waiting for batches (`data_wait_frac`)"
		case keyTokensPerSecond:
			title = "Training tokens per second per " + axis.span()
			about = "training tokens per second of wall time (`tokens_per_second`), " + axis.per()
		case keyMFU:
			// A fraction of the peak reads best as a percentage: 0.35 is "35%".
			pts, yLabel = percent(pts), "MFU (%)"
			title = "Model FLOPs utilization per " + axis.span()
			about = "model FLOPs utilization (`mfu`, the fraction of the device's measured peak matrix-product rate), in percent, " + axis.per()
		}
		if file := names.take("data_", n); drawable(file, pts) {
			figs = append(figs, axis.figure(file, yLabel, title, about, pts))
		}
	}
	if n := len(run.Confusions); n > 0 {
		figs = append(figs, confusionFigure(names.take("", "confusion"), run.Confusions[n-1]))
	}
	return figs, skipped
}

// trainFigure draws one train series per step: raw, smoothed, and the epoch ends.
func (o Options) trainFigure(file, name string, pts []Point, ends []EpochEnd) figure {
	p := gplot.New()
	if name == "loss" {
		p.Title.Text = "Training loss per optimizer step"
	} else {
		p.Title.Text = "Training " + label(name) + " per optimizer step"
	}
	p.X.Label.Text = "optimizer step"
	p.X.Tick.Marker = ticks{integer: true}
	p.Y.Tick.Marker = ticks{}
	p.Y.Label.Text = label(name)
	p.Add(plotter.NewGrid())
	window := o.Window
	if window == 0 {
		window = min(max(len(pts)/20, 5), maxWindow) | 1
	}
	smooth := centered(pts, window)
	first, last := pts[0].X, pts[len(pts)-1].X
	var marks []float64
	for _, e := range ends {
		if x := float64(e.Step); x >= first && x <= last {
			marks = append(marks, x)
		}
	}
	if len(marks) > 0 {
		p.Add(&vlines{xs: marks, style: epochLine})
	}
	raw, _ := plotter.NewLine(xys(pts)) // the points are finite: JSON has no NaN or Inf
	raw.LineStyle = draw.LineStyle{Color: rawColor, Width: vg.Points(0.75)}
	sm, _ := plotter.NewLine(xys(smooth))
	sm.LineStyle = draw.LineStyle{Color: smoothColor, Width: vg.Points(2)}
	p.Add(raw, sm)
	logY := isLoss(name) && spansDecades(pts)
	if logY {
		setLogY(p, pts, 0.04)
	} else {
		padY(p, 0.04)
	}
	if len(pts) == 1 { // a line through one point draws nothing
		sc, _ := plotter.NewScatter(xys(pts))
		sc.GlyphStyle = draw.GlyphStyle{Color: smoothColor, Radius: vg.Points(3), Shape: draw.CircleGlyph{}}
		p.Add(sc)
	}
	p.Legend.Add("raw", raw)
	p.Legend.Add(fmt.Sprintf("centered mean of %d points", window), sm)
	p.Legend.Top = smooth[len(smooth)-1].Y <= smooth[0].Y // keep it off a falling curve's start, or a rising one's end
	what := "training " + code(name)
	about := fmt.Sprintf("%s per optimizer step: raw (thin, light) and smoothed (thick: the centered mean of %d points, fewer at the ends)", what, window)
	if len(marks) > 0 {
		about += "; dotted lines mark the epoch ends"
	}
	if logY {
		about += logNote(pts)
	}
	lo, hi := yRange(pts)
	slo, shi := yRange(smooth)
	values := fmt.Sprintf("%s %s to %s raw, %s to %s smoothed, over steps %s to %s (%d points); first %s, last %s",
		code(name), num(lo), num(hi), num(slo), num(shi), num(first), num(last), len(pts), num(pts[0].Y), num(pts[len(pts)-1].Y))
	return figure{file: file, about: about, values: values, plot: p}
}

// periodAxis is the x axis of the figures drawn once a period (validation, steps/s, data): the
// epochs, or a step-based run's optimizer steps over the span of every step the file names, so
// that its points sit where they would on the train figures' step axis.
type periodAxis struct {
	every  int // Run.ValEvery; 0: the axis is the epochs
	lo, hi float64
	ends   []EpochEnd
}

func newPeriodAxis(run *Run) periodAxis {
	a := periodAxis{every: run.ValEvery, lo: math.Inf(1), hi: math.Inf(-1), ends: run.EpochEnds}
	for _, set := range []map[string][]Point{run.Train, run.Validate, run.Data, {"": run.StepsPerSecond}} {
		for _, pts := range set {
			if n := len(pts); n > 0 {
				a.lo, a.hi = min(a.lo, pts[0].X), max(a.hi, pts[n-1].X)
			}
		}
	}
	return a
}

// span is what one point stands for, after "per" or "each".
func (a periodAxis) span() string {
	if a.every == 0 {
		return "epoch"
	}
	return fmt.Sprintf("%d-step period", a.every)
}

// per says in the index how often the points come.
func (a periodAxis) per() string {
	if a.every == 0 {
		return "per epoch"
	}
	return fmt.Sprintf("per validation (every %d optimizer steps), at its step", a.every)
}

// figure draws one series on the axis: per epoch (epochFigure), or per validation period at its
// step, with the epoch ends dotted.
func (a periodAxis) figure(file, yLabel, title, about string, pts []Point) figure {
	if a.every == 0 {
		return epochFigure(file, yLabel, title, about, pts)
	}
	lo, hi := a.lo, a.hi
	if lo == hi { // one step: give it room
		lo, hi = lo-float64(a.every)/2, hi+float64(a.every)/2
	}
	var marks []float64
	for _, e := range a.ends {
		if x := float64(e.Step); x >= lo && x <= hi {
			marks = append(marks, x)
		}
	}
	if len(marks) > 0 {
		about += "; dotted lines mark the epoch ends"
	}
	return periodFigure(file, yLabel, title, about, pts, "optimizer step", "steps", lo, hi, marks)
}

// epochFigure draws one series per epoch with markers.
func epochFigure(file, yLabel, title, about string, pts []Point) figure {
	first, last := pts[0].X, pts[len(pts)-1].X
	return periodFigure(file, yLabel, title, about, pts, "epoch", "epochs", first-0.5, last+0.5, nil)
}

// periodFigure draws one series with markers over x from lo to hi, dotted lines at marks; units
// names the x values in the index.
func periodFigure(file, yLabel, title, about string, pts []Point, xLabel, units string, lo, hi float64, marks []float64) figure {
	p := gplot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = label(yLabel)
	p.X.Tick.Marker = ticks{integer: true}
	p.Y.Tick.Marker = ticks{}
	first, last := pts[0].X, pts[len(pts)-1].X
	p.X.Min, p.X.Max = lo, hi
	p.Add(plotter.NewGrid())
	if len(marks) > 0 {
		p.Add(&vlines{xs: marks, style: epochLine})
	}
	line, sc, _ := plotter.NewLinePoints(xys(pts))
	line.LineStyle = draw.LineStyle{Color: pointColor, Width: vg.Points(1.5)}
	sc.GlyphStyle = draw.GlyphStyle{Color: pointColor, Radius: vg.Points(4), Shape: draw.CircleGlyph{}}
	p.Add(line, sc)
	if isLoss(yLabel) && spansDecades(pts) {
		setLogY(p, pts, 0.08)
		about += logNote(pts)
	} else {
		padY(p, 0.08)
	}
	ylo, yhi := yRange(pts)
	values := fmt.Sprintf("%s to %s over %s %s to %s", num(ylo), num(yhi), units, num(first), num(last))
	if len(pts) <= 12 {
		vs := make([]string, len(pts))
		for i, pt := range pts {
			vs[i] = num(pt.Y)
		}
		values += ": " + strings.Join(vs, ", ")
	}
	return figure{file: file, about: about, values: values, plot: p}
}

// centered is the moving average of pts' values over window points centered on each one; near
// either end the window shrinks to the points on hand, the same number on both sides. Each mean
// is summed afresh (no running sum, which one huge spike would spoil for every later point), of
// values scaled into [-1, 1] when they are huge, so that no sum overflows.
func centered(pts []Point, window int) []Point {
	scale := 0.0
	for _, pt := range pts {
		scale = max(scale, math.Abs(pt.Y))
	}
	if scale < 1e300 { // no sum of fewer than a million such values overflows: leave them exact
		scale = 1
	}
	out := make([]Point, len(pts))
	for i, pt := range pts {
		h := min(window/2, i, len(pts)-1-i)
		sum := 0.0
		for _, q := range pts[i-h : i+h+1] {
			sum += q.Y / scale
		}
		out[i] = Point{X: pt.X, Y: sum / float64(2*h+1) * scale}
	}
	return out
}

// padY widens the y axis by frac of its range at each end, so no point sits on the frame.
func padY(p *gplot.Plot, frac float64) {
	if r := p.Y.Max - p.Y.Min; r > 0 && !math.IsInf(r, 0) {
		p.Y.Min -= frac * r
		p.Y.Max += frac * r
	}
}

// logDecades is how many powers of ten a loss must span before its y axis turns logarithmic:
// past two, a linear axis presses everything after the first steep fall flat along the bottom.
const logDecades = 2

// isLoss says a series is a loss (train loss, val_loss, ...), the one kind drawn on a log axis
// when it spans decades; an accuracy or a rate stays linear whatever its range.
func isLoss(name string) bool { return strings.HasSuffix(strings.ToLower(name), "loss") }

// spansDecades says every value is positive and the largest is more than logDecades powers of
// ten above the smallest (a log axis cannot show zero or a negative value).
func spansDecades(pts []Point) bool {
	lo, hi := yRange(pts)
	return lo > 0 && !math.IsInf(hi, 0) && math.Log10(hi)-math.Log10(lo) > logDecades
}

// logNote is the index's word on a log axis.
func logNote(pts []Point) string {
	lo, hi := yRange(pts)
	return fmt.Sprintf("; the y axis is logarithmic (the values span %.1f decades)", math.Log10(hi)-math.Log10(lo))
}

// setLogY puts p's y axis on a log scale over pts' range, widened by frac of its decades at each
// end, with logTicks.
func setLogY(p *gplot.Plot, pts []Point, frac float64) {
	lo, hi := yRange(pts)
	pad := math.Pow(hi/lo, frac)
	p.Y.Scale = gplot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
	p.Y.Min, p.Y.Max = lo/pad, hi*pad
	p.Y.Label.Text += " (log scale)"
}

// logTicks marks a log axis: a labelled tick at powers of ten (every k-th one when the range
// spans more than ten decades, so that at most about ten are labelled), and unlabelled ones at
// 2..9 times each power when it spans six or fewer. Bounded like ticks: at most a few hundred.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []gplot.Tick {
	if !(lo > 0) || math.IsInf(hi, 0) || hi < lo {
		return nil
	}
	first, last := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	every := math.Max(1, math.Ceil((last-first)/10))
	minor := last-first <= 6
	var out []gplot.Tick
	for e := first; e <= last; e++ {
		base := math.Pow(10, e)
		if math.Mod(e-first, every) == 0 && base >= lo && base <= hi {
			out = append(out, gplot.Tick{Value: base, Label: strconv.FormatFloat(base, 'g', 6, 64)})
		}
		for m := 2.0; minor && m <= 9; m++ {
			if v := m * base; v >= lo && v <= hi {
				out = append(out, gplot.Tick{Value: v})
			}
		}
	}
	return out
}

func xys(pts []Point) plotter.XYs {
	out := make(plotter.XYs, len(pts))
	for i, pt := range pts {
		out[i].X, out[i].Y = pt.X, pt.Y
	}
	return out
}

func yRange(pts []Point) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, pt := range pts {
		lo, hi = min(lo, pt.Y), max(hi, pt.Y)
	}
	return lo, hi
}

// vlines draws vertical lines across the data area at xs, leaving the axes' ranges alone.
type vlines struct {
	xs    []float64
	style draw.LineStyle
}

func (v *vlines) Plot(c draw.Canvas, p *gplot.Plot) {
	trX, _ := p.Transforms(&c)
	for _, x := range v.xs {
		cx := trX(x)
		c.StrokeLine2(v.style, cx, c.Min.Y, cx, c.Max.Y)
	}
}

// ticks is the tick marker of every axis: four to ten labelled ticks at round values (1, 2 or 5
// times a power of ten apart), whole numbers only when integer is set (the epoch axis). It is
// ours rather than gonum's default so that no range, however extreme, makes it loop for long:
// it makes at most a few dozen ticks.
type ticks struct{ integer bool }

func (t ticks) Ticks(lo, hi float64) []gplot.Tick {
	if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) || hi < lo {
		return nil
	}
	half := hi/2 - lo/2 // half the span; it cannot overflow
	if half == 0 {
		return []gplot.Tick{{Value: lo, Label: num(lo)}}
	}
	raw := half * 0.25 // the span over eight
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if raw <= m*mag*(1+1e-9) {
			step = m * mag
			break
		}
	}
	if t.integer {
		step = math.Max(math.Round(step), 1)
	}
	if math.IsInf(step, 0) || step == 0 {
		step = raw
	}
	first := math.Ceil(lo / step)
	var out []gplot.Tick
	for i := 0; i <= 20; i++ {
		v := (first + float64(i)) * step
		if v > hi || math.IsInf(v, 0) {
			break
		}
		if math.Abs(v) < step*1e-9 {
			v = 0 // not 1e-17 from rounding
		}
		if n := len(out); n > 0 && out[n-1].Value == v {
			continue // the step is below the values' precision
		}
		out = append(out, gplot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 6, 64)})
	}
	return out
}

// render draws p on a white width x height image.
func render(p *gplot.Plot, width, height int) (img image.Image, err error) {
	defer func() {
		if r := recover(); r != nil { // gonum/plot panics on what it cannot lay out
			err = fmt.Errorf("drawing failed: %v", r)
		}
	}()
	c := vgimg.NewWith(vgimg.UseImage(image.NewRGBA(image.Rect(0, 0, width, height))))
	m := vg.Points(10) // a margin around the figure
	p.Draw(draw.Crop(draw.New(c), m, -m, m, -m))
	return c.Image(), nil
}

// writeAtomic writes path durably (tensorfile.WriteStream): a reader never sees a half-drawn
// image or index under its final name.
func writeAtomic(path string, write func(io.Writer) error) error {
	err := tensorfile.WriteStream(path, 0o644, func(f io.Writer) error {
		bw := bufio.NewWriter(f)
		if err := write(bw); err != nil {
			return err
		}
		return bw.Flush()
	})
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}

// fileNames hands out distinct, safe file names.
type fileNames map[string]bool

func newFileNames() fileNames { return fileNames{IndexFile: true} }

// take returns prefix+name (prefix left out when name has it already) made safe, with .png, and
// a suffix when that name is taken.
func (f fileNames) take(prefix, name string) string {
	var b strings.Builder
	for _, r := range strings.TrimPrefix(name, prefix) {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-' || r == '.') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
		if b.Len() >= 80 {
			break
		}
	}
	base := prefix + b.String()
	if base == "" || base[0] == '.' {
		base = "_" + base
	}
	file := base + ".png"
	for i := 2; f[file]; i++ {
		file = fmt.Sprintf("%s_%d.png", base, i)
	}
	f[file] = true
	return file
}

// label is an untrusted name fit for a figure's text: printable, at most 60 characters.
func label(name string) string {
	var b strings.Builder
	n := 0
	for _, r := range name {
		if n == 60 {
			b.WriteString("...")
			break
		}
		if !unicode.IsPrint(r) {
			r = '?'
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// code is an untrusted name as a Markdown code span.
func code(name string) string {
	return "`" + strings.ReplaceAll(label(name), "`", "'") + "`"
}

// mdText is untrusted text as plain Markdown: one line, its markup characters escaped.
func mdText(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case !unicode.IsPrint(r):
			b.WriteByte(' ')
		case strings.ContainsRune("\\`*_[]()<>#|!&", r):
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

func sortedNames(m map[string][]Point) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// indexText is IndexFile's Markdown: the run in a line, each figure with what it shows and its
// values, then the warnings.
func indexText(run *Run, figs []figure, skipped []string) string {
	var b strings.Builder
	if run.Source != "" {
		fmt.Fprintf(&b, "# Plots of %s\n\n", code(run.Source))
	} else {
		b.WriteString("# Plots of a training run\n\n")
	}
	status := "no finish line"
	if run.Status != "" {
		status = "finished " + code(run.Status)
	}
	steps := "no train lines"
	if loss := run.Train["loss"]; len(loss) > 0 {
		steps = fmt.Sprintf("%d train steps logged (%s to %s)", len(loss), num(loss[0].X), num(loss[len(loss)-1].X))
	}
	epochs := fmt.Sprintf("%d epochs", len(run.EpochEnds))
	if run.ValEvery > 0 {
		epochs += fmt.Sprintf(", validated every %d steps", run.ValEvery)
	}
	fmt.Fprintf(&b, "%d lines; %s; %s; %s.\n\n", run.Lines, steps, epochs, status)
	if len(figs) == 0 {
		b.WriteString("Nothing to plot.\n")
	}
	for _, f := range figs {
		fmt.Fprintf(&b, "- [%s](%s): %s. Values: %s.\n", f.file, f.file, f.about, f.values)
	}
	if warnings := append(slices.Clone(run.Warnings), skipped...); len(warnings) > 0 {
		b.WriteString("\n## Warnings\n\n")
		for _, w := range warnings {
			fmt.Fprintf(&b, "- %s\n", mdText(w))
		}
	}
	return b.String()
}
