package board

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/nitro-go/nitro/sweep"
)

// JournalFile is the file that makes a folder a sweep dir: the sweep's Optuna journal. Its
// trials' run dirs (the trial attribute run_dir, under the sweep dir) are followed as runs.
const JournalFile = sweep.JournalFile

// Bounds on what sweeps may make the board keep or draw, whatever their journals hold.
const (
	maxSweeps       = 10       // sweep dirs shown; the page names those past it
	maxJournalBytes = 64 << 20 // a bigger journal is not loaded (sweep.Load reads it whole)
	maxTrialRows    = 300      // rows of a sweep's trials table, the best ranked
	maxTrialCurves  = 100      // curves on a sweep's chart, the best ranked
	maxCategories   = 12       // a choice's categories named under a scatter; past it, every n-th
	maxAttrShown    = 200      // bytes of one study or trial attribute's value shown
)

// Sweep is one hyperparameter sweep as /api/runs answers it (its "sweeps", beside the runs):
// the study's record, its trials ranked best first.
type Sweep struct {
	Dir      string         `json:"dir"`
	Study    string         `json:"study"`  // the study's name
	Metric   string         `json:"metric"` // what the trials are judged by
	Maximize bool           `json:"maximize"`
	Planned  int            `json:"planned"` // the study attribute "trials"; 0 when absent
	Counts   map[string]int `json:"counts"`  // trials by state (RUNNING, COMPLETE, PRUNED, FAIL)
	Best     int            `json:"best"`    // the study's best trial's number; -1 before one
	Params   []string       `json:"params"`  // the searched fields, in the space's order
	Attrs    []string       `json:"attrs"`   // the study's attributes as "key=value", sorted
	Error    string         `json:"error"`   // why the journal could not be read ("" when it could)
	Trials   []SweepTrial   `json:"trials"`  // ranked: sweep.Ranked

	space sweep.Space // for the scatters' axes
}

// SweepTrial is one trial of a Sweep.
type SweepTrial struct {
	Number int               `json:"number"`
	State  string            `json:"state"`
	Value  *float64          `json:"value"`     // its value, or for a trial without one its newest report; nil if none (or not finite)
	Final  bool              `json:"final"`     // Value is the trial's own (a complete trial's, a pruned one's last), not a report so far
	Step   int               `json:"last_step"` // the newest step it reported; -1 before one
	Params map[string]string `json:"params"`    // each field's value as --set takes it
	Run    string            `json:"run"`       // the board's name for its run dir ("" when not followed)
	Dir    string            `json:"dir"`       // its run dir ("" when the record names none)
	Curve  []Point           `json:"curve"`     // its reports: X the step, Y the value
	Notes  []string          `json:"notes"`     // its error, a run_dir not followed, a field that does not read back
	Attrs  []string          `json:"attrs"`     // its attributes as "key=value", sorted

	color string
	raw   map[string]float64 // Params in Optuna's form, for the scatters
}

// sweepDir is one sweep dir the board follows: its journal, loaded again when it changes.
type sweepDir struct {
	dir    string
	study  *sweep.Study // the newest record read; kept when a later read fails
	err    error        // the newest read's error
	loaded bool         // size and mod are those of the file last read
	size   int64
	mod    time.Time
}

func isSweep(dir string) bool {
	_, err := os.Lstat(filepath.Join(dir, JournalFile))
	return err == nil
}

// refresh reads the journal again when its size or time changed since the last read.
func (s *sweepDir) refresh() {
	path := filepath.Join(s.dir, JournalFile)
	fi, err := os.Stat(path)
	if err != nil {
		s.err, s.loaded = err, false
		return
	}
	if s.loaded && fi.Size() == s.size && fi.ModTime().Equal(s.mod) {
		return
	}
	s.loaded, s.size, s.mod = true, fi.Size(), fi.ModTime()
	switch {
	case !fi.Mode().IsRegular():
		// sweep.Load would open it as it is: a FIFO without a writer would hang every request.
		s.err = fmt.Errorf("%s is not a regular file", path)
	case fi.Size() > maxJournalBytes:
		s.err = fmt.Errorf("%s holds %d bytes, more than the board reads (%d)", path, fi.Size(), maxJournalBytes)
	default:
		st, err := sweep.Load(s.dir)
		if err != nil {
			s.err = err
			return
		}
		s.study, s.err = st, nil
	}
}

