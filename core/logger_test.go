package core_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/logjson"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/monitors"
	"github.com/nitro-go/nitro/prefetch"
)

// verbs is the sequence of a Memory's calls: "params", "other:<key>", "<context>", "finish:<status>".
func verbs(m *logjson.Memory) []string {
	var out []string
	for _, c := range m.Calls() {
		switch c.Verb {
		case "other":
			out = append(out, "other:"+c.Key)
		case "metrics":
			out = append(out, c.Metrics.Context)
		case "finish":
			out = append(out, "finish:"+string(c.Status))
		default:
			out = append(out, c.Verb)
		}
	}
	return out
}

// epochMeans is the mean of the "train" lines' loss per epoch.
func epochMeans(lines []logjson.Metrics) map[int]float64 {
	sum, cnt := map[int]float64{}, map[int]int{}
	for _, l := range lines {
		sum[l.Epoch] += l.Values["loss"]
		cnt[l.Epoch]++
	}
	for e := range sum {
		sum[e] /= float64(cnt[e])
	}
	return sum
}

// TestLoggerCadence: params first (at the end of New, before anything compiled), the reports as
// "other", exactly one "train" line per optimizer step with increasing steps, one "validate" and
// one "data" line per epoch, finish last with completed.
func TestLoggerCadence(t *testing.T) {
	lg := &logjson.Memory{}
	cache := newCache()
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 32), core.WithMaxEpochs(2), core.WithCache(cache), core.WithLogger(lg))
	if got := verbs(lg); strings.Join(got, " ") != "params" || cache.Stats().Entries != 0 {
		t.Fatalf("after New the logger saw %v with %d programs compiled; want the params alone, before any compile", got, cache.Stats().Entries)
	}
	if n.Logger() != logjson.Logger(lg) {
		t.Errorf("Nitro.Logger() = %v, want the WithLogger one", n.Logger())
	}
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	got := verbs(lg)
	want := []string{"params", "other:config_report", "other:binding_report",
		"train", "train", "train", "train", "validate", "data",
		"train", "train", "train", "train", "validate", "data", "finish:completed"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("calls\n %v\nwant\n %v", got, want)
	}
	br, ok := lg.Other("binding_report")
	if s, _ := br.(string); !ok || !strings.Contains(s, "group default") || s != n.BindingReport() {
		t.Fatalf("binding_report not handed to the logger as the Nitro's report: %q", br)
	}
	if cr, ok := lg.Other("config_report"); !ok || cr != n.ConfigReport() {
		t.Fatalf("config_report not logged as the Nitro's report: %q", cr)
	}
	train := lg.Metrics(logjson.ContextTrain)
	for i, m := range train {
		if m.Step != i+1 || m.Epoch != i/4+1 {
			t.Errorf("train line %d at step %d epoch %d, want step %d epoch %d", i, m.Step, m.Epoch, i+1, i/4+1)
		}
		if _, ok := m.Values["loss"]; !ok || len(m.Values) != 3 {
			t.Errorf("train line %d values %v, want the loss and the step timing alone (no TrainMetrics hook)", i, m.Values)
		}
		if s, r := m.Values[core.KeyStepSeconds], m.Values[core.KeyStepsPerSecond]; !(s > 0) || math.Abs(r*s-1) > 1e-9 {
			t.Errorf("train line %d: step_seconds %v, steps_per_second %v; want a positive time and its inverse", i, s, r)
		}
	}
	val := lg.Metrics(logjson.ContextValidate)
	last := val[1]
	if last.Epoch != 2 || last.Step != 8 {
		t.Fatalf("last validate line at epoch %d step %d, want epoch 2 step 8", last.Epoch, last.Step)
	}
	if v, ok := last.Values["val_loss"]; !ok || len(last.Values) != 1 || v != n.History()[1].Val[core.ValLoss] {
		t.Fatalf("validate values %v, want val_loss alone, the epoch's finalized value", last.Values)
	}
	for i, d := range lg.Metrics(logjson.ContextData) {
		f, ok := d.Values["data_wait_frac"]
		if !ok || len(d.Values) != 4 || f < 0 || f > 1 || d.Epoch != i+1 || d.Step != 4*(i+1) {
			t.Errorf("data line %d = %+v; want data_wait_frac in [0, 1] at epoch %d step %d", i, d, i+1, 4*(i+1))
		}
		if h := n.History()[i]; d.Values["epoch_seconds"] != h.Seconds || d.Values["steps_per_second"] != h.StepsPerSecond ||
			d.Values["train_seconds"] != h.TrainSeconds || !(h.TrainSeconds > 0 && h.TrainSeconds < h.Seconds) {
			t.Errorf("data line %d = %+v; want the epoch's seconds %v, its train seconds %v (less: no validation) and steps/s", i, d, h.Seconds, h.TrainSeconds)
		}
		if f != n.History()[i].DataWaitFrac {
			t.Errorf("data line %d says %v, the epoch's summary %v", i, f, n.History()[i].DataWaitFrac)
		}
	}
	if m := epochMeans(train); m[2] >= m[1] {
		t.Fatalf("train loss did not fall: %v", m)
	}
	// The per-epoch means stay in the epoch summary.
	if h := n.History(); h[1].TrainLoss != epochMeans(train)[2] {
		t.Errorf("epoch 2 summary TrainLoss %v, the mean of its train lines %v", h[1].TrainLoss, epochMeans(train)[2])
	}
}

