package exportbundle

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nitro-go/nitro/tensorfile"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata")

// tinyImage is one of tinyBundle's img inputs (U8 [5 5]) as flat JSON data.
var tinyImage = "[" + strings.TrimSuffix(strings.Repeat("1,", 25), ",") + "]"

// v2Tiny answers one request to the protocol's handler over two tiny models ("tiny" and
// "tiny2"), neither of which ever runs a program: every request here is refused before Run.
func v2Tiny(t *testing.T, method, path string, body io.Reader, header map[string]string) (int, string) {
	t.Helper()
	second := tinyBundle()
	second.Name = "tiny2"
	h, err := ModelsHandler([]*Runner{{b: tinyBundle()}, {b: second}})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(method, path, body)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// Every malformed infer request is a 4xx whose {"error"} names the field at fault: the model and
// version in the path, the datatype, the shape against the data, duplicate names, the binary
// header and sizes, the outputs asked for, and the parameters nitro does not implement.
func TestV2RefusesMalformedRequests(t *testing.T) {
	in := func(fields string) string { return `{"inputs": [{` + fields + `}]}` }
	ok := `"name": "img", "shape": [1, 5, 5], "datatype": "UINT8"`
	for _, c := range []struct {
		name, path, body string
		header           map[string]string
		status           int
		says             string
	}{
		{"unknown model", "/v2/models/nope/infer", in(ok + `, "data": ` + tinyImage), nil, 404, `unknown model "nope": this server serves tiny, tiny2`},
		{"unknown version", "/v2/models/tiny/versions/2/infer", in(ok + `, "data": ` + tinyImage), nil, 404, `model "tiny" has no version "2"`},
		{"unknown endpoint", "/v2/models/tiny/explain", "", nil, 404, `no such endpoint "explain"`},
		{"wrong datatype", "/v2/models/tiny/infer", in(`"name": "img", "shape": [1, 5, 5], "datatype": "FP32", "data": ` + tinyImage), nil, 400, `inputs[0].datatype: "FP32", input "img" takes UINT8`},
		{"a datatype that is no datatype", "/v2/models/tiny/infer", in(`"name": "img", "datatype": "BYTES", "shape": [1, 5, 5], "data": ` + tinyImage), nil, 400, `inputs[0].datatype: "BYTES", input "img" takes UINT8`},
		{"shape and data disagree", "/v2/models/tiny/infer", in(ok + `, "data": [1, 2, 3]`), nil, 400, `inputs[0].data: 3 elements, shape [1 5 5] holds 25`},
		{"data past the shape", "/v2/models/tiny/infer", in(ok + `, "data": [` + strings.Repeat("1,", 25) + `1]`), nil, 400, `inputs[0].data: more than 25 elements`},
		{"nested unlike the shape", "/v2/models/tiny/infer", in(ok + `, "data": [[1,1,1,1,1],[1,1,1,1,1],[1,1,1,1,1],[1,1,1,1,1],[1,1,1,1,1]]`), nil, 400, `inputs[0].data: nested as [5 5], the shape is [1 5 5]`},
		{"ragged nesting", "/v2/models/tiny/infer", in(ok + `, "data": [[[1,1,1,1,1],[1,1,1,1,1],[1,1,1,1,1],[1,1,1,1,1],[1,1,1,1]]]`), nil, 400, `inputs[0].data: ragged: an array of 4 along axis 2, the first holds 5`},
		{"elements at two depths", "/v2/models/tiny/infer", in(ok + `, "data": [1, [2]]`), nil, 400, `inputs[0].data: ragged: an element at depth 2, the first at depth 1`},
		{"a shape of another rank", "/v2/models/tiny/infer", in(`"name": "img", "shape": [1, 25], "datatype": "UINT8", "data": ` + tinyImage), nil, 400, `inputs[0].shape: [1 25], input "img" takes [-1 5 5]`},
		{"a batch size with no program", "/v2/models/tiny/infer", in(`"name": "img", "shape": [2, 5, 5], "datatype": "UINT8", "data": ` + tinyImage), nil, 400, `inputs[0].shape: batch size 2: the model has programs for batch sizes [1 8]`},
		{"an element out of range", "/v2/models/tiny/infer", in(ok + `, "data": [256` + strings.Repeat(",1", 24) + `]`), nil, 400, `inputs[0].data: element 0: 256 is not a 8-bit unsigned integer`},
		{"duplicate input names", "/v2/models/tiny/infer", `{"inputs": [{` + ok + `, "data": ` + tinyImage + `}, {` + ok + `, "data": ` + tinyImage + `}]}`, nil, 400, `inputs[1]`},
		{"unknown input", "/v2/models/tiny/infer", in(`"name": "image", "shape": [1, 5, 5], "datatype": "UINT8", "data": ` + tinyImage), nil, 400, `inputs[0].name: "image" is not an input of this model (it takes img)`},
		{"data before the name", "/v2/models/tiny/infer", in(`"data": ` + tinyImage + `, ` + ok), nil, 400, `inputs[0].data: comes before "name"`},
		{"no shape", "/v2/models/tiny/infer", in(`"name": "img", "datatype": "UINT8", "data": ` + tinyImage), nil, 400, `inputs[0].shape: missing`},
		{"no data", "/v2/models/tiny/infer", in(ok), nil, 400, `inputs[0].data: missing (and no parameters.binary_data_size)`},
		{"no inputs", "/v2/models/tiny/infer", `{"id": "x"}`, nil, 400, `inputs: missing`},
		{"an empty inputs", "/v2/models/tiny/infer", `{"inputs": []}`, nil, 400, `inputs: input "img" is missing`},
		{"a duplicate key in an input", "/v2/models/tiny/infer", in(ok + `, "name": "img", "data": ` + tinyImage), nil, 400, `inputs[0]: duplicate key "name"`},
		{"an unknown top-level field", "/v2/models/tiny/infer", `{"input": []}`, nil, 400, `unknown field "input"`},
		{"another model_name in the body", "/v2/models/tiny/infer", `{"model_name": "tiny2", "inputs": [{` + ok + `, "data": ` + tinyImage + `}]}`, nil, 400, `model_name: "tiny2", but the request is for "tiny"`},
		{"another model_version in the body", "/v2/models/tiny/infer", `{"model_version": "2", "inputs": [{` + ok + `, "data": ` + tinyImage + `}]}`, nil, 400, `model_version: "2", but the request is for "1"`},
		{"an unknown output", "/v2/models/tiny/infer", `{"inputs": [{` + ok + `, "data": ` + tinyImage + `}], "outputs": [{"name": "probs"}]}`, nil, 400, `outputs[0].name: "probs" is not an output of this model (it has logits, scale)`},
		{"an output twice", "/v2/models/tiny/infer", `{"inputs": [{` + ok + `, "data": ` + tinyImage + `}], "outputs": [{"name": "scale"}, {"name": "scale"}]}`, nil, 400, `outputs[1].name: output "scale" is asked for twice`},
		{"classification", "/v2/models/tiny/infer", `{"inputs": [{` + ok + `, "data": ` + tinyImage + `}], "outputs": [{"name": "logits", "parameters": {"classification": 2}}]}`, nil, 400, `outputs[0].parameters.classification: not supported`},
		{"shared memory", "/v2/models/tiny/infer", in(ok + `, "parameters": {"shared_memory_region": "r"}`), nil, 400, `inputs[0].parameters.shared_memory_region: not supported`},
		{"not JSON", "/v2/models/tiny/infer", `inputs`, nil, 400, `malformed body: the body is not a JSON object`},
		{"both data and binary", "/v2/models/tiny/infer", in(ok + `, "parameters": {"binary_data_size": 25}, "data": ` + tinyImage), nil, 400, `inputs[0]: both "data" and parameters.binary_data_size`},
		{"binary without the header", "/v2/models/tiny/infer", in(ok + `, "parameters": {"binary_data_size": 25}`), nil, 400, `inputs[0].parameters.binary_data_size: binary data needs the Inference-Header-Content-Length header`},
		{"wrong method", "/v2/models/tiny/ready", "", nil, 405, "use GET"},
		{"a compressed body", "/v2/models/tiny/infer", in(ok + `, "data": ` + tinyImage), map[string]string{"Content-Encoding": "gzip"}, 415, `Content-Encoding "gzip"`},
	} {
		method := http.MethodPost
		if c.status != 405 && !strings.HasSuffix(c.path, "/infer") {
			method = http.MethodGet
		}
		status, body := v2Tiny(t, method, c.path, strings.NewReader(c.body), c.header)
		var m map[string]string
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Errorf("%s: the answer %q is not {\"error\": ...}: %v", c.name, body, err)
			continue
		}
		if status != c.status || !strings.Contains(m["error"], c.says) {
			t.Errorf("%s: %d %q; want %d saying %q", c.name, status, m["error"], c.status, c.says)
		}
	}
}

