package core

import (
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/markers"
)

// resolved is one knob's value and where it came from ("run option", "method Name()",
// "field Name", "default"): errors and the config report name both.
type resolved[T any] struct {
	value  T
	source string
}

func (r resolved[T]) String() string { return fmt.Sprintf("%v (%s)", r.value, r.source) }

// resolveConfig is setup's config phase: every knob (contract.go's config) resolved, then the
// whole config validated together with the run options it depends on.
func (bld *builder) resolveConfig() (err error) {
	su := &bld.n.spec
	if su.cfg, err = resolveKnobs(su.e, su.typeName, &su.opts); err != nil {
		return err
	}
	if err := su.cfg.resolvePrecision(&su.opts); err != nil {
		return err
	}
	bld.warnDeviceShadows()
	return su.cfg.validate(&su.opts)
}

// resolveBackend is setup's backend phase: WithBackend's name, else the automatic choice.
func (bld *builder) resolveBackend() (err error) {
	su := &bld.n.spec
	cache := backend.CacheSetting{Dir: su.opts.compileCache, Source: "core.WithCompileCache"}
	if su.opts.dist != nil {
		cache.Rank, cache.RankSet = su.opts.dist.Rank, true
	}
	// A run of several processes with no collective of ours (no MPI) spans them on the GPU through
	// XLA's own distributed runtime: the CUDA client starts as one of them, and then sums over
	// them (spanCollective). The CPU plugin ignores this, and a run over MPI keeps one client per
	// process.
	d, span := distOf(su.opts), backend.Distribution{}
	if su.opts.collective == nil {
		span = backend.Distribution{Rank: d.Rank, WorldSize: d.WorldSize, Coordinator: d.Coordinator}
	}
	if err := backend.Distribute(span); err != nil {
		return err
	}
	if su.backend, err = backend.ResolveWithCache(su.opts.backend, cache); err != nil {
		return err
	}
	if err := bld.spanCollective(); err != nil { // collective.go: a client spanning the processes sums over them
		return err
	}
	su.compiledAt[0], su.compiledAt[1] = backend.CompileCounts()
	su.compileSecsAt = backend.CompileSeconds()
	// An automatic fallback to pure Go is about ten times slower: a Go program that calls New
	// itself must hear it too, not only read it in the config report.
	if w := su.backend.Warning; w != "" {
		su.warn(strings.TrimPrefix(w, "warning: "))
	}
	bld.applyPrecision()
	return nil
}

// resolveKnobs resolves each knob by its rule: run option > method > field > default.
func resolveKnobs(e any, typeName string, o *options) (config, error) {
	var c config
	var err error
	if c.maxEpochs, err = resolveKnob(e, "MaxEpochs", o.maxEpochs, 1); err != nil {
		return c, err
	}
	if c.maxSteps, err = resolveKnob(e, "MaxSteps", o.maxSteps, 0); err != nil {
		return c, err
	}
	if c.valEvery, err = resolveKnob(e, "ValEvery", o.valEvery, 0); err != nil {
		return c, err
	}
	if c.checkpointEvery, err = resolveKnob(e, "CheckpointEvery", o.checkpointEvery, 0); err != nil {
		return c, err
	}
	c.oneHorizon()
	if c.seed, err = resolveKnob(e, "Seed", o.seed, 42); err != nil {
		return c, err
	}
	if c.runDir, err = resolveKnob(e, "RunDir", o.runDir, filepath.Join("runs", typeName)); err != nil {
		return c, err
	}
	if c.accum, err = resolveKnob(e, "Accum", o.accum, 1); err != nil {
		return c, err
	}
	if c.clip, err = resolveKnob(e, "GradientClipNorm", o.clip, 0.0); err != nil {
		return c, err
	}
	if c.lr, err = resolveKnob(e, "LearningRate", o.lr, 1e-3); err != nil {
		return c, err
	}
	if c.lambda, err = resolveKnob(e, "Lambda", nil, 0.0); err != nil {
		return c, err
	}
	return c, nil
}

// validate checks the resolved knobs and the run options that constrain them, each error naming
// the knob or option, its value and where it came from, then the fix. What needs the data (Accum
// dividing the train split) is checked with the splits; the run directory, by CheckRunDir.
func (c *config) validate(o *options) error {
	switch {
	case c.maxEpochs.value < 0:
		return fmt.Errorf("MaxEpochs = %d from %s: must be >= 0", c.maxEpochs.value, c.maxEpochs.source)
	case c.periodError() != nil:
		return c.periodError()
	case c.accum.value < 1:
		return fmt.Errorf("Accum = %d from %s: must be >= 1 (micro-batches per optimizer step)", c.accum.value, c.accum.source)
	case !(c.clip.value >= 0) || math.IsInf(c.clip.value, 1): // NaN fails every comparison
		return fmt.Errorf("GradientClipNorm = %g from %s: must be a finite number >= 0 (0 turns clipping off)", c.clip.value, c.clip.source)
	case o.fused && c.accum.value > 1:
		return fmt.Errorf("WithFusedStep with Accum = %d from %s: a fused step compiles the gradient and the update as one program, so there is no step between micro-batches to accumulate in; set Accum to 1, or drop WithFusedStep (--fused) to use the two-program step, which accumulates", c.accum.value, c.accum.source)
	case o.logEvery != nil && *o.logEvery < 1:
		return fmt.Errorf("WithLogEvery(%d): must be >= 1 (a \"train\" line every k-th optimizer step; 1 logs every step)", *o.logEvery)
	case c.lr.value == 0:
		return fmt.Errorf("LearningRate = 0 from %s: per-group learning rates are ratios to it, so it must be non-zero; to freeze a group, give it LearningRateGroup 0 or schedule eta to 0", c.lr.source)
	case !(c.lr.value > 0) || math.IsInf(c.lr.value, 0):
		return fmt.Errorf("LearningRate = %v from %s: must be a finite number > 0 (a negative rate steps up the gradient, so the loss rises); set LearningRate (default 1e-3)", c.lr.value, c.lr.source)
	case o.inputSpecs != nil && o.data != nil:
		return fmt.Errorf("WithInputSpecs and WithData both given: the specs stand in for data; pass one")
	case o.inputSpecs != nil && o.resume != "":
		return fmt.Errorf("WithInputSpecs and WithResume(%q) both given: a resume continues training, which needs data; load weights without data with WithCheckpoint", o.resume)
	}
	return nil
}

