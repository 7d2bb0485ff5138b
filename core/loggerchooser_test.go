package core_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/logjson"
)

// OwnLogger chooses its own logger.
type OwnLogger struct {
	coretest.Reg
	l logjson.Logger
}

func (e *OwnLogger) Logger() logjson.Logger { return e.l }

// dirUser records the run dir it is placed in (logjson.RunDirUser).
type dirUser struct {
	logjson.Memory
	dir string
}

func (d *dirUser) UseRunDir(runDir string) error { d.dir = runDir; return nil }

// TestLoggerChooser: an experiment's Logger() is the run's logger (a Memory gets the params and
// the epoch lines, and no metrics.jsonl appears); every logger in it that keeps files in the run
// dir is placed there at setup, as the default JSON Lines logger is; WithLogger wins over it, and
// a nil Logger() keeps no record.
func TestLoggerChooser(t *testing.T) {
	run := func(e any, more ...core.Option) string {
		t.Helper()
		dir := t.TempDir()
		n, err := core.New(e, append([]core.Option{core.WithBackend("go"), core.Quiet(), core.WithoutCheckpoints(),
			core.WithData(coretest.Data(t, 32)), core.WithRunDir(dir), core.WithMaxEpochs(1)}, more...)...)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Train(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	mem := &logjson.Memory{}
	dir := run(&OwnLogger{l: mem})
	if len(mem.Params()) != 1 || len(mem.Metrics(logjson.ContextValidate)) != 1 {
		t.Errorf("the experiment's logger got %d params lines and %d validate lines, want 1 and 1", len(mem.Params()), len(mem.Metrics(logjson.ContextValidate)))
	}
	if _, err := os.Stat(filepath.Join(dir, core.MetricsFile)); err == nil {
		t.Error("a metrics.jsonl was written beside the experiment's own logger")
	}

	du := &dirUser{}
	dir = run(&OwnLogger{l: logjson.Multi(logjson.NewJSONLogger(""), du)})
	if du.dir != dir {
		t.Errorf("the run-dir logger was placed in %q, want the run dir %q", du.dir, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, core.MetricsFile)); err != nil {
		t.Errorf("the pathless JSON logger in the experiment's Multi wrote no metrics.jsonl in the run dir: %v", err)
	}

	mine, theirs := &logjson.Memory{}, &logjson.Memory{}
	run(&OwnLogger{l: theirs}, core.WithLogger(mine))
	if len(mine.Params()) != 1 || len(theirs.Params()) != 0 {
		t.Errorf("WithLogger should win: the option's logger got %d params lines, the experiment's %d", len(mine.Params()), len(theirs.Params()))
	}
	dir = run(&OwnLogger{l: (*logjson.JSONLogger)(nil)})
	if _, err := os.Stat(filepath.Join(dir, core.MetricsFile)); err == nil {
		t.Error("a nil Logger() still wrote a metrics.jsonl")
	}
}
