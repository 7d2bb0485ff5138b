package prefetch

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// StreamConfig is what a stream needs from its caller: how to place a host batch and how to
// free what was placed. D is the caller's device-resident batch; the stream never looks inside.
//
// D is a type parameter rather than `any` so the consumer gets its own type back from Next and
// Free receives exactly what Transfer returned, with no type assertion at either end and no way
// to hand Free something Transfer did not make.
type StreamConfig[D any] struct {
	// Transfer places one host batch (padded when Pad is set) and returns the placed batch.
	// The stream calls it from one goroutine at a time (the transfer goroutine, the producer,
	// or the consumer's Next on the inline path), so copies are serialized as on one device.
	// On error it must hold nothing: the stream frees only what Transfer returned without one.
	Transfer func(Batch) (D, error)
	// Free releases a placed batch the stream still holds when it stops (Close, an error, a
	// cancelled context). It may be called from any of the stream's goroutines, from Close and
	// from Next, concurrently; it is never called twice for one batch, nor for a batch Next
	// handed out, which is the consumer's to free.
	Free func(D) error
	// Pad, for evaluation, pads a short batch to this many rows (PadRows over every field)
	// before Transfer; Item.Rows keeps the real count. A batch wider than Pad is an error.
	// 0 transfers every batch as it is.
	Pad int
	// KeepHost hands the unpadded host batch to the consumer in Item.Host. Without it the
	// stream drops its reference to a host batch as soon as Transfer returns, so resident host
	// memory is HostBatches batches; with it, up to DeviceBatches+2 more stay alive with their
	// device batches.
	KeepHost bool
	// From and To bound the batch indices served, [From, To); To 0 means Len. A resumed run
	// starts mid-epoch with From; a loop that consumes whole groups of batches stops with To.
	From, To int
	// Warn receives setup warnings (the one-producer fallback); nil discards them.
	Warn func(string)
}

// Item is one delivered batch.
type Item[D any] struct {
	Index int // the batch index in the source
	// Host is the unpadded host batch, when StreamConfig.KeepHost is set (nil otherwise): what
	// the consumer's host-side checks and host metrics read, and what an eval consumer can
	// recompute the real row count from (Rows already carries it).
	Host   Batch
	Device D   // the placed batch, padded when Pad is set; the consumer frees it
	Rows   int // the real row count, before padding

	err error // a failure of this index (BatchAt, pad, Transfer), delivered in its place
}

// Stats is the consumer's view of a stream: how long it waited in Next out of the wall time
// since Start (until the stream ended or was closed).
type Stats struct {
	Wait    time.Duration // time the consumer spent inside Next (and Start's BeginEpoch)
	Wall    time.Duration // wall time since Start, frozen when the stream ends or closes
	Batches int           // items delivered
}

// WaitFraction is Wait/Wall: the share of the epoch the consumer spent waiting for data.
func (s Stats) WaitFraction() float64 {
	if s.Wall <= 0 {
		return 0
	}
	return min(1, s.Wait.Seconds()/s.Wall.Seconds())
}

// ErrClosed is what Next returns once Close has been called.
var ErrClosed = errors.New("prefetch: stream closed")

// BatchError is a failure to build, pad or transfer one batch, with the index it happened at.
// A panic is recovered into one (Err says "panic: ..."; Stack holds the goroutine's stack).
type BatchError struct {
	Index int    // the batch index
	Op    string // "BatchAt", "pad" or "Transfer"
	Err   error
	Stack []byte // set when Op panicked
}

func (e *BatchError) Error() string {
	return fmt.Sprintf("prefetch: batch %d: %s: %v", e.Index, e.Op, e.Err)
}

func (e *BatchError) Unwrap() error { return e.Err }

// PadError is a batch wider than the pad width: only a final batch may differ, by being shorter.
type PadError struct{ Rows, Width int }

func (e *PadError) Error() string {
	return fmt.Sprintf("%d rows, more than the pad width %d", e.Rows, e.Width)
}

