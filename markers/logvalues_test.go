package markers_test

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/nitro-go/nitro/markers"
)

// badStringer's String panics: LogValues must leave the field out, not fail or panic.
type badStringer int

func (badStringer) String() string { panic("no text") }

// logged has a field of each kind LogValues decides on.
type logged struct {
	Width   int                       `nitro:"graphconst"`
	Sizes   []int                     `nitro:"graphconst"`
	Act     string                    `nitro:"graphconst"`
	Temp    markers.Device[float32]   // by its host value, a float32 as it prints
	Shift   markers.Device[[]float32] // a Device non-scalar: left out
	Epochs  int
	Rate    float32
	Loss    float64
	Ceiling float64
	Every   time.Duration // a Stringer: its text
	Bad     badStringer
	Table   []float64 // a Host non-scalar (it could be a dataset): left out
	Tags    map[string]int
	hidden  int
}

func TestLogValues(t *testing.T) {
	e := &logged{Width: 4, Sizes: []int{8, 2}, Act: "relu", Temp: markers.NewDevice[float32](0.1),
		Shift: markers.NewDevice([]float32{1}), Epochs: 7, Rate: 0.3, Loss: math.NaN(), Ceiling: math.Inf(1),
		Every: 1500 * time.Millisecond, Bad: 1, Table: []float64{1, 2}, Tags: map[string]int{"a": 1}, hidden: 3}
	want := map[string]any{
		"Width":   int64(4),
		"Sizes":   "[8 2]", // GraphConst non-scalar: as GraphConstValues prints it
		"Act":     "relu",  // a GraphConst scalar is its plain value, not the quoted print
		"Temp":    0.1,     // float32(0.1) as it prints, not 0.10000000149011612
		"Epochs":  int64(7),
		"Rate":    0.3,
		"Loss":    "NaN",
		"Ceiling": "+Inf",
		"Every":   "1.5s",
	}
	for _, in := range []any{e, *e} {
		got, err := markers.LogValues(in)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("LogValues(%T) =\n  %#v\nwant\n  %#v", in, got, want)
		}
	}
	if _, err := markers.LogValues((*logged)(nil)); err == nil {
		t.Error("LogValues of a nil pointer: no error")
	}
}
