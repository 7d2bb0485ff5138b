package logjson_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nitro-go/nitro/logjson"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// checkGolden compares got with testdata/<name>.golden, rewriting it under -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s:\n got %s\nwant %s", path, got, want)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newLogger(t *testing.T) (*logjson.JSONLogger, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	return logjson.NewJSONLogger(path), path
}

// TestGoldenLines writes each line type with a fresh logger and compares the file with its golden.
func TestGoldenLines(t *testing.T) {
	cases := []struct {
		name  string
		write func(l *logjson.JSONLogger) error
	}{
		{"params", func(l *logjson.JSONLogger) error {
			return l.LogParams(map[string]any{"seed": 42, "max_epochs": 40, "width": 128})
		}},
		{"params_nested", func(l *logjson.JSONLogger) error {
			return l.LogParams(map[string]any{
				"seed": 1, "preset": "reference_v1", "dims": []int{784, 128, 10},
				"optimizer": map[string]any{"name": "adamw", "lr": 1e-3, "betas": map[string]float64{"b1": 0.9, "b2": 0.999}},
			})
		}},
		{"metrics_train", func(l *logjson.JSONLogger) error {
			return l.LogMetrics(logjson.Metrics{Step: 4, Epoch: 1, Context: logjson.ContextTrain, Values: map[string]float64{"loss": 0.31, "step_seconds": 0.0125, "steps_per_second": 80}})
		}},
		{"metrics_validate", func(l *logjson.JSONLogger) error {
			return l.LogMetrics(logjson.Metrics{Step: 160, Epoch: 1, Context: logjson.ContextValidate, Values: map[string]float64{"val_loss": 0.29, "val_accuracy": 0.9696}})
		}},
		{"metrics_data", func(l *logjson.JSONLogger) error {
			return l.LogMetrics(logjson.Metrics{Step: 160, Epoch: 1, Context: logjson.ContextData, Values: map[string]float64{"data_wait_frac": 0.012, "epoch_seconds": 2.5, "train_seconds": 2, "steps_per_second": 80}})
		}},
		{"other", func(l *logjson.JSONLogger) error {
			return l.LogOther("binding_report", "lr <- schedule \"cosine\" & warmup\nwidth <- preset reference_v1\n")
		}},
		{"tags", func(l *logjson.JSONLogger) error { return l.LogTags([]string{"mnist", "baseline"}) }},
		{"confusion", func(l *logjson.JSONLogger) error {
			return l.LogConfusion([][]int{{5, 1}, {0, 4}}, []string{"cat", "dog"}, 3)
		}},
		{"finish", func(l *logjson.JSONLogger) error { return l.Finish(logjson.StatusCompleted) }},
		{"finish_dropped", func(l *logjson.JSONLogger) error {
			err := l.LogMetrics(logjson.Metrics{Step: 1, Epoch: 1, Context: "train", Values: map[string]float64{"loss": math.NaN(), "grad_norm": math.Inf(1), "lr": 0.1}})
			return errors.Join(err, l.Finish(logjson.StatusError))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, path := newLogger(t)
			must(t, c.write(l))
			checkGolden(t, c.name, readFile(t, path))
		})
	}
}

