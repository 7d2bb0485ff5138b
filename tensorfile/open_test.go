//go:build unix

package tensorfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// OpenRegular refuses a named pipe with no writer at once (a plain open would wait forever), and
// a directory with EISDIR; a regular file opens and reads.
func TestOpenRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "metrics.jsonl")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, _, err := OpenRegular(fifo); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file (p") {
			t.Errorf("a FIFO: err = %v, want not a regular file", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OpenRegular on a FIFO with no writer is still waiting after 10 s")
	}
	if _, _, err := OpenRegular(dir); !errors.Is(err, syscall.EISDIR) {
		t.Errorf("a directory: err = %v, want EISDIR", err)
	}
	file := filepath.Join(dir, "f")
	os.WriteFile(file, []byte("abc"), 0o644)
	f, st, err := OpenRegular(file)
	if err != nil || st.Size() != 3 {
		t.Fatalf("a regular file: %v, %v", st, err)
	}
	defer f.Close()
	b := make([]byte, 4)
	if n, _ := f.Read(b); string(b[:n]) != "abc" {
		t.Errorf("read %q, want abc", b[:n])
	}
}
