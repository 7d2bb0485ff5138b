package markers

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// New returns an E holding its declared defaults with overrides applied (every key validated,
// see Apply), after checking that its GraphConst values hash by content.
func New[E any](overrides map[string]any) (*E, error) {
	p, err := build(reflect.TypeFor[E](), "", nil, overrides)
	if err != nil {
		return nil, err
	}
	remember(p.(*E))
	return p.(*E), nil
}

// Presets returns E's table of named configurations: the result of
// `func (E) Presets() map[string]map[string]any` (or on *E), or an empty table. Entries are
// partial: a recipe states what it changes and the rest falls through to the defaults.
func Presets[E any]() map[string]map[string]any {
	type presetter interface {
		Presets() map[string]map[string]any
	}
	var src map[string]map[string]any
	var zero E
	if p, ok := any(zero).(presetter); ok {
		src = p.Presets()
	} else if p, ok := any(&zero).(presetter); ok {
		src = p.Presets()
	}
	out := make(map[string]map[string]any, len(src))
	for name, values := range src {
		out[name] = maps.Clone(values) // the caller may edit its copy
	}
	return out
}

// FromPreset builds E from Presets[E]()[name]: defaults, then the preset, then overrides (which
// win). Every preset and override key is validated against E's fields, because a typo that
// silently set nothing is worse than a recipe that refuses to load. It records no name: the
// caller that wants to remember which recipe produced a run records it.
func FromPreset[E any](name string, overrides map[string]any) (*E, error) {
	t := reflect.TypeFor[E]()
	presets := Presets[E]()
	preset, ok := presets[name]
	if !ok {
		typeName := t.Name()
		if len(presets) == 0 {
			return nil, fmt.Errorf("markers: no preset %q: %s declares no presets "+
				"(define func (%s) Presets() map[string]map[string]any)", name, typeName, typeName)
		}
		return nil, fmt.Errorf("markers: no preset %q for %s; presets: %s", name, typeName, strings.Join(sortedKeys(presets), ", "))
	}
	p, err := build(t, name, preset, overrides)
	if err != nil {
		return nil, err
	}
	remember(p.(*E))
	return p.(*E), nil
}

