package markers_test

import (
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nitro-go/nitro/markers"
)

func TestTraitsKindsInDeclarationOrder(t *testing.T) {
	tr := must(markers.TraitsOf(mlp{}))
	if tr.Name != "mlp" || tr.QualifiedName != "github.com/nitro-go/nitro/markers_test.mlp" {
		t.Errorf("names: %q %q", tr.Name, tr.QualifiedName)
	}
	if got := tr.DeviceFields(); !slices.Equal(got, []string{"Smoothing"}) {
		t.Errorf("device fields %v", got)
	}
	if got := tr.GraphConstFields(); !slices.Equal(got, []string{"Width"}) {
		t.Errorf("graphconst fields %v", got)
	}
	if got := tr.HostFields(); !slices.Equal(got, []string{"MaxEpochs", "RunDir", "Timeout"}) {
		t.Errorf("host fields %v", got)
	}
	if got := tr.FieldNames(); !slices.Equal(got, []string{"Width", "Smoothing", "MaxEpochs", "RunDir", "Timeout"}) {
		t.Errorf("field names %v", got)
	}
}

func TestConfigMetadata(t *testing.T) {
	md := must(markers.ConfigMetadata(&mlp{}))
	want := []struct {
		name       string
		typ        reflect.Type
		kind       markers.Kind
		def        any
		hasDefault bool
		doc        string
	}{
		{"Width", reflect.TypeFor[int](), markers.KindGraphConst, 128, true, "hidden width: changes the graph"},
		{"Smoothing", reflect.TypeFor[float32](), markers.KindDevice, float32(0.05), true, "label smoothing: a traced input"},
		{"MaxEpochs", reflect.TypeFor[int](), markers.KindHost, 20, true, "driver knob"},
		{"RunDir", reflect.TypeFor[string](), markers.KindHost, "", false, ""},
		{"Timeout", reflect.TypeFor[time.Duration](), markers.KindHost, 90 * time.Second, true, ""},
	}
	if len(md) != len(want) {
		t.Fatalf("got %d fields, want %d", len(md), len(want))
	}
	for i, w := range want {
		f := md[i]
		if f.Name != w.name || f.Type != w.typ || f.Kind != w.kind || f.Default != w.def || f.HasDefault != w.hasDefault || f.Doc != w.doc {
			t.Errorf("field %d: got %+v, want %+v", i, f, w)
		}
		if f.Index != i {
			t.Errorf("field %s: index %d, want %d", f.Name, f.Index, i)
		}
	}
	if s := markers.KindDevice.String() + markers.KindHost.String() + markers.KindGraphConst.String(); s != "devicehostgraphconst" {
		t.Errorf("kind names: %s", s)
	}
}

func TestUnexportedFieldsAreHostButNotConfig(t *testing.T) {
	tr := must(markers.TraitsOf(scaled{}))
	if got := tr.HostFields(); !slices.Equal(got, []string{"Scale", "MaxEpochs", "Labels", "cache"}) {
		t.Errorf("host fields %v", got)
	}
	md := must(markers.ConfigMetadata(scaled{}))
	for _, f := range md {
		if f.Name == "cache" {
			t.Error("ConfigMetadata lists the unexported field cache")
		}
	}
	if len(md) != 5 {
		t.Errorf("want 5 config fields, got %d", len(md))
	}
}

func TestTraitsComputedOncePerType(t *testing.T) {
	a := must(markers.TraitsOf(mlp{}))
	b := must(markers.TraitsOf(&mlp{}))
	c := must(markers.TraitsOf((*mlp)(nil)))
	d := must(markers.TraitsOf(reflect.TypeFor[mlp]()))
	if a != b || b != c || c != d {
		t.Error("TraitsOf returned different traits for one type")
	}
	type fresh struct {
		A int `nitro:"graphconst"`
	}
	var wg sync.WaitGroup
	got := make([]*markers.Traits, 16)
	for i := range got {
		wg.Go(func() { got[i], _ = markers.TraitsOf(fresh{}) })
	}
	wg.Wait()
	for _, g := range got {
		if g == nil || g != got[0] {
			t.Fatal("concurrent TraitsOf calls disagree")
		}
	}
}

