package logjson_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/nitro-go/nitro/logjson"
)

func TestMemoryRecords(t *testing.T) {
	var m logjson.Memory
	params := map[string]any{"seed": 1}
	values := map[string]float64{"loss": 0.5}
	must(t, m.LogParams(params))
	must(t, m.LogMetrics(logjson.Metrics{Step: 1, Epoch: 1, Context: "train", Values: values}))
	must(t, m.LogMetrics(logjson.Metrics{Step: 1, Epoch: 1, Context: "validate", Values: map[string]float64{"val_loss": 0.4}}))
	must(t, m.LogOther("binding_report", "first"))
	must(t, m.LogOther("binding_report", "second"))
	must(t, m.LogTags([]string{"t"}))
	must(t, m.LogConfusion([][]int{{1}}, []string{"a"}, 1))
	must(t, m.Finish(logjson.StatusError))
	must(t, m.Finish(logjson.StatusCompleted))
	params["seed"] = 2 // the record is a copy
	values["loss"] = 9

	verbs := []string{}
	for _, c := range m.Calls() {
		verbs = append(verbs, c.Verb)
	}
	if got := strings.Join(verbs, ","); got != "params,metrics,metrics,other,other,tags,confusion,finish,finish" {
		t.Errorf("verbs %s", got)
	}
	if p := m.Params(); len(p) != 1 || p[0]["seed"] != 1 {
		t.Errorf("Params = %v", p)
	}
	if tr := m.Metrics("train"); len(tr) != 1 || tr[0].Values["loss"] != 0.5 {
		t.Errorf("train = %v", tr)
	}
	if all := m.Metrics(""); len(all) != 2 {
		t.Errorf("all metrics = %v", all)
	}
	if v, ok := m.Other("binding_report"); !ok || v != "second" {
		t.Errorf("Other = %v %v", v, ok)
	}
	if _, ok := m.Other("nope"); ok {
		t.Error("Other(nope) found")
	}
	if m.Status() != logjson.StatusError || !reflect.DeepEqual(m.Finishes(), []logjson.Status{"error", "completed"}) {
		t.Errorf("Status %q, Finishes %v", m.Status(), m.Finishes())
	}
	if err := m.Finish("bogus"); !errors.Is(err, logjson.ErrUnknownStatus) {
		t.Errorf("bogus status: %v", err)
	}
}

func TestMemoryFail(t *testing.T) {
	m := &logjson.Memory{ID: "r1", URL: "mem://r1"}
	boom := errors.New("tracker down")
	m.Fail(boom)
	if err := m.LogOther("k", 1); !errors.Is(err, boom) {
		t.Errorf("Fail: %v", err)
	}
	m.Fail(nil)
	must(t, m.LogOther("k", 1))
	if len(m.Calls()) != 1 {
		t.Errorf("failed call recorded: %v", m.Calls())
	}
	if got := logjson.Info(m); !reflect.DeepEqual(got, map[string]any{"run_id": "r1", "run_url": "mem://r1"}) {
		t.Errorf("Info = %v", got)
	}
	if err := m.Reattach(json.RawMessage("[1]")); err == nil {
		t.Error("Reattach of a non-object: no error")
	}
}

func TestMemoryConcurrent(t *testing.T) {
	var m logjson.Memory
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 25 {
				_ = m.LogMetrics(logjson.Metrics{Step: j, Epoch: i, Context: "train"})
				_ = m.Metrics("train")
			}
		}()
	}
	wg.Wait()
	if n := len(m.Metrics("train")); n != 100 {
		t.Errorf("%d metrics, want 100", n)
	}
}

func TestMulti(t *testing.T) {
	a, b := &logjson.Memory{ID: "a"}, &logjson.Memory{}
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	jl := logjson.NewJSONLogger(path)
	zl := logjson.NewZap(nil)
	m := logjson.Multi(a, nil, jl, b, zl)

	must(t, m.LogParams(map[string]any{"seed": 1}))
	must(t, m.LogMetrics(logjson.Metrics{Step: 1, Epoch: 1, Context: "train", Values: map[string]float64{"loss": 1}}))
	must(t, m.LogOther("k", "v"))
	must(t, m.LogTags([]string{"x"}))
	must(t, m.LogConfusion([][]int{{1}}, nil, 1))
	must(t, m.Finish(logjson.StatusCompleted))
	for _, mem := range []*logjson.Memory{a, b} {
		if n := len(mem.Calls()); n != 6 {
			t.Errorf("member got %d calls, want 6", n)
		}
	}
	if got := string(readFile(t, path)); strings.Count(got, "\n") != 6 {
		t.Errorf("json member:\n%s", got)
	}
	if got := logjson.Backend(m).([]logjson.Logger); len(got) != 4 {
		t.Errorf("Backend = %v", got)
	}
	if logjson.RunID(m) != "a" || logjson.RunURL(m) != "" {
		t.Errorf("RunID %q RunURL %q", logjson.RunID(m), logjson.RunURL(m))
	}
	if infos := logjson.Info(m)["loggers"].([]any); len(infos) != 4 || infos[1].(map[string]any)["path"] != path {
		t.Errorf("Info = %v", logjson.Info(m))
	}

	// Errors are joined, every member still called, each error naming its member.
	a.Fail(errors.New("a down"))
	b.Fail(errors.New("b down"))
	err := m.LogOther("k", 2)
	if err == nil || !strings.Contains(err.Error(), "a down") || !strings.Contains(err.Error(), "b down") ||
		!strings.Contains(err.Error(), "logjson.Memory") {
		t.Errorf("joined error: %v", err)
	}
	if !errors.Is(err, logjson.ErrFinished) { // the JSON member was finished
		t.Errorf("JSON member's ErrFinished not joined: %v", err)
	}
}

func TestMultiState(t *testing.T) {
	src := logjson.Multi(&logjson.Memory{ID: "run-1"}, logjson.NewJSONLogger(""), &logjson.Memory{})
	typ, st, err := logjson.State(src)
	must(t, err)
	if string(st) != `[{"type":"*github.com/nitro-go/nitro/logjson.Memory","state":{"run_id":"run-1"}},null,null]` {
		t.Fatalf("state %s", st)
	}

	a := &logjson.Memory{}
	must(t, logjson.Reattach(logjson.Multi(a, logjson.NewJSONLogger(""), &logjson.Memory{}), typ, st))
	if a.RunID() != "run-1" {
		t.Errorf("member not reattached: %q", a.RunID())
	}
	// The first member changed type: refused with both names.
	err = logjson.Reattach(logjson.Multi(logjson.NewZap(nil), logjson.NewJSONLogger(""), &logjson.Memory{}), typ, st)
	if !errors.Is(err, logjson.ErrTypeMismatch) || !strings.Contains(err.Error(), "ZapLogger") || !strings.Contains(err.Error(), "Memory") {
		t.Errorf("member type change: %v", err)
	}
	// A different number of members.
	if err := logjson.Reattach(logjson.Multi(&logjson.Memory{}), typ, st); !errors.Is(err, logjson.ErrTypeMismatch) {
		t.Errorf("member count change: %v", err)
	}
	// No member with state: no state at all.
	if typ, st, err := logjson.State(logjson.Multi(logjson.NewJSONLogger(""))); typ != "" || st != nil || err != nil {
		t.Errorf("stateless Multi: %q %s %v", typ, st, err)
	}
}
