//go:build unix

package integration_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/internal/prereq"
)

// TestGPTResumesFromAStepCheckpointAfterKill9: a step-based GPT run (checkpoints every 40 steps,
// validation every 20, epochs of 30 steps, so each checkpoint but the last lies inside an epoch)
// is SIGKILLed between two step checkpoints. `--resume auto` continues from the newest one, at its
// data position inside the epoch, and ends bitwise where the uninterrupted run ends: every step's
// loss, and every tensor of the last checkpoint (parameters, Adam's moments, the RNG).
func TestGPTResumesFromAStepCheckpointAfterKill9(t *testing.T) {
	pjrtDir := filepath.Dir(prereq.Plugin(t))
	bin := buildProgram(t, "./cmd/nitro")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// The tiny preset, widened so that a step takes milliseconds and a kill can land between two
	// checkpoints; the step count makes the last epoch end part-way.
	train := func(runDir string, more ...string) *exec.Cmd {
		args := append([]string{"train", "gpt", "--preset", "tiny", "--run-dir", runDir, "--no-progress",
			"--set", "Dim=64", "--set", "Context=64", "--set", "BatchSize=16",
			"--max-steps", "160", "--val-every", "20", "--checkpoint-every", "40"}, more...)
		c := exec.CommandContext(ctx, bin, args...)
		c.Env = append(os.Environ(), "NITRO_PJRT_DIR="+pjrtDir)
		return c
	}
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref")
	if out, err := train(ref).CombinedOutput(); err != nil {
		t.Fatalf("uninterrupted run: %v\n%s", err, tail(out))
	}
	want := readRecord(t, ref)
	if len(want.steps) != 160 {
		t.Fatalf("the uninterrupted run logged %d steps, want 160", len(want.steps))
	}

	var ckpt *checkpoint.Header
	var runDir string
	var logged int
	for try := range 3 {
		runDir = filepath.Join(dir, "killed", string(rune('a'+try)))
		c := train(runDir)
		out, exited := startTraining(t, c, runDir)
		// Kill once a checkpoint inside an epoch is listed and a few steps past it are logged.
		waitUntil(t, exited, out, "trained past a step checkpoint", func() bool {
			h := newestHeader(runDir)
			return h != nil && h.Step < 160 && lastTrainStep(filepath.Join(runDir, "metrics.jsonl")) >= h.Step+3
		})
		if err := syscall.Kill(c.Process.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-exited
		ckpt, logged = newestHeader(runDir), lastTrainStep(filepath.Join(runDir, "metrics.jsonl"))
		p := ckpt.Position
		if ckpt.Step%40 == 0 && logged > ckpt.Step && logged < ckpt.Step+40 && p.Batch > 0 && p.Batch < p.EpochBatches {
			t.Logf("killed at step %d; the newest checkpoint is at step %d, epoch %d, batch %d of %d", logged, ckpt.Step, p.Epoch, p.Batch, p.EpochBatches)
			break
		}
		t.Logf("the kill landed at step %d with the newest checkpoint at step %d (position %+v): again", logged, ckpt.Step, p)
		ckpt = nil
	}
	if ckpt == nil {
		t.Fatal("no kill landed between two step checkpoints inside an epoch in 3 tries")
	}
	noLeftovers(t, runDir)
	if out, err := train(runDir, "--resume", "auto").CombinedOutput(); err != nil {
		t.Fatalf("resume: %v\n%s", err, tail(out))
	}
	got := readRecord(t, runDir)
	order := append(stepRange(1, logged), stepRange(ckpt.Step+1, 160)...)
	if !slices.Equal(got.steps, order) {
		t.Fatalf("train lines are steps %s, want %s", spans(got.steps), spans(order))
	}
	for i, s := range got.steps {
		if got.loss[i] != want.loss[s-1] {
			t.Errorf("step %d: loss %v after the kill and resume, %v uninterrupted: want them bitwise equal", s, got.loss[i], want.loss[s-1])
		}
	}
	a, b := lastCheckpoint(t, runDir), lastCheckpoint(t, ref)
	if a.Step != 160 || b.Step != 160 || len(a.Tensors) != len(b.Tensors) {
		t.Fatalf("last checkpoints at steps %d and %d (want 160), %d and %d tensors", a.Step, b.Step, len(a.Tensors), len(b.Tensors))
	}
	for i, x := range a.Tensors {
		if y := b.Tensors[i]; x.Name != y.Name || !bytes.Equal(x.Data, y.Data) {
			t.Errorf("tensor %s differs from the uninterrupted run's %s", x.Name, y.Name)
		}
	}
	noLeftovers(t, runDir)
}

// newestHeader is the header of runDir's newest listed checkpoint, nil when there is none yet.
func newestHeader(runDir string) *checkpoint.Header {
	path, ok, err := checkpoint.Newest(runDir)
	if err != nil || !ok {
		return nil
	}
	h, err := checkpoint.Info(path)
	if err != nil {
		return nil
	}
	return h
}
