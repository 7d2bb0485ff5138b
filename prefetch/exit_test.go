package prefetch_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nitro-go/nitro/prefetch"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errDisk = errors.New("disk gone")

// A failing BatchAt (an error or a panic) or Transfer surfaces at the consumer with its own error
// and the batch index, never a hang; Close then frees every staged batch and every goroutine ends.
func TestFailuresSurface(t *testing.T) {
	for _, p := range allPaths {
		for _, c := range []struct {
			name     string
			batchAt  func(i int) error
			transfer func(i int) error
			op       string
			want     []string
		}{
			{"BatchAt error", func(i int) error {
				if i == 6 {
					return errDisk
				}
				return nil
			}, nil, "BatchAt", []string{"prefetch: batch 6: BatchAt: disk gone"}},
			{"BatchAt panic", func(i int) error {
				if i == 6 {
					panic("boom")
				}
				return nil
			}, nil, "BatchAt", []string{"prefetch: batch 6: BatchAt: panic: boom"}},
			{"BatchAt panic(error)", func(i int) error {
				if i == 6 {
					panic(errDisk)
				}
				return nil
			}, nil, "BatchAt", []string{"prefetch: batch 6: BatchAt: panic: disk gone"}},
			{"Transfer error", nil, func(i int) error {
				if i == 6 {
					return errDisk
				}
				return nil
			}, "Transfer", []string{"prefetch: batch 6: Transfer: disk gone"}},
			{"Transfer panic", nil, func(i int) error {
				if i == 6 {
					panic("device lost")
				}
				return nil
			}, "Transfer", []string{"prefetch: batch 6: Transfer: panic: device lost"}},
		} {
			t.Run(string(p)+"/"+c.name, func(t *testing.T) {
				defer goleak.VerifyNone(t)
				f := &fakeSource{n: 20, rows: 2, hook: c.batchAt}
				d := &devices{hook: c.transfer}
				s := newStream(t, f, p, opts(4, 2, 8), d.config())
				done := make(chan struct{})
				var got []int
				var err error
				go func() {
					defer close(done)
					got, err = consume(s, d, time.Millisecond)
				}()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Fatal("the consumer hung on a failed stream")
				}
				wantErr(t, err, c.want...)
				var be *prefetch.BatchError
				if !errors.As(err, &be) || be.Index != 6 || be.Op != c.op {
					t.Errorf("error %v: want a *BatchError at index 6, op %s", err, c.op)
				}
				if strings.Contains(c.name, "panic") && len(be.Stack) == 0 {
					t.Error("a recovered panic carries no stack")
				}
				if strings.HasSuffix(c.name, "error") || strings.Contains(c.name, "(error)") {
					if !errors.Is(err, errDisk) {
						t.Errorf("errors.Is(%v, errDisk) = false; the source's own error must be reachable", err)
					}
				}
				if len(got) > 6 {
					t.Errorf("delivered %v past the failure at 6 (ordered)", got)
				}
				// The error is final.
				if _, ok, err2 := s.Next(); ok || err2 != err {
					t.Errorf("Next after the error = %v, %v; want the same error", ok, err2)
				}
				if err := s.Close(); err != nil {
					t.Error(err)
				}
				if err := s.Close(); err != nil {
					t.Errorf("second Close: %v", err)
				}
				d.check(t)
			})
		}
	}
}

// Early exit: the consumer stops mid-epoch (RequestStop, a non-finite loss) and closes. Every
// goroutine ends and every placed batch the stream held is freed.
func TestCloseMidEpoch(t *testing.T) {
	for _, p := range allPaths {
		t.Run(string(p), func(t *testing.T) {
			defer goleak.VerifyNone(t)
			f := &fakeSource{n: 50, rows: 2}
			d := &devices{}
			s := newStream(t, f, p, opts(4, 3, 8), d.config())
			for range 3 {
				it, ok, err := s.Next()
				if err != nil || !ok {
					t.Fatal(ok, err)
				}
				d.free(it.Device)
			}
			// Let the pipeline fill: DeviceBatches staged and one in the transfer's hand.
			if p != prefetch.PathInline {
				await(t, "DeviceBatches+1 = 4 placed batches staged ahead", func() bool { return d.live.Load() == 4 })
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			d.check(t)
			if _, ok, err := s.Next(); ok || !errors.Is(err, prefetch.ErrClosed) {
				t.Errorf("Next after Close = %v, %v; want ErrClosed", ok, err)
			}
			if err := s.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if n := f.calls.Load(); n >= 50 {
				t.Errorf("%d BatchAt calls: the pipeline kept going after Close", n)
			}
		})
	}
}

// A worker stuck in a slow BatchAt does not hold Close: Close returns while that BatchAt is
// still running, with every placed batch freed, and the stuck worker's goroutine ends when
// BatchAt returns, its batch dropped.
func TestCloseDoesNotWaitForAStuckWorker(t *testing.T) {
	for _, p := range allPaths {
		t.Run(string(p), func(t *testing.T) {
			defer goleak.VerifyNone(t) // after the stuck worker is released (the deferred close below)
			release := make(chan struct{})
			unstick := sync.OnceFunc(func() { close(release) })
			entered := make(chan struct{})
			var once sync.Once
			f := &fakeSource{n: 30, rows: 2, hook: func(i int) error {
				if i == 4 {
					once.Do(func() { close(entered) })
					<-release
				}
				return nil
			}}
			defer unstick()
			d := &devices{}
			s := newStream(t, f, p, opts(3, 1, 6), d.config())
			if p == prefetch.PathInline { // the consumer itself is stuck: Close comes from elsewhere
				go func() {
					<-entered
					closeWhileStuck(t, s, f)
					unstick() // BatchAt returns into a closed stream: Next reports ErrClosed
				}()
				_, err := consume(s, d, 0)
				if !errors.Is(err, prefetch.ErrClosed) {
					t.Errorf("stuck inline Next returned %v; want ErrClosed", err)
				}
				d.check(t)
				return
			}
			for range 4 {
				it, ok, err := s.Next()
				if err != nil || !ok {
					t.Fatal(ok, err)
				}
				d.free(it.Device)
			}
			<-entered
			// The others fill the window behind the straggler: on the fan-out, batches 5..9 (the
			// HostBatches = 6 credits less the stuck one) built and out of BatchAt; the producer
			// has only the stuck one.
			calls := int64(5)
			if p == prefetch.PathFanout {
				calls = 10
			}
			await(t, fmt.Sprintf("%d BatchAt calls, only the stuck one still running", calls), func() bool {
				return f.calls.Load() == calls && f.inFlight.Load() == 1
			})
			closeWhileStuck(t, s, f)
			d.check(t)
		})
	}
}

// closeWhileStuck closes s while one BatchAt of f is blocked, and fails t unless Close returns
// with that BatchAt still running: Close must not wait for it. A Close that does wait never
// returns, which the hang guard turns into a failure rather than a stuck test.
func closeWhileStuck(t *testing.T, s *prefetch.Stream[*dev], f *fakeSource) {
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(hangGuard):
		t.Errorf("Close has not returned after %v while a BatchAt is stuck: it waits for the stuck worker", hangGuard)
		return
	}
	if n := f.inFlight.Load(); n != 1 {
		t.Errorf("%d BatchAt calls running when Close returned; want the stuck one", n)
	}
}

