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
// runner's probabilities for body), then exits 0. The request asks for "100 Continue", which the
// server sends when the handler first reads the body, so it is in flight when the signal comes.
// The signal goes to this process: serve's handler is what keeps it alive.
func serveSIGTERM(t *testing.T, bundle, body string, ref exportbundle.Tensor, labels []int32) {
	t.Helper()
	addr, done, stderr := startServe(t, bundle)
	conn, br := startBody(t, addr, len(body))
	sigterm(t)
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
	if d, _ := compareOutputs(t, outputsOf(t, data), ref, labels); d != 0 {
		t.Errorf("the request in flight at SIGTERM: probabilities differ from the runner's by %g", d)
	}
	wantExit0(t, done, stderr)
}

// startServe runs `nitro serve bundle --addr 127.0.0.1:0 args...` and returns the address it
// prints, the channel its exit code comes on, and its stderr.
func startServe(t *testing.T, bundle string, args ...string) (string, <-chan int, *syncBuffer) {
	t.Helper()
	addr, done, _, stderr := startServeAt(t, regexp.MustCompile(`on http://(127\.0\.0\.1:[0-9]+)/predict\n`), bundle, args...)
	return addr, done, stderr
}

// startServeAt is startServe where line, matched on stdout, gives the address; it returns
// stdout too.
func startServeAt(t *testing.T, line *regexp.Regexp, bundle string, args ...string) (string, <-chan int, *syncBuffer, *syncBuffer) {
	t.Helper()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(append([]string{"serve", bundle, "--addr", "127.0.0.1:0"}, args...), &stdout, &stderr)
	}()
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
	return addr, done, &stdout, &stderr
}

// startBody sends the headers of a POST /predict with a body of n bytes and "Expect:
// 100-continue", and returns once the server has answered "100 Continue": the handler is
// reading the body, which the caller sends (or not) on the connection, closed when t ends.
func startBody(t *testing.T, addr string, n int) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /predict HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", n)
	br := bufio.NewReader(conn)
	if status, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(status, "HTTP/1.1 100 ") {
		t.Fatalf("no 100 Continue: %q, %v", status, err)
	}
	if blank, err := br.ReadString('\n'); err != nil || blank != "\r\n" {
		t.Fatalf("after 100 Continue: %q, %v", blank, err)
	}
	return conn, br
}

// sigterm sends SIGTERM to this process, as a supervisor would to serve: serve's handler is what
// keeps the process alive.
func sigterm(t *testing.T) {
	t.Helper()
	p, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM to this process: %v", err)
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

// SIGTERM at several moments after 48 clients connected and sent half a request each (half the
// headers or half the body, on a fresh connection or on a keep-alive one whose first request was
// answered, 12 of each): serve is still running 0.5 s after the signal, when the clients send
// the rest, well within --shutdown-stall (2s); each is answered 200 with y = x + w, and serve
// exits 0. Before, serve closed the half-sent keep-alive requests as idle and dropped those
// whose headers it read after the signal (EOF or a reset), and could exit at once.
func TestServeSIGTERMAnswersRequestsHalfSent(t *testing.T) {
	needPlugin(t)
	bundle := addBundle(t)
	body := `{"inputs": {"x": [[1, 2]]}}`
	req := fmt.Sprintf("POST /predict HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	answer := func(br *bufio.Reader) (int, string, error) {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return 0, "", err
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(data), err
	}
	for _, at := range []time.Duration{0, 50 * time.Millisecond, 300 * time.Millisecond} {
		t.Run(fmt.Sprintf("SIGTERM %v after the connects", at), func(t *testing.T) {
			addr, done, stderr := startServe(t, bundle)
			type halfSent struct {
				conn net.Conn
				br   *bufio.Reader
				rest string
			}
			var clients []halfSent
			for i := range 48 {
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { conn.Close() })
				conn.SetDeadline(time.Now().Add(time.Minute)) // a hang guard
				br := bufio.NewReader(conn)
				if i%4 >= 2 { // keep-alive: a first request answered
					io.WriteString(conn, req)
					if code, data, err := answer(br); err != nil || code != http.StatusOK {
						t.Fatalf("a first request: %d %s (%v)", code, data, err)
					}
				}
				half := strings.Index(req, "\r\n\r\n") / 2
				if i%2 == 1 {
					half = len(req) - len(body)/2
				}
				io.WriteString(conn, req[:half])
				clients = append(clients, halfSent{conn, br, req[half:]})
			}
			time.Sleep(at)
			sigterm(t)
			time.Sleep(500 * time.Millisecond)
			select {
			case code := <-done:
				t.Fatalf("serve exited %d within 0.5 s of SIGTERM with 48 requests half sent: %s", code, stderr.String())
			default:
			}
			for _, c := range clients {
				io.WriteString(c.conn, c.rest)
			}
			lost := 0
			for i, c := range clients {
				code, data, err := answer(c.br)
				if err != nil {
					lost++
					continue
				}
				if code != http.StatusOK || !strings.Contains(data, `"y":[[11,22]]`) {
					t.Errorf("client %d: %d %s; want 200 with y [[11,22]]", i, code, data)
				}
			}
			if lost > 0 {
				t.Errorf("%d of 48 requests half sent at SIGTERM, finished 0.5 s later, got no answer (EOF or reset)", lost)
			}
			wantExit0(t, done, stderr)
		})
	}
}
