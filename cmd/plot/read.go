package plot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"github.com/nitro-go/nitro/tensorfile"
)

// MaxLineBytes is the longest line Read accepts (without its newline); a longer one is an error.
const MaxLineBytes = 1 << 20

// maxSeries bounds the distinct metric names kept per context, and so the number of figures an
// untrusted file can make Write draw; further names are ignored with a warning.
const maxSeries = 100

// The data-line keys that carry an epoch's timing; steps/s is derived from them, and they get
// no figure of their own.
const (
	keyStepsPerSecond = "steps_per_second" // the epoch's optimizer steps per second, as is
	keyEpochSeconds   = "epoch_seconds"    // the epoch's wall time in seconds
	keySeconds        = "seconds"          // the same, under a shorter name
)

// Data-line keys drawn with words of their own.
const (
	keyTokensPerSecond = "tokens_per_second" // training tokens per second of the period
	keyMFU             = "mfu"               // model FLOPs utilization: a fraction of the device's peak
)

// ErrMalformed is wrapped by the LineError of a line Read cannot use.
var ErrMalformed = errors.New("malformed line")

// LineError is a malformed line: where it is and what is wrong with it.
type LineError struct {
	Path string // the file ("" for Parse)
	Line int    // 1-based
	Err  error  // wraps ErrMalformed
}

