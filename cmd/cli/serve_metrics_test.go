package cli_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/internal/prereq"
)

// promFamily is one metric family as the Prometheus Python client's parser reads it.
type promFamily struct {
	Name    string
	Type    string
	Samples []struct {
		Name   string
		Labels map[string]string
		Value  any
	}
}

// promParse scrapes url and parses it with prometheus_client's own text parser
// (scripts/serve/prom_parse.py in $NITRO_SERVE_PYTHON), by family name.
func promParse(t *testing.T, py, url string) map[string]promFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	out, err := pythonRun(py, string(text), "../../scripts/serve/prom_parse.py")
	if err != nil {
		t.Fatalf("prometheus_client cannot parse %s: %v\n%s", url, err, text)
	}
	var fams []promFamily
	if err := json.Unmarshal(out, &fams); err != nil {
		t.Fatal(err)
	}
	byName := map[string]promFamily{}
	for _, f := range fams {
		byName[f.Name] = f
	}
	return byName
}

// sample is the value of the sample name{labels} in f, and whether there is one.
func (f promFamily) sample(name string, labels map[string]string) (float64, bool) {
next:
	for _, s := range f.Samples {
		if s.Name != name || len(s.Labels) != len(labels) {
			continue
		}
		for k, v := range labels {
			if s.Labels[k] != v {
				continue next
			}
		}
		v, ok := s.Value.(float64)
		return v, ok
	}
	return 0, false
}

// serve --metrics-addr: after answers of each kind (200 on /predict and /v2, a 400, a 503 for a
// body on trial past --max-reading that did not arrive, a 408 past --body-timeout, and health,
// server metadata, a model's metadata and readiness, counted by kind), the Prometheus Python client's parser reads
// counters (TYPE counter, *_total), the latency histogram per model, the in-flight gauge and
// the rejected-by-limit counter, each with the counts the requests make.
func TestServeMetricsPrometheus(t *testing.T) {
	needPlugin(t)
	py := prereq.ServePython.Interpreter(t, "NITRO_SERVE_PYTHON")
	line := regexp.MustCompile(`on http://(127\.0\.0\.1:[0-9]+)/predict\n`)
	addr, done, stdout, stderr := startServeAt(t, line, addBundle(t), "--metrics-addr", "127.0.0.1:0", "--max-reading", "1", "--body-timeout", "300ms")
	m := regexp.MustCompile(`metrics on (http://127\.0\.0\.1:[0-9]+/metrics)\n`).FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("serve did not print its metrics address: %q", stdout.String())
	}
	post := func(path, body string) int {
		resp, err := http.Post("http://"+addr+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	codes := []int{
		post("/predict", `{"inputs": {"x": [[1, 2]]}}`),
		post("/v2/models/add/infer", `{"inputs": [{"name": "x", "shape": [1, 2], "datatype": "FP32", "data": [1, 2]}]}`),
		post("/v2/models/add/infer", `{"inputs": [{"name": "x", "shape": [1, 2], "datatype": "INT32", "data": [1, 2]}]}`),
	}
	for _, path := range []string{"/v2/health/live", "/v2/health/ready", "/v2", "/v2/models/add", "/v2/models/add/ready"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	conn, br := startBody(t, addr, 100)   // holds the one read slot, then stalls past the body timeout
	trial, tbr := startBody(t, addr, 100) // reads on trial, sends nothing: 503 when its trial ends
	trialStatus, _ := tbr.ReadString('\n')
	trial.Close()
	status, _ := br.ReadString('\n')
	conn.Close()
	if want := []int{200, 200, 400}; fmt.Sprint(codes) != fmt.Sprint(want) || !strings.Contains(status, " 408 ") || !strings.Contains(trialStatus, " 503 ") {
		t.Fatalf("statuses %v, %q and %q; want %v, a 408 and a 503", codes, status, trialStatus, want)
	}
	// The 408's client can read its answer before the server has counted it: wait for it.
	var fams map[string]promFamily
	waitUntil(t, "the 408 to be counted", func() bool {
		fams = promParse(t, py, m[1])
		n, _ := fams["nitro_serve_request_duration_seconds"].sample("nitro_serve_request_duration_seconds_count", map[string]string{"model": "add"})
		return n == 7
	})
	sigterm(t)
	wantExit0(t, done, stderr)
	for name, typ := range map[string]string{"nitro_serve_requests": "counter", "nitro_serve_request_failures": "counter",
		"nitro_serve_request_duration_seconds": "histogram", "nitro_serve_requests_in_flight": "gauge", "nitro_serve_rejected": "counter"} {
		if f, ok := fams[name]; !ok || f.Type != typ {
			t.Errorf("family %s: %+v, want TYPE %s", name, f, typ)
		}
	}
	for _, c := range []struct {
		family, sample string
		labels         map[string]string
		want           float64
	}{
		{"nitro_serve_requests", "nitro_serve_requests_total", map[string]string{"model": "add", "protocol": "predict", "code": "200"}, 1},
		{"nitro_serve_requests", "nitro_serve_requests_total", map[string]string{"model": "add", "protocol": "predict", "code": "408"}, 1},
		{"nitro_serve_requests", "nitro_serve_requests_total", map[string]string{"model": "add", "protocol": "v2", "code": "200"}, 1},
		{"nitro_serve_requests", "nitro_serve_requests_total", map[string]string{"model": "add", "protocol": "v2", "code": "400"}, 1},
		{"nitro_serve_requests", "nitro_serve_requests_total", map[string]string{"model": "add", "protocol": "predict", "code": "503"}, 1},
		{"nitro_serve_request_failures", "nitro_serve_request_failures_total", map[string]string{"model": "add", "protocol": "v2"}, 1},
		{"nitro_serve_request_failures", "nitro_serve_request_failures_total", map[string]string{"model": "add", "protocol": "predict"}, 2},
		{"nitro_serve_requests", "nitro_serve_requests_total", map[string]string{"model": "", "protocol": "health", "code": "200"}, 2},
		{"nitro_serve_requests", "nitro_serve_requests_total", map[string]string{"model": "", "protocol": "server_metadata", "code": "200"}, 1},
		{"nitro_serve_requests", "nitro_serve_requests_total", map[string]string{"model": "add", "protocol": "model_metadata", "code": "200"}, 1},
		{"nitro_serve_requests", "nitro_serve_requests_total", map[string]string{"model": "add", "protocol": "model_ready", "code": "200"}, 1},
		{"nitro_serve_request_duration_seconds", "nitro_serve_request_duration_seconds_count", map[string]string{"model": "add"}, 7},
		{"nitro_serve_request_duration_seconds", "nitro_serve_request_duration_seconds_bucket", map[string]string{"model": "add", "le": "+Inf"}, 7},
		{"nitro_serve_request_duration_seconds", "nitro_serve_request_duration_seconds_count", map[string]string{"model": ""}, 3},
		{"nitro_serve_requests_in_flight", "nitro_serve_requests_in_flight", map[string]string{}, 0},
		{"nitro_serve_rejected", "nitro_serve_rejected_total", map[string]string{"limit": "max_reading"}, 1},
		{"nitro_serve_rejected", "nitro_serve_rejected_total", map[string]string{"limit": "body_timeout"}, 1},
		{"nitro_serve_rejected", "nitro_serve_rejected_total", map[string]string{"limit": "max_request_bytes"}, 0},
	} {
		if got, ok := fams[c.family].sample(c.sample, c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.sample, c.labels, got, ok, c.want)
		}
	}
}
