package core

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// CheckRunDir proves that dir can hold a run's files: it creates dir (and missing parents),
// writes and removes a probe file, then removes the folders it created, so that a run dir that is
// a file, lies under a file, or is not writable fails when the run is set up rather than at its
// first checkpoint, after the data, the compiles and a whole epoch. The error says why.
func CheckRunDir(dir string) error {
	if dir == "" {
		return errors.New("empty path")
	}
	// The missing folders, deepest first, to remove again: the probe leaves nothing behind, and
	// the logger or checkpointer creates the folder when it first writes.
	var created []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || !errors.Is(err, os.ErrNotExist) {
			break
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	defer func() {
		for _, d := range created {
			os.Remove(d) // only empty folders go; one something else filled meanwhile stays
		}
	}()
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return fmt.Errorf("%s is a file, not a directory", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create it: %w", err)
	}
	f, err := os.CreateTemp(dir, ".nitro-probe-*")
	if err != nil {
		return fmt.Errorf("cannot write in it: %w", err)
	}
	name := f.Name()
	_, werr := f.Write([]byte("nitro"))
	cerr := f.Close()
	rerr := os.Remove(name)
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("cannot write in it: %w", err)
	}
	if rerr != nil {
		return fmt.Errorf("cannot remove a file from it: %w", rerr)
	}
	return nil
}

// checkRunDir runs CheckRunDir at setup when something this run sets up writes into the run
// dir: the default checkpointer (TopK adopts the run dir) or a JSON Lines logger with no path
// of its own (pinned to <run dir>/metrics.jsonl). A checkpointer given by option or by the
// experiment's Checkpointer hook may write elsewhere, through a file system of its own, so it
// is not probed.
func (n *Nitro) checkRunDir() error {
	o := n.opts
	_, chooses := n.e.(CheckpointerChooser)
	writes := !o.ckptSet && !chooses
	if !o.loggerSet {
		writes = true // the default JSON Lines logger
	} else if o.logger != nil {
		for _, jl := range jsonLoggers(o.logger) {
			writes = writes || (jl != nil && jl.Path() == "")
		}
	}
	if !writes || !n.Dist().IsRank0() { // a rank other than 0 writes nothing there (dist.go)
		return nil
	}
	dir := n.cfg.runDir
	if err := CheckRunDir(dir.value); err != nil {
		return fmt.Errorf("RunDir %q (from %s): %w; the run's metrics.jsonl and checkpoints go there: point it at a writable directory (core.WithRunDir, or the experiment's RunDir), or turn off what writes there (WithoutLogger, WithoutCheckpoints)", dir.value, dir.source, err)
	}
	return nil
}
