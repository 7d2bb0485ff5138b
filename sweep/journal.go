package sweep

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The record is Optuna's journal format (optuna.storages.journal.JournalFileBackend, as Optuna
// 5.0.0 reads it): one JSON object a line, each an operation with an "op_code" and the
// "worker_id" that wrote it, replayed in order. What nitro relies on:
//
//   - op codes: 0 CREATE_STUDY (study_name, directions: [1 minimize | 2 maximize]),
//     1 DELETE_STUDY, 2 SET_STUDY_USER_ATTR and 3 SET_STUDY_SYSTEM_ATTR (study_id, a one-key
//     object), 4 CREATE_TRIAL (study_id, datetime_start, and optionally state, params,
//     distributions, user_attrs, system_attrs, value/values, intermediate_values,
//     datetime_complete), 5 SET_TRIAL_PARAM (trial_id, param_name, param_value_internal,
//     distribution), 6 SET_TRIAL_STATE_VALUES (trial_id, state, values: null or [v],
//     datetime_start when RUNNING, datetime_complete when finished), 7
//     SET_TRIAL_INTERMEDIATE_VALUE (trial_id, step, intermediate_value), 8 and 9 SET_TRIAL_USER_ATTR
//     and SET_TRIAL_SYSTEM_ATTR (trial_id, a one-key object), 10 DISCARD_TRIALS (Optuna skips it);
//   - trial states: 0 RUNNING, 1 COMPLETE, 2 PRUNED, 3 FAIL, 4 WAITING;
//   - a trial's id counts the trials of every study in the file; its number counts its study's.
//     A sweep's file holds one study, so the two agree;
//   - a distribution is itself a JSON object serialized into a string:
//     {"name": "FloatDistribution", "attributes": {...}} and the like;
//   - times are ISO 8601 in UTC with microseconds and "+00:00";
//   - NaN and ±Inf are written bare (NaN, Infinity, -Infinity), as Python's json module does, and
//     a value may be NaN (an intermediate value, say), so nitro's reader takes them too;
//   - updates to a finished trial, and a param whose distribution disagrees with an earlier
//     trial's, are skipped by Optuna's reader (another worker wrote them in a race), so they are
//     skipped here too: both readers then see the same study;
//   - Optuna's reader stops at a last line with no newline (a writer mid-append) and refuses a
//     line it cannot parse only when more follow.
//
// Every line needs a worker_id: Optuna's reader compares it with its own to decide whose errors
// to raise. nitro's is "nitro-<pid>-<random>", never a Python worker's (a uuid).
//
// A sweep's study has user attrs "metric" (the metric's name) and "space" (each param as --param
// writes it, read back with ParseParam): Open refuses a record without them; Load reads any
// one-study journal.
//
// Python writers serialize appends with a lock file of their own (journal.log.lock); nitro does
// not take it because a sweep's journal has one writer, the sweep holding D/journal.lock.

// JournalFile is the record's file name in a sweep dir.
const JournalFile = "journal.log"

// LockFile is the file a writing sweep holds locked (flock), so a second one is refused.
const LockFile = "journal.lock"

// Optuna's op codes.
const (
	opCreateStudy     = 0
	opDeleteStudy     = 1
	opStudyUserAttr   = 2
	opStudySystemAttr = 3
	opCreateTrial     = 4
	opTrialParam      = 5
	opTrialState      = 6
	opIntermediate    = 7
	opTrialUserAttr   = 8
	opTrialSystemAttr = 9
	opDiscardTrials   = 10
)

// Optuna's trial states by number; WAITING only appears in studies Python wrote (enqueue_trial).
var stateCodes = []State{Running, Complete, Pruned, Fail, "WAITING"}

func stateCode(s State) (int, bool) {
	for i, c := range stateCodes {
		if c == s {
			return i, true
		}
	}
	return 0, false
}

// now and newWorkerID are replaced by the golden test, to make the file deterministic.
var (
	now         = time.Now
	newWorkerID = func() string {
		var b [8]byte
		_, _ = rand.Read(b[:])
		return fmt.Sprintf("nitro-%d-%s", os.Getpid(), hex.EncodeToString(b[:]))
	}
)

// Journal is a sweep's record open for appending. Its methods are safe for concurrent use.
type Journal struct {
	mu       sync.Mutex
	dir      string
	path     string
	f        *os.File
	size     int64 // bytes of whole lines in the file: a failed append is cut back to it
	broken   error // set when a failed append could not be cut back: no further writes
	unlock   func() error
	worker   string
	rp       *replay
	repaired string
}

// Create makes D/journal.log for a new study (refusing when D already holds one: "use
// --resume"), writing the study, its direction, and user attrs: "metric", "space" (the params'
// text list), plus attrs given.
func Create(dir, name string, metric string, maximize bool, space Space, attrs map[string]any) (*Journal, error) {
	if name == "" {
		return nil, errors.New("sweep: Create: the study needs a name")
	}
	if metric == "" {
		return nil, errors.New("sweep: Create: the metric the trials are judged by is empty; name the validation metric")
	}
	if err := space.Check(); err != nil {
		return nil, fmt.Errorf("sweep: Create: %w", err)
	}
	for k := range attrs {
		if k == "metric" || k == "space" {
			return nil, fmt.Errorf("sweep: Create: study attr %q is set by Create itself; pass it as its argument, not in attrs", k)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, JournalFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		unlock()
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("sweep: %s already holds a sweep's record (%s): use --resume to continue it, or another dir for a new sweep", dir, JournalFile)
		}
		return nil, fmt.Errorf("sweep: %w", err)
	}
	syncDir(dir) // the new file's name survives a crash too
	j := &Journal{dir: dir, path: path, f: f, unlock: unlock, worker: newWorkerID(), rp: newReplay()}

	dirCode := 1
	if maximize {
		dirCode = 2
	}
	ops := []obj{
		{{"study_name", name}, {"directions", []any{dirCode}}},
		{{"study_id", 0}, {"user_attr", obj{{"metric", metric}}}},
		{{"study_id", 0}, {"user_attr", obj{{"space", spaceText(space)}}}},
	}
	codes := []int{opCreateStudy, opStudyUserAttr, opStudyUserAttr}
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ops = append(ops, obj{{"study_id", 0}, {"user_attr", obj{{k, attrs[k]}}}})
		codes = append(codes, opStudyUserAttr)
	}
	// One write for the lot: a study with no space cannot be resumed, so its lines go together.
	if err := j.append(codes, ops); err != nil {
		j.Close()
		os.Remove(path) // ours (O_EXCL above), and a study with no space is no sweep's record
		return nil, err
	}
	return j, nil
}