// binaryBody is the binary tensor data extension's body: the JSON, then raw bytes.
func binaryBody(json string, raw []byte) (io.Reader, map[string]string) {
	return bytes.NewReader(append([]byte(json), raw...)), map[string]string{inferenceHeaderLength: strconv.Itoa(len(json))}
}

// A binary request whose header or sizes lie is a 400 naming Inference-Header-Content-Length or
// binary_data_size, never a panic or a read past what a valid request of that shape holds.
func TestV2RefusesLyingBinaryHeader(t *testing.T) {
	head := `{"inputs": [{"name": "img", "shape": [1, 5, 5], "datatype": "UINT8", "parameters": {"binary_data_size": 25}}]}`
	raw := bytes.Repeat([]byte{1}, 25)
	header := func(n string) map[string]string { return map[string]string{inferenceHeaderLength: n} }
	full := append([]byte(head), raw...)
	huge := strings.Replace(head, "25", "1099511627776", 1)
	for _, c := range []struct {
		name   string
		body   []byte
		header map[string]string
		says   string
	}{
		{"a header past the body", full, header(strconv.Itoa(len(full) + 1)), `Inference-Header-Content-Length: ` + strconv.Itoa(len(full)+1) + ` bytes, more than the body's Content-Length`},
		{"a header short of the JSON", full, header(strconv.Itoa(len(head) - 3)), `Inference-Header-Content-Length: the JSON header, its first ` + strconv.Itoa(len(head)-3) + ` bytes, is malformed`},
		{"a header into the binary data", full, header(strconv.Itoa(len(head) + 5)), `Inference-Header-Content-Length: the JSON header, its first ` + strconv.Itoa(len(head)+5) + ` bytes, is malformed: data after the JSON object`},
		{"a header that is no number", full, header("25x"), `Inference-Header-Content-Length: "25x" is not a length`},
		{"a negative header", full, header("-1"), `Inference-Header-Content-Length: "-1" is not a length`},
		{"a huge header", full, header("99999999999999999999"), `Inference-Header-Content-Length: "99999999999999999999" is not a length`},
		{"a size past the shape", append([]byte(strings.Replace(head, "25", "26", 1)), append(raw, 1)...), header(strconv.Itoa(len(head))), `inputs[0].parameters.binary_data_size: 26 bytes, shape [1 5 5] of UINT8 is 25`},
		{"a huge size", []byte(huge), header(strconv.Itoa(len(huge))), `inputs[0].parameters.binary_data_size: 1099511627776 bytes, shape [1 5 5] of UINT8 is 25`},
		{"a body short of the size", append([]byte(head), raw[:20]...), header(strconv.Itoa(len(head))), `inputs[0].parameters.binary_data_size: 25 bytes, but the body ends after 20 of them`},
		{"bytes past the sizes", append(full, 9, 9), header(strconv.Itoa(len(head))), `Inference-Header-Content-Length: the body holds bytes past the JSON header and the JSON's binary_data_size values`},
	} {
		status, body := v2Tiny(t, http.MethodPost, "/v2/models/tiny/infer", bytes.NewReader(c.body), c.header)
		var m map[string]string
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Errorf("%s: the answer %q is not {\"error\": ...}: %v", c.name, body, err)
			continue
		}
		if status != http.StatusBadRequest || !strings.Contains(m["error"], c.says) {
			t.Errorf("%s: %d %q; want 400 saying %q", c.name, status, m["error"], c.says)
		}
	}
}

