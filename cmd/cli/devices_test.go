package cli_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestTrainTinyMNISTDevices: --devices 2 trains the tiny preset data-parallel on two of the CPU
// plugin's devices (the report says so) and it learns; --devices 0 is refused by name.
func TestTrainTinyMNISTDevices(t *testing.T) {
	// Unset, a machine with one CPU presents one device; this test needs two.
	t.Setenv("NITRO_CPU_DEVICES", "2")
	code, out, errs := runCLI("train", "mnist-mlp", "--preset", "tiny", "--devices", "2", "--fused", "--set", "TrainLimit=3000", "--set", "TestLimit=1000",
		"--run-dir", t.TempDir(), "--no-log", "--no-checkpoints")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	if !regexp.MustCompile(`devices +2 of \d+ visible \(run option\)`).MatchString(out) {
		t.Errorf("the config report does not show 2 devices from the run option:\n%s", out)
	}
	m := regexp.MustCompile(`test: test_accuracy ([0-9.]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no test accuracy in:\n%s", out)
	}
	if acc, _ := strconv.ParseFloat(m[1], 64); acc < 0.5 {
		t.Fatalf("test accuracy %v after the tiny preset on 2 devices: the model did not learn", acc)
	}
	code, _, errs = runCLI("train", "mnist-mlp", "--devices", "0")
	if code == 0 || !strings.Contains(errs, "--devices 0") {
		t.Errorf("--devices 0: exit %d, stderr %q; want a refusal naming the flag", code, errs)
	}
}
