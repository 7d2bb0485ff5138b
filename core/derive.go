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
func (n *Nitro) derive() (err error) {
	e := n.e
	if _, ok := e.(Deriver); ok && n.specOnly() {
		n.warn(fmt.Sprintf("experiment %s has a Derive hook, which is not called under WithInputSpecs (there is no data to derive from): the fields it sets keep their values as constructed", n.typeName))
	} else if d, ok := e.(Deriver); ok {
		vals, err := d.Derive(n.data)
		if err != nil {
			return fmt.Errorf("Derive: %w", err)
		}
		if err := markers.Apply(e, vals); err != nil {
			return fmt.Errorf("Derive returned values that do not fit the experiment: %w", err)
		}
		n.derived = map[string]string{}
		for k, v := range vals {
			if s, ok := markers.ValueText(reflect.ValueOf(v)); ok {
				n.derived[k] = s
			}
		}
	}
	if n.gcHash, err = markers.GraphConstHash(e); err != nil {
		return err
	}
	n.gcValues, err = markers.GraphConstValues(e)
	return err
}
