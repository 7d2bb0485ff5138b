package core

import (
	"fmt"
	"reflect"

	"github.com/nitro-go/nitro/markers"
)

// derive is setup's Derive phase: the experiment's Derive hook (contract.go's Deriver) computes
// host values from the data and they are applied to the experiment's fields, before the model is
// built; then the GraphConst values are fixed, since Derive may have set some of them. Under
// WithInputSpecs there is no data, so Derive is not called, and a warning says so.
func (bld *builder) derive() (err error) {
	su := &bld.n.spec
	e := su.e
	if _, ok := e.(Deriver); ok && su.specOnly() {
		su.warn(fmt.Sprintf("experiment %s has a Derive hook, which is not called under WithInputSpecs (there is no data to derive from): the fields it sets keep their values as constructed", su.typeName))
	} else if d, ok := e.(Deriver); ok {
		vals, err := d.Derive(su.data)
		if err != nil {
			return fmt.Errorf("Derive: %w", err)
		}
		if err := markers.Apply(e, vals); err != nil {
			return fmt.Errorf("Derive returned values that do not fit the experiment: %w", err)
		}
		su.derived = map[string]string{}
		for k, v := range vals {
			if s, ok := markers.ValueText(reflect.ValueOf(v)); ok {
				su.derived[k] = s
			}
		}
	}
	if su.gcHash, err = markers.GraphConstHash(e); err != nil {
		return err
	}
	su.gcValues, err = markers.GraphConstValues(e)
	return err
}
