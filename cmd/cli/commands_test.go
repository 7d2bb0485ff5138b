package cli_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nitro-go/nitro/cmd/cli"
	"github.com/nitro-go/nitro/monitors"
)

// fast is what keeps a CLI training run to about a second: the tiny preset on a slice of MNIST,
// one epoch, no checkpoints, no progress display.
var fast = []string{"--preset", "tiny", "--set", "TrainLimit=3000", "--set", "TestLimit=1000", "--max-epochs", "1", "--no-checkpoints", "--no-progress"}

// TestCommandsHelpAndCompletion: every command has its own help (exit 0; `help X` on stdout,
// `X --help` on stderr as the flag package did), the root help lists every command, and
// `completion bash|zsh|fish` writes a script; the hidden __complete names experiments and presets.
func TestCommandsHelpAndCompletion(t *testing.T) {
	code, out, _ := runCLI("--help")
	if code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	for _, w := range []string{"train <experiment>", "evaluate <experiment>", "render <experiment>", "list", "info <experiment>|<checkpoint file>", "ls <run dir>",
		"plot <run dir>", "board <run dir>...", "data convert <dataset> <dir>", "setup [--dir DIR]", "completion bash|fish|powershell|zsh"} {
		if !strings.Contains(out, "\n  "+w) {
			t.Errorf("root help lacks %q:\n%s", w, out)
		}
	}
	for cmd, flags := range map[string][]string{
		"train":        {"--max-epochs N", "--resume", "--metrics-addr ADDR", "--log-format FORMAT", "--no-log", "--tensorboard", "--set FIELD=VALUE"},
		"evaluate":     {"--split SPLIT", "--checkpoint PATH", "--log-format FORMAT"},
		"render":       {"--split SPLIT", "--n N", "--predictions", "--checkpoint PATH"},
		"plot":         {"--out"},
		"board":        {"--addr ADDR", "--refresh D", "--max-points N"},
		"setup":        {"--wheel FILE", "--dir DIR"},
		"data convert": {"mnist"},
		"info":         {"checkpoint"},
		"ls":           {"manifest"},
		"list":         {"presets"},
	} {
		args := strings.Fields(cmd)
		code, out, errs := runCLI(append([]string{"help"}, args...)...)
		if code != 0 || errs != "" || !strings.HasPrefix(out, "usage: nitro "+cmd) {
			t.Errorf("help %s: exit %d, stderr %q, stdout:\n%s", cmd, code, errs, out)
		}
		for _, f := range flags {
			if !strings.Contains(out, f) {
				t.Errorf("help %s lacks %q:\n%s", cmd, f, out)
			}
		}
		code, out2, errs := runCLI(append(args, "--help")...)
		if code != 0 || out2 != "" || errs != out {
			t.Errorf("%s --help: exit %d, stdout %q; stderr should be the help:\n%s", cmd, code, out2, errs)
		}
	}
	if code, out, _ := runCLI("train", "--help"); code != 0 || strings.Contains(out, "--split") {
		t.Errorf("train --help: exit %d; evaluate's --split is not a train flag:\n%s", code, out)
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		code, out, errs := runCLI("completion", shell)
		if code != 0 || !strings.Contains(out, shell) || !strings.Contains(out, "nitro") || len(out) < 1000 {
			t.Errorf("completion %s: exit %d, stderr %q, %d bytes", shell, code, errs, len(out))
		}
	}
	if _, out, _ := runCLI("__complete", "train", ""); !strings.Contains(out, "mnist-mlp") {
		t.Errorf("completing train's experiment: %q", out)
	}
	if _, out, _ := runCLI("__complete", "train", "mnist-mlp", "--preset", ""); !strings.Contains(out, "tiny") || !strings.Contains(out, "groups") {
		t.Errorf("completing --preset of mnist-mlp: %q", out)
	}
	if _, out, _ := runCLI("__complete", "train", "mnist-mlp", "--log-format", ""); !strings.Contains(out, "console") || !strings.Contains(out, "json") {
		t.Errorf("completing --log-format: %q", out)
	}
}

