package logjson_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/logjson"
	"github.com/nitro-go/nitro/runstatus"
)

// A logger finishes with the very value core's StopReason and a checkpoint's stop reason hold
// (runstatus.Status), and refuses an unknown one with ErrUnknownStatus, which is runstatus's.
func TestStatusIsRunstatus(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.jsonl")
	l := logjson.NewJSONLogger(path)
	var stop runstatus.Status = runstatus.EarlyStop
	must(t, l.Finish(stop))
	if got := string(readFile(t, path)); !strings.Contains(got, `"status":"early_stop"`) {
		t.Errorf("finish line %q, want status early_stop", got)
	}
	err := logjson.NewJSONLogger(filepath.Join(t.TempDir(), "x.jsonl")).Finish("crashed")
	if !errors.Is(err, logjson.ErrUnknownStatus) || !errors.Is(err, runstatus.ErrUnknown) {
		t.Errorf("Finish(crashed) = %v, want ErrUnknownStatus (runstatus.ErrUnknown)", err)
	}
}

// Every logger refuses an unknown status the same way, naming the four, and only the first
// valid status counts where the logger finishes once (Memory records each call).
func TestFinishRefusesUnknownStatusAlike(t *testing.T) {
	loggers := map[string]logjson.Logger{
		"jsonl":  logjson.NewJSONLogger(filepath.Join(t.TempDir(), "log.jsonl")),
		"zap":    logjson.NewZap(nil),
		"memory": &logjson.Memory{},
	}
	for name, l := range loggers {
		err := l.Finish("crashed")
		if !errors.Is(err, logjson.ErrUnknownStatus) || !strings.Contains(err.Error(), "want completed, early_stop, requested or error") {
			t.Errorf("%s: Finish(crashed) = %v, want ErrUnknownStatus naming the four", name, err)
		}
		must(t, l.Finish(logjson.StatusCompleted))
		must(t, l.Finish(logjson.StatusError))
	}
	if calls := loggers["memory"].(*logjson.Memory).Calls(); len(calls) != 2 || calls[1].Status != logjson.StatusError {
		t.Errorf("Memory recorded %v, want both finishes", calls)
	}
}
