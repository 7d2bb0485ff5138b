package board

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/nitro-go/nitro/tensorfile"
)

// MetricsFile is the file a run directory's logger writes, and the one the board tails.
const MetricsFile = "metrics.jsonl"

// Bounds on what one run may make the board keep, whatever its file holds.
const (
	// MaxLineBytes is the longest line parsed; a longer one is counted malformed and skipped.
	MaxLineBytes = 1 << 20
	maxSeries    = 100  // distinct metric names per context; more are counted, not kept
	maxParams    = 1000 // config fields kept per run
	maxValue     = 200  // bytes of one config value shown
	maxErrors    = 5    // malformed-line messages kept (the newest)
	readChunk    = 64 << 10
	rateWindow   = 20 // train lines the shown steps/s is averaged over
)

// tail follows one run directory's metrics.jsonl from the offset it has read to, parsing only
// complete lines: the bytes after the last newline wait in pending until their newline arrives
// (a line cut mid-write is never parsed half), and a file that shrank (rewritten, or a new run in
// the same folder) is read again from the start. Not safe for concurrent use: Board serializes.
type tail struct {
	dir, name string
	maxPoints int

	offset  int64
	pending []byte
	skip    bool // inside a line longer than MaxLineBytes: drop bytes until its newline
	lineNo  int
	modTime time.Time

	st   state
	seen bool // the folder existed at some refresh

	manifestMod time.Time
	best        string
}

// state is what the lines said.
type state struct {
	params         map[string]string
	train, val     map[string]*series
	data           map[string]*series
	droppedNames   int
	epoch, step    int
	lastContext    string
	status         string    // the finish line's status
	stepsPerSec    float64   // the newest steps_per_second a train or data line gave
	stepSecs       []float64 // the newest train lines' step_seconds, at most rateWindow
	malformed      int
	firstMalformed int // the first malformed line's number
	errors         []string
	lines          int
	gone           bool
	missing        bool // the folder exists, the file does not (yet)
	noDir          bool // the folder does not exist and never did while the board watched
	readErr        string
	droppedParams  int
	secs           float64 // the sum of the train lines' step_seconds so far
	timed          bool    // some train line had step_seconds
	// stepsPerEpoch is the first validate or data line's step over its epoch; in a step-based run,
	// whose validations end no epoch, the last train step of the first epoch to end over its epoch.
	stepsPerEpoch float64
	// valEvery is the params line's val_every: > 0 for a step-based run, whose validate and data
	// points are then placed at their step (several share an epoch).
	valEvery int
	// trainEpoch and trainStep are the newest train line's, to see an epoch end in a step-based run.
	trainEpoch, trainStep int
}

func newTail(dir, name string, maxPoints int) *tail {
	t := &tail{dir: dir, name: name, maxPoints: maxPoints}
	t.reset()
	return t
}

func (t *tail) reset() {
	t.offset, t.pending, t.skip, t.lineNo = 0, nil, false, 0
	t.st = state{params: map[string]string{}, train: map[string]*series{}, val: map[string]*series{}, data: map[string]*series{}}
}

// refresh reads what was appended since the last call, at most budget bytes (the rest waits for
// the next call, so one request never stalls on a huge file's first read).
func (t *tail) refresh(budget int64) {
	if _, err := os.Stat(t.dir); errors.Is(err, fs.ErrNotExist) {
		// A folder never seen is a run not started yet (the board may open before the run);
		// one seen before is gone.
		t.st.gone, t.st.noDir = t.seen, !t.seen
		return
	}
	t.seen, t.st.gone, t.st.noDir = true, false, false
	t.refreshManifest()
	path := filepath.Join(t.dir, MetricsFile)
	// Only a regular file, opened without waiting: a FIFO with no writer would hang every request.
	f, fi, err := tensorfile.OpenRegular(path)
	if errors.Is(err, fs.ErrNotExist) {
		t.st.missing = true
		return
	}
	if err != nil {
		t.st.readErr = err.Error()
		return
	}
	defer f.Close()
	t.st.missing, t.st.readErr = false, ""
	if fi.Size() < t.offset {
		t.reset() // the file was replaced or cut: its old lines are no longer the run's
	}
	t.modTime = fi.ModTime()
	if _, err := f.Seek(t.offset, io.SeekStart); err != nil {
		t.st.readErr = err.Error()
		return
	}
	buf := make([]byte, readChunk)
	for budget > 0 {
		n, err := f.Read(buf[:min(int64(len(buf)), budget)])
		t.offset += int64(n)
		budget -= int64(n)
		t.feed(buf[:n])
		if err != nil || n == 0 {
			break
		}
	}
}

