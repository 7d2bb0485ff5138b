package core

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/markers"
)

// A checkpoint rebuilds its experiment: the record names the preset the run was built from and
// holds its GraphConst, Device and Host values, so nothing else need be told again.

// ContinueRun makes NewFromCheckpoint resume the run (as WithResume: optimizer, counters, data
// position, early stopping and logger state) instead of loading the weights alone (as
// WithCheckpoint). New refuses it: with New, resume with WithResume(path).
func ContinueRun() Option { return func(o *options) { o.continueRun = true } }

// NewFromCheckpoint builds the experiment a checkpoint was trained with and returns its Nitro
// with the checkpoint loaded: the weights (WithCheckpoint), or the whole run with ContinueRun.
// path is a checkpoint file or a run directory (its newest checkpoint by the manifest), read
// from the operating system's file system.
//
// E is built as the run built it: markers.FromPreset with the recorded preset (none: markers.New,
// the defaults), then every recorded value set back, then overrides (field name to value, as
// markers.Apply takes them). The rules, by kind:
//   - GraphConst values fix the programs and the weights' shapes, so they are the checkpoint's:
//     an override that differs is refused, naming the field and both values (to load the weights
//     into another shape, build it with New and pass WithCheckpoint, which checks the fit).
//   - Host values (batch sizes, data limits, seeds) are the run's recipe: set back, and an
//     override wins, reported on the console.
//   - Device values are set back as recorded too. The record holds the value in force when the
//     checkpoint was written, which SetDevice may have moved since the run began (a hook
//     lowering a rate); that is the value the weights were last trained with, so a resumed run
//     goes on from it as the uninterrupted run would have, rather than from the recipe's start.
//     An override wins, reported.
//
// A recorded value that differs from the recipe's is reported as a notice. A GraphConst value
// that cannot be set back from its recorded text is an error naming it (give it as an
// override); a Host or Device one is reported and left as the recipe's. A field the record
// names and E no longer has is left to the load's own check (a resume refuses a GraphConst that
// differs; a weights load checks the tensors fit). WithPreset with another name than the
// recorded one is refused naming both; WithResume and WithCheckpoint are refused (the
// checkpoint is given as path). With ContinueRun the run dir defaults to the checkpoint's folder.
// Other options apply as in New.
func NewFromCheckpoint[E any](path string, overrides map[string]any, opts ...Option) (*Nitro, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	file, hdr, err := checkpointHeader(path, o.continueRun)
	if err != nil {
		return nil, fmt.Errorf("NewFromCheckpoint: %w", err)
	}
	if err := fromCheckpointOptions(&o, file, hdr.Preset); err != nil {
		return nil, err
	}
	e, err := recipeOf[E](hdr.Preset, file)
	if err != nil {
		return nil, err
	}
	notes, err := restoreValues(e, hdr.Values, overrides, file)
	if err != nil {
		return nil, err
	}
	// The path as given, so that a run directory is what the provenance names as the argument.
	load := WithCheckpoint(path)
	if o.continueRun {
		load = WithResume(path)
		// A continued run goes on in the folder its checkpoint is in (its run dir), so its log
		// and checkpoints stay in one place, unless WithRunDir says otherwise.
		if o.runDir == nil {
			opts = append(opts, WithRunDir(filepath.Dir(file)))
		}
	}
	done := func(o *options) { o.continueRun = false } // consumed here; New refuses it otherwise
	n, err := New(e, append(opts, WithPreset(hdr.Preset), load, done)...)
	if err != nil {
		return nil, err
	}
	for _, s := range notes {
		n.spec.notice(s)
	}
	return n, nil
}

// ContradictionError is NewFromCheckpoint refusing a value given that contradicts what the
// checkpoint recorded: its preset (Field "preset", Recorded "" for none) or a GraphConst field
// (Recorded and Given as the checkpoint prints them).
type ContradictionError struct {
	Path            string // the checkpoint file
	Field           string
	Recorded, Given string
	msg             string
}

