//go:build linux

package logjson

import (
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
