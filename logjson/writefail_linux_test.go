//go:build linux

package logjson

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A write that fails (here /dev/full: every write is ENOSPC) comes back from the call that made
// it, naming the file and the cause; nothing is counted as written, Finish reports its own
// failure and stays retryable, and the logger is not marked finished by a finish line that
// never reached the file.
func TestJSONLoggerWriteFailure(t *testing.T) {
	const path = "/dev/full"
	l := NewJSONLogger(path)
	check := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), path) || !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("%s on %s: %v; want an error naming the file and wrapping ENOSPC", what, path, err)
		}
	}
	check("LogParams", l.LogParams(map[string]any{"seed": 1}))
	check("LogMetrics", l.LogMetrics(Metrics{Context: ContextTrain, Epoch: 1, Step: 1, Values: map[string]float64{"loss": 0.5}}))
	check("LogOther", l.LogOther("k", "v"))
	if l.lines != 0 {
		t.Errorf("%d lines counted as written after every write failed", l.lines)
	}
	check("Finish", l.Finish(StatusCompleted))
	// The finish line did not land: Finish again retries it (with the first status), and a
	// write in between is still a write error, not ErrFinished.
	if err := l.LogOther("k", "v"); errors.Is(err, ErrFinished) {
		t.Errorf("LogOther after a failed Finish: %v; the logger is not finished", err)
	}
	check("second Finish", l.Finish(StatusError))
	if l.status != StatusCompleted {
		t.Errorf("status %q after a failed Finish and a retry with another; want the first, %q", l.status, StatusCompleted)
	}
}

// A file that cannot be opened is an error from the first write, naming what failed; the
// logger keeps no half-open state, so the same error comes again rather than a nil-file panic.
func TestJSONLoggerOpenFailure(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{dir, filepath.Join(blocker, "metrics.jsonl")} { // a folder; a path under a file
		l := NewJSONLogger(path)
		for i := range 2 {
			err := l.LogOther("k", "v")
			if err == nil || !strings.HasPrefix(err.Error(), "logjson: ") || !strings.Contains(err.Error(), dir) {
				t.Errorf("%s, write %d: %v; want a logjson error naming the path", path, i+1, err)
			}
		}
	}
}

// A write cut short mid-line (here by a file size limit: EFBIG after part of the line) leaves a
// torn line, and the next line starts on a new line of its own: every complete line stays one
// JSON object. It was appended to the torn part, spoiling both.
func TestJSONLoggerTornWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	l := NewJSONLogger(path)
	if err := l.LogOther("first", "line"); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	// Go ignores SIGXFSZ, so the write past the limit returns EFBIG instead of killing the test.
	limit := syscall.Rlimit{Cur: uint64(st.Size()) + 10, Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &limit); err != nil {
		t.Fatal(err)
	}
	err = l.LogOther("second", strings.Repeat("x", 100))
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("the write past the size limit: %v, want EFBIG", err)
	}
	if err := l.LogOther("third", "line"); err != nil {
		t.Fatal(err)
	}
	if err := l.Finish(StatusCompleted); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 4 || len(lines[1]) != 10 {
		t.Fatalf("want the first line, the 10 torn bytes, the third line and the finish line; got %d lines:\n%s", len(lines), b)
	}
	for _, i := range []int{0, 2, 3} {
		var v map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &v); err != nil {
			t.Errorf("line %d is not one JSON object: %v\n%s", i+1, err, lines[i])
		}
	}
}
