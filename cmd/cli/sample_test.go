package cli_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/cmd/cli"
	"github.com/nitro-go/nitro/cmd/examples/gpt"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/internal/prereq"
)

func init() {
	cli.Register[gpt.GPT]("gpt", "decoder-only transformer on bytes of text")
}

// TestSample trains the gpt's tiny preset into a run dir, which the subtests sample and never
// write to.
func TestSample(t *testing.T) {
	prereq.Plugin(t)
	dir := filepath.Join(t.TempDir(), "run")
	if code, out, errs := runCLI("train", "gpt", "--preset", "tiny", "--run-dir", dir, "--no-progress", "--quiet"); code != 0 {
		t.Fatalf("train gpt --preset tiny: exit %d: %s\n%s", code, errs, out)
	}
	t.Run("Seed", func(t *testing.T) { sampleSeed(t, dir) })
	t.Run("Refusals", func(t *testing.T) { sampleRefusals(t, dir) })
	t.Run("Bundle", func(t *testing.T) { bundleEqualsSample(t, dir) })    // generate_bundle_test.go
	t.Run("TritonClient", func(t *testing.T) { tritonGenerates(t, dir) }) // generate_bundle_test.go
}

// snapshot lists every file below dir with its size and modification time.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %d %v\n", p, info.Size(), info.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// sampleSeed samples the trained tiny gpt from its run dir and from its newest checkpoint
// file: stdout is the prompt, the bytes asked for and a newline; one seed gives one text (sampled
// and greedy), another seed another; stderr says what was loaded; the run dir is left as it was
// and no runs/ folder appears in the working directory.
func sampleSeed(t *testing.T, dir string) {
	before := snapshot(t, dir)
	_, cwdRuns := os.Stat("runs")
	sample := func(from string, args ...string) string {
		t.Helper()
		code, out, errs := runCLI(append([]string{"sample", from, "--prompt", "func main() {", "--tokens", "40"}, args...)...)
		if code != 0 {
			t.Fatalf("sample %v: exit %d: %s", args, code, errs)
		}
		if !strings.Contains(errs, "nitro: sampling 40 bytes from ") || !strings.Contains(errs, "(experiment gpt, step ") || !strings.Contains(errs, "ms a byte") {
			t.Errorf("sample %v: stderr lacks what was loaded and the time:\n%s", args, errs)
		}
		if !strings.HasPrefix(out, "func main() {") || !strings.HasSuffix(out, "\n") || len(out) != len("func main() {")+40+1 {
			t.Fatalf("sample %v: stdout %q: want the prompt, 40 bytes, a newline", args, out)
		}
		return out
	}
	a := sample(dir, "--seed", "3", "--temperature", "0.9", "--top-k", "50")
	t.Logf("seed 3: %q", a)
	ck, err := core.NewestCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	if b := sample(ck, "--seed", "3", "--temperature", "0.9", "--top-k", "50"); b != a {
		t.Errorf("seed 3 from the run dir gave %q, from its newest checkpoint %q", a, b)
	}
	if c := sample(dir, "--seed", "4", "--temperature", "0.9", "--top-k", "50"); c == a {
		t.Errorf("seeds 3 and 4 gave the same text %q", a)
	}
	g1 := sample(dir, "--top-k", "1", "--temperature", "0", "--seed", "1")
	if g2 := sample(dir, "--top-k", "1", "--seed", "2"); g1 != g2 {
		t.Errorf("greedy sampling gave %q with seed 1, %q with seed 2", g1, g2)
	}
	if after := snapshot(t, dir); after != before {
		t.Errorf("sample changed the run dir:\nbefore\n%s\nafter\n%s", before, after)
	}
	if _, err := os.Stat("runs"); cwdRuns != nil && err == nil {
		t.Error("sample created runs/ in the working directory")
	}
}

// sampleRefusals: each bad flag, prompt or checkpoint is refused by name, with nothing on
// stdout and nothing written to the run dir.
func sampleRefusals(t *testing.T, dir string) {
	empty := t.TempDir()
	mlp := filepath.Join(t.TempDir(), "mlp")
	if code, out, errs := runCLI("train", "mnist-mlp", "--preset", "tiny", "--set", "TrainLimit=2000", "--set", "TestLimit=500", "--max-epochs", "1",
		"--run-dir", mlp, "--no-progress", "--quiet"); code != 0 {
		t.Fatalf("train mnist-mlp: exit %d: %s\n%s", code, errs, out)
	}
	before := snapshot(t, dir)
	long := strings.Repeat("x", 33) // the tiny preset's Context is 32
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{dir, "--prompt", "a", "--tokens", "0"}, "Tokens (--tokens) = 0"},
		{[]string{dir, "--prompt", "a", "--tokens", "-5"}, "Tokens (--tokens) = -5"},
		{[]string{dir, "--prompt", "a", "--temperature", "0"}, "Temperature (--temperature) = 0: want a finite number > 0, or TopK 1 (--top-k 1)"},
		{[]string{dir, "--prompt", "a", "--temperature", "-1", "--top-k", "5"}, "Temperature (--temperature) = -1"},
		{[]string{dir, "--prompt", "a", "--top-k", "-1"}, "TopK (--top-k) = -1"},
		{[]string{dir, "--prompt", "a", "--top-k", "257"}, "TopK (--top-k) = 257"},
		{[]string{dir, "--prompt", ""}, "--prompt is empty"},
		{[]string{dir}, "--prompt is empty"},
		{[]string{dir, "--prompt", long}, "the prompt (--prompt) is 33 tokens, more than the model's context of 32"},
		{[]string{empty, "--prompt", "a"}, "holds no checkpoint"},
		{[]string{filepath.Join(empty, "nope"), "--prompt", "a"}, "no run directory or checkpoint file there"},
		{[]string{mlp, "--prompt", "a"}, "experiment mnist-mlp does not generate text"},
		{[]string{dir, "--prompt", "a", "--experiment", "nope"}, `--experiment: unknown experiment "nope"`},
		{[]string{dir, "--prompt", "a", "--seed", "-1"}, "--seed"},
	} {
		code, out, errs := runCLI(append([]string{"sample"}, c.args...)...)
		if code == 0 || !strings.Contains(errs, c.want) {
			t.Errorf("sample %q: exit %d, stderr %q: want a refusal saying %q", c.args, code, errs, c.want)
		}
		if out != "" {
			t.Errorf("sample %q: wrote %q to stdout", c.args, out)
		}
	}
	if after := snapshot(t, dir); after != before {
		t.Errorf("a refused sample changed the run dir:\nbefore\n%s\nafter\n%s", before, after)
	}
}