// A BOOL sent as binary data is bytes 0 and 1 only; a 2 is refused, naming the element.
func TestV2RefusesBinaryBoolOutOfRange(t *testing.T) {
	b := tinyBundle()
	b.Inputs = []TensorSpec{{Name: "mask", DType: tensorfile.BOOL, Shape: []int{-1, 3}, BatchAxis: 0}}
	h, err := ModelsHandler([]*Runner{{b: b}})
	if err != nil {
		t.Fatal(err)
	}
	head := `{"inputs": [{"name": "mask", "shape": [1, 3], "datatype": "BOOL", "parameters": {"binary_data_size": 3}}]}`
	for _, c := range []struct {
		raw  []byte
		says string
	}{
		{[]byte{1, 0, 2}, "inputs[0].parameters.binary_data_size: BOOL element 2 is the byte 2: a BOOL is 0 or 1"},
		{[]byte{1, 0, 1}, "internal error"}, // accepted: the placeholder runner cannot run it
	} {
		body, hdr := binaryBody(head, c.raw)
		req := httptest.NewRequest(http.MethodPost, "/v2/models/tiny/infer", body)
		req.Header.Set(inferenceHeaderLength, hdr[inferenceHeaderLength])
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if !strings.Contains(rec.Body.String(), c.says) {
			t.Errorf("bytes %v: %d %s; want %q", c.raw, rec.Code, rec.Body.String(), c.says)
		}
	}
}