// Stream is one epoch's feed, realized from a declaration by Start: the same Next on each of
// the three paths. One goroutine consumes it; Close may be called from any goroutine, any
// number of times, and must be called (defer it) whatever happened: it is what frees the
// device batches still staged.
type Stream[D any] struct {
	cfg      StreamConfig[D]
	src      Source // the source underneath any declaration
	path     Path
	epoch    int
	from, to int
	parent   context.Context
	ctx      context.Context
	cancel   context.CancelFunc
	out      chan Item[D] // nil on the inline path

	failOnce sync.Once
	failed   chan struct{} // closed on the first failure of a goroutine
	failErr  error

	mu       sync.Mutex
	closed   bool
	freeErrs []error
	holders  sync.WaitGroup // sections that may hold a placed batch; Close waits for them
	prompt   sync.WaitGroup // goroutines that only block in selects on ctx; Close waits for them

	// The consumer's side, touched only by Next.
	next   int // the inline path's next index
	ledger ledger
	ended  bool
	endErr error

	start   time.Time
	waitNs  atomic.Int64
	wallNs  atomic.Int64 // frozen wall time; 0 while running
	batches atomic.Int64
}

// Start realizes src for one epoch and returns its stream. The path follows the declaration:
//   - an *Iterator with Workers > 1 over a FanoutCapable source fans out: a coordinator hands
//     out indices against HostBatches credits, Workers goroutines call BatchAt (and pad), one
//     transfer goroutine does every Transfer, and a reorder buffer emits in index order unless
//     Unordered;
//   - any other *Iterator gets one producer goroutine (warning once through cfg.Warn when
//     Workers > 1, naming the missing BeginEpoch);
//   - a NoPrefetch source, or a plain undeclared Source, is fed inline by Next itself.
//
// When the source underneath implements BeginEpoch, Start calls BeginEpoch(epoch) exactly once,
// on the caller's goroutine, before any BatchAt: the caller must not call it as well.
// Cancelling ctx stops the stream (Next then returns the context's cause).
func Start[D any](ctx context.Context, src Source, epoch int, cfg StreamConfig[D]) (*Stream[D], error) {
	t0 := time.Now()
	switch {
	case src == nil:
		return nil, fmt.Errorf("prefetch: Start of a nil source")
	case cfg.Transfer == nil:
		return nil, fmt.Errorf("prefetch: StreamConfig.Transfer is nil")
	case cfg.Free == nil:
		return nil, fmt.Errorf("prefetch: StreamConfig.Free is nil: a stream that stops early must free what it staged")
	case cfg.Pad < 0:
		return nil, fmt.Errorf("prefetch: StreamConfig.Pad %d: must be 0 (no padding) or the compiled batch width", cfg.Pad)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("prefetch: %w", context.Cause(ctx))
	}
	s := &Stream[D]{cfg: cfg, src: base(src), path: PathInline, epoch: epoch, parent: ctx, failed: make(chan struct{}), start: t0}
	n := s.src.Len()
	s.from, s.to = cfg.From, cfg.To
	if s.to == 0 {
		s.to = n
	}
	if s.from < 0 || s.from > s.to || s.to > n {
		return nil, fmt.Errorf("prefetch: StreamConfig From %d, To %d: need 0 <= From <= To <= Len %d", cfg.From, cfg.To, n)
	}
	s.next = s.from
	s.ledger = newLedger(s.from, s.to)

	var opts Options
	if it, ok := src.(*Iterator); ok {
		opts = it.opts
		s.path = it.Path()
		if s.path == PathProducer && opts.Workers > 1 && it.warned.CompareAndSwap(false, true) && cfg.Warn != nil {
			cfg.Warn(fmt.Sprintf("prefetch: %T has BatchAt but no BeginEpoch(epoch int) error, so its %d workers fall back to one producer: "+
				"fanning out needs both halves (implement BeginEpoch to re-plan each epoch; a source with no per-epoch plan returns nil)", s.src, opts.Workers))
		}
	}
	if err := beginEpoch(s.src, epoch); err != nil {
		return nil, fmt.Errorf("prefetch: epoch %d: BeginEpoch: %w", epoch, err)
	}
	s.waitNs.Store(int64(time.Since(t0))) // the device waits for the epoch's plan too
	s.ctx, s.cancel = context.WithCancel(ctx)
	switch s.path {
	case PathFanout:
		s.out = make(chan Item[D], opts.DeviceBatches)
		s.startFanout(opts)
	case PathProducer:
		s.out = make(chan Item[D], opts.DeviceBatches)
		go s.produce()
	}
	return s, nil
}

// Path is the path this stream took.
func (s *Stream[D]) Path() Path { return s.path }

// Stats is the consumer's wait so far; safe from any goroutine.
func (s *Stream[D]) Stats() Stats {
	wall := time.Duration(s.wallNs.Load())
	if wall == 0 {
		wall = time.Since(s.start)
	}
	return Stats{Wait: time.Duration(s.waitNs.Load()), Wall: wall, Batches: int(s.batches.Load())}
}