// TestBadFlagValuesAreRefused: a value the flag cannot take is an error naming the flag, never
// a silent default; so is an argument where none belongs.
func TestBadFlagValuesAreRefused(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"train", "mnist-mlp", "--max-epochs", "-3"}, []string{"--max-epochs -3", ">= 0"}},
		{[]string{"train", "--max-epochs", "-3", "mnist-mlp"}, []string{"--max-epochs -3"}},
		{[]string{"train", "mnist-mlp", "--max-epochs", "three"}, []string{`"three"`, "--max-epochs"}},
		{[]string{"train", "mnist-mlp", "--max-epochs=2.5"}, []string{`"2.5"`, "--max-epochs"}},
		{[]string{"train", "mnist-mlp", "--log-every", "x"}, []string{"--log-every"}},
		{[]string{"train", "mnist-mlp", "--stall-timeout", "5"}, []string{"--stall-timeout"}},
		{[]string{"train", "mnist-mlp", "--quiet=maybe"}, []string{"--quiet"}},
		{[]string{"train", "mnist-mlp", "--preset", ""}, []string{"--preset", "empty"}},
		{[]string{"train", "mnist-mlp", "--metrics-addr", ""}, []string{"--metrics-addr", "empty"}},
		{[]string{"train", "mnist-mlp", "--metrics-addr", "nonsense"}, []string{"--metrics-addr nonsense"}},
		{[]string{"evaluate", "mnist-mlp", "--split", ""}, []string{"--split", "empty"}},
		{[]string{"train", "mnist-mlp", "--log-format", "yaml"}, []string{`--log-format "yaml"`, "console", "json"}},
		{[]string{"evaluate", "--log-format", "text", "mnist-mlp"}, []string{"--log-format", "console", "json"}},
		{[]string{"train", "mnist-mlp", "-preset", "tiny"}, []string{"--preset"}},
		{[]string{"train", "mnist-mlp", "--mixed-precision", "fp16"}, []string{`--mixed-precision: mixed precision "fp16" is not a mode`, `"bf16"`, `"f32"`}},
		{[]string{"evaluate", "mnist-mlp", "--mixed-precision", "BF16"}, []string{"--mixed-precision", `"BF16"`, `"bf16"`}},
		{[]string{"train", "mnist-mlp", "--frobnicate"}, []string{"unknown flag: --frobnicate"}},
		{[]string{"evaluate", "mnist-mlp", "--metrics-addr", "127.0.0.1:0"}, []string{"--metrics-addr is a train flag"}},
		{[]string{"train", "mnist-mlp", "extra"}, []string{"unexpected arguments [extra]"}},
		{[]string{"train"}, []string{"train needs an experiment name", "mnist-mlp"}},
		{[]string{"list", "extra"}, []string{"extra"}},
		{[]string{"plot"}, []string{"plot needs one run directory"}},
		{[]string{"plot", t.TempDir()}, []string{"metrics.jsonl"}},
		{[]string{"data", "convert"}, []string{"data convert needs", "mnist"}},
		{[]string{"data", "convert", "cifar", t.TempDir()}, []string{`unknown data set "cifar"`, "mnist"}},
		{[]string{}, []string{"no command given", "usage: nitro <command>"}},
	}
	for _, c := range cases {
		code, out, errs := runCLI(c.args...)
		if code != 1 {
			t.Errorf("%v: exit %d, want 1 (stdout %q)", c.args, code, out)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%v: stderr %q lacks %q", c.args, errs, w)
			}
		}
	}
}

