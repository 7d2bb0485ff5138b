package parquet

import (
	"container/list"
	"fmt"
	"sync"
	"sync/atomic"
)

// decoded is one row group's fields, decoded: per field (in the Source's field order), the
// group's rows back to back in the field's dtype, native byte order.
type decoded struct {
	fields [][]byte
}

// entry is one row group in the cache: being decoded until ready is closed, then val or err.
type entry struct {
	group int
	ready chan struct{}
	val   *decoded
	err   error
	elem  *list.Element
}

// cache is a bounded LRU of decoded row groups. A group being decoded counts toward the bound
// and is decoded once however many callers ask for it meanwhile (they wait for the first). A
// failed decode is not kept, so a later call tries again. An evicted group stays alive for the
// callers still copying out of it; the bound is on what the cache itself keeps.
type cache struct {
	mu      sync.Mutex
	max     int
	entries map[int]*entry
	lru     *list.List // of *entry, most recently used first

	hits, misses atomic.Int64
}

func newCache(max int) *cache {
	return &cache{max: max, entries: map[int]*entry{}, lru: list.New()}
}

// get returns group g, decoding it with load on a miss.
func (c *cache) get(g int, load func() (*decoded, error)) (*decoded, error) {
	c.mu.Lock()
	if e, ok := c.entries[g]; ok {
		c.lru.MoveToFront(e.elem)
		c.mu.Unlock()
		c.hits.Add(1)
		<-e.ready
		return e.val, e.err
	}
	e := &entry{group: g, ready: make(chan struct{})}
	e.elem = c.lru.PushFront(e)
	c.entries[g] = e
	for c.lru.Len() > c.max {
		old := c.lru.Remove(c.lru.Back()).(*entry)
		delete(c.entries, old.group)
	}
	c.mu.Unlock()
	c.misses.Add(1)

	func() {
		defer close(e.ready)
		defer func() {
			if r := recover(); r != nil {
				e.val, e.err = nil, fmt.Errorf("decoding row group %d panicked: %v", g, r)
			}
		}()
		e.val, e.err = load()
	}()
	if e.err != nil {
		c.mu.Lock()
		if c.entries[g] == e {
			c.lru.Remove(e.elem)
			delete(c.entries, g)
		}
		c.mu.Unlock()
	}
	return e.val, e.err
}

// len is how many groups the cache holds (decoded or being decoded).
func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}
