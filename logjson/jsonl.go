package logjson

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
	"sync"
)

// JSONLogger is the framework's default logger: JSON Lines, one object per line, each with a
// "type" discriminator ("params", "metrics", "other", "tags", "confusion", "finish"):
//
//	{"type":"params","max_epochs":40,"seed":42,"width":128}
//	{"type":"metrics","context":"train","epoch":1,"step":4,"loss":0.31}
//	{"type":"other","key":"binding_report","value":"..."}
//	{"type":"finish","status":"completed"}
//
// Keys after the line's own fields are sorted. Construction has no side effect: the file is
// opened on the first write, at the path given to NewJSONLogger or SetPath (parent directories
// are created), in append mode so a resumed run extends the same file. Each line goes to the
// file in one write call, so a crash leaves every complete line readable. Non-finite metric
// values are dropped and counted, CountDropped adds what a caller dropped before the call, and
// the count appears on the finish line as "dropped_non_finite" when it is not zero. Finish
// writes the finish line and closes the file; the first status given wins. A JSONLogger is safe
// for concurrent use.
//
// It has no resumable state (it does not implement Resumable): append mode is all a resumed
// run needs, and setup pins the path again.
type JSONLogger struct {
	mu       sync.Mutex
	path     string
	f        *os.File
	needNL   bool   // the file does not end in a newline (a crash, a torn write): start the next line on a new one
	status   Status // the first status Finish was given
	finished bool   // the finish line is written and the file closed
	dropped  int    // non-finite metric values dropped so far
	lines    int    // lines written by this logger
}

var (
	_ Logger          = (*JSONLogger)(nil)
	_ Tagger          = (*JSONLogger)(nil)
	_ ConfusionLogger = (*JSONLogger)(nil)
	_ Identified      = (*JSONLogger)(nil)
	_ DropCounter     = (*JSONLogger)(nil)
	_ RunDirUser      = (*JSONLogger)(nil)
)

// NewJSONLogger returns a logger that will write to path; "" leaves the path for SetPath
// (setup pins <run dir>/metrics.jsonl). Nothing is opened or created here.
func NewJSONLogger(path string) *JSONLogger { return &JSONLogger{path: path} }

// SetPath sets where the lines go. It may be called any number of times before the first write;
// after the file is open, only the same path is accepted.
func (l *JSONLogger) SetPath(path string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil && path != l.path {
		return fmt.Errorf("logjson: SetPath(%q): already writing to %q", path, l.path)
	}
	l.path = path
	return nil
}

// UseRunDir pins the file to <runDir>/metrics.jsonl when it has no path yet (RunDirUser).
func (l *JSONLogger) UseRunDir(runDir string) error {
	if l.Path() != "" {
		return nil
	}
	return l.SetPath(filepath.Join(runDir, "metrics.jsonl"))
}

// Path is where the lines go ("" while unset).
func (l *JSONLogger) Path() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.path
}

// Dropped is how many non-finite metric values this logger has dropped, or was told of through
// CountDropped.
func (l *JSONLogger) Dropped() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropped
}

// CountDropped adds n non-finite values the caller dropped before LogMetrics to the count the
// finish line reports; it is ignored after Finish, and for n <= 0.
func (l *JSONLogger) CountDropped(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n > 0 && !l.finished {
		l.dropped += n
	}
}

// Lines is how many lines this logger has written (a resumed file's earlier lines not counted).
func (l *JSONLogger) Lines() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lines
}

// RunID is "": a file logger has no run id.
func (l *JSONLogger) RunID() string { return "" }

// RunURL is "": a file logger has no run URL.
func (l *JSONLogger) RunURL() string { return "" }

// Info is {"path": the file's path}, or {"path": nil} before a path is set.
func (l *JSONLogger) Info() map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.path == "" {
		return map[string]any{"path": nil}
	}
	return map[string]any{"path": l.path}
}

