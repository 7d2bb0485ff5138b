package exportbundle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MaxRequestBytes bounds a /predict request body. The declared shapes bound what is kept of a
// body far below this; the byte bound is for what is only read past (whitespace).
const MaxRequestBytes = 64 << 20

// ServeConfig bounds what a client can cost a server: how many request bodies it reads at once,
// how many requests it runs at once, and how long a client may take or stall. A zero field means
// its default.
type ServeConfig struct {
	// MaxConcurrent is how many requests run at once. A request whose body is read waits for
	// one of these run slots; reading a body never holds one, so slow clients cannot starve the
	// runs. Default: DefaultMaxConcurrent().
	MaxConcurrent int
	// MaxReading is how many requests may hold a read slot, reading their body or holding it
	// decoded while they wait for a run slot, at once. One past it reads on trial for at most
	// 200 ms beside the slots (as many trials as slots): a body read whole by then goes on to
	// run, one still arriving takes the slot of a body under half its rate (answered 503) or
	// is answered 503 itself, so slow bodies cannot keep fast ones out (see readSlots). Past
	// the slots and the trials a request is answered 503 with Retry-After at once, its body
	// unread. Each holds at most the bundle's largest batch of its inputs, so 2×MaxReading
	// bounds the memory bodies take. Default: DefaultMaxReading.
	MaxReading int
	// ReadHeaderTimeout bounds reading a request's headers. Default 10s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, headers and body. Default 60s.
	ReadTimeout time.Duration
	// BodyTimeout is the longest a body may send nothing; past it the request is cut (408).
	// Default 10s.
	BodyTimeout time.Duration
	// MinBodyRate, in bytes per second, is what a body must average once it has had
	// BodyTimeout to get going: by t after its first read it must have sent MinBodyRate ×
	// (t − BodyTimeout) bytes, or it is cut (408). It frees the read slot of a client that
	// trickles a byte just often enough never to be silent. Default 1024 (1 KiB/s, below any
	// real link); 1 all but turns it off.
	MinBodyRate int
	// WriteTimeout bounds the time from a request's headers to the end of its answer. Default 2m.
	WriteTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its next request. Default 60s.
	IdleTimeout time.Duration
	// Observer, when set, is told of every request: inference (/predict, /v2/.../infer),
	// health, metadata and readiness alike, by model and kind: when it begins and how it was
	// answered. Nil: none.
	Observer ServeObserver
	// ShutdownStall is, during Shutdown, how long a client that is still sending its request
	// (headers or body) has to finish it before it is cut, however fast it sends: a request not
	// read whole is not one the server owes an answer. Requests already read are always
	// answered. Default 2s.
	ShutdownStall time.Duration
}

// ServeObserver is told of a server's requests (ServeConfig.Observer): metrics, say. It is
// called on each request's goroutine, so it must be safe for concurrent use and quick.
type ServeObserver interface {
	// RequestStarted: a request began (its headers are read).
	RequestStarted()
	// RequestDone: that request was answered with status, d after it began. model is the
	// served model its path names ("" for none: health, server metadata, an unknown model).
	// protocol is its kind: "predict" or "v2" for inference, or KindHealth,
	// KindServerMetadata, KindModelMetadata, KindModelReady or KindOther. limit names the
	// server bound that refused it, "" for none: "max_reading" (503: past the read slots and
	// trials, or a slot or trial taken by a faster body), "max_request_bytes" (413),
	// "body_timeout" (408: a body stalled or under the minimum rate).
	RequestDone(model, protocol string, status int, limit string, d time.Duration)
}

// DefaultMaxConcurrent is twice GOMAXPROCS, at least 4: enough to keep every core busy while
// some requests are still arriving, few enough that their memory stays bounded.
func DefaultMaxConcurrent() int { return max(4, 2*runtime.GOMAXPROCS(0)) }