// TestSpecExamples checks JSONLogger's documented example lines byte for byte.
func TestSpecExamples(t *testing.T) {
	l, path := newLogger(t)
	must(t, l.LogMetrics(logjson.Metrics{Context: "train", Epoch: 1, Step: 4, Values: map[string]float64{"loss": 0.31}}))
	must(t, l.LogMetrics(logjson.Metrics{Context: "validate", Epoch: 1, Step: 160, Values: map[string]float64{"val_loss": 0.29}}))
	must(t, l.LogMetrics(logjson.Metrics{Context: "data", Epoch: 1, Step: 160, Values: map[string]float64{"data_wait_frac": 0.012}}))
	must(t, l.LogOther("binding_report", "..."))
	must(t, l.Finish(logjson.StatusCompleted))
	want := `{"type":"metrics","context":"train","epoch":1,"step":4,"loss":0.31}
{"type":"metrics","context":"validate","epoch":1,"step":160,"val_loss":0.29}
{"type":"metrics","context":"data","epoch":1,"step":160,"data_wait_frac":0.012}
{"type":"other","key":"binding_report","value":"..."}
{"type":"finish","status":"completed"}
`
	if got := string(readFile(t, path)); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestShortRunReadBack writes a run the way the driver does and reads it back line by line.
func TestShortRunReadBack(t *testing.T) {
	l, path := newLogger(t)
	const epochs, stepsPerEpoch = 3, 4
	must(t, l.LogParams(map[string]any{"seed": 42, "max_epochs": epochs, "width": 128}))
	step := 0
	for epoch := 1; epoch <= epochs; epoch++ {
		for range stepsPerEpoch {
			step++
			loss := 1 / float64(step)
			if step == 6 {
				loss = math.NaN() // dropped and counted, the line still written
			}
			must(t, l.LogMetrics(logjson.Metrics{Step: step, Epoch: epoch, Context: logjson.ContextTrain, Values: map[string]float64{"loss": loss, "lr": 0.01}}))
		}
		must(t, l.LogMetrics(logjson.Metrics{Step: step, Epoch: epoch, Context: logjson.ContextValidate, Values: map[string]float64{"val_loss": 0.5, "val_accuracy": 0.9}}))
		must(t, l.LogMetrics(logjson.Metrics{Step: step, Epoch: epoch, Context: logjson.ContextData, Values: map[string]float64{"data_wait_frac": 0.01}}))
	}
	must(t, l.LogOther("binding_report", "lr <- default\n"))
	must(t, l.Finish(logjson.StatusCompleted))

	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	var lines []map[string]any
	for n := 1; sc.Scan(); n++ {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %d does not parse: %v: %s", n, err, sc.Text())
		}
		if _, ok := m["type"].(string); !ok {
			t.Fatalf("line %d has no type: %s", n, sc.Text())
		}
		lines = append(lines, m)
	}
	must(t, sc.Err())

	if got := lines[0]["type"]; got != "params" {
		t.Errorf("first line is %v, want params", got)
	}
	last := lines[len(lines)-1]
	if last["type"] != "finish" || last["status"] != "completed" || last["dropped_non_finite"] != 1.0 {
		t.Errorf("last line = %v, want finish completed with dropped_non_finite 1", last)
	}
	counts := map[string]int{}
	prevStep := 0.0
	for i, m := range lines {
		typ := m["type"].(string)
		if typ == "finish" && i != len(lines)-1 {
			t.Errorf("finish at line %d, not last", i+1)
		}
		if typ != "metrics" {
			counts[typ]++
			continue
		}
		ctx := m["context"].(string)
		counts[ctx]++
		if ctx == logjson.ContextTrain {
			s := m["step"].(float64)
			if s <= prevStep {
				t.Errorf("line %d: train step %v after %v", i+1, s, prevStep)
			}
			prevStep = s
			if _, ok := m["lr"]; !ok {
				t.Errorf("line %d: train line lost lr: %v", i+1, m)
			}
		}
	}
	want := map[string]int{"params": 1, "train": epochs * stepsPerEpoch, "validate": epochs, "data": epochs, "other": 1, "finish": 1}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("%s lines = %d, want %d (all: %v)", k, counts[k], v, counts)
		}
	}
	if l.Lines() != len(lines) || l.Dropped() != 1 {
		t.Errorf("Lines() = %d, Dropped() = %d; want %d, 1", l.Lines(), l.Dropped(), len(lines))
	}
}

func TestLazyOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runs", "MLP")
	path := filepath.Join(dir, "metrics.jsonl")
	l := logjson.NewJSONLogger("")
	if got := l.Info()["path"]; got != nil {
		t.Errorf("pathless Info path = %v, want nil", got)
	}
	if err := l.LogOther("k", 1); !errors.Is(err, logjson.ErrNoPath) {
		t.Fatalf("write with no path: %v, want ErrNoPath", err)
	}
	must(t, l.SetPath(filepath.Join(dir, "elsewhere.jsonl")))
	must(t, l.SetPath(path)) // re-pinnable until the first write
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("run dir exists before the first write: %v", err)
	}
	if got := l.Info()["path"]; got != path {
		t.Errorf("Info path = %v, want %s", got, path)
	}
	must(t, l.LogParams(map[string]any{"seed": 1}))
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no file after the first write: %v", err)
	}
	if err := l.SetPath(filepath.Join(dir, "other.jsonl")); err == nil {
		t.Error("SetPath to another path after open: no error")
	}
	must(t, l.SetPath(path))
	must(t, l.Finish(logjson.StatusCompleted))
}

func TestAppendOnResume(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	a := logjson.NewJSONLogger(path)
	must(t, a.LogParams(map[string]any{"seed": 1}))
	must(t, a.LogMetrics(logjson.Metrics{Step: 1, Epoch: 1, Context: "train", Values: map[string]float64{"loss": 1}}))
	must(t, a.Finish(logjson.StatusRequested))

	b := logjson.NewJSONLogger("")
	must(t, b.SetPath(path))
	must(t, b.LogMetrics(logjson.Metrics{Step: 2, Epoch: 1, Context: "train", Values: map[string]float64{"loss": 0.5}}))
	must(t, b.Finish(logjson.StatusCompleted))

	want := `{"type":"params","seed":1}
{"type":"metrics","context":"train","epoch":1,"step":1,"loss":1}
{"type":"finish","status":"requested"}
{"type":"metrics","context":"train","epoch":1,"step":2,"loss":0.5}
{"type":"finish","status":"completed"}
`
	if got := string(readFile(t, path)); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// A crash in the middle of a line must not glue the resumed run's first line onto it.
func TestAppendAfterTornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	must(t, os.WriteFile(path, []byte("{\"type\":\"params\",\"seed\":1}\n{\"type\":\"metr"), 0o644))
	l := logjson.NewJSONLogger(path)
	must(t, l.LogOther("k", "v"))
	must(t, l.Finish(logjson.StatusCompleted))
	lines := strings.Split(strings.TrimSuffix(string(readFile(t, path)), "\n"), "\n")
	if len(lines) != 4 || lines[2] != `{"type":"other","key":"k","value":"v"}` {
		t.Fatalf("lines = %q", lines)
	}
}

func TestFinishErrorNotOverwritten(t *testing.T) {
	l, path := newLogger(t)
	must(t, l.Finish(logjson.StatusError))
	must(t, l.Finish(logjson.StatusCompleted)) // a deferred close: no-op
	if got, want := string(readFile(t, path)), "{\"type\":\"finish\",\"status\":\"error\"}\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if err := l.LogOther("k", 1); !errors.Is(err, logjson.ErrFinished) {
		t.Errorf("write after finish: %v, want ErrFinished", err)
	}
}

// When the error finish cannot be written, a later completed retries with error, not completed.
func TestFinishErrorSurvivesFailedWrite(t *testing.T) {
	l := logjson.NewJSONLogger("")
	if err := l.Finish(logjson.StatusError); !errors.Is(err, logjson.ErrNoPath) {
		t.Fatalf("Finish with no path: %v", err)
	}
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	must(t, l.SetPath(path))
	must(t, l.Finish(logjson.StatusCompleted))
	if got := string(readFile(t, path)); got != "{\"type\":\"finish\",\"status\":\"error\"}\n" {
		t.Errorf("got %q", got)
	}
}

