package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
)

// looksLikePath says arg names a file rather than an experiment: it has a folder in it, or a
// checkpoint's extension.
func looksLikePath(arg string) bool {
	return strings.ContainsRune(arg, filepath.Separator) || strings.ContainsRune(arg, '/') || strings.HasSuffix(arg, ".safetensors")
}

// infoExperiment resolves info's argument. A registered name that is no path is the experiment
// even when a file of that name sits in the working directory (a built binary, a log, a bundle),
// which would otherwise be read as a checkpoint and refused as a corrupt one. A file is printed
// here as a checkpoint (the zero entry returned); anything else is an error saying what it is.
func infoExperiment(arg string, stdout io.Writer) (entry, error) {
	if e, ok := registry[arg]; ok && !looksLikePath(arg) {
		return e, nil
	}
	fi, statErr := os.Stat(arg)
	if statErr == nil && !fi.IsDir() {
		return entry{}, checkpointInfo(arg, stdout)
	}
	if e, ok := registry[arg]; ok {
		return e, nil
	}
	if err := notACheckpointFile(arg, fi, statErr); err != nil {
		return entry{}, err
	}
	return entry{}, fmt.Errorf("unknown experiment %q, nor a checkpoint file of that name here; registered: %s (a checkpoint: nitro info runs/NAME/FILE.safetensors)",
		arg, strings.Join(sortedNames(), ", "))
}

// runDirArg refuses an ls argument that is no directory, saying what it is instead: a file (a
// checkpoint, for info), an experiment's name (with its default run dir), or nothing at all. A
// missing folder would otherwise list as a run dir with no checkpoints.
func runDirArg(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return fmt.Errorf("ls %s: a file, not a run directory (for a checkpoint file: nitro info %s)", dir, dir)
	case !os.IsNotExist(err):
		return fmt.Errorf("ls %s: %w", dir, err)
	}
	if e, ok := registry[dir]; ok && !looksLikePath(dir) {
		runs := filepath.Join("runs", "<type>")
		if x, err := e.build(""); err == nil {
			runs = filepath.Join("runs", reflect.Indirect(reflect.ValueOf(x)).Type().Name())
		}
		return fmt.Errorf("ls %s: no such directory; %q is a registered experiment, and ls takes a run directory: its runs are in %s unless --run-dir moved them (nitro ls %s; its fields: nitro info %s)",
			dir, dir, runs, runs, dir)
	}
	return fmt.Errorf("ls %s: no such directory (ls takes a run directory, e.g. nitro ls runs/MLP)", dir)
}