// TestPlotCommand trains the tiny preset into a temporary run dir (flags before the experiment
// name), then `nitro plot` draws its metrics.jsonl: each file written is printed, every PNG
// decodes and is not blank, and the index lists them; --out draws elsewhere.
func TestPlotCommand(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := runCLI(append(append([]string{"train"}, fast...), "--run-dir", dir, "mnist-mlp")...)
	if code != 0 {
		t.Fatalf("train: exit %d: %s\n%s", code, errs, out)
	}
	code, out, errs = runCLI("plot", dir)
	if code != 0 {
		t.Fatalf("plot: exit %d: %s\n%s", code, errs, out)
	}
	files := strings.Fields(out)
	var pngs []string
	for _, f := range files {
		if filepath.Dir(f) != filepath.Join(dir, "plots") {
			t.Errorf("plot wrote %s outside %s/plots", f, dir)
		}
		if strings.HasSuffix(f, ".png") {
			pngs = append(pngs, f)
		}
	}
	for _, want := range []string{"train_loss.png", "val_accuracy.png", "val_loss.png", "steps_per_second.png", "index.md"} {
		if !strings.Contains(out, string(filepath.Separator)+want+"\n") {
			t.Errorf("plot did not write %s:\n%s", want, out)
		}
	}
	for _, p := range pngs {
		checkNotBlank(t, p)
	}
	index, err := os.ReadFile(filepath.Join(dir, "plots", "index.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pngs {
		if !strings.Contains(string(index), filepath.Base(p)) {
			t.Errorf("index.md does not list %s:\n%s", filepath.Base(p), index)
		}
	}

	other := filepath.Join(t.TempDir(), "figs")
	code, out, errs = runCLI("plot", "--out", other, filepath.Join(dir, "metrics.jsonl"))
	if code != 0 || !strings.Contains(out, filepath.Join(other, "train_loss.png")) {
		t.Fatalf("plot --out %s FILE: exit %d: %s\n%s", other, code, errs, out)
	}
	checkNotBlank(t, filepath.Join(other, "train_loss.png"))
}

// TestPlotSaysSkippedLinesOnce: nitro plot on a record holding torn lines (failed writes) draws
// the whole lines and says once, on stderr, how many it skipped and where the first was.
func TestPlotSaysSkippedLinesOnce(t *testing.T) {
	dir := t.TempDir()
	train := func(step int, loss float64) string {
		return fmt.Sprintf(`{"type":"metrics","context":"train","epoch":1,"step":%d,"loss":%g}`, step, loss)
	}
	record := strings.Join([]string{`{"type":"params","seed":1}`, train(1, 2), train(2, 1)[:25], train(2, 1), train(3, 0.5)[:40],
		train(3, 0.5), `{"type":"finish","status":"completed"}`}, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "metrics.jsonl"), []byte(record), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI("plot", "--out", filepath.Join(dir, "figs"), dir)
	if code != 0 || !strings.Contains(out, "train_loss.png") {
		t.Fatalf("plot: exit %d: %s\n%s", code, errs, out)
	}
	want := "nitro: plot: warning: metrics.jsonl: skipped 2 malformed lines (first at line 3)"
	if strings.Count(errs, want) != 1 || strings.Count(errs, "skipped") != 1 {
		t.Errorf("stderr %q: want %q exactly once", errs, want)
	}
}

// checkNotBlank decodes the PNG at path and checks it shows something: more than one colour, and
// at least 0.2% of the pixels differ from the background (the most common colour).
func checkNotBlank(t *testing.T, path string) {
	t.Helper()
	img := decodePNG(t, path)
	b := img.Bounds()
	if b.Dx() < 100 || b.Dy() < 100 {
		t.Fatalf("%s is %v", path, b)
	}
	counts := map[[4]uint32]int{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			counts[[4]uint32{r, g, bl, a}]++
		}
	}
	most := 0
	for _, n := range counts {
		most = max(most, n)
	}
	total := b.Dx() * b.Dy()
	if len(counts) < 2 || float64(total-most) < 0.002*float64(total) {
		t.Errorf("%s looks blank: %d colours, %d of %d pixels off the background", path, len(counts), total-most, total)
	}
}

