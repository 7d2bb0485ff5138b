package prefetch_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nitro-go/nitro/prefetch"
	"go.uber.org/goleak"
)

var allPaths = []prefetch.Path{prefetch.PathFanout, prefetch.PathProducer, prefetch.PathInline}

// newStream declares an epochSource over f for path p and starts it.
func newStream(t *testing.T, f *fakeSource, p prefetch.Path, o prefetch.Options, cfg prefetch.StreamConfig[*dev]) *prefetch.Stream[*dev] {
	t.Helper()
	if p == prefetch.PathProducer {
		o.Workers = 1
		o.HostBatches = max(o.HostBatches, 1)
	}
	s, err := prefetch.Start(context.Background(), declare(t, &epochSource{fakeSource: f}, p, o), 0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s.Path() != p {
		t.Fatalf("Path = %q; want %q", s.Path(), p)
	}
	return s
}

func TestStartPaths(t *testing.T) {
	defer goleak.VerifyNone(t)
	straggle := func(i int) error { time.Sleep(time.Duration((i*7)%5) * time.Millisecond); return nil }
	for _, c := range []struct {
		name string
		src  func(f *fakeSource) prefetch.Source
		path prefetch.Path
		warn string
	}{
		{"fan-out", func(f *fakeSource) prefetch.Source {
			it, _ := prefetch.Prefetch(&epochSource{fakeSource: f}, opts(4, 2, 8))
			return it
		}, prefetch.PathFanout, ""},
		{"fallback", func(f *fakeSource) prefetch.Source {
			it, _ := prefetch.Prefetch(f, opts(4, 2, 8))
			return it
		}, prefetch.PathProducer, "has BatchAt but no BeginEpoch"},
		{"one worker", func(f *fakeSource) prefetch.Source {
			it, _ := prefetch.Prefetch(&epochSource{fakeSource: f}, opts(1, 1, 1))
			return it
		}, prefetch.PathProducer, ""},
		{"NoPrefetch", func(f *fakeSource) prefetch.Source { return prefetch.NoPrefetch(&epochSource{fakeSource: f}) }, prefetch.PathInline, ""},
		{"undeclared", func(f *fakeSource) prefetch.Source { return f }, prefetch.PathInline, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeSource{n: 12, rows: 3, hook: straggle}
			d := &devices{}
			var warns []string
			cfg := d.config()
			cfg.Warn = func(w string) { warns = append(warns, w) }
			src := c.src(f)
			for ep := range 2 { // the fallback warns once per declaration, not per epoch
				s, err := prefetch.Start(context.Background(), src, ep, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if s.Path() != c.path {
					t.Errorf("Path = %q; want %q", s.Path(), c.path)
				}
				got, err := consume(s, d, 0)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, indices(0, 12)) {
					t.Errorf("epoch %d delivered %v; want 0..11 in order", ep, got)
				}
				if err := s.Close(); err != nil {
					t.Error(err)
				}
				if st := s.Stats(); st.Batches != 12 || st.Wall <= 0 || st.Wait < 0 || st.Wait > st.Wall {
					t.Errorf("Stats = %+v", st)
				}
			}
			d.check(t)
			if c.warn == "" && len(warns) != 0 {
				t.Errorf("warnings %q; want none", warns)
			}
			if c.warn != "" && (len(warns) != 1 || !strings.Contains(warns[0], c.warn) || !strings.Contains(warns[0], "4 workers fall back to one producer")) {
				t.Errorf("warnings %q; want one containing %q", warns, c.warn)
			}
		})
	}
}

