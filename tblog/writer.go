package tblog

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nitro-go/nitro/logjson"
)

// DirName is the folder of a run dir the event files go to: runs/<Exp>/tb.
const DirName = "tb"

// The text summaries' tags (the Text tab); LogOther's go under their key.
const (
	TagParams = "params"
	TagTags   = "tags"
	TagStatus = "status"
)

// ErrNoDir: a Writer was asked to write before it was given a directory. It matches
// logjson.ErrNoPath too, so a caller checking loggers alike needs one test.
var ErrNoDir = fmt.Errorf("tblog: no directory set (call SetDir before the first write): %w", logjson.ErrNoPath)

// Writer is a logjson.Logger that writes TensorBoard event files. See the package doc.
type Writer struct {
	mu       sync.Mutex
	dir      string
	path     string // the open event file ("" before the first write)
	f        *os.File
	opened   int // event files opened by this Writer
	lastStep int // the step of the last metrics written: the x of text summaries
	status   logjson.Status
	finished bool
	dropped  int
	records  int

	now  func() time.Time // nil means time.Now; tests pin it
	host string           // "" means os.Hostname
}

var (
	_ logjson.Logger      = (*Writer)(nil)
	_ logjson.Tagger      = (*Writer)(nil)
	_ logjson.Identified  = (*Writer)(nil)
	_ logjson.DropCounter = (*Writer)(nil)
	_ logjson.RunDirUser  = (*Writer)(nil)
)

// New returns a Writer into dir; "" leaves it for SetDir, as a zero Writer does. Nothing is
// created here: the folder and the event file come with the first write.
func New(dir string) *Writer { return &Writer{dir: dir} }

// ForRun returns a Writer into <runDir>/tb.
func ForRun(runDir string) *Writer { return New(filepath.Join(runDir, DirName)) }

// WithJSON is the JSON Lines record (<runDir>/metrics.jsonl, the name core gives it) and a
// Writer into <runDir>/tb, fanned out by logjson.Multi: pass it as the run's logger, with the
// same run dir, to keep nitro's record and get TensorBoard's view too.
func WithJSON(runDir string) *logjson.MultiLogger {
	return logjson.Multi(logjson.NewJSONLogger(filepath.Join(runDir, "metrics.jsonl")), ForRun(runDir))
}

// SetDir sets the folder of the event files. It may be called any number of times before the
// first write; after that, only the same folder is accepted.
func (w *Writer) SetDir(dir string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.opened > 0 && dir != w.dir {
		return fmt.Errorf("tblog: SetDir(%q): already writing to %q", dir, w.dir)
	}
	w.dir = dir
	return nil
}

// UseRunDir puts the event files in <runDir>/tb when the writer has no folder yet
// (logjson.RunDirUser: core calls it at the end of setup).
func (w *Writer) UseRunDir(runDir string) error {
	if w.Dir() != "" {
		return nil
	}
	return w.SetDir(filepath.Join(runDir, DirName))
}

// Dir is the folder of the event files ("" while unset).
func (w *Writer) Dir() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dir
}

// Path is the event file being written ("" before the first write, and after Finish the last
// one written).
func (w *Writer) Path() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.path
}

// Records is how many records this Writer has written, each file's version record included.
func (w *Writer) Records() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.records
}

// Dropped is how many non-finite metric values were dropped here or reported by CountDropped.
func (w *Writer) Dropped() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dropped
}

// CountDropped adds n values the caller dropped before LogMetrics to the count the status text
// reports; ignored after Finish and for n <= 0.
func (w *Writer) CountDropped(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n > 0 && !w.finished {
		w.dropped += n
	}
}

// RunID is "": a folder of files has no run id.
func (w *Writer) RunID() string { return "" }

// RunURL is "": TensorBoard's address is the caller's to choose.
func (w *Writer) RunURL() string { return "" }

// Info is {"dir": the folder, "path": the event file}, nil for what is not known yet.
func (w *Writer) Info() map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	info := map[string]any{"dir": nil, "path": nil}
	if w.dir != "" {
		info["dir"] = w.dir
	}
	if w.path != "" {
		info["path"] = w.path
	}
	return info
}

