package markers

import (
	"reflect"
	"runtime"
	"sync"
	"unsafe"
	"weak"
)

// built remembers the experiments New and FromPreset returned, by address, so a later reader can
// tell a field set to its zero value on purpose (an override through New) from one whose default
// was never applied (a struct literal). Entries hold weak pointers and vanish with the experiment.
var built sync.Map // uintptr -> builtEntry

type builtEntry interface{ is(p any) bool }

type weakEntry[E any] struct{ w weak.Pointer[E] }

// is compares against the live object, so an address reused by a later allocation never matches.
func (e weakEntry[E]) is(p any) bool {
	q, ok := p.(*E)
	return ok && q != nil && e.w.Value() == q
}

func remember[E any](p *E) {
	key := uintptr(unsafe.Pointer(p))
	entry := weakEntry[E]{weak.Make(p)}
	built.Store(key, builtEntry(entry))
	// CompareAndDelete: a newer experiment at the same address keeps its own entry.
	runtime.AddCleanup(p, func(k uintptr) { built.CompareAndDelete(k, builtEntry(entry)) }, key)
}

// Built reports whether e is a pointer that New or FromPreset returned (Apply and ApplyText on it
// keep it built: what they set is deliberate). A copy of such a struct is not built.
func Built(e any) bool {
	rv := reflect.ValueOf(e)
	if !rv.IsValid() || rv.Kind() != reflect.Pointer || rv.IsNil() {
		return false
	}
	v, ok := built.Load(uintptr(rv.UnsafePointer()))
	return ok && v.(builtEntry).is(e)
}

// UnappliedDefaults lists the fields of e (an E or a non-nil *E) that declare a non-zero default
// (tag or Default method) yet hold their type's zero value: what a struct literal such as &E{}
// looks like when its defaults were never applied. A caller that accepts experiments not built
// by New uses it to refuse such a struct at once, rather than train with zeros nobody chose.
func UnappliedDefaults(e any) ([]string, error) {
	tr, v, err := readStruct(e)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range tr.Fields {
		if !f.Exported || !f.HasDefault || f.Default == nil || reflect.ValueOf(f.Default).IsZero() {
			continue
		}
		if cur := hostValueOf(v.Field(f.Index), f.Kind); cur == nil || reflect.ValueOf(cur).IsZero() {
			names = append(names, f.Name)
		}
	}
	return names, nil
}