// DefaultMaxReading is the default bound on bodies being read: far more than the clients a
// server runs for at once, so that dozens of slow clients leave room for the fast ones, and few
// enough that as many of the bundle's largest batches fit in memory.
const DefaultMaxReading = 64

// defaultMinBodyRate, 1 KiB/s, is below any real link: only a deliberate trickle falls under it.
const defaultMinBodyRate = 1 << 10

// withDefaults fills the zero fields and refuses negative ones, naming the field.
func (c ServeConfig) withDefaults() (ServeConfig, error) {
	if c.MaxConcurrent < 0 {
		return c, fmt.Errorf("exportbundle: ServeConfig.MaxConcurrent %d: it is at least 1 (0 picks %d)", c.MaxConcurrent, DefaultMaxConcurrent())
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = DefaultMaxConcurrent()
	}
	if c.MaxReading < 0 {
		return c, fmt.Errorf("exportbundle: ServeConfig.MaxReading %d: it is at least 1 (0 picks %d)", c.MaxReading, DefaultMaxReading)
	}
	if c.MaxReading == 0 {
		c.MaxReading = DefaultMaxReading
	}
	if c.MinBodyRate < 0 {
		return c, fmt.Errorf("exportbundle: ServeConfig.MinBodyRate %d: bytes per second, at least 1 (0 picks %d)", c.MinBodyRate, defaultMinBodyRate)
	}
	if c.MinBodyRate == 0 {
		c.MinBodyRate = defaultMinBodyRate
	}
	for _, f := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"ReadHeaderTimeout", &c.ReadHeaderTimeout, 10 * time.Second},
		{"ReadTimeout", &c.ReadTimeout, 60 * time.Second},
		{"BodyTimeout", &c.BodyTimeout, 10 * time.Second},
		{"WriteTimeout", &c.WriteTimeout, 2 * time.Minute},
		{"IdleTimeout", &c.IdleTimeout, 60 * time.Second},
		{"ShutdownStall", &c.ShutdownStall, 2 * time.Second},
	} {
		if *f.v < 0 {
			return c, fmt.Errorf("exportbundle: ServeConfig.%s %v: a timeout is positive (0 picks %v)", f.name, *f.v, f.def)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	return c, nil
}

// DefaultServeConfig is the configuration a zero ServeConfig means, every field filled.
func DefaultServeConfig() ServeConfig {
	c, _ := ServeConfig{}.withDefaults()
	return c
}

// Server is a running server of a bundle: the Open Inference Protocol and /predict (see ServeWith).
type Server struct {
	http *http.Server
	cfg  ServeConfig

	mu    sync.Mutex
	conns map[*trackedConn]struct{}

	ln     net.Listener  // the listener Serve accepts from
	served chan struct{} // closed when net/http's Serve has returned

	unread, idle atomic.Int64 // connections Shutdown cut mid-request, and idle ones it closed
	stopping     atomic.Bool  // Shutdown has begun
}

// trackedConn is an accepted connection with what Shutdown needs to tell a client still sending
// its request from a request the server owes an answer.
type trackedConn struct {
	net.Conn
	state    atomic.Int32 // its http.ConnState
	answered atomic.Bool  // its request is read: the server owes it the answer
	handled  atomic.Bool  // its request reached a handler (net/http drops one read during shutdown)
	begun    atomic.Bool  // a byte of its next request has been read since it was last idle
	cut      atomic.Bool
}

func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.begun.Store(true)
	}
	return n, err
}

type trackingListener struct {
	net.Listener
	s *Server
}

func (l trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if ne := net.Error(nil); err != nil && l.s.stopping.Load() && errors.As(err, &ne) && ne.Timeout() {
		// Shutdown's deadline: the connections that were waiting to be accepted are in.
		l.Listener.Close()
		return nil, net.ErrClosed
	}
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c}
	l.s.mu.Lock()
	l.s.conns[tc] = struct{}{}
	l.s.mu.Unlock()
	return tc, nil
}

