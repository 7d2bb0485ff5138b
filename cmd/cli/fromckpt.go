package cli

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"

	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/monitors"
)

// A command given a checkpoint (evaluate, render and export --checkpoint, train --resume) builds
// the experiment the checkpoint was trained with, from the preset and values it recorded
// (core.NewFromCheckpoint): --preset and --set need not be told again. A --preset, or a --set of a
// GraphConst field, that contradicts the checkpoint is refused naming both values; a --set of a
// Host or Device field wins, reported. --weights-only builds the experiment from the flags
// instead (today's shape of the code, not the checkpoint's) and loads the checkpoint's weights
// into it: for evaluate, render and export that is all they load anyway; train then starts a new
// run from the weights (counters at 0, the optimizer fresh) rather than resuming.

const weightsOnlyUsage = "build the experiment from --preset and --set (not from the checkpoint's record) and load only the checkpoint's weights into it; with train --resume PATH, a new run starting from those weights"

// fromCheckpoint builds E from the checkpoint at path, the --set assignments as overrides.
func fromCheckpoint[E any](path string, sets []string, opts ...core.Option) (*core.Nitro, error) {
	ov, err := textOverrides[E](sets)
	if err != nil {
		return nil, err
	}
	return core.NewFromCheckpoint[E](path, ov, opts...)
}

// textOverrides turns --set FIELD=VALUE assignments into typed overrides: parsed into E's field
// types (markers.ApplyText on a scratch E), then read back by name.
func textOverrides[E any](sets []string) (map[string]any, error) {
	if len(sets) == 0 {
		return nil, nil
	}
	x, err := markers.New[E](nil)
	if err != nil {
		return nil, err
	}
	if err := markers.ApplyText(x, sets); err != nil {
		return nil, err
	}
	tr, err := markers.TraitsOf(x)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, a := range sets {
		name, _, _ := strings.Cut(a, "=")
		f, _ := tr.Field(strings.TrimSpace(name)) // ApplyText checked every name
		out[f.Name] = reflect.ValueOf(x).Elem().Field(f.Index).Interface()
	}
	return out, nil
}

// flagContradiction rewrites core's refusal in the command line's terms: the flag that
// contradicts, both values, and the two ways out.
func flagContradiction(err error, sets []string) error {
	var ce *core.ContradictionError
	if !errors.As(err, &ce) {
		return err
	}
	if ce.Field == "preset" {
		was := "preset " + ce.Recorded
		if ce.Recorded == "" {
			was = "no preset (the defaults)"
		}
		return fmt.Errorf("--preset %s contradicts the checkpoint %s, trained with %s: drop --preset (the checkpoint rebuilds the experiment it was trained with), or add --weights-only to build preset %s and load only the checkpoint's weights into it",
			ce.Given, ce.Path, was, ce.Given)
	}
	flag := "--set " + ce.Field + "=" + ce.Given
	for _, a := range sets {
		if name, _, _ := strings.Cut(a, "="); strings.TrimSpace(name) == ce.Field {
			flag = "--set " + a
		}
	}
	return fmt.Errorf("%s contradicts the checkpoint %s, which records GraphConst %s = %s (the flag gives %s): a GraphConst field fixes the programs and the weights' shapes; drop that --set, or add --weights-only to build the shape the flags give and load the checkpoint's weights into it, if they fit",
		flag, ce.Path, ce.Field, ce.Recorded, ce.Given)
}

// checkpointSource is the checkpoint a train, evaluate or render run rebuilds its experiment from
// ("" for none: the flags build it), and whether it resumes. train --resume auto means the run
// dir's newest checkpoint when it has one; the run dir is the flags' experiment's (--run-dir,
// else its RunDir), and an experiment that chooses its own checkpointer keeps the old way (the
// checkpointer finds its newest), as does a run dir with none (a fresh run).
func checkpointSource(ent entry, f *expFlags) (string, bool, error) {
	if f.resume == "" {
		return f.fromCkpt, false, nil
	}
	if f.resume != core.ResumeAuto {
		if _, err := os.Stat(f.resume); err != nil {
			return "", false, fmt.Errorf("--resume %q: no checkpoint file or run dir there (%v): give auto (the run dir's newest checkpoint) or a checkpoint PATH", f.resume, errors.Unwrap(err))
		}
		return f.resume, true, nil
	}
	if f.weightsOnly {
		return "", false, errors.New("--weights-only with --resume auto: a new run from a checkpoint's weights names that checkpoint: --resume PATH --weights-only (and a new --run-dir, so the old run's checkpoints stay apart)")
	}
	e, err := ent.configure(f.preset, f.sets)
	if err != nil {
		return "", false, err
	}
	if _, chooses := e.(core.CheckpointerChooser); chooses {
		return "", false, nil
	}
	var opts []core.Option
	if f.runDir != "" {
		opts = append(opts, core.WithRunDir(f.runDir))
	}
	dir, err := core.ResolveRunDir(e, opts...)
	if err != nil {
		return "", false, err
	}
	if _, err := core.NewestCheckpoint(dir); err != nil {
		return "", false, nil // core's auto resume says what it found
	}
	return dir, true, nil
}

// openRun sets the run up: the flags' experiment e, or with e nil the experiment rebuilt from the
// checkpoint from (resumed, or its weights loaded). An experiment that is a phase monitor (mnist's
// confusion matrix) is registered once it exists.
func openRun(ent entry, e any, f *expFlags, from string, resume bool, opts []core.Option) (*core.Nitro, error) {
	if e != nil {
		switch {
		case from != "": // --weights-only
			opts = append(opts, core.WithCheckpoint(from))
		case f.resume != "":
			opts = append(opts, core.WithResume(f.resume))
		}
		return core.New(e, opts...)
	}
	if resume {
		opts = append(opts, core.ContinueRun())
	}
	n, err := ent.fromCkpt(from, f.sets, opts...)
	if err != nil {
		return nil, flagContradiction(err, f.sets)
	}
	if m, ok := n.Experiment().(monitors.Monitor); ok {
		n.RegisterMonitor(m)
	}
	return n, nil
}
