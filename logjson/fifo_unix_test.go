//go:build unix

package logjson

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestJSONLoggerRefusesANamedPipe: a named pipe where the record should be (a run dir's
// metrics.jsonl) is refused at the first write, naming it, instead of taking the lines until the
// pipe fills and then stopping the run; a symbolic link to a stream (/dev/stdout) is the user's
// choice and still written.
func TestJSONLoggerRefusesANamedPipe(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	l := NewJSONLogger(path)
	done := make(chan error, 1)
	go func() { done <- l.LogParams(map[string]any{"seed": 1}) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("LogParams into a named pipe: %v, want it refused as not a regular file, naming it", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("LogParams into a named pipe is still waiting after 10 s")
	}
	l.Finish(StatusCompleted)

	link := filepath.Join(t.TempDir(), "metrics.jsonl")
	if err := os.Symlink(os.DevNull, link); err != nil {
		t.Fatal(err)
	}
	if err := NewJSONLogger(link).LogParams(map[string]any{"seed": 1}); err != nil {
		t.Errorf("LogParams through a link to %s: %v", os.DevNull, err)
	}
}
