package exportbundle

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordingObserver keeps what a ServeObserver is told.
type recordingObserver struct {
	mu      sync.Mutex
	started int
	done    []string // "model protocol status limit"
}

func (o *recordingObserver) RequestStarted() { o.mu.Lock(); o.started++; o.mu.Unlock() }

func (o *recordingObserver) RequestDone(model, protocol string, status int, limit string, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.done = append(o.done, fmt.Sprintf("%s %s %d %s", model, protocol, status, limit))
}

// The Observer is told of health, server metadata, model metadata and readiness requests as of
// inference, each by the model it names and its kind, with its status: a scrape counts them by
// endpoint. Before, only inference requests were counted.
func TestServeObserverCountsEveryKind(t *testing.T) {
	o := &recordingObserver{}
	_, addr := serveTiny(t, ServeConfig{Observer: o})
	client := &http.Client{Timeout: time.Minute}
	do := func(method, path, body string) {
		req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	do("GET", "/v2/health/live", "")
	do("GET", "/v2/health/ready", "")
	do("GET", "/v2", "")
	do("GET", "/v2/models/tiny", "")
	do("GET", "/v2/models/tiny/versions/1/ready", "")
	do("GET", "/v2/models/nope", "")
	do("GET", "/nope", "")
	do("GET", "/v2/models/tiny/infer", "")
	do("POST", "/v2/models/tiny/infer", `{}`)
	do("POST", "/predict", `{"inputs": {"img": [[[1]]]}}`)
	want := []string{
		" health 200 ", " health 200 ", " server_metadata 200 ",
		"tiny model_metadata 200 ", "tiny model_ready 200 ", " model_metadata 404 ", " other 404 ",
		"tiny v2 405 ", "tiny v2 400 ", "tiny predict 400 ",
	}
	// A client can read its answer before the handler has returned and told the observer.
	waitFor(t, "every answer to be told", func() bool { o.mu.Lock(); defer o.mu.Unlock(); return len(o.done) >= len(want) })
	o.mu.Lock()
	defer o.mu.Unlock()
	got := slices.Sorted(slices.Values(o.done)) // a handler may tell its answer after the next one's
	slices.Sort(want)
	if !slices.Equal(got, want) || o.started != len(want) {
		t.Errorf("the observer was told of %d requests begun and these answered:\n%q\nwant %d and\n%q", o.started, got, len(want), want)
	}
}
