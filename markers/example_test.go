package markers_test

import (
	"errors"
	"fmt"
	"sort"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gopjrt/dtypes"

	"github.com/nitro-go/nitro/markers"
)

// Classifier is an experiment: one field of each kind.
type Classifier struct {
	Classes     int                     `nitro:"graphconst" default:"10" doc:"number of classes: changes the graph"`
	Temperature markers.Device[float32] `default:"1" doc:"softmax temperature: a traced input"`
	MaxEpochs   int                     `default:"20" doc:"driver knob"`
}

func (Classifier) Presets() map[string]map[string]any {
	return map[string]map[string]any{
		"binary": {"Classes": 2},
		"sharp":  {"Temperature": 0.5, "MaxEpochs": 40},
	}
}

// logits is Classifier's traced code: it reads the GraphConst and the Device field.
func logits(e *Classifier, x *graph.Node) *graph.Node {
	return graph.Div(graph.Slice(x, graph.AxisRange(), graph.AxisRange(0, e.Classes)), e.Temperature.Node())
}

// buildWith traces forward on a fresh graph from src (a *Classifier) and fingerprints it.
func buildWith(forward func(*Classifier, *graph.Node) *graph.Node) func(src any) (string, error) {
	return func(src any) (string, error) {
		backend, err := simplego.New("")
		if err != nil {
			return "", err
		}
		g := markers.NewTraceGraph(backend, "forward")
		shape, err := markers.DeviceShapeOf(src, "Temperature")
		if err != nil {
			return "", err
		}
		view, err := markers.BindDevice(src, map[string]*graph.Node{"Temperature": graph.Parameter(g, "Temperature", shape)})
		if err != nil {
			return "", err
		}
		forward(view.(*Classifier), graph.Parameter(g, "x", shapes.Make(dtypes.Float32, 4, 16)))
		return markers.Fingerprint(g)
	}
}

func ExampleNewDevice() {
	d := markers.NewDevice[float32](0.5)
	fmt.Println(d.Value(), d.IsBound())
	// Output: 0.5 false
}

func ExampleTraitsOf() {
	tr, err := markers.TraitsOf(Classifier{})
	if err != nil {
		panic(err)
	}
	fmt.Println("device:", tr.DeviceFields())
	fmt.Println("graphconst:", tr.GraphConstFields())
	fmt.Println("host:", tr.HostFields())
	// Output:
	// device: [Temperature]
	// graphconst: [Classes]
	// host: [MaxEpochs]
}

func ExampleKind_String() {
	fmt.Println(markers.KindHost, markers.KindDevice, markers.KindGraphConst)
	// Output: host device graphconst
}

func ExampleConfigMetadata() {
	fields, err := markers.ConfigMetadata(Classifier{})
	if err != nil {
		panic(err)
	}
	for _, f := range fields {
		fmt.Printf("%s %s %s default=%v doc=%q\n", f.Name, f.Kind, f.Type, f.Default, f.Doc)
	}
	// Output:
	// Classes graphconst int default=10 doc="number of classes: changes the graph"
	// Temperature device float32 default=1 doc="softmax temperature: a traced input"
	// MaxEpochs host int default=20 doc="driver knob"
}

func ExampleNew() {
	e, err := markers.New[Classifier](map[string]any{"Classes": 3})
	if err != nil {
		panic(err)
	}
	fmt.Println(e.Classes, e.Temperature.Value(), e.MaxEpochs)
	_, err = markers.New[Classifier](map[string]any{"Clases": 3})
	fmt.Println(err)
	// Output:
	// 3 1 20
	// markers: unknown field Clases for Classifier (did you mean Classes for Clases?); valid fields: Classes, Temperature, MaxEpochs
}

func ExamplePresets() {
	names := []string{}
	for name := range markers.Presets[Classifier]() {
		names = append(names, name)
	}
	sort.Strings(names)
	fmt.Println(names)
	// Output: [binary sharp]
}

func ExampleFromPreset() {
	e, err := markers.FromPreset[Classifier]("sharp", map[string]any{"MaxEpochs": 60})
	if err != nil {
		panic(err)
	}
	// The preset sets Temperature; the override wins for MaxEpochs; Classes keeps its default.
	fmt.Println(e.Classes, e.Temperature.Value(), e.MaxEpochs)
	// Output: 10 0.5 60
}

