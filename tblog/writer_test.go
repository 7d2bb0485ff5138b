package tblog

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nitro-go/nitro/logjson"
)

// pinned returns a Writer into dir whose clock and host are fixed, so file names are known.
func pinned(dir string) *Writer {
	w := New(dir)
	w.now = func() time.Time { return time.Unix(1700000000, 0) }
	w.host = "h"
	return w
}

func TestWriterRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tb")
	w := pinned(dir)
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("New created something: %v", err)
	}
	must(t, w.LogParams(map[string]any{"lr": 0.1, "opt": map[string]any{"name": "a|b"}}))
	must(t, w.LogOther("config_report", "line 1\n  line 2"))
	must(t, w.LogMetrics(logjson.Metrics{Step: 1, Epoch: 1, Context: logjson.ContextTrain, Values: map[string]float64{"loss": 2, "step_seconds": 0.5}}))
	w.CountDropped(2)
	must(t, w.LogMetrics(logjson.Metrics{Step: 2, Epoch: 1, Context: logjson.ContextValidate, Values: map[string]float64{"val_accuracy": 0.75, "bad": math.NaN()}}))
	must(t, w.LogMetrics(logjson.Metrics{Step: 2, Epoch: 1, Context: logjson.ContextData, Values: map[string]float64{"data_wait_frac": 0.01, "big": -1e39}}))
	must(t, w.LogTags([]string{"a", "b"}))
	must(t, w.Finish(logjson.StatusEarlyStop))
	must(t, w.Finish(logjson.StatusCompleted)) // the first status wins, silently

	want := filepath.Join(dir, "events.out.tfevents.1700000000.h")
	if w.Path() != want {
		t.Fatalf("Path = %q, want %q", w.Path(), want)
	}
	evs := readEventFile(t, want)
	if len(evs) != w.Records() || len(evs) != 8 {
		t.Fatalf("%d events, Records %d, want 8", len(evs), w.Records())
	}
	if evs[0].fileVersion != FileVersion {
		t.Fatalf("first event %+v is not the version", evs[0])
	}
	texts := map[string]string{}
	scalars := map[string]float32{}
	for _, e := range evs[1:] {
		for _, v := range e.values {
			switch {
			case v.text != nil:
				if v.plugin != "text" || v.dtype != dtString || v.class != dataClassTensor {
					t.Errorf("text %q: plugin %q, dtype %d, class %d", v.tag, v.plugin, v.dtype, v.class)
				}
				texts[v.tag] = *v.text
			case v.simple != nil:
				scalars[v.tag] = *v.simple
			}
		}
	}
	if p := texts[TagParams]; !strings.Contains(p, "| lr | 0.1 |") || !strings.Contains(p, `| opt.name | a\|b |`) {
		t.Errorf("params text:\n%s", p)
	}
	if r := texts["config_report"]; r != "```\nline 1\n  line 2\n```" {
		t.Errorf("report text %q", r)
	}
	if texts[TagTags] != "a, b" || texts[TagStatus] != "early_stop (non-finite metric values dropped: 3)" {
		t.Errorf("texts %q", texts)
	}
	wantScalars := map[string]float32{"train/loss": 2, "train/step_seconds": 0.5, "val/val_accuracy": 0.75, "data/data_wait_frac": 0.01, "data/big": float32(math.Inf(-1))}
	if len(scalars) != len(wantScalars) {
		t.Errorf("scalars %v, want %v", scalars, wantScalars)
	}
	for k, v := range wantScalars {
		if scalars[k] != v {
			t.Errorf("%s = %v, want %v", k, scalars[k], v)
		}
	}
	if err := w.LogMetrics(logjson.Metrics{Step: 3, Values: map[string]float64{"x": 1}}); !errors.Is(err, logjson.ErrFinished) {
		t.Fatalf("write after Finish: %v", err)
	}
	if w.Dropped() != 3 {
		t.Fatalf("Dropped = %d", w.Dropped())
	}
}

func TestFinishUnknownStatus(t *testing.T) {
	w := pinned(t.TempDir())
	if err := w.Finish("done"); !errors.Is(err, logjson.ErrUnknownStatus) {
		t.Fatalf("Finish(done) = %v", err)
	}
	must(t, w.Finish(logjson.StatusError))
}

