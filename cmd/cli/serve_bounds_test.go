package cli_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nitro-go/nitro/cmd/cli"
	"github.com/nitro-go/nitro/exportbundle"
	"github.com/nitro-go/nitro/tensorfile"
)

// addBundle writes a bundle whose one program (batch 1) is y = x + w, x F32 [batch 2], w = [10 20],
// its StableHLO written by hand: a bundle in milliseconds, with no training and no GoMLX.
func addBundle(t *testing.T) string {
	t.Helper()
	w, err := exportbundle.NewTensor([]int{2}, []float32{10, 20})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "add")
	err = exportbundle.Write(dir, &exportbundle.Bundle{
		Name:    "add",
		Inputs:  []exportbundle.TensorSpec{{Name: "x", DType: tensorfile.F32, Shape: []int{-1, 2}, BatchAxis: 0}},
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
	bundle := addBundle(t)
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Main([]string{"serve", bundle, "--addr", "127.0.0.1:0", "--shutdown-stall", "100ms"}, &stdout, &stderr)
	}()
	line := regexp.MustCompile(`on http://(127\.0\.0\.1:[0-9]+)/predict\n`)
	var addr string
	waitUntil(t, "serve to print its address", func() bool {
		select {
		case code := <-done:
			t.Fatalf("serve exited %d: %s", code, stderr.String())
		default:
		}
		if m := line.FindStringSubmatch(stdout.String()); m != nil {
			addr = m[1]
		}
		return addr != ""
	})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// "Expect: 100-continue": the server answers it when the handler first reads the body, so
	// from then on the request is in the handler, reading a body that stalls.
	fmt.Fprintf(conn, "POST /predict HTTP/1.1\r\nHost: test\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n")
	br := bufio.NewReader(conn)
	if status, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(status, "HTTP/1.1 100 ") {
		t.Fatalf("no 100 Continue: %q, %v", status, err)
	}
	fmt.Fprintf(conn, "{\"inputs\": {\"x\": [[1,")
	p, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM to this process: %v", err)
	}
	select {
	case code := <-done:
		if want := "nitro: serve: cut 1 connection(s) stalled mid-request"; code != 0 || !strings.Contains(stderr.String(), want) {
			t.Errorf("serve exited %d after SIGTERM with a stalled client, stderr %q; want 0 and %q", code, stderr.String(), want)
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