// syncBuffer is a bytes.Buffer safe to write from the CLI's goroutines while a test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMetricsEndpoint: train --metrics-addr 127.0.0.1:0 prints the endpoint on stderr before the
// run starts; a process-level monitor scrapes it over loopback during the run, on the first
// TrainStepping and on the first validation (EvalStepping after steps); the gauges parse, the
// steps and loss the exporter got as a logger are there by the validation, and after the run
// the endpoint is closed. The JSON Lines record is still kept beside the exporter.
func TestMetricsEndpoint(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr syncBuffer
	endpoint := regexp.MustCompile(`nitro: metrics endpoint: (http://127\.0\.0\.1:[0-9]+/metrics)\n`)
	client := &http.Client{Timeout: 10 * time.Second}
	var (
		mu      sync.Mutex
		scrapes = map[string]map[string]float64{}
		url     string
		errs    []error
	)
	h := monitors.RegisterFunc(func(p monitors.Phase, at monitors.Progress, _ monitors.Info) error {
		var when string
		switch p.(type) {
		case monitors.TrainStepping:
			when = "train"
		case monitors.EvalStepping:
			if at.Started && at.Step > 0 {
				when = "validate"
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if when == "" || scrapes[when] != nil {
			return nil
		}
		m := endpoint.FindStringSubmatch(stderr.String())
		if m == nil {
			errs = append(errs, fmt.Errorf("%s: no endpoint on stderr yet: %q", when, stderr.String()))
			scrapes[when] = map[string]float64{}
			return nil
		}
		url = m[1]
		got, err := scrape(client, url)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", when, err))
			got = map[string]float64{}
		}
		scrapes[when] = got
		return nil
	})
	t.Cleanup(h.Unregister)

	args := append(append([]string{"train", "mnist-mlp"}, fast...), "--run-dir", dir, "--metrics-addr", "127.0.0.1:0")
	code := cli.Main(args, &stdout, &stderr)
	h.Unregister()
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr.String(), stdout.String())
	}
	mu.Lock()
	defer mu.Unlock()
	for _, err := range errs {
		t.Error(err)
	}
	train, validate := scrapes["train"], scrapes["validate"]
	if train == nil || validate == nil {
		t.Fatalf("the monitor did not scrape at both points: %v", scrapes)
	}
	phases := func(s map[string]float64) (n int, on []string) {
		for k, v := range s {
			if strings.HasPrefix(k, `nitro_phase{phase="`) {
				n++
				if v == 1 {
					on = append(on, k)
				}
			}
		}
		return n, on
	}
	if _, ok := train["nitro_step"]; !ok {
		t.Errorf("no nitro_step at the first TrainStepping: %v", train)
	}
	if n, _ := phases(train); n < 10 {
		t.Errorf("want a nitro_phase series per phase at the first TrainStepping, got %d: %v", n, train)
	}
	if n, on := phases(validate); n < 10 || len(on) != 1 {
		t.Errorf("at validation: %d nitro_phase series, %v at 1: %v", n, on, validate)
	}
	if validate["nitro_step"] < 1 || validate["nitro_loss"] <= 0 || validate["nitro_epoch"] != 1 {
		t.Errorf("by the first validation the exporter should have the epoch's steps and loss: %v", validate)
	}
	if _, ok := validate["nitro_compile_cache_misses_total"]; !ok {
		t.Errorf("no compile cache gauges: %v", validate)
	}
	if _, err := client.Get(url); err == nil {
		t.Errorf("%s still answers after the run", url)
	}
	path := filepath.Join(dir, "metrics.jsonl")
	if _, err := os.Stat(path); err != nil || !strings.Contains(stdout.String(), "\nmetrics: "+path+"\n") {
		t.Errorf("--metrics-addr should keep the JSON Lines record beside the exporter: %v\n%s", err, stdout.String())
	}
}

// scrape GETs a Prometheus text exposition and returns each sample, "name{labels}" -> value.
func scrape(client *http.Client, url string) (map[string]float64, error) {
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			return nil, fmt.Errorf("sample line %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("sample line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("GET %s: no samples in %q", url, body)
	}
	return out, nil
}

// failingMonitor registers a process-level monitor that fails, so the run has a warning to say.
func failingMonitor(t *testing.T) {
	h := monitors.RegisterFunc(func(monitors.Phase, monitors.Progress, monitors.Info) error {
		return fmt.Errorf("deliberately broken")
	})
	t.Cleanup(h.Unregister)
}

