package kvstore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// MaxSize bounds a key or a value: XLA's entries are topology protos and NCCL ids, far below.
const MaxSize = 64 << 20

// ErrNotFound is TryGet's answer for an absent key, and Get's when its wait ran out.
var ErrNotFound = errors.New("kvstore: key not found")

const (
	verbPut    byte = 'P'
	verbTryGet byte = 'T'
	verbGet    byte = 'G' // followed by the wait in milliseconds, uint32

	statusOK       byte = 0
	statusNotFound byte = 1
	statusBad      byte = 2
)

// Server is the store rank 0 runs. Close stops it.
type Server struct {
	ln      net.Listener
	mu      sync.Mutex
	changed *sync.Cond
	values  map[string][]byte
	closed  bool
	conns   map[net.Conn]struct{}
}

// Serve listens on addr (host:port; ":0" picks a port, see Addr) and serves until Close.
func Serve(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("kvstore: serving the coordinator at %s: %w", addr, err)
	}
	s := &Server{ln: ln, values: map[string][]byte{}, conns: map[net.Conn]struct{}{}}
	s.changed = sync.NewCond(&s.mu)
	go s.accept()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops serving; waiting Gets end with an error.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.changed.Broadcast()
	s.mu.Unlock()
	return s.ln.Close()
}

func (s *Server) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		go s.serve(c)
	}
}

func (s *Server) serve(c net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	for {
		verb, err := r.ReadByte()
		if err != nil {
			return
		}
		var wait uint32
		if verb == verbGet {
			if err := binary.Read(r, binary.BigEndian, &wait); err != nil {
				return
			}
		}
		key, err := readFrame(r)
		if err != nil {
			return
		}
		var status byte
		var value []byte
		switch verb {
		case verbPut:
			v, err := readFrame(r)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.values[string(key)] = v
			s.changed.Broadcast()
			s.mu.Unlock()
		case verbTryGet, verbGet:
			value, status = s.lookup(string(key), time.Duration(wait)*time.Millisecond)
		default:
			status = statusBad
		}
		if err := writeAnswer(w, status, value); err != nil || status == statusBad {
			return
		}
	}
}

// lookup waits up to wait for key; a zero wait answers at once.
func (s *Server) lookup(key string, wait time.Duration) ([]byte, byte) {
	deadline := time.Now().Add(wait)
	timer := time.AfterFunc(wait, func() {
		s.mu.Lock()
		s.changed.Broadcast()
		s.mu.Unlock()
	})
	defer timer.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if v, ok := s.values[key]; ok {
			return v, statusOK
		}
		if s.closed || !time.Now().Before(deadline) {
			return nil, statusNotFound
		}
		s.changed.Wait()
	}
}

func readFrame(r io.Reader) ([]byte, error) {
	var n uint32
	if err := binary.Read(r, binary.BigEndian, &n); err != nil {
		return nil, err
	}
	if n > MaxSize {
		return nil, fmt.Errorf("kvstore: a frame of %d bytes, over MaxSize (%d)", n, MaxSize)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}

func writeFrame(w *bufio.Writer, b []byte) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(b)))
	w.Write(n[:])
	w.Write(b)
}

func writeAnswer(w *bufio.Writer, status byte, value []byte) error {
	w.WriteByte(status)
	writeFrame(w, value)
	return w.Flush()
}

// Client talks to the coordinator at one address. Each request has a connection to itself
// (taken from the idle ones or dialled), so a Get waiting on one thread never holds up a Put on
// another: XLA calls the store from several threads at once.
type Client struct {
	addr string
	// Dial bounds connecting to the coordinator, retried until it passes: ranks start in any
	// order, so rank 0 may not listen yet.
	Dial time.Duration
	// Slack is how much longer than a request's own wait its answer may take before the
	// coordinator counts as dead.
	Slack time.Duration

	mu   sync.Mutex
	idle []*conn
}

