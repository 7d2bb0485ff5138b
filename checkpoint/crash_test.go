//go:build unix

package checkpoint

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	crashChildEnv = "NITRO_CHECKPOINT_CRASH_CHILD"
	crashSeedEnv  = "NITRO_CRASH_SEED"
)

// crashChild saves checkpoints into dir in a loop, resuming after the newest one, until it is
// killed (or 20 s pass, should the parent be gone).
func crashChild(dir string) {
	tk, err := NewTopK(2, "val_loss", "min", dir, nil, WithIORetry(1, 0))
	if err != nil {
		panic(err)
	}
	epoch := 1
	if latest, ok, err := tk.Latest(); err != nil {
		panic(err)
	} else if ok {
		r, err := tk.Load(latest)
		if err != nil {
			panic(err)
		}
		epoch = r.Epoch + 1
	}
	fmt.Println("ready")
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); epoch++ {
		score := float64(fill(uint64(epoch), 1)[0]) / 256
		if _, err := tk.Save(epochRecord(epoch, 256<<10+epoch%7, score)); err != nil {
			panic(err)
		}
	}
}

// TestKillDuringSaves kills a process that saves in a loop with SIGKILL at random times, at
// least 50 times, and after each kill checks what the next process relies on: every
// checkpoint the manifest lists loads and verifies, every file under a final name is whole,
// and the newest checkpoint resumes.
func TestKillDuringSaves(t *testing.T) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("spawns processes; skipped in -short")
	}
	dir := t.TempDir()
	// The kill delays come from a seeded generator: a fresh seed per run, unless
	// NITRO_CRASH_SEED names one, and printed on failure so the same delays can be replayed.
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(crashSeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: not an unsigned integer", crashSeedEnv, s)
		}
		seed = v
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kill delays from seed %d: rerun with %s=%d go test -run '^TestKillDuringSaves$' ./checkpoint/", seed, crashSeedEnv, seed)
		}
	})
	rng := rand.New(rand.NewPCG(1, seed))
	start := time.Now()
	kills, tempsSeen, lastEpoch := 0, 0, 0
	for kills < 50 || (kills < 100 && time.Since(start) < 3*time.Second) {
		if time.Since(start) > 20*time.Second {
			t.Fatalf("only %d kills in 20 s", kills)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillDuringSaves$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "ready" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("kill %d: the child did not start (%q, %v): the previous kill left a state it cannot resume from", kills, line, err)
		}
		time.Sleep(time.Duration(rng.IntN(40_000)) * time.Microsecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		kills++

		entries, err := ReadManifest(dir)
		if err != nil {
			t.Fatalf("kill %d: %v", kills, err)
		}
		for _, e := range entries {
			r, err := Read(filepath.Join(dir, e.File))
			if err != nil {
				t.Fatalf("kill %d: listed checkpoint: %v", kills, err)
			}
			checkEpochRecord(t, r)
			lastEpoch = max(lastEpoch, r.Epoch)
		}
		names, _ := os.ReadDir(dir)
		for _, n := range names {
			switch {
			case IsTemp(n.Name()):
				tempsSeen++
			case strings.HasSuffix(n.Name(), Ext):
				if _, err := Read(filepath.Join(dir, n.Name())); err != nil {
					t.Fatalf("kill %d: a partial file under a final name: %v", kills, err)
				}
			}
		}
		tk, _ := NewTopK(2, "val_loss", "min", dir, nil)
		if latest, ok, err := tk.Latest(); err != nil {
			t.Fatalf("kill %d: resume: %v", kills, err)
		} else if ok {
			if _, err := tk.Load(latest); err != nil {
				t.Fatalf("kill %d: resume: %v", kills, err)
			}
		}
	}
	if lastEpoch < 10 {
		t.Errorf("only %d epochs saved over %d kills: the kills did not land during saves", lastEpoch, kills)
	}
	t.Logf("seed %d: %d kills in %v: %d epochs saved, %d kills left a temporary file behind", seed, kills, time.Since(start).Round(time.Millisecond), lastEpoch, tempsSeen)
}