// Open opens an existing record for appending (resume): it reads the whole journal back into a
// *Study, truncates a torn last line (a kill mid-write: nothing is lost but that line) and
// refuses a file that is not a sweep's, naming the line and what is wrong.
func Open(dir string) (*Journal, *Study, error) {
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, nil, err
	}
	path := filepath.Join(dir, JournalFile)
	data, err := os.ReadFile(path)
	if err != nil {
		unlock()
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("sweep: %s holds no sweep's record (%s): start the sweep there without --resume", dir, JournalFile)
		}
		return nil, nil, fmt.Errorf("sweep: %w", err)
	}
	rp, whole, err := replayBytes(path, data)
	if err == nil {
		err = rp.checkSweep(path)
	}
	if err != nil {
		unlock()
		return nil, nil, err
	}
	j := &Journal{dir: dir, path: path, unlock: unlock, worker: newWorkerID(), rp: rp, size: int64(whole)}
	if whole < len(data) {
		if err := os.Truncate(path, int64(whole)); err != nil {
			unlock()
			return nil, nil, fmt.Errorf("sweep: removing the torn last line of %s: %w", path, err)
		}
		j.repaired = fmt.Sprintf("%s: its last line (line %d, %d bytes with no newline) was torn by a kill mid-write and is removed; every line before it is kept, so nothing else is lost",
			path, bytes.Count(data[:whole], []byte{'\n'})+1, len(data)-whole)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		unlock()
		return nil, nil, fmt.Errorf("sweep: %w", err)
	}
	j.f = f
	return j, j.Study(), nil
}

// Load reads a record without writing (nitro sweep ls/best, the board) and without the lock, so
// it may run beside the writing sweep: a torn last line (an append under way) is ignored. It
// reads any one-study Optuna journal; one with no nitro space gets its Space from the trials'
// distributions, in the order first seen.
func Load(dir string) (*Study, error) {
	path := filepath.Join(dir, JournalFile)
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("sweep: %s holds no sweep's record (%s)", dir, JournalFile)
		}
		return nil, fmt.Errorf("sweep: %w", err)
	}
	rp, _, err := replayBytes(path, data)
	if err != nil {
		return nil, err
	}
	if !rp.created {
		return nil, fmt.Errorf("sweep: %s holds no study yet (a sweep being created, or not a sweep's record)", path)
	}
	return rp.snapshot(), nil
}

// Repaired says what Open removed from the record (a torn last line), or "" when nothing: the
// caller prints it, so a resumed sweep says what it lost.
func (j *Journal) Repaired() string { return j.repaired }

// Dir is the sweep dir the journal is in.
func (j *Journal) Dir() string { return j.dir }

// StartTrial records a new trial, RUNNING from now, with its params (every param of the study's
// Space, in Optuna's internal form) and user attrs, and returns its number.
func (j *Journal) StartTrial(params map[string]float64, attrs map[string]any) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.usable(); err != nil {
		return 0, err
	}
	number := len(j.rp.study.Trials)
	space := j.rp.study.Space
	if err := space.Contains(params); err != nil {
		return 0, fmt.Errorf("sweep: trial %d: %w", number, err)
	}
	dists := obj{}
	vals := obj{}
	for _, p := range space {
		dists = append(dists, kv{p.Name, distributionJSON(p)})
		vals = append(vals, kv{p.Name, floatValue(params[p.Name])})
	}
	user := obj{}
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		user = append(user, kv{k, attrs[k]})
	}
	op := obj{{"study_id", 0}, {"datetime_start", stamp()}, {"state", 0},
		{"distributions", dists}, {"params", vals}, {"user_attrs", user}}
	if err := j.append([]int{opCreateTrial}, []obj{op}); err != nil {
		return 0, err
	}
	return number, nil
}

// Report records trial number's intermediate value at step (NaN included: Optuna keeps it).
func (j *Journal) Report(number, step int, value float64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.running(number); err != nil {
		return err
	}
	return j.append([]int{opIntermediate}, []obj{{{"trial_id", number}, {"step", step}, {"intermediate_value", floatValue(value)}}})
}

// Finish ends trial number in state (Complete, Pruned or Fail) with its value: a Complete trial
// needs a number, a Pruned one may have its last reported value, and a Fail has none (a value
// given is dropped), as Optuna records them.
func (j *Journal) Finish(number int, state State, value float64, hasValue bool) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.running(number); err != nil {
		return err
	}
	var values any
	switch state {
	case Complete:
		if !hasValue || math.IsNaN(value) {
			return fmt.Errorf("sweep: trial %d: a COMPLETE trial needs a value that is a number (got %v); record one without as FAIL", number, describeValue(value, hasValue))
		}
		values = []any{floatValue(value)}
	case Pruned:
		if hasValue {
			values = []any{floatValue(value)}
		}
	case Fail:
	default:
		return fmt.Errorf("sweep: trial %d: Finish takes COMPLETE, PRUNED or FAIL, not %q", number, state)
	}
	code, _ := stateCode(state)
	return j.append([]int{opTrialState}, []obj{{{"trial_id", number}, {"state", code}, {"values", values}, {"datetime_complete", stamp()}}})
}