// TestLoggerIsTheMonitorsLogger: a monitor reaches the run's logger in Info.Logger.
func TestLoggerIsTheMonitorsLogger(t *testing.T) {
	lg := &logjson.Memory{}
	var seen any
	mon := monitors.MonitorFunc(func(_ monitors.Phase, _ monitors.Progress, info monitors.Info) error {
		seen = info.Logger
		return nil
	})
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 0), core.WithLogger(lg), core.WithMonitor(mon))
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	if seen != any(lg) {
		t.Errorf("monitors saw Info.Logger %v, want the run's logger", seen)
	}
	if got := lg.Metrics(logjson.ContextValidate); len(got) != 0 {
		t.Errorf("no val split, yet %d validate lines", len(got))
	}
	if got := lg.Metrics(logjson.ContextData); len(got) != 1 {
		t.Errorf("%d data lines for one epoch, want 1", len(got))
	}
}

// Logged has fields of every kind, for the params line.
type Logged struct {
	Width       int   `nitro:"graphconst"`
	Sizes       []int `nitro:"graphconst"`
	Temperature markers.Device[float32]
	Shift       markers.Device[[]float32]
	Note        string
	Rate        float32
	Patience    time.Duration
	Table       []float64 // a Host non-scalar (it could be a dataset): left out
	MaxEpochs   int
}

func (*Logged) BuildModel(*context.Context) error { return nil }

func (e *Logged) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	return devForward(ctx, in, e.Width, e.Temperature.Node(), e.Shift.Node())
}

func (*Logged) Loss(out core.Outputs, in coretest.Tgt) *graph.Node {
	return coretest.MSE(out["pred"], in.Y)
}

func TestLoggerParams(t *testing.T) {
	lg := &logjson.Memory{}
	e := &Logged{Width: 4, Sizes: []int{8, 2}, Temperature: markers.NewDevice[float32](0.1), Shift: markers.NewDevice([]float32{0}),
		Note: "host", Rate: 0.1, Patience: 3 * time.Second, Table: []float64{1, 2}, MaxEpochs: 7}
	dir := t.TempDir()
	coretest.MustNew(t, e, coretest.Data(t, 0), core.WithLogger(lg), core.WithMaxEpochs(2), core.WithRunDir(dir), core.WithFusedStep())
	ps := lg.Params()
	if len(ps) != 1 {
		t.Fatalf("%d LogParams calls, want 1", len(ps))
	}
	want := map[string]any{
		"Width": int64(4), "Sizes": "[8 2]", "Temperature": 0.1, "Note": "host", "Rate": 0.1, "Patience": "3s", "MaxEpochs": int64(7),
		"max_epochs": 2, "seed": 42, "accum": 1, "gradient_clip_norm": 0.0, "learning_rate": 1e-3, "run_dir": dir, "fused": true, "mixed_precision": "f32",
	}
	got := ps[0]
	for k, w := range want {
		if got[k] != w {
			t.Errorf("params[%q] = %#v, want %#v", k, got[k], w)
		}
	}
	for _, k := range []string{"Shift", "Table"} {
		if _, ok := got[k]; ok {
			t.Errorf("params hold the non-scalar %s = %v; want it left out", k, got[k])
		}
	}
	if len(got) != len(want) {
		t.Errorf("params %v: want exactly the keys %v", got, keys(want))
	}
	if _, err := logjson.FlattenParams(got); err != nil {
		t.Errorf("params are not flat: %v", err)
	}
}