// LogParams writes the params, flattened (logjson.FlattenParams) and sorted, as a Markdown
// table in the text summary "params", at step 0.
func (w *Writer) LogParams(params map[string]any) error {
	flat, err := logjson.FlattenParams(params)
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(flat))
	for k := range flat {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("| param | value |\n| --- | --- |\n")
	for _, k := range keys {
		v, err := formatValue(flat[k])
		if err != nil {
			return fmt.Errorf("tblog: param %q: %w", k, err)
		}
		fmt.Fprintf(&b, "| %s | %s |\n", cell(k), cell(v))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writeLocked(textEvent(w.wallTime(), 0, TagParams, b.String()))
}

// LogMetrics writes one event at m.Step holding every finite value as a scalar tagged
// <context>/<name>, sorted: train/loss, val/val_accuracy (the validate context is "val"),
// data/data_wait_frac. An epoch's lines carry the step the epoch ended at, so the epoch
// curves share the train curves' x axis. Non-finite values are dropped and counted; a call left
// with no value writes nothing. TensorBoard keeps float32: a finite value beyond its range is
// written as ±Inf, rounded like any other rather than dropped, so the curve shows it.
func (w *Writer) LogMetrics(m logjson.Metrics) error {
	kept, dropped := logjson.DropNonFinite(m.Values)
	prefix := m.Context
	if prefix == logjson.ContextValidate {
		prefix = "val"
	}
	values := make([]scalar, 0, len(kept))
	for name, v := range kept {
		tag := name
		if prefix != "" {
			tag = prefix + "/" + name
		}
		values = append(values, scalar{tag, float32(v)})
	}
	sort.Slice(values, func(i, j int) bool { return values[i].tag < values[j].tag })
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finished {
		return logjson.ErrFinished
	}
	w.dropped += dropped
	w.lastStep = m.Step
	if len(values) == 0 {
		return nil
	}
	return w.writeLocked(scalarEvent(w.wallTime(), int64(m.Step), values))
}

// LogOther writes value as the text summary tagged key, at the step of the last metrics: a
// string as it is (in a code block, so a report keeps its layout), anything else as JSON.
func (w *Writer) LogOther(key string, value any) error {
	text, err := formatValue(value)
	if err != nil {
		return fmt.Errorf("tblog: %q: %w", key, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writeLocked(textEvent(w.wallTime(), int64(w.lastStep), key, codeBlock(text)))
}

// LogTags writes the tags, comma-separated, as the text summary "tags".
func (w *Writer) LogTags(tags []string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writeLocked(textEvent(w.wallTime(), int64(w.lastStep), TagTags, strings.Join(tags, ", ")))
}

// Finish writes the status (and the count of dropped values, when not zero) as the text
// summary "status", then syncs and closes the file. The first valid status is the run's: a
// later call returns nil and writes nothing, and if the first call's write failed, a later
// call retries with the first status, never its own. A status outside the four is refused
// with logjson.ErrUnknownStatus. Writes after Finish return logjson.ErrFinished.
func (w *Writer) Finish(status logjson.Status) error {
	if err := status.Check(); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finished {
		return nil
	}
	if w.status == "" {
		w.status = status
	}
	text := string(w.status)
	if w.dropped > 0 {
		text += fmt.Sprintf(" (non-finite metric values dropped: %d)", w.dropped)
	}
	if err := w.writeLocked(textEvent(w.wallTime(), int64(w.lastStep), TagStatus, text)); err != nil {
		return err // not finished: a later Finish retries with w.status
	}
	w.finished = true
	f := w.f
	w.f = nil
	return errors.Join(w.wrap(f.Sync()), w.wrap(f.Close()))
}

// writeLocked frames event and writes it in one write call, opening a file first if none is
// open. No user-space buffer sits between: each record reaches the OS as it is logged, so
// TensorBoard shows a run live and a crash loses nothing written. A failed write closes the
// file and the next write opens a new one: a torn record ends the reading of its file, so it
// must not sit in front of later records.
func (w *Writer) writeLocked(event []byte) error {
	if w.finished {
		return logjson.ErrFinished
	}
	if w.f == nil {
		if err := w.openLocked(); err != nil {
			return err
		}
	}
	if err := w.appendLocked(event); err != nil {
		w.f.Close()
		w.f = nil
		return err
	}
	return nil
}

func (w *Writer) appendLocked(event []byte) error {
	if _, err := w.f.Write(appendRecord(nil, event)); err != nil {
		return w.wrap(err)
	}
	w.records++
	return nil
}

// openLocked creates a new event file, named events.out.tfevents.<unix seconds>.<host> (TensorBoard
// finds files by the "tfevents" in their name), with a numeric suffix when that name is taken,
// and writes its version record. It never appends to an existing file: a resumed run, or a
// Writer reopening after a failed write, adds a file, and TensorBoard reads a folder's files
// as one run.
func (w *Writer) openLocked() error {
	if w.dir == "" {
		return ErrNoDir
	}
	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		return fmt.Errorf("tblog: %w", err)
	}
	host := w.host
	if host == "" {
		var err error
		if host, err = os.Hostname(); err != nil || host == "" {
			host = "localhost"
		}
	}
	base := filepath.Join(w.dir, fmt.Sprintf("events.out.tfevents.%010d.%s", w.clock().Unix(), host))
	path := base
	for i := 1; ; i++ {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) && i < 1000 {
			path = base + "." + strconv.Itoa(i)
			continue
		}
		if err != nil {
			return fmt.Errorf("tblog: %w", err)
		}
		w.f, w.path = f, path
		w.opened++
		break
	}
	if err := w.appendLocked(versionEvent(w.wallTime())); err != nil {
		w.f.Close()
		w.f = nil
		return err
	}
	return nil
}

func (w *Writer) wallTime() float64 {
	return float64(w.clock().UnixNano()) / 1e9
}

func (w *Writer) clock() time.Time {
	if w.now == nil {
		return time.Now()
	}
	return w.now()
}

// wrap names the file in err, unless err names it already (an *os.PathError does).
func (w *Writer) wrap(err error) error {
	if err == nil {
		return nil
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("tblog: %w", err)
	}
	return fmt.Errorf("tblog: %s: %w", w.path, err)
}

// formatValue is a string as it is and anything else as JSON; a value JSON cannot encode (a
// NaN, a channel) is an error.
func formatValue(v any) (string, error) {
	if s, ok := v.(string); ok {
		return s, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// cell makes s one Markdown table cell: a "|" would end the cell, a newline the row.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", " "), "\n", " ")
}

// codeBlock fences s so Markdown keeps its lines and spacing, with a fence longer than any run
// of backticks in s.
func codeBlock(s string) string {
	fence, run := 3, 0
	for _, r := range s {
		if r == '`' {
			run++
			fence = max(fence, run+1)
		} else {
			run = 0
		}
	}
	f := strings.Repeat("`", fence)
	return f + "\n" + s + "\n" + f
}