// SetTrialAttr sets a user attr of trial number while it runs: Optuna's reader skips changes to a
// finished trial, so a failed trial's error is set before Finish.
func (j *Journal) SetTrialAttr(number int, key string, value any) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.running(number); err != nil {
		return err
	}
	return j.append([]int{opTrialUserAttr}, []obj{{{"trial_id", number}, {"user_attr", obj{{key, value}}}}})
}

// SetStudyAttr sets a user attr of the study; "metric" and "space" are Create's.
func (j *Journal) SetStudyAttr(key string, value any) error {
	if key == "metric" || key == "space" {
		return fmt.Errorf("sweep: study attr %q is fixed when the sweep is created", key)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.usable(); err != nil {
		return err
	}
	return j.append([]int{opStudyUserAttr}, []obj{{{"study_id", 0}, {"user_attr", obj{{key, value}}}}})
}

// Study is a deep copy of the record as it stands.
func (j *Journal) Study() *Study {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.rp.snapshot()
}

// Close releases the file and the sweep dir's lock.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	var err error
	if j.f != nil {
		err = j.f.Close()
		j.f = nil
	}
	if j.unlock != nil {
		if e := j.unlock(); err == nil {
			err = e
		}
		j.unlock = nil
	}
	return err
}

// Best is the best COMPLETE trial by the study's direction (the first of equals, as Optuna's).
func (s *Study) Best() (Trial, bool) {
	best := -1
	for i, t := range s.Trials {
		if t.State != Complete || !t.HasValue || math.IsNaN(t.Value) {
			continue
		}
		if best < 0 || (s.Maximize && t.Value > s.Trials[best].Value) || (!s.Maximize && t.Value < s.Trials[best].Value) {
			best = i
		}
	}
	if best < 0 {
		return Trial{}, false
	}
	return copyTrial(s.Trials[best]), true
}

func (j *Journal) usable() error {
	if j.f == nil {
		return fmt.Errorf("sweep: the journal of %s is closed", j.dir)
	}
	return j.broken
}

func (j *Journal) running(number int) error {
	if err := j.usable(); err != nil {
		return err
	}
	if number < 0 || number >= len(j.rp.study.Trials) {
		return fmt.Errorf("sweep: no trial %d in %s (it holds %d)", number, j.path, len(j.rp.study.Trials))
	}
	if s := j.rp.study.Trials[number].State; s != Running {
		return fmt.Errorf("sweep: trial %d is %s, and a finished trial is not changed", number, s)
	}
	return nil
}

// append writes ops as lines, fsyncs, and applies them to the state as read back from the very
// bytes written, so the state is what a reader of the file sees. A write that fails is cut back,
// so a later append does not land after a partial line.
func (j *Journal) append(codes []int, ops []obj) error {
	var buf bytes.Buffer
	start := make([]int, len(ops))
	for i, op := range ops {
		start[i] = buf.Len()
		line := append(obj{{"op_code", codes[i]}, {"worker_id", j.worker}}, op...)
		if err := encodeValue(&buf, line, 0); err != nil {
			return fmt.Errorf("sweep: %w", err)
		}
		buf.WriteByte('\n')
	}
	data := buf.Bytes()
	_, err := j.f.Write(data)
	if err == nil {
		err = j.f.Sync()
	}
	if err != nil {
		if terr := j.f.Truncate(j.size); terr != nil {
			j.broken = fmt.Errorf("sweep: %s: an append failed (%v) and could not be undone (%v): resume the sweep (--resume) to repair it", j.path, err, terr)
			return j.broken
		}
		return fmt.Errorf("sweep: writing %s: %w", j.path, err)
	}
	j.size += int64(len(data))
	for i := range ops {
		end := len(data)
		if i+1 < len(ops) {
			end = start[i+1]
		}
		v, err := parseJSON(data[start[i] : end-1])
		if err == nil {
			err = j.rp.apply(v, j.rp.lines+1)
		}
		if err != nil {
			return fmt.Errorf("sweep: %s: the line just written does not read back: %w", j.path, err)
		}
	}
	return nil
}

func stamp() string { return now().UTC().Format("2006-01-02T15:04:05.000000-07:00") }