// LogParams writes {"type":"params",...} with params flattened (FlattenParams) and sorted.
// A param named "type" is refused with ErrReservedKey.
func (l *JSONLogger) LogParams(params map[string]any) error {
	flat, err := FlattenParams(params)
	if err != nil {
		return err
	}
	if _, ok := flat["type"]; ok {
		return fmt.Errorf("%w: param %q collides with the line's discriminator; rename it", ErrReservedKey, "type")
	}
	var b lineBuilder
	b.start("params")
	for _, k := range sortedKeys(flat) {
		b.field(k, flat[k])
	}
	return l.emit(&b)
}

// LogMetrics writes {"type":"metrics","context":...,"epoch":...,"step":...,<values>} with the
// values sorted by name. Non-finite values are dropped and counted (a caller that dropped them
// first reports its count through CountDropped); the line is written even when nothing is left,
// so the cadence of a context stays one line per call. A value named type, context, epoch or
// step is refused with ErrReservedKey.
func (l *JSONLogger) LogMetrics(m Metrics) error {
	if err := checkMetricNames(m.Values); err != nil {
		return err
	}
	kept, dropped := DropNonFinite(m.Values)
	var b lineBuilder
	b.start("metrics")
	b.field("context", m.Context)
	b.field("epoch", m.Epoch)
	b.field("step", m.Step)
	for _, k := range sortedKeys(kept) {
		b.field(k, kept[k])
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writeLocked(&b); err != nil {
		return err
	}
	l.dropped += dropped
	return nil
}

// LogOther writes {"type":"other","key":key,"value":value}. A value JSON cannot encode (a NaN,
// a channel) is refused and nothing is written.
func (l *JSONLogger) LogOther(key string, value any) error {
	var b lineBuilder
	b.start("other")
	b.field("key", key)
	b.field("value", value)
	return l.emit(&b)
}

// LogTags writes {"type":"tags","tags":[...]}.
func (l *JSONLogger) LogTags(tags []string) error {
	if tags == nil {
		tags = []string{}
	}
	var b lineBuilder
	b.start("tags")
	b.field("tags", tags)
	return l.emit(&b)
}

// LogConfusion writes {"type":"confusion","epoch":...,"labels":[...],"matrix":[[...]]}
// ("labels" left out when nil). The matrix must be square, and labels, when given, must name
// each row.
func (l *JSONLogger) LogConfusion(matrix [][]int, labels []string, epoch int) error {
	if err := checkConfusion(matrix, labels); err != nil {
		return err
	}
	if matrix == nil {
		matrix = [][]int{}
	}
	var b lineBuilder
	b.start("confusion")
	b.field("epoch", epoch)
	if labels != nil {
		b.field("labels", labels)
	}
	b.field("matrix", matrix)
	return l.emit(&b)
}

// Finish writes {"type":"finish","status":...} (plus "dropped_non_finite" when values were
// dropped), syncs and closes the file. The first valid status given is the run's: a later call
// returns nil and writes nothing, and if the first call's write failed, a later call retries
// with the first status, never its own. A status outside the four is refused with
// ErrUnknownStatus. Writes after Finish return ErrFinished.
func (l *JSONLogger) Finish(status Status) error {
	return finishOnce(status, &l.mu, &l.finished, func() error {
		if l.status == "" {
			l.status = status
		}
		var b lineBuilder
		b.start("finish")
		b.field("status", string(l.status))
		if l.dropped > 0 {
			b.field("dropped_non_finite", l.dropped)
		}
		if err := l.writeLocked(&b); err != nil {
			return err // not finished: a later Finish retries with l.status
		}
		l.finished = true
		f := l.f
		l.f = nil
		return errors.Join(wrapPath(l.path, f.Sync()), wrapPath(l.path, f.Close()))
	})
}

func (l *JSONLogger) emit(b *lineBuilder) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writeLocked(b)
}

