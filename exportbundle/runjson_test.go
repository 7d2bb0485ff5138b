package exportbundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// handlerAnswer posts body to Handler(r) and returns the status and the response body.
func handlerAnswer(t *testing.T, r *Runner, body string) (int, []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	Handler(r).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/predict", strings.NewReader(body)))
	return rec.Code, rec.Body.Bytes()
}

// TestRunJSONRefusesAsHandler: each request /predict refuses, RunJSON refuses with a
// *RequestError carrying the handler's status and exactly its {"error"} message, and writes
// nothing. No program runs, so no plugin is needed.
func TestRunJSONRefusesAsHandler(t *testing.T) {
	r := &Runner{b: tinyBundle()}
	for _, body := range []string{
		``,
		`{"inputs": `,
		`{"inputs": {"pixels": [[1]]}}`,
		`{"inputs": {"img": [[[1, 2]]]}}`,
		`{"inputs": {}}`,
		`{"inputs": {"img": [[[0,0,0,0,0],[0,0,0,0,0],[0,0,0,0,0],[0,0,0,0,0],[0,0,0,0,0]]]}, "inputs": null}`,
		`{"inputs": {"img": [[[1,1,1,1,1],[1,1,1,1,1],[1,1,1,1,1],[1,1,1,1,1],[1,1,1,1,1]],` + strings.Repeat(" ", 10) + `]]}}`,
		`[]`,
	} {
		status, answer := handlerAnswer(t, r, body)
		var m map[string]string
		if err := json.Unmarshal(answer, &m); err != nil || status == http.StatusOK {
			t.Fatalf("%q: the handler answered %d %q, want a JSON error", body, status, answer)
		}
		var out bytes.Buffer
		err := RunJSON(r, strings.NewReader(body), &out)
		var re *RequestError
		if !errors.As(err, &re) || re.Status != status || err.Error() != m["error"] {
			t.Errorf("%q: RunJSON: %v (%T); want a *RequestError %d %q, the handler's", body, err, err, status, m["error"])
		}
		if out.Len() > 0 {
			t.Errorf("%q: RunJSON wrote %q with its error", body, out.Bytes())
		}
	}
	// A refused input is the *InputError under the RequestError, naming the input.
	err := RunJSON(r, strings.NewReader(`{"inputs": {"pixels": [[1]]}}`), io.Discard)
	var ie *InputError
	if !errors.As(err, &ie) || ie.Input != "pixels" {
		t.Errorf("unknown input: %v; want an *InputError naming pixels", err)
	}
	// The byte bound of /predict holds in process too: a 413's message, without reading on.
	body := io.MultiReader(strings.NewReader(`{"inputs": {"img": [[[`), io.LimitReader(&repeat{s: " \n"}, 2*MaxRequestBytes))
	err = RunJSON(r, body, io.Discard)
	var re *RequestError
	if !errors.As(err, &re) || re.Status != http.StatusRequestEntityTooLarge || err.Error() != fmt.Sprintf("request body over %d bytes", MaxRequestBytes) {
		t.Errorf("a body over MaxRequestBytes: %v", err)
	}
	if err := RunJSON(nil, strings.NewReader("{}"), io.Discard); err == nil || !strings.Contains(err.Error(), "nil Runner") {
		t.Errorf("nil Runner: %v", err)
	}
}

// TestRunJSONAnswersAsHandler: on the MLP bundle, RunJSON's answer is the handler's body byte for
// byte, at each batch size, and a batch size without a program is refused as the handler does.
func TestRunJSONAnswersAsHandler(t *testing.T) {
	plugin := requirePlugin(t)
	dir, _ := mlpBundleDir(t)
	r, err := Open(dir, plugin)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, batch := range []int{1, 4} {
		body, _ := json.Marshal(map[string]any{"inputs": map[string]any{"x": nested(mlpInput(batch, 5))}})
		status, want := handlerAnswer(t, r, string(body))
		if status != http.StatusOK {
			t.Fatalf("batch %d: the handler answered %d %s", batch, status, want)
		}
		var got bytes.Buffer
		if err := RunJSON(r, bytes.NewReader(body), &got); err != nil {
			t.Fatalf("batch %d: RunJSON: %v", batch, err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("batch %d: RunJSON wrote\n%s\nthe handler answered\n%s", batch, got.Bytes(), want)
		}
		var m struct{ Outputs map[string][][]float64 }
		if err := json.Unmarshal(got.Bytes(), &m); err != nil || len(m.Outputs["probs"]) != batch {
			t.Errorf("batch %d: the answer %s does not hold %d rows of probs (%v)", batch, got.Bytes(), batch, err)
		}
	}
	body, _ := json.Marshal(map[string]any{"inputs": map[string]any{"x": nested(mlpInput(2, 5))}})
	status, answer := handlerAnswer(t, r, string(body))
	err = RunJSON(r, bytes.NewReader(body), io.Discard)
	var re *RequestError
	var m map[string]string
	json.Unmarshal(answer, &m)
	if !errors.As(err, &re) || re.Status != status || status != http.StatusBadRequest || err.Error() != m["error"] {
		t.Errorf("batch 2 (no program): RunJSON %v, the handler %d %s", err, status, answer)
	}
}
