package core_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
)

// TestRunDirProbedAtSetup: a run dir that cannot hold the run's files is refused by New, naming
// RunDir, the path and why, when something writes there (the default logger, the default
// checkpointer); with nothing writing there it is not looked at; a good one is probed without a
// trace left (the folders it had to create are gone again).
func TestRunDirProbedAtSetup(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := func(more ...core.Option) []core.Option {
		return append([]core.Option{core.WithBackend("go"), core.Quiet(), core.WithData(coretest.Data(t, 32))}, more...)
	}
	newErr := func(opts ...core.Option) error {
		t.Helper()
		n, err := core.New(&coretest.Reg{}, opts...)
		if err == nil {
			t.Fatalf("core.New accepted run dir options %d; want an error (%v)", len(opts), n != nil)
		}
		return err
	}
	// The default logger writes <run dir>/metrics.jsonl: a file as the run dir is refused.
	coretest.WantErr(t, newErr(base(core.WithoutCheckpoints(), core.WithRunDir(file))...), `RunDir "`+file+`"`, "run option", "is a file, not a directory", "writable directory")
	// The default checkpointer writes there: a run dir under a file is refused.
	under := filepath.Join(file, "sub")
	coretest.WantErr(t, newErr(base(core.WithoutLogger(), core.WithRunDir(under))...), `RunDir "`+under+`"`, "cannot create it", "not a directory")

	// Nothing writes into the run dir: it is not probed.
	if _, err := core.New(&coretest.Reg{}, base(core.WithoutLogger(), core.WithoutCheckpoints(), core.WithRunDir(file))...); err != nil {
		t.Fatalf("with no logger and no checkpoints the run dir is not written, yet New failed: %v", err)
	}
	// A writable run dir that does not exist yet: probed, and nothing of the probe stays.
	fresh := filepath.Join(dir, "new", "run")
	if _, err := core.New(&coretest.Reg{}, base(core.WithoutLogger(), core.WithRunDir(fresh))...); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); !os.IsNotExist(err) {
		t.Errorf("the probe left %s behind (stat: %v); it should remove the folders it created", filepath.Join(dir, "new"), err)
	}
}

// TestCheckRunDir: the probe's own answers, for a caller (the CLI) that checks a flag's value
// before setting anything up.
func TestCheckRunDir(t *testing.T) {
	dir := t.TempDir()
	if err := core.CheckRunDir(dir); err != nil {
		t.Fatalf("a temp dir: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the probe left %v in %s", entries, dir)
	}
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{file: "is a file", filepath.Join(file, "x", "y"): "cannot create it", "": "empty path"} {
		coretest.WantErr(t, core.CheckRunDir(path), want)
	}
}
