package cli_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nitro-go/nitro/tensorfile"
)

// serve on a model repository of two bundles prints each model it serves and answers each on
// /v2 by its manifest name (/predict, which cannot choose, says so); a repository holding two
// bundles of one name is refused, naming both folders.
func TestServeModelRepository(t *testing.T) {
	needPlugin(t)
	repo := t.TempDir()
	addBundleAt(t, filepath.Join(repo, "first"), "add")
	if err := os.Mkdir(filepath.Join(repo, "more"), 0o755); err != nil {
		t.Fatal(err)
	}
	addBundleAt(t, filepath.Join(repo, "more", "second"), "add2")
	line := regexp.MustCompile(`serving add2 \(batch sizes 1, from [^)]*second\) on http://(127\.0\.0\.1:[0-9]+)/v2/models/add2/infer\n`)
	addr, done, stdout, stderr := startServeAt(t, line, repo)
	if !strings.Contains(stdout.String(), "serving add (batch sizes 1, from "+filepath.Join(repo, "first")+") on http://"+addr+"/v2/models/add/infer\n") {
		t.Errorf("serve's stdout does not list the model add: %q", stdout.String())
	}
	for _, c := range []struct{ model, want string }{
		{"add", `"outputs":[{"name":"y","datatype":"FP32","shape":[1,2],"data":[11,22]}]`},
		{"add2", `"outputs":[{"name":"y","datatype":"FP32","shape":[1,2],"data":[11,22]}]`},
	} {
		resp, err := http.Post("http://"+addr+"/v2/models/"+c.model+"/infer", "application/json",
			strings.NewReader(`{"inputs": [{"name": "x", "shape": [1, 2], "datatype": "FP32", "data": [1, 2]}]}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"model_name":"`+c.model+`"`) || !strings.Contains(string(body), c.want) {
			t.Errorf("infer on %s: %d %s", c.model, resp.StatusCode, body)
		}
	}
	resp, err := http.Post("http://"+addr+"/predict", "application/json", strings.NewReader(`{"inputs": {"x": [[1, 2]]}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/predict with two models: %d, want 404", resp.StatusCode)
	}
	sigterm(t)
	wantExit0(t, done, stderr)

	addBundleAt(t, filepath.Join(repo, "third"), "add")
	code, _, errs := runCLI("serve", repo, "--addr", "127.0.0.1:0")
	if want := `two bundles are named "add" (` + filepath.Join(repo, "first") + " and " + filepath.Join(repo, "third") + ")"; code == 0 || !strings.Contains(errs, want) {
		t.Errorf("serve on two bundles named add: exit %d, stderr %q; want %q", code, errs, want)
	}
}

// wantExit0 waits (a minute at most: a hang guard) for serve to exit after a signal, and wants 0.
func wantExit0(t *testing.T, done <-chan int, stderr *syncBuffer) {
	t.Helper()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("serve exited %d after SIGTERM: %s", code, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not exit within a minute of SIGTERM")
	}
}

// serve on a path that does not exist says so, rather than calling it a model repository, and
// run-bundle and serve refuse a bundle whose manifest declares its input F16 over a program that
// takes f32, naming the input, its dtype and what the program takes, before any request: before,
// run-bundle printed PJRT's "RuntimeProgramInputMismatch: ... expected parameter 0 of size 8
// (f32[1,2]{1,0}) but got buffer with incompatible size 4 (f16[1,2]{1,0})" and serve answered it
// to every request with a 500.
func TestServeAndRunBundleNameWhatIsWrong(t *testing.T) {
	needPlugin(t)
	missing := filepath.Join(t.TempDir(), "nope")
	code, _, errs := runCLI("serve", missing, "--addr", "127.0.0.1:0")
	if want := "serve " + missing + ": the path does not exist"; code == 0 || !strings.Contains(errs, want) || strings.Contains(errs, "model repository") {
		t.Errorf("serve on a missing path: exit %d, stderr %q; want %q and no model repository", code, errs, want)
	}
	half := addBundleDeclaring(t, filepath.Join(t.TempDir(), "half"), "half", tensorfile.F16)
	want := `input "x": the manifest declares F16 [1 2], but program-b1.mlir takes only F32 [1 2] there`
	in := writeTemp(t, `{"inputs": {"x": [[1, 2]]}}`)
	for _, args := range [][]string{{"run-bundle", half, "--inputs", in}, {"serve", half, "--addr", "127.0.0.1:0"}} {
		type result struct {
			code int
			errs string
		}
		done := make(chan result, 1)
		go func() {
			code, _, errs := runCLI(args...)
			done <- result{code, errs}
		}()
		var r result
		select {
		case r = <-done:
		case <-time.After(30 * time.Second): // a serve that started serves until a signal
			sigterm(t)
			r = <-done
			t.Errorf("%s on an F16 input over an f32 program was still running after 30s", args[0])
		}
		code, errs := r.code, r.errs
		if code == 0 || !strings.Contains(errs, want) || strings.Contains(errs, "PJRT") {
			t.Errorf("%s on an F16 input over an f32 program: exit %d, stderr %q; want %q", args[0], code, errs, want)
		}
	}
}