func (e *LineError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("plot: line %d: %v", e.Line, e.Err)
	}
	return fmt.Sprintf("plot: %s: line %d: %v", e.Path, e.Line, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// Point is one value of a series: X is the optimizer step (train series) or the epoch (validate
// and data series, StepsPerSecond), or for a step-based run (Run.ValEvery > 0) the step of every
// series: its validations come every so many steps, several to an epoch or one across two.
type Point struct{ X, Y float64 }

// EpochEnd is the optimizer step an epoch ended at.
type EpochEnd struct{ Epoch, Step int }

// Run is what a metrics.jsonl holds, as series ready to plot. Every series is sorted by X with
// one point per X: when a step or an epoch was logged twice (a resumed run appends to the same
// file), the later line's values win.
type Run struct {
	Source string // the file read ("" for Parse)
	Lines  int    // lines read, blank and ignored ones included
	// ValEvery is the params line's val_every: the optimizer steps between validations of a
	// step-based run, whose Validate, Data and StepsPerSecond are then keyed by step; 0 for a run
	// validated at epoch ends (the params line has no val_every, or 0).
	ValEvery int
	Train    map[string][]Point // "loss" and each train metric, per optimizer step
	Validate map[string][]Point // the validation metrics ("val_loss", "val_accuracy", ...), per epoch or step
	Data     map[string][]Point // the data-path facts ("data_wait_frac", "mfu", ...), per epoch or step
	// EpochEnds is the step each epoch ended at, by epoch: the step of its validate or data line
	// (the logger's step at the epoch's end), else the epoch's last train step. A step-based run's
	// validate and data lines come at no epoch end: its epochs end at their last train step.
	EpochEnds []EpochEnd
	// StepsPerSecond is the optimizer steps per second of each epoch (or validation period), from
	// the data lines' steps_per_second, else their epoch_seconds (or seconds) and the period's
	// number of steps; empty when the file has no timing.
	StepsPerSecond []Point
	// Confusions is each confusion line (LogConfusion), in file order.
	Confusions []Confusion
	Status     string   // the last finish line's status; "" when there is none
	Warnings   []string // what was tolerated or left out, one sentence each
	// Torn counts the lines skipped because they are the start of a JSON object cut short (a
	// crash or a failed write); FirstTorn is the first one's line number (0 when none).
	Torn, FirstTorn int
}

// Read parses the metrics.jsonl at path; see Parse. Only a regular file is read: a named pipe
// (or a device) there is an error at once, not a read that waits for a writer forever.
func Read(path string) (*Run, error) {
	f, _, err := tensorfile.OpenRegular(path)
	if err != nil {
		return nil, fmt.Errorf("plot: %w", err)
	}
	defer f.Close()
	run, err := parse(f, path)
	if err != nil {
		return nil, err
	}
	run.Source = path
	return run, nil
}

// Parse reads JSON Lines as the logjson module writes them, treating them as untrusted: a line
// longer than MaxLineBytes, a line that is not one JSON object, and a metrics line whose fields
// have the wrong types are errors (a *LineError naming the line). Unknown line types and
// contexts are ignored. A truncated line (the start of an object, as a crash mid-write or a failed
// write leaves) is skipped and counted (Run.Torn), with one warning for the file naming the count
// and the first such line.
func Parse(r io.Reader) (*Run, error) { return parse(r, "") }

func parse(r io.Reader, path string) (*Run, error) {
	p := newParser()
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	for n := 1; ; n++ {
		line, terminated, err := readLine(br, buf[:0])
		if err == io.EOF {
			break
		}
		if err != nil {
			if errors.Is(err, ErrMalformed) {
				return nil, &LineError{Path: path, Line: n, Err: err}
			}
			return nil, fmt.Errorf("plot: %sline %d: %w", pathPrefix(path), n, err)
		}
		buf = line
		p.run.Lines = n
		err = p.line(line)
		switch {
		case err == nil:
		case errors.Is(err, errTruncated):
			p.torn(n, terminated)
		default:
			return nil, &LineError{Path: path, Line: n, Err: err}
		}
	}
	p.tornWarning(path)
	return p.finish(), nil
}

// torn counts a line cut short, skipped: a crash mid-write leaves one as the last line, and a
// failed write leaves one the logger's next line starts after.
func (p *parser) torn(line int, terminated bool) {
	if p.run.Torn == 0 {
		p.run.FirstTorn = line
	}
	p.run.Torn++
	p.tornLast = !terminated
}

// tornWarning says once per file how many torn lines were skipped and where the first was, so a
// record with many is one sentence rather than one per line.
func (p *parser) tornWarning(path string) {
	if p.run.Torn == 0 {
		return
	}
	name := "input"
	if path != "" {
		name = filepath.Base(path)
	}
	lines := "lines"
	if p.run.Torn == 1 {
		lines = "line"
	}
	msg := fmt.Sprintf("%s: skipped %d malformed %s (first at line %d): cut short by a crash or a failed write", name, p.run.Torn, lines, p.run.FirstTorn)
	if p.tornLast {
		msg += "; the last line is one, so the run crashed mid-write or is still writing"
	}
	p.warnf("%s", msg)
}

// readLine appends the next line to buf and returns it without its line ending; terminated
// reports whether it ended in a newline (the last line of a crashed run does not). io.EOF means
// there is no line left.
func readLine(br *bufio.Reader, buf []byte) (line []byte, terminated bool, err error) {
	for {
		frag, err := br.ReadSlice('\n')
		buf = append(buf, frag...)
		if n := len(bytes.TrimSuffix(buf, []byte("\n"))); n > MaxLineBytes {
			return nil, false, fmt.Errorf("%w: longer than %d bytes", ErrMalformed, MaxLineBytes)
		}
		switch {
		case err == nil:
			buf = bytes.TrimSuffix(buf[:len(buf)-1], []byte("\r"))
			return buf, true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(buf) > 0:
			return buf, false, nil
		default:
			return nil, false, err
		}
	}
}

// errTruncated marks a line that is the start of a JSON object cut short.
var errTruncated = fmt.Errorf("%w: truncated", ErrMalformed)

type parser struct {
	run      *Run
	train    seriesSet // by step
	validate seriesSet // by epoch, or by step in a step-based run
	data     seriesSet // the same
	// periodic holds the validate and data lines until the end: whether they are keyed by epoch
	// or by step is known once every params line is read (a resumed run appends one).
	periodic []periodLine
	// epochStep is each epoch's step from its validate or data line; trainEnd its last train step.
	epochStep, trainEnd map[int]int
	// trainStep records the epoch of each train step seen; validateSeen and dataSeen the epochs
	// (the steps, in a step-based run).
	trainStep              map[int]int
	validateSeen, dataSeen map[int]bool
	repeats                map[string]int // context -> lines that repeated a step or an epoch
	finishes               int
	tornLast               bool // the last line read was torn (it has no newline)
}

// periodLine is a validate or data line's content.
type periodLine struct {
	validate    bool // else a data line
	epoch, step int
	values      map[string]float64
}

func newParser() *parser {
	return &parser{
		run:          &Run{},
		train:        seriesSet{context: "train", points: map[string]map[int]float64{}},
		validate:     seriesSet{context: "validate", points: map[string]map[int]float64{}},
		data:         seriesSet{context: "data", points: map[string]map[int]float64{}},
		epochStep:    map[int]int{},
		trainEnd:     map[int]int{},
		trainStep:    map[int]int{},
		validateSeen: map[int]bool{},
		dataSeen:     map[int]bool{},
		repeats:      map[string]int{},
	}
}

func (p *parser) warnf(format string, args ...any) {
	p.run.Warnings = append(p.run.Warnings, fmt.Sprintf(format, args...))
}

// line takes one line's content.
func (p *parser) line(line []byte) error {
	if len(bytes.TrimSpace(line)) == 0 {
		return nil
	}
	fields, err := decodeObject(line)
	if err != nil {
		return err
	}
	raw, ok := fields["type"]
	if !ok {
		return fmt.Errorf("%w: no \"type\" field", ErrMalformed)
	}
	var typ string
	if err := json.Unmarshal(raw, &typ); err != nil {
		return fmt.Errorf("%w: \"type\" is %s, want a string", ErrMalformed, excerpt(raw))
	}
	switch typ {
	case "metrics":
		return p.metrics(fields)
	case "finish":
		return p.finishLine(fields)
	case "confusion":
		return p.confusion(fields)
	case "params":
		return p.params(fields)
	default: // other, tags, and whatever a later logger adds
		return nil
	}
}

// decodeObject decodes one JSON object, telling a truncated one (errTruncated) from other
// malformed input.
func decodeObject(line []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	var fields map[string]json.RawMessage
	if err := dec.Decode(&fields); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) && bytes.HasPrefix(bytes.TrimSpace(line), []byte("{")) {
			return nil, errTruncated
		}
		return nil, fmt.Errorf("%w: not a JSON object: %v", ErrMalformed, err)
	}
	if fields == nil { // the line was "null"
		return nil, fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: text after the JSON object", ErrMalformed)
	}
	if err := tensorfile.CheckUniqueKeys(line); err != nil { // the map kept only the last
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return fields, nil
}

