package exportbundle

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/nitro-go/nitro/tensorfile"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// hostileBytes is the size each hostile body below claims to be: as large as the one that raised
// the server's peak memory to 22× its size before the body was decoded as a stream.
const hostileBytes = 60 << 20

// readBound is what the decoder may read of a hostile body before refusing it: its buffer, and
// what the server's reader fills ahead of it.
const readBound = 4 * readBufBytes

// Each hostile body is refused (400, naming the input or saying "malformed body") after reading
// a small, fixed part of it, whatever its size: a row longer than the declared one, more rows
// than the largest batch, nesting deeper than the rank, an endless string, key or number. The
// bundle is tinyBundle (img U8 [batch 5 5], programs at batch 1 and 8): no program runs, so no
// plugin is needed.
func TestHandlerRefusesHostileBodiesEarly(t *testing.T) {
	h := Handler(&Runner{b: tinyBundle()})
	row := "[" + strings.Repeat("0,", 4) + "0]"
	image := "[" + strings.Repeat(row+",", 4) + row + "]"
	for _, c := range []struct {
		name, prefix, repeat, says string
	}{
		{"a row past its 5", `{"inputs": {"img": [[[`, "0,", `input "img": more than 5 elements along axis 2`},
		{"an image past its 5 rows", `{"inputs": {"img": [[`, row + ",", `input "img": more than 5 elements along axis 1`},
		{"a batch past 8", `{"inputs": {"img": [`, image + ",", `input "img": batch size over 8: the bundle has programs for batch sizes [1 8]`},
		{"a batch past 8 of rows of 4", `{"inputs": {"img": [`, "[" + strings.Repeat("[0,0,0,0],", 4) + "[0,0,0,0]],", `input "img": shape [8 5 4] and more along axis 0, the bundle takes [8 5 5]`},
		{"nesting past the rank", `{"inputs": {"img": `, "[", `input "img": an array is not a number`},
		{"an endless string element", `{"inputs": {"img": [[["`, "a", `input "img": a string of over 16 bytes`},
		{"an endless number", `{"inputs": {"img": [[[`, "1", "malformed body: a number of over 512 bytes"},
		{"an endless input name", `{"inputs": {"`, "img", "malformed body: a key of over 4096 bytes"},
		{"an endless top-level key", `{"`, "inputs", "malformed body: a key of over 4096 bytes"},
	} {
		var read atomic.Int64
		body := io.MultiReader(strings.NewReader(c.prefix), countingReader{io.LimitReader(&repeat{s: c.repeat}, hostileBytes), &read})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/predict", body))
		var m map[string]string
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
			t.Fatalf("%s: response %q is not a JSON error: %v", c.name, rec.Body.Bytes(), err)
		}
		if rec.Code != http.StatusBadRequest || !strings.Contains(m["error"], c.says) {
			t.Errorf("%s: %d %q; want 400 saying %q", c.name, rec.Code, m["error"], c.says)
		}
		if n := read.Load(); n > readBound {
			t.Errorf("%s: read %d bytes of a %d-byte body before refusing it; want at most %d", c.name, n, hostileBytes, readBound)
		}
	}
}

// A key given twice is refused naming it, in "inputs" and at the top level, instead of the last
// one silently winning. A valid body with the same parts decodes (the control: the refusal is
// the duplicate's, not the values').
func TestDecodeRefusesDuplicateKeys(t *testing.T) {
	specs := []TensorSpec{{Name: "image", DType: tensorfile.F32, Shape: []int{-1, 2}, BatchAxis: 0}, {Name: "mask", DType: tensorfile.BOOL, Shape: []int{-1}, BatchAxis: 0}}
	for _, c := range []struct{ body, says string }{
		{`{"inputs": {"image": [[1, 2]], "mask": [true], "image": [[3, 4]]}}`, `input "image": given twice in "inputs"`},
		{`{"inputs": {"mask": [true], "mask": [false], "image": [[1, 2]]}}`, `input "mask": given twice in "inputs"`},
		{`{"inputs": {"image": [[1, 2]], "mask": [true]}, "inputs": {"image": [[3, 4]], "mask": [true]}}`, `duplicate key "inputs"`},
		{`{"inputs": {"image": [[1, 2]], "\u0069mage": [[3, 4]], "mask": [true]}}`, `input "image": given twice`}, // the same key, escaped
	} {
		_, err := decodeRequest(strings.NewReader(c.body), specs, []int{1})
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want an error saying %q", c.body, err, c.says)
		}
	}
	if _, err := decodeRequest(strings.NewReader(" \n"), specs, []int{1}); err == nil || err.Error() != `the body is empty (it must be {"inputs": {...}})` {
		t.Errorf("an empty body: %v", err)
	}
	got, err := decodeRequest(strings.NewReader(`{"inputs": {"image": [[3, 4]], "mask": [true]}}`), specs, []int{1})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := Values[float32](got["image"]); fmt.Sprint(got["image"].Shape, v) != "[1 2] [3 4]" {
		t.Errorf("image decoded as %v %v", got["image"].Shape, v)
	}
	// Through the handler the duplicate is a 400 naming the key.
	row := "[" + strings.Repeat("1,", 4) + "1]"
	image := "[[" + strings.Repeat(row+",", 4) + row + "]]"
	rec := httptest.NewRecorder()
	Handler(&Runner{b: tinyBundle()}).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/predict",
		strings.NewReader(`{"inputs": {"img": `+image+`, "img": `+image+`}}`)))
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `input \"img\": given twice`) {
		t.Errorf("a duplicate input through Handler: %d %s", rec.Code, rec.Body.String())
	}
}

