package core

import (
	"fmt"
	"slices"

	"github.com/nitro-go/nitro/prefetch"
)

// WithInputSpecs builds the Nitro from declared batch fields instead of data: BuildData is not
// called (nor Derive, which has no data to derive from: the fields it would set keep their
// values, and New warns when the experiment has a Derive hook), and the fields' dtypes and
// per-row shapes, which New otherwise reads off each split's first batch, are the specs'. The
// specs must cover every field Forward requires; fields Loss and Metrics read need none.
//
// Such a Nitro has no splits: it can Predict and be exported (export.Export), with the weights of
// WithCheckpoint or as BuildModel initializes them, but Train and Evaluate are errors (they
// match ErrNoSplit). This is how a model is served or exported where its training data is not:
// New(e, WithInputSpecs(prefetch.FieldSpec{"image", dtypes.Float32, []int{784}}), WithCheckpoint(path)).
// WithInputSpecs excludes WithData and WithResume (a resume continues training).
func WithInputSpecs(specs ...prefetch.FieldSpec) Option {
	return func(o *options) {
		o.inputSpecs = append([]prefetch.FieldSpec{}, specs...) // non-nil even when empty: New refuses none
		for i := range o.inputSpecs {
			o.inputSpecs[i].Shape = slices.Clone(specs[i].Shape)
		}
	}
}

// specOnly reports whether the Nitro was built with WithInputSpecs, from no data.
func (su *runSpec) specOnly() bool { return su.opts.inputSpecs != nil }

// checkInputSpecs is checkData for a Nitro built from WithInputSpecs: the data contract is the
// specs, checked against Forward's declared fields; there are no splits.
func (bld *builder) checkInputSpecs() error {
	su := &bld.n.spec
	specs := su.opts.inputSpecs
	if err := prefetch.CheckFieldSpecs("WithInputSpecs", specs); err != nil {
		return err
	}
	su.fieldShapes = map[string]fieldShape{}
	su.splitAvail = map[string]map[string]bool{}
	su.splitWidth = map[string]int{}
	var names []string
	for _, s := range specs {
		su.fieldShapes[s.Name] = fieldShape{dtype: s.DType.String(), row: slices.Clone(s.Shape)}
		names = append(names, s.Name)
	}
	bld.warnAbsentOptional(setOf(names), "no input spec")
	if su.forward.whole {
		return nil
	}
	for _, f := range su.forward.fields {
		if !f.optional && !slices.Contains(names, f.name) {
			return fmt.Errorf("WithInputSpecs declares %v, but Forward requires batch field %q: add its spec (name, dtype, per-row shape)", names, f.name)
		}
	}
	return nil
}

// noDataError is what Train and Evaluate return on a Nitro built from WithInputSpecs.
func (su *runSpec) noDataError(what string) error {
	return fmt.Errorf("%s: this Nitro was built with core.WithInputSpecs, from no data, so it has no splits: it can Predict and be exported; build it with data (BuildData or WithData) to %s: %w", what, what, ErrNoSplit)
}