// TestLoggerFinishError: a run that fails mid-epoch is finished with error, never completed.
func TestLoggerFinishError(t *testing.T) {
	lg := &logjson.Memory{}
	d := coretest.Data(t, 32)
	d["train"] = failingSource{Source: d["train"], at: 2}
	n := coretest.MustNew(t, &coretest.Reg{}, d, core.WithMaxEpochs(2), core.WithLogger(lg))
	if err := n.Train(); err == nil {
		t.Fatal("Train succeeded over a failing source")
	}
	if f := lg.Finishes(); len(f) != 1 || f[0] != logjson.StatusError {
		t.Fatalf("finishes %v, want [error]", f)
	}
	got := verbs(lg)
	if got[len(got)-1] != "finish:error" || len(lg.Metrics(logjson.ContextTrain)) != 2 {
		t.Errorf("calls %v: want the 2 steps taken, then finish error last", got)
	}
}

// TestLoggerFinishRequested: RequestStop ends the run after the epoch, finished with requested.
func TestLoggerFinishRequested(t *testing.T) {
	lg := &logjson.Memory{}
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 32), core.WithMaxEpochs(3), core.WithLogger(lg))
	n.RequestStop() // kept: one epoch, validated, then stop
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	if lg.Status() != logjson.StatusRequested || len(lg.Finishes()) != 1 {
		t.Fatalf("finishes %v, want [requested]", lg.Finishes())
	}
	if v, d := lg.Metrics(logjson.ContextValidate), lg.Metrics(logjson.ContextData); len(v) != 1 || len(d) != 1 {
		t.Errorf("%d validate and %d data lines for the one epoch, want 1 and 1", len(v), len(d))
	}
}

// Metered reports a finite and a NaN TrainMetric every step.
type Metered struct{ coretest.Base }

func (*Metered) TrainMetrics(out core.Outputs, in coretest.Tgt) map[string]*graph.Node {
	l := coretest.MSE(out["pred"], in.Y)
	zero := graph.ZerosLike(l)
	return map[string]*graph.Node{"mse": l, "nan": graph.Div(zero, zero)}
}

// TestLogEveryThinsTrainLines: LogEvery 2 writes every second step's train line (with its
// TrainMetrics), half as many; validate and data lines are per epoch as before.
func TestLogEveryThinsTrainLines(t *testing.T) {
	lg := &logjson.Memory{}
	n := coretest.MustNew(t, &Metered{}, coretest.Data(t, 32), core.WithMaxEpochs(2), core.WithLogger(lg), core.WithLogEvery(2))
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	train := lg.Metrics(logjson.ContextTrain)
	if len(train) != 4 {
		t.Fatalf("%d train lines over 8 steps at LogEvery 2, want 4", len(train))
	}
	for i, m := range train {
		if m.Step != 2*(i+1) {
			t.Errorf("train line %d at step %d, want %d", i, m.Step, 2*(i+1))
		}
		if _, ok := m.Values["mse"]; !ok {
			t.Errorf("train line %d lacks its TrainMetric: %v", i, m.Values)
		}
	}
	if v := lg.Metrics(logjson.ContextValidate); len(v) != 2 {
		t.Errorf("%d validate lines, want 2", len(v))
	}
	if mse, ok := n.History()[0].Train["mse"]; !ok || mse <= 0 {
		t.Errorf("epoch summary TrainMetrics %v: want the mse mean of the logged steps", n.History()[0].Train)
	}
	err := newErr(t, &coretest.Reg{}, coretest.Data(t, 0), core.WithLogEvery(0))
	coretest.WantErr(t, err, "WithLogEvery(0)", ">= 1")
}