func ExampleValidatePresets() {
	fmt.Println(markers.ValidatePresets[Classifier]())
	// Output: <nil>
}

func ExampleApply() {
	e, _ := markers.New[Classifier](nil)
	err := markers.Apply(e, map[string]any{"Classes": "ten"})
	fmt.Println(err)
	fmt.Println(markers.Apply(e, map[string]any{"Classes": 12, "Temperature": 2.0}), e.Classes, e.Temperature.Value())
	// Output:
	// markers: field Classes of Classifier: value ten of type string cannot be used as int; pass a value of type int
	// <nil> 12 2
}

func ExampleApplyText() {
	e, _ := markers.New[Classifier](nil)
	err := markers.ApplyText(e, []string{"Classes=5", "Temperature=0.25"})
	fmt.Println(err, e.Classes, e.Temperature.Value())
	fmt.Println(markers.ApplyText(e, []string{"MaxEpochs=lots"}))
	// Output:
	// <nil> 5 0.25
	// markers: field MaxEpochs of Classifier: cannot parse "lots" as int: want an integer
}

func ExampleGraphConstHash() {
	a, _ := markers.New[Classifier](nil)
	b, _ := markers.New[Classifier](map[string]any{"MaxEpochs": 99, "Temperature": 3.0})
	c, _ := markers.New[Classifier](map[string]any{"Classes": 11})
	ha, _ := markers.GraphConstHash(a)
	hb, _ := markers.GraphConstHash(b)
	hc, _ := markers.GraphConstHash(c)
	fmt.Println("Host and Device changes share the key:", ha == hb)
	fmt.Println("a GraphConst change moves it:", ha != hc)
	// Output:
	// Host and Device changes share the key: true
	// a GraphConst change moves it: true
}

func ExampleGraphConstValues() {
	e, _ := markers.New[Classifier](nil)
	values, _ := markers.GraphConstValues(e)
	fmt.Println(values)
	// Output: [[Classes 10]]
}

type pointerConfig struct {
	Layers *[]int `nitro:"graphconst"`
}

func ExampleAssertGraphConstHashable() {
	err := markers.AssertGraphConstHashable(pointerConfig{})
	fmt.Println(err)
	// Output: markers: GraphConst field Layers of pointerConfig (type *[]int) cannot be hashed by content: Layers is a pointer (*[]int), which hashes by address and aliases state shared by every copy; the compile key would follow identity, not value, so identical experiments would recompile and an in-place change would reuse a stale program. Store the value itself, flatten it into GraphConst fields of plain values, or leave the field unmarked (Host)
}

func ExampleDeviceValues() {
	e, _ := markers.New[Classifier](nil)
	values, _ := markers.DeviceValues(e)
	fmt.Printf("%+v\n", values)
	// Output: [{Name:Temperature Value:1}]
}

func ExampleDeviceValueOf() {
	e, _ := markers.New[Classifier](nil)
	v, _ := markers.DeviceValueOf(e, "Temperature")
	fmt.Printf("%v %T\n", v, v)
	_, err := markers.DeviceValueOf(e, "Classes")
	fmt.Println(err)
	// Output:
	// 1 float32
	// markers: DeviceValueOf: field Classes of Classifier is GraphConst, not Device: it is already a host value; read the field directly
}

func ExampleDeviceShapeOf() {
	e, _ := markers.New[Classifier](nil)
	s, _ := markers.DeviceShapeOf(e, "Temperature")
	fmt.Println(s)
	// Output: (Float32)
}

func ExampleSetDevice() {
	e, _ := markers.New[Classifier](nil)
	fmt.Println(markers.SetDevice(e, "Temperature", float32(0.7)), e.Temperature.Value())
	fmt.Println(markers.SetDevice(e, "Temperature", 0.7))
	fmt.Println(markers.SetDevice(e, "MaxEpochs", 3))
	// Output:
	// <nil> 0.7
	// markers: SetDevice: field Temperature of Classifier holds float32, got float64 (0.7): a different type is a different program; pass a float32
	// markers: SetDevice: field MaxEpochs of Classifier is Host: it reaches no trace, so writing it here would change nothing compiled; set it on the experiment (Apply) and build a new run
}