type connKey struct{}

// Serve is ServeWith(r, addr, ServeConfig{}): the default bounds.
func Serve(r *Runner, addr string) (*Server, net.Addr, error) {
	return ServeWith(r, addr, ServeConfig{})
}

// ServeWith answers HTTP on addr (e.g. "127.0.0.1:8080"; port 0 picks one) with the Open
// Inference Protocol for r (see ModelsHandler) and r's /predict (see Handler) under cfg's bounds, in a
// goroutine, and returns the server (stop it with Shutdown or Close) and the address it listens
// on. It batches nothing: each request is one Run.
func ServeWith(r *Runner, addr string, cfg ServeConfig) (*Server, net.Addr, error) {
	if r == nil {
		return nil, nil, errors.New("exportbundle: Serve: nil Runner")
	}
	return ServeModels([]*Runner{r}, addr, cfg)
}

// ServeModels is ServeWith for several bundles, each served by its name (Runner.Name) on the
// Open Inference Protocol's /v2/models/{name}/...; /predict answers only when there is one. Two
// runners of one name are refused, and so is a bundle whose program takes other inputs than its
// manifest declares (CheckProgramInputs). The bounds of cfg are shared by all the models: a read
// or run slot is the server's, not a model's.
func ServeModels(rs []*Runner, addr string, cfg ServeConfig) (*Server, net.Addr, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	svc, err := newService(rs, cfg)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range rs {
		if err := CheckProgramInputs(r); err != nil {
			return nil, nil, err
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("exportbundle: Serve: %w", err)
	}
	s := &Server{cfg: cfg, conns: map[*trackedConn]struct{}{}, ln: ln, served: make(chan struct{})}
	s.http = &http.Server{
		Handler:           s.markHandled(svc.mux()),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			tc, ok := c.(*trackedConn)
			if !ok {
				return
			}
			prev := http.ConnState(tc.state.Swap(int32(st)))
			switch st {
			case http.StateIdle:
				tc.answered.Store(false)
				tc.handled.Store(false)
				// Not closed here during Shutdown: the client may have sent part of its next
				// request before the signal (closeSilent closes it if no byte of one comes).
				tc.begun.Store(false)
			case http.StateClosed, http.StateHijacked:
				// Closed unanswered during Shutdown, and not by it: a client that left while
				// still sending its request (or one net/http dropped unread).
				if s.stopping.Load() && !tc.cut.Load() && !tc.handled.Load() && (prev == http.StateNew || prev == http.StateActive) {
					s.unread.Add(1)
				}
				s.mu.Lock()
				delete(s.conns, tc)
				s.mu.Unlock()
			}
		},
	}
	go func() {
		defer close(s.served)
		s.http.Serve(trackingListener{ln, s})
	}()
	return s, ln.Addr(), nil
}

// Close closes the listener and every connection at once.
func (s *Server) Close() error { return s.http.Close() }