func (p *parser) metrics(fields map[string]json.RawMessage) error {
	var context string
	if err := field(fields, "context", &context); err != nil {
		return err
	}
	var epoch, step int
	if err := field(fields, "epoch", &epoch); err != nil {
		return err
	}
	if err := field(fields, "step", &step); err != nil {
		return err
	}
	if epoch < 0 || step < 0 {
		return fmt.Errorf("%w: negative epoch %d or step %d", ErrMalformed, epoch, step)
	}
	values := make(map[string]float64, len(fields))
	for k, raw := range fields {
		switch k {
		case "type", "context", "epoch", "step":
			continue
		}
		var v float64
		if err := json.Unmarshal(raw, &v); err != nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			return fmt.Errorf("%w: metric %q is %s, want a number", ErrMalformed, k, excerpt(raw))
		}
		values[k] = v
	}
	switch context {
	case "train":
		if _, ok := p.trainStep[step]; ok {
			p.repeats[context]++
		}
		p.trainStep[step] = epoch
		p.train.add(step, values)
		p.trainEnd[epoch] = max(p.trainEnd[epoch], step)
	case "validate", "data":
		p.periodic = append(p.periodic, periodLine{validate: context == "validate", epoch: epoch, step: step, values: values})
	}
	return nil
}

// params reads what of a params line changes how the file is drawn: val_every, which makes the
// run step-based. The rest of the line is the run's config, not drawn. A resumed run writes a
// params line again; a run step-based in any of them is drawn by step, the step being the one
// key every line of either kind has right.
func (p *parser) params(fields map[string]json.RawMessage) error {
	if _, ok := fields["val_every"]; !ok {
		return nil
	}
	var every int
	if err := field(fields, "val_every", &every); err != nil {
		return err
	}
	if every < 0 {
		return fmt.Errorf("%w: \"val_every\" is %d, want 0 (validation at epoch ends) or more steps", ErrMalformed, every)
	}
	if every > 0 {
		p.run.ValEvery = every
	}
	return nil
}