func describeValue(v float64, has bool) string {
	if !has {
		return "none"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// --- replay ---

// replay is the study rebuilt from the journal's operations, one at a time.
type replay struct {
	study     Study
	created   bool
	haveSpace bool
	metric    bool
	dists     []map[string]Param // each trial's params' distributions
	lines     int                // whole lines applied
}

func newReplay() *replay {
	return &replay{study: Study{Attrs: map[string]any{}}}
}

// replayBytes replays data, the file at path, and returns the state and how many bytes of it are
// whole lines (the rest is a torn last line).
func replayBytes(path string, data []byte) (*replay, int, error) {
	rp := newReplay()
	whole := bytes.LastIndexByte(data, '\n') + 1
	for off, n := 0, 1; off < whole; n++ {
		end := off + bytes.IndexByte(data[off:], '\n')
		line := bytes.TrimSuffix(data[off:end], []byte{'\r'})
		off = end + 1
		v, err := parseJSON(line)
		if err != nil {
			return nil, 0, fmt.Errorf("sweep: %s line %d is not a JSON object (%v): the record is damaged or not a sweep's journal", path, n, err)
		}
		if err := rp.apply(v, n); err != nil {
			return nil, 0, fmt.Errorf("sweep: %s line %d: %w", path, n, err)
		}
	}
	return rp, whole, nil
}

// checkSweep refuses a record Open cannot resume: one without the study, metric or space a sweep
// writes when it is created.
func (rp *replay) checkSweep(path string) error {
	switch {
	case !rp.created:
		return fmt.Errorf("sweep: %s holds no study: not a sweep's record (or one whose creation was interrupted: remove it and start again)", path)
	case !rp.metric:
		return fmt.Errorf("sweep: %s: study %q has no \"metric\" user attr: not a nitro sweep's record (a sweep's creation was interrupted? remove it and start again)", path, rp.study.Name)
	case !rp.haveSpace:
		return fmt.Errorf("sweep: %s: study %q has no \"space\" user attr (its search space): not a nitro sweep's record (a sweep's creation was interrupted? remove it and start again)", path, rp.study.Name)
	}
	return nil
}

func (rp *replay) snapshot() *Study {
	s := rp.study
	s.Space = copySpace(rp.study.Space)
	s.Attrs = copyValue(rp.study.Attrs).(map[string]any)
	s.Trials = make([]Trial, len(rp.study.Trials))
	for i, t := range rp.study.Trials {
		s.Trials[i] = copyTrial(t)
	}
	return &s
}

func copyTrial(t Trial) Trial {
	c := t
	c.Params = make(map[string]float64, len(t.Params))
	for k, v := range t.Params {
		c.Params[k] = v
	}
	c.Intermediate = make(map[int]float64, len(t.Intermediate))
	for k, v := range t.Intermediate {
		c.Intermediate[k] = v
	}
	c.Attrs = copyValue(t.Attrs).(map[string]any)
	return c
}

func copySpace(s Space) Space {
	if s == nil {
		return nil
	}
	c := make(Space, len(s))
	for i, p := range s {
		c[i] = p
		c[i].Choices = append([]string(nil), p.Choices...)
	}
	return c
}

// copyValue deep-copies what the JSON reader makes.
func copyValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		c := make(map[string]any, len(v))
		for k, e := range v {
			c[k] = copyValue(e)
		}
		return c
	case []any:
		c := make([]any, len(v))
		for i, e := range v {
			c[i] = copyValue(e)
		}
		return c
	}
	return v
}

// apply applies one operation, line n of the file.
func (rp *replay) apply(v any, n int) error {
	op, ok := v.(map[string]any)
	if !ok {
		return errors.New("not a JSON object: the record is damaged or not a sweep's journal")
	}
	code, err := intField(op, "op_code")
	if err != nil {
		return err
	}
	if _, err := stringField(op, "worker_id"); err != nil {
		return err
	}
	if code != opCreateStudy && !rp.created {
		return fmt.Errorf("op_code %d comes before the study is created (op_code 0): not a sweep's journal", code)
	}
	switch code {
	case opCreateStudy:
		err = rp.createStudy(op)
	case opDeleteStudy:
		err = errors.New("op_code 1 deletes the study: not a sweep's journal")
	case opStudyUserAttr, opStudySystemAttr:
		err = rp.studyAttr(op, code == opStudySystemAttr)
	case opCreateTrial:
		err = rp.createTrial(op)
	case opTrialParam, opTrialState, opIntermediate, opTrialUserAttr, opTrialSystemAttr:
		err = rp.trialOp(op, code)
	case opDiscardTrials:
		// Written by another Optuna implementation; Optuna's own reader skips it too.
	default:
		err = fmt.Errorf("unknown op_code %d (Optuna's are 0 to 10): not a journal this nitro reads", code)
	}
	if err == nil {
		rp.lines = n
	}
	return err
}

func (rp *replay) createStudy(op map[string]any) error {
	name, err := stringField(op, "study_name")
	if err != nil {
		return err
	}
	if rp.created {
		if name == rp.study.Name {
			return nil // Optuna's reader ignores a second creation under the same name
		}
		return fmt.Errorf("a second study %q (the first is %q): a sweep's journal holds one study", name, rp.study.Name)
	}
	dirs, ok := op["directions"].([]any)
	if !ok || len(dirs) != 1 {
		return fmt.Errorf("directions %s: a sweep's study has one objective, [1] (minimize) or [2] (maximize)", show(op["directions"]))
	}
	d, ok := intValue(dirs[0])
	if !ok || (d != 1 && d != 2) {
		return fmt.Errorf("directions %s: a sweep's study has one objective, [1] (minimize) or [2] (maximize)", show(op["directions"]))
	}
	rp.created = true
	rp.study.Name = name
	rp.study.Maximize = d == 2
	return nil
}

func (rp *replay) studyAttr(op map[string]any, system bool) error {
	if err := rp.studyID(op); err != nil {
		return err
	}
	field := "user_attr"
	if system {
		field = "system_attr"
	}
	key, val, err := oneKey(op, field)
	if err != nil {
		return err
	}
	switch {
	case system:
		// Optuna's own bookkeeping (samplers', say): not part of a sweep.
	case key == "metric":
		s, ok := val.(string)
		if !ok || s == "" {
			return fmt.Errorf("user attr \"metric\" is %s, not the metric's name", show(val))
		}
		rp.study.Metric = s
		rp.metric = true
	case key == "space":
		space, err := parseSpaceText(val)
		if err != nil {
			return fmt.Errorf("user attr \"space\": %w", err)
		}
		if len(rp.study.Trials) > 0 {
			return errors.New("user attr \"space\" is set after trials ran: a sweep's space is fixed when it is created")
		}
		rp.study.Space = space
		rp.haveSpace = true
	default:
		rp.study.Attrs[key] = val
	}
	return nil
}