// behind is how many bytes of the file are not read yet (0 when caught up or unknown).
func (t *tail) behind() int64 {
	fi, err := os.Stat(filepath.Join(t.dir, MetricsFile))
	if err != nil || fi.Size() <= t.offset {
		return 0
	}
	return fi.Size() - t.offset
}

// feed splits b into lines; the tail after the last newline stays pending.
func (t *tail) feed(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if !t.skip {
				t.pending = append(t.pending, b...)
				if len(t.pending) > MaxLineBytes {
					t.pending, t.skip = nil, true
				}
			}
			return
		}
		line := b[:i]
		b = b[i+1:]
		t.lineNo++
		if t.skip {
			t.skip = false
			t.malformedf("line %d is longer than %d bytes; it was skipped", t.lineNo, MaxLineBytes)
			continue
		}
		if len(t.pending) > 0 {
			line = append(t.pending, line...)
			t.pending = nil
			if len(line) > MaxLineBytes {
				t.malformedf("line %d is longer than %d bytes; it was skipped", t.lineNo, MaxLineBytes)
				continue
			}
		}
		t.line(bytes.TrimSuffix(line, []byte("\r")))
	}
}

func (t *tail) malformedf(format string, args ...any) {
	if t.st.malformed == 0 {
		t.st.firstMalformed = t.lineNo
	}
	t.st.malformed++
	t.st.errors = append(t.st.errors, fmt.Sprintf(format, args...))
	if len(t.st.errors) > maxErrors {
		t.st.errors = t.st.errors[len(t.st.errors)-maxErrors:]
	}
}

// line parses one complete line; what it cannot use is counted and its reason kept.
func (t *tail) line(line []byte) {
	t.st.lines++
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil || fields == nil {
		t.malformedf("line %d is not a JSON object", t.lineNo)
		return
	}
	if err := tensorfile.CheckUniqueKeys(line); err != nil { // the map kept only the last
		t.malformedf("line %d: %v", t.lineNo, err)
		return
	}
	var typ string
	if err := json.Unmarshal(fields["type"], &typ); err != nil {
		t.malformedf("line %d has no string \"type\"", t.lineNo)
		return
	}
	switch typ {
	case "params":
		t.params(fields)
	case "metrics":
		if err := t.metrics(fields); err != nil {
			t.malformedf("line %d: %v", t.lineNo, err)
		}
	case "finish":
		var status string
		if err := json.Unmarshal(fields["status"], &status); err != nil {
			t.malformedf("line %d: finish line without a string \"status\"", t.lineNo)
			return
		}
		t.st.status = status
	}
}

// params records a params line; a later one (a resumed run) updates the fields it names.
func (t *tail) params(fields map[string]json.RawMessage) {
	for k, raw := range fields {
		if k == "type" {
			continue
		}
		if _, ok := t.st.params[k]; !ok && len(t.st.params) >= maxParams {
			t.st.droppedParams++
			continue
		}
		v := string(bytes.TrimSpace(raw))
		var s string
		if json.Unmarshal(raw, &s) == nil {
			v = s
		}
		if len(v) > maxValue {
			v = v[:maxValue] + "…"
		}
		t.st.params[k] = v
	}
	if raw, ok := fields["val_every"]; ok {
		var every int
		if json.Unmarshal(raw, &every) != nil || every < 0 {
			t.malformedf("line %d: \"val_every\" is %.40s, want a count of steps", t.lineNo, bytes.TrimSpace(raw))
		} else if every > 0 { // a resumed run's params line keeps it
			t.st.valEvery = every
		}
	}
}