// periods keys the validate and data lines, in file order, by epoch or (a step-based run) by
// step, counting the lines that repeat a key.
func (p *parser) periods() {
	for _, l := range p.periodic {
		key := l.epoch
		if p.run.ValEvery > 0 {
			key = l.step
		}
		set, seen, ctx := &p.data, p.dataSeen, "data"
		if l.validate {
			set, seen, ctx = &p.validate, p.validateSeen, "validate"
		}
		if seen[key] {
			p.repeats[ctx]++
		}
		seen[key] = true
		set.add(key, l.values)
		if p.run.ValEvery == 0 { // a step-based run's validations end no epoch
			p.epochStep[l.epoch] = l.step
		}
	}
}

func (p *parser) finishLine(fields map[string]json.RawMessage) error {
	var status string
	if err := field(fields, "status", &status); err != nil {
		return err
	}
	p.run.Status = status
	p.finishes++
	return nil
}

// field decodes fields[name] into dst, or says why it cannot.
func field(fields map[string]json.RawMessage, name string, dst any) error {
	raw, ok := fields[name]
	if !ok {
		return fmt.Errorf("%w: no %q field", ErrMalformed, name)
	}
	if err := json.Unmarshal(raw, dst); err != nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		want := "a string"
		if _, isInt := dst.(*int); isInt {
			want = "an integer"
		}
		return fmt.Errorf("%w: %q is %s, want %s", ErrMalformed, name, excerpt(raw), want)
	}
	return nil
}

// excerpt quotes at most 40 bytes of an untrusted value for an error message.
func excerpt(raw []byte) string {
	s := string(bytes.TrimSpace(raw))
	if len(s) > 40 {
		return fmt.Sprintf("%q...", s[:40])
	}
	return fmt.Sprintf("%q", s)
}

// seriesSet gathers one context's values: name -> x -> value, the later value winning.
type seriesSet struct {
	context string
	points  map[string]map[int]float64
	dropped map[string]bool // names past maxSeries
}

func (s *seriesSet) add(x int, values map[string]float64) {
	for name, v := range values {
		m, ok := s.points[name]
		if !ok {
			if len(s.points) >= maxSeries {
				if s.dropped == nil {
					s.dropped = map[string]bool{}
				}
				s.dropped[name] = true
				continue
			}
			m = map[int]float64{}
			s.points[name] = m
		}
		m[x] = v
	}
}

func (s *seriesSet) series(p *parser) map[string][]Point {
	out := make(map[string][]Point, len(s.points))
	for name, m := range s.points {
		pts := make([]Point, 0, len(m))
		for x, y := range m {
			pts = append(pts, Point{X: float64(x), Y: y})
		}
		sort.Slice(pts, func(i, j int) bool { return pts[i].X < pts[j].X })
		out[name] = pts
	}
	if len(s.dropped) > 0 {
		p.warnf("%d %s metric names past the first %d were ignored", len(s.dropped), s.context, maxSeries)
	}
	return out
}