func (e *ContradictionError) Error() string { return e.msg }

// ResolveRunDir is the run directory New would resolve for e under opts (WithRunDir, else the
// experiment's RunDir method or field, else runs/<Experiment>), without setting anything up: a
// caller finds the checkpoints of a run before building it.
func ResolveRunDir(e any, opts ...Option) (string, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	t := reflect.TypeOf(e)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return "", fmt.Errorf("core.ResolveRunDir takes a pointer to an experiment struct, got %T", e)
	}
	r, err := resolveKnob(e, "RunDir", o.runDir, filepath.Join("runs", t.Name()))
	return r.value, err
}

// checkpointHeader resolves path (a run directory: its newest checkpoint) and reads the file's
// header, which holds the preset and the recorded values.
func checkpointHeader(path string, resume bool) (string, *checkpoint.Header, error) {
	file := path
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		if file, err = NewestCheckpoint(path); err != nil {
			return "", nil, withOlderHint(err, resume)
		}
	}
	hdr, err := checkpoint.Info(file)
	if err != nil {
		return "", nil, err
	}
	return file, hdr, nil
}

// fromCheckpointOptions refuses the options that would contradict the checkpoint.
func fromCheckpointOptions(o *options, file, preset string) error {
	if o.resume != "" || o.weights != "" {
		return fmt.Errorf("NewFromCheckpoint(%s): WithResume and WithCheckpoint name another checkpoint source; drop them (the checkpoint is NewFromCheckpoint's path; ContinueRun resumes it)", file)
	}
	if o.preset != "" && o.preset != preset {
		return &ContradictionError{Path: file, Field: "preset", Recorded: preset, Given: o.preset,
			msg: fmt.Sprintf("NewFromCheckpoint(%s): WithPreset(%q) contradicts the checkpoint, trained with %s; drop WithPreset (the checkpoint rebuilds its own experiment), or build preset %q with NewFromPreset and load the weights into it with WithCheckpoint",
				file, o.preset, presetText(preset), o.preset)}
	}
	return nil
}

// presetText is how an error names a recorded preset: "preset tiny", or the defaults.
func presetText(p string) string {
	if p == "" {
		return "no preset (the defaults)"
	}
	return "preset " + p
}

// recipeOf is E as the checkpointed run was built before its values: its preset, else defaults.
func recipeOf[E any](preset, file string) (*E, error) {
	if preset == "" {
		return markers.New[E](nil)
	}
	e, err := markers.FromPreset[E](preset, nil)
	if err != nil {
		return nil, fmt.Errorf("NewFromCheckpoint(%s): the checkpoint was trained with preset %q: %w", file, preset, err)
	}
	return e, nil
}

// kindLabel is a field kind as the checkpoint's Values and the notices name it.
var kindLabel = map[markers.Kind]string{markers.KindGraphConst: "GraphConst", markers.KindDevice: "Device", markers.KindHost: "Host"}

// byKind is one kind's recorded values.
func byKind(v checkpoint.Values, k markers.Kind) map[string]string {
	switch k {
	case markers.KindGraphConst:
		return v.GraphConst
	case markers.KindDevice:
		return v.Device
	}
	return v.Host
}

// currentValues is e's values as a checkpoint records them.
func currentValues(e any) (checkpoint.Values, error) {
	gc, err := markers.GraphConstValues(e)
	if err != nil {
		return checkpoint.Values{}, err
	}
	return valuesOf(e, gc), nil
}

