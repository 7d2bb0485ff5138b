package markers_test

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/nitro-go/nitro/markers"
)

func TestNewDefaultsAndOverrides(t *testing.T) {
	e := must(markers.New[mlp](nil))
	if e.Width != 128 || e.Smoothing.Value() != 0.05 || e.MaxEpochs != 20 || e.RunDir != "" || e.Timeout != 90*time.Second {
		t.Errorf("defaults: %+v", e)
	}
	// Lossless numeric conversions are allowed, float64 to float32 rounds as a literal would.
	e = must(markers.New[mlp](map[string]any{"Width": int64(256), "Smoothing": 0.1, "MaxEpochs": 30.0, "RunDir": "r"}))
	if e.Width != 256 || e.Smoothing.Value() != float32(0.1) || e.MaxEpochs != 30 || e.RunDir != "r" {
		t.Errorf("overrides: %+v", e)
	}
	// A Device field also takes a Device value.
	e = must(markers.New[mlp](map[string]any{"Smoothing": markers.NewDevice[float32](0.2)}))
	if e.Smoothing.Value() != 0.2 {
		t.Errorf("Device override: %v", e.Smoothing)
	}
}

func TestUnknownKeyListsValidFields(t *testing.T) {
	_, err := markers.New[mlp](map[string]any{"width": 3, "Depth": 2})
	wantErr(t, err, "unknown fields Depth, width for mlp", "did you mean Width for width?",
		"valid fields: Width, Smoothing, MaxEpochs, RunDir, Timeout")
	// An unexported field is not a key either.
	_, err = markers.New[scaled](map[string]any{"cache": []int{1}})
	wantErr(t, err, "unknown field cache")
}

func TestWrongTypeNamesFieldAndTypes(t *testing.T) {
	cases := []struct {
		overrides map[string]any
		want      []string
	}{
		{map[string]any{"Width": "wide"}, []string{"field Width of mlp", "value wide of type string", "as int"}},
		{map[string]any{"Width": 2.5}, []string{"field Width", "2.5", "float64", "int", "not an integer"}},
		{map[string]any{"Timeout": 5}, []string{"field Timeout", "type int", "time.Duration"}},
		{map[string]any{"Smoothing": "x"}, []string{"field Smoothing", "string", "markers.Device[float32]"}},
		{map[string]any{"Smoothing": markers.NewDevice(0.5)}, []string{"field Smoothing", "markers.Device[float64]", "float32"}},
		{map[string]any{"Width": nil}, []string{"field Width", "nil cannot be used as int"}},
		{map[string]any{"Width": uint64(1 << 63)}, []string{"field Width", "out of range"}},
	}
	for _, c := range cases {
		_, err := markers.New[mlp](c.overrides)
		wantErr(t, err, c.want...)
	}
}

func TestApplyIsAllOrNothing(t *testing.T) {
	e := must(markers.New[mlp](nil))
	before := *e
	err := markers.Apply(e, map[string]any{"Width": 64, "MaxEpochs": "many"})
	wantErr(t, err, "field MaxEpochs")
	if !reflect.DeepEqual(*e, before) {
		t.Errorf("a failed Apply changed the experiment: %+v", e)
	}
	must(0, markers.Apply(e, map[string]any{"Width": 64}))
	if e.Width != 64 {
		t.Errorf("Width %d", e.Width)
	}
	wantErr(t, markers.Apply(*e, nil), "non-nil pointer")
}

func TestPresets(t *testing.T) {
	p := markers.Presets[mlp]()
	if len(p) != 2 || p["current"]["Width"] != 256 {
		t.Fatalf("presets: %v", p)
	}
	p["current"]["Width"] = 1 // the caller's copy
	if markers.Presets[mlp]()["current"]["Width"] != 256 {
		t.Error("editing the returned table changed the next one")
	}
	if got := markers.Presets[scaled](); got == nil || len(got) != 0 {
		t.Errorf("a type without presets: %v", got)
	}
}

func TestFromPreset(t *testing.T) {
	e := must(markers.FromPreset[mlp]("current", nil))
	// Partial: what the preset does not name keeps its default.
	if e.Width != 256 || e.Smoothing.Value() != 0.1 || e.RunDir != "runs/current" || e.MaxEpochs != 20 {
		t.Errorf("current: %+v", e)
	}
	// Overrides win over the preset.
	e = must(markers.FromPreset[mlp]("current", map[string]any{"Width": 512, "MaxEpochs": 40}))
	if e.Width != 512 || e.MaxEpochs != 40 || e.Smoothing.Value() != 0.1 {
		t.Errorf("overrides: %+v", e)
	}
	// The name is not recorded: the result is what New gives for the same values.
	same := must(markers.New[mlp](map[string]any{"Width": 512, "MaxEpochs": 40, "Smoothing": float32(0.1), "RunDir": "runs/current"}))
	if !reflect.DeepEqual(e, same) {
		t.Errorf("FromPreset recorded something New does not:\n%+v\n%+v", e, same)
	}
	// Switching between presets that differ only in Host fields keeps the hash; a GraphConst change moves it.
	ref := must(markers.FromPreset[mlp]("reference_v1", nil))
	if must(markers.GraphConstHash(ref)) == must(markers.GraphConstHash(e)) {
		t.Error("presets with different widths hash equal")
	}
}

