package mnistcnn_test

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/cmd/cli"
	"github.com/nitro-go/nitro/cmd/examples/mnistcnn"
)

func init() { cli.Register[mnistcnn.CNN]("mnist-cnn", "CNN on MNIST digits") }

// TestTrainTinyCNN trains the tiny preset end to end through the CLI on real MNIST (2000 training
// images, 2 epochs) and checks it learned: far above the 10% of chance, with the 3 programs of a
// run that trains, validates and tests.
func TestTrainTinyCNN(t *testing.T) {
	var out, errs bytes.Buffer
	code := cli.Main([]string{"train", "mnist-cnn", "--preset", "tiny", "--run-dir", t.TempDir(), "--no-progress"}, &out, &errs)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs.String(), out.String())
	}
	o := out.String()
	for _, w := range []string{"epoch 2/2", "stopped: completed after 2 epochs", "compile cache: 3 misses"} {
		if !strings.Contains(o, w) {
			t.Fatalf("output lacks %q:\n%s", w, o)
		}
	}
	m := regexp.MustCompile(`test: test_accuracy ([0-9.]+)`).FindStringSubmatch(o)
	if m == nil {
		t.Fatalf("no test accuracy in:\n%s", o)
	}
	if acc, _ := strconv.ParseFloat(m[1], 64); acc < 0.7 {
		t.Fatalf("test accuracy %v after the tiny preset: the CNN did not learn\n%s", acc, o)
	}
	t.Logf("tiny preset: test_accuracy %s", m[1])
}

// TestFieldsAreChecked: out-of-range model fields are refused by name before any data is read,
// and a data field is refused by the MNIST example's check, naming it the same way.
func TestFieldsAreChecked(t *testing.T) {
	for _, c := range []struct {
		set  []string
		want []string
	}{
		{[]string{"Conv1=0", "Hidden=-2"}, []string{"Conv1 = 0: want >= 1", "Hidden = -2: want >= 1"}},
		// A negative learning rate is core's own refusal, made before the experiment's check runs.
		{[]string{"Conv1=0", "LearningRate=-1"}, []string{"LearningRate = -1 from field LearningRate: must be a finite number > 0"}},
		{[]string{"ValSize=0"}, []string{"ValSize = 0: want 1..59999"}},
	} {
		args := []string{"train", "mnist-cnn", "--no-log", "--no-progress", "--set", "DataDir=" + t.TempDir()}
		for _, s := range c.set {
			args = append(args, "--set", s)
		}
		var out, errs bytes.Buffer
		if code := cli.Main(args, &out, &errs); code != 1 {
			t.Errorf("%v: exit %d, want 1", c.set, code)
		}
		for _, w := range c.want {
			if !strings.Contains(errs.String(), w) {
				t.Errorf("%v: stderr %q lacks %q", c.set, errs.String(), w)
			}
		}
	}
}