// TestNonFiniteTrainMetricDroppedAndCounted: a NaN TrainMetric is left out of each train line,
// the logger is told how many were dropped, and the run goes on to completed.
func TestNonFiniteTrainMetricDroppedAndCounted(t *testing.T) {
	lg := &logjson.Memory{}
	n := coretest.MustNew(t, &Metered{}, coretest.Data(t, 32), core.WithMaxEpochs(2), core.WithLogger(lg))
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	train := lg.Metrics(logjson.ContextTrain)
	if len(train) != 8 {
		t.Fatalf("%d train lines, want 8", len(train))
	}
	for i, m := range train {
		if _, ok := m.Values["nan"]; ok || len(m.Values) != 4 {
			t.Errorf("train line %d = %v, want loss and mse, the NaN dropped", i, m.Values)
		}
	}
	if lg.Dropped() != 8 || lg.Status() != logjson.StatusCompleted {
		t.Errorf("dropped %d, status %q; want 8 (one per step) and completed", lg.Dropped(), lg.Status())
	}
}

// TestLoggerErrorsWarnOnceAndTrainingGoesOn: a failing logger never stops training; each
// distinct failure is one warning.
func TestLoggerErrorsWarnOnceAndTrainingGoesOn(t *testing.T) {
	lg := &logjson.Memory{}
	lg.Fail(errors.New("backend down"))
	var warnings []string
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 32), core.WithMaxEpochs(2), core.WithLogger(lg),
		core.WithWarn(func(msg string) { warnings = append(warnings, msg) }))
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	if n.Step() != 8 || n.StopReason() != core.StopCompleted {
		t.Fatalf("step %d, stop %q: the run did not go on", n.Step(), n.StopReason())
	}
	seen := map[string]int{}
	for _, w := range warnings {
		seen[w]++
		if !strings.Contains(w, "backend down") {
			t.Errorf("warning %q does not name the failure", w)
		}
	}
	for w, c := range seen {
		if c != 1 {
			t.Errorf("warning %q reported %d times, want once", w, c)
		}
	}
	for _, what := range []string{"params", "config_report", "binding_report", "train metrics", "validate metrics", "data metrics", "finish"} {
		if seen["logger: "+what+": backend down"] != 1 {
			t.Errorf("no warning for the failed %s: %q", what, warnings)
		}
	}
}

// panicky is a broken logger: every metrics line panics.
type panicky struct{ logjson.Memory }

func (*panicky) LogMetrics(logjson.Metrics) error { panic("broken backend") }

// TestPanickingLoggerNeverStopsTheRun: a panic in a logger call is a warning, like an error.
func TestPanickingLoggerNeverStopsTheRun(t *testing.T) {
	lg := &panicky{}
	var warnings []string
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 32), core.WithMaxEpochs(1), core.WithLogger(lg),
		core.WithWarn(func(msg string) { warnings = append(warnings, msg) }))
	if err := n.Train(); err != nil || n.Step() != 4 {
		t.Fatalf("Train: %v after %d steps; a panicking logger must not stop the run", err, n.Step())
	}
	if len(warnings) != 3 || !strings.Contains(warnings[0], "panic: broken backend") {
		t.Errorf("warnings %q: want one per kind of line (train, validate, data), naming the panic", warnings)
	}
	if lg.Status() != logjson.StatusCompleted {
		t.Errorf("status %q, want completed", lg.Status())
	}
}

// readLines parses a JSON Lines file, failing on a line that does not parse.
func readLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for i := 1; sc.Scan(); i++ {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s line %d does not parse: %v\n%s", path, i, err, sc.Text())
		}
		out = append(out, m)
	}
	return out
}

