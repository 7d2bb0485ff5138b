package markers

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/gomlx/gopjrt/dtypes"
)

// Kind is a field's category.
type Kind int

const (
	// KindHost: the default for an unmarked field. Never visible to traced code, never in the
	// compile key; zeroed in the compile view.
	KindHost Kind = iota
	// KindDevice: a markers.Device[T] field. A traced input, excluded from the compile key,
	// settable later (SetDevice) without recompiling.
	KindDevice
	// KindGraphConst: a field tagged `nitro:"graphconst"`. Bakes into the program as a
	// constant and is in the compile key, so a new value is a new program.
	KindGraphConst
)

// String returns "host", "device" or "graphconst".
func (k Kind) String() string {
	switch k {
	case KindHost:
		return "host"
	case KindDevice:
		return "device"
	case KindGraphConst:
		return "graphconst"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Field is one field's configuration metadata.
type Field struct {
	Name string
	// Index is the field's index in the struct (reflect.Type.Field).
	Index int
	// Type is the declared type: for a Device[T] field it is T, the type inside the marker.
	Type reflect.Type
	Kind Kind
	// Default is the value New gives the field (a T for a Device field): from the `default`
	// tag or the experiment's Default method, else Type's zero value. Nil for an unexported field.
	Default any
	// HasDefault reports whether a default was declared (tag or Default method).
	HasDefault bool
	// Doc is the `doc:"..."` tag.
	Doc string
	// Exported is false for an unexported field: always Host, never configurable by name.
	Exported bool

	defaultText string // the raw `default` tag
	hasTag      bool
}

// Traits are what this package knows about one experiment type, computed once per type.
type Traits struct {
	Type reflect.Type
	// Name is the type's name as Go prints it in its package (e.g. "MyExp").
	Name string
	// QualifiedName is "<package path>.<Name>": stable across processes, the GraphConst hash seed.
	QualifiedName string
	// Fields in declaration order, unexported ones included.
	Fields []Field

	byName        map[string]int
	defaultMethod reflect.Value // func() E, if the type defines Default
}

// FieldNames returns the exported field names in declaration order: the valid keys for New,
// Apply, ApplyText and presets.
func (t *Traits) FieldNames() []string {
	var names []string
	for _, f := range t.Fields {
		if f.Exported {
			names = append(names, f.Name)
		}
	}
	return names
}

// Field returns the named field's metadata.
func (t *Traits) Field(name string) (Field, bool) {
	i, ok := t.byName[name]
	if !ok {
		return Field{}, false
	}
	return t.Fields[i], true
}

// DeviceFields returns the Device field names in declaration order.
func (t *Traits) DeviceFields() []string { return t.names(KindDevice) }

// HostFields returns the Host field names (unexported ones included) in declaration order.
func (t *Traits) HostFields() []string { return t.names(KindHost) }

// GraphConstFields returns the GraphConst field names in declaration order.
func (t *Traits) GraphConstFields() []string { return t.names(KindGraphConst) }

func (t *Traits) names(k Kind) []string {
	var names []string
	for _, f := range t.Fields {
		if f.Kind == k {
			names = append(names, f.Name)
		}
	}
	return names
}

type traitsEntry struct {
	traits *Traits
	err    error
}

// traitsCache maps reflect.Type to *traitsEntry; errors are cached too, since a type cannot change.
var traitsCache sync.Map

// TraitsOf returns the traits of e's type; e is an E, a *E (nil is fine) or a reflect.Type of
// either. They are computed once per type and shared; treat them as read-only.
// Errors describe a malformed declaration (a bad tag, a Device of an unsupported type, a
// GraphConst seed) and name the field and the fix.
func TraitsOf(e any) (*Traits, error) {
	t, ok := e.(reflect.Type)
	if !ok {
		if e == nil {
			return nil, fmt.Errorf("markers: nil experiment: pass a struct value or a pointer to one")
		}
		t = reflect.TypeOf(e)
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("markers: an experiment is a struct, got %s", t)
	}
	if v, ok := traitsCache.Load(t); ok {
		en := v.(*traitsEntry)
		return en.traits, en.err
	}
	tr, err := computeTraits(t)
	v, _ := traitsCache.LoadOrStore(t, &traitsEntry{tr, err})
	en := v.(*traitsEntry)
	return en.traits, en.err
}

// ConfigMetadata returns one entry per exported field of e's type, in declaration order: the
// source of the logged hyperparameter table. Unexported fields are private state, not knobs.
func ConfigMetadata(e any) ([]Field, error) {
	tr, err := TraitsOf(e)
	if err != nil {
		return nil, err
	}
	var out []Field
	for _, f := range tr.Fields {
		if f.Exported {
			out = append(out, f)
		}
	}
	return out, nil
}

const (
	tagMarker  = "nitro"
	tagDefault = "default"
	tagDoc     = "doc"
)

func computeTraits(t reflect.Type) (*Traits, error) {
	tr := &Traits{
		Type:          t,
		Name:          t.Name(),
		QualifiedName: t.PkgPath() + "." + t.Name(),
		byName:        map[string]int{},
	}
	if tr.Name == "" {
		tr.Name, tr.QualifiedName = t.String(), t.String()
	}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		f := Field{Name: sf.Name, Index: i, Type: sf.Type, Kind: KindHost, Exported: sf.IsExported(), Doc: sf.Tag.Get(tagDoc)}
		slot, isDevice := asDeviceSlot(sf.Type)
		marker, hasMarker := sf.Tag.Lookup(tagMarker)
		f.defaultText, f.hasTag = sf.Tag.Lookup(tagDefault)
		switch strings.TrimSpace(marker) {
		case "", "host":
			if isDevice {
				if hasMarker && marker != "" {
					return nil, fmt.Errorf("markers: field %s of %s is a markers.Device but tagged `nitro:%q`: "+
						"a field is one kind; drop the tag (Device) or use the plain type %s (Host)", sf.Name, tr.Name, marker, slot.elemType())
				}
				f.Kind = KindDevice
			}
		case "device":
			if !isDevice {
				return nil, fmt.Errorf("markers: field %s of %s is tagged `nitro:\"device\"` but has type %s: "+
					"declare it as markers.Device[%s] instead", sf.Name, tr.Name, sf.Type, sf.Type)
			}
			f.Kind = KindDevice
		case "graphconst":
			if isDevice {
				return nil, fmt.Errorf("markers: field %s of %s is a markers.Device but tagged `nitro:\"graphconst\"`: "+
					"a field is one kind; drop the tag (Device: traced input, no recompile) or use the plain type %s "+
					"with the tag (GraphConst: bakes, recompiles per value)", sf.Name, tr.Name, slot.elemType())
			}
			f.Kind = KindGraphConst
		default:
			return nil, fmt.Errorf("markers: field %s of %s has an unknown marker `nitro:%q`: "+
				"use `nitro:\"graphconst\"`, or none (Host); a Device is declared by its type, markers.Device[T]", sf.Name, tr.Name, marker)
		}
		if !f.Exported && (f.Kind != KindHost || f.hasTag) {
			return nil, fmt.Errorf("markers: field %s of %s is unexported but marked %s or given a default: "+
				"the framework reads, hashes and sets marked fields by name, so export it (%s)",
				sf.Name, tr.Name, f.Kind, strings.ToUpper(sf.Name[:1])+sf.Name[1:])
		}
		if f.Kind == KindDevice {
			f.Type = slot.elemType()
			if err := checkDeviceElem(f.Type); err != nil {
				return nil, fmt.Errorf("markers: Device field %s of %s: %w", sf.Name, tr.Name, err)
			}
		}
		if f.Kind == KindGraphConst && strings.EqualFold(sf.Name, "seed") {
			return nil, fmt.Errorf("markers: field %s of %s is marked GraphConst: a seed in the compile key "+
				"recompiles every program per seed, and a seed sweep must share them; leave it unmarked (Host) "+
				"or make it markers.Device[%s]", sf.Name, tr.Name, sf.Type)
		}
		if f.Kind != KindDevice {
			if path := findNestedDevice(sf.Type, sf.Name, map[reflect.Type]bool{}); path != "" {
				return nil, fmt.Errorf("markers: field %s of %s holds a markers.Device at %s: a Device must be a "+
					"top-level field of the experiment, where setup finds and binds it; flatten it out", sf.Name, tr.Name, path)
			}
		}
		if path, tag := findNestedTag(sf.Type, sf.Name, map[reflect.Type]bool{}); path != "" {
			return nil, fmt.Errorf("markers: field %s of %s is tagged `%s` inside field %s: markers and defaults are "+
				"read on the experiment's own fields only, so this tag would be ignored (the field would be Host, a "+
				"default would not apply); move the field up into %s, or tag %s itself "+
				"`nitro:\"graphconst\"` (that bakes all of it) and drop the tags inside it", path, tr.Name, tag, sf.Name, tr.Name, sf.Name)
		}
		tr.byName[sf.Name] = i
		tr.Fields = append(tr.Fields, f)
	}
	if err := findDefaultMethod(tr); err != nil {
		return nil, err
	}
	def, err := tr.defaults()
	if err != nil {
		return nil, err
	}
	for i := range tr.Fields {
		f := &tr.Fields[i]
		f.HasDefault = f.hasTag || tr.defaultMethod.IsValid()
		if f.Exported {
			f.Default = hostValueOf(def.Field(f.Index), f.Kind)
		}
	}
	return tr, nil
}

// hostValueOf returns a field's value as a host value: the T inside a Device.
func hostValueOf(v reflect.Value, k Kind) any {
	if k == KindDevice {
		return v.Interface().(deviceSlot).hostValue()
	}
	return v.Interface()
}

// checkDeviceElem accepts what tensors.FromAnyValue takes: a Go numeric or bool type (int,
// float16, bfloat16 included) or slices of one. Named types are refused: GoMLX copies by exact
// type and would panic at transfer time.
func checkDeviceElem(t reflect.Type) error {
	base := t
	for base.Kind() == reflect.Slice {
		base = base.Elem()
	}
	dt := dtypes.FromGoType(base)
	if dt == dtypes.InvalidDType || (base != dt.GoType() && base != reflect.TypeFor[int]()) {
		return fmt.Errorf("markers.Device[%s]: T must be a Go numeric or bool type (not a named one) or a "+
			"(multi-dimensional) slice of one, as tensors.FromAnyValue takes; keep %s Host or GraphConst", t, t)
	}
	return nil
}

// findNestedDevice returns the path of a Device inside t, or "".
func findNestedDevice(t reflect.Type, path string, seen map[reflect.Type]bool) string {
	if seen[t] {
		return ""
	}
	seen[t] = true
	if _, ok := asDeviceSlot(t); ok {
		return path
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return findNestedDevice(t.Elem(), path+"[]", seen)
	case reflect.Map:
		return findNestedDevice(t.Elem(), path+"[key]", seen)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if p := findNestedDevice(t.Field(i).Type, path+"."+t.Field(i).Name, seen); p != "" {
				return p
			}
		}
	}
	return ""
}

