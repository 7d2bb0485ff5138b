package promexport

import (
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nitro-go/nitro/internal/prereq"
)

// pyFamilies scrapes addr's /metrics and parses it with the Prometheus Python client's own text
// parser (scripts/serve/prom_parse.py, in $NITRO_SERVE_PYTHON): family name to its TYPE and its
// samples' values by sample name.
func pyFamilies(t *testing.T, addr string) map[string]struct {
	Type    string
	Samples map[string]float64
} {
	t.Helper()
	py := prereq.ServePython.Interpreter(t, "NITRO_SERVE_PYTHON")
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	cmd := exec.Command(py, "../scripts/serve/prom_parse.py")
	cmd.Stdin = strings.NewReader(string(text))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("prometheus_client's parser refuses /metrics: %v\n%s", err, text)
	}
	var fams []struct {
		Name, Type string
		Samples    []struct {
			Name  string
			Value any
		}
	}
	if err := json.Unmarshal(out, &fams); err != nil {
		t.Fatal(err)
	}
	got := map[string]struct {
		Type    string
		Samples map[string]float64
	}{}
	for _, f := range fams {
		e := got[f.Name]
		e.Type, e.Samples = f.Type, map[string]float64{}
		for _, s := range f.Samples {
			if v, ok := s.Value.(float64); ok {
				e.Samples[s.Name] += v
			}
		}
		got[f.Name] = e
	}
	return got
}

// The training exporter's counters are counters to Prometheus's own parser (TYPE counter,
// samples named *_total), its gauges gauges; the serve metrics' families are what their names say.
// Run alone: NITRO_SERVE_PYTHON=$PWD/.nitro/serve-venv/bin/python go test -run Python ./promexport/
func TestPythonParsesTypes(t *testing.T) {
	e, _ := start(t, Options{CacheStats: func() (uint64, uint64) { return 7, 2 }})
	_ = e.LogMetrics(train(4, 1, 0.5))
	fams := pyFamilies(t, e.Addr())
	for name, want := range map[string]string{"nitro_progress": "counter", "nitro_compile_cache_hits": "counter",
		"nitro_compile_cache_misses": "counter", "nitro_step": "gauge", "nitro_loss": "gauge"} {
		if f, ok := fams[name]; !ok || f.Type != want {
			t.Errorf("family %s: %+v, want TYPE %s", name, f, want)
		}
	}
	if v := fams["nitro_compile_cache_hits"].Samples["nitro_compile_cache_hits_total"]; v != 7 {
		t.Errorf("nitro_compile_cache_hits_total = %v, want 7", v)
	}

	m, err := NewServeMetrics(Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.RequestStarted()
	m.RequestDone("mnist", "v2", 200, "", 3*time.Millisecond)
	m.RequestStarted()
	m.RequestDone("mnist", "v2", 413, "max_request_bytes", time.Millisecond)
	m.RequestStarted()
	fams = pyFamilies(t, m.Addr())
	for name, c := range map[string]struct {
		typ    string
		sample string
		want   float64
	}{
		"nitro_serve_requests":                 {"counter", "nitro_serve_requests_total", 2},
		"nitro_serve_request_failures":         {"counter", "nitro_serve_request_failures_total", 1},
		"nitro_serve_request_duration_seconds": {"histogram", "nitro_serve_request_duration_seconds_count", 2},
		"nitro_serve_requests_in_flight":       {"gauge", "nitro_serve_requests_in_flight", 1},
		"nitro_serve_rejected":                 {"counter", "nitro_serve_rejected_total", 1},
	} {
		if f := fams[name]; f.Type != c.typ || f.Samples[c.sample] != c.want {
			t.Errorf("family %s: %+v, want TYPE %s and %s = %v", name, f, c.typ, c.sample, c.want)
		}
	}
}
