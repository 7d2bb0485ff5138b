//go:build unix

package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/cmd/cli"
)

// TestTrainSIGINT: a SIGINT while `train` steps is a graceful stop. The CLI says what happens
// next, the epoch breaks at a step boundary and validates, the run reports stop reason
// "requested" well before its epoch budget, exits 0, and its last checkpoint carries the
// reason. The signal goes to this process: the CLI's handler is what keeps it alive.
func TestTrainSIGINT(t *testing.T) {
	runDir := t.TempDir()
	hb := filepath.Join(t.TempDir(), "hb.json")
	const maxEpochs = 200
	args := []string{"train", "mnist-mlp", "--preset", "tiny", "--max-epochs", strconv.Itoa(maxEpochs), "--no-log", "--no-progress",
		"--run-dir", runDir, "--heartbeat", hb, "--set", "TrainLimit=3000", "--set", "TestLimit=500"}
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- cli.MainContext(context.Background(), args, &stdout, &stderr) }()

	// Wait for the run to be stepping (the heartbeat says so), then interrupt it.
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		var rec struct{ Phase string }
		if b, err := os.ReadFile(hb); err == nil && json.Unmarshal(b, &rec) == nil && rec.Phase == "TrainStepping" {
			break
		}
		select {
		case code := <-done:
			t.Fatalf("train exited %d before it stepped: %s\n%s", code, stderr.String(), stdout.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("train did not start stepping within 5 minutes: %s", stderr.String())
		}
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var code int
	select {
	case code = <-done:
	case <-time.After(5 * time.Minute):
		t.Fatalf("train did not stop within 5 minutes of SIGINT: %s", stderr.String())
	}
	out, errs := stdout.String(), stderr.String()
	if code != 0 {
		t.Fatalf("exit %d after SIGINT: %s\n%s", code, errs, out)
	}
	ranOn(t, "train", out)
	if !strings.Contains(errs, "nitro: interrupt: stopping after this step, then validating (interrupt again to kill)") {
		t.Errorf("stderr does not say what the interrupt does: %q", errs)
	}
	m := regexp.MustCompile(`stopped: requested after (\d+) epochs`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("stdout reports no requested stop:\n%s", out)
	}
	if epochs, _ := strconv.Atoi(m[1]); epochs >= maxEpochs {
		t.Errorf("stopped after %d epochs, the whole budget: the interrupt did not stop the run", epochs)
	}
	ck := regexp.MustCompile(`\ncheckpoint: (\S+)\n`).FindStringSubmatch(out)
	if ck == nil {
		t.Fatalf("train names no checkpoint:\n%s", out)
	}
	h, err := checkpoint.Info(ck[1])
	if err != nil {
		t.Fatal(err)
	}
	if h.StopReason != "requested" {
		t.Errorf("the last checkpoint's stop reason is %q, want requested", h.StopReason)
	}
}