// Close from another goroutine while the consumer waits in Next: Next returns ErrClosed and
// nothing is leaked, whichever of the two gets the staged batch. Batches from 2 on block in
// BatchAt until Close has returned, so the consumer is waiting on one when Close comes.
func TestCloseWhileNextWaits(t *testing.T) {
	for _, p := range allPaths {
		t.Run(string(p), func(t *testing.T) {
			defer goleak.VerifyNone(t)
			closed := make(chan struct{})
			f := &fakeSource{n: 10, rows: 2, hook: func(i int) error {
				if i >= 2 {
					<-closed
				}
				return nil
			}}
			d := &devices{}
			s := newStream(t, f, p, opts(2, 1, 2), d.config())
			go func() {
				// BatchAt(2) has begun: the stream can serve nothing more. (Past the hang guard,
				// Close anyway, so a broken stream fails the checks below instead of hanging.)
				for deadline := time.Now().Add(hangGuard); f.calls.Load() < 3 && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
				_ = s.Close()
				close(closed)
			}()
			_, err := consume(s, d, 0)
			if !errors.Is(err, prefetch.ErrClosed) {
				t.Errorf("Next returned %v; want ErrClosed", err)
			}
			_ = s.Close()
			<-closed
			// The BatchAt calls Close abandoned return and drop their batches.
			await(t, "the abandoned BatchAt calls to return", func() bool { return f.inFlight.Load() == 0 })
			d.check(t)
		})
	}
}

// Cancelling the context stops the stream with the context's error. The cancel comes from
// inside BatchAt(5), so the stream is mid-epoch whatever the machine's speed.
func TestContextCancel(t *testing.T) {
	for _, p := range allPaths {
		t.Run(string(p), func(t *testing.T) {
			defer goleak.VerifyNone(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f := &fakeSource{n: 100, rows: 2, hook: func(i int) error {
				if i == 5 {
					cancel()
				}
				return nil
			}}
			e := &epochSource{fakeSource: f}
			o := opts(3, 1, 3)
			if p == prefetch.PathProducer {
				o = opts(1, 1, 1)
			}
			d := &devices{}
			s, err := prefetch.Start(ctx, declare(t, e, p, o), 0, d.config())
			if err != nil {
				t.Fatal(err)
			}
			got, err := consume(s, d, 0)
			if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "stream stopped") {
				t.Errorf("got %v; want the context's cancellation", err)
			}
			// Batches already staged may still come out after the cancel, in a select's random
			// turn, but the stream does not run on to the end.
			if len(got) >= 100 {
				t.Errorf("delivered all %d batches despite a cancel during batch 5", len(got))
			}
			_ = s.Close()
			d.check(t)
		})
	}
}

// Free errors for batches the stream still held come back from Close.
func TestCloseReportsFreeErrors(t *testing.T) {
	defer goleak.VerifyNone(t)
	f := &fakeSource{n: 20, rows: 2}
	d := &devices{freeErr: errors.New("free failed")}
	s := newStream(t, f, prefetch.PathFanout, opts(2, 2, 4), d.config())
	it, _, err := s.Next()
	if err != nil {
		t.Fatal(err)
	}
	_ = d.free(it.Device)
	await(t, "a placed batch staged for Close to free", func() bool { return d.live.Load() > 0 })
	err = s.Close()
	wantErr(t, err, "free failed")
	d.check(t)
}
