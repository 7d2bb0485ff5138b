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
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// repeat is an endless reader of one string, over and over.
type repeat struct {
	s   string
	off int
}

func (r *repeat) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.s[r.off:])
		n += c
		r.off = (r.off + c) % len(r.s)
	}
	return n, nil
}

// A body over MaxRequestBytes is a 413 whose JSON error gives the bound, not a 400 and not a
// read of the whole body; a body under it that is wrong is the ordinary 400. No program runs,
// so no plugin is needed.
func TestHandlerRequestTooLarge(t *testing.T) {
	r := &Runner{b: tinyBundle()}
	h := Handler(r)
	send := func(body io.Reader) (*httptest.ResponseRecorder, map[string]string) {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/predict", body))
		var m map[string]string
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
			t.Fatalf("response %q is not a JSON error: %v", rec.Body.Bytes(), err)
		}
		return rec, m
	}
	// A well-formed prefix then twice the bound of whitespace, which the decoder keeps nothing of
	// and would read on through: the byte bound stops it after MaxRequestBytes+1 bytes.
	var read atomic.Int64
	body := io.MultiReader(strings.NewReader(`{"inputs": {"img": [[[`), countingReader{io.LimitReader(&repeat{s: " \n"}, 2*MaxRequestBytes), &read})
	rec, m := send(body)
	want := fmt.Sprintf("request body over %d bytes", MaxRequestBytes)
	if rec.Code != http.StatusRequestEntityTooLarge || m["error"] != want || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("a body over the bound: %d %v (%s); want 413 with %q", rec.Code, m, rec.Header().Get("Content-Type"), want)
	}
	if n := read.Load(); n > MaxRequestBytes+1 {
		t.Errorf("read %d bytes of the body for a bound of %d", n, MaxRequestBytes)
	}
	// The control: a short body with the same prefix is malformed (400), not too large.
	rec, m = send(strings.NewReader(`{"inputs": {"img": [[[0,0`))
	if rec.Code != http.StatusBadRequest || !strings.Contains(m["error"], "malformed body") {
		t.Errorf("a short malformed body: %d %v; want 400 malformed body", rec.Code, m)
	}
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// Shutdown with a request in flight stops accepting at once but lets that request finish: the
// answer is a 200 with the right outputs, and Shutdown returns only after it. The request asks
// for "100 Continue", which the server sends when the handler first reads the body: from then
// on the request is in the handler, whatever the scheduling.
func TestServeShutdownFinishesRequestInFlight(t *testing.T) {
	r, srv, addr := serveMLP(t)
	body, want := mlpRequest(t, r, 33)
	conn, br := startInFlight(t, addr.String(), body)
	defer conn.Close()

	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		shut <- srv.Shutdown(ctx)
	}()
	// Shutdown closes the listener first: wait until a new connection is refused.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		c, err := net.Dial("tcp", addr.String())
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the server still accepts connections a minute after Shutdown began")
		}
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) with a request in flight", err)
	default:
	}
	status, data := finishInFlight(t, conn, br, body)
	if status != http.StatusOK {
		t.Fatalf("the request in flight: %d %s", status, data)
	}
	var got struct{ Outputs map[string][][]float32 }
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if w := nested(want["logits"]); fmt.Sprint(got.Outputs["logits"]) != fmt.Sprint(w) {
		t.Errorf("logits over HTTP %v, from Run %v", got.Outputs["logits"], w)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// startInFlight sends the headers of a POST /predict of body with "Expect: 100-continue" and
// returns once the server has answered "100 Continue", i.e. once the handler reads the body.
func startInFlight(t *testing.T, addr string, body []byte) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /predict HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", len(body))
	br := bufio.NewReader(conn)
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
		t.Fatalf("no 100 Continue: %q, %v", line, err)
	}
	if blank, err := br.ReadString('\n'); err != nil || blank != "\r\n" {
		t.Fatalf("after 100 Continue: %q, %v", blank, err)
	}
	return conn, br
}

// finishInFlight sends body on conn and reads the response.
func finishInFlight(t *testing.T, conn net.Conn, br *bufio.Reader, body []byte) (int, []byte) {
	t.Helper()
	if _, err := conn.Write(body); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the request in flight got no answer: %v", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

// Close while Runs are in flight waits for them: every Run either answers as a Run before
// Close would (bitwise) or is refused as a Run on a closed Runner, never anything else (a use
// of a destroyed buffer or program); Close returns nil once; later Runs are refused. Run it
// under -race.
func TestRunnerCloseRacesRun(t *testing.T) {
	plugin := requirePlugin(t)
	dir, _ := mlpBundleDir(t)
	r, err := Open(dir, plugin)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]map[string]Tensor{}
	for _, batch := range []int{1, 4} {
		if want[batch], err = r.Run(batch, map[string]Tensor{"x": mlpInput(batch, 9)}); err != nil {
			t.Fatal(err)
		}
	}
	const workers = 6
	var wg sync.WaitGroup
	var ok, refused atomic.Int64
	started := make(chan struct{}, workers)
	errs := make(chan error, workers)
	for i := range workers {
		wg.Add(1)
		go func(batch int) {
			defer wg.Done()
			first := true
			for {
				out, err := r.Run(batch, map[string]Tensor{"x": mlpInput(batch, 9)})
				if first {
					started <- struct{}{}
					first = false
				}
				switch {
				case err != nil && strings.Contains(err.Error(), "Run on a closed Runner"):
					refused.Add(1)
					return
				case err != nil:
					errs <- fmt.Errorf("batch %d: a Run racing Close: %w", batch, err)
					return
				case !bytes.Equal(out["probs"].Data, want[batch]["probs"].Data) || !bytes.Equal(out["logits"].Data, want[batch]["logits"].Data):
					errs <- fmt.Errorf("batch %d: a Run racing Close answered other outputs", batch)
					return
				}
				ok.Add(1)
			}
		}([]int{1, 4}[i%2])
	}
	for range workers { // every worker has run once: Runs are in flight from here on
		<-started
	}
	closeErr := r.Close()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if closeErr != nil {
		t.Errorf("Close during Runs: %v", closeErr)
	}
	if refused.Load() != workers {
		t.Errorf("%d of %d workers were refused after Close; want all", refused.Load(), workers)
	}
	if _, err := r.Run(1, map[string]Tensor{"x": mlpInput(1, 9)}); err == nil || !strings.Contains(err.Error(), "closed Runner") {
		t.Errorf("Run after Close: %v", err)
	}
	t.Logf("%d Runs answered, %d refused", ok.Load(), refused.Load())
}