// An endless data array, before or after the shape, is refused after a small fixed part of the
// body: the v2 path keeps /predict's bound (the largest batch) whatever the body's size.
func TestV2RefusesHostileBodiesEarly(t *testing.T) {
	for _, c := range []struct{ name, prefix, repeat, says string }{
		{"endless data after the shape", `{"inputs": [{"name": "img", "shape": [1, 5, 5], "datatype": "UINT8", "data": [`, "1,", "inputs[0].data: more than 25 elements"},
		{"endless data before the shape", `{"inputs": [{"name": "img", "data": [`, "1,", "inputs[0].data: more than 200 elements"},
		{"endless nesting", `{"inputs": [{"name": "img", "data": `, "[", "inputs[0].data: nested over 32 deep"},
		{"an endless parameter", `{"parameters": {"x": `, "[", "nested over 64 deep"},
		{"an endless id", `{"id": "`, "a", "id of over 4096 bytes"},
	} {
		var read atomic.Int64
		body := io.MultiReader(strings.NewReader(c.prefix), countingReader{io.LimitReader(&repeat{s: c.repeat}, hostileBytes), &read})
		status, answer := v2Tiny(t, http.MethodPost, "/v2/models/tiny/infer", body, nil)
		if status != http.StatusBadRequest || !strings.Contains(answer, c.says) {
			t.Errorf("%s: %d %s; want 400 saying %q", c.name, status, answer, c.says)
		}
		if n := read.Load(); n > readBound {
			t.Errorf("%s: read %d bytes of a %d-byte body before refusing it; want at most %d", c.name, n, hostileBytes, readBound)
		}
	}
}