func (rp *replay) studyID(op map[string]any) error {
	id, err := intField(op, "study_id")
	if err != nil {
		return err
	}
	if id != 0 {
		return fmt.Errorf("study_id %d: a sweep's journal holds one study, id 0", id)
	}
	return nil
}

func (rp *replay) createTrial(op map[string]any) error {
	if err := rp.studyID(op); err != nil {
		return err
	}
	number := len(rp.study.Trials)
	t := Trial{Number: number, State: Running, Params: map[string]float64{}, Intermediate: map[int]float64{}, Attrs: map[string]any{}}
	if s, ok := op["state"]; ok {
		c, ok := intValue(s)
		if !ok || c < 0 || c >= len(stateCodes) {
			return fmt.Errorf("trial %d: state %s is not one of Optuna's (0 to 4)", number, show(s))
		}
		t.State = stateCodes[c]
	}
	if err := timeField(op, "datetime_start", true); err != nil {
		return fmt.Errorf("trial %d: %w", number, err)
	}
	if _, ok := op["datetime_complete"]; ok {
		if err := timeField(op, "datetime_complete", false); err != nil {
			return fmt.Errorf("trial %d: %w", number, err)
		}
	}
	dists := map[string]Param{}
	if d, ok := op["distributions"]; ok {
		m, ok := d.(map[string]any)
		if !ok {
			return fmt.Errorf("trial %d: distributions is %s, not an object", number, show(d))
		}
		for name, dj := range m {
			p, err := parseDistribution(name, dj)
			if err != nil {
				return fmt.Errorf("trial %d: %w", number, err)
			}
			dists[name] = p
		}
	}
	if pv, ok := op["params"]; ok {
		m, ok := pv.(map[string]any)
		if !ok {
			return fmt.Errorf("trial %d: params is %s, not an object", number, show(pv))
		}
		for name, v := range m {
			p, ok := dists[name]
			if !ok {
				return fmt.Errorf("trial %d: param %q has no distribution", number, name)
			}
			f, ok := v.(float64)
			if !ok {
				return fmt.Errorf("trial %d: param %q is %s, not a number", number, name, show(v))
			}
			if err := rp.checkParam(number, p, f); err != nil {
				return err
			}
			t.Params[name] = f
		}
		for name := range dists {
			if _, ok := m[name]; !ok {
				delete(dists, name) // Optuna keeps only the params that have values
			}
		}
	} else {
		dists = map[string]Param{}
	}
	if u, ok := op["user_attrs"]; ok {
		m, ok := u.(map[string]any)
		if !ok {
			return fmt.Errorf("trial %d: user_attrs is %s, not an object", number, show(u))
		}
		t.Attrs = m
	}
	if iv, ok := op["intermediate_values"]; ok {
		m, ok := iv.(map[string]any)
		if !ok {
			return fmt.Errorf("trial %d: intermediate_values is %s, not an object", number, show(iv))
		}
		for k, v := range m {
			step, err := strconv.Atoi(k)
			f, ok := v.(float64)
			if err != nil || !ok {
				return fmt.Errorf("trial %d: intermediate value %q: %s is not a step's number", number, k, show(v))
			}
			t.Intermediate[step] = f
		}
	}
	if vs, ok := op["values"]; ok && vs != nil {
		f, err := oneValue(vs)
		if err != nil {
			return fmt.Errorf("trial %d: %w", number, err)
		}
		t.Value, t.HasValue = f, true
	} else if v, ok := op["value"]; ok && v != nil {
		f, ok := v.(float64)
		if !ok {
			return fmt.Errorf("trial %d: value is %s, not a number", number, show(v))
		}
		t.Value, t.HasValue = f, true
	}
	rp.study.Trials = append(rp.study.Trials, t)
	rp.dists = append(rp.dists, dists)
	for _, p := range rp.study.Space.orderedIn(dists) {
		rp.deriveSpace(p)
	}
	return nil
}

// deriveSpace adds p to the Space of a study that records none (one Python wrote).
func (rp *replay) deriveSpace(p Param) {
	if rp.haveSpace || rp.study.Space.index(p.Name) >= 0 {
		return
	}
	rp.study.Space = append(rp.study.Space, p)
}

// checkParam refuses a trial param that the study's space disagrees with.
func (rp *replay) checkParam(number int, p Param, v float64) error {
	if !rp.haveSpace {
		return nil
	}
	i := rp.study.Space.index(p.Name)
	if i < 0 {
		return fmt.Errorf("trial %d: param %q is not in the study's space (%s)", number, p.Name, strings.Join(spaceNames(rp.study.Space), ", "))
	}
	if want := rp.study.Space[i]; !want.equal(p) {
		return fmt.Errorf("trial %d: param %q has distribution %s, and the study's space says %s", number, p.Name, distributionJSON(p), distributionJSON(want))
	}
	if err := p.contains(v); err != nil {
		return fmt.Errorf("trial %d: %w", number, err)
	}
	return nil
}