type conn struct {
	net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

// NewClient returns a client of the coordinator at addr (host:port), with a 60 s dial window and
// 10 s of slack.
func NewClient(addr string) *Client {
	return &Client{addr: addr, Dial: 60 * time.Second, Slack: 10 * time.Second}
}

// Addr is the coordinator's address.
func (c *Client) Addr() string { return c.addr }

// Put stores value under key, replacing any value before.
func (c *Client) Put(key string, value []byte) error {
	_, err := c.do(verbPut, key, value, 0)
	return err
}

// TryGet returns key's value, or ErrNotFound at once.
func (c *Client) TryGet(key string) ([]byte, error) { return c.do(verbTryGet, key, nil, 0) }

// Get waits up to timeout for key to be put and returns its value; ErrNotFound (wrapped, naming
// the key and the wait) when the wait runs out.
func (c *Client) Get(key string, timeout time.Duration) ([]byte, error) {
	timeout = max(timeout, 0)
	timeout = min(timeout, time.Duration(^uint32(0))*time.Millisecond)
	v, err := c.do(verbGet, key, nil, timeout)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: %q was not put within %s (coordinator %s)", ErrNotFound, key, timeout, c.addr)
	}
	return v, err
}

// Close drops the idle connections.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range c.idle {
		k.Close()
	}
	c.idle = nil
	return nil
}

func (c *Client) do(verb byte, key string, value []byte, wait time.Duration) ([]byte, error) {
	if len(key) > MaxSize || len(value) > MaxSize {
		return nil, fmt.Errorf("kvstore: key %q or its value is over MaxSize (%d bytes)", key, MaxSize)
	}
	k, err := c.take()
	if err != nil {
		return nil, err
	}
	out, err := k.exchange(verb, key, value, wait, c.Slack)
	if err != nil && !errors.Is(err, ErrNotFound) {
		k.Close()
		return nil, fmt.Errorf("kvstore: coordinator %s: %w (is rank 0 alive and serving there?)", c.addr, err)
	}
	c.mu.Lock()
	c.idle = append(c.idle, k)
	c.mu.Unlock()
	return out, err
}

func (c *Client) take() (*conn, error) {
	c.mu.Lock()
	if n := len(c.idle); n > 0 {
		k := c.idle[n-1]
		c.idle = c.idle[:n-1]
		c.mu.Unlock()
		return k, nil
	}
	c.mu.Unlock()
	deadline := time.Now().Add(c.Dial)
	for {
		nc, err := net.DialTimeout("tcp", c.addr, max(time.Until(deadline), time.Millisecond))
		if err == nil {
			return &conn{Conn: nc, r: bufio.NewReader(nc), w: bufio.NewWriter(nc)}, nil
		}
		if time.Until(deadline) < 100*time.Millisecond {
			return nil, fmt.Errorf("kvstore: no coordinator answered at %s within %s: %w (rank 0 serves it; check the launcher's coordinator address)", c.addr, c.Dial, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (k *conn) exchange(verb byte, key string, value []byte, wait, slack time.Duration) ([]byte, error) {
	k.SetDeadline(time.Now().Add(wait + slack))
	k.w.WriteByte(verb)
	if verb == verbGet {
		var ms [4]byte
		binary.BigEndian.PutUint32(ms[:], uint32(wait/time.Millisecond))
		k.w.Write(ms[:])
	}
	writeFrame(k.w, []byte(key))
	if verb == verbPut {
		writeFrame(k.w, value)
	}
	if err := k.w.Flush(); err != nil {
		return nil, err
	}
	status, err := k.r.ReadByte()
	if err != nil {
		return nil, err
	}
	v, err := readFrame(k.r)
	if err != nil {
		return nil, err
	}
	switch status {
	case statusOK:
		return v, nil
	case statusNotFound:
		return nil, ErrNotFound
	}
	return nil, fmt.Errorf("the coordinator refused verb %q", verb)
}