// WaitFraction is Stats().WaitFraction(): the fraction of wall time since Start the consumer
// spent blocked in Next.
func (s *Stream[D]) WaitFraction() float64 { return s.Stats().WaitFraction() }

// Next returns the next batch: ok is false once the epoch's batches are all delivered (or on
// an error). Batches come in index order unless the declaration is Unordered. The item's
// Device is the consumer's to free. An error is final: later calls return it again. When the
// epoch ran to completion, Next checks the exactly-once ledger (every index delivered once)
// before it reports the end. After Close, Next returns ErrClosed.
func (s *Stream[D]) Next() (Item[D], bool, error) {
	var zero Item[D]
	if s.ended {
		return zero, false, s.endErr
	}
	t := time.Now()
	defer func() {
		s.waitNs.Add(int64(time.Since(t)))
		if s.ended {
			s.freezeWall() // after the wait is counted, so Wait <= Wall
		}
	}()
	if s.isClosed() {
		return zero, false, s.end(ErrClosed)
	}
	if s.path == PathInline {
		return s.nextInline()
	}
	select {
	case <-s.failed:
		return zero, false, s.end(s.failErr)
	default:
	}
	select {
	case it, ok := <-s.out:
		if !ok {
			return zero, false, s.end(s.ledger.complete(s.epoch))
		}
		if it.err != nil { // a batch that failed: its error comes in its turn, after the ones before it
			return zero, false, s.end(it.err)
		}
		if s.isClosed() { // Close began while we waited: this one is not handed out
			s.free(it.Device)
			return zero, false, s.end(ErrClosed)
		}
		return s.deliver(it)
	case <-s.failed:
		return zero, false, s.end(s.failErr)
	case <-s.ctx.Done():
		return zero, false, s.end(s.stopped())
	}
}

// stopped is why the stream's context is done: a goroutine's failure (which cancels it), Close,
// or the caller's context.
func (s *Stream[D]) stopped() error {
	select {
	case <-s.failed:
		return s.failErr
	default:
	}
	if s.isClosed() {
		return ErrClosed
	}
	return fmt.Errorf("prefetch: stream stopped: %w", context.Cause(s.parent))
}

func (s *Stream[D]) nextInline() (Item[D], bool, error) {
	var zero Item[D]
	if err := s.ctx.Err(); err != nil {
		return zero, false, s.end(s.stopped())
	}
	if s.next >= s.to {
		return zero, false, s.end(s.ledger.complete(s.epoch))
	}
	r := s.build(s.next)
	s.next++
	if r.err != nil {
		return zero, false, s.end(r.err)
	}
	if !s.hold() {
		return zero, false, s.end(ErrClosed)
	}
	defer s.holders.Done()
	d, err := s.transfer(r.index, r.send)
	if err != nil {
		return zero, false, s.end(err)
	}
	it := Item[D]{Index: r.index, Device: d, Rows: r.rows}
	if s.cfg.KeepHost {
		it.Host = r.host
	}
	return s.deliver(it)
}

// deliver marks the item in the ledger and hands it to the consumer.
func (s *Stream[D]) deliver(it Item[D]) (Item[D], bool, error) {
	if err := s.ledger.mark(it.Index, s.epoch); err != nil {
		s.free(it.Device)
		return Item[D]{}, false, s.end(err)
	}
	s.batches.Add(1)
	return it, true, nil
}

// end records the stream's final result and stops its goroutines.
func (s *Stream[D]) end(err error) error {
	s.ended, s.endErr = true, err
	if s.cancel != nil {
		s.cancel()
	}
	return err
}

// Close stops the stream: it cancels every goroutine, waits for the ones that may hold a placed
// batch (the transfer goroutine or the producer, between Transfer and the hand-off), and frees
// every placed batch the stream still holds (one that a concurrent Next is receiving at that
// moment is freed by that Next, which then returns ErrClosed). It does not wait for a worker
// inside BatchAt: that worker is abandoned, and drops its host batch when BatchAt returns. Close
// returns the Free errors, if any; a second Close returns nil.
func (s *Stream[D]) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.freezeWall()
	s.cancel()
	s.holders.Wait()
	s.prompt.Wait()
	if s.out != nil {
	drain:
		for {
			select {
			case it, ok := <-s.out:
				if !ok {
					break drain
				}
				s.free(it.Device)
			default:
				break drain
			}
		}
	}
	s.mu.Lock()
	errs := s.freeErrs
	s.freeErrs = nil
	s.mu.Unlock()
	return errors.Join(errs...)
}

func (s *Stream[D]) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *Stream[D]) freezeWall() {
	s.wallNs.CompareAndSwap(0, int64(max(time.Since(s.start), 1)))
}