// TestDefaultJSONLogger: with no logger option, the run's record is <RunDir>/metrics.jsonl:
// params at the end of New, then every line of Train, finish last; every line parses.
func TestDefaultJSONLogger(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	n, err := core.New(&coretest.Reg{}, core.WithBackend("go"), core.Quiet(), core.WithCache(newCache()), core.WithData(coretest.Data(t, 32)),
		core.WithMaxEpochs(2), core.WithRunDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, core.MetricsFile)
	if p := logjson.Info(n.Logger())["path"]; p != path {
		t.Fatalf("the default logger writes to %v, want %s", p, path)
	}
	if lines := readLines(t, path); len(lines) != 1 || lines[0]["type"] != "params" {
		t.Fatalf("after New the file holds %v, want the params line alone", lines)
	}
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, path)
	if lines[0]["type"] != "params" || lines[0]["max_epochs"] != 2.0 || lines[0]["run_dir"] != dir {
		t.Errorf("first line %v, want the params (max_epochs 2, run_dir %s)", lines[0], dir)
	}
	if last := lines[len(lines)-1]; last["type"] != "finish" || last["status"] != "completed" {
		t.Errorf("last line %v, want finish completed", last)
	}
	count := map[string]int{}
	step := 0.0
	for _, l := range lines {
		key := l["type"].(string)
		if c, ok := l["context"].(string); ok {
			key = c
		}
		if k, ok := l["key"].(string); ok {
			key = k
		}
		count[key]++
		if key == "train" {
			if s := l["step"].(float64); s <= step {
				t.Errorf("train step %v after %v: steps must increase", s, step)
			} else {
				step = s
			}
		}
	}
	want := map[string]int{"params": 1, "config_report": 1, "binding_report": 1, "train": 8, "validate": 2, "data": 2, "finish": 1}
	for k, w := range want {
		if count[k] != w {
			t.Errorf("%d %s lines, want %d (all: %v)", count[k], k, w, count)
		}
	}
	if len(lines) != 16 {
		t.Errorf("%d lines, want 16", len(lines))
	}
}

// TestNoRecordWithoutLogger: WithoutLogger writes nothing; a setup that fails writes nothing
// either, default logger or not (the file opens on the first record, the params at the end of
// New); a pathless JSONLogger passed in is pinned like the default; a typed nil is no logger.
func TestNoRecordWithoutLogger(t *testing.T) {
	dir := t.TempDir()
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 32), core.WithRunDir(filepath.Join(dir, "off")))
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	if n.Logger() != nil {
		t.Errorf("WithoutLogger: Logger() = %v", n.Logger())
	}
	bad := coretest.Data(t, 0)
	bad["train"] = coretest.Arrays(t, 64, 16, 1, prefetch.ArrayOptions{}) // keeps its partial batch: refused
	_, err := core.New(&coretest.Reg{}, core.WithBackend("go"), core.Quiet(), core.WithData(bad), core.WithRunDir(filepath.Join(dir, "failed")))
	if err == nil {
		t.Fatal("setup accepted a train split that keeps its partial batch")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("the run dir holds %v; want nothing written", entries)
	}

	jl := logjson.NewJSONLogger("")
	coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 0), core.WithLogger(jl), core.WithRunDir(filepath.Join(dir, "pinned")))
	if want := filepath.Join(dir, "pinned", core.MetricsFile); jl.Path() != want {
		t.Errorf("a pathless JSONLogger was pinned to %q, want %q", jl.Path(), want)
	}
	// Inside a Multi (the CLI's JSON file beside a Prometheus exporter) it is pinned too.
	jm, mem := logjson.NewJSONLogger(""), &logjson.Memory{}
	nm := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 0), core.WithLogger(logjson.Multi(jm, mem)), core.WithRunDir(filepath.Join(dir, "multi")))
	if want := filepath.Join(dir, "multi", core.MetricsFile); jm.Path() != want || nm.MetricsPath() != want {
		t.Errorf("a pathless JSONLogger in a Multi: path %q, MetricsPath %q, want %q", jm.Path(), nm.MetricsPath(), want)
	}
	if len(mem.Params()) == 0 {
		t.Error("the Multi's other member got no params")
	}
	var typedNil *logjson.JSONLogger
	if n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 0), core.WithLogger(typedNil)); n.Logger() != nil {
		t.Errorf("WithLogger(typed nil): Logger() = %v, want nil", n.Logger())
	}
}

// TestConsoleLabelsValidationMetrics: the epoch line names validation metrics val_*.
func TestConsoleLabelsValidationMetrics(t *testing.T) {
	var buf bytes.Buffer
	n, err := core.New(&Rows{}, core.WithBackend("go"), core.WithOutput(&buf), core.WithCache(newCache()), core.WithoutLogger(), core.WithoutCheckpoints(),
		core.WithData(coretest.Data(t, 32)))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	line := buf.String()[strings.Index(buf.String(), "epoch 1/1"):]
	wantContains(t, "epoch line", line, "val_mse ", "val_rows ", "val_sse ")
	if strings.Contains(line, "val_val_") || strings.Contains(line, "  mse") {
		t.Errorf("epoch line mislabels validation metrics: %q", line)
	}
}
