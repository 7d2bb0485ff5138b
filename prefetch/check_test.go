package prefetch_test

import (
	"fmt"
	"iter"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/prefetch"
)

// rowsSource serves an int32 "id" field (the sample index) and a float32 "x" field [n, 2] in
// batches of size. Its BatchAt reads samples first(i)..first(i)+size; its Sequential walks a
// running offset, which is always right. offsetBug makes first(i) = i, the classic bug.
type rowsSource struct {
	n, size   int
	offsetBug bool
	noSeq     bool
}

func (r *rowsSource) Len() int { return (r.n + r.size - 1) / r.size }

func (r *rowsSource) rows(lo, hi int) prefetch.Batch {
	ids := make([]int32, hi-lo)
	xs := make([]float32, 2*(hi-lo))
	for k := range hi - lo {
		ids[k] = int32(lo + k)
		xs[2*k], xs[2*k+1] = float32(lo+k), -float32(lo+k)
	}
	return prefetch.Batch{
		"id": tensors.FromFlatDataAndDimensions(ids, hi-lo),
		"x":  tensors.FromFlatDataAndDimensions(xs, hi-lo, 2),
	}
}

func (r *rowsSource) BatchAt(i int) (prefetch.Batch, error) {
	if i < 0 || i >= r.Len() {
		return nil, fmt.Errorf("batch %d out of range", i)
	}
	lo := i * r.size
	if r.offsetBug {
		lo = i // rows i..i+size: a sample offset taken for a batch index
	}
	return r.rows(lo, min(lo+r.size, r.n)), nil
}

func (r *rowsSource) Sequential() iter.Seq2[prefetch.Batch, error] {
	return func(yield func(prefetch.Batch, error) bool) {
		for off := 0; off < r.n; off += r.size {
			if !yield(r.rows(off, min(off+r.size, r.n)), nil) {
				return
			}
		}
	}
}

// plainRows is a rowsSource without a Sequential.
type plainRows struct{ r *rowsSource }

func (p plainRows) Len() int                              { return p.r.Len() }
func (p plainRows) BatchAt(i int) (prefetch.Batch, error) { return p.r.BatchAt(i) }

func wantCheckErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q lacks %q", err, p)
		}
	}
}

func TestCheckBatchAtCatchesTheSampleOffsetBug(t *testing.T) {
	if err := prefetch.CheckBatchAt(&rowsSource{n: 10, size: 4}, true); err != nil {
		t.Fatalf("a correct source: %v", err)
	}
	// Batch 0 is rows 0..4 either way; batch 1 is rows 1..5 instead of 4..8.
	err := prefetch.CheckBatchAt(&rowsSource{n: 10, size: 4, offsetBug: true}, true)
	wantCheckErr(t, err, "batch 1", `field "id"`, "row 0 differs")
	// Without values the shapes still give it away: the buggy final batch is full, not short.
	err = prefetch.CheckBatchAt(&rowsSource{n: 10, size: 4, offsetBug: true}, false)
	wantCheckErr(t, err, "batch 2", `field "id"`, "shape [4]", "[2]")
}

func TestCheckBatchAtArrayBatches(t *testing.T) {
	for _, o := range []prefetch.ArrayOptions{{}, {DropPartial: true}, {Shuffle: true, Seed: 3}, {Shuffle: true, Seed: 3, DropPartial: true}} {
		a := indexed(t, 23, 5, o)
		if err := prefetch.CheckBatchAt(a, true); err != nil {
			t.Fatalf("%+v before BeginEpoch: %v", o, err)
		}
		for ep := range 3 {
			if err := a.BeginEpoch(ep); err != nil {
				t.Fatal(err)
			}
			if err := prefetch.CheckBatchAt(a, true); err != nil {
				t.Fatalf("%+v epoch %d: %v", o, ep, err)
			}
		}
		// Declarations are looked through.
		it, err := prefetch.Prefetch(a, prefetch.Defaults())
		if err != nil {
			t.Fatal(err)
		}
		if err := prefetch.CheckBatchAt(it, true); err != nil {
			t.Fatalf("%+v through Prefetch: %v", o, err)
		}
		if err := prefetch.CheckBatchAt(prefetch.NoPrefetch(a), false); err != nil {
			t.Fatalf("%+v through NoPrefetch: %v", o, err)
		}
	}
}