// writeLocked writes b's line in one write call, opening the file first if needed.
func (l *JSONLogger) writeLocked(b *lineBuilder) error {
	line, err := b.finish()
	if err != nil {
		return err
	}
	if l.finished {
		return ErrFinished
	}
	if l.f == nil {
		if err := l.openLocked(); err != nil {
			return err
		}
	}
	if l.needNL {
		line = append([]byte{'\n'}, line...)
	}
	n, err := l.f.Write(line)
	if n > 0 {
		// A write cut short (a full disk, a size limit) leaves part of a line: the next line
		// starts on a new one, so the torn part stays a line of its own that readers skip,
		// instead of a prefix that spoils the next line.
		l.needNL = line[n-1] != '\n'
	}
	if err != nil {
		return wrapPath(l.path, err)
	}
	l.lines++
	return nil
}

func (l *JSONLogger) openLocked() error {
	if l.path == "" {
		return ErrNoPath
	}
	if dir := filepath.Dir(l.path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("logjson: %w", err)
		}
	}
	// A named pipe or a socket left where the record goes (a run dir's metrics.jsonl) would take
	// the lines until it fills, then stop the run: refused. Lstat, so that a link the user made to
	// a stream (/dev/stdout) is still written.
	if st, err := os.Lstat(l.path); err == nil && st.Mode().Type()&(fs.ModeNamedPipe|fs.ModeSocket) != 0 {
		return fmt.Errorf("logjson: %s: not a regular file (%s): remove it, or give the logger another path", l.path, st.Mode().Type())
	}
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("logjson: %w", err)
	}
	// A file left by a crash in the middle of a line must not swallow the next line.
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err != nil && err != io.EOF {
			f.Close()
			return wrapPath(l.path, err)
		}
		l.needNL = last[0] != '\n'
	}
	l.f = f
	return nil
}

func wrapPath(path string, err error) error {
	if err == nil {
		return nil
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("logjson: %w", err)
	}
	return fmt.Errorf("logjson: %s: %w", path, err)
}

// lineBuilder assembles one JSON object in key order. The first encoding error sticks.
type lineBuilder struct {
	buf bytes.Buffer
	err error
}

func (b *lineBuilder) start(typ string) {
	b.buf.WriteString(`{"type":`)
	b.value("type", typ)
}

func (b *lineBuilder) field(key string, v any) {
	b.buf.WriteByte(',')
	b.value("", key)
	b.buf.WriteByte(':')
	b.value(key, v)
}

func (b *lineBuilder) value(key string, v any) {
	if b.err != nil {
		return
	}
	// An Encoder rather than json.Marshal: no HTML escaping, so a report stays readable.
	enc := json.NewEncoder(&b.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		b.err = fmt.Errorf("logjson: cannot encode %q: %w", key, err)
		return
	}
	b.buf.Truncate(b.buf.Len() - 1) // Encode's newline
}

func (b *lineBuilder) finish() ([]byte, error) {
	if b.err != nil {
		return nil, b.err
	}
	b.buf.WriteString("}\n")
	return b.buf.Bytes(), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// reservedMetric are the keys a metrics line uses for itself.
var reservedMetric = [...]string{"type", "context", "epoch", "step"}

func checkMetricNames(values map[string]float64) error {
	for _, k := range reservedMetric {
		if _, ok := values[k]; ok {
			return fmt.Errorf("%w: metric %q collides with the metrics line's own field; rename it", ErrReservedKey, k)
		}
	}
	return nil
}

func checkConfusion(matrix [][]int, labels []string) error {
	n := len(matrix)
	for i, row := range matrix {
		if len(row) != n {
			return fmt.Errorf("logjson: confusion matrix is not square: row %d has %d entries, want %d", i, len(row), n)
		}
	}
	if labels != nil && len(labels) != n {
		return fmt.Errorf("logjson: confusion matrix has %d classes but %d labels", n, len(labels))
	}
	return nil
}
