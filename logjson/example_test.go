package logjson_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/nitro-go/nitro/logjson"
)

// runDir makes a scratch run directory for an example; the caller removes it.
func runDir() string {
	dir, err := os.MkdirTemp("", "logjson-example-")
	if err != nil {
		panic(err)
	}
	return dir
}

func printFile(path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(b))
}

func ExampleNewJSONLogger() {
	dir := runDir()
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "runs", "MLP", "metrics.jsonl")

	l := logjson.NewJSONLogger(path) // nothing is created yet
	_, err := os.Stat(path)
	fmt.Println("file before the first write:", !os.IsNotExist(err))

	_ = l.LogParams(map[string]any{"seed": 42})
	_ = l.Finish(logjson.StatusCompleted)
	printFile(path)
	// Output:
	// file before the first write: false
	// {"type":"params","seed":42}
	// {"type":"finish","status":"completed"}
}

func ExampleJSONLogger_SetPath() {
	dir := runDir()
	defer os.RemoveAll(dir)

	l := logjson.NewJSONLogger("") // the experiment's default, pathless
	fmt.Println(l.Info())
	// setup pins it to the run directory
	_ = l.SetPath(filepath.Join(dir, "metrics.jsonl"))
	fmt.Println(filepath.Base(l.Path()))
	// Output:
	// map[path:<nil>]
	// metrics.jsonl
}

func ExampleJSONLogger_LogParams() {
	dir := runDir()
	defer os.RemoveAll(dir)
	l := logjson.NewJSONLogger(filepath.Join(dir, "metrics.jsonl"))

	_ = l.LogParams(map[string]any{"seed": 42, "max_epochs": 40, "width": 128, "optimizer": map[string]any{"lr": 0.001}})
	printFile(l.Path())
	// Output:
	// {"type":"params","max_epochs":40,"optimizer.lr":0.001,"seed":42,"width":128}
}

func ExampleJSONLogger_LogMetrics() {
	dir := runDir()
	defer os.RemoveAll(dir)
	l := logjson.NewJSONLogger(filepath.Join(dir, "metrics.jsonl"))

	_ = l.LogMetrics(logjson.Metrics{Step: 4, Epoch: 1, Context: logjson.ContextTrain, Values: map[string]float64{"loss": 0.31}})
	_ = l.LogMetrics(logjson.Metrics{Step: 160, Epoch: 1, Context: logjson.ContextValidate, Values: map[string]float64{"val_loss": 0.29}})
	_ = l.LogMetrics(logjson.Metrics{Step: 160, Epoch: 1, Context: logjson.ContextData, Values: map[string]float64{"data_wait_frac": 0.012}})
	err := l.LogMetrics(logjson.Metrics{Step: 161, Context: logjson.ContextTrain, Values: map[string]float64{"step": 1}})
	printFile(l.Path())
	fmt.Println(errors.Is(err, logjson.ErrReservedKey))
	// Output:
	// {"type":"metrics","context":"train","epoch":1,"step":4,"loss":0.31}
	// {"type":"metrics","context":"validate","epoch":1,"step":160,"val_loss":0.29}
	// {"type":"metrics","context":"data","epoch":1,"step":160,"data_wait_frac":0.012}
	// true
}

func ExampleJSONLogger_LogOther() {
	dir := runDir()
	defer os.RemoveAll(dir)
	l := logjson.NewJSONLogger(filepath.Join(dir, "metrics.jsonl"))

	_ = l.LogOther("binding_report", "lr <- schedule cosine\n")
	printFile(l.Path())
	// Output:
	// {"type":"other","key":"binding_report","value":"lr <- schedule cosine\n"}
}

func ExampleJSONLogger_LogTags() {
	dir := runDir()
	defer os.RemoveAll(dir)
	l := logjson.NewJSONLogger(filepath.Join(dir, "metrics.jsonl"))

	_ = l.LogTags([]string{"mnist", "baseline"})
	printFile(l.Path())
	// Output:
	// {"type":"tags","tags":["mnist","baseline"]}
}

