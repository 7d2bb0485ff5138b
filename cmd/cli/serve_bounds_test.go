package cli_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nitro-go/nitro/exportbundle"
	"github.com/nitro-go/nitro/tensorfile"
)

// addBundle writes a bundle whose one program (batch 1) is y = x + w, x F32 [batch 2], w = [10 20],
// its StableHLO written by hand: a bundle in milliseconds, with no training and no GoMLX.
func addBundle(t *testing.T) string {
	t.Helper()
	return addBundleAt(t, filepath.Join(t.TempDir(), "add"), "add")
}

// addBundleAt writes addBundle's bundle at dir under the manifest name name.
func addBundleAt(t *testing.T, dir, name string) string {
	t.Helper()
	return addBundleDeclaring(t, dir, name, tensorfile.F32)
}

// addBundleDeclaring is addBundleAt with the manifest declaring x as dtype, whatever the program
// takes (f32): another dtype makes a bundle whose manifest and program disagree.
func addBundleDeclaring(t *testing.T, dir, name string, dtype tensorfile.DType) string {
	t.Helper()
	w, err := exportbundle.NewTensor([]int{2}, []float32{10, 20})
	if err != nil {
		t.Fatal(err)
	}
	err = exportbundle.Write(dir, &exportbundle.Bundle{
		Name:    name,
		Inputs:  []exportbundle.TensorSpec{{Name: "x", DType: dtype, Shape: []int{-1, 2}, BatchAxis: 0}},
		Outputs: []exportbundle.TensorSpec{{Name: "y", DType: tensorfile.F32, Shape: []int{-1, 2}, BatchAxis: 0}},
		Weights: []exportbundle.Weight{{Name: "w", Tensor: w}},
		Programs: map[int]exportbundle.Program{1: {Format: "mlir", Code: []byte(`module @add {
  func.func public @main(%x: tensor<1x2xf32>, %w: tensor<2xf32>) -> tensor<1x2xf32> {
    %b = stablehlo.broadcast_in_dim %w, dims = [1] : (tensor<2xf32>) -> tensor<1x2xf32>
    %y = stablehlo.add %x, %b : tensor<1x2xf32>
    return %y : tensor<1x2xf32>
  }
}
`)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// run-bundle refuses an input given twice, naming it, where it used to run the last one; the
// same request without the duplicate runs (the control).
func TestRunBundleRefusesDuplicateKeys(t *testing.T) {
	needPlugin(t)
	bundle := addBundle(t)
	code, out, errs := runCLI("run-bundle", bundle, "--inputs", writeTemp(t, `{"inputs": {"x": [[1, 2]]}}`))
	if code != 0 || strings.TrimSpace(out) != `{"outputs":{"y":[[11,22]]}}` {
		t.Fatalf("run-bundle: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	for _, c := range []struct{ body, want string }{
		{`{"inputs": {"x": [[1, 2]], "x": [[3, 4]]}}`, `input "x": given twice in "inputs"`},
		{`{"inputs": {"x": [[1, 2]]}, "inputs": {"x": [[3, 4]]}}`, `malformed body: duplicate key "inputs"`},
	} {
		code, out, errs := runCLI("run-bundle", bundle, "--inputs", writeTemp(t, c.body))
		if code != 1 || !strings.Contains(errs, c.want) || out != "" {
			t.Errorf("run-bundle on %s: exit %d, stdout %q, stderr %q; want exit 1 saying %q", c.body, code, out, errs, c.want)
		}
	}
}

// SIGTERM while a client is stalled mid-body (headers and part of its body sent, then nothing):
// serve cuts it after --shutdown-stall, says so on stderr, and exits 0, instead of waiting out
// its 30 s grace and exiting 1. The minute waits are hang guards.
func TestServeSIGTERMCutsStalledClient(t *testing.T) {
	needPlugin(t)
	addr, done, stderr := startServe(t, addBundle(t), "--shutdown-stall", "100ms")
	conn, _ := startBody(t, addr, 1000)
	fmt.Fprintf(conn, "{\"inputs\": {\"x\": [[1,")
	sigterm(t)
	wantCleanStop(t, done, stderr, 1)
}

// SIGTERM while a client trickles its body at a byte a second, never silent for as long as the
// body timeout or --shutdown-stall (the default, 2s): its request is not one serve had read, so
// serve cuts it --shutdown-stall after the signal and exits 0. Before, only silence was cut:
// serve waited out its 30 s grace and exited 1.
func TestServeSIGTERMCutsTricklingClient(t *testing.T) {
	needPlugin(t)
	addr, done, stderr := startServe(t, addBundle(t))
	conn, _ := startBody(t, addr, 1000)
	go func() {
		for {
			if _, err := conn.Write([]byte(" ")); err != nil {
				return // cut, or the test's end closed it
			}
			time.Sleep(time.Second)
		}
	}()
	sigterm(t)
	wantCleanStop(t, done, stderr, 1)
}

// wantCleanStop waits (a minute at most: a hang guard) for serve to exit after a signal, and
// wants exit 0 and stderr saying it cut the given number of connections mid-request.
func wantCleanStop(t *testing.T, done <-chan int, stderr *syncBuffer, cut int) {
	t.Helper()
	select {
	case code := <-done:
		if want := fmt.Sprintf("nitro: serve: cut %d connection(s) mid-request", cut); code != 0 || !strings.Contains(stderr.String(), want) {
			t.Errorf("serve exited %d after SIGTERM, stderr %q; want 0 and %q", code, stderr.String(), want)
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not exit within a minute of SIGTERM")
	}
}

// serve refuses a bound that is not positive (or a timeout under 1ms), naming the flag, before
// loading the bundle.
func TestServeRefusesBadBounds(t *testing.T) {
	dir := t.TempDir() // not a bundle: the flags are checked first
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-concurrent", "0"}, "--max-concurrent 0: at least 1"},
		{[]string{"--max-reading", "0"}, "--max-reading 0: at least 1 body at a time (default 64)"},
		{[]string{"--min-body-rate", "0"}, "--min-body-rate 0: at least 1 byte/s (default 1024)"},
		{[]string{"--body-timeout", "0s"}, "--body-timeout 0s: a timeout is positive"},
		{[]string{"--read-timeout", "-1s"}, "--read-timeout -1s: a timeout is positive"},
		{[]string{"--write-timeout", "1ns"}, "--write-timeout 1ns: under 1ms no request could be served in time"},
	} {
		code, _, errs := runCLI(append([]string{"serve", dir}, c.args...)...)
		if code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("serve %v: exit %d, stderr %q; want %q", c.args, code, errs, c.want)
		}
	}
}