// The model metadata's JSON is a wire format: its golden file is what a client reads (FP32 for
// F32, -1 at the batch axis, the one version "1"). Server metadata, health and readiness answer
// as the protocol says.
func TestV2Metadata(t *testing.T) {
	status, body := v2Tiny(t, http.MethodGet, "/v2/models/tiny", nil, nil)
	if status != http.StatusOK {
		t.Fatalf("metadata: %d %s", status, body)
	}
	golden := filepath.Join("testdata", "v2_model_metadata.json")
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, []byte(body), "", "  "); err != nil {
		t.Fatal(err)
	}
	if *updateGolden {
		if err := os.WriteFile(golden, pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -run TestV2Metadata -update writes it)", err)
	}
	if pretty.String() != string(want) {
		t.Errorf("GET /v2/models/tiny:\n%s\nwant (%s):\n%s", pretty.String(), golden, want)
	}
	if s2, b2 := v2Tiny(t, http.MethodGet, "/v2/models/tiny/versions/1", nil, nil); s2 != 200 || b2 != body {
		t.Errorf("versions/1: %d %s, want the same metadata", s2, b2)
	}
	for _, p := range []string{"/v2/health/live", "/v2/health/ready", "/v2/models/tiny/ready", "/v2/models/tiny2/versions/1/ready"} {
		if s, b := v2Tiny(t, http.MethodGet, p, nil, nil); s != http.StatusOK {
			t.Errorf("%s: %d %s", p, s, b)
		}
	}
	if s, _ := v2Tiny(t, http.MethodGet, "/v2/models/nope/ready", nil, nil); s != http.StatusNotFound {
		t.Errorf("an unknown model's ready: %d, want 404", s)
	}
	_, b := v2Tiny(t, http.MethodGet, "/v2", nil, nil)
	var server struct {
		Name       string   `json:"name"`
		Version    string   `json:"version"`
		Extensions []string `json:"extensions"`
	}
	if err := json.Unmarshal([]byte(b), &server); err != nil || server.Name != ServerName || len(server.Extensions) != 1 || server.Extensions[0] != "binary_tensor_data" {
		t.Errorf("GET /v2: %s (%v)", b, err)
	}
	// /predict cannot choose among two models: it says so instead of answering for one.
	if s, b := v2Tiny(t, http.MethodPost, "/predict", strings.NewReader(`{"inputs": {}}`), nil); s != http.StatusNotFound || !strings.Contains(b, "/v2/models/{name}/infer") {
		t.Errorf("/predict with two models: %d %s", s, b)
	}
}

// Two bundles of one name cannot both be served: the second would shadow the first.
func TestServeModelsRefusesOneNameTwice(t *testing.T) {
	_, _, err := ServeModels([]*Runner{{b: tinyBundle()}, {b: tinyBundle()}}, "127.0.0.1:0", ServeConfig{})
	if err == nil || !strings.Contains(err.Error(), `two bundles are named "tiny"`) {
		t.Errorf("ServeModels with one name twice: %v", err)
	}
	if _, err := ModelsHandler(nil); err == nil {
		t.Error("ModelsHandler with no models: no error")
	}
}

// v2Answer is an infer answer taken apart: each output's datatype, shape and raw bytes (JSON data
// re-encoded as the dtype, binary data as sent).
type v2Answer struct {
	ID      string
	Outputs map[string]Tensor
	Order   []string
}