func ExampleJSONLogger_LogConfusion() {
	dir := runDir()
	defer os.RemoveAll(dir)
	l := logjson.NewJSONLogger(filepath.Join(dir, "metrics.jsonl"))

	_ = l.LogConfusion([][]int{{5, 1}, {0, 4}}, []string{"cat", "dog"}, 3)
	printFile(l.Path())
	// Output:
	// {"type":"confusion","epoch":3,"labels":["cat","dog"],"matrix":[[5,1],[0,4]]}
}

func ExampleJSONLogger_Finish() {
	dir := runDir()
	defer os.RemoveAll(dir)
	l := logjson.NewJSONLogger(filepath.Join(dir, "metrics.jsonl"))

	_ = l.LogMetrics(logjson.Metrics{Step: 1, Epoch: 1, Context: "train", Values: map[string]float64{"loss": math.NaN()}})
	_ = l.Finish(logjson.StatusError)
	_ = l.Finish(logjson.StatusCompleted) // a deferred close: the error stands
	printFile(l.Path())
	// Output:
	// {"type":"metrics","context":"train","epoch":1,"step":1}
	// {"type":"finish","status":"error","dropped_non_finite":1}
}

func ExampleJSONLogger_Info() {
	l := logjson.NewJSONLogger("runs/MLP/metrics.jsonl")
	fmt.Println(l.Info(), l.RunID() == "", l.RunURL() == "")
	// Output:
	// map[path:runs/MLP/metrics.jsonl] true true
}

func ExampleFlattenParams() {
	flat, _ := logjson.FlattenParams(map[string]any{"seed": 1, "opt": map[string]any{"lr": 0.1, "betas": []float64{0.9, 0.999}}})
	fmt.Println(flat)
	_, err := logjson.FlattenParams(map[string]any{"opt.lr": 1, "opt": map[string]any{"lr": 2}})
	fmt.Println(err)
	// Output:
	// map[opt.betas:[0.9 0.999] opt.lr:0.1 seed:1]
	// logjson: params: two entries flatten to the key "opt.lr"
}

func ExampleDropNonFinite() {
	kept, dropped := logjson.DropNonFinite(map[string]float64{"loss": math.NaN(), "lr": 0.01, "grad_norm": math.Inf(1)})
	fmt.Println(kept, dropped)
	// Output:
	// map[lr:0.01] 2
}

func ExampleTypeName() {
	fmt.Println(logjson.TypeName(logjson.NewJSONLogger("")))
	fmt.Println(logjson.TypeName(&logjson.Memory{}))
	fmt.Printf("%q\n", logjson.TypeName(nil))
	// Output:
	// *github.com/nitro-go/nitro/logjson.JSONLogger
	// *github.com/nitro-go/nitro/logjson.Memory
	// ""
}

func ExampleState() {
	typ, state, _ := logjson.State(&logjson.Memory{ID: "run-7"})
	fmt.Println(typ)
	fmt.Println(string(state))
	typ, state, _ = logjson.State(logjson.NewJSONLogger("")) // no resumable state
	fmt.Printf("%q %v\n", typ, state == nil)
	// Output:
	// *github.com/nitro-go/nitro/logjson.Memory
	// {"run_id":"run-7"}
	// "" true
}

func ExampleReattach() {
	typ, state, _ := logjson.State(&logjson.Memory{ID: "run-7"})

	resumed := &logjson.Memory{}
	_ = logjson.Reattach(resumed, typ, state)
	fmt.Println(resumed.RunID())

	err := logjson.Reattach(logjson.NewJSONLogger(""), typ, state)
	fmt.Println(errors.Is(err, logjson.ErrTypeMismatch))
	fmt.Println(err)
	// Output:
	// run-7
	// true
	// logjson: logger type mismatch: the checkpoint recorded state of *github.com/nitro-go/nitro/logjson.Memory, the run's logger is *github.com/nitro-go/nitro/logjson.JSONLogger; refusing to hand one backend's state to another
}

