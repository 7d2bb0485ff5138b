package logjson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nitro-go/nitro/logjson"
)

func TestZapAdapter(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	z := zap.New(core)
	l := logjson.NewZap(z)
	if logjson.Backend(l) != z {
		t.Error("Backend is not the *zap.Logger")
	}

	must(t, l.LogParams(map[string]any{"seed": 42, "opt": map[string]any{"lr": 0.1}}))
	must(t, l.LogMetrics(logjson.Metrics{Step: 12, Epoch: 1, Context: "train", Values: map[string]float64{"loss": 0.31, "lr": 0.01}}))
	must(t, l.LogOther("binding_report", "lr <- default"))
	must(t, l.LogTags([]string{"a", "b"}))
	must(t, l.LogConfusion([][]int{{1, 0}, {2, 3}}, []string{"x", "y"}, 2))
	must(t, l.Finish(logjson.StatusError))
	must(t, l.Finish(logjson.StatusCompleted)) // ignored: the first status wins

	entries := logs.AllUntimed()
	if len(entries) != 6 {
		t.Fatalf("%d entries, want 6 (one per call, the second finish ignored)", len(entries))
	}
	want := []struct {
		msg    string
		level  zapcore.Level
		fields map[string]any
	}{
		{"params", zapcore.InfoLevel, map[string]any{"type": "params", "seed": int64(42), "opt.lr": 0.1}},
		{"metrics", zapcore.InfoLevel, map[string]any{"type": "metrics", "context": "train", "epoch": int64(1), "step": int64(12), "loss": 0.31, "lr": 0.01}},
		{"other", zapcore.InfoLevel, map[string]any{"type": "other", "key": "binding_report", "value": "lr <- default"}},
		{"tags", zapcore.InfoLevel, map[string]any{"type": "tags", "tags": []any{"a", "b"}}},
		{"confusion", zapcore.InfoLevel, map[string]any{"type": "confusion", "epoch": int64(2), "labels": []any{"x", "y"}, "matrix": [][]int{{1, 0}, {2, 3}}}},
		{"finish", zapcore.ErrorLevel, map[string]any{"type": "finish", "status": "error"}},
	}
	for i, w := range want {
		e := entries[i]
		if e.Message != w.msg || e.Level != w.level {
			t.Errorf("entry %d: %s at %s, want %s at %s", i, e.Message, e.Level, w.msg, w.level)
		}
		if got := e.ContextMap(); !reflect.DeepEqual(got, w.fields) {
			t.Errorf("entry %d (%s) fields:\n got %#v\nwant %#v", i, w.msg, got, w.fields)
		}
	}
	// Field order follows the JSON line: type, context, epoch, step, then the values.
	var keys []string
	for _, f := range entries[1].Context {
		keys = append(keys, f.Key)
	}
	if got := strings.Join(keys, ","); got != "type,context,epoch,step,loss,lr" {
		t.Errorf("metrics field order %s", got)
	}
}

func TestZapRefusals(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	l := logjson.NewZap(zap.New(core))
	if err := l.LogMetrics(logjson.Metrics{Values: map[string]float64{"step": 1}}); !errors.Is(err, logjson.ErrReservedKey) {
		t.Errorf("reserved metric: %v", err)
	}
	if err := l.LogParams(map[string]any{"type": 1}); !errors.Is(err, logjson.ErrReservedKey) {
		t.Errorf("reserved param: %v", err)
	}
	if err := l.Finish("done"); !errors.Is(err, logjson.ErrUnknownStatus) {
		t.Errorf("unknown status: %v", err)
	}
	if err := l.LogConfusion([][]int{{1}}, []string{"a", "b"}, 0); err == nil {
		t.Error("bad confusion: no error")
	}
	if logs.Len() != 0 {
		t.Errorf("refused calls logged %d entries", logs.Len())
	}
	must(t, logjson.NewZap(nil).LogOther("k", 1)) // nil: a no-op logger
}

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time                         { return c.t }
func (c fixedClock) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }

func TestNewDiagnostics(t *testing.T) {
	clock := zap.WithClock(fixedClock{time.Date(2025, 3, 1, 12, 30, 45, 0, time.UTC)})

	var buf bytes.Buffer
	z, err := logjson.NewDiagnostics(&buf, "", clock)
	must(t, err)
	z.Debug("hidden")
	z.Info("binding report", zap.String("lr", "default"))
	z.Warn("monitor failed", zap.Error(errors.New("boom")))
	want := "2025-03-01 12:30:45.000\tINFO\tbinding report\t{\"lr\": \"default\"}\n" +
		"2025-03-01 12:30:45.000\tWARN\tmonitor failed\t{\"error\": \"boom\"}\n"
	if got := buf.String(); got != want {
		t.Errorf("console:\n got %q\nwant %q", got, want)
	}

	buf.Reset()
	z, err = logjson.NewDiagnostics(&buf, logjson.FormatJSON, clock)
	must(t, err)
	z.Info("config report", zap.Int("width", 128))
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("json diagnostics do not parse: %v: %s", err, buf.Bytes())
	}
	wantJSON := map[string]any{"level": "info", "ts": "2025-03-01T12:30:45.000Z", "msg": "config report", "width": 128.0}
	if !reflect.DeepEqual(m, wantJSON) {
		t.Errorf("json: got %v, want %v", m, wantJSON)
	}

	if _, err := logjson.NewDiagnostics(&buf, "yaml"); err == nil || !strings.Contains(err.Error(), "yaml") {
		t.Errorf("unknown format: %v", err)
	}
	if z, err := logjson.NewDiagnostics(nil, "console"); err != nil || z == nil {
		t.Errorf("nil writer: %v", err)
	}
}