// Shutdown stops accepting (the connections already waiting to be accepted are taken in),
// answers every request already begun whose client finishes sending it within ShutdownStall, and
// then cuts a client still sending its request, however fast it sends, so that neither a stalled
// client nor one trickling its body can hold the server up. A connection on which no byte of a
// request has arrived (idle between keep-alive requests, or new and silent) is closed
// shutdownIdleGrace in, and every answer from now on closes its connection. It returns when no
// connection is left, or ctx's error when ctx ends first (then the connections left are still
// open: Close them). Cut reports what it cut.
//
// net/http's own Shutdown is called only once no connection is left: it closes at once a
// keep-alive connection whose next request has begun but whose headers are not read whole, and
// drops unanswered a request whose headers it reads after it began.
func (s *Server) Shutdown(ctx context.Context) error {
	start := time.Now()
	s.stopping.Store(true)
	if dl, ok := s.ln.(interface{ SetDeadline(time.Time) error }); !ok || dl.SetDeadline(time.Now().Add(shutdownAcceptDrain)) != nil {
		s.ln.Close()
	}
	tick := time.NewTicker(shutdownTick)
	defer tick.Stop()
	grace := min(shutdownIdleGrace, s.cfg.ShutdownStall)
	for {
		elapsed := time.Since(start)
		if elapsed >= grace {
			s.closeSilent()
		}
		if elapsed >= s.cfg.ShutdownStall {
			s.cutUnread()
		}
		if s.quiet() {
			select {
			case <-s.served:
				return s.http.Shutdown(ctx)
			default:
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

const (
	// shutdownAcceptDrain is how long Shutdown still accepts: the connections a client made
	// before it began and the kernel holds for the listener are served, not reset.
	shutdownAcceptDrain = 20 * time.Millisecond
	// shutdownIdleGrace is how long a connection with no byte of a request read may stay once
	// Shutdown began: bytes a client sent just before are read in far less.
	shutdownIdleGrace = 50 * time.Millisecond
	// shutdownTick is how often Shutdown looks at its connections.
	shutdownTick = 10 * time.Millisecond
)

// quiet reports whether no connection is left.
func (s *Server) quiet() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns) == 0
}

// closeSilent closes every connection on which no byte of a request has been read: idle
// keep-alive ones, and new ones whose client has sent nothing.
func (s *Server) closeSilent() {
	s.cutWhere(&s.idle, func(c *trackedConn, st http.ConnState) bool {
		return (st == http.StateIdle || st == http.StateNew) && !c.begun.Load()
	})
}

// cutUnread closes every connection whose request is not read whole: headers still arriving,
// a body still being read (at any rate), or the rest of a refused body being dropped.
func (s *Server) cutUnread() {
	s.cutWhere(&s.unread, func(c *trackedConn, st http.ConnState) bool {
		return (st == http.StateNew || st == http.StateActive || st == http.StateIdle) && !c.answered.Load()
	})
}

// cutWhere closes each connection not cut yet that cut picks, counting it in n.
func (s *Server) cutWhere(n *atomic.Int64, cut func(*trackedConn, http.ConnState) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.cut.Load() || !cut(c, http.ConnState(c.state.Load())) {
			continue
		}
		c.cut.Store(true)
		n.Add(1)
		c.Conn.Close()
	}
}

// Cut reports what Shutdown cut: connections whose client was still sending its request (those
// it cut ShutdownStall in, and those whose client left before sending it whole), and
// connections it closed on which no request had begun (idle keep-alive ones, new silent ones).
func (s *Server) Cut() (unread, idle int) { return int(s.unread.Load()), int(s.idle.Load()) }

// markHandled marks the connection of each request that reaches h, so that Shutdown can tell a
// request net/http dropped unread from one a handler answered, and once Shutdown has begun
// answers with "Connection: close": a connection serves no request past the one it has begun.
func (s *Server) markHandled(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if tc, ok := req.Context().Value(connKey{}).(*trackedConn); ok {
			tc.handled.Store(true)
		}
		if s.stopping.Load() {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, req)
	})
}

// Config is the server's configuration, its defaults filled.
func (s *Server) Config() ServeConfig { return s.cfg }

// Handler answers POST /predict with the default bounds of ServeConfig. The body is
// {"inputs": {"<name>": <nested arrays>}}, each input batch-first as the bundle declares it (its
// batch axis's length is the batch size, which must be one the bundle has a program for and the
// same for every input). The answer is {"outputs": {"<name>": <nested arrays>}}. Numbers are
// JSON numbers, BOOL is true/false, and a non-finite float is the string "NaN", "+Inf" or "-Inf"
// (accepted on input too). A malformed body (a duplicate key included), a missing or unknown
// input, a wrong shape or a wrong dtype is a 400 whose {"error": "..."} names the input; a body
// over MaxRequestBytes is a 413, one that stalls past the body timeout or arrives under the
// minimum rate a 408, a request past the bound on bodies being read a 503 with Retry-After, and
// a failure to execute a 500. The body is read as a stream and refused at the first byte that
// breaks the bundle's shapes, so what a request costs in memory is bounded by the bundle, not by
// the body. Served over HTTP, the rest of a body refused with a 400 is read and dropped after
// the answer (up to MaxRequestBytes), so that a client that reads only once it has sent its
// whole body still gets the 400.
func Handler(r *Runner) http.Handler {
	cfg, _ := ServeConfig{}.withDefaults()
	return newHandler(r, cfg)
}