// trialDir is where trial t's run dir is, and "" with why when the record names none the board
// may follow: run_dir is the sweep's word, untrusted, so it must stay inside the sweep dir.
func (s *sweepDir) trialDir(t sweep.Trial) (dir, why string) {
	rel, ok := t.Attrs["run_dir"].(string)
	if !ok || rel == "" {
		return "", ""
	}
	if !filepath.IsLocal(rel) {
		return "", fmt.Sprintf("run_dir %q is not inside the sweep dir: not followed", rel)
	}
	return filepath.Join(s.dir, rel), ""
}

// trialRef says which sweep's trial a run dir is, for its name.
type trialRef struct {
	sweep  string
	number int
}

// followSweep is the sweep in dir, followed from now on (unless past maxSweeps: then nil and
// over is set), read again if its journal changed; its trials' run dirs are remembered by dir.
func (b *Board) followSweep(dir string) (s *sweepDir, over bool) {
	for _, s := range b.sweeps {
		if s.dir == dir {
			s.refresh()
			b.noteTrials(s)
			return s, false
		}
	}
	if len(b.sweeps) >= maxSweeps {
		return nil, true
	}
	s = &sweepDir{dir: dir}
	b.sweeps = append(b.sweeps, s)
	s.refresh()
	b.noteTrials(s)
	return s, false
}

// noteTrials records which run dirs are s's trials, so they are named by number.
func (b *Board) noteTrials(s *sweepDir) {
	if s.study == nil {
		return
	}
	for _, t := range s.study.Trials {
		if dir, _ := s.trialDir(t); dir != "" {
			ref := trialRef{s.dir, t.Number}
			if b.trialOf[dir] != ref {
				b.trialOf[dir], b.relabel = ref, true
			}
		}
	}
}

// trialDirs are s's trials' run dirs, by trial number.
func (s *sweepDir) trialDirs() []string {
	if s.study == nil {
		return nil
	}
	var out []string
	for _, t := range s.study.Trials {
		if dir, _ := s.trialDir(t); dir != "" {
			out = append(out, dir)
		}
	}
	return out
}

// nameRuns names the runs: by folder (runNames), a sweep's trial by its number ("trial 7"), or
// where two sweeps' trials share a number, by its sweep dir too.
func (b *Board) nameRuns() {
	dirs := make([]string, len(b.tails))
	for i, t := range b.tails {
		dirs[i] = t.dir
	}
	names := runNames(dirs)
	count := map[string]int{}
	for i, t := range b.tails {
		if ref, ok := b.trialOf[filepath.Clean(t.dir)]; ok {
			names[i] = fmt.Sprintf("trial %d", ref.number)
		}
		count[names[i]]++
	}
	for i, t := range b.tails {
		if ref, ok := b.trialOf[filepath.Clean(t.dir)]; ok && count[names[i]] > 1 {
			names[i] = fmt.Sprintf("%s trial %d", ref.sweep, ref.number)
		}
		t.name = names[i]
	}
}