// With a fixed seed and ordered delivery the sample order is the same whatever the worker count,
// even with stragglers; unordered delivery still serves every batch exactly once.
func TestOrderedDeliveryReproduces(t *testing.T) {
	defer goleak.VerifyNone(t)
	ref := indexed(t, 60, 4, prefetch.ArrayOptions{Shuffle: true, Seed: 3, DropPartial: true})
	var want [][]int32
	for ep := range 2 {
		_ = ref.BeginEpoch(ep)
		want = append(want, order(t, ref))
	}
	for _, unordered := range []bool{false, true} {
		for _, w := range []int{1, 2, 4} {
			a := indexed(t, 60, 4, prefetch.ArrayOptions{Shuffle: true, Seed: 3, DropPartial: true})
			src := &straggler{a}
			it, err := prefetch.Prefetch(src, prefetch.Options{Workers: w, DeviceBatches: 1, HostBatches: 2 * w, Unordered: unordered})
			if err != nil {
				t.Fatal(err)
			}
			for ep := range 2 {
				cfg := prefetch.StreamConfig[prefetch.Batch]{
					Transfer: func(b prefetch.Batch) (prefetch.Batch, error) { return b, nil },
					Free:     func(prefetch.Batch) error { return nil },
				}
				s, err := prefetch.Start(context.Background(), it, ep, cfg)
				if err != nil {
					t.Fatal(err)
				}
				var got []int32
				var idx []int
				for {
					item, ok, err := s.Next()
					if err != nil {
						t.Fatal(err)
					}
					if !ok {
						break
					}
					idx = append(idx, item.Index)
					got = append(got, item.Device["id"].Value().([]int32)...)
				}
				_ = s.Close()
				if !unordered && !slices.Equal(got, want[ep]) {
					t.Errorf("workers %d epoch %d: order differs from the sequential one", w, ep)
				}
				slices.Sort(idx)
				slices.Sort(got)
				sorted := slices.Sorted(slices.Values(want[ep]))
				if !slices.Equal(idx, indices(0, 15)) || !slices.Equal(got, sorted) {
					t.Errorf("workers %d unordered %v epoch %d: not every batch and sample exactly once", w, unordered, ep)
				}
			}
		}
	}
}

// straggler delays some batches so workers finish out of order.
type straggler struct{ *prefetch.ArrayBatches }

func (s *straggler) BatchAt(i int) (prefetch.Batch, error) {
	if i%4 == 1 {
		time.Sleep(3 * time.Millisecond)
	}
	return s.ArrayBatches.BatchAt(i)
}

// BeginEpoch is called exactly once per stream, with the epoch, before any BatchAt, on every path.
func TestBeginEpochOnceBeforeBatchAt(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, p := range allPaths {
		f := &fakeSource{n: 5, rows: 2}
		e := &epochSource{fakeSource: f}
		d := &devices{}
		src := declare(t, e, p, opts(3, 1, 3))
		if p == prefetch.PathProducer {
			src = declare(t, e, p, opts(1, 1, 1))
		}
		for _, ep := range []int{4, 5} {
			s, err := prefetch.Start(context.Background(), src, ep, d.config())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := consume(s, d, 0); err != nil {
				t.Fatal(err)
			}
			_ = s.Close()
		}
		if !slices.Equal(e.begun, []int{4, 5}) {
			t.Errorf("%s: BeginEpoch calls %v; want [4 5]", p, e.begun)
		}
	}
	// A failing BeginEpoch fails Start, before any goroutine.
	e := &epochSource{fakeSource: &fakeSource{n: 5, rows: 2}, err: errors.New("no plan")}
	it, _ := prefetch.Prefetch(e, opts(2, 1, 2))
	d := &devices{}
	_, err := prefetch.Start(context.Background(), it, 9, d.config())
	wantErr(t, err, "epoch 9: BeginEpoch: no plan")
	if e.calls.Load() != 0 {
		t.Error("BatchAt called after a failed BeginEpoch")
	}
}