// restoreValues sets e's fields back to the recorded values, then applies the overrides under
// NewFromCheckpoint's rules; it returns the notices to report.
func restoreValues(e any, rec checkpoint.Values, overrides map[string]any, file string) ([]string, error) {
	tr, err := markers.TraitsOf(e)
	if err != nil {
		return nil, err
	}
	now, err := currentValues(e)
	if err != nil {
		return nil, err
	}
	var notes []string
	for _, k := range []markers.Kind{markers.KindGraphConst, markers.KindDevice, markers.KindHost} {
		recorded := byKind(rec, k)
		for _, name := range sortedKeys(recorded) {
			text := recorded[name]
			f, ok := tr.Field(name)
			_, overridden := overrides[name]
			if !ok || f.Kind != k || overridden || byKind(now, k)[name] == text {
				continue
			}
			if err := setFromText(e, f, text); err != nil {
				if k == markers.KindGraphConst {
					return nil, fmt.Errorf("NewFromCheckpoint(%s): GraphConst field %s: %w; give it as an override (the checkpoint's value, %s)", file, name, err, text)
				}
				notes = append(notes, fmt.Sprintf("checkpoint %s: %s field %s: %v; left as the recipe's %s (give it as an override to set it)", file, kindLabel[k], name, err, byKind(now, k)[name]))
				continue
			}
			notes = append(notes, fmt.Sprintf("checkpoint %s: %s field %s = %s, as recorded (the recipe gives %s)", file, kindLabel[k], name, text, byKind(now, k)[name]))
		}
	}
	return applyOverrides(e, tr, rec, overrides, file, notes)
}

// applyOverrides applies the explicit overrides: a GraphConst one that differs from the record is
// refused; a Device or Host one that differs is reported.
func applyOverrides(e any, tr *markers.Traits, rec checkpoint.Values, overrides map[string]any, file string, notes []string) ([]string, error) {
	if err := markers.Apply(e, overrides); err != nil {
		return nil, fmt.Errorf("NewFromCheckpoint(%s): overrides: %w", file, err)
	}
	after, err := currentValues(e)
	if err != nil {
		return nil, err
	}
	for _, name := range sortedKeys(overrides) {
		f, _ := tr.Field(name) // Apply checked every name
		was, recorded := byKind(rec, f.Kind)[name]
		got := byKind(after, f.Kind)[name]
		if !recorded || was == got {
			continue
		}
		if f.Kind == markers.KindGraphConst {
			return nil, &ContradictionError{Path: file, Field: name, Recorded: was, Given: got,
				msg: fmt.Sprintf("NewFromCheckpoint(%s): override %s = %s contradicts the checkpoint, which records GraphConst %s = %s: a GraphConst field fixes the programs and the weights' shapes; drop the override, or build the experiment with New and load the weights into the new shape with WithCheckpoint, which checks that they fit",
					file, name, got, name, was)}
		}
		notes = append(notes, fmt.Sprintf("checkpoint %s: %s field %s: checkpoint %s, override %s", file, kindLabel[f.Kind], name, was, got))
	}
	return notes, nil
}

// setFromText sets field f of e from its recorded text, and checks that it then prints as
// recorded (else the field is put back and the error says what it printed as).
func setFromText(e any, f markers.Field, text string) error {
	t := text
	if f.Kind == markers.KindGraphConst { // printed with %+v, a string quoted
		switch k := f.Type.Kind(); {
		case k == reflect.String:
			u, err := strconv.Unquote(text)
			if err != nil {
				return fmt.Errorf("recorded text %s is not a quoted string", text)
			}
			t = u
		case (k == reflect.Slice || k == reflect.Array) && strings.HasPrefix(text, "[") && strings.HasSuffix(text, "]"):
			t = strings.Join(strings.Fields(text[1:len(text)-1]), ",")
		}
	}
	old := reflect.ValueOf(e).Elem().Field(f.Index).Interface()
	if err := markers.ApplyText(e, []string{f.Name + "=" + t}); err != nil {
		return fmt.Errorf("recorded %s cannot be set back: %w", text, err)
	}
	v, err := currentValues(e)
	if err == nil && byKind(v, f.Kind)[f.Name] == text {
		return nil
	}
	got := byKind(v, f.Kind)[f.Name]
	if rerr := markers.Apply(e, map[string]any{f.Name: old}); rerr != nil {
		return errors.Join(err, rerr)
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("recorded %s, set back from its text, prints as %s", text, got)
}
