package prefetch_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/prefetch"
)

// fakeSource serves n batches; batch i has rows rows (lastRows for the final one, when set),
// each row's "id" is i. A hook runs at the top of every BatchAt: it may sleep, block, fail or
// panic. It counts the host batches it made that are not yet transferred (the fake transfer
// decrements), and keeps a weak pointer to each batch's "id" tensor so a test can count the
// batches still reachable after a GC.
type fakeSource struct {
	n, rows, lastRows int
	hook              func(i int) error

	calls    atomic.Int64 // BatchAt calls
	inFlight atomic.Int64 // BatchAt calls running now
	pending  atomic.Int64 // host batches made and not yet transferred
	maxPend  atomic.Int64

	mu    sync.Mutex
	weaks []weak.Pointer[tensors.Tensor]
}

func (f *fakeSource) Len() int { return f.n }

func (f *fakeSource) BatchAt(i int) (prefetch.Batch, error) {
	f.calls.Add(1)
	f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	if f.hook != nil {
		if err := f.hook(i); err != nil {
			return nil, err
		}
	}
	if i < 0 || i >= f.n {
		return nil, fmt.Errorf("index %d out of range", i)
	}
	rows := f.rows
	if i == f.n-1 && f.lastRows > 0 {
		rows = f.lastRows
	}
	ids := make([]int32, rows)
	xs := make([]float32, 2*rows)
	for r := range rows {
		ids[r] = int32(i)
		xs[2*r], xs[2*r+1] = float32(i), float32(r)
	}
	id := tensors.FromFlatDataAndDimensions(ids, rows)
	f.mu.Lock()
	f.weaks = append(f.weaks, weak.Make(id))
	f.mu.Unlock()
	p := f.pending.Add(1)
	for {
		m := f.maxPend.Load()
		if p <= m || f.maxPend.CompareAndSwap(m, p) {
			break
		}
	}
	return prefetch.Batch{"id": id, "x": tensors.FromFlatDataAndDimensions(xs, rows, 2)}, nil
}

// reachable runs the GC and counts the batches this source made that are still reachable.
func (f *fakeSource) reachable() int {
	runtime.GC()
	runtime.GC()
	f.mu.Lock()
	defer f.mu.Unlock()
	live := f.weaks[:0]
	for _, w := range f.weaks {
		if w.Value() != nil {
			live = append(live, w)
		}
	}
	f.weaks = live
	return len(live)
}

// epochSource is fakeSource with BeginEpoch, which records its calls and checks that no
// BatchAt is running.
type epochSource struct {
	*fakeSource
	begun []int
	err   error
}

func (e *epochSource) BeginEpoch(epoch int) error {
	if n := e.inFlight.Load(); n != 0 {
		return fmt.Errorf("BeginEpoch(%d) while %d BatchAt calls run", epoch, n)
	}
	e.begun = append(e.begun, epoch)
	return e.err
}

// dev is a fake placed batch.
type dev struct {
	index, rows int // the batch index (from the "id" field) and the placed width
	firstX      []float32
	lastX       []float32
	freed       atomic.Bool
}

// devices is a fake Transfer and Free that count live placed batches.
type devices struct {
	src       *fakeSource // decremented on transfer, when set
	hook      func(index int) error
	live, max atomic.Int64
	transfers atomic.Int64
	frees     atomic.Int64
	bad       atomic.Int64 // double frees, frees of nil
	freeErr   error
}

func (d *devices) transfer(b prefetch.Batch) (*dev, error) {
	id := b["id"].Value().([]int32)
	x := b["x"].Value().([][]float32)
	if d.src != nil {
		d.src.pending.Add(-1)
	}
	if d.hook != nil {
		if err := d.hook(int(id[0])); err != nil {
			return nil, err
		}
	}
	d.transfers.Add(1)
	l := d.live.Add(1)
	for {
		m := d.max.Load()
		if l <= m || d.max.CompareAndSwap(m, l) {
			break
		}
	}
	return &dev{index: int(id[0]), rows: len(id), firstX: x[0], lastX: x[len(x)-1]}, nil
}

func (d *devices) free(x *dev) error {
	if x == nil || x.freed.Swap(true) {
		d.bad.Add(1)
		return errors.New("bad free")
	}
	d.frees.Add(1)
	d.live.Add(-1)
	return d.freeErr
}

func (d *devices) config() prefetch.StreamConfig[*dev] {
	return prefetch.StreamConfig[*dev]{Transfer: d.transfer, Free: d.free}
}

// check fails t when a placed batch is still live or was freed badly.
func (d *devices) check(t *testing.T) {
	t.Helper()
	if n := d.live.Load(); n != 0 {
		t.Errorf("%d placed batches still live (transfers %d, frees %d)", n, d.transfers.Load(), d.frees.Load())
	}
	if n := d.bad.Load(); n != 0 {
		t.Errorf("%d bad frees (double, or of nil)", n)
	}
}

// consume reads s to its end, sleeping step per batch and freeing each placed batch as a
// training loop would, and returns the indices in delivery order.
func consume(s *prefetch.Stream[*dev], d *devices, step time.Duration) ([]int, error) {
	var got []int
	for {
		it, ok, err := s.Next()
		if err != nil {
			return got, err
		}
		if !ok {
			return got, nil
		}
		got = append(got, it.Index)
		if step > 0 {
			time.Sleep(step)
		}
		d.free(it.Device)
	}
}

// declare returns src declared for path p with w workers.
func declare(t testing.TB, src prefetch.Source, p prefetch.Path, opts prefetch.Options) prefetch.Source {
	t.Helper()
	if p == prefetch.PathInline {
		return prefetch.NoPrefetch(src)
	}
	it, err := prefetch.Prefetch(src, opts)
	if err != nil {
		t.Fatal(err)
	}
	return it
}

func opts(workers, device, host int) prefetch.Options {
	return prefetch.Options{Workers: workers, DeviceBatches: device, HostBatches: host}
}

func indices(from, to int) []int {
	var s []int
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

// hangGuard is how long a test waits for an event before it calls the wait a hang: far longer
// than any event takes on a loaded machine, so it bounds a broken run, never a slow one.
const hangGuard = time.Minute

// await polls cond until it holds, failing t (naming what) after hangGuard.
func await(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(hangGuard); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", hangGuard, what)
		}
	}
}

// waitFor polls cond for up to a second.
func waitFor(cond func() bool) bool {
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}
