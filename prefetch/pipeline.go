package prefetch

import (
	"fmt"
	"sync"
)

// The fan-out:
//
//	coordinator --jobs (unbuffered)--> N workers --hostCh (cap N)--> transfer --out (cap DeviceBatches)--> Next
//	     ^                                                              |
//	     +---------------- credits (cap HostBatches) <-----------------+
//
// The coordinator puts a token into credits before it hands out an index, and the transfer
// goroutine takes one back once that batch is transferred and its host reference dropped, so at
// most HostBatches host batches exist at once across the workers' hands, hostCh and the reorder
// buffer. Indices go out in order and each holds its credit until emitted, so the batch the
// reorder buffer waits for has always been handed out: a straggler stalls delivery, it cannot
// deadlock it. Only the transfer goroutine ever holds a placed batch; everything else holds host
// memory, which needs no freeing.
func (s *Stream[D]) startFanout(o Options) {
	jobs := make(chan int)
	hostCh := make(chan built, o.Workers)
	credits := make(chan struct{}, o.HostBatches)

	s.prompt.Add(2)
	go func() { // coordinator
		defer s.prompt.Done()
		defer close(jobs)
		for i := s.from; i < s.to; i++ {
			select {
			case credits <- struct{}{}:
			case <-s.ctx.Done():
				return
			}
			select {
			case jobs <- i:
			case <-s.ctx.Done():
				return
			}
		}
	}()

	var workers sync.WaitGroup
	workers.Add(o.Workers)
	for range o.Workers {
		go func() {
			defer workers.Done()
			for {
				var i int
				select {
				case j, ok := <-jobs:
					if !ok {
						return
					}
					i = j
				case <-s.ctx.Done():
					return
				}
				if s.ctx.Err() != nil {
					return
				}
				r := s.build(i)
				if s.ctx.Err() != nil {
					return // abandoned while in BatchAt: the host batch is dropped
				}
				// A failed batch travels on like the others, so its error reaches the consumer in
				// index order: every batch before it is still delivered (a run fails at the same step
				// with or without prefetch). This worker stops; the stream ends at that error.
				select {
				case hostCh <- r:
				case <-s.ctx.Done():
					return // abandoned (Close or a failure elsewhere): the host batch is dropped
				}
				if r.err != nil {
					return
				}
			}
		}()
	}
	go func() { // closes hostCh once every worker is gone, a stuck one included
		workers.Wait()
		close(hostCh)
	}()

	go func() { // transfer
		defer s.prompt.Done()
		release := func() { <-credits }
		next := s.from
		pending := map[int]built{} // the reorder buffer
		for {
			var r built
			select {
			case got, ok := <-hostCh:
				if !ok {
					if s.ctx.Err() != nil {
						return
					}
					if len(pending) > 0 {
						s.fail(fmt.Errorf("prefetch: epoch %d: the workers finished with %d batches still waiting for batch %d: exactly-once check failed", s.epoch, len(pending), next))
						return
					}
					close(s.out)
					return
				}
				r = got
			case <-s.ctx.Done():
				return
			}
			if o.Unordered {
				if !s.emit(r, release) {
					return
				}
				continue
			}
			pending[r.index] = r
			for {
				p, ok := pending[next]
				if !ok {
					break
				}
				delete(pending, next)
				next++
				if !s.emit(p, release) {
					return
				}
			}
		}
	}()
}

// produce is the one-producer path: BatchAt, pad and Transfer in index order on one goroutine.
// It is not waited for by Close, since it may be inside a slow BatchAt; it holds a placed batch
// only inside emit, which Close does wait for.
func (s *Stream[D]) produce() {
	for i := s.from; i < s.to; i++ {
		if s.ctx.Err() != nil {
			return
		}
		if !s.emit(s.build(i), nil) {
			return
		}
	}
	close(s.out)
}

// emit transfers one built batch, drops the stream's host reference (returning its credit),
// and hands the placed batch to s.out; false means the stream is stopping. A placed batch that
// cannot be handed off is freed here.
func (s *Stream[D]) emit(r built, release func()) bool {
	if !s.hold() {
		return false
	}
	defer s.holders.Done()
	if r.err != nil { // a failed batch: hand its error over in its place, then stop
		if release != nil {
			release()
		}
		s.sendErr(Item[D]{Index: r.index, err: r.err})
		return false
	}
	d, err := s.transfer(r.index, r.send)
	it := Item[D]{Index: r.index, Device: d, Rows: r.rows}
	if s.cfg.KeepHost {
		it.Host = r.host
	}
	// r is dead from here, so the host batch is the consumer's (KeepHost) or garbage: return
	// its credit.
	if release != nil {
		release()
	}
	if err != nil {
		s.sendErr(Item[D]{Index: r.index, err: err})
		return false
	}
	select {
	case s.out <- it:
		return true
	case <-s.ctx.Done():
		s.free(it.Device)
		return false
	}
}

// sendErr hands a failed batch's error to the consumer in the batch's place.
func (s *Stream[D]) sendErr(it Item[D]) {
	select {
	case s.out <- it:
	case <-s.ctx.Done():
	}
}