func TestStartRefuses(t *testing.T) {
	f := &fakeSource{n: 5, rows: 2}
	d := &devices{}
	ctx := context.Background()
	cfg := d.config()
	cfg.Transfer = nil
	_, err := prefetch.Start(ctx, f, 0, cfg)
	wantErr(t, err, "Transfer is nil")
	cfg = d.config()
	cfg.Free = nil
	_, err = prefetch.Start(ctx, f, 0, cfg)
	wantErr(t, err, "Free is nil")
	cfg = d.config()
	cfg.Pad = -1
	_, err = prefetch.Start(ctx, f, 0, cfg)
	wantErr(t, err, "Pad -1")
	cfg = d.config()
	cfg.From, cfg.To = 3, 2
	_, err = prefetch.Start(ctx, f, 0, cfg)
	wantErr(t, err, "From 3, To 2", "Len 5")
	cfg.From, cfg.To = 0, 6
	_, err = prefetch.Start(ctx, f, 0, cfg)
	wantErr(t, err, "To 6")
	_, err = prefetch.Start(ctx, nil, 0, d.config())
	wantErr(t, err, "nil source")
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = prefetch.Start(done, f, 0, d.config())
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Start on a cancelled context: %v", err)
	}
}

// From and To serve a sub-range (a resumed epoch, whole accumulation groups), ledger included.
func TestFromTo(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, p := range allPaths {
		f := &fakeSource{n: 10, rows: 2}
		d := &devices{}
		cfg := d.config()
		cfg.From, cfg.To = 3, 8
		s := newStream(t, f, p, opts(3, 1, 4), cfg)
		got, err := consume(s, d, 0)
		if err != nil || !slices.Equal(got, indices(3, 8)) {
			t.Errorf("%s: got %v, %v; want 3..7", p, got, err)
		}
		_ = s.Close()
		d.check(t)

		// An empty range, and an empty source, end at once.
		cfg.From, cfg.To = 4, 4
		s = newStream(t, f, p, opts(3, 1, 4), cfg)
		if _, ok, err := s.Next(); ok || err != nil {
			t.Errorf("%s: empty range: Next = %v, %v", p, ok, err)
		}
		_ = s.Close()
		s = newStream(t, &fakeSource{}, p, opts(3, 1, 4), d.config())
		if _, ok, err := s.Next(); ok || err != nil {
			t.Errorf("%s: empty source: Next = %v, %v", p, ok, err)
		}
		_ = s.Close()
	}
}

// Eval padding: the producer pads the short final batch to the width, transfers the padded one,
// and reports the real row count; a batch wider than the width is an error naming its index.
func TestEvalPadding(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, p := range allPaths {
		f := &fakeSource{n: 4, rows: 5, lastRows: 2}
		d := &devices{src: f}
		cfg := d.config()
		cfg.Pad = 5
		cfg.KeepHost = true
		s := newStream(t, f, p, opts(2, 1, 2), cfg)
		for i := range 4 {
			it, ok, err := s.Next()
			if err != nil || !ok {
				t.Fatalf("%s: Next = %v, %v", p, ok, err)
			}
			wantRows := 5
			if i == 3 {
				wantRows = 2
			}
			if it.Index != i || it.Rows != wantRows || it.Device.rows != 5 {
				t.Errorf("%s batch %d: Index %d, Rows %d, placed width %d; want %d, %d, 5", p, i, it.Index, it.Rows, it.Device.rows, i, wantRows)
			}
			if w, _ := prefetch.BatchWidth(it.Host); w != wantRows {
				t.Errorf("%s batch %d: Host has %d rows; want the unpadded %d", p, i, w, wantRows)
			}
			if i == 3 && !slices.Equal(it.Device.lastX, []float32{3, 1}) {
				t.Errorf("%s: padded rows %v; want copies of the last real row [3 1]", p, it.Device.lastX)
			}
			d.free(it.Device)
		}
		if _, ok, err := s.Next(); ok || err != nil {
			t.Errorf("%s: after the last batch Next = %v, %v", p, ok, err)
		}
		_ = s.Close()
		d.check(t)

		f = &fakeSource{n: 3, rows: 4}
		d = &devices{}
		cfg = d.config()
		cfg.Pad = 3
		s = newStream(t, f, p, opts(2, 1, 2), cfg)
		_, err := consume(s, d, 0)
		wantErr(t, err, "prefetch: batch ", ": pad: 4 rows, more than the pad width 3")
		_ = s.Close()
		d.check(t)
	}
}