func (rp *replay) trialOp(op map[string]any, code int) error {
	id, err := intField(op, "trial_id")
	if err != nil {
		return err
	}
	if id < 0 || id >= len(rp.study.Trials) {
		return fmt.Errorf("trial_id %d: no such trial (the journal holds %d so far)", id, len(rp.study.Trials))
	}
	t := &rp.study.Trials[id]
	if t.State != Running && t.State != "WAITING" {
		return nil // Optuna's reader skips updates to a finished trial
	}
	switch code {
	case opTrialParam:
		name, err := stringField(op, "param_name")
		if err != nil {
			return err
		}
		v, ok := op["param_value_internal"].(float64)
		if !ok {
			return fmt.Errorf("trial %d: param %q: param_value_internal is %s, not a number", id, name, show(op["param_value_internal"]))
		}
		p, err := parseDistribution(name, op["distribution"])
		if err != nil {
			return fmt.Errorf("trial %d: %w", id, err)
		}
		// Optuna skips a param whose distribution differs from an earlier trial's.
		for _, d := range rp.dists {
			if prev, ok := d[name]; ok {
				if !compatible(prev, p) {
					return nil
				}
				break
			}
		}
		if err := rp.checkParam(id, p, v); err != nil {
			return err
		}
		t.Params[name] = v
		rp.dists[id][name] = p
		rp.deriveSpace(p)
	case opTrialState:
		c, err := intField(op, "state")
		if err != nil {
			return err
		}
		if c < 0 || c >= len(stateCodes) {
			return fmt.Errorf("trial %d: state %d is not one of Optuna's (0 to 4)", id, c)
		}
		state := stateCodes[c]
		if state == Running && t.State == Running {
			return nil // Optuna's reader: another worker already runs it
		}
		if state == Running {
			if err := timeField(op, "datetime_start", false); err != nil {
				return fmt.Errorf("trial %d: %w", id, err)
			}
		}
		if state != Running && state != "WAITING" {
			if err := timeField(op, "datetime_complete", false); err != nil {
				return fmt.Errorf("trial %d: %w", id, err)
			}
		}
		vs, ok := op["values"]
		if !ok {
			return fmt.Errorf("trial %d: no \"values\" field (null or [value])", id)
		}
		if vs != nil {
			f, err := oneValue(vs)
			if err != nil {
				return fmt.Errorf("trial %d: %w", id, err)
			}
			t.Value, t.HasValue = f, true
		}
		t.State = state
	case opIntermediate:
		step, err := intField(op, "step")
		if err != nil {
			return err
		}
		v, ok := op["intermediate_value"].(float64)
		if !ok {
			return fmt.Errorf("trial %d: intermediate_value is %s, not a number", id, show(op["intermediate_value"]))
		}
		t.Intermediate[step] = v
	case opTrialUserAttr:
		key, val, err := oneKey(op, "user_attr")
		if err != nil {
			return err
		}
		t.Attrs[key] = val
	case opTrialSystemAttr:
		if _, _, err := oneKey(op, "system_attr"); err != nil {
			return err
		}
	}
	return nil
}

// --- fields ---

func show(v any) string {
	var b bytes.Buffer
	if v == nil {
		return "null (or missing)"
	}
	if err := encodeValue(&b, v, 0); err != nil {
		return fmt.Sprintf("%v", v)
	}
	s := b.String()
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

func intValue(v any) (int, bool) {
	f, ok := v.(float64)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int(f), true
}

func intField(op map[string]any, key string) (int, error) {
	n, ok := intValue(op[key])
	if !ok {
		return 0, fmt.Errorf("%q is %s, not an integer", key, show(op[key]))
	}
	return n, nil
}

func stringField(op map[string]any, key string) (string, error) {
	s, ok := op[key].(string)
	if !ok {
		return "", fmt.Errorf("%q is %s, not a string", key, show(op[key]))
	}
	return s, nil
}

// timeField checks an ISO 8601 time, as Python's datetime.fromisoformat reads it; null is
// allowed where Optuna allows it.
func timeField(op map[string]any, key string, nullable bool) error {
	v := op[key]
	if v == nil && nullable {
		if _, ok := op[key]; ok {
			return nil
		}
	}
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("%q is %s, not a time", key, show(v))
	}
	if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
		if _, err2 := time.Parse("2006-01-02T15:04:05.999999999", s); err2 != nil {
			return fmt.Errorf("%q is %q, not an ISO 8601 time", key, s)
		}
	}
	return nil
}

// oneKey is an attr operation's object, which Optuna requires to hold one key.
func oneKey(op map[string]any, field string) (string, any, error) {
	m, ok := op[field].(map[string]any)
	if !ok || len(m) != 1 {
		return "", nil, fmt.Errorf("%q is %s, not an object with one key", field, show(op[field]))
	}
	for k, v := range m {
		return k, v, nil
	}
	return "", nil, nil
}

func oneValue(vs any) (float64, error) {
	a, ok := vs.([]any)
	if !ok || len(a) != 1 {
		return 0, fmt.Errorf("values %s: a sweep's trial has one value, [v]", show(vs))
	}
	f, ok := a[0].(float64)
	if !ok {
		return 0, fmt.Errorf("values %s: not a number", show(vs))
	}
	return f, nil
}

// --- space and distributions ---

func (s Space) index(name string) int {
	for i, p := range s {
		if p.Name == name {
			return i
		}
	}
	return -1
}

// orderedIn is dists' params, the space's first and in its order, then the rest by name (so a
// derived Space is deterministic).
func (s Space) orderedIn(dists map[string]Param) []Param {
	var out []Param
	for _, p := range s {
		if d, ok := dists[p.Name]; ok {
			out = append(out, d)
		}
	}
	var rest []string
	for name := range dists {
		if s.index(name) < 0 {
			rest = append(rest, name)
		}
	}
	sort.Strings(rest)
	for _, name := range rest {
		out = append(out, dists[name])
	}
	return out
}

// compatible is Optuna's rule for a param's distribution across trials: the same class, and for
// a choice the same choices.
func compatible(a, b Param) bool {
	floatish := func(k Kind) bool { return k == Uniform || k == LogUniform }
	switch {
	case floatish(a.Kind) && floatish(b.Kind):
		return a.Kind == b.Kind
	case a.Kind == Choice || b.Kind == Choice:
		return a.Kind == b.Kind && reflect.DeepEqual(a.Choices, b.Choices)
	}
	return a.Kind == b.Kind
}

