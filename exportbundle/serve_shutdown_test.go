package exportbundle

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// halfSent is a client with one request half sent on conn: rest is what it has still to send.
type halfSent struct {
	conn net.Conn
	br   *bufio.Reader
	rest []byte
	kind string
}

// halfSentKinds are the ways a request can be half sent: its headers or its body, on a fresh
// connection or on a keep-alive one whose first request was answered.
var halfSentKinds = []string{"fresh, half the headers", "fresh, half the body", "keep-alive, half the headers", "keep-alive, half the body"}

// startHalfSent connects to addr and sends the first half of the headers (kind 0 and 2) or the
// headers and half the body (1 and 3) of a POST /predict of body; kinds 2 and 3 first send one
// whole request on the connection and read its answer.
func startHalfSent(t *testing.T, addr string, body []byte, kind int) *halfSent {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(time.Minute)) // a hang guard
	req := append([]byte(fmt.Sprintf("POST /predict HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))), body...)
	br := bufio.NewReader(conn)
	if kind >= 2 {
		if _, err := conn.Write(req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the first request on a keep-alive connection: %d", resp.StatusCode)
		}
	}
	cut := (len(req) - len(body)) / 2 // half the headers
	if kind%2 == 1 {
		cut = len(req) - len(body)/2 // the headers and half the body
	}
	if _, err := conn.Write(req[:cut]); err != nil {
		t.Fatal(err)
	}
	return &halfSent{conn: conn, br: br, rest: req[cut:], kind: halfSentKinds[kind]}
}

// Shutdown (what serve does at SIGTERM) with 48 requests half sent, a dozen of each kind
// (headers or body, on a fresh or a keep-alive connection), their clients sending the rest
// 300 ms after it began: every one is answered 200 with the runner's outputs, Shutdown has not
// returned before they were sent, returns nil and cut nothing mid-request. Shutdown begins at
// several moments after the connects, from at once to 200 ms. Before, net/http's Shutdown closed
// the keep-alive connections whose next request had not been read whole as idle, and dropped
// unanswered a request whose headers it read once Shutdown had begun: most of the 48 met EOF or
// a reset, and Shutdown could return before the rest was sent.
func TestServeShutdownAnswersRequestsHalfSent(t *testing.T) {
	dir, _ := mlpBundleDir(t)
	r, err := Open(dir, requirePlugin(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	body, want := mlpRequest(t, r, 11)
	wantLogits := fmt.Sprint(nested(want["logits"]))
	for _, at := range []time.Duration{0, 10 * time.Millisecond, 50 * time.Millisecond, 200 * time.Millisecond} {
		t.Run(fmt.Sprintf("Shutdown %v after the connects", at), func(t *testing.T) {
			srv, addr, err := ServeWith(r, "127.0.0.1:0", ServeConfig{ShutdownStall: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			var clients []*halfSent
			for i := range 48 {
				clients = append(clients, startHalfSent(t, addr.String(), body, i%4))
			}
			time.Sleep(at)
			shut := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				shut <- srv.Shutdown(ctx)
			}()
			time.Sleep(300 * time.Millisecond)
			select {
			case err := <-shut:
				t.Fatalf("Shutdown returned (%v) while 48 requests were half sent", err)
			default:
			}
			for _, c := range clients {
				if _, err := c.conn.Write(c.rest); err != nil {
					t.Errorf("%s: sending the rest of the request: %v", c.kind, err)
				}
			}
			lost := 0
			for _, c := range clients {
				resp, err := http.ReadResponse(c.br, nil)
				if err != nil {
					lost++
					t.Logf("%s: no answer: %v", c.kind, err)
					continue
				}
				data, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var got struct{ Outputs map[string][][]float32 }
				if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &got) != nil || fmt.Sprint(got.Outputs["logits"]) != wantLogits {
					t.Errorf("%s: %d %s; want 200 with the runner's logits", c.kind, resp.StatusCode, data)
				}
			}
			if lost > 0 {
				t.Errorf("%d of 48 requests half sent at Shutdown, their rest sent 300 ms in, got no answer", lost)
			}
			if err := <-shut; err != nil {
				t.Errorf("Shutdown: %v", err)
			}
			if unread, _ := srv.Cut(); unread != 0 {
				t.Errorf("Shutdown cut %d connections mid-request; want none (each finished within the stall)", unread)
			}
		})
	}
}
