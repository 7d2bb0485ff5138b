package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/compilecache"
)

// TestProgressAndHeartbeat: off a terminal the progress display prints plain lines on stderr (a
// compile line per program, one line per epoch), --no-progress silences it, and --heartbeat
// leaves the last state for a supervisor: Repl (idle, nothing in flight) after the run's steps.
func TestProgressAndHeartbeat(t *testing.T) {
	compilecache.Default().Reset() // every program compiles here, whatever ran before in this process
	hb := filepath.Join(t.TempDir(), "hb.json")
	args := []string{"train", "mnist-mlp", "--preset", "tiny", "--max-epochs", "1", "--no-log", "--no-checkpoints", "--set", "TrainLimit=3000", "--set", "TestLimit=1000"}
	code, out, errs := runCLI(append(args, "--heartbeat", hb)...)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	m := regexp.MustCompile(`epoch 1: step (\d+)/(\d+), [0-9.]+ steps/s`).FindStringSubmatch(errs)
	if m == nil || m[1] != m[2] {
		t.Fatalf("plain progress on stderr lacks a full epoch line:\n%s", errs)
	}
	steps, _ := strconv.Atoi(m[1])
	for _, w := range []string{"compiling gradient", "compiling optimizer", "compiling eval", "Done"} {
		if !strings.Contains(errs, w) {
			t.Errorf("plain progress on stderr lacks %q:\n%s", w, errs)
		}
	}
	raw, err := os.ReadFile(hb)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Phase        string `json:"phase"`
		RunPhase     string `json:"run_phase"`
		Step, Epoch  *int
		Counter      uint64 `json:"counter"`
		WorkInFlight bool   `json:"work_in_flight"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatalf("heartbeat %q: %v", raw, err)
	}
	if rec.Phase != "Repl" || rec.RunPhase != "Done" || rec.Step == nil || *rec.Step != steps || rec.Epoch == nil || *rec.Epoch != 1 || rec.WorkInFlight || rec.Counter == 0 {
		t.Errorf("heartbeat after the run: %s", raw)
	}

	code, out, errs = runCLI(append(args, "--no-progress")...)
	if code != 0 || strings.Contains(errs, "compiling") || !strings.Contains(out, "epoch 1/1") {
		t.Errorf("--no-progress: exit %d, stderr %q, stdout %q", code, errs, out)
	}
}

func TestWatchFlagsAreChecked(t *testing.T) {
	hbMissing := filepath.Join(t.TempDir(), "no", "such", "dir", "hb.json")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--stall-timeout", "-1s"}, "--stall-timeout -1s: must be >= 0"},
		{[]string{"--stop-on-stall"}, "--stop-on-stall needs --stall-timeout"},
		{[]string{"--heartbeat", hbMissing}, "--heartbeat: heartbeat " + hbMissing + ": create a temporary file in "},
	} {
		code, _, errs := runCLI(append([]string{"train", "mnist-mlp", "--preset", "tiny"}, c.args...)...)
		if code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, errs, c.want)
		}
	}
}
