package markers_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"unsafe"

	"github.com/nitro-go/nitro/markers"
)

func TestHashFollowsGraphConstOnly(t *testing.T) {
	a := must(markers.New[mlp](nil))
	b := must(markers.New[mlp](nil))
	ha := must(markers.GraphConstHash(a))
	if len(ha) != 64 || ha != must(markers.GraphConstHash(b)) || ha != must(markers.GraphConstHash(*a)) {
		t.Fatalf("identical experiments hash differently: %s", ha)
	}
	must(0, markers.SetDevice(b, "Smoothing", float32(0.3)))
	b.MaxEpochs, b.RunDir = 99, "elsewhere"
	if must(markers.GraphConstHash(b)) != ha {
		t.Error("changing a Device or Host field moved the hash")
	}
	b.Width = 129
	if must(markers.GraphConstHash(b)) == ha {
		t.Error("changing a GraphConst field did not move the hash")
	}
}

// twin has the same fields and values as mlp: the type's name seeds the hash.
type twin struct {
	Width     int                     `nitro:"graphconst" default:"128"`
	Smoothing markers.Device[float32] `default:"0.05"`
	MaxEpochs int                     `default:"20"`
	RunDir    string
	Timeout   string
}

func TestHashSeededByTypeName(t *testing.T) {
	if must(markers.GraphConstHash(must(markers.New[mlp](nil)))) == must(markers.GraphConstHash(must(markers.New[twin](nil)))) {
		t.Error("two experiment types with equal GraphConst values hash equal")
	}
}

type inner struct {
	Name   string
	Scales []float64
	Any    any
}

// everyKind carries one GraphConst field of every hashable shape of value.
type everyKind struct {
	B     bool           `nitro:"graphconst"`
	I     int            `nitro:"graphconst"`
	I8    int8           `nitro:"graphconst"`
	U     uint32         `nitro:"graphconst"`
	F32   float32        `nitro:"graphconst"`
	F64   float64        `nitro:"graphconst"`
	C     complex128     `nitro:"graphconst"`
	S     string         `nitro:"graphconst"`
	Ints  []int          `nitro:"graphconst"`
	Grid  [2][2]int8     `nitro:"graphconst"`
	Dict  map[string]int `nitro:"graphconst"`
	Inner inner          `nitro:"graphconst"`
	Iface any            `nitro:"graphconst"`
	Nil   any            `nitro:"graphconst"`
	Host  *int
}

func newEveryKind() everyKind {
	dict := map[string]int{}
	for i := range 32 {
		dict[fmt.Sprintf("k%02d", i)] = i * i
	}
	return everyKind{
		B: true, I: -7, I8: 3, U: 1 << 31, F32: 0.1, F64: math.NaN(), C: complex(1, -2), S: "relu",
		Ints: []int{64, 32}, Grid: [2][2]int8{{1, 2}, {3, 4}}, Dict: dict,
		Inner: inner{Name: "enc", Scales: []float64{0.5, 2}, Any: []string{"a"}}, Iface: 3.5,
	}
}

// The hash is a persisted, cross-process value: pin it. A change to the encoding must be a
// deliberate edit of hashVersion and of this golden file.
func TestHashStableAcrossProcesses(t *testing.T) {
	e := newEveryKind()
	h := must(markers.GraphConstHash(e))
	golden(t, "graphconst_hash.golden", h+"\n")
	// Map iteration order and NaN payloads do not move it; fresh maps are built each round.
	for range 20 {
		f := newEveryKind()
		f.F64 = math.Float64frombits(0x7ff8000000000abc)
		x := 5
		f.Host = &x // a Host pointer is neither hashed nor refused
		if got := must(markers.GraphConstHash(f)); got != h {
			t.Fatalf("hash moved: %s != %s", got, h)
		}
	}
	e.Dict["k00"] = 1
	if must(markers.GraphConstHash(e)) == h {
		t.Error("changing a map value did not move the hash")
	}
	e = newEveryKind()
	e.Inner.Scales[1] = 3
	if must(markers.GraphConstHash(e)) == h {
		t.Error("changing a nested slice element did not move the hash")
	}
	e = newEveryKind()
	e.Iface = float32(3.5) // same number, different dynamic type
	if must(markers.GraphConstHash(e)) == h {
		t.Error("changing an interface's dynamic type did not move the hash")
	}
}