// ValidatePresets applies every preset of E to its defaults and reports every problem (unknown
// keys, wrong types, unhashable GraphConst values), so a broken recipe fails at startup rather
// than when someone finally selects it.
func ValidatePresets[E any]() error {
	presets := Presets[E]()
	var errs []error
	for _, name := range sortedKeys(presets) {
		if _, err := build(reflect.TypeFor[E](), name, presets[name], nil); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func build(t reflect.Type, presetName string, preset, overrides map[string]any) (any, error) {
	tr, err := TraitsOf(t)
	if err != nil {
		return nil, err
	}
	v, err := tr.defaults()
	if err != nil {
		return nil, err
	}
	p := reflect.New(t)
	p.Elem().Set(v)
	if preset != nil {
		if err := apply(tr, p.Elem(), preset); err != nil {
			return nil, fmt.Errorf("markers: preset %q of %s: %w", presetName, tr.Name, err)
		}
	}
	if err := apply(tr, p.Elem(), overrides); err != nil {
		return nil, fmt.Errorf("markers: %w", err)
	}
	if err := AssertGraphConstHashable(p.Interface()); err != nil {
		return nil, err
	}
	return p.Interface(), nil
}

// Apply sets fields of e (a non-nil *E) from overrides, keyed by field name. Every key and value
// is checked before anything is written, so on error e is unchanged. An unknown key is an error
// listing the valid names; a value must have the field's type (for a Device[T] field: T or
// Device[T]), except that a Go numeric value converts to a numeric field when no information is
// lost (float64 to float32 rounds, as a literal would).
func Apply(e any, overrides map[string]any) error {
	tr, v, err := mutableStruct(e)
	if err != nil {
		return err
	}
	if err := apply(tr, v, overrides); err != nil {
		return fmt.Errorf("markers: %w", err)
	}
	return nil
}

func apply(tr *Traits, v reflect.Value, overrides map[string]any) error {
	if len(overrides) == 0 {
		return nil
	}
	var unknown []string
	var errs []error
	type assignment struct {
		f  Field
		hv reflect.Value
	}
	var todo []assignment
	for _, name := range sortedKeys(overrides) {
		f, ok := tr.Field(name)
		if !ok || !f.Exported {
			unknown = append(unknown, name)
			continue
		}
		hv, err := convertValue(tr, f, overrides[name])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		todo = append(todo, assignment{f, hv})
	}
	if len(unknown) > 0 {
		errs = append([]error{unknownFieldsError(tr, unknown)}, errs...)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, a := range todo {
		setField(v, a.f, a.hv)
	}
	return nil
}

func unknownFieldsError(tr *Traits, unknown []string) error {
	var hints []string
	for _, u := range unknown {
		if f := closestName(u, tr.FieldNames()); f != "" {
			hints = append(hints, fmt.Sprintf("%s for %s", f, u))
		}
	}
	hint := ""
	if len(hints) > 0 {
		hint = " (did you mean " + strings.Join(hints, ", ") + "?)"
	}
	plural := "field"
	if len(unknown) > 1 {
		plural = "fields"
	}
	return fmt.Errorf("unknown %s %s for %s%s; valid fields: %s",
		plural, strings.Join(unknown, ", "), tr.Name, hint, strings.Join(tr.FieldNames(), ", "))
}

// convertValue turns an override into a host value of f.Type.
func convertValue(tr *Traits, f Field, x any) (reflect.Value, error) {
	if f.Kind == KindDevice && x != nil {
		if s, ok := x.(deviceSlot); ok && s.selfType() == tr.Type.Field(f.Index).Type {
			return reflect.ValueOf(s.hostValue()), nil
		}
	}
	want := f.Type
	if x == nil {
		switch want.Kind() {
		case reflect.Slice, reflect.Map, reflect.Interface, reflect.Pointer, reflect.Func, reflect.Chan:
			return reflect.Zero(want), nil
		}
		return reflect.Value{}, fmt.Errorf("field %s of %s: nil cannot be used as %s", f.Name, tr.Name, want)
	}
	rv := reflect.ValueOf(x)
	if rv.Type().AssignableTo(want) {
		out := reflect.New(want).Elem()
		out.Set(rv)
		return out, nil
	}
	if cv, ok, why := convertNumber(rv, want); ok {
		return cv, nil
	} else if why != "" {
		return reflect.Value{}, fmt.Errorf("field %s of %s: value %v of type %s cannot be used as %s: %s",
			f.Name, tr.Name, x, rv.Type(), want, why)
	}
	what := want.String()
	if f.Kind == KindDevice {
		what = fmt.Sprintf("%s (the field is markers.Device[%s])", want, want)
	}
	return reflect.Value{}, fmt.Errorf("field %s of %s: value %v of type %s cannot be used as %s; pass a value of type %s",
		f.Name, tr.Name, x, rv.Type(), what, want)
}

// convertNumber converts between unnamed Go numeric types when no information is lost.
// ok=false with why="" means "not a numeric conversion at all".
func convertNumber(v reflect.Value, want reflect.Type) (out reflect.Value, ok bool, why string) {
	if !isPlainNumber(v.Type()) || !isPlainNumber(want) {
		return reflect.Value{}, false, ""
	}
	out = reflect.New(want).Elem()
	switch {
	case isInt(v.Kind()) || isUint(v.Kind()):
		var i int64
		var u uint64
		neg := false
		if isInt(v.Kind()) {
			i = v.Int()
			neg = i < 0
			u = uint64(i)
		} else {
			u = v.Uint()
			i = int64(u)
		}
		switch {
		case isInt(want.Kind()):
			if (!neg && u > math.MaxInt64) || out.OverflowInt(i) {
				return reflect.Value{}, false, "out of range"
			}
			out.SetInt(i)
		case isUint(want.Kind()):
			if neg || out.OverflowUint(u) {
				return reflect.Value{}, false, "out of range"
			}
			out.SetUint(u)
		default: // float
			f := float64(i)
			if !neg {
				f = float64(u)
			}
			out.SetFloat(f)
			if !neg && (f >= 1<<64 || uint64(out.Float()) != u) || neg && int64(out.Float()) != i {
				return reflect.Value{}, false, "not exactly representable"
			}
		}
	default: // float source
		f := v.Float()
		switch {
		case isInt(want.Kind()) || isUint(want.Kind()):
			if f != math.Trunc(f) || math.IsInf(f, 0) || math.IsNaN(f) {
				return reflect.Value{}, false, "not an integer"
			}
			if isInt(want.Kind()) {
				if f < math.MinInt64 || f >= math.MaxInt64 || out.OverflowInt(int64(f)) {
					return reflect.Value{}, false, "out of range"
				}
				out.SetInt(int64(f))
			} else {
				if f < 0 || f >= math.MaxUint64 || out.OverflowUint(uint64(f)) {
					return reflect.Value{}, false, "out of range"
				}
				out.SetUint(uint64(f))
			}
		default:
			if !math.IsInf(f, 0) && out.OverflowFloat(f) {
				return reflect.Value{}, false, "out of range"
			}
			out.SetFloat(f)
		}
	}
	return out, true, ""
}

func isPlainNumber(t reflect.Type) bool {
	if t.PkgPath() != "" { // a named type (time.Duration, a user's Width) means a unit: exact type only
		return false
	}
	k := t.Kind()
	return isInt(k) || isUint(k) || k == reflect.Float32 || k == reflect.Float64
}

func isInt(k reflect.Kind) bool {
	return k == reflect.Int || k == reflect.Int8 || k == reflect.Int16 || k == reflect.Int32 || k == reflect.Int64
}

func isUint(k reflect.Kind) bool {
	return k == reflect.Uint || k == reflect.Uint8 || k == reflect.Uint16 || k == reflect.Uint32 ||
		k == reflect.Uint64 || k == reflect.Uintptr
}

// ApplyText sets fields of e (a non-nil *E) from "field=value" assignments, as a command line
// gives them. Each value is parsed into the field's type (for a Device[T] field, into T):
// integers (strconv base prefixes allowed), floats, bools, strings (taken verbatim), durations
// (time.ParseDuration), types implementing encoding.TextUnmarshaler, slices as "1,2,3" or JSON,
// and anything else as JSON. All assignments are checked before any is written; a later
// assignment to the same field wins.
func ApplyText(e any, assignments []string) error {
	tr, v, err := mutableStruct(e)
	if err != nil {
		return err
	}
	values := map[string]any{}
	var unknown []string
	var errs []error
	for _, a := range assignments {
		name, text, ok := strings.Cut(a, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			errs = append(errs, fmt.Errorf("%q is not an assignment: write field=value (fields of %s: %s)",
				a, tr.Name, strings.Join(tr.FieldNames(), ", ")))
			continue
		}
		f, ok := tr.Field(name)
		if !ok || !f.Exported {
			if !slices.Contains(unknown, name) {
				unknown = append(unknown, name)
			}
			continue
		}
		pv, err := parseText(f.Type, text)
		if err != nil {
			errs = append(errs, fmt.Errorf("field %s of %s: cannot parse %q as %s: %v", name, tr.Name, text, f.Type, err))
			continue
		}
		values[name] = pv.Interface()
	}
	if len(unknown) > 0 {
		errs = append([]error{unknownFieldsError(tr, unknown)}, errs...)
	}
	if len(errs) > 0 {
		return fmt.Errorf("markers: %w", errors.Join(errs...))
	}
	if err := apply(tr, v, values); err != nil {
		return fmt.Errorf("markers: %w", err)
	}
	return nil
}

var durationType = reflect.TypeFor[time.Duration]()

// parseText parses s into a value of type t.
func parseText(t reflect.Type, s string) (reflect.Value, error) {
	out := reflect.New(t).Elem()
	if t == durationType {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return out, errors.New("want a duration such as 1m30s")
		}
		out.SetInt(int64(d))
		return out, nil
	}
	if u, ok := out.Addr().Interface().(encoding.TextUnmarshaler); ok {
		err := u.UnmarshalText([]byte(s))
		return out, err
	}
	trimmed := strings.TrimSpace(s)
	switch k := t.Kind(); {
	case k == reflect.String:
		out.SetString(s)
	case k == reflect.Bool:
		b, err := strconv.ParseBool(trimmed)
		if err != nil {
			return out, errors.New("want true or false")
		}
		out.SetBool(b)
	case isInt(k):
		i, err := strconv.ParseInt(trimmed, 0, t.Bits())
		if err != nil {
			return out, numErr(err, "an integer")
		}
		out.SetInt(i)
	case isUint(k):
		u, err := strconv.ParseUint(trimmed, 0, t.Bits())
		if err != nil {
			return out, numErr(err, "a non-negative integer")
		}
		out.SetUint(u)
	case k == reflect.Float32 || k == reflect.Float64:
		f, err := strconv.ParseFloat(trimmed, t.Bits())
		if err != nil {
			return out, numErr(err, "a number")
		}
		out.SetFloat(f)
	case k == reflect.Complex64 || k == reflect.Complex128:
		c, err := strconv.ParseComplex(trimmed, t.Bits())
		if err != nil {
			return out, numErr(err, "a complex number")
		}
		out.SetComplex(c)
	case k == reflect.Slice && !strings.HasPrefix(trimmed, "["):
		parts := strings.Split(trimmed, ",")
		if trimmed == "" {
			parts = nil
		}
		out.Set(reflect.MakeSlice(t, len(parts), len(parts)))
		for i, p := range parts {
			ev, err := parseText(t.Elem(), strings.TrimSpace(p))
			if err != nil {
				return out, fmt.Errorf("element %d %q: %v", i, p, err)
			}
			out.Index(i).Set(ev)
		}
	case k == reflect.Slice || k == reflect.Array || k == reflect.Map || k == reflect.Struct:
		dec := json.NewDecoder(strings.NewReader(trimmed))
		dec.DisallowUnknownFields()
		if err := dec.Decode(out.Addr().Interface()); err != nil {
			return out, fmt.Errorf("want JSON for %s: %v", t, err)
		}
	default:
		return out, fmt.Errorf("a %s cannot be set from text", t)
	}
	return out, nil
}

func numErr(err error, what string) error {
	if errors.Is(err, strconv.ErrRange) {
		return errors.New("out of range")
	}
	return errors.New("want " + what)
}

// mutableStruct checks that e is a non-nil *E and returns its traits and the struct value.
func mutableStruct(e any) (*Traits, reflect.Value, error) {
	rv := reflect.ValueOf(e)
	if !rv.IsValid() || rv.Kind() != reflect.Pointer || rv.IsNil() {
		return nil, reflect.Value{}, fmt.Errorf("markers: want a non-nil pointer to an experiment struct, got %T", e)
	}
	tr, err := TraitsOf(e)
	if err != nil {
		return nil, reflect.Value{}, err
	}
	return tr, rv.Elem(), nil
}

// readStruct accepts an E or a non-nil *E.
func readStruct(e any) (*Traits, reflect.Value, error) {
	rv := reflect.ValueOf(e)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil, reflect.Value{}, fmt.Errorf("markers: nil %T", e)
		}
		rv = rv.Elem()
	}
	tr, err := TraitsOf(e)
	if err != nil {
		return nil, reflect.Value{}, err
	}
	return tr, rv, nil
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// ClosestName returns the name of names a mistyped key most likely meant ("" if none is close),
// for the "did you mean" of an error or warning.
func ClosestName(key string, names []string) string { return closestName(key, names) }

// closestName returns the name a mistyped key most likely meant: equal up to case, or within a
// small edit distance (a transposition counts as one edit); "" if none is close.
func closestName(key string, names []string) string {
	best, bestDist := "", 1+len(key)/4
	if bestDist < 2 {
		bestDist = 2
	}
	for _, n := range names {
		if strings.EqualFold(key, n) {
			return n
		}
		if d := editDistance(strings.ToLower(key), strings.ToLower(n)); d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

// editDistance is the optimal-string-alignment distance between a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