// newHandler is one runner's handler under cfg (filled).
func newHandler(r *Runner, cfg ServeConfig) http.Handler {
	svc, err := newService([]*Runner{r}, cfg)
	if err != nil { // one runner has no name to clash with
		panic(err)
	}
	return svc.mux()
}

// A request with a body (/predict, /v2/.../infer) goes through two bounds, one for reading and
// one for running:
//
//	headers ─▶ reading: body streamed into tensors ─▶ waiting ─▶ running: Run, encode, answer
//	           └──── a read slot or trial (MaxReading) ─────────┘ └─ a run slot (MaxConcurrent) ─┘
//
// A request takes a read slot, or past them a trial read (readSlots), before it reads a byte of
// its body (503 when neither can be had, the body unread) and gives it back once it holds a run
// slot, for which it waits. So at most 2×MaxReading bodies are being read or wait decoded, at
// most MaxConcurrent run (and write their answer), and a client that sends slowly holds a read
// slot, never a run slot, and that only for so long: silent for BodyTimeout, or under
// MinBodyRate past it, it is cut, and a body at least twice as fast that needs its slot takes
// it. Memory: a body being read holds the decoder's 32 KiB buffer and what it has decoded, which
// the decoder refuses past the bundle's largest batch, so bodies cost at most
// 2×MaxReading+MaxConcurrent of those, whatever their clients send. The slots are the server's,
// shared by its models.
type service struct {
	cfg     ServeConfig
	models  map[string]*Runner
	names   []string // sorted
	reading *readSlots
	running chan struct{}
}

func newService(rs []*Runner, cfg ServeConfig) (*service, error) {
	if len(rs) == 0 {
		return nil, errors.New("exportbundle: Serve: no models")
	}
	s := &service{cfg: cfg, models: map[string]*Runner{}, reading: newReadSlots(cfg.MaxReading), running: make(chan struct{}, cfg.MaxConcurrent)}
	for i, r := range rs {
		if r == nil {
			return nil, fmt.Errorf("exportbundle: Serve: runner %d is nil", i)
		}
		if _, dup := s.models[r.Name()]; dup {
			return nil, fmt.Errorf("exportbundle: Serve: two bundles are named %q: a model is served by its manifest name, so rename one (nitro export --name)", r.Name())
		}
		s.models[r.Name()] = r
		s.names = append(s.names, r.Name())
	}
	slices.Sort(s.names)
	return s, nil
}

func (s *service) mux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/predict", s.predict)
	s.routeV2(mux)
	if s.cfg.Observer == nil {
		return mux
	}
	return s.observe(mux)
}

// answer is a successful request's response: its body, Content-Type, and for the binary tensor
// data extension the length of the JSON header that starts the body (0: none).
type answer struct {
	body        []byte
	contentType string
	headerLen   int
}

// bodyRun decodes a request's body (calling read once it is read whole and accepted: an error
// from read is the answer), runs it and encodes the answer.
type bodyRun func(body io.Reader, read func() *RequestError) (answer, *RequestError)

