package collective

import (
	"fmt"
	"reflect"
	"sync"
)

// Rank is one rank of an in-memory group (Local).
type Rank struct {
	g    *group
	rank int
}

// group is the state the ranks of one Local share: the buffers of the operation in progress,
// its generation (bumped when the last rank arrives and the result is written), and the error
// that ends the group.
type group struct {
	mu      sync.Mutex
	cond    *sync.Cond
	n       int
	arrived int
	gen     int
	bufs    []any
	failed  error
	opErr   error     // the outcome of the last operation to finish
	sum32   []float32 // scratch for the float32 sum, reused
	sum64   []float64 // scratch for the float64 sum, reused
}

// Local returns the n ranks of one in-memory run, rank i at index i.
func Local(n int) ([]*Rank, error) {
	if n < 1 {
		return nil, fmt.Errorf("collective.Local(%d): a run has at least 1 rank", n)
	}
	g := &group{n: n, bufs: make([]any, n)}
	g.cond = sync.NewCond(&g.mu)
	ranks := make([]*Rank, n)
	for i := range ranks {
		ranks[i] = &Rank{g: g, rank: i}
	}
	return ranks, nil
}

// Rank is this rank's index in [0, Size()).
func (r *Rank) Rank() int { return r.rank }

// Size is the number of ranks.
func (r *Rank) Size() int { return r.g.n }

// AllReduceSum replaces buf, on every rank, with the element-wise sum of every rank's buf.
func (r *Rank) AllReduceSum(buf []float32) error {
	return r.g.do(r.rank, buf, func(bufs []any) error {
		return sumInto(bufs, &r.g.sum32)
	})
}

// AllReduceSum64 is AllReduceSum over float64.
func (r *Rank) AllReduceSum64(buf []float64) error {
	return r.g.do(r.rank, buf, func(bufs []any) error {
		return sumInto(bufs, &r.g.sum64)
	})
}

// Broadcast copies rank root's buf into every other rank's.
func (r *Rank) Broadcast(buf []byte, root int) error {
	if root < 0 || root >= r.g.n {
		return fmt.Errorf("collective: Broadcast from rank %d of %d", root, r.g.n)
	}
	return r.g.do(r.rank, buf, func(bufs []any) error {
		for _, b := range bufs {
			copy(b.([]byte), bufs[root].([]byte))
		}
		return nil
	})
}

// Leave takes the rank out of the run, as a process that died: every call on the other ranks,
// pending or later, returns an error naming it.
func (r *Rank) Leave(why error) {
	g := r.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failed == nil {
		g.failed = fmt.Errorf("collective: rank %d of %d left the run: %v", r.rank, g.n, why)
	}
	g.cond.Broadcast()
}

// do is one collective operation: rank's buf joins the operation in progress; the last rank to
// arrive runs combine over all the buffers (in rank order) and wakes the others. A rank that
// arrives early for the next operation waits for nothing: the results of this one are already
// in every buffer when the generation moves.
func (g *group) do(rank int, buf any, combine func(bufs []any) error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failed != nil {
		return g.failed
	}
	g.bufs[rank] = buf
	g.arrived++
	if g.arrived == g.n {
		g.arrived = 0
		g.gen++
		err := sameOperation(g.bufs)
		if err == nil {
			err = combine(g.bufs)
		}
		g.opErr = err
		if err != nil {
			g.failed = err
		}
		clear(g.bufs)
		g.cond.Broadcast()
		return g.failed
	}
	gen := g.gen
	for g.gen == gen && g.failed == nil {
		g.cond.Wait()
	}
	if g.gen != gen {
		// Finished: its own outcome (no later operation can end before this rank joins it).
		return g.opErr
	}
	return g.failed
}

// sumInto sums the buffers element-wise in rank order into scratch (grown once, then reused) and
// copies the sum into every buffer.
func sumInto[T float32 | float64](bufs []any, scratch *[]T) error {
	n := len(bufs[0].([]T))
	if cap(*scratch) < n {
		*scratch = make([]T, n)
	}
	s := (*scratch)[:n]
	copy(s, bufs[0].([]T))
	for _, b := range bufs[1:] {
		for i, v := range b.([]T) {
			s[i] += v
		}
	}
	for _, b := range bufs {
		copy(b.([]T), s)
	}
	return nil
}

// sameOperation refuses buffers of another type (another operation) or another length than rank
// 0's, naming the first rank that differs.
func sameOperation(bufs []any) error {
	n := reflect.ValueOf(bufs[0]).Len()
	for r, b := range bufs {
		if reflect.TypeOf(b) != reflect.TypeOf(bufs[0]) {
			return fmt.Errorf("collective: rank %d called another operation (%T) than rank 0 (%T): every rank must call the same operations in the same order", r, b, bufs[0])
		}
		if m := reflect.ValueOf(b).Len(); m != n {
			return fmt.Errorf("collective: rank %d's buffer has %d elements, rank 0's %d: every rank must pass the same length", r, m, n)
		}
	}
	return nil
}
