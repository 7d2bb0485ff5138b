package cli_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/cmd/cli"
	"github.com/nitro-go/nitro/cmd/examples/mnist"
	"github.com/nitro-go/nitro/compilecache"
)

func init() { cli.Register[mnist.MLP]("mnist-mlp", "MLP on MNIST") }

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = cli.Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestListAndInfo(t *testing.T) {
	code, out, _ := runCLI("list")
	if code != 0 || !strings.Contains(out, "mnist-mlp") || !strings.Contains(out, "groups") || !strings.Contains(out, "tiny") {
		t.Fatalf("list: code %d, %q", code, out)
	}
	code, out, _ = runCLI("info", "mnist-mlp")
	if code != 0 || !regexp.MustCompile(`Hidden\s+graphconst`).MatchString(out) || !regexp.MustCompile(`LearningRate\s+host`).MatchString(out) {
		t.Fatalf("info should list fields with their kinds: %q", out)
	}
}

func TestErrorsNameTheFix(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"frobnicate"}, []string{`unknown command "frobnicate"`}},
		{[]string{"train", "nope"}, []string{`unknown experiment "nope"`, "mnist-mlp"}},
		{[]string{"train", "mnist-mlp", "--set", "Hiden=3"}, []string{"Hiden", "Hidden"}},
		{[]string{"train", "mnist-mlp", "--set", "Hidden=wide"}, []string{"Hidden", "wide", "int"}},
		{[]string{"train", "mnist-mlp", "--preset", "huge"}, []string{"huge", "tiny"}},
		{[]string{"train", "mnist-mlp", "--backend", "tpu"}, []string{`"tpu"`, "xla"}},
		{[]string{"train", "mnist-mlp", "--log-every", "0"}, []string{"--log-every 0", ">= 1"}},
		{[]string{"train", "mnist-mlp", "--accum", "0"}, []string{"--accum 0: must be >= 1"}},
		{[]string{"train", "mnist-mlp", "--clip-norm", "-1"}, []string{"--clip-norm -1: must be a finite number >= 0"}},
		{[]string{"train", "mnist-mlp", "--clip-norm", "NaN"}, []string{"--clip-norm NaN"}},
		{[]string{"train", "mnist-mlp", "--preset", "tiny", "--accum", "2"}, []string{"not divisible by Accum = 2"}},
		{[]string{"evaluate", "mnist-mlp", "--accum", "2"}, []string{"--accum and --clip-norm are train flags"}},
		{[]string{"evaluate", "mnist-mlp", "--max-epochs", "2"}, []string{"--max-epochs and --fused are train flags"}},
		{[]string{"render", "mnist-mlp", "--fused"}, []string{"--max-epochs and --fused are train flags"}},
		{[]string{"train", "mnist-mlp", "--resume", "Auto"}, []string{`--resume "Auto": no checkpoint file or run dir there`, "give auto"}},
		{[]string{"render", "mnist-mlp", "--n", "0"}, []string{"--n 0: must be >= 1"}},
		{[]string{"render"}, []string{"render needs an experiment name", "mnist-mlp"}},
		{[]string{"render", "mnist-mlp", "--resume", "auto"}, []string{"--resume is a train flag", "--checkpoint"}},
		{[]string{"evaluate", "mnist-mlp", "--predictions"}, []string{"--predictions is a render flag"}},
		{[]string{"train", "mnist-mlp", "--n", "3"}, []string{"--n is a render flag"}},
		{[]string{"render", "mnist-mlp", "--preset", "tiny", "--split", "nope"}, []string{`no split "nope"`, "test"}},
	}
	for _, c := range cases {
		code, _, errs := runCLI(c.args...)
		if code != 1 {
			t.Errorf("%v: exit %d, want 1", c.args, code)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%v: stderr %q lacks %q", c.args, errs, w)
			}
		}
	}
}

