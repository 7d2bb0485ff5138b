package cli_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nitro-go/nitro/cmd/cli"
	"github.com/nitro-go/nitro/exportbundle"
)

// serveSIGTERM runs `nitro serve bundle` and stops it with SIGTERM, as a supervisor would, while
// a request is inside the handler: serve stops accepting, answers that request (200, the
// runner's logits for body), then exits 0. The request asks for "100 Continue", which the
// server sends when the handler first reads the body, so it is in flight when the signal comes.
// The signal goes to this process: serve's handler is what keeps it alive.
func serveSIGTERM(t *testing.T, bundle, body string, ref exportbundle.Tensor, labels []int32) {
	t.Helper()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- cli.Main([]string{"serve", bundle, "--addr", "127.0.0.1:0"}, &stdout, &stderr) }()
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
	fmt.Fprintf(conn, "POST /predict HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", len(body))
	br := bufio.NewReader(conn)
	if status, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(status, "HTTP/1.1 100 ") {
		t.Fatalf("no 100 Continue: %q, %v", status, err)
	}
	if blank, err := br.ReadString('\n'); err != nil || blank != "\r\n" {
		t.Fatalf("after 100 Continue: %q, %v", blank, err)
	}

	p, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM to this process: %v", err)
	}
	waitUntil(t, "serve to say it is stopping", func() bool { return strings.Contains(stderr.String(), "serve: stopping") })
	waitUntil(t, "serve to stop accepting connections", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	select {
	case code := <-done:
		t.Fatalf("serve exited %d with a request in flight", code)
	default:
	}

	if _, err := io.WriteString(conn, body); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the request in flight at SIGTERM got no answer: %v", err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the request in flight at SIGTERM: %d %s (%v)", resp.StatusCode, data, err)
	}
	if d, _ := compareLogits(t, outputsOf(t, data), ref, labels); d != 0 {
		t.Errorf("the request in flight at SIGTERM: logits differ from the runner's by %g", d)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("serve exited %d after SIGTERM: %s", code, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not exit within a minute of answering its last request")
	}
}

// waitUntil polls cond, failing t (naming what) after a minute: a hang guard, not a timing.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
	}
}
