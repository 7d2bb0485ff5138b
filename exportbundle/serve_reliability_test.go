package exportbundle

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
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

// sendFirst makes a client that reads nothing until its request is sent (its body read to the
// end) or a write fails, as Python's requests does: it reads the answer only once it has sent
// the whole body. Its conn and body wrap the client's connection and request body.
type sendFirst struct {
	sent chan struct{}
	once sync.Once
}

// after passes a read or write's result on, marking the request sent at its first error (EOF).
func (s *sendFirst) after(n int, err error) (int, error) {
	if err != nil {
		s.once.Do(func() { close(s.sent) })
	}
	return n, err
}

type sendFirstConn struct {
	net.Conn
	s *sendFirst
}

func (c sendFirstConn) Write(p []byte) (int, error) { return c.s.after(c.Conn.Write(p)) }
func (c sendFirstConn) Read(p []byte) (int, error)  { <-c.s.sent; return c.Conn.Read(p) }

type sendFirstBody struct {
	r io.Reader
	s *sendFirst
}

func (b sendFirstBody) Read(p []byte) (int, error) { return b.s.after(b.r.Read(p)) }

// A 20 MB body of the wrong shape is refused at its first row, and a Go http.Client sending it
// reads the 400 and its JSON error, not a reset connection: one that reads while it sends, and
// one that reads only once it has sent the whole body (as Python's requests does). Before, the
// server stopped reading, closed half a second after its answer, and the second client's send
// met a reset. Each with a known length and chunked (no length).
func TestServeLargeWrongShapeBodyIsAnswered(t *testing.T) {
	_, addr := serveTiny(t, ServeConfig{})
	row := "[" + strings.Repeat("0,", 5) + "0]," // 6 wide: the bundle's rows are 5
	body := append([]byte(`{"inputs": {"img": [[`), bytes.Repeat([]byte(row), (20<<20)/len(row))...)
	for _, readLast := range []bool{false, true} {
		for _, chunked := range []bool{false, true} {
			sf := &sendFirst{sent: make(chan struct{})}
			var r io.Reader = bytes.NewReader(body)
			if chunked {
				r = io.MultiReader(r) // no length the client can see
			}
			tr := &http.Transport{}
			if readLast {
				r = sendFirstBody{r, sf}
				tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
					c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
					return sendFirstConn{c, sf}, err
				}
			}
			client := &http.Client{Transport: tr, Timeout: time.Minute}
			name := fmt.Sprintf("reading only once sent %v, chunked %v", readLast, chunked)
			resp, err := client.Post("http://"+addr+"/predict", "application/json", r)
			if err != nil {
				t.Errorf("%s: no answer to a 20 MB wrong-shape body: %v", name, err)
				continue
			}
			data, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			var m map[string]string
			if err != nil || json.Unmarshal(data, &m) != nil || resp.StatusCode != http.StatusBadRequest ||
				!strings.Contains(m["error"], `input "img": more than 5 elements along axis 2`) {
				t.Errorf("%s: %d %q (%v); want 400 naming the row", name, resp.StatusCode, data, err)
			}
			tr.CloseIdleConnections()
		}
	}
}

// trickleFast keeps n clients sending POST /predict bodies of pad spaces then body, chunk bytes
// every 100 ms, until the test ends: with a 128-byte chunk, 1.25 KiB/s, just above the default
// minimum rate, so no rate check cuts them, and over the test's few seconds far from done. A
// client refused or cut comes back 100 ms later, as a client that retries does. It returns once
// every client has connected once; the count of answers they got (503s, each) is refused().
func trickleFast(t testing.TB, addr string, n, pad, chunk int, body []byte) (refused func() int64) {
	t.Helper()
	full := append(bytes.Repeat([]byte(" "), pad), body...)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var answers atomic.Int64
	t.Cleanup(func() { close(stop); wg.Wait() })
	connected := make(chan struct{}, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first := true; ; first = false {
				conn, err := net.Dial("tcp", addr)
				if first {
					connected <- struct{}{}
				}
				if err != nil {
					return
				}
				done := make(chan struct{})
				go func() { // the answer, when one comes, ends this connection
					defer close(done)
					if _, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
						answers.Add(1)
					}
					conn.Close()
				}()
				fmt.Fprintf(conn, "POST /predict HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(full))
				tick := time.NewTicker(100 * time.Millisecond)
			send:
				for off := 0; off < len(full); off += chunk {
					select {
					case <-stop:
						tick.Stop()
						conn.Close()
						<-done
						return
					case <-done:
						break send
					case <-tick.C:
					}
					if _, err := conn.Write(full[off:min(off+chunk, len(full))]); err != nil {
						break
					}
				}
				tick.Stop()
				conn.Close()
				<-done
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
	}
	for range n {
		<-connected
	}
	return answers.Load
}

// 128 clients trickling their bodies at 1.25 KiB/s, just above the default minimum rate, and
// coming back when refused, do not starve a normal client: with the default bounds (64 read
// slots) each of its 10 requests is answered 200 with the runner's outputs in under a second.
// Before, the first 64 trickling clients held every read slot for up to the read timeout (60s)
// and the normal client's requests were all 503 at once.
func TestServeTricklersAboveMinRateDoNotStarve(t *testing.T) {
	r, srv, addr := serveMLP(t)
	if srv.Config().MaxReading != DefaultMaxReading {
		t.Fatalf("MaxReading %d, want the default", srv.Config().MaxReading)
	}
	body, want := mlpRequest(t, r, 7)
	refused := trickleFast(t, addr.String(), 128, 64<<10, 128, body)
	time.Sleep(time.Second) // every slot held, the trickling bodies past any first-read grace
	client := &http.Client{Timeout: 20 * time.Second}
	defer client.CloseIdleConnections()
	var slowest time.Duration
	for i := range 10 {
		start := time.Now()
		resp, err := client.Post("http://"+addr.String()+"/predict", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("request %d beside 128 trickling clients: %v", i, err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		slowest = max(slowest, took)
		var got struct{ Outputs map[string][][]float32 }
		if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &got) != nil {
			t.Errorf("request %d beside 128 trickling clients: %d %s in %v; want 200", i, resp.StatusCode, data, took)
			continue
		}
		if fmt.Sprint(got.Outputs["logits"]) != fmt.Sprint(nested(want["logits"])) {
			t.Errorf("request %d: logits %v, from Run %v", i, got.Outputs["logits"], nested(want["logits"]))
		}
		if took >= time.Second {
			t.Errorf("request %d beside 128 trickling clients took %v; want under 1s", i, took)
		}
	}
	t.Logf("the slowest of 10 requests took %v; the trickling clients got %d answers (503s)", slowest, refused())
}
