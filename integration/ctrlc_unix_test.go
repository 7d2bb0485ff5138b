//go:build unix

package integration_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/internal/prereq"
)

// TestCtrlCStopsAProgramGracefully: a program of the README's shape (signal.NotifyContext, then
// TrainContext), built and started as its user would, gets a real SIGINT while it trains. It
// exits 0 after stopping at a step boundary, and its last checkpoint records stop reason
// "requested". The same program calling plain Train dies of the signal with none.
func TestCtrlCStopsAProgramGracefully(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	pjrtDir := filepath.Dir(prereq.Plugin(t))
	bin := filepath.Join(t.TempDir(), "ctrlc")
	build := exec.Command("go", "build", "-o", bin, "./integration/testdata/ctrlc")
	build.Dir = root // go.work resolves nitro's modules
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./integration/testdata/ctrlc: %v\n%s", err, out)
	}

	dir := t.TempDir()
	// docTimeout stops a hang; nothing here is timed.
	ctx, cancel := context.WithTimeout(context.Background(), docTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, bin)
	c.Dir = dir
	c.Env = append(os.Environ(), "NITRO_PJRT_DIR="+pjrtDir)
	runDir := filepath.Join(dir, "runs", "Curve")
	out, exited := startTraining(t, c, runDir)
	if err := c.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = <-exited
	if ctx.Err() != nil {
		t.Fatalf("still running %v after SIGINT:\n%s", docTimeout, tail(out.Bytes()))
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Fatalf("after SIGINT the program exited with %v (want status 0, a graceful stop):\n%s", exit, tail(out.Bytes()))
	} else if err != nil {
		t.Fatal(err)
	}
	entries, err := checkpoint.ReadManifest(runDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		t.Fatalf("%s lists no checkpoint after a graceful stop:\n%s", runDir, tail(out.Bytes()))
	}
	last := entries[len(entries)-1]
	h, err := checkpoint.Info(filepath.Join(runDir, last.File))
	if err != nil {
		t.Fatal(err)
	}
	if last.StopReason != "requested" || h.StopReason != "requested" {
		t.Errorf("the last checkpoint (%s, epoch %d step %d) records stop reason %q (manifest %q), want requested",
			last.File, h.Epoch, h.Step, h.StopReason, last.StopReason)
	}
	if !strings.Contains(out.String(), "stopped: requested") {
		t.Errorf("the program does not report the requested stop:\n%s", tail(out.Bytes()))
	}
}

// startTraining starts c and returns once runDir's metrics.jsonl has a train line (polled, as
// the program says nothing else), with c's output so far and a channel that gets c.Wait's error.
func startTraining(t *testing.T, c *exec.Cmd, runDir string) (*lockedBuffer, <-chan error) {
	t.Helper()
	out := &lockedBuffer{}
	c.Stdout, c.Stderr = out, out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	waitUntil(t, exited, out, "trained", func() bool { return hasTrainLine(filepath.Join(runDir, "metrics.jsonl")) })
	return out, exited
}

// waitUntil polls done every 20 ms until it holds; the program ending first (exited) fails the
// test, saying what it had not done yet.
func waitUntil(t *testing.T, exited <-chan error, out *lockedBuffer, what string, done func() bool) {
	t.Helper()
	for !done() {
		select {
		case err := <-exited:
			t.Fatalf("the program exited (%v) before it %s:\n%s", err, what, tail(out.Bytes()))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// hasTrainLine reports whether a metrics.jsonl holds a "train" metrics line yet.
func hasTrainLine(path string) bool { return lastTrainStep(path) > 0 }

// lastTrainStep is the step of a metrics.jsonl's last "train" metrics line so far (0: none yet).
// It reads a file still being written: a line that does not parse is skipped (readRecord, once the
// run has ended, refuses one).
func lastTrainStep(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	step := 0
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		var line recordLine
		if json.Unmarshal(s.Bytes(), &line) == nil && line.isTrain() {
			step = line.Step
		}
	}
	return step
}
