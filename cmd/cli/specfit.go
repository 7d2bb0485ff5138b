package cli

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/prefetch"
)

// specMisfit explains a checkpoint that does not fit the model --input-spec built: with specs
// the weights' shapes follow from the declared input shapes, so a misfit is most likely the flag's
// fault, not the checkpoint's. It builds the model from the specs alone (no checkpoint, no
// data), compares its parameters with the checkpoint's, and names the --input-spec, the shape it
// gave and, where one parameter axis tells (a Dense layer's input width), the shape the
// checkpoint's model reads. When the --input-spec values alone do not build the model, it says
// so, naming them; any other failure along the way leaves the original error as it was.
func specMisfit(ent entry, f *exportFlags, specs []prefetch.FieldSpec, orig error) error {
	misfit := strings.Contains(orig.Error(), "does not fit this model")
	given := strings.Join(f.inputSpecs, " --input-spec ")
	path := f.checkpoint
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		if path, err = core.NewestCheckpoint(path); err != nil {
			return orig
		}
	}
	h, err := checkpoint.Info(path)
	if err != nil {
		return orig
	}
	preset := f.preset
	if preset == "" && !f.weightsOnly { // the experiment was rebuilt from the checkpoint's preset
		preset = h.Preset
	}
	e, err := ent.configure(preset, f.sets)
	if err != nil {
		return orig
	}
	n, err := core.New(e, core.WithBackend(f.backend), core.WithInputSpecs(specs...), core.WithoutLogger(), core.WithoutCheckpoints(), core.Quiet())
	if err != nil {
		// No checkpoint and no data took part: the --input-spec values themselves do not build the
		// model (an integer dtype for a float input makes integer weights, which nothing can train).
		return fmt.Errorf("--input-spec %s: the model does not build from these specs alone (%w): check each spec's dtype and shape against the data checkpoint %s was trained on", given, err, path)
	}
	if !misfit {
		return orig
	}
	params, err := n.Parameters()
	if err != nil {
		return orig
	}
	// The first parameter whose shape differs on exactly one axis, where the model's size is a
	// --input-spec's per-row size: the checkpoint's size on that axis is what the model was trained to read.
	var diffs []string
	for _, t := range h.Tensors {
		name, ok := strings.CutPrefix(t.Name, "param/")
		if !ok {
			continue
		}
		p, ok := params[name]
		if !ok {
			continue
		}
		have := p.Shape().Dimensions
		if slices.Equal(have, t.Shape) {
			continue
		}
		diffs = append(diffs, fmt.Sprintf("%s is %v from the spec, %v in the checkpoint", t.Name, have, t.Shape))
		if len(have) != len(t.Shape) {
			continue
		}
		axis := -1
		for i := range have {
			if have[i] != t.Shape[i] {
				if axis >= 0 {
					axis = -1
					break
				}
				axis = i
			}
		}
		if axis < 0 {
			continue
		}
		for i, s := range specs {
			if rowSize(s.Shape) != have[axis] {
				continue
			}
			want := t.Shape[axis]
			var fix string
			if len(s.Shape) <= 1 {
				_, rest, _ := strings.Cut(f.inputSpecs[i], "=") // parseInputSpecs took NAME=DTYPE:DIMS apart the same way
				dt, _, _ := strings.Cut(rest, ":")
				fix = fmt.Sprintf(": give --input-spec %s=%s:%d", s.Name, dt, want)
			} else {
				fix = fmt.Sprintf(": give %q a shape of %d values per row", s.Name, want)
			}
			return fmt.Errorf("--input-spec %s: %q is %v per row (%d values), but checkpoint %s was trained on %d values per row (%s)%s",
				f.inputSpecs[i], s.Name, s.Shape, have[axis], path, want, diffs[len(diffs)-1], fix)
		}
	}
	if len(diffs) == 0 {
		return fmt.Errorf("--input-spec %s: the model these specs build does not fit checkpoint %s (%v): check each spec's dtype and shape against the data the checkpoint was trained on", given, path, orig)
	}
	return fmt.Errorf("--input-spec %s: the model these specs build does not fit checkpoint %s: %s: check each spec's dtype and shape against the data the checkpoint was trained on", given, path, strings.Join(diffs, "; "))
}

// rowSize is the number of values in one row of an --input-spec's per-row shape.
func rowSize(shape []int) int {
	k := 1
	for _, d := range shape {
		k *= d
	}
	return k
}
