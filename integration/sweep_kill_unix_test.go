//go:build unix

package integration_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nitro-go/nitro/internal/prereq"
	"github.com/nitro-go/nitro/sweep"
)

// TestSweepResumesAfterKill9AtRandomMoments: a pruned sweep of mnist-mlp is SIGKILLed at random
// moments (in a trial's setup, its training, a checkpoint or the journal's append: wherever the
// kill lands) and continued with --resume each time; it ends with the same trials, states, values
// (bitwise) and values as the same sweep never interrupted.
func TestSweepResumesAfterKill9AtRandomMoments(t *testing.T) {
	pjrtDir := filepath.Dir(prereq.Plugin(t))
	bin := buildProgram(t, "./cmd/nitro")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cache := filepath.Join(dir, "compile-cache")
	sweepCmd := func(sweepDir string, more ...string) *exec.Cmd {
		args := append([]string{"sweep", "mnist-mlp", "--preset", "tiny", "--set", "TrainLimit=4000", "--set", "ValSize=1000",
			"--max-epochs", "4", "--param", "LearningRate=loguniform:1e-3,1e-1", "--param", "WeightDecay=loguniform:1e-6,1e-1",
			"--trials", "8", "--sampler", "random", "--prune", "asha", "--sweep-dir", sweepDir}, more...)
		c := exec.CommandContext(ctx, bin, args...)
		c.Env = append(os.Environ(), "NITRO_PJRT_DIR="+pjrtDir, "NITRO_COMPILE_CACHE="+cache)
		return c
	}
	ref := filepath.Join(dir, "ref")
	start := time.Now()
	if out, err := sweepCmd(ref).CombinedOutput(); err != nil {
		t.Fatalf("uninterrupted sweep: %v\n%s", err, tail(out))
	}
	whole := time.Since(start)
	want, err := sweep.Load(ref)
	if err != nil {
		t.Fatal(err)
	}

	killed := filepath.Join(dir, "killed")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	kills := 0
	for attempt := 0; ; attempt++ {
		var more []string
		if attempt > 0 {
			more = []string{"--resume"}
		}
		c := sweepCmd(killed, more...)
		var out strings.Builder
		c.Stdout, c.Stderr = &out, &out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- c.Wait() }()
		if kills < 4 {
			// A moment in the first third of the uninterrupted sweep's span (a resumed sweep has
			// less left to do), past the process's start.
			delay := 300*time.Millisecond + time.Duration(rng.Int64N(int64(whole/3)))
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("sweep attempt %d: %v\n%s", attempt, err, out.String())
				}
				t.Logf("attempt %d finished before its kill at %v", attempt, delay)
			case <-time.After(delay):
				_ = syscall.Kill(c.Process.Pid, syscall.SIGKILL)
				<-exited
				kills++
				if _, err := os.Stat(filepath.Join(killed, sweep.JournalFile)); err != nil {
					// Killed before the record was created: the next attempt starts afresh.
					t.Logf("attempt %d killed after %v, before its record", attempt, delay.Round(time.Millisecond))
					_ = os.RemoveAll(killed)
					attempt = -1
					continue
				}
				st, err := sweep.Load(killed)
				if err != nil {
					t.Fatalf("the record after a kill: %v", err)
				}
				t.Logf("attempt %d killed after %v: %d trials recorded", attempt, delay.Round(time.Millisecond), len(st.Trials))
				continue
			}
		} else if err := <-exited; err != nil {
			t.Fatalf("sweep attempt %d: %v\n%s", attempt, err, out.String())
		}
		break
	}
	got, err := sweep.Load(killed)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := studySummary(got), studySummary(want); a != b {
		t.Errorf("after %d kills and resumes:\n%s\nuninterrupted:\n%s", kills, a, b)
	}
	pruned := 0
	for _, tr := range want.Trials {
		if tr.State == sweep.Pruned {
			pruned++
		}
	}
	t.Logf("%d kills; %d trials, %d pruned, the same in both", kills, len(want.Trials), pruned)
}

// studySummary is what two sweeps must agree on: each trial's number, state, value (all 17
// digits), parameter values and reports.
func studySummary(st *sweep.Study) string {
	var b strings.Builder
	for _, t := range st.Trials {
		fmt.Fprintf(&b, "%d %s %v %.17g %v %v\n", t.Number, t.State, t.HasValue, t.Value, t.Params, t.Intermediate)
	}
	return b.String()
}