// TestLogFormatConsole: the default console format reads like plain text: the reports as they
// are, "epoch 1/1  train_loss ...  val_accuracy ...", warnings as "warning: ...", no timestamps
// and no level on info lines.
func TestLogFormatConsole(t *testing.T) {
	failingMonitor(t)
	code, out, errs := runCLI(append([]string{"train", "mnist-mlp", "--log-format", "console", "--run-dir", t.TempDir()}, fast...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	for _, re := range []string{
		`(?m)^nitro MLP: `,
		`(?m)^binding report: \d+ values`,
		`(?m)^epoch 1/1  train_loss [0-9.]+(  val_(loss|accuracy) [0-9.]+){2}  seconds [0-9.]+  steps_per_second [0-9.]+$`, // the headline, not the per-class family
		`(?m)^warning: monitors: monitor #\d+ .*deliberately broken`,
		`(?m)^stopped: completed after 1 epochs, \d+ optimizer steps$`,
		`(?m)^test: test_accuracy [0-9.]+( test_accuracy_\d [0-9.]+){10} test_loss [0-9.]+$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("console output lacks %s:\n%s", re, out)
		}
	}
	if m := regexp.MustCompile(`(?m)^(\d{4}-\d\d-\d\d|INFO|info\b|\{).*`).FindString(out); m != "" {
		t.Errorf("console output has a timestamp, a level or JSON: %q", m)
	}
}

// TestLogFormatJSON: with --log-format json every stdout line is one JSON object with a "msg":
// the reports with their text, one "epoch" entry with structured fields, the warning at level
// warn, and the results.
func TestLogFormatJSON(t *testing.T) {
	failingMonitor(t)
	code, out, errs := runCLI(append([]string{"train", "mnist-mlp", "--log-format", "json", "--run-dir", t.TempDir()}, fast...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	byMsg := map[string]map[string]any{}
	warned := false
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		var e map[string]any
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("stdout line %d is not JSON: %v: %q", n, err, sc.Text())
		}
		msg, ok := e["msg"].(string)
		if !ok {
			t.Fatalf("stdout line %d has no msg: %q", n, sc.Text())
		}
		if e["level"] == "warn" && strings.Contains(msg, "deliberately broken") {
			warned = true
		}
		byMsg[msg] = e
	}
	if !warned {
		t.Errorf("no warn entry for the failing monitor:\n%s", out)
	}
	if r := byMsg["config report"]; r == nil || !strings.Contains(fmt.Sprint(r["text"]), "nitro MLP") {
		t.Errorf("config report entry: %v", r)
	}
	if r := byMsg["binding report"]; r == nil || !strings.HasPrefix(fmt.Sprint(r["text"]), "binding report") {
		t.Errorf("binding report entry: %v", r)
	}
	ep := byMsg["epoch"]
	if ep == nil || ep["epoch"] != 1.0 || ep["max_epochs"] != 1.0 {
		t.Fatalf("epoch entry: %v", ep)
	}
	for _, k := range []string{"train_loss", "val_accuracy", "val_loss", "seconds", "steps_per_second"} {
		if v, ok := ep[k].(float64); !ok || v <= 0 {
			t.Errorf("epoch entry's %s: %v (%v)", k, ep[k], ep)
		}
	}
	if s := byMsg["stopped"]; s == nil || s["reason"] != "completed" || s["epochs"] != 1.0 {
		t.Errorf("stopped entry: %v", s)
	}
	if e := byMsg["evaluation"]; e == nil || e["split"] != "test" || e["test_accuracy"] == nil {
		t.Errorf("evaluation entry: %v", e)
	}
	if c := byMsg["compile cache"]; c == nil || c["misses"] == nil {
		t.Errorf("compile cache entry: %v", c)
	}
}

// TestDataConvert: `nitro data convert mnist DIR` writes MNIST as Parquet files into DIR and
// lists them (train.parquet and t10k.parquet).
func TestDataConvert(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mnist")
	code, out, errs := runCLI("data", "convert", "mnist", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.parquet"))
	if err != nil || len(files) != 2 {
		t.Fatalf("no Parquet files in %s", dir)
	}
	for _, f := range files {
		if !strings.Contains(out, f) {
			t.Errorf("output does not list %s:\n%s", f, out)
		}
	}
}
