package core

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Outputs is what Forward returns: named graph nodes, each with the batch on its leading axis.
// The framework hands it to Loss, Metrics and TrainMetrics exactly as Forward returned it.
type Outputs map[string]*graph.Node

// Metric is one evaluation metric's numerator and denominator for one batch. The framework sums
// both over the split and divides at the end; a nil Count means "sum, do not divide".
type Metric struct {
	Sum, Count *graph.Node
}

// The hooks whose batch parameter type varies per experiment cannot be Go interfaces (a method
// cannot take a type parameter), so they are found and checked by reflection once, at setup:
//
//	Forward(ctx *context.Context, in B) Outputs                 required
//	Loss(out Outputs, in B) *graph.Node                           required
//	Metrics(out Outputs, in B) map[string]Metric                 optional (default: val_loss)
//	TrainMetrics(out Outputs, in B) map[string]*graph.Node       optional
//
// B is a struct whose *graph.Node fields name batch fields by tag (`batch:"img"`, or
// `batch:"img,optional"`; an untagged field uses its Go name), or Batch-like map[string]*graph.Node
// meaning "the whole batch, nothing checked". Each hook receives only the fields it declares.

// Hook signatures as printed in errors.
var hookSignatures = map[string]string{
	"Forward":      "func (e *E) Forward(ctx *context.Context, in B) core.Outputs",
	"Loss":         "func (e *E) Loss(out core.Outputs, in B) *graph.Node",
	"Metrics":      "func (e *E) Metrics(out core.Outputs, in B) map[string]core.Metric",
	"TrainMetrics": "func (e *E) TrainMetrics(out core.Outputs, in B) map[string]*graph.Node",
}

var (
	typeNode     = reflect.TypeOf((*graph.Node)(nil))
	typeCtx      = reflect.TypeOf((*context.Context)(nil))
	typeOutputs  = reflect.TypeOf(Outputs(nil))
	typeMetrics  = reflect.TypeOf(map[string]Metric(nil))
	typeScalars  = reflect.TypeOf(map[string]*graph.Node(nil))
	typeNodeMap  = reflect.TypeOf(map[string]*graph.Node(nil))
	typeBatchMap = typeNodeMap
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
	batchType reflect.Type // struct type, or typeBatchMap
	whole     bool         // receives the whole batch
	fields    []batchField
}

// findHook resolves an optional or required hook on the experiment's pointer type.
func findHook(et reflect.Type, name string, required bool) (*hook, error) {
	m, ok := et.MethodByName(name)
	if !ok {
		if required {
			return nil, fmt.Errorf("experiment %s has no %s hook: define %s", et.Elem().Name(), name, hookSignatures[name])
		}
		return nil, nil
	}
	t := m.Type // includes the receiver
	bad := func(why string) error {
		return fmt.Errorf("hook %s.%s has signature %s: %s; want %s", et.Elem().Name(), name, t, why, hookSignatures[name])
	}
	var firstIn reflect.Type
	var out reflect.Type
	switch name {
	case "Forward":
		firstIn, out = typeCtx, typeOutputs
	case "Loss":
		firstIn, out = typeOutputs, typeNode
	case "Metrics":
		firstIn, out = typeOutputs, typeMetrics
	case "TrainMetrics":
		firstIn, out = typeOutputs, typeScalars
	}
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
	case h.batchType == typeBatchMap:
		h.whole = true
	case h.batchType.Kind() == reflect.Struct:
		for i := 0; i < h.batchType.NumField(); i++ {
			f := h.batchType.Field(i)
			if !f.IsExported() {
				continue
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
	if h.whole {
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