// distributionJSON is p's distribution as Optuna serializes it (a JSON string inside the line).
func distributionJSON(p Param) string {
	var b bytes.Buffer
	switch p.Kind {
	case Uniform, LogUniform:
		fmt.Fprintf(&b, `{"name": "FloatDistribution", "attributes": {"step": null, "low": %s, "high": %s, "log": %t}}`,
			pyFloat(p.Low), pyFloat(p.High), p.Kind == LogUniform)
	case Int:
		fmt.Fprintf(&b, `{"name": "IntDistribution", "attributes": {"log": false, "step": 1, "low": %d, "high": %d}}`, int64(p.Low), int64(p.High))
	case Choice:
		b.WriteString(`{"name": "CategoricalDistribution", "attributes": {"choices": [`)
		for i, c := range p.Choices {
			if i > 0 {
				b.WriteString(", ")
			}
			_ = encodeValue(&b, c, 0)
		}
		b.WriteString(`]}}`)
	}
	return b.String()
}

// parseDistribution reads a param's distribution (a JSON string) into a Param: the kinds nitro
// has, and the older Optuna classes that mean the same.
func parseDistribution(name string, dj any) (Param, error) {
	s, ok := dj.(string)
	if !ok {
		return Param{}, fmt.Errorf("param %q: distribution is %s, not a JSON string", name, show(dj))
	}
	v, err := parseJSON([]byte(s))
	m, ok := v.(map[string]any)
	if err != nil || !ok {
		return Param{}, fmt.Errorf("param %q: distribution %q is not a JSON object", name, s)
	}
	bad := func(why string) (Param, error) {
		return Param{}, fmt.Errorf("param %q: distribution %s: %s", name, s, why)
	}
	p := Param{Name: name}
	attrs, _ := m["attributes"].(map[string]any)
	class, _ := m["name"].(string)
	if class == "" { // Optuna's abbreviated form
		attrs = m
		t, _ := m["type"].(string)
		switch t {
		case "float":
			class = "FloatDistribution"
		case "int":
			class = "IntDistribution"
		case "categorical":
			class = "CategoricalDistribution"
		default:
			return bad("no distribution class or type")
		}
	}
	if attrs == nil {
		return bad("no attributes")
	}
	num := func(k string) (float64, bool) {
		f, ok := attrs[k].(float64)
		return f, ok && !math.IsNaN(f) && !math.IsInf(f, 0)
	}
	switch class {
	case "FloatDistribution", "UniformDistribution", "LogUniformDistribution":
		if st, ok := attrs["step"]; ok && st != nil {
			return bad("a float with a step has no nitro kind")
		}
		p.Kind = Uniform
		if l, _ := attrs["log"].(bool); l || class == "LogUniformDistribution" {
			p.Kind = LogUniform
		}
	case "IntDistribution", "IntUniformDistribution":
		if l, _ := attrs["log"].(bool); l {
			return bad("a log-scaled int has no nitro kind")
		}
		if st, ok := attrs["step"]; ok && st != nil {
			if n, ok := intValue(st); !ok || n != 1 {
				return bad("an int with a step other than 1 has no nitro kind")
			}
		}
		p.Kind = Int
	case "CategoricalDistribution":
		cs, ok := attrs["choices"].([]any)
		if !ok || len(cs) == 0 {
			return bad("no choices")
		}
		p.Kind = Choice
		for _, c := range cs {
			p.Choices = append(p.Choices, choiceText(c))
		}
		return p, nil
	default:
		return bad("the class has no nitro kind")
	}
	var okl, okh bool
	p.Low, okl = num("low")
	p.High, okh = num("high")
	if !okl || !okh {
		return bad("low and high must be numbers")
	}
	if p.Low > p.High || (p.Kind == LogUniform && p.Low <= 0) {
		return bad("low <= high (and low > 0 when log) must hold")
	}
	return p, nil
}

// choiceText is a choice Python recorded (a str, int, float, bool or None) as text.
func choiceText(c any) string {
	switch c := c.(type) {
	case string:
		return c
	case nil:
		return "None"
	case bool:
		if c {
			return "True"
		}
		return "False"
	case float64:
		return strconv.FormatFloat(c, 'g', -1, 64)
	}
	return show(c)
}

// spaceText is the space as the "space" user attr holds it: each param as --param writes it.
func spaceText(space Space) []any {
	out := make([]any, len(space))
	for i, p := range space {
		out[i] = p.String()
	}
	return out
}

// parseSpaceText reads the "space" user attr back.
func parseSpaceText(v any) (Space, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s is not a list of params", show(v))
	}
	space := make(Space, 0, len(a))
	for _, e := range a {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("%s is not a param's text", show(e))
		}
		p, err := ParseParam(s)
		if err != nil {
			return nil, err
		}
		space = append(space, p)
	}
	if err := space.Check(); err != nil {
		return nil, err
	}
	return space, nil
}

// --- JSON, as Python's json module writes and reads it ---

// kv and obj are a JSON object with its keys in the order written.
type kv struct {
	k string
	v any
}
type obj []kv

// floatValue marks a float to be written with a decimal point or exponent, so Python reads a
// float (8.0, not the int 8).
type floatValue float64

// pyFloat is f as Python's json module writes a float.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

const maxDepth = 200