// serveTiny serves tinyBundle (no program ever runs: every request here is refused before Run)
// under cfg.
func serveTiny(t *testing.T, cfg ServeConfig) (*Server, string) {
	t.Helper()
	srv, addr, err := ServeWith(&Runner{b: tinyBundle()}, "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, addr.String()
}

// With MaxReading 1, one request reading its body holds the read slot and a second the one trial
// read. A third, whose body arrives at once, takes that trial once it is 25 ms old and is read
// (400: the tiny bundle's shape), and the second is answered 503 with Retry-After. A fourth,
// sending nothing, is answered 503 once its trial ends (the holder is no slower). Once the first
// is gone, a request takes the slot again.
func TestServeReadingBound(t *testing.T) {
	_, addr := serveTiny(t, ServeConfig{MaxReading: 1})
	url := "http://" + addr + "/predict"
	conn, _ := startInFlight(t, addr, []byte(`{"inputs": {}}`)) // in the handler, reading its body
	client := &http.Client{Timeout: time.Minute}
	post := func() (int, string) {
		resp, err := client.Post(url, "application/json", strings.NewReader(`{"inputs": {"img": [[[1]]]}}`))
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(data)
	}
	answer := func(br *bufio.Reader) (*http.Response, string) {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("a request on trial got no answer: %v", err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(data)
	}
	for _, c := range []struct {
		fast     bool // a third request, whose body arrives at once, comes
		wantBusy string
	}{{true, "gave its trial read to a newer request"}, {false, "did not arrive within its 200ms trial read"}} {
		trial, trialReader := startInFlight(t, addr, []byte(`{"inputs": {}}`))
		defer trial.Close()
		trial.SetReadDeadline(time.Now().Add(time.Minute)) // a hang guard
		if c.fast {
			if code, data := post(); code != http.StatusBadRequest || !strings.Contains(data, `input \"img\": shape [1 1 1]`) {
				t.Errorf("a fast request past the slot and the trial: %d %s; want it read (400)", code, data)
			}
		}
		resp, data := answer(trialReader)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || !strings.Contains(data, c.wantBusy) {
			t.Errorf("a request on trial sending nothing (a fast one came: %v): %d Retry-After %q %s; want 503, Retry-After 1, %q",
				c.fast, resp.StatusCode, resp.Header.Get("Retry-After"), data, c.wantBusy)
		}
	}
	conn.Close() // the first request's body fails, its handler returns, its slot is free
	waitFor(t, "a request to be admitted after the first one left", func() bool {
		code, data := post()
		return code == http.StatusBadRequest && strings.Contains(data, `input \"img\": shape [1 1 1]`)
	})
}

// With MaxReading 1, a body that sends nothing after its headers holds the read slot; a second
// body arriving steadily but not done within its trial read (200 ms) takes that slot, and the
// first is answered 503 with Retry-After naming why: a slot goes to the faster body.
func TestServeReadSlotGoesToFasterBody(t *testing.T) {
	_, addr := serveTiny(t, ServeConfig{MaxReading: 1})
	slow, slowReader := startInFlight(t, addr, []byte(`{"inputs": {}}`))
	defer slow.Close()
	body := []byte(`{"inputs": {"img": [[[1]]]}}`)
	padded := append(bytes.Repeat([]byte(" "), 64<<10), body...)
	fast, fastReader := startInFlight(t, addr, padded)
	defer fast.Close()
	go func() { // 4 KiB every 20 ms: about 330 ms for the whole body
		for off := 0; off < len(padded); off += 4 << 10 {
			if _, err := fast.Write(padded[off:min(off+4<<10, len(padded))]); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	slow.SetReadDeadline(time.Now().Add(time.Minute)) // hang guards
	fast.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(slowReader, nil)
	if err != nil {
		t.Fatalf("the slow body got no answer: %v", err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(data), "read slot went to one over 2 times as fast") {
		t.Errorf("the slow body: %d Retry-After %q %s; want 503 naming the faster body", resp.StatusCode, resp.Header.Get("Retry-After"), data)
	}
	resp, err = http.ReadResponse(fastReader, nil)
	if err != nil {
		t.Fatalf("the fast body got no answer: %v", err)
	}
	data, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), `input \"img\": shape [1 1 1]`) {
		t.Errorf("the fast body: %d %s; want it read whole (400: the tiny bundle's shape)", resp.StatusCode, data)
	}
}

// A client that sends its headers and part of its body, then nothing, is answered 408 and cut
// once the body timeout passes, instead of holding its connection for ever.
func TestServeBodyTimeoutCutsStalledClient(t *testing.T) {
	// The read timeout is an hour, so only the body timeout can cut the client here.
	_, addr := serveTiny(t, ServeConfig{BodyTimeout: 100 * time.Millisecond, ReadTimeout: time.Hour})
	status, data, br := slowPost(t, addr, `{"inputs": {"img": [[[1,`, false)
	if status != http.StatusRequestTimeout || !strings.Contains(data, "the request body stalled") {
		t.Errorf("a stalled body: %d %s; want 408", status, data)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after the 408 the connection is still open (read: %v)", err)
	}
}

// A client that trickles its body, a byte every 100 ms (never silent for the body timeout), is
// answered 408 once the body timeout has passed and it is under the minimum rate, rather than
// holding its read slot until the read timeout (an hour here).
func TestServeMinBodyRateCutsTricklingClient(t *testing.T) {
	_, addr := serveTiny(t, ServeConfig{BodyTimeout: 300 * time.Millisecond, ReadTimeout: time.Hour})
	status, data, _ := slowPost(t, addr, `{"inputs": `, true)
	if status != http.StatusRequestTimeout || !strings.Contains(data, "under the server's minimum of 1024 bytes/s") {
		t.Errorf("a trickling body: %d %s; want 408 naming the minimum rate", status, data)
	}
}

// slowPost sends a POST /predict that declares a 1000-byte body and sends only start, then
// nothing, or (trickling) a space every 100 ms, and returns the answer and the connection's
// reader. The minute read deadline is a hang guard.
func slowPost(t *testing.T, addr, start string, trickling bool) (int, string, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /predict HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n%s", start)
	if trickling {
		go func() {
			for {
				time.Sleep(100 * time.Millisecond)
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}()
	}
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("a body sending %q then no more (trickling %v) got no answer: %v", start, trickling, err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(data), br
}

// A client that stalls before its headers end is cut by the header timeout.
func TestServeHeaderTimeoutCutsStalledClient(t *testing.T) {
	_, addr := serveTiny(t, ServeConfig{ReadHeaderTimeout: 100 * time.Millisecond, ReadTimeout: time.Hour})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /predict HTTP/1.1\r\nHost: te")
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := io.ReadAll(conn); err != nil {
		t.Errorf("a client stalled in its headers was not cut: %v", err)
	}
}

// Shutdown with a client stalled mid-body, one trickling its body (a byte every 100 ms, never
// silent for ShutdownStall) and an idle keep-alive connection returns nil once it has cut the
// two still sending (ShutdownStall after it began) and closed the idle one, and Cut counts
// them; before, it waited for the stalled client until its context ended, and for the
// trickling one for as long as it trickled.
func TestServeShutdownCutsStalledClients(t *testing.T) {
	srv, addr := serveTiny(t, ServeConfig{ShutdownStall: 300 * time.Millisecond})
	stalled, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	fmt.Fprintf(stalled, "POST /predict HTTP/1.1\r\nHost: test\r\nContent-Length: 1000\r\n\r\n{\"inputs\": ")
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	body := `{"inputs": {"img": [[[1]]]}}`
	fmt.Fprintf(idle, "POST /predict HTTP/1.1\r\nHost: test\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	waitFor(t, "both connections to be tracked, one idle", func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		n, idles := 0, 0
		for c := range srv.conns {
			n++
			if http.ConnState(c.state.Load()) == http.StateIdle {
				idles++
			}
		}
		return n == 2 && idles == 1
	})
	trickle(t, addr, 1, []byte(`{"inputs": `+strings.Repeat(" ", 1000)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a stalled and a trickling client: %v", err)
	}
	if s, i := srv.Cut(); s != 2 || i != 1 {
		t.Errorf("Cut() = %d mid-request, %d idle; want 2, 1", s, i)
	}
}

// ServeWith refuses a negative bound, naming the field.
func TestServeConfigRefusesNegative(t *testing.T) {
	for _, c := range []struct {
		cfg  ServeConfig
		says string
	}{
		{ServeConfig{MaxConcurrent: -1}, "ServeConfig.MaxConcurrent -1"},
		{ServeConfig{MaxReading: -1}, "ServeConfig.MaxReading -1: it is at least 1 (0 picks 64)"},
		{ServeConfig{MinBodyRate: -1}, "ServeConfig.MinBodyRate -1: bytes per second, at least 1 (0 picks 1024)"},
		{ServeConfig{BodyTimeout: -time.Second}, "ServeConfig.BodyTimeout -1s"},
		{ServeConfig{IdleTimeout: -time.Second}, "ServeConfig.IdleTimeout -1s"},
	} {
		if _, _, err := ServeWith(&Runner{b: tinyBundle()}, "127.0.0.1:0", c.cfg); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%+v: %v; want an error saying %q", c.cfg, err, c.says)
		}
	}
}

// waitFor polls cond, failing t (naming what) after a minute: a hang guard, not a timing.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

// The streaming decoder reads what encoding/json reads: random nested arrays of rank 3 with the
// batch on axis 1, written with random whitespace, decode to the same shape and values as
// encoding/json's own parse of the same text; a copy with one row cut short is refused as
// ragged or as the wrong shape.
func TestDecodeMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	spec := TensorSpec{Name: "v", DType: tensorfile.F64, Shape: []int{2, -1, 3}, BatchAxis: 1}
	ws := []string{"", " ", "\n", "\t ", "\r\n"}
	for trial := range 200 {
		batch := 1 + rng.IntN(4)
		var b strings.Builder
		var want []float64
		sp := func() { b.WriteString(ws[rng.IntN(len(ws))]) }
		cut := trial%2 == 1
		b.WriteString("[")
		for i := range 2 {
			if i > 0 {
				b.WriteString(",")
			}
			sp()
			b.WriteString("[")
			for j := range batch {
				if j > 0 {
					b.WriteString(",")
				}
				sp()
				b.WriteString("[")
				n := 3
				if cut && i == 1 && j == batch-1 {
					n = 2
				}
				for k := range n {
					if k > 0 {
						b.WriteString(",")
					}
					sp()
					f := (rng.Float64() - 0.5) * math.Pow(10, float64(rng.IntN(40)-20))
					want = append(want, f)
					b.WriteString(strconv.FormatFloat(f, "eEgf"[rng.IntN(4)], -1, 64))
					sp()
				}
				b.WriteString("]")
			}
			b.WriteString("]")
			sp()
		}
		b.WriteString("]")
		text := b.String()
		var ref any
		if err := json.Unmarshal([]byte(text), &ref); err != nil {
			t.Fatalf("the test wrote invalid JSON %q: %v", text, err)
		}
		got, err := decodeNested(json.RawMessage(text), spec, 1, 2, 3, 4)
		if cut {
			if err == nil || !strings.Contains(err.Error(), "ragged") {
				t.Errorf("a short row in %q: %v; want ragged", text, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		v, _ := Values[float64](got)
		var flat []float64
		var walk func(any)
		walk = func(x any) {
			if a, ok := x.([]any); ok {
				for _, e := range a {
					walk(e)
				}
				return
			}
			flat = append(flat, x.(float64))
		}
		walk(ref)
		if fmt.Sprint(flat) != fmt.Sprint(want) {
			t.Fatalf("encoding/json read %v from %q, the test wrote %v", flat, text, want)
		}
		if fmt.Sprint(got.Shape) != fmt.Sprint([]int{2, batch, 3}) || fmt.Sprint(v) != fmt.Sprint(flat) {
			t.Fatalf("%q: decoded %v %v, want %v %v", text, got.Shape, v, []int{2, batch, 3}, want)
		}
	}
}
