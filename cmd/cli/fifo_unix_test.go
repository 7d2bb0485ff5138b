//go:build unix

package cli_test

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nitro-go/nitro/checkpoint"
)

// TestRunDirReadersRefuseAFIFO: a named pipe where a run dir's file should be (metrics.jsonl,
// manifest.json, a checkpoint) makes plot, ls and info fail at once, naming the file, instead of
// waiting forever for a writer (plot opened metrics.jsonl with os.Open and hung).
func TestRunDirReadersRefuseAFIFO(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "epoch-0001.safetensors")
	for _, name := range []string{"metrics.jsonl", checkpoint.ManifestName, filepath.Base(ckpt)} {
		if err := syscall.Mkfifo(filepath.Join(dir, name), 0o644); err != nil {
			t.Skipf("no named pipes here: %v", err)
		}
	}
	for _, args := range [][]string{
		{"plot", dir},
		{"plot", filepath.Join(dir, "metrics.jsonl")},
		{"ls", dir},
		{"info", ckpt},
	} {
		type result struct {
			code      int
			out, errs string
		}
		done := make(chan result, 1)
		go func() {
			code, out, errs := runCLI(args...)
			done <- result{code, out, errs}
		}()
		select {
		case r := <-done:
			if r.code != 1 || !strings.Contains(r.errs, "not a regular file") {
				t.Errorf("%v: exit %d, stderr %q; want 1 and the FIFO refused as not a regular file", args, r.code, r.errs)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%v: still waiting on the FIFO after 10 s", args)
		}
	}
}