func (s *service) predict(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "use POST")
		return
	}
	if len(s.names) != 1 {
		writeError(w, http.StatusNotFound, fmt.Sprintf("/predict serves a single model; this server has %d (%s): use POST /v2/models/{name}/infer",
			len(s.names), strings.Join(s.names, ", ")))
		return
	}
	r := s.models[s.names[0]]
	if r.b.Generator != nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("model %q %v", r.Name(), errNotPredict))
		return
	}
	s.bounded(w, req, r.Name(), "predict", func(body io.Reader, read func() *RequestError) (answer, *RequestError) {
		out, rerr := runJSON(r, body, read, s.cfg.BodyTimeout)
		return answer{body: out, contentType: "application/json"}, rerr
	})
}

// bounded answers one request with a body for model under the server's bounds (see service): a
// read slot, the body timeouts and MaxRequestBytes while run decodes, then a run slot. It tells
// the Observer, if any, the request's model and protocol and which bound refused it.
func (s *service) bounded(w http.ResponseWriter, req *http.Request, model, protocol string, run bodyRun) {
	status, limit := http.StatusOK, ""
	if rec, ok := w.(*observedWriter); ok {
		rec.model, rec.protocol = model, protocol
		defer func() { rec.limit = limit }()
	}
	fail := func(code int, msg string) {
		status = code
		switch code {
		case http.StatusRequestEntityTooLarge:
			limit = "max_request_bytes"
		case http.StatusRequestTimeout:
			limit = "body_timeout"
		}
		writeError(w, code, msg)
	}
	defer func() {
		if p := recover(); p != nil {
			fail(http.StatusInternalServerError, fmt.Sprintf("internal error: %v", p))
		}
	}()
	rc := http.NewResponseController(w)
	slot := &bodyRead{start: time.Now(), interrupt: func() { rc.SetReadDeadline(time.Now()) }}
	if !s.reading.admit(slot) {
		w.Header().Set("Retry-After", "1")
		status, limit = http.StatusServiceUnavailable, "max_reading"
		writeError(w, status, fmt.Sprintf("busy: %d request bodies being read or waiting to run, the server's bound, and as many on trial (retry after 1s)", s.cfg.MaxReading))
		return
	}
	ran := false // the run slot replaced the read slot
	defer func() {
		if ran {
			<-s.running
		} else {
			s.reading.release(slot)
		}
	}()
	cfg := s.cfg
	body := &stallReader{r: http.MaxBytesReader(w, req.Body, MaxRequestBytes), rc: rc, slot: slot,
		stall: cfg.BodyTimeout, minRate: cfg.MinBodyRate, end: time.Now().Add(cfg.ReadTimeout)}
	tc, _ := req.Context().Value(connKey{}).(*trackedConn)
	out, rerr := run(body, func() *RequestError {
		body.done()
		if busy := s.reading.read(slot); busy != nil {
			return busyFailure(busy)
		}
		if tc != nil {
			tc.answered.Store(true)
		}
		select {
		case s.running <- struct{}{}:
		case <-req.Context().Done(): // the client left: no one to answer
			return &RequestError{Status: http.StatusServiceUnavailable, Msg: "the client left while its request waited to run", Err: req.Context().Err()}
		}
		s.reading.release(slot)
		ran = true
		return nil
	})
	if busy := (*busyError)(nil); rerr != nil && errors.As(rerr, &busy) {
		// Its slot or trial went to a faster body: the rest of this one is not read, and the
		// connection is not kept (a read deadline in the past may still be on its way).
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Connection", "close")
		limit = "max_reading"
	}
	if rerr != nil && rerr.Status == http.StatusBadRequest && body.rc.EnableFullDuplex() == nil {
		// Refused before its end, a body is still arriving. Closing on it resets the
		// connection, and a client that reads only once it has sent everything (Python's
		// requests, for one) never sees the 400: answer first, then read the rest and drop
		// it, under the same bounds (MaxRequestBytes, the body and read timeouts) and still
		// holding the read slot. Without full duplex net/http would drop the body unread.
		fail(rerr.Status, rerr.Msg)
		body.rc.Flush()
		io.Copy(io.Discard, body)
		return
	}
	if rerr != nil {
		fail(rerr.Status, rerr.Msg)
		return
	}
	w.Header().Set("Content-Type", out.contentType)
	if out.headerLen > 0 {
		w.Header().Set(inferenceHeaderLength, strconv.Itoa(out.headerLen))
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(out.body)))
	w.Write(out.body)
}