func TestFromPresetErrors(t *testing.T) {
	_, err := markers.FromPreset[mlp]("newest", nil)
	wantErr(t, err, `no preset "newest" for mlp`, "presets: current, reference_v1")
	_, err = markers.FromPreset[scaled]("any", nil)
	wantErr(t, err, "scaled declares no presets", "Presets() map[string]map[string]any")
	_, err = markers.FromPreset[mlp]("current", map[string]any{"Widht": 3})
	wantErr(t, err, "unknown field Widht", "valid fields")
	_, err = markers.FromPreset[typoPreset]("wide", nil)
	wantErr(t, err, `preset "wide" of typoPreset`, "unknown field widht", "did you mean Width for widht?")
	err = markers.ValidatePresets[typoPreset]()
	wantErr(t, err, `preset "wide"`, `preset "wrongtype"`, "value 1.5 of type float64")
	if err := markers.ValidatePresets[mlp](); err != nil {
		t.Errorf("mlp's presets are valid: %v", err)
	}
}

type typoPreset struct {
	Width int `nitro:"graphconst"`
}

func (*typoPreset) Presets() map[string]map[string]any { // pointer receiver works too
	return map[string]map[string]any{
		"ok":        {"Width": 3},
		"wide":      {"widht": 512},
		"wrongtype": {"Width": 1.5},
	}
}

type cliExp struct {
	Width   int                         `nitro:"graphconst"`
	Rate    markers.Device[float32]     `default:"0.1"`
	Steps   markers.Device[int64]       `default:"1"`
	Weights markers.Device[[][]float32] `default:"[[1,2],[3,4]]"`
	Layers  []int                       `nitro:"graphconst" default:"8,4"`
	Verbose bool
	Name    string
	Wait    time.Duration
	Ratio   float64
	Count   uint8
}

func TestApplyText(t *testing.T) {
	e := must(markers.New[cliExp](nil))
	if !slices.Equal(e.Layers, []int{8, 4}) || e.Weights.Value()[1][0] != 3 {
		t.Fatalf("text defaults: %+v", e)
	}
	err := markers.ApplyText(e, []string{
		"Width=0x10", "Rate=0.25", "Steps=7", "Weights=[[5,6],[7,8]]", "Layers=1, 2,3",
		"Verbose=true", "Name=run=a b", "Wait=2m30s", "Ratio=1e-3", "Count=255", "Width=32",
	})
	if err != nil {
		t.Fatal(err)
	}
	if e.Width != 32 || e.Rate.Value() != 0.25 || e.Steps.Value() != 7 || e.Weights.Value()[1][1] != 8 ||
		!slices.Equal(e.Layers, []int{1, 2, 3}) || !e.Verbose || e.Name != "run=a b" || e.Wait != 150*time.Second ||
		e.Ratio != 1e-3 || e.Count != 255 {
		t.Errorf("got %+v", e)
	}
}

func TestApplyTextErrorsNameFieldTextAndType(t *testing.T) {
	cases := []struct {
		assignment string
		want       []string
	}{
		{"Width=abc", []string{"field Width of cliExp", `"abc"`, "as int", "want an integer"}},
		{"Rate=fast", []string{"field Rate", `"fast"`, "float32"}},
		{"Wait=5", []string{"field Wait", `"5"`, "time.Duration", "1m30s"}},
		{"Verbose=yes please", []string{"field Verbose", `"yes please"`, "bool"}},
		{"Count=300", []string{"field Count", `"300"`, "uint8", "out of range"}},
		{"Layers=1,x", []string{"field Layers", `"1,x"`, "[]int", `element 1 "x"`}},
		{"Weights=[[1,2],", []string{"field Weights", "[][]float32", "JSON"}},
		{"Width", []string{`"Width" is not an assignment`, "field=value", "Width, Rate"}},
		{"depth=3", []string{"unknown field depth", "valid fields: Width"}},
	}
	for _, c := range cases {
		e := must(markers.New[cliExp](nil))
		before := e.Width
		err := markers.ApplyText(e, []string{"Width=99", c.assignment})
		wantErr(t, err, c.want...)
		if e.Width != before {
			t.Errorf("%s: a failed ApplyText wrote Width", c.assignment)
		}
	}
	// Several problems are reported together.
	err := markers.ApplyText(must(markers.New[cliExp](nil)), []string{"Width=a", "Rate=b"})
	wantErr(t, err, "field Width", "field Rate")
	if n := len(unwrapAll(err)); n != 2 {
		t.Errorf("want 2 joined errors, got %d", n)
	}
}

// unwrapAll returns the errors joined under err's single-error wrappers.
func unwrapAll(err error) []error {
	for err != nil {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			return j.Unwrap()
		}
		if errors.Unwrap(err) == nil {
			return []error{err}
		}
		err = errors.Unwrap(err)
	}
	return nil
}