func TestRefusals(t *testing.T) {
	l, path := newLogger(t)
	if err := l.Finish("crashed"); !errors.Is(err, logjson.ErrUnknownStatus) {
		t.Errorf("unknown status: %v", err)
	}
	for _, k := range []string{"type", "context", "epoch", "step"} {
		err := l.LogMetrics(logjson.Metrics{Context: "train", Values: map[string]float64{k: 1}})
		if !errors.Is(err, logjson.ErrReservedKey) || !strings.Contains(err.Error(), k) {
			t.Errorf("metric %q: %v, want ErrReservedKey naming it", k, err)
		}
	}
	if err := l.LogParams(map[string]any{"type": "mlp"}); !errors.Is(err, logjson.ErrReservedKey) {
		t.Errorf("param type: %v", err)
	}
	if err := l.LogParams(map[string]any{"a.b": 1, "a": map[string]any{"b": 2}}); err == nil || !strings.Contains(err.Error(), `"a.b"`) {
		t.Errorf("flatten collision: %v", err)
	}
	if err := l.LogOther("x", math.NaN()); err == nil {
		t.Error("LogOther(NaN): no error")
	}
	if err := l.LogConfusion([][]int{{1, 2}, {3}}, nil, 1); err == nil {
		t.Error("ragged confusion matrix: no error")
	}
	if err := l.LogConfusion([][]int{{1}}, []string{"a", "b"}, 1); err == nil {
		t.Error("labels/classes mismatch: no error")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a refused call created the file: %v", err)
	}
}

func TestNoEscapeHTML(t *testing.T) {
	l, path := newLogger(t)
	must(t, l.LogOther("binding_report", "a <b> & c"))
	if got := string(readFile(t, path)); !strings.Contains(got, `"a <b> & c"`) {
		t.Errorf("got %s", got)
	}
}

func TestConcurrentWrites(t *testing.T) {
	l, path := newLogger(t)
	const workers, each = 8, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				err := l.LogMetrics(logjson.Metrics{Step: i, Epoch: w, Context: "train", Values: map[string]float64{"loss": float64(i), "w": float64(w)}})
				if err != nil {
					t.Error(err)
					return
				}
				_ = l.Info()
			}
		}()
	}
	wg.Wait()
	must(t, l.Finish(logjson.StatusCompleted))
	lines := strings.Split(strings.TrimSuffix(string(readFile(t, path)), "\n"), "\n")
	if len(lines) != workers*each+1 {
		t.Fatalf("%d lines, want %d", len(lines), workers*each+1)
	}
	for i, s := range lines {
		if !json.Valid([]byte(s)) {
			t.Fatalf("line %d: %s", i+1, s)
		}
	}
}

func TestIdentified(t *testing.T) {
	l, path := newLogger(t)
	if logjson.RunID(l) != "" || logjson.RunURL(l) != "" {
		t.Error("JSONLogger has a run id or url")
	}
	if got := fmt.Sprint(logjson.Info(l)); got != fmt.Sprintf("map[path:%s]", path) {
		t.Errorf("Info = %s", got)
	}
	if logjson.Backend(l) != logjson.Logger(l) {
		t.Error("JSONLogger's backend is not itself")
	}
	typ, st, err := logjson.State(l)
	if typ != "" || st != nil || err != nil {
		t.Errorf("State(JSONLogger) = %q, %s, %v; want no state", typ, st, err)
	}
}

// BenchmarkLogMetrics is the per-step cost of a train line (encode and one write call).
func BenchmarkLogMetrics(b *testing.B) {
	l := logjson.NewJSONLogger(filepath.Join(b.TempDir(), "metrics.jsonl"))
	values := map[string]float64{"loss": 0.31, "accuracy": 0.9, "lr": 1e-3}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := l.LogMetrics(logjson.Metrics{Step: i, Epoch: 1, Context: logjson.ContextTrain, Values: values}); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Finish(logjson.StatusCompleted); err != nil {
		b.Fatal(err)
	}
}