// findNestedTag returns the path and text of a nitro or default tag on a field inside t (through
// structs, pointers, slices, arrays and maps), or "".
func findNestedTag(t reflect.Type, path string, seen map[reflect.Type]bool) (string, string) {
	if seen[t] {
		return "", ""
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return findNestedTag(t.Elem(), path, seen)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			for _, key := range []string{tagMarker, tagDefault} {
				if v, ok := sf.Tag.Lookup(key); ok {
					return path + "." + sf.Name, fmt.Sprintf("%s:%q", key, v)
				}
			}
			if p, tag := findNestedTag(sf.Type, path+"."+sf.Name, seen); p != "" {
				return p, tag
			}
		}
	}
	return "", ""
}

// findDefaultMethod records a `func (E) Default() E` (or on *E). Defaults may come from it or
// from `default` tags, never both for one type: one declaration of each value.
func findDefaultMethod(tr *Traits) error {
	t := tr.Type
	m, ok := reflect.PointerTo(t).MethodByName("Default")
	if !ok {
		return nil
	}
	if m.Type.NumIn() != 1 || m.Type.NumOut() != 1 || m.Type.Out(0) != t {
		return fmt.Errorf("markers: %s has a method Default of type %s: to supply defaults it must be "+
			"func (%s) Default() %s; rename it otherwise", tr.Name, m.Type, tr.Name, tr.Name)
	}
	for _, f := range tr.Fields {
		if f.hasTag {
			return fmt.Errorf("markers: field %s of %s has a `default` tag and %s also defines Default(): "+
				"declare defaults in one place; drop the tag or set the field in Default()", f.Name, tr.Name, tr.Name)
		}
	}
	tr.defaultMethod = m.Func
	return nil
}