// encodeValue writes v as JSON, with NaN and ±Inf bare as Python writes them, map keys sorted, and
// anything it does not know by encoding/json.
func encodeValue(b *bytes.Buffer, v any, depth int) error {
	if depth > maxDepth {
		return errors.New("a value nests too deep to record")
	}
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case string:
		enc, _ := json.Marshal(v)
		b.Write(enc)
	case floatValue:
		b.WriteString(pyFloat(float64(v)))
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1e15 {
			b.WriteString(strconv.FormatFloat(v, 'f', -1, 64)) // an integral float stays an int, as encoding/json writes it
		} else {
			b.WriteString(pyFloat(v))
		}
	case float32:
		return encodeValue(b, float64(v), depth)
	case int:
		b.WriteString(strconv.Itoa(v))
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case int32:
		b.WriteString(strconv.FormatInt(int64(v), 10))
	case uint64:
		b.WriteString(strconv.FormatUint(v, 10))
	case uint:
		b.WriteString(strconv.FormatUint(uint64(v), 10))
	case obj:
		b.WriteByte('{')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			enc, _ := json.Marshal(e.k)
			b.Write(enc)
			b.WriteByte(':')
			if err := encodeValue(b, e.v, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		o := make(obj, len(keys))
		for i, k := range keys {
			o[i] = kv{k, v[k]}
		}
		return encodeValue(b, o, depth)
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := encodeValue(b, e, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case []string:
		a := make([]any, len(v))
		for i, e := range v {
			a[i] = e
		}
		return encodeValue(b, a, depth)
	case []float64:
		a := make([]any, len(v))
		for i, e := range v {
			a[i] = e
		}
		return encodeValue(b, a, depth)
	case []int:
		a := make([]any, len(v))
		for i, e := range v {
			a[i] = e
		}
		return encodeValue(b, a, depth)
	case map[string]string:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = e
		}
		return encodeValue(b, m, depth)
	case map[string]float64:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = e
		}
		return encodeValue(b, m, depth)
	default:
		enc, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("a value of type %T cannot be recorded as JSON: %w", v, err)
		}
		b.Write(enc)
	}
	return nil
}

// parseJSON reads one JSON value as Python's json module does: NaN, Infinity and -Infinity are
// numbers. Objects become map[string]any, arrays []any, numbers float64.
func parseJSON(data []byte) (any, error) {
	p := jsonParser{data: data}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.pos != len(p.data) {
		return nil, fmt.Errorf("unexpected %s after the value at byte %d", p.near(), p.pos+1)
	}
	return v, nil
}

type jsonParser struct {
	data []byte
	pos  int
}

func (p *jsonParser) space() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) near() string {
	if p.pos >= len(p.data) {
		return "end of line"
	}
	end := min(p.pos+10, len(p.data))
	return strconv.Quote(string(p.data[p.pos:end]))
}

func (p *jsonParser) fail(what string) error {
	return fmt.Errorf("%s at byte %d (found %s)", what, p.pos+1, p.near())
}

func (p *jsonParser) literal(word string) bool {
	if bytes.HasPrefix(p.data[p.pos:], []byte(word)) {
		p.pos += len(word)
		return true
	}
	return false
}

func (p *jsonParser) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, p.fail("nesting too deep")
	}
	if p.pos >= len(p.data) {
		return nil, p.fail("a value expected")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		p.pos++
		m := map[string]any{}
		p.space()
		if p.pos < len(p.data) && p.data[p.pos] == '}' {
			p.pos++
			return m, nil
		}
		for {
			p.space()
			if p.pos >= len(p.data) || p.data[p.pos] != '"' {
				return nil, p.fail("a key expected")
			}
			k, err := p.str()
			if err != nil {
				return nil, err
			}
			p.space()
			if p.pos >= len(p.data) || p.data[p.pos] != ':' {
				return nil, p.fail("':' expected")
			}
			p.pos++
			p.space()
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			m[k] = v
			p.space()
			if p.pos < len(p.data) && p.data[p.pos] == ',' {
				p.pos++
				continue
			}
			if p.pos < len(p.data) && p.data[p.pos] == '}' {
				p.pos++
				return m, nil
			}
			return nil, p.fail("',' or '}' expected")
		}
	case c == '[':
		p.pos++
		a := []any{}
		p.space()
		if p.pos < len(p.data) && p.data[p.pos] == ']' {
			p.pos++
			return a, nil
		}
		for {
			p.space()
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
			p.space()
			if p.pos < len(p.data) && p.data[p.pos] == ',' {
				p.pos++
				continue
			}
			if p.pos < len(p.data) && p.data[p.pos] == ']' {
				p.pos++
				return a, nil
			}
			return nil, p.fail("',' or ']' expected")
		}
	case c == '"':
		return p.str()
	case p.literal("true"):
		return true, nil
	case p.literal("false"):
		return false, nil
	case p.literal("null"):
		return nil, nil
	case p.literal("NaN"):
		return math.NaN(), nil
	case p.literal("Infinity"):
		return math.Inf(1), nil
	case p.literal("-Infinity"):
		return math.Inf(-1), nil
	case c == '-' || (c >= '0' && c <= '9'):
		start := p.pos
		for p.pos < len(p.data) && strings.IndexByte("+-.eE0123456789", p.data[p.pos]) >= 0 {
			p.pos++
		}
		text := string(p.data[start:p.pos])
		if !json.Valid([]byte(text)) {
			p.pos = start
			return nil, p.fail("a malformed number")
		}
		f, err := strconv.ParseFloat(text, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			p.pos = start
			return nil, p.fail("a malformed number")
		}
		return f, nil // out of range: ±Inf or 0, as Python's float() reads it
	}
	return nil, p.fail("a value expected")
}

// str reads a JSON string; encoding/json decodes its escapes.
func (p *jsonParser) str() (string, error) {
	start := p.pos
	p.pos++
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case '\\':
			p.pos += 2
			continue
		case '"':
			p.pos++
			var s string
			if err := json.Unmarshal(p.data[start:p.pos], &s); err != nil {
				p.pos = start
				return "", p.fail("a malformed string")
			}
			return s, nil
		}
		p.pos++
	}
	p.pos = start
	return "", p.fail("an unterminated string")
}

// syncDir fsyncs a directory, so a file created in it survives a crash; best effort.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