// hold enters a section that may hold a placed batch, unless Close has begun. Every hand-off to
// s.out and every Transfer happens inside one, so once Close has waited for them nothing more
// reaches s.out.
func (s *Stream[D]) hold() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.holders.Add(1)
	return true
}

// fail records a goroutine's failure (the first one wins) and stops the others.
func (s *Stream[D]) fail(err error) {
	s.failOnce.Do(func() {
		s.failErr = err
		close(s.failed)
	})
	s.cancel()
}

// free releases a placed batch the stream holds, keeping the error for Close.
func (s *Stream[D]) free(d D) {
	if err := s.cfg.Free(d); err != nil {
		s.mu.Lock()
		s.freeErrs = append(s.freeErrs, err)
		s.mu.Unlock()
	}
}

// built is one host batch on its way to Transfer.
type built struct {
	index int
	host  Batch // as BatchAt returned it
	send  Batch // what Transfer gets: host, or host padded to cfg.Pad
	rows  int   // host's real row count
	err   error
}

// build calls BatchAt(i) and pads the result, recovering a panic into a BatchError.
func (s *Stream[D]) build(i int) (r built) {
	r.index = i
	defer func() {
		if v := recover(); v != nil {
			r = built{index: i, err: panicError(i, "BatchAt", v)}
		}
	}()
	b, err := s.src.BatchAt(i)
	if err != nil {
		r.err = &BatchError{Index: i, Op: "BatchAt", Err: err}
		return r
	}
	if b == nil {
		r.err = &BatchError{Index: i, Op: "BatchAt", Err: errors.New("returned no batch and no error")}
		return r
	}
	rows, err := BatchWidth(b)
	if err != nil {
		r.err = &BatchError{Index: i, Op: "BatchAt", Err: err}
		return r
	}
	r.host, r.send, r.rows = b, b, rows
	if p := s.cfg.Pad; p > 0 && rows != p {
		if rows > p {
			r.err = &BatchError{Index: i, Op: "pad", Err: &PadError{Rows: rows, Width: p}}
			return built{index: i, err: r.err}
		}
		padded := make(Batch, len(b))
		for name, t := range b {
			padded[name] = PadRows(t, p)
		}
		r.send = padded
	}
	return r
}

// transfer calls cfg.Transfer, recovering a panic into a BatchError.
func (s *Stream[D]) transfer(i int, b Batch) (d D, err error) {
	defer func() {
		if v := recover(); v != nil {
			var zero D
			d, err = zero, panicError(i, "Transfer", v)
		}
	}()
	d, err = s.cfg.Transfer(b)
	if err != nil {
		var zero D
		return zero, &BatchError{Index: i, Op: "Transfer", Err: err}
	}
	return d, nil
}

func panicError(i int, op string, v any) *BatchError {
	var err error
	if e, ok := v.(error); ok {
		err = fmt.Errorf("panic: %w", e)
	} else {
		err = fmt.Errorf("panic: %v", v)
	}
	return &BatchError{Index: i, Op: op, Err: err, Stack: debug.Stack()}
}

// ledger is the exactly-once check: one mark per index in [from, to), set by the consumer as it
// receives each item, so it checks what was actually delivered on every path.
type ledger struct {
	from  int
	marks []uint8
	n     int
}

func newLedger(from, to int) ledger { return ledger{from: from, marks: make([]uint8, to-from)} }

func (l *ledger) mark(i, epoch int) error {
	k := i - l.from
	if k < 0 || k >= len(l.marks) {
		return fmt.Errorf("prefetch: epoch %d: delivered batch %d outside [%d, %d): exactly-once check failed", epoch, i, l.from, l.from+len(l.marks))
	}
	if l.marks[k] != 0 {
		return fmt.Errorf("prefetch: epoch %d: batch %d delivered twice: exactly-once check failed", epoch, i)
	}
	l.marks[k] = 1
	l.n++
	return nil
}

// complete checks, at the end of an epoch that ran to completion, that every index was
// delivered.
func (l *ledger) complete(epoch int) error {
	if l.n == len(l.marks) {
		return nil
	}
	var missing []int
	for k, m := range l.marks {
		if m == 0 {
			missing = append(missing, l.from+k)
			if len(missing) == 8 {
				break
			}
		}
	}
	return fmt.Errorf("prefetch: epoch %d: %d of %d batches never delivered (first: %v): exactly-once check failed",
		epoch, len(l.marks)-l.n, len(l.marks), missing)
}