func TestArrayBatchesSequentialWalksTheEpoch(t *testing.T) {
	a := indexed(t, 11, 4, prefetch.ArrayOptions{Shuffle: true, Seed: 9, DropPartial: true})
	if err := a.BeginEpoch(1); err != nil {
		t.Fatal(err)
	}
	seen := map[int32]bool{}
	n := 0
	for b, err := range a.Sequential() {
		if err != nil {
			t.Fatal(err)
		}
		if w, _ := prefetch.BatchWidth(b); w != 4 {
			t.Fatalf("batch %d has %d rows, want 4 (the short final batch is dropped)", n, w)
		}
		for _, id := range tensors.MustCopyFlatData[int32](b["id"]) {
			if seen[id] {
				t.Fatalf("sample %d served twice", id)
			}
			seen[id] = true
		}
		n++
	}
	if n != a.Len() || len(seen) != 8 {
		t.Fatalf("%d batches, %d samples; want %d and 8", n, len(seen), a.Len())
	}
	// Stopping early is allowed.
	for range a.Sequential() {
		break
	}
}

// lying sources, each wrong in one way.
type (
	lenLies struct{ *rowsSource } // Len says one batch more than the walk yields
	renamed struct{ *rowsSource } // BatchAt calls "id" "ids"
	retyped struct{ *rowsSource } // BatchAt serves "id" as float32
	cached  struct {
		plainRows
		b prefetch.Batch
	} // BatchAt returns the same tensors every time
	drifting struct {
		plainRows
		calls int
	} // each read of a batch differs
	panicky     struct{ *rowsSource } // BatchAt(1) panics
	failing     struct{ *rowsSource } // BatchAt(2) fails
	wideLast    struct{ plainRows }   // the last batch is wider than the first
	shortMiddle struct{ plainRows }   // a batch before the last is short
	extraField  struct{ plainRows }   // batch 1 has a field batch 0 lacks
	walkFails   struct{ *rowsSource } // the sequential walk fails at batch 1
	walkTooLong struct{ *rowsSource } // the sequential walk yields one batch too many
)

func (l lenLies) Len() int { return l.rowsSource.Len() + 1 }
func (l lenLies) BatchAt(i int) (prefetch.Batch, error) {
	if i == l.rowsSource.Len() {
		return l.rows(0, 1), nil
	}
	return l.rowsSource.BatchAt(i)
}

func (r renamed) BatchAt(i int) (prefetch.Batch, error) {
	b, err := r.rowsSource.BatchAt(i)
	if err == nil {
		b["ids"] = b["id"]
		delete(b, "id")
	}
	return b, err
}

func (r retyped) BatchAt(i int) (prefetch.Batch, error) {
	b, err := r.rowsSource.BatchAt(i)
	if err == nil {
		ids := tensors.MustCopyFlatData[int32](b["id"])
		f := make([]float32, len(ids))
		for k, v := range ids {
			f[k] = float32(v)
		}
		b["id"] = tensors.FromFlatDataAndDimensions(f, len(f))
	}
	return b, err
}

func (c *cached) BatchAt(i int) (prefetch.Batch, error) {
	if c.b == nil {
		c.b, _ = c.plainRows.BatchAt(0)
	}
	return c.b, nil
}

func (d *drifting) BatchAt(i int) (prefetch.Batch, error) {
	d.calls++
	b, err := d.plainRows.BatchAt(i)
	if err == nil && d.calls == 4 {
		tensors.MustMutableFlatData[float32](b["x"], func(x []float32) { x[len(x)-1] = 99 })
	}
	return b, err
}

