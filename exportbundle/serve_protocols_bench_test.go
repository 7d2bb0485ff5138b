package exportbundle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkServeProtocols prints requests/s, p50 and p99 for 8 clients at batch 1 and at batch
// 32, side by side for /predict, /v2 infer with JSON data and /v2 infer with binary tensor data,
// on one server (MaxConcurrent 8) in one run: first from Go's net/http (the server's cost), then
// through the real clients ($NITRO_SERVE_PYTHON, make serve-venv: Triton's tritonclient.http for
// /v2, Python's http.client for /predict; scripts/serve/bench_client.py), whose own cost in
// Python is part of what a user of them sees. The goal: p99 at most 10 ms at batch 1.
//
//	NITRO_SERVE_PYTHON=$PWD/.nitro/serve-venv/bin/python go test -run '^$' -bench BenchmarkServeProtocols -benchtime 1x ./exportbundle/
func BenchmarkServeProtocols(b *testing.B) {
	_, addr := serveBench(b)
	base := "http://" + addr
	const clients, each = 8, 2 * time.Second
	py := os.Getenv("NITRO_SERVE_PYTHON")
	var table strings.Builder
	fmt.Fprintf(&table, "\n%-44s %8s %9s %9s %9s\n", "client, path (8 clients x batch)", "req/s", "p50", "p99", "requests")
	row := func(what string, batch int, perSec float64, p50, p99 time.Duration, reqs int) {
		fmt.Fprintf(&table, "%-44s %8.0f %9s %9s %9d\n", fmt.Sprintf("%s (%dx%d)", what, clients, batch), perSec,
			p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond), reqs)
	}
	for range b.N {
		for _, batch := range []int{1, 32} {
			predict, x := benchBody(batch, 1)
			v2json := v2BenchBody(x)
			head := fmt.Sprintf(`{"inputs":[{"name":"image","shape":[%d,%d],"datatype":"FP32","parameters":{"binary_data_size":%d}}],"outputs":[{"name":"probs","parameters":{"binary_data":true}}]}`, batch, benchIn, len(x.Data))
			v2bin := append([]byte(head), x.Data...)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
			post := func(path string, body []byte, header string) func() error {
				return func() error {
					req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(body))
					if header != "" {
						req.Header.Set(inferenceHeaderLength, header)
					}
					resp, err := client.Do(req)
					if err != nil {
						return err
					}
					defer resp.Body.Close()
					var sink bytes.Buffer
					sink.ReadFrom(resp.Body)
					if resp.StatusCode != http.StatusOK {
						return fmt.Errorf("%s: %d %s", path, resp.StatusCode, sink.String())
					}
					return nil
				}
			}
			infer := "/v2/models/" + benchName + "/infer"
			for _, p := range []struct {
				name string
				do   func() error
			}{{"Go, /predict JSON", post("/predict", predict, "")}, {"Go, /v2 JSON", post(infer, v2json, "")},
				{"Go, /v2 binary", post(infer, v2bin, strconv.Itoa(len(head)))}} {
				if err := p.do(); err != nil { // compile and warm up
					b.Fatal(err)
				}
				l := load(b, clients, each, p.do)
				row(p.name, batch, l.perSec, l.p50, l.p99, l.reqs)
			}
			client.CloseIdleConnections()
			if py == "" {
				fmt.Fprintf(&table, "  (the Python clients: NITRO_SERVE_PYTHON is not set; make bench sets it)\n")
				continue
			}
			for _, mode := range []struct{ name, arg string }{{"Python http.client, /predict JSON", "predict"},
				{"tritonclient, /v2 JSON", "v2json"}, {"tritonclient, /v2 binary", "v2binary"}} {
				out, err := exec.Command(py, "../scripts/serve/bench_client.py", base, benchName, mode.arg, strconv.Itoa(batch),
					strconv.Itoa(clients), strconv.FormatFloat(each.Seconds(), 'f', -1, 64)).Output()
				var res struct {
					Reqs   int
					PerSec float64 `json:"per_sec"`
					P50    float64 `json:"p50_ms"`
					P99    float64 `json:"p99_ms"`
					Error  string
				}
				if jerr := json.Unmarshal(out, &res); err != nil || jerr != nil || res.Error != "" {
					b.Fatalf("%s: %v %v %s %s", mode.name, err, jerr, res.Error, out)
				}
				ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
				row(mode.name, batch, res.PerSec, ms(res.P50), ms(res.P99), res.Reqs)
			}
		}
	}
	fmt.Print(table.String())
}

// v2BenchBody is x as an infer request with flat JSON data, asking for the probabilities.
func v2BenchBody(x Tensor) []byte {
	v, _ := Values[float32](x)
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"inputs":[{"name":"image","shape":[%d,%d],"datatype":"FP32","data":[`, x.Shape[0], x.Shape[1])
	for i, f := range v {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatFloat(float64(f), 'g', -1, 32))
	}
	b.WriteString(`]}],"outputs":[{"name":"probs"}]}`)
	return b.Bytes()
}
