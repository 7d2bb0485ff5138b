package markers

import (
	"fmt"
	"reflect"

	"github.com/gomlx/gomlx/pkg/core/graph"
)

// Device marks a traced input. Outside a trace it holds a host value of T (a Go numeric or
// bool scalar, or a regular multi-dimensional slice of one: what tensors.FromAnyValue takes);
// in the compile view (BindDevice) it is bound to the graph node that carries that value.
// Because the value enters the program as an input, changing it never recompiles.
//
// The zero Device holds T's zero value. Build one with NewDevice, or let New fill it from a
// `default:"..."` tag or the experiment's Default method.
type Device[T any] struct {
	value T
	node  *graph.Node
	name  string // the field's name, set by this package, so panics can name it
}

// NewDevice returns a Device holding the host value v.
func NewDevice[T any](v T) Device[T] { return Device[T]{value: v} }

// Value returns the host value. It panics on a bound Device (one in a compile view): a host read
// inside traced code would bake today's value into the program as a constant, and a later
// SetDevice would then silently not reach it. Use Node there.
func (d Device[T]) Value() T {
	if d.node != nil {
		panic(fmt.Sprintf("markers: reading the host value of Device field %s inside traced code: "+
			"use Node(), the traced input; Value() would bake the current value into the program "+
			"and a later SetDevice would not reach it", d.label()))
	}
	return d.value
}

// Node returns the graph node bound to this field. It is for traced hooks, which receive a
// compile view; it panics on an unbound Device (the real experiment, outside any trace).
func (d Device[T]) Node() *graph.Node {
	if d.node == nil {
		panic(fmt.Sprintf("markers: Device field %s has no graph node: Node() is for traced hooks, "+
			"which receive the compile view (BindDevice/CompileView); outside a trace use Value()", d.label()))
	}
	return d.node
}

// IsBound reports whether the Device is bound to a graph node (it is part of a compile view).
func (d Device[T]) IsBound() bool { return d.node != nil }

// String prints the host value, or the bound node's shape inside a trace.
func (d Device[T]) String() string {
	if d.node != nil {
		return fmt.Sprintf("Device(node %s)", d.node.Shape())
	}
	return fmt.Sprint(d.value)
}

func (d Device[T]) label() string {
	if d.name != "" {
		return d.name
	}
	return fmt.Sprintf("(unnamed %s)", reflect.TypeOf(d))
}

// deviceSlot is how the reflective code reaches a Device[T] without knowing T.
type deviceSlot interface {
	selfType() reflect.Type
	elemType() reflect.Type
	hostValue() any
	boundNode() *graph.Node
	withValue(v reflect.Value) reflect.Value // v must have type T
	withName(name string) reflect.Value
	withNode(name string, n *graph.Node) reflect.Value
}

var _ deviceSlot = Device[float32]{}

func (d Device[T]) selfType() reflect.Type { return reflect.TypeOf(d) }
func (d Device[T]) elemType() reflect.Type { return reflect.TypeFor[T]() }
func (d Device[T]) hostValue() any         { return d.value }
func (d Device[T]) boundNode() *graph.Node { return d.node }

func (d Device[T]) withValue(v reflect.Value) reflect.Value {
	d.value = v.Interface().(T)
	d.node = nil
	return reflect.ValueOf(d)
}

func (d Device[T]) withName(name string) reflect.Value {
	d.name = name
	return reflect.ValueOf(d)
}

func (d Device[T]) withNode(name string, n *graph.Node) reflect.Value {
	d.name, d.node = name, n
	return reflect.ValueOf(d)
}

var deviceSlotType = reflect.TypeFor[deviceSlot]()

// asDeviceSlot returns the slot when t is exactly a Device[T] (not a type embedding one).
func asDeviceSlot(t reflect.Type) (deviceSlot, bool) {
	if !t.Implements(deviceSlotType) {
		return nil, false
	}
	s, ok := reflect.Zero(t).Interface().(deviceSlot)
	if !ok || s.selfType() != t {
		return nil, false
	}
	return s, true
}

// Bindable is what every markers.Device[T] is, whatever T: a field is a Device field exactly when
// its value implements it.
type Bindable interface {
	IsBound() bool
}

var _ Bindable = Device[float32]{}
