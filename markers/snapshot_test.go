package markers_test

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/markers"
)

// drifting has one field of each kind, a big Host slice (past the hash budget), a small one, a
// map and a pointer, so every comparison path is exercised.
type drifting struct {
	Width  int `nitro:"graphconst"`
	Temp   markers.Device[float32]
	Note   string
	Big    []float64
	Small  []int
	Tags   map[string]int
	Nested *struct{ A float32 }
	hidden int
}

func newDrifting() *drifting {
	return &drifting{Width: 4, Temp: markers.NewDevice[float32](1), Note: "a", Big: make([]float64, markers.HashBudget/8+1),
		Small: []int{1, 2}, Tags: map[string]int{"x": 1}, Nested: &struct{ A float32 }{0.1}}
}

func changedNames(t *testing.T, s *markers.Snapshot, e any) map[string]markers.Change {
	t.Helper()
	cs, err := s.Changed(e)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]markers.Change{}
	for _, c := range cs {
		out[c.Name] = c
	}
	return out
}

func TestSnapshotChangedByKindWithTexts(t *testing.T) {
	e := newDrifting()
	s := must(markers.TakeSnapshot(e))
	if cs := changedNames(t, s, e); len(cs) != 0 {
		t.Fatalf("nothing assigned, yet changed: %v", cs)
	}
	e.Width, e.Note, e.hidden = 8, "b", 3
	must(0, markers.SetDevice(e, "Temp", float32(0.5)))
	e.Small[1] = 3   // in place, under the budget: by content
	e.Tags["x"] = 2  // likewise for a map
	e.Nested.A = 0.2 // through a pointer
	e.Big[0] = 1     // in place, past the budget: by identity, not seen
	cs := changedNames(t, s, e)
	want := map[string][3]string{
		"Width": {"graphconst", "4", "8"}, "Temp": {"device", "1", "0.5"}, "Note": {"host", `"a"`, `"b"`},
		"Small": {"host", "[1 2]", "[1 3]"}, "Tags": {"host", "a map[string]int value", "a map[string]int value"},
		"Nested": {"host", "a *struct { A float32 } value", "a *struct { A float32 } value"},
	}
	if len(cs) != len(want) {
		t.Errorf("changed %v, want exactly %v (hidden is unexported, Big is compared by identity)", cs, want)
	}
	for name, w := range want {
		c, ok := cs[name]
		if !ok || c.Kind.String() != w[0] || c.Old != w[1] || c.New != w[2] || c.Fingerprint == "" {
			t.Errorf("%s: got %+v, want kind %s, %s -> %s", name, c, w[0], w[1], w[2])
		}
	}
	e.Big = append([]float64(nil), e.Big...) // replaced: a new identity
	if _, ok := changedNames(t, s, e)["Big"]; !ok {
		t.Error("a replaced big slice was not seen")
	}
}

func TestSnapshotUpdateAdoptsAndSetBackIsNoChange(t *testing.T) {
	e := newDrifting()
	s := must(markers.TakeSnapshot(e))
	e.Note, e.Width = "b", 5
	first := changedNames(t, s, e)["Note"].Fingerprint
	must(0, s.Update(e, func(f markers.Field) bool { return f.Kind == markers.KindHost }))
	cs := changedNames(t, s, e)
	if _, ok := cs["Note"]; ok || len(cs) != 1 || cs["Width"].Old != "4" {
		t.Errorf("after adopting the Host fields: %v, want only Width (4 -> 5)", cs)
	}
	e.Note = "c"
	if fp := changedNames(t, s, e)["Note"].Fingerprint; fp == first || fp == "" {
		t.Errorf("a new value kept the fingerprint %q", fp)
	}
	e.Note, e.Width = "b", 4
	if cs := changedNames(t, s, e); len(cs) != 0 {
		t.Errorf("set back, still changed: %v", cs)
	}
	if _, err := s.Changed(&mlp{}); err == nil || !strings.Contains(err.Error(), "compare an experiment with its own snapshot") {
		t.Errorf("another type: %v", err)
	}
}

func TestValueText(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
		ok   bool
	}{
		{float32(0.1), "0.1", true}, {0.1, "0.1", true}, {math.Inf(1), "+Inf", true}, {int8(-3), "-3", true},
		{uint(7), "7", true}, {true, "true", true}, {"s", "s", true}, {markers.KindDevice, "device", true},
		{[]int{1}, "", false}, {&struct{}{}, "", false},
	} {
		got, ok := markers.ValueText(reflect.ValueOf(c.v))
		if got != c.want || ok != c.ok {
			t.Errorf("ValueText(%#v) = %q, %v; want %q, %v", c.v, got, ok, c.want, c.ok)
		}
	}
}