// Without KeepHost the consumer gets no host batch; with it, the unpadded one.
func TestKeepHost(t *testing.T) {
	for _, keep := range []bool{false, true} {
		f := &fakeSource{n: 3, rows: 2}
		d := &devices{}
		cfg := d.config()
		cfg.KeepHost = keep
		s := newStream(t, f, prefetch.PathFanout, opts(2, 1, 2), cfg)
		it, _, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		if (it.Host != nil) != keep {
			t.Errorf("KeepHost %v: Item.Host = %v", keep, it.Host)
		}
		d.free(it.Device)
		_ = s.Close()
		d.check(t)
	}
}

// TestWaitFraction checks what the counters must satisfy whatever the machine's speed, with no
// ratio threshold: on the inline path every BatchAt runs inside Next, so Wait is at least the
// time spent in BatchAt; on the fan-out the time the consumer spends outside Next is at most
// Wall - Wait; Wait <= Wall always; Wall stops when the stream ends; WaitFraction is Wait/Wall.
func TestWaitFraction(t *testing.T) {
	defer goleak.VerifyNone(t)
	check := func(name string, st prefetch.Stats, w float64) {
		t.Helper()
		if st.Wait < 0 || st.Wait > st.Wall || st.Batches != 10 {
			t.Errorf("%s: Stats %+v: want 0 <= Wait <= Wall and 10 batches", name, st)
		}
		if want := st.Wait.Seconds() / st.Wall.Seconds(); w != min(1, want) {
			t.Errorf("%s: WaitFraction %v, Wait/Wall %v", name, w, want)
		}
	}
	// A slow source on the inline path: the consumer waits for every BatchAt.
	var inBatchAt atomic.Int64
	f := &fakeSource{n: 10, rows: 1, hook: func(int) error {
		t0 := time.Now()
		time.Sleep(2 * time.Millisecond)
		inBatchAt.Add(int64(time.Since(t0)))
		return nil
	}}
	d := &devices{}
	s := newStream(t, f, prefetch.PathInline, opts(1, 1, 1), d.config())
	if _, err := consume(s, d, 0); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	check("inline", st, s.WaitFraction())
	if in := time.Duration(inBatchAt.Load()); st.Wait < in {
		t.Errorf("inline: Wait %v, less than the %v spent in BatchAt inside Next", st.Wait, in)
	}
	t.Logf("inline, slow source: WaitFraction %.2f (Wait %v, Wall %v, BatchAt %v)", s.WaitFraction(), st.Wait, st.Wall, time.Duration(inBatchAt.Load()))
	_ = s.Close()

	// A slow consumer on the fan-out: the time it spends outside Next is not waiting.
	f = &fakeSource{n: 10, rows: 1}
	s = newStream(t, f, prefetch.PathFanout, opts(2, 2, 4), d.config())
	var outside time.Duration
	mark := time.Now()
	time.Sleep(5 * time.Millisecond)
	for {
		outside += time.Since(mark)
		it, ok, err := s.Next()
		mark = time.Now()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		time.Sleep(3 * time.Millisecond)
		d.free(it.Device)
	}
	st = s.Stats()
	check("fan-out", st, s.WaitFraction())
	if st.Wall-st.Wait < outside {
		t.Errorf("fan-out: Wall - Wait = %v, less than the %v the consumer spent outside Next", st.Wall-st.Wait, outside)
	}
	t.Logf("fan-out, slow consumer: WaitFraction %.2f (Wait %v, Wall %v, outside Next %v)", s.WaitFraction(), st.Wait, st.Wall, outside)
	time.Sleep(2 * time.Millisecond)
	if s.Stats().Wall != st.Wall {
		t.Error("Wall kept growing after the stream ended")
	}
	_ = s.Close()
	d.check(t)
	if (prefetch.Stats{}).WaitFraction() != 0 {
		t.Error("zero Stats: WaitFraction != 0")
	}
}