// defaults returns a fresh E holding the declared defaults (Default method, or `default` tags
// parsed into the field types) with Device fields named.
func (tr *Traits) defaults() (reflect.Value, error) {
	p := reflect.New(tr.Type)
	v := p.Elem()
	if tr.defaultMethod.IsValid() {
		v.Set(tr.defaultMethod.Call([]reflect.Value{p})[0])
	} else {
		for _, f := range tr.Fields {
			if !f.hasTag {
				continue
			}
			pv, err := parseText(f.Type, f.defaultText)
			if err != nil {
				return reflect.Value{}, fmt.Errorf("markers: field %s of %s: `default:%q` is not a %s: %v",
					f.Name, tr.Name, f.defaultText, f.Type, err)
			}
			setField(v, f, pv)
		}
	}
	tr.nameDevices(v)
	return v, nil
}

// setField stores a host value (a T for a Device field) into field f of the struct value v.
func setField(v reflect.Value, f Field, hv reflect.Value) {
	fv := v.Field(f.Index)
	if f.Kind == KindDevice {
		fv.Set(fv.Interface().(deviceSlot).withValue(hv).Interface().(deviceSlot).withName(f.Name))
		return
	}
	fv.Set(hv)
}

// nameDevices stamps each Device field with its name, for messages.
func (tr *Traits) nameDevices(v reflect.Value) {
	for _, f := range tr.Fields {
		if f.Kind == KindDevice {
			fv := v.Field(f.Index)
			fv.Set(fv.Interface().(deviceSlot).withName(f.Name))
		}
	}
}