// sweepViews are the sweeps' facts as the page draws them, each trial colored as its run is in
// runs (the trials not followed, by their number past the runs' colors).
func (b *Board) sweepViews(runs []Run) []Sweep {
	index := map[string]int{}
	for i, r := range runs {
		index[filepath.Clean(r.Dir)] = i
	}
	out := make([]Sweep, 0, len(b.sweeps))
	for _, s := range b.sweeps {
		v := Sweep{Dir: s.dir, Best: -1, Counts: map[string]int{}}
		if s.err != nil {
			v.Error = s.err.Error()
		}
		if st := s.study; st != nil {
			v.Study, v.Metric, v.Maximize, v.space = st.Name, st.Metric, st.Maximize, st.Space
			v.Planned, _ = whole(st.Attrs["trials"])
			v.Attrs = attrList(st.Attrs)
			for _, p := range st.Space {
				v.Params = append(v.Params, p.Name)
			}
			if best, ok := st.Best(); ok {
				v.Best = best.Number
			}
			for _, t := range sweep.Ranked(st) { // best first, as nitro sweep ls lists them
				v.Counts[string(t.State)]++
				tv := trialView(s, t, b.cfg.MaxPoints)
				if i, ok := index[tv.Dir]; ok && tv.Dir != "" {
					tv.Run, tv.color = runs[i].Name, color(i)
				} else {
					tv.color = color(len(runs) + t.Number)
				}
				v.Trials = append(v.Trials, tv)
			}
		}
		out = append(out, v)
	}
	return out
}

// trialView is t as the page shows it: its value, its newest report, its fields as text.
func trialView(s *sweepDir, t sweep.Trial, maxPoints int) SweepTrial {
	tv := SweepTrial{Number: t.Number, State: string(t.State), Step: -1, Params: map[string]string{}, Attrs: attrList(t.Attrs), raw: t.Params}
	dir, why := s.trialDir(t)
	tv.Dir = dir
	if why != "" {
		tv.Notes = append(tv.Notes, why)
	}
	if e, ok := t.Attrs["error"]; ok {
		tv.Notes = append(tv.Notes, clip(fmt.Sprint(e)))
	}
	steps := make([]int, 0, len(t.Intermediate))
	for step := range t.Intermediate {
		steps = append(steps, step)
	}
	sort.Ints(steps)
	curve := newSeries(maxPoints)
	for _, step := range steps {
		if y := t.Intermediate[step]; finite(y) {
			curve.add(Point{X: float64(step), Y: y, Step: step})
		}
	}
	tv.Curve = curve.points()
	if len(steps) > 0 {
		tv.Step = steps[len(steps)-1]
	}
	switch {
	case t.HasValue && finite(t.Value):
		tv.Value, tv.Final = &t.Value, true
	case t.HasValue:
		tv.Notes = append(tv.Notes, fmt.Sprintf("its value %v is not a number the board can rank", t.Value))
	case len(tv.Curve) > 0:
		y := tv.Curve[len(tv.Curve)-1].Y
		tv.Value = &y
	}
	for _, p := range s.study.Space {
		x, ok := t.Params[p.Name]
		if !ok {
			continue
		}
		// Sets spells the value as --set takes it (a choice's text, not its index); one field at a
		// time, so a field that does not read back costs only its own cell.
		sets, err := sweep.Space{p}.Sets(map[string]float64{p.Name: x})
		if err != nil || len(sets) != 1 {
			tv.Params[p.Name] = fmt.Sprintf("%g", x)
			if err != nil {
				tv.Notes = append(tv.Notes, clip(err.Error()))
			}
			continue
		}
		tv.Params[p.Name] = strings.TrimPrefix(sets[0], p.Name+"=")
	}
	return tv
}

// whole is v as a count, if it is a whole number (JSON gives float64).
func whole(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int64:
		return int(n), true
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < 1e9 {
			return int(n), true
		}
	}
	return 0, false
}

// attrList is attrs as sorted "key=value" strings, each value clipped.
func attrList(attrs map[string]any) []string {
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, clip(fmt.Sprintf("%s=%v", k, attrs[k])))
	}
	return out
}