func (p panicky) BatchAt(i int) (prefetch.Batch, error) {
	if i == 1 {
		panic("boom")
	}
	return p.rowsSource.BatchAt(i)
}

func (f failing) BatchAt(i int) (prefetch.Batch, error) {
	if i == 2 {
		return nil, fmt.Errorf("disk on fire")
	}
	return f.rowsSource.BatchAt(i)
}

func (w wideLast) BatchAt(i int) (prefetch.Batch, error) {
	if i == w.Len()-1 {
		return w.r.rows(0, w.r.size+1), nil
	}
	return w.plainRows.BatchAt(i)
}

func (s shortMiddle) BatchAt(i int) (prefetch.Batch, error) {
	if i == 1 {
		return s.r.rows(4, 5), nil
	}
	return s.plainRows.BatchAt(i)
}

func (e extraField) BatchAt(i int) (prefetch.Batch, error) {
	b, err := e.plainRows.BatchAt(i)
	if err == nil && i == 1 {
		b["y"] = tensors.FromFlatDataAndDimensions(make([]float32, 4), 4)
	}
	return b, err
}

func (w walkFails) Sequential() iter.Seq2[prefetch.Batch, error] {
	return func(yield func(prefetch.Batch, error) bool) {
		if yield(w.rows(0, 4), nil) {
			yield(nil, fmt.Errorf("walk broke"))
		}
	}
}

func (w walkTooLong) Sequential() iter.Seq2[prefetch.Batch, error] {
	return func(yield func(prefetch.Batch, error) bool) {
		for b, err := range w.rowsSource.Sequential() {
			if !yield(b, err) {
				return
			}
		}
		yield(w.rows(0, 1), nil)
	}
}

func TestCheckBatchAtErrorsNameTheBatchAndField(t *testing.T) {
	src := func() *rowsSource { return &rowsSource{n: 10, size: 4} }
	plain := func() plainRows { return plainRows{src()} }
	cases := []struct {
		name   string
		s      prefetch.Source
		values bool
		want   []string
	}{
		{"Len", lenLies{src()}, false, []string{"yields 3 batches", "Len() says 4"}},
		{"names", renamed{src()}, false, []string{"batch 0", `field "id"`, "missing"}},
		{"dtypes", retyped{src()}, false, []string{"batch 0", `field "id"`, "dtype Float32", "Int32"}},
		{"panic", panicky{src()}, false, []string{"batch 1", "panicked", "boom"}},
		{"error", failing{src()}, false, []string{"batch 2", "disk on fire"}},
		{"walk error", walkFails{src()}, false, []string{"batch 1", "sequential walk failed", "walk broke"}},
		{"walk too long", walkTooLong{src()}, false, []string{"more batches than Len() = 3"}},
		{"nil", nil, false, []string{"nil source"}},
		// Without a Sequential: repeatability and layout.
		{"same tensors", &cached{plainRows: plain()}, false, []string{"batch 0", `field "id"`, "same tensor"}},
		{"not repeatable", &drifting{plainRows: plain()}, true, []string{"batch 1", `field "x"`, "row 3 differs", "read again"}},
		{"wide last", wideLast{plain()}, false, []string{"batch 2 has 5 rows", "batch 0 has 4"}},
		{"short middle", shortMiddle{plain()}, false, []string{"batch 1 has 1 rows", "only the final batch"}},
		{"extra field", extraField{plain()}, false, []string{"batch 1 has fields [id x y]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantCheckErr(t, prefetch.CheckBatchAt(c.s, c.values), c.want...)
		})
	}
	// Without a Sequential, the offset bug goes unseen when batches are repeatable: the doc says so.
	if err := prefetch.CheckBatchAt(plainRows{&rowsSource{n: 12, size: 4, offsetBug: true}}, true); err != nil {
		t.Fatalf("a repeatable source without a Sequential: %v", err)
	}
}
