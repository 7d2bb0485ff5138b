//go:build unix

package cli_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/cmd/cli"
)

// childArgs, when set, makes this test binary run the CLI on its value, split at the unit
// separator (an environment value cannot hold NUL), instead of the tests: the supervisor test's
// way to have a nitro process it can SIGKILL.
const childArgs = "NITRO_CLI_TEST_CHILD_ARGS"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(childArgs); ok {
		os.Exit(cli.Main(strings.Split(args, "\x1f"), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// supervisedTrain is the command a supervisor restarts: a short MNIST run that checkpoints
// every epoch, continued with --resume auto after every kill.
func supervisedTrain(runDir string) []string {
	return []string{"train", "mnist-mlp", "--preset", "tiny", "--max-epochs", "4", "--no-progress",
		"--set", "TrainLimit=2000", "--set", "TestLimit=200", "--run-dir", runDir, "--resume", "auto"}
}

// TestSupervisorRestartLoop is a supervisor (Kubernetes, Slurm's requeue, systemd) that SIGKILLs
// `nitro train --resume auto` at random and restarts the same command until it exits 0. Every
// trial must finish, and with a final checkpoint whose tensors (parameters and optimizer state)
// are bit for bit those of an uninterrupted run. The first kill of each trial lands after the
// run started its record and before its first checkpoint: resume auto used to refuse that run
// dir, and the loop was stuck. $NITRO_SUPERVISOR_TRIALS sets the trials (default 2; the long
// form is 20: scripts/supervisor-loop.sh).
func TestSupervisorRestartLoop(t *testing.T) {
	trials := 2
	if s := os.Getenv("NITRO_SUPERVISOR_TRIALS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("$NITRO_SUPERVISOR_TRIALS = %q: want a positive count", s)
		}
		trials = n
	}
	ref := t.TempDir()
	start := time.Now()
	if killed, log := superviseOnce(t, ref, -1, nil, 0); killed {
		t.Fatalf("the uninterrupted run was killed:\n%s", log)
	}
	whole := time.Since(start) // kills land anywhere in a run's life, setup included
	want := finalTensors(t, ref)
	kills, attempts := 0, 0
	for trial := range trials {
		dir := t.TempDir()
		rng := rand.New(rand.NewPCG(uint64(trial), 7))
		for attempt := 0; ; attempt++ {
			attempts++
			killed, log := superviseOnce(t, dir, attempt, rng, whole)
			if !killed {
				break
			}
			kills++
			if attempt == 0 && hasCheckpoint(t, dir) {
				t.Fatalf("trial %d: the first kill came after a checkpoint; it must land before one\n%s", trial, log)
			}
		}
		got := finalTensors(t, dir)
		if len(got) != len(want) {
			t.Fatalf("trial %d: the final checkpoint holds %d tensors, the uninterrupted run's %d", trial, len(got), len(want))
		}
		for name, w := range want {
			if g, ok := got[name]; !ok || !bytes.Equal(g, w) {
				t.Errorf("trial %d: tensor %s differs from the uninterrupted run's", trial, name)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "metrics.attempt-1.jsonl")); err != nil {
			t.Errorf("trial %d: the record of the run killed before its first checkpoint was not kept: %v", trial, err)
		}
	}
	t.Logf("%d trials, %d runs, %d SIGKILLs: every trial finished bitwise equal to the uninterrupted run", trials, attempts, kills)
}

// superviseOnce starts the command as a child and kills it: on attempt 0 once its record has a
// line and before any checkpoint; on attempts 1 to 8 after a random delay of up to 1.5 times an
// uninterrupted run's wall time (whole), unless it exits first; later ones (and attempt -1, the
// reference run) not at all, so that every trial ends. It reports whether it killed the child,
// and the child's output.
func superviseOnce(t *testing.T, dir string, attempt int, rng *rand.Rand, whole time.Duration) (killed bool, log string) {
	t.Helper()
	var out bytes.Buffer
	c := exec.Command(os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), childArgs+"="+strings.Join(supervisedTrain(dir), "\x1f"))
	c.Stdout, c.Stderr = &out, &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	var at <-chan time.Time
	if attempt > 0 && attempt <= 8 {
		at = time.After(time.Duration(rng.Int64N(int64(whole) * 3 / 2)))
	}
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	deadline := time.After(5 * time.Minute)
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("attempt %d exited on its own with %v, not 0:\n%s", attempt, err, out.String())
			}
			return false, out.String()
		case <-at:
		case <-poll.C:
			if attempt != 0 {
				continue
			}
			if fi, err := os.Stat(filepath.Join(dir, "metrics.jsonl")); err != nil || fi.Size() == 0 || hasCheckpoint(t, dir) {
				continue
			}
		case <-deadline:
			c.Process.Kill()
			t.Fatalf("attempt %d still running after 5 minutes:\n%s", attempt, out.String())
		}
		c.Process.Signal(syscall.SIGKILL)
		if err := <-done; err == nil {
			return false, out.String() // it finished before the signal landed
		}
		return true, out.String()
	}
}

func hasCheckpoint(t *testing.T, dir string) bool {
	entries, err := checkpoint.ReadManifest(dir)
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	return len(entries) > 0
}

// finalTensors reads the newest checkpoint the run dir's manifest lists, by tensor name.
func finalTensors(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := checkpoint.ReadManifest(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("%s: no checkpoint listed (%v)", dir, err)
	}
	newest := entries[0]
	for _, e := range entries {
		if e.Step > newest.Step {
			newest = e
		}
	}
	r, err := checkpoint.Read(filepath.Join(dir, newest.File))
	if err != nil {
		t.Fatal(err)
	}
	if r.StopReason != "completed" {
		t.Fatalf("%s: the newest checkpoint's stop reason is %q, want completed", newest.File, r.StopReason)
	}
	out := map[string][]byte{}
	for _, x := range r.Tensors {
		out[x.Name] = x.Data
	}
	return out
}
