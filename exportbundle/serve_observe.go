package exportbundle

import (
	"net/http"
	"strings"
	"time"
)

// The kinds of request the Observer is told of besides inference ("predict", "v2"), as its
// protocol: health (GET /v2/health/live, /v2/health/ready), server metadata (GET /v2), a model's
// metadata (GET /v2/models/NAME[/versions/1]) and readiness (.../ready), and any other path
// (other: a 404).
const (
	KindHealth         = "health"
	KindServerMetadata = "server_metadata"
	KindModelMetadata  = "model_metadata"
	KindModelReady     = "model_ready"
	KindOther          = "other"
)

// observedWriter is one request's report to the Observer, filled in as it is answered: the
// status written, and what bounded knows (the model, protocol and refusing bound).
type observedWriter struct {
	http.ResponseWriter
	model, protocol, limit string
	status                 int // 0 until written
}

func (w *observedWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *observedWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (deadlines, full duplex, flush).
func (w *observedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// observe tells the Observer of every request h answers, inference or not: begun, then answered
// with its status, by model and kind.
func (s *service) observe(h http.Handler) http.Handler {
	o := s.cfg.Observer
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		start := time.Now()
		o.RequestStarted()
		rec := &observedWriter{ResponseWriter: w}
		rec.model, rec.protocol = s.kind(req.URL.Path)
		defer func() {
			status := rec.status
			if status == 0 {
				status = http.StatusOK
			}
			o.RequestDone(rec.model, rec.protocol, status, rec.limit, time.Since(start))
		}()
		h.ServeHTTP(rec, req)
	})
}

// kind is the model a request's path names ("" for none served) and its kind, as routeV2 and
// model route it.
func (s *service) kind(path string) (model, kind string) {
	switch {
	case path == "/predict":
		if len(s.names) == 1 {
			return s.names[0], "predict"
		}
		return "", "predict"
	case path == "/v2/health/live" || path == "/v2/health/ready":
		return "", KindHealth
	case path == "/v2":
		return "", KindServerMetadata
	case !strings.HasPrefix(path, "/v2/models/"):
		return "", KindOther
	}
	parts := strings.Split(strings.TrimPrefix(path, "/v2/models/"), "/")
	name, rest := parts[0], parts[1:]
	if _, ok := s.models[name]; !ok {
		name = ""
	}
	if len(rest) >= 2 && rest[0] == "versions" {
		rest = rest[2:]
	}
	switch strings.Join(rest, "/") {
	case "":
		return name, KindModelMetadata
	case "ready":
		return name, KindModelReady
	case "infer":
		return name, "v2"
	}
	return name, KindOther
}
