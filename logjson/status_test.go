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