// resolveKnob looks up name as a run option, a method `Name() T` and a field `Name`, in that
// order, and falls back to def.
func resolveKnob[T int | float64 | string](e any, name string, opt *T, def T) (resolved[T], error) {
	if opt != nil {
		return resolved[T]{*opt, "run option"}, nil
	}
	v := reflect.ValueOf(e)
	want := reflect.TypeOf(def)
	if m := v.MethodByName(name); m.IsValid() {
		mt := m.Type()
		if mt.NumIn() != 0 || mt.NumOut() != 1 || !knobConvertible(mt.Out(0), want) {
			return resolved[T]{}, fmt.Errorf("accessor method %s has signature %s: want func() %s%s", name, mt, want, truncationNote(mt, want))
		}
		return resolved[T]{m.Call(nil)[0].Convert(want).Interface().(T), "method " + name + "()"}, nil
	}
	s := v
	for s.Kind() == reflect.Pointer {
		s = s.Elem()
	}
	if f := s.FieldByName(name); f.IsValid() && f.CanInterface() {
		// A Device field is a traced input (device.lambda), never a driver knob (opt.lambda):
		// the same name on both sides must not silently bind, so a Device field is skipped.
		if _, isDevice := f.Interface().(markers.Bindable); isDevice {
			return resolved[T]{def, deviceShadowSource(name)}, nil
		}
		if !knobConvertible(f.Type(), want) {
			return resolved[T]{}, fmt.Errorf("field %s has type %s: the %s knob needs %s%s", name, f.Type(), name, want, truncationNote(f.Type(), want))
		}
		return resolved[T]{f.Convert(want).Interface().(T), "field " + name}, nil
	}
	return resolved[T]{def, "default"}, nil
}

// deviceShadowSource is the source of a knob whose field of the same name is a Device field: the
// default, and why the field was not read.
func deviceShadowSource(name string) string {
	return "default; field " + name + " is a markers.Device, a traced input, never this knob"
}

// warnDeviceShadows warns of each knob a Device field of its name shadows, but Lambda: a Device
// Lambda is the common auxiliary loss weight, and the decay it is not defaults to none. For the
// others, a value the user gave the field is not the run's, which nothing else would tell.
func (bld *builder) warnDeviceShadows() {
	su := &bld.n.spec
	for _, k := range []struct{ name, value, option, source string }{
		{"MaxEpochs", fmt.Sprint(su.cfg.maxEpochs.value), "WithMaxEpochs", su.cfg.maxEpochs.source},
		{"MaxSteps", fmt.Sprint(su.cfg.maxSteps.value), "WithMaxSteps", su.cfg.maxSteps.source},
		{"ValEvery", fmt.Sprint(su.cfg.valEvery.value), "WithValEvery", su.cfg.valEvery.source},
		{"CheckpointEvery", fmt.Sprint(su.cfg.checkpointEvery.value), "WithCheckpointEvery", su.cfg.checkpointEvery.source},
		{"Seed", fmt.Sprint(su.cfg.seed.value), "WithSeed", su.cfg.seed.source},
		{"RunDir", su.cfg.runDir.value, "WithRunDir", su.cfg.runDir.source},
		{"Accum", fmt.Sprint(su.cfg.accum.value), "WithAccum", su.cfg.accum.source},
		{"GradientClipNorm", fmt.Sprint(su.cfg.clip.value), "WithGradientClipNorm", su.cfg.clip.source},
		{"LearningRate", fmt.Sprint(su.cfg.lr.value), "WithLearningRate", su.cfg.lr.source},
	} {
		if k.source == deviceShadowSource(k.name) {
			su.warn(fmt.Sprintf("field %s is a markers.Device (a traced input to the hooks), so it does not set the %s knob, which is its default %s: to set the knob, declare the field as a plain value or pass %s; to keep a traced input, give it another name",
				k.name, k.name, k.value, k.option))
		}
	}
}

// knobConvertible says a field or method result of type have sets a knob of type want exactly: a
// number for a number (an int for a float knob converts exactly), a string for a string. A float
// for an int knob is refused, since converting it truncates (MaxEpochs 2.5 would train 2 epochs);
// so is a number for a string knob, which Go would convert to the rune it codes.
func knobConvertible(have, want reflect.Type) bool {
	if isNumber(have) != isNumber(want) || !have.ConvertibleTo(want) {
		return false
	}
	return !isFloat(have) || isFloat(want)
}

// truncationNote explains the refusal of a float (field or method result t) for an int knob, the
// one refused case where Go would convert the types.
func truncationNote(t, want reflect.Type) string {
	if t.Kind() == reflect.Func {
		if t.NumOut() != 1 {
			return ""
		}
		t = t.Out(0)
	}
	if isFloat(t) && isNumber(want) && !isFloat(want) {
		return fmt.Sprintf(" (a whole number: a %s would be truncated); declare it %s", t, want)
	}
	return ""
}

func isFloat(t reflect.Type) bool { return t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64 }

func isNumber(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}