func ExampleZeroHost() {
	e, _ := markers.New[Classifier](nil)
	z, _ := markers.ZeroHost(e)
	v := z.(*Classifier)
	fmt.Println(v.Classes, v.Temperature.Value(), v.MaxEpochs)
	// Output: 10 1 0
}

func ExampleBindDevice() {
	backend, _ := simplego.New("")
	g := graph.NewGraph(backend, "example")
	e, _ := markers.New[Classifier](nil)
	temperature := graph.Parameter(g, "Temperature", shapes.Make(dtypes.Float32))
	view, err := markers.BindDevice(e, map[string]*graph.Node{"Temperature": temperature})
	if err != nil {
		panic(err)
	}
	fmt.Println(view.(*Classifier).Temperature.Node() == temperature, e.Temperature.IsBound())
	// Output: true false
}

func ExampleCompileView() {
	backend, _ := simplego.New("")
	g := graph.NewGraph(backend, "example")
	e, _ := markers.New[Classifier](nil)
	view, _ := markers.CompileView(e, map[string]*graph.Node{
		"Temperature": graph.Parameter(g, "Temperature", shapes.Make(dtypes.Float32)),
	})
	v := view.(*Classifier)
	fmt.Println(v.Classes, v.MaxEpochs, v.Temperature.IsBound())
	// Output: 10 0 true
}

func ExampleCheckHostIndependent() {
	e, _ := markers.New[Classifier](nil)
	fmt.Println(markers.CheckHostIndependent(e, buildWith(logits)))

	leaky := func(e *Classifier, x *graph.Node) *graph.Node {
		return graph.MulScalar(logits(e, x), float32(e.MaxEpochs)) // reads a Host field
	}
	err := markers.CheckHostIndependent(e, buildWith(leaky))
	var hre *markers.HostReadError
	fmt.Println(errors.As(err, &hre), hre.Fields)
	fmt.Println(err)
	// Output:
	// <nil>
	// true [MaxEpochs]
	// markers: reading Host field MaxEpochs of Classifier from traced code: the program built from the compile view, where Host fields are zero, differs from the one built from the experiment. Mark it GraphConst (`nitro:"graphconst"`: bakes into the program, recompiles per distinct value) or Device (markers.Device[int]: a traced input, no recompile), or keep it host-side (read it only outside traced code)
}

func ExampleFingerprint() {
	backend, _ := simplego.New("")
	g := markers.NewTraceGraph(backend, "example")
	x := graph.Parameter(g, "x", shapes.Make(dtypes.Float32, 2))
	graph.MulScalar(x, 3)
	fp, err := markers.Fingerprint(g)
	fmt.Print(fp, err)
	// Output:
	// #0 Parameter(name="x", shape=(Float32)[2]) -> [(Float32)[2]]
	// #1 Constant((Float32): 3) -> [(Float32)]
	// #2 Mul(lhs=[#0], rhs=[#1]) -> [(Float32)[2]]
	// const 0 sha256:58ab091a70ce8b2acc16700b6295b91af72036bb58723493b54be6aae59ab261
	// <nil>
}

// A struct literal skips the defaults; New applies them and remembers what it built, so a zero
// given as an override reads as chosen, not forgotten.
func ExampleUnappliedDefaults() {
	fields, _ := markers.UnappliedDefaults(&Classifier{Classes: 3})
	fmt.Println(fields)
	e, _ := markers.New[Classifier](map[string]any{"MaxEpochs": 0})
	fields, _ = markers.UnappliedDefaults(e)
	fmt.Println(fields, markers.Built(e), markers.Built(&Classifier{}))
	// Output:
	// [Temperature MaxEpochs]
	// [MaxEpochs] true false
}

// Built tells the experiments New and FromPreset returned from struct literals and copies.
func ExampleBuilt() {
	e, _ := markers.New[Classifier](nil)
	c := *e
	fmt.Println(markers.Built(e), markers.Built(&c), markers.Built(&Classifier{}))
	// Output:
	// true false false
}
