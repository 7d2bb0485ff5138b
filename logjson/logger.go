package logjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/nitro-go/nitro/runstatus"
)

// Logger is the required part of the logger contract: the four verbs the framework calls.
// A nil Logger is the opt-out ("no logging"); callers check for it before calling.
type Logger interface {
	// LogParams records hyperparameters, once, before the first compile. Keys should be flat;
	// a nested map is flattened to dotted keys (see FlattenParams).
	LogParams(params map[string]any) error
	// LogMetrics records one metrics line: a step, an epoch, a context and the values.
	LogMetrics(m Metrics) error
	// LogOther records one free-form value under key, such as "binding_report".
	LogOther(key string, value any) error
	// Finish finalizes the run with status. The first call wins: a later call never
	// replaces an earlier status, so a deferred Finish(StatusCompleted) cannot stamp a
	// failed run completed.
	Finish(status Status) error
}

// Metrics is one call of the metric channel.
type Metrics struct {
	Step    int                // the optimizer step the values belong to
	Epoch   int                // the epoch the values belong to
	Context string             // ContextTrain, ContextValidate or ContextData; passed through as is
	Values  map[string]float64 // metric name to value; names must not be reserved (see ErrReservedKey)
}

// The contexts the framework uses. A logger passes the string through; it needs no change for
// a context it has not seen.
const (
	ContextTrain    = "train"    // one line per optimizer step
	ContextValidate = "validate" // one line per epoch, metrics named val_*
	ContextData     = "data"     // one line per epoch, facts about the host data path
)

// Status is how a run ended: runstatus.Status, the one type core's StopReason and a
// checkpoint's stop reason also use, so the three cannot drift apart.
type Status = runstatus.Status

// The four statuses Finish accepts (runstatus's).
const (
	StatusCompleted = runstatus.Completed
	StatusEarlyStop = runstatus.EarlyStop
	StatusRequested = runstatus.Requested
	StatusError     = runstatus.Error
)

// RunDirUser is implemented by loggers that keep their files in the run directory when given no
// place of their own: the framework calls UseRunDir once, at the end of setup, before the first
// record. A logger already given a place keeps it.
type RunDirUser interface {
	UseRunDir(runDir string) error
}

// Tagger is implemented by loggers that accept tags.
type Tagger interface {
	LogTags(tags []string) error
}

// ConfusionLogger is implemented by loggers that accept a confusion matrix. The framework never
// calls it: only an experiment knows that a matrix exists and what its labels mean.
// matrix[i][j] counts examples of true class i predicted as class j; labels names the classes
// in that order (nil when unnamed).
type ConfusionLogger interface {
	LogConfusion(matrix [][]int, labels []string, epoch int) error
}

// Resumable is implemented by loggers that can continue an earlier run. State returns plain
// data (a JSON document), never a live handle; it is stored with the logger's TypeName in the
// checkpoint record and handed back to Reattach after resume, before anything is logged. A
// State of nil or JSON null means "no resumable state": nothing is stored, nothing reattached.
type Resumable interface {
	State() (json.RawMessage, error)
	Reattach(state json.RawMessage) error
}

// Identified is implemented by loggers that can say which run they write to. RunID and RunURL
// are informational ("" when the backend has none); Info is the backend's identifying
// parameters as plain data (strings, numbers, bools, nil, and slices or maps of those).
type Identified interface {
	RunID() string
	RunURL() string
	Info() map[string]any
}

// DropCounter is implemented by loggers that report how many non-finite metric values never
// reached them. The contract has the caller drop NaN and ±Inf before LogMetrics (DropNonFinite),
// so a logger that counts what it drops itself sees none; the framework hands it the count of
// each call's dropped values through CountDropped instead, before that LogMetrics call.
type DropCounter interface {
	CountDropped(n int)
}

// Backender is implemented by wrappers that hold a native backend object (a tracker's run
// handle, a *zap.Logger). Without it a logger is its own backend.
type Backender interface {
	Backend() any
}

var (
	// ErrNoPath: a JSONLogger was asked to write before it was given a path.
	ErrNoPath = errors.New("logjson: no path set (call SetPath before the first write)")
	// ErrFinished: a write came after Finish.
	ErrFinished = errors.New("logjson: logger already finished")
	// ErrReservedKey: a param or metric name collides with a key of the line itself.
	ErrReservedKey = errors.New("logjson: reserved key")
	// ErrUnknownStatus: Finish was given a status outside the four.
	ErrUnknownStatus = runstatus.ErrUnknown
	// ErrTypeMismatch: a recorded state belongs to another logger type.
	ErrTypeMismatch = errors.New("logjson: logger type mismatch")
	// ErrNotResumable: state was recorded but the logger cannot take it back.
	ErrNotResumable = errors.New("logjson: logger is not resumable")
	// ErrBadState: a logger's State is not plain JSON data.
	ErrBadState = errors.New("logjson: logger state is not plain JSON data")
)

