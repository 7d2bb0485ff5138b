package exportbundle

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/nitro-go/nitro/tensorfile"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func nested(t Tensor) [][]float32 {
	v, _ := Values[float32](t)
	out := make([][]float32, t.Shape[0])
	for i := range out {
		out[i] = v[i*t.Shape[1] : (i+1)*t.Shape[1]]
	}
	return out
}

func TestServeOverLoopback(t *testing.T) {
	plugin := requirePlugin(t)
	dir, _ := mlpBundleDir(t)
	r, err := Open(dir, plugin)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	srv, addr, err := Serve(r, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	url := "http://" + addr.String() + "/predict"
	post := func(body string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("response %q is not JSON: %v", data, err)
		}
		return resp.StatusCode, m
	}

	good := func(batch int) {
		x := mlpInput(batch, 21)
		body, _ := json.Marshal(map[string]any{"inputs": map[string]any{"x": nested(x)}})
		status, m := post(string(body))
		if status != http.StatusOK {
			t.Fatalf("batch %d: %d %v", batch, status, m)
		}
		want, err := r.Run(batch, map[string]Tensor{"x": x})
		if err != nil {
			t.Fatal(err)
		}
		outs := m["outputs"].(map[string]any)
		for _, name := range []string{"logits", "probs"} {
			rows := outs[name].([]any)
			w := nested(want[name])
			if len(rows) != batch {
				t.Fatalf("%s: %d rows", name, len(rows))
			}
			for i, row := range rows {
				for j, v := range row.([]any) {
					if float32(v.(float64)) != w[i][j] {
						t.Fatalf("%s[%d][%d] = %v over HTTP, %v from Run", name, i, j, v, w[i][j])
					}
				}
			}
		}
	}
	good(1)

	row := `[0.1, 0.2, 0.3, 0.4]`
	bad := map[string]struct{ body, says string }{
		"not JSON":        {`{"inputs": {"x": [[1,2`, "malformed body"},
		"not an object":   {`[1,2,3]`, "malformed body"},
		"no inputs":       {`{}`, `no "inputs"`},
		"unknown field":   {`{"inputs": {"x": [` + row + `]}, "extra": 1}`, "malformed body"},
		"trailing data":   {`{"inputs": {"x": [` + row + `]}} {}`, "data after"},
		"missing input":   {`{"inputs": {}}`, `input "x": missing`},
		"unknown input":   {`{"inputs": {"x": [` + row + `], "y": [1]}}`, `input "y": not an input`},
		"wrong dtype":     {`{"inputs": {"x": [[0.1, "a", 0.3, 0.4]]}}`, `input "x": string "a" is not a number`},
		"bool for float":  {`{"inputs": {"x": [[true, 0.2, 0.3, 0.4]]}}`, `input "x": true is not a number`},
		"overflow":        {`{"inputs": {"x": [[1e300, 0.2, 0.3, 0.4]]}}`, `input "x": 1e300 overflows dtype F32`},
		"wrong width":     {`{"inputs": {"x": [[0.1, 0.2, 0.3]]}}`, `input "x": shape [1 3], the bundle takes [1 4]`},
		"wrong rank":      {`{"inputs": {"x": [0.1, 0.2, 0.3, 0.4]}}`, `input "x": rank 1, the bundle takes rank 2`},
		"too deep":        {`{"inputs": {"x": [[[0.1], 0.2, 0.3, 0.4]]}}`, `input "x": an array is not a number`},
		"ragged":          {`{"inputs": {"x": [` + row + `, [0.1]]}}`, `input "x": ragged`},
		"empty":           {`{"inputs": {"x": []}}`, `input "x": an empty array`},
		"no program":      {`{"inputs": {"x": [` + row + `,` + row + `]}}`, "batch size 2"},
		"null":            {`{"inputs": {"x": null}}`, `input "x": rank 0`},
		"deeply nested":   {`{"inputs": {"x": ` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}}`, `input "x": an array is not a number`},
		"object as input": {`{"inputs": {"x": {"a": 1}}}`, `input "x": rank 0`},
	}
	for name, c := range bad {
		status, m := post(c.body)
		msg, _ := m["error"].(string)
		if status != http.StatusBadRequest || !strings.Contains(msg, c.says) {
			t.Errorf("%s: %d %q, want 400 saying %q", name, status, msg, c.says)
		}
	}
	// Non-finite values travel as strings both ways.
	status, m := post(`{"inputs": {"x": [["NaN", 0.2, 0.3, 0.4]]}}`)
	if status != http.StatusOK {
		t.Fatalf("NaN input: %d %v", status, m)
	}
	if v := m["outputs"].(map[string]any)["probs"].([]any)[0].([]any)[0]; v != "NaN" {
		t.Errorf("a NaN input gives probs %v, want \"NaN\"", v)
	}
	// GET is refused; the server still answers after all of the above.
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", resp.StatusCode)
	}
	good(4)
}

func TestDecodeNestedDTypes(t *testing.T) {
	cases := []struct {
		dtype tensorfile.DType
		json  string
		want  string // encodeNested of the result
		err   string
	}{
		{tensorfile.I32, `[[1, -2]]`, `[[1,-2]]`, ""},
		{tensorfile.I32, `[[1.5, 2]]`, "", "not a 32-bit integer"},
		{tensorfile.I8, `[[127, 128]]`, "", "not a 8-bit integer"},
		{tensorfile.U8, `[[255, 0]]`, `[[255,0]]`, ""},
		{tensorfile.U8, `[[-1, 0]]`, "", "unsigned"},
		{tensorfile.U64, `[[18446744073709551615, 1]]`, `[[18446744073709551615,1]]`, ""},
		{tensorfile.I64, `[[-9223372036854775808, 1]]`, `[[-9223372036854775808,1]]`, ""},
		{tensorfile.BOOL, `[[true, false]]`, `[[true,false]]`, ""},
		{tensorfile.BOOL, `[[1, 0]]`, "", "not a boolean"},
		{tensorfile.F16, `[[0.5, "-Inf"]]`, `[[0.5,"-Inf"]]`, ""},
		{tensorfile.F16, `[[70000, 1]]`, "", "overflows"},
		{tensorfile.BF16, `[[1.5, 2]]`, `[[1.5,2]]`, ""},
		{tensorfile.F64, `[[1e300, "+Inf"]]`, `[[1e+300,"+Inf"]]`, ""},
	}
	for _, c := range cases {
		spec := TensorSpec{Name: "v", DType: c.dtype, Shape: []int{-1, 2}}
		got, err := decodeNested(json.RawMessage(c.json), spec)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s %s: %v, want an error saying %q", c.dtype, c.json, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %s: %v", c.dtype, c.json, err)
			continue
		}
		var b bytes.Buffer
		encodeNested(&b, got, got.Shape, 0)
		if b.String() != c.want {
			t.Errorf("%s %s: round trip %s, want %s", c.dtype, c.json, b.String(), c.want)
		}
	}
}

// Serve a bundle over HTTP. With a bundle and a real plugin path it prints the request to send;
// here there is no bundle at the path, and Open says so, naming it.
func ExampleServe() {
	r, err := Open("export_out/my_model_v1", "/path/to/pjrt_c_api_cpu_plugin.so")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	srv, addr, err := Serve(r, "127.0.0.1:8080")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	fmt.Println("POST http://" + addr.String() + `/predict {"inputs": {"x": [[0.1, 0.2, 0.3, 0.4]]}}`)
	// Output:
	// exportbundle: export_out/my_model_v1: not readable
}