func clip(s string) string {
	if len(s) <= maxAttrShown {
		return s
	}
	return strings.ToValidUTF8(s[:maxAttrShown], "") + "…"
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// value3 is a metric's value as the page prints it.
func value3(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%.4g", *v)
}

// headline is the sweep's one-line summary: trials planned (or so far), counts by state, the best.
func (v Sweep) headline() string {
	trials := len(v.Trials)
	var sb strings.Builder
	fmt.Fprintf(&sb, "sweep %s: ", v.Dir)
	if v.Planned > 0 {
		fmt.Fprintf(&sb, "%d trials planned", v.Planned)
	} else {
		fmt.Fprintf(&sb, "%d trials so far", trials)
	}
	fmt.Fprintf(&sb, ", %d complete, %d running, %d pruned, %d failed", v.Counts[string(sweep.Complete)], v.Counts[string(sweep.Running)],
		v.Counts[string(sweep.Pruned)], v.Counts[string(sweep.Fail)])
	for _, t := range v.Trials {
		if t.Number == v.Best {
			fmt.Fprintf(&sb, ", best %s %s (trial %d)", v.Metric, value3(t.Value), t.Number)
			return sb.String()
		}
	}
	if v.Metric != "" {
		fmt.Fprintf(&sb, ", no best %s yet", v.Metric)
	}
	return sb.String()
}

// writeSweeps draws each sweep: its summary, its trials ranked, their reports overlaid, and one
// scatter per searched field against the metric. A journal that cannot be read is said, with
// what was read before, if anything.
func writeSweeps(sb *strings.Builder, sweeps []Sweep) {
	for i, v := range sweeps {
		fmt.Fprintf(sb, `<section class="sweep" id="sweep-%d" data-sweep="%s"><h2 class="sweep-head">%s</h2>`, i, esc(v.Dir), esc(v.headline()))
		if v.Error != "" {
			what := "the journal cannot be read"
			if len(v.Trials) > 0 {
				what += "; shown as last read"
			}
			fmt.Fprintf(sb, `<div class="note board sweep-error">%s: %s</div>`, what, esc(v.Error))
		}
		if v.Metric == "" && len(v.Trials) == 0 {
			sb.WriteString(`</section>`)
			continue
		}
		dir := "minimizes"
		if v.Maximize {
			dir = "maximizes"
		}
		fmt.Fprintf(sb, `<p class="sweep-study">study %s %s %s`, esc(quoted(v.Study)), dir, esc(v.Metric))
		if len(v.Attrs) > 0 {
			fmt.Fprintf(sb, `; %s`, esc(strings.Join(v.Attrs, ", ")))
		}
		sb.WriteString(`</p>`)
		writeTrials(sb, v)
		sb.WriteString(`<div class="charts">`)
		writeSweepCurves(sb, v)
		for _, p := range v.space {
			writeScatter(sb, v, p)
		}
		sb.WriteString(`</div></section>`)
	}
}

func quoted(s string) string { return fmt.Sprintf("%q", s) }

// writeTrials is the trials table, best ranked first, the study's best marked.
func writeTrials(sb *strings.Builder, v Sweep) {
	fmt.Fprintf(sb, `<table class="trials"><tr><th>rank</th><th>trial</th><th>state</th><th title="%s">%s</th><th>last step</th>`,
		esc("the trial's value; for one without a value yet, its newest report (in italics)"), esc(v.Metric))
	for _, p := range v.space {
		fmt.Fprintf(sb, `<th title="%s">%s</th>`, esc(p.String()), esc(p.Name))
	}
	sb.WriteString(`<th>run</th><th>notes</th></tr>`)
	for i, t := range v.Trials {
		if i == maxTrialRows {
			fmt.Fprintf(sb, `<tr><td colspan="%d" class="note">%d more trials, ranked lower, not listed</td></tr>`, 7+len(v.space), len(v.Trials)-i)
			break
		}
		cls, mark := "trial", ""
		if t.Number == v.Best {
			cls, mark = "trial best", ` <span class="best-mark" title="the study's best trial">★ best</span>`
		}
		fmt.Fprintf(sb, `<tr class="%s" data-trial="%d" data-state="%s" data-rank="%d"><td>%d</td>`, cls, t.Number, esc(t.State), i+1, i+1)
		fmt.Fprintf(sb, `<td title="%s"><span class="swatch" style="background:%s"></span>%d%s</td>`, esc(strings.Join(t.Attrs, "\n")), t.color, t.Number, mark)
		val := value3(t.Value)
		if t.Value != nil && !t.Final {
			val = "<i>" + val + "</i>"
		}
		fmt.Fprintf(sb, `<td class="state %s">%s</td><td class="value">%s</td><td>%s</td>`, strings.ToLower(esc(t.State)), esc(t.State), val, stepText(t.Step))
		for _, p := range v.space {
			text := t.Params[p.Name]
			// A sampled float's exact text is long; four digits tell trials apart, and the
			// exact value (what --set would take) is the cell's tooltip.
			if x, ok := t.raw[p.Name]; ok && (p.Kind == sweep.Uniform || p.Kind == sweep.LogUniform) {
				if short := fmt.Sprintf("%.4g", x); short != text && text != "" {
					fmt.Fprintf(sb, `<td title="%s">%s</td>`, esc(text), esc(short))
					continue
				}
			}
			fmt.Fprintf(sb, `<td>%s</td>`, orDash(text))
		}
		fmt.Fprintf(sb, `<td>%s</td><td>`, orDash(t.Run))
		for _, n := range t.Notes {
			fmt.Fprintf(sb, `<div class="note">%s</div>`, esc(n))
		}
		sb.WriteString(`</td></tr>`)
	}
	sb.WriteString(`</table>`)
}

func stepText(step int) string {
	if step < 0 {
		return "—"
	}
	return fmt.Sprint(step)
}

// dash patterns of a sweep's curves by state: a pruned trial's dashed (and ending in a cross), a
// failed one's dotted; running and complete ones solid.
var stateDash = map[string]string{string(sweep.Pruned): "6 3", string(sweep.Fail): "2 2"}

// writeSweepCurves overlays every trial's reports (the metric by step) on one chart.
func writeSweepCurves(sb *strings.Builder, v Sweep) {
	var lines []line
	for i, t := range v.Trials {
		if i == maxTrialCurves {
			break
		}
		name := t.Run
		if name == "" {
			name = fmt.Sprintf("trial %d", t.Number)
		}
		l := line{run: name, color: t.color, dash: stateDash[t.State], state: t.State, pts: t.Curve}
		if t.Number == v.Best {
			l.cls = "best"
		}
		lines = append(lines, l)
	}
	caption := "solid: complete or running; dashed, ending in ×: pruned; dotted: failed; thick: the best"
	if len(v.Trials) > maxTrialCurves {
		caption += fmt.Sprintf("; the %d best ranked of %d trials", maxTrialCurves, len(v.Trials))
	}
	c := chart{key: v.Metric, title: v.Metric + " as reported, every trial", members: []string{v.Metric},
		xlabel: "step reported", caption: esc(caption)}
	writeChart(sb, "sweep", c, view{}, lines)
}

// writeScatter draws p's values against the metric: one point per complete trial (filled) and
// per pruned trial with a value (hollow: its last report, not a finished value); the best ringed.
// A loguniform field's axis is logarithmic, a choice's evenly spaced categories.
func writeScatter(sb *strings.Builder, v Sweep, p sweep.Param) {
	type pt struct {
		x, y float64
		t    SweepTrial
	}
	var pts []pt
	for _, t := range v.Trials {
		st := sweep.State(t.State)
		if (st != sweep.Complete && st != sweep.Pruned) || t.Value == nil || !t.Final {
			continue
		}
		x, ok := v.trialParam(t, p)
		if !ok {
			continue
		}
		pts = append(pts, pt{x, *t.Value, t})
	}
	fmt.Fprintf(sb, `<figure><svg class="chart scatter" data-context="sweep-scatter" data-param="%s" data-points="%d" viewBox="0 0 %g %g" width="%g" height="%g" xmlns="http://www.w3.org/2000/svg">`,
		esc(p.Name), len(pts), chartW, chartH, chartW, chartH)
	fmt.Fprintf(sb, `<text class="title" x="%g" y="16">%s</text>`, padL, esc(v.Metric+" against "+p.Name))
	if len(pts) == 0 {
		fmt.Fprintf(sb, `<text x="%g" y="%g">no complete or pruned trial yet</text></svg></figure>`, padL+10, padT+plotH/2)
		return
	}
	y0, y1 := math.Inf(1), math.Inf(-1)
	x0, x1 := math.Inf(1), math.Inf(-1)
	for _, q := range pts {
		y0, y1 = math.Min(y0, q.y), math.Max(y1, q.y)
		x0, x1 = math.Min(x0, q.x), math.Max(x1, q.x)
	}
	label := p.Name
	var a area
	var xt []tick
	if p.Kind == sweep.Choice {
		// Categories sit in the middles of equal slots: index i at i+0.5 of len(Choices).
		n := max(len(p.Choices), int(x1)+1)
		a = fit(0, float64(n), y0, y1, false)
		every := (n + maxCategories - 1) / maxCategories
		for i := 0; i < n; i += every {
			text := fmt.Sprint(i)
			if i < len(p.Choices) {
				text = p.Choices[i]
			}
			xt = append(xt, tick{float64(i) + 0.5, clipTick(text)})
		}
		label += " (choices)"
	} else {
		// The searched range, so where the trials fell in it shows; widened to any value outside.
		if p.Low < p.High && (p.Kind != sweep.LogUniform || p.Low > 0) {
			x0, x1 = math.Min(x0, p.Low), math.Max(x1, p.High)
		}
		a = fit(x0, x1, y0, y1, p.Kind == sweep.LogUniform)
		xt = a.padded(true).numberTicks()
		if a.logX {
			label += " (log scale)"
		}
	}
	if a.logY {
		label += "; y on a log scale"
	}
	a = a.padded(p.Kind != sweep.Choice)
	a.writeFrame(sb, xt, label)
	for _, q := range pts {
		cx := a.tx(q.x)
		if p.Kind == sweep.Choice {
			cx = a.tx(q.x + 0.5)
		}
		cy := a.ty(q.y)
		cls, fill := "pt complete", q.t.color
		if q.t.State == string(sweep.Pruned) {
			cls, fill = "pt pruned", "none"
		}
		if q.t.Number == v.Best {
			cls += " best"
			fmt.Fprintf(sb, `<circle class="best-ring" cx="%.1f" cy="%.1f" r="7.5" stroke="%s"/>`, cx, cy, q.t.color)
		}
		fmt.Fprintf(sb, `<circle class="%s" data-trial="%d" data-x="%g" data-y="%g" cx="%.1f" cy="%.1f" r="4" fill="%s" stroke="%s"><title>%s</title></circle>`,
			cls, q.t.Number, q.x, q.y, cx, cy, fill, q.t.color,
			esc(fmt.Sprintf("trial %d (%s): %s=%s, %s %.4g", q.t.Number, q.t.State, p.Name, q.t.Params[p.Name], v.Metric, q.y)))
	}
	sb.WriteString(`</svg>`)
	fmt.Fprintf(sb, `<figcaption class="legend">filled: complete; hollow: pruned (its last report); ringed: the best</figcaption></figure>`)
}

// trialParam is t's value of p in Optuna's form (a choice's index), from the record.
func (v Sweep) trialParam(t SweepTrial, p sweep.Param) (float64, bool) {
	x, ok := t.raw[p.Name]
	if !ok || !finite(x) || (p.Kind == sweep.Choice && (x < 0 || x != math.Trunc(x) || x > 1e6)) {
		return 0, false
	}
	return x, !(p.Kind == sweep.LogUniform && x <= 0)
}

func clipTick(s string) string {
	if r := []rune(s); len(r) > 10 {
		return string(r[:9]) + "…"
	}
	return s
}

// padded is a widened by a twentieth of its span each way (in x too when padX), so a point on
// the range's end is drawn whole inside the frame, not on it.
func (a area) padded(padX bool) area {
	widen := func(lo, hi float64, log bool) (float64, float64) {
		if log {
			d := math.Pow(hi/lo, 0.05)
			return lo / d, hi * d
		}
		d := (hi - lo) * 0.05
		return lo - d, hi + d
	}
	if padX {
		a.x0, a.x1 = widen(a.x0, a.x1, a.logX)
	}
	a.y0, a.y1 = widen(a.y0, a.y1, a.logY)
	return a
}