func TestNoDir(t *testing.T) {
	w := New("")
	err := w.LogOther("k", "v")
	if !errors.Is(err, ErrNoDir) || !errors.Is(err, logjson.ErrNoPath) {
		t.Fatalf("write without a dir: %v", err)
	}
	if got := w.Info(); got["dir"] != nil || got["path"] != nil {
		t.Fatalf("Info = %v", got)
	}
	dir := t.TempDir()
	must(t, w.SetDir(filepath.Join(dir, "a")))
	must(t, w.SetDir(dir))
	must(t, w.LogOther("k", 1))
	must(t, w.SetDir(dir))
	if err := w.SetDir(filepath.Join(dir, "b")); err == nil {
		t.Fatal("SetDir to another folder after the first write was accepted")
	}
	if got := w.Info(); got["dir"] != dir || got["path"] != w.Path() {
		t.Fatalf("Info = %v", got)
	}
}

// TestFailedWriteNamesFileAndRetries: a Finish whose write fails names the file, leaves the
// run unfinished, and a later Finish writes the first status into a new file.
func TestFailedWriteNamesFileAndRetries(t *testing.T) {
	dir := t.TempDir()
	w := pinned(dir)
	must(t, w.LogMetrics(logjson.Metrics{Step: 1, Context: "train", Values: map[string]float64{"loss": 1}}))
	first := w.Path()
	w.f.Close() // the next write fails as a write to a lost file would
	err := w.Finish(logjson.StatusError)
	if err == nil || !strings.Contains(err.Error(), first) {
		t.Fatalf("failed Finish = %v, want an error naming %s", err, first)
	}
	must(t, w.Finish(logjson.StatusCompleted))
	if w.Path() == first || w.Path() != first+".1" {
		t.Fatalf("the retry went to %q, want %q", w.Path(), first+".1")
	}
	evs := readEventFile(t, w.Path())
	if len(evs) != 2 || *evs[1].values[0].text != "error" {
		t.Fatalf("retry file holds %+v, want the version and status error", evs)
	}
}

func TestOpenErrorNamesFolder(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	must(t, os.WriteFile(file, nil, 0o644))
	err := New(filepath.Join(file, "tb")).LogOther("k", "v")
	if err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("open under a file: %v", err)
	}
}

func TestUnencodable(t *testing.T) {
	w := pinned(t.TempDir())
	if err := w.LogOther("k", make(chan int)); err == nil {
		t.Fatal("a channel was accepted")
	}
	if err := w.LogParams(map[string]any{"x": math.NaN()}); err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Fatalf("a NaN param: %v", err)
	}
	if w.Records() != 0 {
		t.Fatalf("%d records written", w.Records())
	}
}

func TestConcurrent(t *testing.T) {
	w := pinned(t.TempDir())
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				if err := w.LogMetrics(logjson.Metrics{Step: g*100 + i, Context: "train", Values: map[string]float64{"loss": float64(i)}}); err != nil {
					t.Error(err)
				}
				_ = w.Info()
			}
		})
	}
	wg.Wait()
	must(t, w.Finish(logjson.StatusCompleted))
	if evs := readEventFile(t, w.Path()); len(evs) != 1+8*50+1 {
		t.Fatalf("%d events, want %d", len(evs), 1+8*50+1)
	}
}

func TestWithJSON(t *testing.T) {
	run := t.TempDir()
	m := WithJSON(run)
	must(t, m.LogParams(map[string]any{"seed": 1}))
	must(t, m.LogMetrics(logjson.Metrics{Step: 1, Context: "train", Values: map[string]float64{"loss": 1}}))
	must(t, m.Finish(logjson.StatusCompleted))
	members := m.Members()
	jl, tb := members[0].(*logjson.JSONLogger), members[1].(*Writer)
	if jl.Path() != filepath.Join(run, "metrics.jsonl") || jl.Lines() != 3 {
		t.Fatalf("JSON logger at %q with %d lines", jl.Path(), jl.Lines())
	}
	if filepath.Dir(tb.Path()) != filepath.Join(run, DirName) || tb.Records() != 4 {
		t.Fatalf("Writer at %q with %d records", tb.Path(), tb.Records())
	}
}

func TestCodeBlockFence(t *testing.T) {
	if got := codeBlock("a ```` b"); got != "`````\na ```` b\n`````" {
		t.Fatalf("codeBlock = %q", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestZeroWriter(t *testing.T) {
	var w Writer
	must(t, w.SetDir(t.TempDir()))
	must(t, w.LogMetrics(logjson.Metrics{Step: 1, Context: "train", Values: map[string]float64{"loss": 1}}))
	must(t, w.Finish(logjson.StatusCompleted))
	if n := len(readEventFile(t, w.Path())); n != 3 {
		t.Fatalf("%d events, want 3", n)
	}
}