// TypeName is the name a checkpoint records next to a logger's state: the dynamic type with its
// full package path, e.g. "*github.com/nitro-go/nitro/logjson.JSONLogger". "" for nil.
func TypeName(l Logger) string {
	if l == nil {
		return ""
	}
	return typeName(reflect.TypeOf(l))
}

func typeName(t reflect.Type) string {
	switch {
	case t.Kind() == reflect.Pointer && t.Name() == "":
		return "*" + typeName(t.Elem())
	case t.Name() != "" && t.PkgPath() != "":
		return t.PkgPath() + "." + t.Name()
	default:
		return t.String()
	}
}

// State captures what a checkpoint stores for l: its TypeName and its resumable state. It
// returns ("", nil, nil) when l is nil, not Resumable, or has no state (nil or JSON null). A
// state that is not valid JSON is refused with ErrBadState.
func State(l Logger) (typeName string, state json.RawMessage, err error) {
	r, ok := l.(Resumable)
	if !ok {
		return "", nil, nil
	}
	st, err := r.State()
	if err != nil {
		return "", nil, fmt.Errorf("logjson: state of %s: %w", TypeName(l), err)
	}
	if isNull(st) {
		return "", nil, nil
	}
	if !json.Valid(st) {
		return "", nil, fmt.Errorf("%w: %s returned %.40q; return plain data (strings, numbers, maps), never a live handle",
			ErrBadState, TypeName(l), st)
	}
	return TypeName(l), append(json.RawMessage(nil), st...), nil
}

// Reattach hands a recorded state back to l. Nothing is done when state is empty or JSON null
// (no resumable state was recorded). It refuses with ErrTypeMismatch, naming both types, when
// recordedType is not l's TypeName, and with ErrNotResumable when l cannot take state.
func Reattach(l Logger, recordedType string, state json.RawMessage) error {
	if isNull(state) {
		return nil
	}
	if got := TypeName(l); got != recordedType {
		if got == "" {
			got = "no logger"
		}
		return fmt.Errorf("%w: the checkpoint recorded state of %s, the run's logger is %s; refusing to hand one backend's state to another",
			ErrTypeMismatch, recordedType, got)
	}
	r, ok := l.(Resumable)
	if !ok {
		return fmt.Errorf("%w: the checkpoint recorded state of %s, which does not implement Resumable", ErrNotResumable, recordedType)
	}
	if err := r.Reattach(state); err != nil {
		return fmt.Errorf("logjson: reattach %s: %w", recordedType, err)
	}
	return nil
}

func isNull(b json.RawMessage) bool {
	t := trimSpace(b)
	return len(t) == 0 || string(t) == "null"
}

func trimSpace(b []byte) []byte {
	isSp := func(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
	for len(b) > 0 && isSp(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSp(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// RunID is l's run id, or "" when l is nil or not Identified.
func RunID(l Logger) string {
	if id, ok := l.(Identified); ok {
		return id.RunID()
	}
	return ""
}

// RunURL is l's run URL, or "" when l is nil or not Identified.
func RunURL(l Logger) string {
	if id, ok := l.(Identified); ok {
		return id.RunURL()
	}
	return ""
}

// Info is l's identifying parameters; an empty, non-nil map when l is nil or not Identified.
func Info(l Logger) map[string]any {
	if id, ok := l.(Identified); ok {
		if m := id.Info(); m != nil {
			return m
		}
	}
	return map[string]any{}
}

// Backend is l's native backend object: Backender's answer, else l itself (nil for nil).
func Backend(l Logger) any {
	if b, ok := l.(Backender); ok {
		return b.Backend()
	}
	if l == nil {
		return nil
	}
	return l
}

// finishOnce is the opening every Finish shares: a status outside the four is refused before
// the lock is taken (ErrUnknownStatus, naming the four), then body runs under mu unless
// *finished says an earlier Finish already finished. body sets *finished itself, when its
// logger counts as finished (JSONLogger only once its line is written, so a failed write can
// be retried); a nil finished runs body every time (Memory records every call).
func finishOnce(status Status, mu *sync.Mutex, finished *bool, body func() error) error {
	if err := status.Check(); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	if finished != nil && *finished {
		return nil
	}
	return body()
}
