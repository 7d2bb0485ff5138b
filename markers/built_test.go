package markers_test

import (
	"runtime"
	"slices"
	"testing"

	"github.com/nitro-go/nitro/markers"
)

type withDefaults struct {
	Width int                     `nitro:"graphconst" default:"8"`
	Rate  markers.Device[float32] `default:"0.5"`
	Name  string                  `default:"x"`
	Off   bool                    `default:"false"`
	Plain int
}

func TestUnappliedDefaults(t *testing.T) {
	got, err := markers.UnappliedDefaults(&withDefaults{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"Width", "Rate", "Name"}; !slices.Equal(got, want) {
		t.Errorf("UnappliedDefaults(&{}) = %v, want %v (zero defaults and untagged fields are never unapplied)", got, want)
	}
	got, _ = markers.UnappliedDefaults(withDefaults{Width: 3, Name: "y", Rate: markers.NewDevice[float32](1)})
	if len(got) != 0 {
		t.Errorf("every defaulted field set: got %v", got)
	}
	e, _ := markers.New[withDefaults](map[string]any{"Width": 0})
	if got, _ := markers.UnappliedDefaults(e); !slices.Equal(got, []string{"Width"}) {
		t.Errorf("an override to zero reads as zero: got %v", got)
	}
	if _, err := markers.UnappliedDefaults((*withDefaults)(nil)); err == nil {
		t.Error("a nil pointer was accepted")
	}
}

func TestBuilt(t *testing.T) {
	e, err := markers.New[withDefaults](nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := markers.FromPreset[presetted]("small", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !markers.Built(e) || !markers.Built(p) {
		t.Errorf("Built(New) = %v, Built(FromPreset) = %v; want true", markers.Built(e), markers.Built(p))
	}
	if err := markers.Apply(e, map[string]any{"Width": 0}); err != nil || !markers.Built(e) {
		t.Errorf("Apply on a built experiment: err %v, still built %v", err, markers.Built(e))
	}
	c := *e
	for _, x := range []any{&c, *e, &withDefaults{}, nil, (*withDefaults)(nil), 3} {
		if markers.Built(x) {
			t.Errorf("Built(%T) = true", x)
		}
	}
	runtime.KeepAlive(e)
}

type presetted struct {
	Width int `default:"8"`
}

func (presetted) Presets() map[string]map[string]any {
	return map[string]map[string]any{"small": {"Width": 2}}
}
