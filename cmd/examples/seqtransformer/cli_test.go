package seqtransformer_test

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/cmd/cli"
	"github.com/nitro-go/nitro/cmd/examples/seqtransformer"
)

func init() {
	cli.Register[seqtransformer.Transformer]("seq-transformer", "small transformer on generated digit sequences")
}

// TestTrainTinyReverse trains the tiny preset (reverse 6 digits, one block, 3 epochs of 4000
// sequences) end to end through the CLI and asserts the accuracy the package comment states: at
// least 99% of test tokens and 95% of test sequences right.
func TestTrainTinyReverse(t *testing.T) {
	var out, errs bytes.Buffer
	code := cli.Main([]string{"train", "seq-transformer", "--preset", "tiny", "--run-dir", t.TempDir(), "--no-progress"}, &out, &errs)
	o := out.String()
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs.String(), o)
	}
	for _, w := range []string{"stopped: completed after 3 epochs", "compile cache: 3 misses"} {
		if !strings.Contains(o, w) {
			t.Fatalf("output lacks %q:\n%s", w, o)
		}
	}
	m := regexp.MustCompile(`test: test_accuracy ([0-9.]+) test_loss [0-9.]+ test_sequence_accuracy ([0-9.]+)`).FindStringSubmatch(o)
	if m == nil {
		t.Fatalf("no test accuracies in:\n%s", o)
	}
	tok, _ := strconv.ParseFloat(m[1], 64)
	seq, _ := strconv.ParseFloat(m[2], 64)
	if tok < 0.99 || seq < 0.95 {
		t.Fatalf("tiny preset: test accuracy %v per token, %v per sequence; want >= 0.99 and >= 0.95\n%s", tok, seq, o)
	}
	t.Logf("tiny preset: test accuracy %v per token, %v per sequence", tok, seq)
}

// TestTaskIsChecked: an unknown task is refused by name, listing the known ones.
func TestTaskIsChecked(t *testing.T) {
	var out, errs bytes.Buffer
	code := cli.Main([]string{"train", "seq-transformer", "--preset", "tiny", "--set", "Task=rotate", "--no-log", "--no-progress"}, &out, &errs)
	if code != 1 || !strings.Contains(errs.String(), `Task = "rotate": want one of reverse, sort`) {
		t.Fatalf("exit %d, stderr %q", code, errs.String())
	}
}
