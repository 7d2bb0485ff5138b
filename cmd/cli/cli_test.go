package cli_test

import (
	"bytes"
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
// it learned (far above the 10% of chance) with the acceptance-check program count.
func TestTrainTinyMNIST(t *testing.T) {
	code, out, errs := runCLI("train", "mnist-mlp", "--preset", "tiny", "--set", "TrainLimit=3000", "--set", "TestLimit=1000")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	for _, w := range []string{"epoch 2/2", "stopped: completed after 2 epochs", "binding report", "group default"} {
		if !strings.Contains(out, w) {
			t.Fatalf("output lacks %q:\n%s", w, out)
		}
	}
	m := regexp.MustCompile(`test: accuracy ([0-9.]+)`).FindStringSubmatch(out)
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
	code, out, errs := runCLI("train", "mnist-mlp", "--preset", "tiny", "--fused", "--set", "TrainLimit=3000", "--set", "TestLimit=1000")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	m := regexp.MustCompile(`test: accuracy ([0-9.]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no test accuracy in:\n%s", out)
	}
	if acc, _ := strconv.ParseFloat(m[1], 64); acc < 0.5 {
		t.Fatalf("test accuracy %v after the tiny preset with --fused: the model did not learn", acc)
	}
	if !strings.Contains(out, "compile cache: 2 misses") || !strings.Contains(out, "fused") {
		t.Fatalf("--fused train+validate+test should compile 2 programs and say it is fused:\n%s", out)
	}

}