// TestTrainTinyMNIST trains the tiny preset end to end on real MNIST through the CLI and checks
// it learned (far above the 10% of chance) with the acceptance-check program count, labelled its
// metrics by split, and left the run's record in <run dir>/metrics.jsonl.
func TestTrainTinyMNIST(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := runCLI("train", "mnist-mlp", "--preset", "tiny", "--set", "TrainLimit=3000", "--set", "TestLimit=1000", "--run-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	ranOn(t, "train", out)
	for _, w := range []string{"epoch 2/2", "stopped: completed after 2 epochs", "binding report", "group default", " val_accuracy ", " val_loss "} {
		if !strings.Contains(out, w) {
			t.Fatalf("output lacks %q:\n%s", w, out)
		}
	}
	path := filepath.Join(dir, "metrics.jsonl")
	if !strings.Contains(out, "\nmetrics: "+path+"\n") {
		t.Errorf("output does not name the metrics file %s:\n%s", path, out)
	}
	steps := regexp.MustCompile(`after 2 epochs, ([0-9]+) optimizer steps`).FindStringSubmatch(out)
	if steps == nil {
		t.Fatalf("no step count in:\n%s", out)
	}
	checkRecord(t, path, steps[1])
	m := regexp.MustCompile(`test: test_accuracy ([0-9.]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no test accuracy in:\n%s", out)
	}
	if acc, _ := strconv.ParseFloat(m[1], 64); acc < 0.5 {
		t.Fatalf("test accuracy %v after the tiny preset: the model did not learn", acc)
	}
	if !strings.Contains(out, "compile cache: 3 misses") {
		t.Fatalf("train+validate+test should compile 3 programs:\n%s", out)
	}
}

// TestTrainTinyMNISTFused: --fused trains the same preset with one training program, so train +
// validate + test compile 2 programs (the fused step and eval) where the default compiles 3.
func TestTrainTinyMNISTFused(t *testing.T) {
	compilecache.Default().Reset() // the CLI reports the process-level cache, which other tests fill
	dir := t.TempDir()
	code, out, errs := runCLI("train", "mnist-mlp", "--preset", "tiny", "--fused", "--set", "TrainLimit=3000", "--set", "TestLimit=1000",
		"--run-dir", dir, "--no-log", "--no-checkpoints")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	ranOn(t, "train --fused", out)
	if entries, _ := os.ReadDir(dir); len(entries) != 0 || strings.Contains(out, "metrics:") {
		t.Errorf("--no-log wrote %v and said %q", entries, out)
	}
	learnedTiny(t, "with --fused", out)
	if !strings.Contains(out, "compile cache: 2 misses") || !strings.Contains(out, "fused") {
		t.Fatalf("--fused train+validate+test should compile 2 programs and say it is fused:\n%s", out)
	}
}

// learnedTiny fails unless a tiny-preset run printed a test accuracy of at least 0.5.
func learnedTiny(t *testing.T, how, out string) {
	t.Helper()
	m := regexp.MustCompile(`test: test_accuracy ([0-9.]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no test accuracy in:\n%s", out)
	}
	if acc, _ := strconv.ParseFloat(m[1], 64); acc < 0.5 {
		t.Fatalf("test accuracy %v after the tiny preset %s: the model did not learn", acc, how)
	}
}

// TestTrainTinyMNISTBF16: --mixed-precision bf16 reaches core (the config report says so), learns
// the tiny preset, and compiles the same 3 programs as float32 (their bf16 twins).
func TestTrainTinyMNISTBF16(t *testing.T) {
	compilecache.Default().Reset()
	code, out, errs := runCLI("train", "mnist-mlp", "--preset", "tiny", "--mixed-precision", "bf16", "--set", "TrainLimit=3000", "--set", "TestLimit=1000",
		"--run-dir", t.TempDir(), "--no-log", "--no-checkpoints")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	ranOn(t, "train --mixed-precision bf16", out)
	learnedTiny(t, "under bf16", out)
	if !strings.Contains(out, "mixed precision      bf16 (run option)") || !strings.Contains(out, "compile cache: 3 misses") {
		t.Fatalf("want the config report's bf16 row and 3 programs:\n%s", out)
	}
}

// checkRecord reads a run's metrics.jsonl line by line: every line parses, params first, one
// train line per optimizer step with increasing steps, one validate and one data line per epoch
// (2), the binding report, finish last with completed.
func checkRecord(t *testing.T, path, steps string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %d of %s does not parse: %v", len(lines)+1, path, err)
		}
		lines = append(lines, m)
	}
	if len(lines) < 2 || lines[0]["type"] != "params" || lines[len(lines)-1]["type"] != "finish" || lines[len(lines)-1]["status"] != "completed" {
		t.Fatalf("%s: want params first and finish completed last, got %d lines", path, len(lines))
	}
	count := map[string]int{}
	last := 0.0
	for _, l := range lines {
		switch {
		case l["type"] == "metrics":
			count[l["context"].(string)]++
			if l["context"] == "train" {
				if s := l["step"].(float64); s <= last {
					t.Errorf("train step %v after %v", s, last)
				} else {
					last = s
				}
			}
		case l["type"] == "other":
			count[l["key"].(string)]++
		}
	}
	if n, _ := strconv.Atoi(steps); count["train"] != n || count["validate"] != 2 || count["data"] != 2 || count["binding_report"] != 1 {
		t.Errorf("%s: %v; want %s train lines, 2 validate, 2 data, 1 binding_report", path, count, steps)
	}
}

// TestTrainAccumAndClipNormFlags: --accum and --clip-norm become the run's Accum and
// GradientClipNorm, as the configuration report and the horizon show (39 tiny batches / 3).
func TestTrainAccumAndClipNormFlags(t *testing.T) {
	code, out, errs := runCLI("train", "mnist-mlp", "--preset", "tiny", "--max-epochs", "1", "--accum", "3", "--clip-norm", "1.5",
		"--no-log", "--no-checkpoints", "--no-progress", "--run-dir", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	for _, re := range []string{`accum\s+3 \(run option\)`, `gradient clip norm\s+1\.5 \(run option\)`, `total opt steps\s+13\b`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("the configuration report lacks %q:\n%s", re, out)
		}
	}
}