func parseV2Answer(t *testing.T, resp *http.Response) v2Answer {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("infer: %d %s", resp.StatusCode, body)
	}
	head := body
	var raw []byte
	if h := resp.Header.Get(inferenceHeaderLength); h != "" {
		n, err := strconv.Atoi(h)
		if err != nil || n > len(body) {
			t.Fatalf("%s %q for a %d-byte body", inferenceHeaderLength, h, len(body))
		}
		head, raw = body[:n], body[n:]
	}
	var m struct {
		ModelName string `json:"model_name"`
		ID        string `json:"id"`
		Outputs   []struct {
			Name       string          `json:"name"`
			Datatype   string          `json:"datatype"`
			Shape      []int           `json:"shape"`
			Data       json.RawMessage `json:"data"`
			Parameters struct {
				Size *int `json:"binary_data_size"`
			} `json:"parameters"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(head, &m); err != nil {
		t.Fatalf("answer %q: %v", head, err)
	}
	a := v2Answer{ID: m.ID, Outputs: map[string]Tensor{}}
	for _, o := range m.Outputs {
		if o.Datatype != "FP32" {
			t.Fatalf("output %s: datatype %s", o.Name, o.Datatype)
		}
		var tt Tensor
		if o.Parameters.Size != nil {
			tt = Tensor{DType: "F32", Shape: o.Shape, Data: raw[:*o.Parameters.Size]}
			raw = raw[*o.Parameters.Size:]
		} else {
			n := 1
			for _, d := range o.Shape {
				n *= d
			}
			flat, err := decodeNested(o.Data, TensorSpec{DType: "F32", Shape: []int{n}, BatchAxis: 0})
			if err != nil {
				t.Fatalf("output %s data: %v", o.Name, err)
			}
			tt = Tensor{DType: "F32", Shape: o.Shape, Data: flat.Data}
		}
		a.Outputs[o.Name] = tt
		a.Order = append(a.Order, o.Name)
	}
	if len(raw) != 0 {
		t.Errorf("%d bytes past the binary outputs", len(raw))
	}
	return a
}

// On the MLP bundle served beside a second model, every way of sending an infer request (flat,
// nested, binary) and of asking for outputs (all, some in another order, binary or JSON) answers
// the bits /predict's RunJSON answers for the same input, with the id echoed.
func TestV2InferMatchesRunJSON(t *testing.T) {
	r, plugin, b := openMLP(t)
	other := *b
	other.Name = "mlp_other"
	r2, err := NewRunner(&other, plugin)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	srv, addr, err := ServeModels([]*Runner{r, r2}, "127.0.0.1:0", ServeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, batch := range []int{1, 4} {
		x := mlpInput(batch, 11)
		predict, _ := json.Marshal(map[string]any{"inputs": map[string]any{"x": nested(x)}})
		var ref bytes.Buffer
		if err := RunJSON(r, bytes.NewReader(predict), &ref); err != nil {
			t.Fatal(err)
		}
		var refOut struct{ Outputs map[string]json.RawMessage }
		json.Unmarshal(ref.Bytes(), &refOut)
		want := map[string]Tensor{}
		for _, s := range r.Outputs() {
			tt, err := decodeNested(refOut.Outputs[s.Name], s, batch)
			if err != nil {
				t.Fatal(err)
			}
			want[s.Name] = tt
		}
		flat, _ := Values[float32](x)
		flatJSON, _ := json.Marshal(flat)
		nestedJSON, _ := json.Marshal(nested(x))
		shape := `[` + strconv.Itoa(batch) + `, 4]`
		jsonIn := func(data []byte) string {
			return `{"name": "x", "shape": ` + shape + `, "datatype": "FP32", "data": ` + string(data) + `}`
		}
		binIn := `{"name": "x", "shape": ` + shape + `, "datatype": "FP32", "parameters": {"binary_data_size": ` + strconv.Itoa(len(x.Data)) + `}}`
		for _, c := range []struct {
			name, model, head string
			binary            bool
			order             []string
		}{
			{"flat data, every output", "mlp_test", `{"id": "req-1", "inputs": [` + jsonIn(flatJSON) + `]}`, false, []string{"logits", "probs"}},
			{"nested data, versions/1", "mlp_test/versions/1", `{"id": "req-1", "inputs": [` + jsonIn(nestedJSON) + `]}`, false, []string{"logits", "probs"}},
			{"outputs asked for in reverse", "mlp_other", `{"id": "req-1", "inputs": [` + jsonIn(flatJSON) + `], "outputs": [{"name": "probs"}, {"name": "logits"}]}`, false, []string{"probs", "logits"}},
			{"binary in, one binary out", "mlp_test", `{"id": "req-1", "inputs": [` + binIn + `], "outputs": [{"name": "probs", "parameters": {"binary_data": true}}]}`, true, []string{"probs"}},
			{"binary in, every output binary", "mlp_other", `{"id": "req-1", "parameters": {"binary_data_output": true, "priority": 0}, "inputs": [` + binIn + `]}`, true, []string{"logits", "probs"}},
		} {
			var body io.Reader = strings.NewReader(c.head)
			hdr := map[string]string{}
			if c.binary {
				body, hdr = binaryBody(c.head, x.Data)
			}
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr.String()+"/v2/models/"+c.model+"/infer", body)
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got := parseV2Answer(t, resp)
			resp.Body.Close()
			if got.ID != "req-1" || strings.Join(got.Order, ",") != strings.Join(c.order, ",") {
				t.Errorf("batch %d, %s: id %q, outputs %v; want req-1, %v", batch, c.name, got.ID, got.Order, c.order)
			}
			for _, name := range c.order {
				g, w := got.Outputs[name], want[name]
				if !bytes.Equal(g.Data, w.Data) || !slices.Equal(g.Shape, w.Shape) {
					t.Errorf("batch %d, %s: output %s is %v, %d bytes; RunJSON's is %v, not bit for bit the same", batch, c.name, name, g.Shape, len(g.Data), w.Shape)
				}
			}
		}
	}
}

// A model repository is the bundle folders under it, whatever their depth, not looking inside a
// bundle; a folder holding a manifest is one bundle; a folder with none is an error.
func TestFindBundles(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"a", "group/b", "a/inner", "empty"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"a", "group/b", "a/inner"} {
		if err := os.WriteFile(filepath.Join(root, d, ManifestFile), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := FindBundles(root)
	want := []string{filepath.Join(root, "a"), filepath.Join(root, "group/b")}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("FindBundles(repo) = %v, %v; want %v", got, err, want)
	}
	if got, err := FindBundles(filepath.Join(root, "a")); err != nil || !slices.Equal(got, want[:1]) {
		t.Errorf("FindBundles(a bundle) = %v, %v; want itself", got, err)
	}
	if _, err := FindBundles(filepath.Join(root, "empty")); err == nil || !strings.Contains(err.Error(), "no bundle in it") {
		t.Errorf("FindBundles(empty) = %v", err)
	}
}

// FuzzDecodeInfer: whatever the body and the binary header, the infer decoder never panics; it
// refuses with the errors decodeFailure turns into a 4xx, or returns inputs that are exactly
// the bundle's, at a batch size it has, each holding the bytes its shape needs.
func FuzzDecodeInfer(f *testing.F) {
	ok := `{"id": "a", "inputs": [{"name": "img", "shape": [1, 5, 5], "datatype": "UINT8", "data": ` + tinyImage + `}], "outputs": [{"name": "scale"}]}`
	bin := `{"inputs": [{"name": "img", "shape": [1, 5, 5], "datatype": "UINT8", "parameters": {"binary_data_size": 25}}]}`
	f.Add([]byte(ok), "")
	f.Add(append([]byte(bin), bytes.Repeat([]byte{7}, 25)...), strconv.Itoa(len(bin)))
	f.Add([]byte(bin), "3")
	f.Add([]byte(`{"inputs": [{"name": "img", "data": [[[1]]]}], "parameters": {"x": [{"y": null}]}}`), "")
	r := &Runner{b: tinyBundle()}
	f.Fuzz(func(t *testing.T, body []byte, header string) {
		req, err := decodeInfer(bytes.NewReader(body), r, header, int64(len(body)))
		if err != nil {
			if rerr := decodeFailure(err, time.Second); rerr.Status != http.StatusBadRequest {
				t.Fatalf("status %d for %v", rerr.Status, err)
			}
			return
		}
		if !slices.Contains(r.BatchSizes(), req.batch) {
			t.Fatalf("accepted batch size %d", req.batch)
		}
		for _, s := range r.Inputs() {
			x, ok := req.tensors[s.Name]
			if !ok || !slices.Equal(x.Shape, s.ShapeAt(req.batch)) || x.check() != nil {
				t.Fatalf("input %s accepted as %v (%v)", s.Name, x.Shape, x.check())
			}
		}
	})
}
