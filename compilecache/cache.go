package compilecache

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// Stats are the counters behind the acceptance check: after a healthy run misses == entries, and misses
// does not grow with the number of steps.
type Stats struct {
	Hits, Misses, Entries int
}

// Lookup says how Get found its program.
type Lookup struct {
	Hit bool
	// Why explains a miss against the closest existing entry of the same kind and experiment: the moved
	// components joined by "; ". Empty on a hit, or when nothing comparable existed.
	Why string
	// Changes are the moved components one by one, e.g. "accum: 1 -> 2".
	Changes []string
}

// maxExplanations bounds the history Explanations returns; old lines are dropped first.
const maxExplanations = 64

// entry is one program, or one compile in flight: waiters block on done.
type entry struct {
	key   Key
	seq   uint64 // insertion order, to prefer the most recent entry when explaining
	done  chan struct{}
	value any
	err   error
}

// Cache maps keys to compiled programs. The zero value is not usable; call New.
type Cache struct {
	mu           sync.Mutex
	entries      map[string]*entry
	generation   uint64 // bumped by Reset so compiles that straddle it do not repopulate the emptied cache
	seq          uint64
	hits, misses int
	joined       int // callers inside Get that found an entry (waiting on it or reading it)
	explanations []string
	compileTime  map[string]time.Duration // by kind: wall time spent in successful compiles
}

// New returns an empty cache, for tests and for callers that want isolation from Default.
func New() *Cache {
	return &Cache{entries: map[string]*entry{}}
}

var defaultCache = New()

// Default is the process-level cache every Nitro shares.
func Default() *Cache { return defaultCache }

// Get returns the program for key, calling compile on a miss. Concurrent calls with the same key compile
// once; the others wait and count as hits. A failed or panicking compile stores nothing, counts as a miss,
// and its error goes to the caller and to everyone who waited on it.
func (c *Cache) Get(key Key, compile func() (any, error)) (any, Lookup, error) {
	if err := key.validate(); err != nil {
		return nil, Lookup{}, err
	}
	if compile == nil {
		return nil, Lookup{}, fmt.Errorf("compile cache Get for %s program of %s: compile func is nil: pass the function that builds the program", key.Kind, key.Experiment)
	}
	id := key.identity()

	c.mu.Lock()
	if e, ok := c.entries[id]; ok {
		c.joined++
		c.mu.Unlock()
		<-e.done
		c.mu.Lock()
		c.joined--
		if e.err == nil {
			c.hits++
		}
		c.mu.Unlock()
		if e.err != nil {
			return nil, Lookup{}, e.err
		}
		return e.value, Lookup{Hit: true}, nil
	}
	key = key.clone()
	changes := c.explainLocked(key, id)
	c.misses++
	c.seq++
	e := &entry{key: key, seq: c.seq, done: make(chan struct{})}
	c.entries[id] = e
	gen := c.generation
	lookup := Lookup{Changes: changes, Why: strings.Join(changes, "; ")}
	if len(changes) > 0 {
		c.explanations = append(c.explanations, fmt.Sprintf("%s program of %s recompiled: %s", key.Kind, key.Experiment, lookup.Why))
		if n := len(c.explanations); n > maxExplanations {
			c.explanations = append([]string(nil), c.explanations[n-maxExplanations:]...)
		}
	}
	c.mu.Unlock()

	start := time.Now()
	e.value, e.err = runCompile(key, compile)
	took := time.Since(start)
	c.mu.Lock()
	if e.err == nil && c.generation == gen {
		if c.compileTime == nil {
			c.compileTime = map[string]time.Duration{}
		}
		c.compileTime[key.Kind] += took
	}
	if e.err != nil || c.generation != gen {
		// A failed compile leaves no entry, so a retry compiles again and shows as misses > entries.
		if c.entries[id] == e {
			delete(c.entries, id)
		}
	}
	c.mu.Unlock()
	close(e.done)
	if e.err != nil {
		return nil, lookup, e.err
	}
	return e.value, lookup, nil
}

// runCompile turns a panic in graph-building code into an error, so waiters are released and the
// caller sees which program failed.
func runCompile(key Key, compile func() (any, error)) (value any, err error) {
	defer func() {
		if r := recover(); r != nil {
			value, err = nil, fmt.Errorf("compiling %s program of %s: panic: %v", key.Kind, key.Experiment, r)
		}
	}()
	value, err = compile()
	if err != nil {
		err = fmt.Errorf("compiling %s program of %s: %w", key.Kind, key.Experiment, err)
	}
	return value, err
}

// explainLocked diffs key against the closest entry (fewest moved components, then most recent) of the
// same kind and experiment. Entries still compiling count: they are programs the process already asked for.
func (c *Cache) explainLocked(key Key, id string) []string {
	var best []string
	var bestSeq uint64
	found := false
	for otherID, e := range c.entries {
		if otherID == id || e.key.Kind != key.Kind || e.key.Experiment != key.Experiment {
			continue
		}
		d := diff(e.key, key)
		if len(d) == 0 {
			// Same components in another order: the identity still differs.
			d = []string{"key component order changed"}
		}
		if !found || len(d) < len(best) || (len(d) == len(best) && e.seq > bestSeq) {
			best, bestSeq, found = d, e.seq, true
		}
	}
	return best
}

// Stats returns the cumulative counters and the number of stored programs.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, e := range c.entries {
		select {
		case <-e.done:
			if e.err == nil {
				n++
			}
		default: // still compiling: not an entry yet
		}
	}
	return Stats{Hits: c.hits, Misses: c.misses, Entries: n}
}

// Reset empties the cache, zeroes hits and misses and clears the explanations. It is the escape hatch for what the key cannot see; a compile in flight finishes for its callers
// but is not stored.
func (c *Cache) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = map[string]*entry{}
	c.generation++
	c.hits, c.misses = 0, 0
	c.explanations = nil
	c.compileTime = nil
}

// CompileTimes returns, by program kind, the wall time spent building and compiling the programs
// the cache now counts (since New or the last Reset): what a run paid before its first step.
func (c *Cache) CompileTimes() map[string]time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]time.Duration, len(c.compileTime))
	for k, v := range c.compileTime {
		out[k] = v
	}
	return out
}

// Evict drops the program stored under key and reports whether there was one. The next Get for it
// compiles again, which the counters show as a miss that is not a new entry.
func (c *Cache) Evict(key Key) bool {
	id := key.identity()
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[id]
	if !ok {
		return false
	}
	select {
	case <-e.done:
	default:
		return false // in flight: its waiters need it; evict after it lands
	}
	delete(c.entries, id)
	return true
}

// Explanations returns the recent miss explanations, oldest first (at most 64), each naming the program
// kind, the experiment and the moved components.
func (c *Cache) Explanations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.explanations...)
}
