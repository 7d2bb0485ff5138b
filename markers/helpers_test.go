package markers_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gopjrt/dtypes"

	"github.com/nitro-go/nitro/markers"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// mlp is a small example experiment: one field of each kind, plus driver knobs.
type mlp struct {
	Width     int                     `nitro:"graphconst" default:"128" doc:"hidden width: changes the graph"`
	Smoothing markers.Device[float32] `default:"0.05" doc:"label smoothing: a traced input"`
	MaxEpochs int                     `default:"20" doc:"driver knob"`
	RunDir    string
	Timeout   time.Duration `default:"1m30s"`
}

func (mlp) Presets() map[string]map[string]any {
	return map[string]map[string]any{
		"reference_v1": {"Width": 128, "Smoothing": 0.0},
		"current":      {"Width": 256, "Smoothing": float32(0.1), "RunDir": "runs/current"},
	}
}

// scaled is the experiment the host-independence tests trace, with several Host fields.
type scaled struct {
	Width     int                     `nitro:"graphconst" default:"3"`
	Bias      markers.Device[float32] `default:"0.5"`
	Scale     float32                 `default:"2"`
	MaxEpochs int                     `default:"10"`
	Labels    []float32
	cache     []int
}

var simpleGo = sync.OnceValues(func() (backends.Backend, error) { return simplego.New("") })

func goBackend(t testing.TB) backends.Backend {
	t.Helper()
	b, err := simpleGo()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// builder returns a build function for CheckHostIndependent: a fresh graph, one parameter per
// Device field, the bound view, then forward traced on it.
func builder(t testing.TB, forward func(e *scaled, x *graph.Node) *graph.Node) func(any) (string, error) {
	return func(src any) (string, error) {
		g := markers.NewTraceGraph(goBackend(t), "forward")
		nodes := map[string]*graph.Node{}
		dvs, err := markers.DeviceValues(src)
		if err != nil {
			return "", err
		}
		for _, dv := range dvs {
			s, err := markers.DeviceShapeOf(src, dv.Name)
			if err != nil {
				return "", err
			}
			nodes[dv.Name] = graph.Parameter(g, dv.Name, s)
		}
		view, err := markers.BindDevice(src, nodes)
		if err != nil {
			return "", err
		}
		e := view.(*scaled)
		x := graph.Parameter(g, "x", shapes.Make(dtypes.Float32, 2, e.Width))
		forward(e, x)
		return markers.Fingerprint(g)
	}
}

// must returns v, or panics with err: a setup step that cannot fail in a passing test.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// wantErr fails unless err is non-nil and contains every fragment.
func wantErr(t *testing.T, err error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error containing %q, got nil", fragments)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error lacks %q:\n%v", f, err)
		}
	}
}

// wantPanic fails unless f panics with a message containing every fragment.
func wantPanic(t *testing.T, f func(), fragments ...string) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatalf("want a panic containing %q", fragments)
		}
		msg, _ := r.(string)
		for _, f := range fragments {
			if !strings.Contains(msg, f) {
				t.Errorf("panic lacks %q: %v", f, r)
			}
		}
	}()
	f()
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update once to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}