func (t *tail) metrics(fields map[string]json.RawMessage) error {
	var context string
	var epoch, step int
	if json.Unmarshal(fields["context"], &context) != nil {
		return errors.New(`metrics line without a string "context"`)
	}
	if json.Unmarshal(fields["epoch"], &epoch) != nil || json.Unmarshal(fields["step"], &step) != nil {
		return errors.New(`metrics line without integer "epoch" and "step"`)
	}
	set := map[string]map[string]*series{"train": t.st.train, "validate": t.st.val, "data": t.st.data}[context]
	x := float64(epoch)
	switch {
	case context == "train":
		x = float64(step)
		// Before the points, so a line's own step time is in its Secs.
		var secs float64
		if json.Unmarshal(fields["step_seconds"], &secs) == nil && secs > 0 {
			t.st.secs, t.st.timed = t.st.secs+secs, true
		}
		if t.st.valEvery > 0 && t.st.stepsPerEpoch == 0 && t.st.trainEpoch > 0 && epoch > t.st.trainEpoch {
			t.st.stepsPerEpoch = float64(t.st.trainStep) / float64(t.st.trainEpoch)
		}
		t.st.trainEpoch, t.st.trainStep = epoch, step
	case t.st.valEvery > 0:
		// Keyed by step as logged: by epoch, the validations an epoch holds would replace each
		// other as a resumed run's repeats do.
		x = float64(step)
	case t.st.stepsPerEpoch == 0 && epoch > 0 && step > 0:
		t.st.stepsPerEpoch = float64(step) / float64(epoch)
	}
	for k, raw := range fields {
		switch k {
		case "type", "context", "epoch", "step":
			continue
		}
		var v float64
		if json.Unmarshal(raw, &v) != nil || bytes.Equal(raw, []byte("null")) {
			return fmt.Errorf("metric %q is not a number", k)
		}
		t.st.rate(context, k, v)
		if set == nil {
			continue // a context this board does not draw
		}
		s, ok := set[k]
		if !ok {
			if len(set) >= maxSeries {
				t.st.droppedNames++
				continue
			}
			s = newSeries(t.maxPoints)
			set[k] = s
		}
		s.add(Point{X: x, Y: v, Step: step, Epoch: epoch, Secs: t.st.secs})
	}
	t.st.epoch, t.st.step, t.st.lastContext = epoch, step, context
	return nil
}

// refreshManifest re-reads the checkpoint manifest when it changed, keeping the best entry.
func (t *tail) refreshManifest() {
	fi, err := os.Stat(filepath.Join(t.dir, "manifest.json"))
	if err != nil {
		t.best = ""
		return
	}
	if fi.ModTime().Equal(t.manifestMod) {
		return
	}
	t.manifestMod = fi.ModTime()
	t.best = bestCheckpoint(t.dir)
}

// phase is the run's state in words, from what its record holds.
func (t *tail) phase() string {
	switch {
	case t.st.gone:
		return "gone"
	case t.st.noDir:
		return "waiting (no run directory yet)"
	case t.st.missing:
		return "waiting (no " + MetricsFile + " yet)"
	case t.st.status == "error":
		return "failed"
	case t.st.status != "":
		return "finished"
	case t.st.lastContext == "":
		return "starting"
	case t.st.lastContext == "train":
		return fmt.Sprintf("training epoch %d", t.st.epoch)
	case t.st.valEvery > 0:
		return fmt.Sprintf("validated at step %d (epoch %d)", t.st.step, t.st.epoch)
	default:
		return fmt.Sprintf("validated epoch %d", t.st.epoch)
	}
}

func seriesNames(m map[string]*series) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		// loss first, then the rest by name
		li, lj := strings.Contains(names[i], "loss"), strings.Contains(names[j], "loss")
		if li != lj {
			return li
		}
		return names[i] < names[j]
	})
	return names
}

// rate notes the timing values a line carries.
func (s *state) rate(context, key string, v float64) {
	switch {
	case key == "steps_per_second" && (context == "train" || context == "data"):
		s.stepsPerSec = v
	case key == "step_seconds" && context == "train" && v > 0:
		s.stepSecs = append(s.stepSecs, v)
		if len(s.stepSecs) > rateWindow {
			s.stepSecs = s.stepSecs[1:]
		}
	}
}

// speed is the run's steps/s now: one over the median of its newest train lines' step_seconds
// (a median, since a compile or a checkpoint write lands in one step and would drag a mean down),
// else the newest rate logged.
func (s *state) speed() float64 {
	if len(s.stepSecs) == 0 {
		return s.stepsPerSec
	}
	sorted := append([]float64(nil), s.stepSecs...)
	sort.Float64s(sorted)
	return 1 / sorted[len(sorted)/2]
}