// stallReader gives each read of a body its own deadline, BodyTimeout from now (never past the
// request's end), so a client that stops sending is cut after BodyTimeout however long its
// whole request may take, and cuts a body that, past BodyTimeout from its start, averages under
// minRate: a trickle never silent for BodyTimeout would otherwise hold its read slot until the
// read timeout. It counts the bytes into slot, and stops with its busyError once the read
// bounds took its slot or trial (see readSlots). A writer without deadlines (a test recorder)
// reads without deadlines.
type stallReader struct {
	r       io.Reader
	rc      *http.ResponseController
	slot    *bodyRead
	stall   time.Duration
	minRate int
	end     time.Time
	off     bool
}

func (s *stallReader) Read(p []byte) (int, error) {
	if !s.off {
		d := time.Now().Add(s.stall)
		if d.After(s.end) {
			d = s.end
		}
		if s.rc.SetReadDeadline(d) != nil {
			s.off = true
		}
	}
	// After the deadline is set: a slot taken from this body sets stop before it sets a read
	// deadline in the past, so either stop is seen here or that deadline wakes the read below.
	if busy := s.slot.stop.Load(); busy != nil {
		return 0, busy
	}
	n, err := s.r.Read(p)
	read := s.slot.n.Add(int64(n))
	if busy := s.slot.stop.Load(); busy != nil {
		return n, busy
	}
	if late := time.Since(s.slot.start) - s.stall; err == nil && s.minRate > 0 && late > 0 && float64(read) < late.Seconds()*float64(s.minRate) {
		return n, &slowBodyError{read: read, in: time.Since(s.slot.start), min: s.minRate}
	}
	return n, err
}

// slowBodyError is a body cut for arriving under the minimum rate.
type slowBodyError struct {
	read int64
	in   time.Duration
	min  int
}

func (e *slowBodyError) Error() string {
	return fmt.Sprintf("the request body is too slow: %d bytes in %v, under the server's minimum of %d bytes/s once the body timeout has passed",
		e.read, e.in.Round(time.Millisecond), e.min)
}

// done lifts the deadline once the body is read: the server's own read of the connection while
// the program runs must not time out.
func (s *stallReader) done() {
	if !s.off {
		s.rc.SetReadDeadline(time.Time{})
	}
}

