package parquet

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestCacheIsLRU(t *testing.T) {
	c := newCache(2)
	loads := map[int]int{}
	get := func(g int) {
		if _, err := c.get(g, func() (*decoded, error) { loads[g]++; return &decoded{}, nil }); err != nil {
			t.Fatal(err)
		}
	}
	get(0)
	get(1)
	get(0) // 0 is now the most recent
	get(2) // evicts 1
	get(0)
	get(1)
	if loads[0] != 1 || loads[1] != 2 || loads[2] != 1 || c.len() != 2 {
		t.Fatalf("loads %v, %d held", loads, c.len())
	}
	if c.hits.Load() != 2 || c.misses.Load() != 4 {
		t.Fatalf("%d hits, %d misses", c.hits.Load(), c.misses.Load())
	}
}

// TestCacheDecodesOnceForConcurrentCallers: callers asking for a group being decoded wait for
// that decode instead of starting their own.
func TestCacheDecodesOnceForConcurrentCallers(t *testing.T) {
	c := newCache(4)
	var loads atomic.Int32
	release := make(chan struct{})
	want := &decoded{}
	var wg sync.WaitGroup
	got := make([]*decoded, 8)
	for k := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := c.get(7, func() (*decoded, error) {
				loads.Add(1)
				<-release
				return want, nil
			})
			if err != nil {
				t.Error(err)
			}
			got[k] = d
		}()
	}
	for c.hits.Load()+c.misses.Load() < 8 { // until every caller has looked the group up
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	if loads.Load() != 1 {
		t.Fatalf("%d loads for one group", loads.Load())
	}
	for k, d := range got {
		if d != want {
			t.Fatalf("caller %d got another value", k)
		}
	}
}

func TestCacheTurnsAPanicIntoAnErrorAndKeepsNoFailure(t *testing.T) {
	c := newCache(2)
	_, err := c.get(3, func() (*decoded, error) { panic("bad page") })
	if err == nil || !strings.Contains(err.Error(), "row group 3 panicked: bad page") {
		t.Fatalf("got %v", err)
	}
	_, err = c.get(3, func() (*decoded, error) { return nil, errors.New("still bad") })
	if err == nil || err.Error() != "still bad" {
		t.Fatalf("a failure was cached: %v", err)
	}
	if c.len() != 0 {
		t.Fatalf("%d failures held", c.len())
	}
	if _, err := c.get(3, func() (*decoded, error) { return &decoded{}, nil }); err != nil || c.len() != 1 {
		t.Fatalf("%v, %d held", err, c.len())
	}
}
