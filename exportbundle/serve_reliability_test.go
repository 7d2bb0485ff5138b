package exportbundle

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// trickle opens n connections to addr that each send the headers of a POST /predict of body,
// then the body one byte every 100 ms: never silent for a body timeout, far from done within a
// test. It returns once the server has answered each one's "Expect: 100-continue" (the request
// is in the handler, reading) or refused it, and says how many it refused; the connections
// close when the test ends.
func trickle(t testing.TB, addr string, n int, body []byte) (refused int) {
	t.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(stop); wg.Wait() })
	for range n {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST /predict HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", len(body))
		conn.SetReadDeadline(time.Now().Add(time.Minute)) // a hang guard
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil {
			t.Fatalf("a trickling client got no answer to its headers: %v", err)
		}
		if !strings.HasPrefix(line, "HTTP/1.1 100 ") {
			refused++
			conn.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for i := 0; i < len(body); i++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if _, err := conn.Write(body[i : i+1]); err != nil {
					return
				}
			}
		}()
	}
	return refused
}

// 20 clients trickling valid bodies (a byte every 100 ms) do not starve a server with the
// default bounds: 8 good clients sending at once are all answered 200 with the runner's
// outputs. Before, every trickler held a slot that also ran requests, and the good ones were
// all 503. The client timeout is a hang guard.
func TestServeTricklingClientsDoNotStarve(t *testing.T) {
	r, _, addr := serveMLP(t)
	body, want := mlpRequest(t, r, 5)
	if n := trickle(t, addr.String(), 20, body); n > 0 {
		t.Logf("%d of 20 trickling clients were refused", n)
	}
	client := &http.Client{Timeout: 20 * time.Second}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Post("http://"+addr.String()+"/predict", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Errorf("good client %d: %v", i, err)
				return
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var got struct{ Outputs map[string][][]float32 }
			if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &got) != nil {
				t.Errorf("good client %d beside 20 trickling ones: %d %s; want 200", i, resp.StatusCode, data)
			} else if fmt.Sprint(got.Outputs["logits"]) != fmt.Sprint(nested(want["logits"])) {
				t.Errorf("good client %d: logits %v, from Run %v", i, got.Outputs["logits"], nested(want["logits"]))
			}
		}()
	}
	wg.Wait()
}

// serveMLP opens the test MLP's bundle and serves it with the default bounds until the test ends.
func serveMLP(t *testing.T) (*Runner, *Server, net.Addr) {
	t.Helper()
	dir, _ := mlpBundleDir(t)
	r, err := Open(dir, requirePlugin(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	srv, addr, err := Serve(r, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return r, srv, addr
}

// mlpRequest is a /predict body of one MLP input (from seed) and r's outputs for it.
func mlpRequest(t *testing.T, r *Runner, seed uint64) ([]byte, map[string]Tensor) {
	t.Helper()
	x := mlpInput(1, seed)
	want, err := r.Run(1, map[string]Tensor{"x": x})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"inputs": map[string]any{"x": nested(x)}})
	return body, want
}