func writeError(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(map[string]string{"error": msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// RequestError is a request RunJSON refuses or fails to run; POST /predict answers it with
// Status and the body {"error": Msg}. Status is 400 for a malformed body or a refused input (Err
// is then the *InputError when one input is at fault), 413 for a body over MaxRequestBytes, 408
// for one that stalled, and 500 for a failure to execute.
type RequestError struct {
	Status int
	Msg    string
	Err    error
}

func (e *RequestError) Error() string { return e.Msg }
func (e *RequestError) Unwrap() error { return e.Err }

// runJSON is the one path from a JSON request to a JSON answer, for RunJSON and /predict alike:
// decode against the bundle's inputs (read, if set, is called once the body is read whole and
// accepted; an error from it is the answer), run, encode. stall is the body timeout a 408 names.
// A panic is a 500, not a crash.
func runJSON(r *Runner, body io.Reader, read func() *RequestError, stall time.Duration) (answer []byte, rerr *RequestError) {
	defer func() {
		if p := recover(); p != nil {
			answer, rerr = nil, &RequestError{Status: http.StatusInternalServerError, Msg: fmt.Sprintf("internal error: %v", p)}
		}
	}()
	specs := r.Inputs()
	inputs, err := decodeRequest(body, specs, r.BatchSizes())
	if err != nil {
		return nil, decodeFailure(err, stall)
	}
	if read != nil {
		if rerr := read(); rerr != nil {
			return nil, rerr
		}
	}
	batch, batchFrom := -1, ""
	for _, s := range specs {
		t, ok := inputs[s.Name]
		if !ok {
			return nil, badInput(&InputError{Input: s.Name, Msg: "missing"})
		}
		if n := t.Shape[s.BatchAxis]; batch == -1 {
			batch, batchFrom = n, s.Name
		} else if n != batch {
			return nil, badInput(&InputError{Input: s.Name, Msg: fmt.Sprintf("batch size %d, input %q has %d", n, batchFrom, batch)})
		}
	}
	out, err := r.Run(batch, inputs)
	if err != nil {
		status := http.StatusInternalServerError
		if errors.As(err, new(*InputError)) {
			status = http.StatusBadRequest
		}
		return nil, &RequestError{Status: status, Msg: err.Error(), Err: err}
	}
	var b bytes.Buffer
	b.WriteString(`{"outputs":{`)
	for i, s := range r.Outputs() {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(s.Name)
		b.Write(name)
		b.WriteByte(':')
		t := out[s.Name]
		encodeNested(&b, t, t.Shape, 0)
	}
	b.WriteString("}}\n")
	return b.Bytes(), nil
}

func badInput(e *InputError) *RequestError {
	return &RequestError{Status: http.StatusBadRequest, Msg: e.Error(), Err: e}
}

// busyFailure is the answer to a body whose read slot or trial went to a faster one.
func busyFailure(busy *busyError) *RequestError {
	return &RequestError{Status: http.StatusServiceUnavailable, Msg: busy.msg, Err: busy}
}

// decodeFailure is the answer to a body the decoder refused.
func decodeFailure(err error, stall time.Duration) *RequestError {
	var tooBig *http.MaxBytesError
	var re *readError
	var ie *InputError
	var se *syntaxError
	var slow *slowBodyError
	var fe *fieldError
	var busy *busyError
	switch {
	case errors.As(err, &busy):
		return busyFailure(busy)
	case errors.As(err, &fe):
		return &RequestError{Status: http.StatusBadRequest, Msg: fe.Error(), Err: err}
	case errors.As(err, &slow):
		return &RequestError{Status: http.StatusRequestTimeout, Msg: slow.Error(), Err: err}
	case errors.As(err, &tooBig):
		return &RequestError{Status: http.StatusRequestEntityTooLarge, Msg: fmt.Sprintf("request body over %d bytes", tooBig.Limit), Err: err}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &RequestError{Status: http.StatusRequestTimeout, Msg: fmt.Sprintf("the request body stalled: no bytes for %v, or past the read timeout", stall), Err: err}
	case errors.As(err, &re):
		return &RequestError{Status: http.StatusBadRequest, Msg: "reading the body: " + re.err.Error(), Err: err}
	case errors.As(err, &ie):
		return badInput(ie)
	case errors.As(err, &se):
		return &RequestError{Status: http.StatusBadRequest, Msg: "malformed body: " + se.msg, Err: err}
	}
	return &RequestError{Status: http.StatusBadRequest, Msg: err.Error(), Err: err}
}

// decodeNested parses one input's nested JSON arrays as its TensorSpec's dtype and rank, with the request
// decoder's rules and bounds (batches bound the batch axis; nil means no bound but maxElements).
func decodeNested(raw json.RawMessage, spec TensorSpec, batches ...int) (Tensor, error) {
	if batches == nil {
		batches = []int{maxElements}
	}
	d := &decoder{br: bufioReader(bytes.NewReader(raw))}
	t, err := d.input(spec, batches)
	if err != nil {
		return Tensor{}, err
	}
	if _, err := d.next(); err != io.EOF {
		return Tensor{}, errors.New("data after the nested arrays")
	}
	return t, nil
}