func TestGraphConstValues(t *testing.T) {
	got := must(markers.GraphConstValues(newEveryKind()))
	var lines []string
	for _, nv := range got {
		lines = append(lines, nv[0]+" = "+nv[1])
	}
	golden(t, "graphconst_values.golden", strings.Join(lines, "\n")+"\n")
}

type (
	withPointer struct {
		P *int `nitro:"graphconst"`
	}
	withFunc struct {
		F func() `nitro:"graphconst"`
	}
	withChan struct {
		C chan int `nitro:"graphconst"`
	}
	withUnsafe struct {
		U unsafe.Pointer `nitro:"graphconst"`
	}
	cfgWithPointer struct {
		Width int
		Next  *cfgWithPointer
	}
	withStruct struct {
		Cfg cfgWithPointer `nitro:"graphconst"`
	}
	withPointerSlice struct {
		Ps []*int `nitro:"graphconst"`
	}
	withPointerMap struct {
		M map[string]*int `nitro:"graphconst"`
	}
	withAny struct {
		A any `nitro:"graphconst"`
	}
)

func TestUnhashableGraphConstRefused(t *testing.T) {
	fix := []string{"cannot be hashed by content", "Store the value itself", "unmarked (Host)"}
	cases := []struct {
		name string
		err  func() error
		want []string
	}{
		{"pointer", func() error { _, err := markers.New[withPointer](nil); return err }, []string{"field P", "P is a pointer (*int)", "by address"}},
		{"func", func() error { _, err := markers.New[withFunc](nil); return err }, []string{"field F", "F is a func", "no content"}},
		{"chan", func() error { _, err := markers.New[withChan](nil); return err }, []string{"field C", "C is a channel"}},
		{"unsafe", func() error { _, err := markers.New[withUnsafe](nil); return err }, []string{"field U", "raw address"}},
		{"struct", func() error { _, err := markers.New[withStruct](nil); return err }, []string{"field Cfg", "Cfg.Next is a pointer"}},
		{"empty slice", func() error { _, err := markers.New[withPointerSlice](nil); return err }, []string{"field Ps", "Ps[] is a pointer"}},
		{"map", func() error { _, err := markers.New[withPointerMap](nil); return err }, []string{"field M", "M[value] is a pointer"}},
		{"interface", func() error {
			_, err := markers.New[withAny](map[string]any{"A": &cfgWithPointer{}})
			return err
		}, []string{"field A", "A.(*markers_test.cfgWithPointer) is a pointer"}},
		{"preset", func() error { _, err := markers.FromPreset[withAnyPresets]("bad", nil); return err }, []string{"field A", "a pointer"}},
		{"assert", func() error { return markers.AssertGraphConstHashable(withAny{A: []any{1, make(chan int)}}) }, []string{"field A", "A.([]interface {})[1].(chan int) is a channel"}},
		{"hash", func() error { _, err := markers.GraphConstHash(withPointer{}); return err }, []string{"field P", "pointer"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantErr(t, c.err(), append(c.want, fix...)...) })
	}
	// Plain values in an interface, a map or a nested struct pass.
	if err := markers.AssertGraphConstHashable(withAny{A: map[string][]int{"a": {1}}}); err != nil {
		t.Errorf("a map of slices was refused: %v", err)
	}
	if err := markers.AssertGraphConstHashable(newEveryKind()); err != nil {
		t.Errorf("plain values were refused: %v", err)
	}
}

type withAnyPresets struct {
	A any `nitro:"graphconst"`
}

func (withAnyPresets) Presets() map[string]map[string]any {
	return map[string]map[string]any{"bad": {"A": new(int)}}
}
