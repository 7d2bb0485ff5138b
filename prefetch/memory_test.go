package prefetch_test

import (
	"testing"
	"time"

	"github.com/nitro-go/nitro/prefetch"
	"go.uber.org/goleak"
)

// Resident memory. Device: at most DeviceBatches+2 placed batches are live (staged, one in the
// transfer goroutine's hand, one in the consumer's), counted by a fake Transfer/Free. Host: at
// most HostBatches host batches exist between BatchAt and Transfer (counted by the fake source),
// and after a GC at most HostBatches are still reachable at all: the stream drops its reference
// once a batch is transferred, unless KeepHost hands it to the consumer (then up to
// DeviceBatches+2 more ride along with their placed batches).
func TestResidentMemory(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, c := range []struct {
		path               prefetch.Path
		workers, dev, host int
		keep, unordered    bool
	}{
		{prefetch.PathFanout, 4, 1, 8, false, false},
		{prefetch.PathFanout, 4, 3, 8, false, false},
		{prefetch.PathFanout, 2, 2, 2, false, true},
		{prefetch.PathFanout, 4, 1, 8, true, false},
		{prefetch.PathProducer, 1, 2, 1, false, false},
	} {
		f := &fakeSource{n: 40, rows: 2}
		d := &devices{src: f}
		cfg := d.config()
		cfg.KeepHost = c.keep
		o := prefetch.Options{Workers: c.workers, DeviceBatches: c.dev, HostBatches: c.host, Unordered: c.unordered}
		s := newStream(t, f, c.path, o, cfg)
		hostBound := c.host
		if c.keep {
			hostBound += c.dev + 2
		}
		maxReach, quiet := 0, 0
		for i := 0; ; i++ {
			it, ok, err := s.Next()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			if i%10 == 3 { // a slow step: the pipeline fills up behind it and blocks
				if waitFor(func() bool { return d.live.Load() == int64(c.dev+2) }) {
					quiet++
				}
				time.Sleep(5 * time.Millisecond) // and the host side behind it
				maxReach = max(maxReach, f.reachable())
			}
			d.free(it.Device)
		}
		_ = s.Close()
		d.check(t)
		t.Logf("%s workers %d device %d host %d keep %v: placed max %d (bound %d), host pending max %d (bound %d), reachable max %d (bound %d)",
			c.path, c.workers, c.dev, c.host, c.keep, d.max.Load(), c.dev+2, f.maxPend.Load(), c.host, maxReach, hostBound)
		if m := d.max.Load(); m > int64(c.dev+2) {
			t.Errorf("%+v: %d placed batches live at once; want at most DeviceBatches+2 = %d", c, m, c.dev+2)
		}
		if quiet == 0 {
			t.Errorf("%+v: the pipeline never staged DeviceBatches+2 = %d behind a slow step", c, c.dev+2)
		}
		if c.path == prefetch.PathFanout {
			if m := f.maxPend.Load(); m > int64(c.host) || m < int64(c.workers) {
				t.Errorf("%+v: %d host batches awaited transfer at once; want between Workers and HostBatches = %d", c, m, c.host)
			}
		}
		if maxReach > hostBound {
			t.Errorf("%+v: %d host batches reachable after a GC; want at most %d", c, maxReach, hostBound)
		}
	}
}
