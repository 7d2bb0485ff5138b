package kvstore

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

func serve(t *testing.T) *Server {
	t.Helper()
	s, err := Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Two ranks swap values: each puts its own, then waits for the other's, which is put later.
func TestTwoRanksSwapValues(t *testing.T) {
	s := serve(t)
	var wg sync.WaitGroup
	got := make([][]byte, 2)
	errs := make([]error, 2)
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			c := NewClient(s.Addr())
			defer c.Close()
			if r == 1 {
				time.Sleep(200 * time.Millisecond) // rank 0 waits for a value not put yet
			}
			if errs[r] = c.Put("rank/"+string(rune('0'+r)), []byte{byte(10 + r), 0, 255}); errs[r] != nil {
				return
			}
			got[r], errs[r] = c.Get("rank/"+string(rune('0'+1-r)), 5*time.Second)
		}(r)
	}
	wg.Wait()
	for r := 0; r < 2; r++ {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		if want := []byte{byte(10 + 1 - r), 0, 255}; !bytes.Equal(got[r], want) {
			t.Errorf("rank %d read %v, want %v", r, got[r], want)
		}
	}
}

func TestTryGetAndGetTimeout(t *testing.T) {
	s := serve(t)
	c := NewClient(s.Addr())
	defer c.Close()
	if _, err := c.TryGet("absent"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("TryGet of an absent key: %v, want ErrNotFound", err)
	}
	start := time.Now()
	_, err := c.Get("absent", 300*time.Millisecond)
	if took := time.Since(start); !errors.Is(err, ErrNotFound) || took < 300*time.Millisecond || took > 3*time.Second {
		t.Fatalf("Get with a 300ms wait: err %v after %s", err, took)
	}
	if !strings.Contains(err.Error(), `"absent"`) {
		t.Errorf("the timeout does not name the key: %v", err)
	}
	if err := c.Put("k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if err := c.Put("k", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if v, err := c.TryGet("k"); err != nil || string(v) != "v2" {
		t.Fatalf("TryGet after two puts: %q, %v; want v2", v, err)
	}
	if v, err := c.Get("k", 0); err != nil || string(v) != "v2" {
		t.Fatalf("Get of a present key: %q, %v", v, err)
	}
}

// A Get waiting on one goroutine must not hold up a Put on another from the same client.
func TestWaitingGetDoesNotBlockPut(t *testing.T) {
	s := serve(t)
	c := NewClient(s.Addr())
	defer c.Close()
	done := make(chan error, 1)
	go func() {
		v, err := c.Get("later", 5*time.Second)
		if err == nil && string(v) != "x" {
			err = errors.New("wrong value " + string(v))
		}
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if err := c.Put("later", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestNoCoordinatorNamesAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c := NewClient(addr)
	c.Dial = 300 * time.Millisecond
	start := time.Now()
	_, err = c.TryGet("k")
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Fatalf("no coordinator: err = %v, want one naming %s", err, addr)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("took %s to give up", took)
	}
}

// A coordinator that dies while a rank waits gives that rank an error naming it, not a hang.
func TestCoordinatorDiesDuringGet(t *testing.T) {
	s := serve(t)
	c := NewClient(s.Addr())
	c.Slack = 500 * time.Millisecond
	defer c.Close()
	done := make(chan error, 1)
	go func() {
		_, err := c.Get("never", time.Minute)
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	s.Close()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), s.Addr()) {
			t.Fatalf("err = %v, want one naming %s", err, s.Addr())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Get hung after the coordinator died")
	}
}

// Untrusted bytes: a frame claiming more than MaxSize closes the connection, the server lives on.
func TestOversizedFrameRefused(t *testing.T) {
	s := serve(t)
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	nc.Write([]byte{verbTryGet, 0xff, 0xff, 0xff, 0xff})
	nc.SetReadDeadline(time.Now().Add(3 * time.Second))
	if n, err := nc.Read(make([]byte, 8)); err == nil {
		t.Fatalf("server answered %d bytes to an oversized frame", n)
	}
	nc.Close()
	c := NewClient(s.Addr())
	defer c.Close()
	if err := c.Put("still", []byte("up")); err != nil {
		t.Fatalf("server after a bad frame: %v", err)
	}
}