type (
	badMarker struct {
		X int `nitro:"const"`
	}
	deviceString struct {
		S markers.Device[string]
	}
	deviceNamed struct {
		D markers.Device[time.Duration]
	}
	deviceTaggedConst struct {
		D markers.Device[float32] `nitro:"graphconst"`
	}
	deviceTagOnPlain struct {
		D float32 `nitro:"device"`
	}
	unexportedConst struct {
		width int `nitro:"graphconst"`
	}
	nestedDevice struct {
		Opt struct{ LR markers.Device[float32] }
	}
	embeddedDevice struct {
		W wrapped
	}
	wrapped    struct{ markers.Device[float32] }
	badDefault struct {
		N int `default:"many"`
	}
	seedConst struct {
		Seed int64 `nitro:"graphconst"`
	}
	badDefaultMethod struct{ N int }
	// Tags below the experiment's own fields would be ignored: refused, with the path.
	archConfig struct {
		Act   string `nitro:"graphconst"`
		Width int    `default:"64"`
	}
	embeddedGraphConst struct {
		archConfig
	}
	nestedDefault struct {
		Heads []struct {
			Width int `default:"8"`
		}
	}
	bakedConfig struct { // the fix the error names: the whole struct baked, no tags inside
		Arch struct{ Act string } `nitro:"graphconst"`
	}
	bothDefaults struct {
		N int `default:"3"`
	}
)

func (badDefaultMethod) Default() *badDefaultMethod { return nil }
func (bothDefaults) Default() bothDefaults          { return bothDefaults{N: 4} }

func TestMalformedDeclarationsAreRefused(t *testing.T) {
	cases := []struct {
		e    any
		want []string
	}{
		{badMarker{}, []string{"field X", `nitro:"const"`, `nitro:"graphconst"`}},
		{deviceString{}, []string{"Device field S", "markers.Device[string]", "numeric"}},
		{deviceNamed{}, []string{"Device field D", "time.Duration", "not a named one"}},
		{deviceTaggedConst{}, []string{"field D", "one kind", "float32"}},
		{deviceTagOnPlain{}, []string{"field D", "markers.Device[float32]"}},
		{unexportedConst{}, []string{"field width", "unexported", "export it (Width)"}},
		{nestedDevice{}, []string{"field Opt", "Opt.LR", "top-level"}},
		{embeddedDevice{}, []string{"field W", "top-level"}},
		{badDefault{}, []string{"field N", `default:"many"`, "int"}},
		{embeddedGraphConst{}, []string{"field archConfig.Act", `nitro:"graphconst"`, "inside field archConfig", "would be ignored", "move the field up"}},
		{nestedDefault{}, []string{"field Heads.Width", `default:"8"`, "inside field Heads"}},
		{seedConst{}, []string{"field Seed", "GraphConst", "seed sweep", "Host", "markers.Device[int64]"}},
		{badDefaultMethod{}, []string{"Default", "func (badDefaultMethod) Default() badDefaultMethod"}},
		{bothDefaults{}, []string{"field N", "default", "Default()", "one place"}},
		{42, []string{"struct", "int"}},
	}
	for _, c := range cases {
		_, err := markers.TraitsOf(c.e)
		t.Run(reflect.TypeOf(c.e).String(), func(t *testing.T) { wantErr(t, err, c.want...) })
	}
	if tr, err := markers.TraitsOf(bakedConfig{}); err != nil || tr.Fields[0].Kind != markers.KindGraphConst {
		t.Errorf("a struct field tagged graphconst with no tags inside: %v; want it accepted as GraphConst", err)
	}
	// Every verb reports the declaration error, not just TraitsOf.
	_, err := markers.New[seedConst](nil)
	wantErr(t, err, "field Seed", "seed sweep")
	_, err = markers.GraphConstHash(seedConst{})
	wantErr(t, err, "field Seed")
}

type defaultsByMethod struct {
	Layers []int                   `nitro:"graphconst" doc:"widths"`
	LR     markers.Device[float64] `doc:"learning rate"`
	Name   string
}

func (defaultsByMethod) Default() defaultsByMethod {
	return defaultsByMethod{Layers: []int{64, 32}, LR: markers.NewDevice(0.1), Name: "base"}
}

func TestDefaultsFromMethod(t *testing.T) {
	e := must(markers.New[defaultsByMethod](map[string]any{"Name": "tuned"}))
	if !slices.Equal(e.Layers, []int{64, 32}) || e.LR.Value() != 0.1 || e.Name != "tuned" {
		t.Errorf("got %+v", e)
	}
	md := must(markers.ConfigMetadata(defaultsByMethod{}))
	if !md[0].HasDefault || !slices.Equal(md[0].Default.([]int), []int{64, 32}) || md[1].Default != 0.1 || md[1].Doc != "learning rate" {
		t.Errorf("metadata %+v", md)
	}
	// Each New gets its own defaults: editing one experiment's slice leaves the next alone.
	e.Layers[0] = 1
	if f := must(markers.New[defaultsByMethod](nil)); f.Layers[0] != 64 {
		t.Error("defaults are shared between experiments")
	}
}