func ExampleRunID() {
	m := &logjson.Memory{ID: "run-7", URL: "https://tracker.example/run-7"}
	fmt.Println(logjson.RunID(m), logjson.RunURL(m))
	fmt.Printf("%q\n", logjson.RunID(logjson.NewJSONLogger("")))
	// Output:
	// run-7 https://tracker.example/run-7
	// ""
}

func ExampleInfo() {
	fmt.Println(logjson.Info(logjson.NewJSONLogger("runs/MLP/metrics.jsonl")))
	fmt.Println(logjson.Info(logjson.NewZap(nil))) // not Identified: the empty table
	// Output:
	// map[path:runs/MLP/metrics.jsonl]
	// map[]
}

func ExampleBackend() {
	z := zap.NewNop()
	fmt.Println(logjson.Backend(logjson.NewZap(z)) == z)
	jl := logjson.NewJSONLogger("")
	fmt.Println(logjson.Backend(jl) == logjson.Logger(jl)) // its own backend
	// Output:
	// true
	// true
}

func ExampleMulti() {
	a, b := &logjson.Memory{}, &logjson.Memory{}
	m := logjson.Multi(a, nil, b)
	_ = m.LogOther("binding_report", "...")
	b.Fail(errors.New("tracker down"))
	err := m.Finish(logjson.StatusCompleted)
	fmt.Println(len(a.Calls()), len(b.Calls()))
	fmt.Println(err)
	// Output:
	// 2 1
	// *github.com/nitro-go/nitro/logjson.Memory: tracker down
}

func ExampleMemory() {
	var m logjson.Memory
	_ = m.LogParams(map[string]any{"seed": 42})
	_ = m.LogMetrics(logjson.Metrics{Step: 1, Epoch: 1, Context: "train", Values: map[string]float64{"loss": 0.5}})
	_ = m.Finish(logjson.StatusError)
	_ = m.Finish(logjson.StatusCompleted)
	fmt.Println(m.Params(), m.Metrics("train")[0].Values, m.Finishes(), m.Status())
	// Output:
	// [map[seed:42]] map[loss:0.5] [error completed] error
}

func ExampleNewZap() {
	cfg := zap.NewProductionEncoderConfig()
	cfg.TimeKey = zapcore.OmitKey // stable output
	z := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(cfg), zapcore.AddSync(os.Stdout), zapcore.InfoLevel))

	l := logjson.NewZap(z)
	_ = l.LogParams(map[string]any{"seed": 42})
	_ = l.LogMetrics(logjson.Metrics{Step: 12, Epoch: 1, Context: "train", Values: map[string]float64{"loss": 0.31}})
	_ = l.LogOther("binding_report", "...")
	_ = l.Finish(logjson.StatusCompleted)
	// Output:
	// {"level":"info","msg":"params","type":"params","seed":42}
	// {"level":"info","msg":"metrics","type":"metrics","context":"train","epoch":1,"step":12,"loss":0.31}
	// {"level":"info","msg":"other","type":"other","key":"binding_report","value":"..."}
	// {"level":"info","msg":"finish","type":"finish","status":"completed"}
}

type exampleClock struct{}

func (exampleClock) Now() time.Time                         { return time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC) }
func (exampleClock) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }

func ExampleNewDiagnostics() {
	z, _ := logjson.NewDiagnostics(os.Stdout, "console", zap.WithClock(exampleClock{}))
	z.Info("binding report", zap.String("lr", "schedule cosine"))
	z.Warn("monitor failed", zap.String("monitor", "phase"))

	j, _ := logjson.NewDiagnostics(os.Stdout, "json", zap.WithClock(exampleClock{}))
	j.Info("binding report", zap.String("lr", "schedule cosine"))

	_, err := logjson.NewDiagnostics(os.Stdout, "xml")
	fmt.Println(err)
	// Output:
	// 2025-03-01 12:00:00.000	INFO	binding report	{"lr": "schedule cosine"}
	// 2025-03-01 12:00:00.000	WARN	monitor failed	{"monitor": "phase"}
	// {"level":"info","ts":"2025-03-01T12:00:00.000Z","msg":"binding report","lr":"schedule cosine"}
	// logjson: diagnostics format "xml": want "console" or "json"
}
