package board

import (
	"fmt"
	"math"
	"net/url"
	"regexp"
	"sort"
	"strconv"
)

// view is what one request asks the page to draw; the page's script keeps it in the page's
// address (?x=epoch&smooth=0.6&hide=run), so it outlives refreshes and reloads.
type view struct {
	x      string          // the x axis: "auto", "step", "epoch" or "time"
	smooth float64         // the exponential moving average's weight, 0 (raw) to maxSmooth
	hidden map[string]bool // run names not drawn
}

const maxSmooth = 0.99

// axes are the x axes offered: the key the query names, the control's word, the charts' label.
var axes = []struct{ key, word, label string }{
	{"auto", "as logged", ""}, // train per step, validation and data per epoch or step: see along
	{"step", "step", "step"},
	{"epoch", "epoch", "epoch"},
	{"time", "train time", "train time (s): the sum of step_seconds"},
}

// parseView reads the query; an unknown value is refused naming the parameter and what it takes.
func parseView(q url.Values) (view, error) {
	v := view{x: "auto", hidden: map[string]bool{}}
	if x := q.Get("x"); x != "" {
		v.x = ""
		for _, a := range axes {
			if a.key == x {
				v.x = x
			}
		}
		if v.x == "" {
			return v, fmt.Errorf("board: x=%q: the x axis is auto, step, epoch or time", x)
		}
	}
	if s := q.Get("smooth"); s != "" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || !(f >= 0 && f <= maxSmooth) {
			return v, fmt.Errorf("board: smooth=%q: the smoothing weight is a number from 0 (none) to %g", s, maxSmooth)
		}
		v.smooth = f
	}
	for _, name := range q["hide"] {
		v.hidden[name] = true
	}
	return v, nil
}

// along is the view a context's charts are drawn in: "auto" made the one axis that every run
// shown fits, the step for train; for validation and data the epoch, or the step once a shown
// run is step-based (its validations sit inside epochs, and an epoch-based run's sit at the step
// its epoch ended, so both are right on the step axis and neither is moved off it).
func (v view) along(train bool, runs []Run) view {
	if v.x != "auto" {
		return v
	}
	v.x = "epoch"
	if train {
		v.x = "step"
	}
	for _, r := range runs {
		if r.ValEvery > 0 && !v.hidden[r.Name] {
			v.x = "step"
		}
	}
	return v
}

// xOf places p on the view's x axis; ok is false when the run cannot say (no step_seconds for
// the time axis). On the epoch axis a train point sits at its step over the run's steps per
// epoch, once an epoch has ended to tell them, else at its epoch; so does a step-based run's
// validation or data point, which is left out until an epoch has ended (at its epoch it would
// sit on the epoch's other validations).
func (v view) xOf(r Run, p Point, train bool) (x float64, ok bool) {
	switch v.x {
	case "epoch":
		if (train || r.ValEvery > 0) && r.StepsPerEpoch > 0 {
			return float64(p.Step) / r.StepsPerEpoch, true
		}
		return float64(p.Epoch), train || r.ValEvery == 0
	case "time":
		return p.Secs, r.Timed
	case "auto":
		return p.X, true
	}
	return float64(p.Step), true
}

// label is the x axis's name under a chart: as logged, the step for train and the epoch else.
func (v view) label(train bool) string {
	switch {
	case v.x == "auto" && train:
		return "step"
	case v.x == "auto":
		return "epoch"
	}
	for _, a := range axes {
		if a.key == v.x {
			return a.label
		}
	}
	return v.x
}

// onAxis is pts placed on the view's x axis, smoothed as it asks.
func (v view) onAxis(r Run, pts []Point, train bool) []Point {
	out := make([]Point, 0, len(pts))
	for _, p := range pts {
		if x, ok := v.xOf(r, p, train); ok {
			p.X = x
			out = append(out, p)
		}
	}
	return out
}

// ema is pts smoothed by an exponential moving average of weight w, debiased (divided by
// 1-w^n) so the curve's start is not pulled toward zero: TensorBoard's smoothing. It runs over
// the points kept, so on a decimated series it smooths what is drawn.
func ema(pts []Point, w float64) []Point {
	out := make([]Point, len(pts))
	acc := 0.0
	for i, p := range pts {
		acc = acc*w + (1-w)*p.Y
		p.Y = acc / (1 - math.Pow(w, float64(i+1)))
		out[i] = p
	}
	return out
}

// chart is one chart of a context: a lone metric, or a family of metrics whose names differ only
// in a numeric suffix (val_accuracy_0 … val_accuracy_9, a confusion matrix's per-class values).
type chart struct {
	key     string   // data-metric: the metric's name, or the family's base and "_*"
	title   string   // what the chart's title says
	members []string // the metrics drawn, a family's in suffix order
	xlabel  string   // the x axis's name when not the view's (a sweep's reported steps)
	caption string   // a lone metric's note under the chart (a sweep's line styles)
}

var suffixed = regexp.MustCompile(`^(.+)_([0-9]+)$`)

// charts groups names (in seriesNames order) into charts: two or more names sharing a base
// before a numeric suffix are one family chart, placed where its first member was.
func charts(names []string) []chart {
	byBase := map[string][]string{}
	for _, n := range names {
		if m := suffixed.FindStringSubmatch(n); m != nil {
			byBase[m[1]] = append(byBase[m[1]], n)
		}
	}
	var out []chart
	done := map[string]bool{}
	for _, n := range names {
		m := suffixed.FindStringSubmatch(n)
		if m == nil || len(byBase[m[1]]) < 2 {
			out = append(out, chart{key: n, title: n, members: []string{n}})
			continue
		}
		if done[m[1]] {
			continue
		}
		done[m[1]] = true
		fam := byBase[m[1]]
		sort.Slice(fam, func(i, j int) bool { return suffix(fam[i]) < suffix(fam[j]) })
		out = append(out, chart{key: m[1] + "_*", title: fmt.Sprintf("%s_* (%d)", m[1], len(fam)), members: fam})
	}
	return out
}

func suffix(name string) int {
	n, _ := strconv.Atoi(suffixed.FindStringSubmatch(name)[2])
	return n
}