// finish builds the Run from what the lines said.
func (p *parser) finish() *Run {
	run := p.run
	p.periods()
	run.Train = p.train.series(p)
	run.Validate = p.validate.series(p)
	run.Data = p.data.series(p)
	for _, ctx := range []string{"train", "validate", "data"} {
		if n := p.repeats[ctx]; n > 0 {
			what := "epoch"
			if ctx == "train" || run.ValEvery > 0 {
				what = "step"
			}
			p.warnf("%d %s lines repeat an earlier line's %s (a resumed run?); the later values were kept", n, ctx, what)
		}
	}
	ends := map[int]int{}
	for e, s := range p.trainEnd {
		ends[e] = s
	}
	for e, s := range p.epochStep {
		ends[e] = s
	}
	for e, s := range ends {
		run.EpochEnds = append(run.EpochEnds, EpochEnd{Epoch: e, Step: s})
	}
	sort.Slice(run.EpochEnds, func(i, j int) bool { return run.EpochEnds[i].Epoch < run.EpochEnds[j].Epoch })
	run.StepsPerSecond = p.stepsPerSecond(ends)
	switch {
	case run.Lines == 0:
		p.warnf("the file is empty")
	case p.finishes == 0:
		p.warnf("no finish line: the run is still going, or it crashed")
	}
	return run
}

// stepsPerSecond derives each epoch's steps/s from the data lines' timing, when they have any.
func (p *parser) stepsPerSecond(ends map[int]int) []Point {
	rate := p.data.points[keyStepsPerSecond]
	secs := p.data.points[keyEpochSeconds]
	if secs == nil {
		secs = p.data.points[keySeconds]
	}
	if rate == nil && secs == nil {
		if len(p.dataSeen) > 0 || len(p.trainStep) > 0 {
			p.warnf("steps_per_second.png is left out: the data lines carry no timing (%s, or %s)", keyStepsPerSecond, keyEpochSeconds)
		}
		return nil
	}
	if p.run.ValEvery > 0 {
		return p.periodRates(rate, secs)
	}
	var out []Point
	var noSteps []int
	for e := range p.dataSeen {
		if v, ok := rate[e]; ok {
			out = append(out, Point{X: float64(e), Y: v})
			continue
		}
		s, ok := secs[e]
		if !ok || s <= 0 {
			continue
		}
		start, ok := p.epochStart(e, ends)
		if !ok || ends[e] < start {
			noSteps = append(noSteps, e)
			continue
		}
		out = append(out, Point{X: float64(e), Y: float64(ends[e]-start) / s})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].X < out[j].X })
	if len(noSteps) > 0 {
		sort.Ints(noSteps)
		p.warnf("no steps/s for epoch(s) %s: the step the epoch started at is unknown", joinInts(noSteps))
	}
	return out
}

// periodRates is a step-based run's steps/s per validation period, keyed by the step it ended at:
// its data line's steps_per_second, else its seconds over its steps, those since the previous
// data line (0 for the first). Periods are ValEvery steps but for the last, which the horizon may
// cut short, so the steps are counted rather than assumed.
func (p *parser) periodRates(rate, secs map[int]float64) []Point {
	steps := make([]int, 0, len(p.dataSeen))
	for s := range p.dataSeen {
		steps = append(steps, s)
	}
	sort.Ints(steps)
	var out []Point
	prev := 0
	for _, step := range steps {
		if v, ok := rate[step]; ok {
			out = append(out, Point{X: float64(step), Y: v})
		} else if s := secs[step]; s > 0 && step > prev {
			out = append(out, Point{X: float64(step), Y: float64(step-prev) / s})
		}
		prev = step
	}
	return out
}

// epochStart is the step epoch e started after: the previous epoch's end, or 0 for epoch 1.
func (p *parser) epochStart(e int, ends map[int]int) (int, bool) {
	if s, ok := ends[e-1]; ok {
		return s, true
	}
	if e == 1 {
		return 0, true
	}
	return 0, false
}

func joinInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ", ")
}

// pathPrefix is "path:" for an error message, or "" when there is no path.
func pathPrefix(path string) string {
	if path == "" {
		return ""
	}
	return path + ": "
}
