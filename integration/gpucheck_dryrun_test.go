//go:build unix

package integration_test

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/internal/prereq"
	"github.com/nitro-go/nitro/roofline"
)

// TestGPUCheckDryRun runs scripts/gpu-check.sh --dry-run: its gpt stage on the XLA CPU plugin with
// the tiny preset, as it runs on a GPU host with gpt2, so that a renamed flag, a moved line or a
// changed record breaks here and not on the next (rare) GPU host. It asserts what the stage
// prints: both starts' compile cache lines (the second all from disk), tokens/s and MFU parsed
// from the record and consistent with the batch and nitro's own FLOPs per token and roofline, the
// two same-seed runs' final checkpoints equal byte for byte, and the JAX peer's figures counted
// the same way (or its skip line, without $NITRO_BENCH_PYTHON); then that the peer refuses to
// report on a CPU unless told it is a dry run.
func TestGPUCheckDryRun(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	pjrtDir := filepath.Dir(prereq.Plugin(t))
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "nitro"), "./cmd/nitro")
	build.Dir = root // go.work resolves nitro's modules
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/nitro: %v\n%s", err, out)
	}
	py := os.Getenv("NITRO_BENCH_PYTHON")

	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), docTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "scripts/gpu-check.sh", "--dry-run")
	c.Dir = root
	env := []string{"NITRO_PJRT_DIR=" + pjrtDir, "NITRO_GPU_BIN=" + bin, "NITRO_GPU_OUT=" + out, "NITRO_JAX_PYTHON=" + py}
	for _, kv := range os.Environ() {
		// The script's own knobs come from this test alone.
		if k, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(k, "NITRO_GPU_") && !strings.HasPrefix(k, "NITRO_GPT_") && k != "NITRO_JAX_PYTHON" {
			env = append(env, kv)
		}
	}
	c.Env = env
	stdout, err := c.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("gpu-check.sh --dry-run still running after %v:\n%s", docTimeout, stdout)
	}
	if err != nil {
		t.Fatalf("gpu-check.sh --dry-run: %v:\n%s", err, stdout)
	}
	text := string(stdout)
	t.Logf("gpu-check.sh --dry-run:\n%s", text)
	if strings.Contains(text, "FAIL") {
		t.Errorf("the dry run printed a FAIL")
	}
	line := func(re string) []string {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + re + `$`).FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("no line matching %q in the dry run's output", re)
		}
		return m
	}
	num := func(s string) float64 {
		t.Helper()
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			t.Fatalf("%q: want a positive number", s)
		}
		return v
	}
	line(`gpt nitro start 1: compile cache: [1-9][0-9]* compiled, 0 from disk .*`)
	line(`gpt nitro start 2: compile cache: 0 compiled, [1-9][0-9]* from disk .*`)
	line(`gpt bitwise: equal: the two runs' final checkpoints \(epoch-0001-step-10-.*\.safetensors, [0-9]+ bytes\) are the same bytes`)
	line(`gpt: ok \([0-9]+ s\)`)

	// The model's shape as nitro recorded it, for the FLOPs per token both sides must use.
	var params struct{ Layers, Dim, Context, BatchSize int }
	f, err := os.Open(filepath.Join(out, "gpt-1", "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &params) != nil || params.Layers == 0 {
		t.Fatalf("gpt-1/metrics.jsonl: no params line with the model's shape")
	}
	flops := roofline.TransformerFLOPsPerToken(12*params.Layers*params.Dim*params.Dim+256*params.Dim, params.Layers, params.Dim, params.Context)
	tokensPerStep := float64(params.BatchSize * params.Context)
	// near: printed figures are rounded (the roofline to 0.1 GFLOP/s, MFU to 4 places).
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 0.02*want+1e-4 {
			t.Errorf("%s = %g, want %g (from the other printed figures)", what, got, want)
		}
	}
	for _, n := range []string{"1", "2"} {
		m := line(`gpt nitro run ` + n + `: steps 6-10 steps_per_second (\S+) tokens_per_second (\S+) mfu (\S+) \(roofline: (\S+) GFLOP/s \(BFloat16 1024² matmul\) per device\)`)
		sps, tps, mfu, peak := num(m[1]), num(m[2]), num(m[3]), num(m[4])*1e9
		near("nitro run "+n+" tokens_per_second", tps, sps*tokensPerStep)
		near("nitro run "+n+" mfu", mfu, tps*flops/peak)
	}

	if py == "" {
		line(`gpt jax: skipped: NITRO_JAX_PYTHON is unset .*`)
		t.Log("the JAX peer was skipped: $NITRO_BENCH_PYTHON is unset (make bench-venv, then NITRO_BENCH_PYTHON=$PWD/.nitro/bench-venv/bin/python)")
		return
	}
	line(`gpt jax: ready: .* platform=cpu .* precision=bf16 parameters=` + paramCount(t, out) + ` batch=\[` +
		strconv.Itoa(params.BatchSize) + `, ` + strconv.Itoa(params.Context) + `\] steps=5\+5`)
	peak := num(line(`gpt jax: roofline: (\S+) GFLOP/s \(bfloat16 1024² matmul\)`)[1]) * 1e9
	m := line(`gpt jax: result: steps_per_second (\S+) tokens_per_second (\S+) mfu (\S+) loss_first \S+ loss_last \S+ compile_seconds \S+`)
	sps, tps, mfu := num(m[1]), num(m[2]), num(m[3])
	near("jax tokens_per_second", tps, sps*tokensPerStep)
	near("jax mfu", mfu, tps*flops/peak)
	line(`gpt mfu nitro/jax: [0-9.]+ \(nitro [0-9.]+, jax [0-9.]+; goal >= 1\).*`)

	// Off the dry run the peer must not report a CPU's figures as a GPU's.
	refuse := exec.Command(py, "scripts/bench/jax_gpt_gpu.py", "--layers", "1", "--heads", "1", "--dim", "8", "--context", "8", "--steps", "1")
	refuse.Dir = root
	refuse.Env = append(os.Environ(), "JAX_PLATFORMS=cpu")
	got, err := refuse.CombinedOutput()
	if err == nil || !strings.Contains(string(got), "not a GPU: no figures") {
		t.Errorf("jax_gpt_gpu.py on the CPU without --allow-cpu: %v, want a refusal naming the device:\n%s", err, got)
	}
}

// paramCount is the parameter count nitro's config report gave the dry run's first gpt run.
func paramCount(t *testing.T, out string) string {
	t.Helper()
	log, err := os.ReadFile(filepath.Join(out, "gpt-1.log"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^  parameter groups +default \([0-9]+ arrays, ([0-9]+) values\)`).FindSubmatch(log)
	if m == nil {
		t.Fatalf("gpt-1.log: no parameter groups line")
	}
	return string(m[1])
}
