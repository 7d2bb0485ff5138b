package core

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/nitro-go/nitro/markers"
)

// batchField is one declared batch field of a hook.
type batchField struct {
	name     string // the batch key
	index    int    // struct field index
	optional bool
}

// hook is a reflected traced hook: its method and the batch fields it declares.
type hook struct {
	name      string
	method    reflect.Method
	batchType reflect.Type // struct type, or typeNodeMap (the whole batch)
	whole     bool         // receives the whole batch
	fields    []batchField
}

// resolveHooks is setup's hooks phase: the experiment's markers, its traced hooks (found and
// checked by reflection), BuildModel, and the optional accessors, each resolved once.
func (bld *builder) resolveHooks() (err error) {
	su := &bld.n.spec
	e := su.e
	if su.traits, err = markers.TraitsOf(e); err != nil {
		return err
	}
	if err = markers.AssertGraphConstHashable(e); err != nil {
		return err
	}
	su.acc = resolveAccessors(e)
	et := reflect.TypeOf(e)
	if err = bld.resolveManual(et); err != nil { // manual.go: TrainStep and the mode
		return err
	}
	for _, h := range []struct {
		name string
		dst  **hook
	}{{"Forward", &su.forward}, {"Loss", &su.loss}, {"Metrics", &su.metrics}, {"TrainMetrics", &su.trainMetrics}} {
		// Loss is optional in manual mode: TrainStep computes its own losses.
		required := tracedHooks[h.name].required && (h.name != "Loss" || su.trainStep == nil)
		if *h.dst, err = findHook(et, h.name, required); err != nil {
			return err
		}
	}
	if err = bld.resolveResidency(); err != nil {
		return err
	}
	if _, ok := e.(ModelBuilder); !ok {
		return fmt.Errorf("experiment %s has no BuildModel hook: define func (e *%s) BuildModel(ctx *context.Context) error", su.typeName, su.typeName)
	}
	return nil
}

// findHook resolves a traced hook (contract.go's tracedHooks) on the experiment's pointer type:
// nil when an optional one is absent, an error naming the signature wanted otherwise.
func findHook(et reflect.Type, name string, required bool) (*hook, error) {
	decl := tracedHooks[name]
	m, ok := et.MethodByName(name)
	if !ok {
		if required {
			return nil, fmt.Errorf("experiment %s has no %s hook: define %s", et.Elem().Name(), name, decl.signature)
		}
		return nil, nil
	}
	t := m.Type // includes the receiver
	bad := func(why string) error {
		return fmt.Errorf("hook %s.%s has signature %s: %s; want %s", et.Elem().Name(), name, t, why, decl.signature)
	}
	firstIn, out := decl.first, decl.result
	if t.NumIn() != 3 || t.NumOut() != 1 {
		return nil, bad("wrong number of parameters or results")
	}
	if t.In(1) != firstIn {
		return nil, bad(fmt.Sprintf("first parameter must be %s", firstIn))
	}
	if t.Out(0) != out {
		return nil, bad(fmt.Sprintf("result must be %s", out))
	}
	h := &hook{name: name, method: m, batchType: t.In(2)}
	switch {
	case h.batchType == typeNodeMap:
		h.whole = true
	case h.batchType.Kind() == reflect.Struct:
		for i := 0; i < h.batchType.NumField(); i++ {
			f := h.batchType.Field(i)
			_, tagged := f.Tag.Lookup("batch")
			if !f.IsExported() && (tagged || f.Type == typeNode) {
				return nil, unexportedField(et.Elem().Name(), name, h.batchType, f)
			}
			if !f.IsExported() {
				continue // a helper field of the struct, not a batch field
			}
			if f.Type != typeNode {
				return nil, bad(fmt.Sprintf("batch field %s has type %s; batch fields are *graph.Node", f.Name, f.Type))
			}
			bf := batchField{name: f.Name, index: i}
			if tag, ok := f.Tag.Lookup("batch"); ok {
				parts := strings.Split(tag, ",")
				if parts[0] != "" {
					bf.name = parts[0]
				}
				for _, p := range parts[1:] {
					if p == "optional" {
						bf.optional = true
					}
				}
			}
			h.fields = append(h.fields, bf)
		}
	default:
		return nil, bad("the batch parameter must be a struct of *graph.Node fields or map[string]*graph.Node")
	}
	return h, nil
}

// unexportedField refuses an unexported batch field: reflection cannot set it, so the hook
// would read it nil in every program.
func unexportedField(exp, hookName string, st reflect.Type, f reflect.StructField) error {
	key := f.Name // the key the field names untagged, which its exported name would change
	if tag := f.Tag.Get("batch"); tag != "" && !strings.HasPrefix(tag, ",") {
		key = tag
	} else {
		key += tag
	}
	exported := strings.ToUpper(f.Name[:1]) + f.Name[1:]
	return fmt.Errorf("hook %s.%s: batch struct %s's field %s is unexported, so the framework cannot set it and the hook would read it nil: export it, e.g. %s *graph.Node `batch:%q`",
		exp, hookName, st.Name(), f.Name, exported, key)
}

// declared returns the batch keys this hook reads given the batch's available keys.
func (h *hook) declared(available map[string]bool) []string {
	if h.whole {
		keys := make([]string, 0, len(available))
		for k := range available {
			keys = append(keys, k)
		}
		return keys
	}
	var keys []string
	for _, f := range h.fields {
		if available[f.name] || !f.optional {
			keys = append(keys, f.name)
		}
	}
	return keys
}

// checkAgainst reports a required declared field missing from a batch.
func (h *hook) checkAgainst(split string, available map[string]bool) error {
	if h == nil || h.whole { // nil: an optional hook the experiment does not define
		return nil
	}
	for _, f := range h.fields {
		if !f.optional && !available[f.name] {
			return fmt.Errorf("hook %s declares batch field %q, but the %s split's batches have only %v: add the field to the source, or mark it optional with `batch:\"%s,optional\"`",
				h.name, f.name, split, sortedKeys(available), f.name)
		}
	}
	return nil
}

// batchValue builds the hook's batch argument from the routed nodes.
func (h *hook) batchValue(nodes map[string]*graph.Node) reflect.Value {
	if h.whole {
		m := make(map[string]*graph.Node, len(nodes))
		for k, v := range nodes {
			m[k] = v
		}
		return reflect.ValueOf(m)
	}
	v := reflect.New(h.batchType).Elem()
	for _, f := range h.fields {
		if n, ok := nodes[f.name]; ok {
			v.Field(f.index).Set(reflect.ValueOf(n))
		}
	}
	return v
}

// call invokes the hook on the given (view) receiver.
func (h *hook) call(recv any, first reflect.Value, nodes map[string]*graph.Node) reflect.Value {
	return h.method.Func.Call([]reflect.Value{reflect.ValueOf(recv), first, h.batchValue(nodes)})[0]
}
