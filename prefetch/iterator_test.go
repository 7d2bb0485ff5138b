package prefetch_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/prefetch"
	"go.uber.org/goleak"
)

func TestOptionsValidate(t *testing.T) {
	if err := prefetch.Defaults().Validate(); err != nil {
		t.Fatalf("Defaults: %v", err)
	}
	if d := prefetch.Defaults(); d.DeviceBatches != 1 || d.HostBatches != 2*d.Workers || d.Workers < 1 || d.Unordered {
		t.Errorf("Defaults = %+v; want 1 device batch, 2*Workers host batches, ordered", d)
	}
	src := &fakeSource{n: 3, rows: 2}
	for _, c := range []struct {
		o    prefetch.Options
		want []string
	}{
		{opts(0, 1, 2), []string{"Workers 0: must be positive"}},
		{opts(-1, 1, 2), []string{"Workers -1: must be positive"}},
		{opts(1, 0, 2), []string{"DeviceBatches 0: must be positive", "NoPrefetch"}},
		{opts(1, -2, 2), []string{"DeviceBatches -2"}},
		{opts(1, 1, 0), []string{"HostBatches 0: must be positive"}},
		{opts(4, 1, 3), []string{"HostBatches 3 < Workers 4", "reorder buffer waits for must be inside the host window", "deadlocks"}},
	} {
		_, err := prefetch.Prefetch(src, c.o)
		wantErr(t, err, c.want...)
	}
	if _, err := prefetch.Prefetch(src, opts(4, 1, 4)); err != nil {
		t.Errorf("HostBatches == Workers refused: %v", err)
	}
	_, err := prefetch.Prefetch(nil, prefetch.Defaults())
	wantErr(t, err, "nil source")
}

// Iterating a declaration by hand is iterating its source: same batches, same plan, no goroutine.
func TestDeclarationsPassThrough(t *testing.T) {
	defer goleak.VerifyNone(t)
	a := indexed(t, 10, 3, prefetch.ArrayOptions{Shuffle: true, Seed: 7, DropPartial: true})
	b := indexed(t, 10, 3, prefetch.ArrayOptions{Shuffle: true, Seed: 7, DropPartial: true})
	it, err := prefetch.Prefetch(a, opts(4, 1, 8))
	if err != nil {
		t.Fatal(err)
	}
	for _, decl := range []prefetch.EpochSource{it, prefetch.NoPrefetch(a)} {
		if decl.Len() != b.Len() {
			t.Errorf("%T.Len = %d; want %d", decl, decl.Len(), b.Len())
		}
		if pd := decl.(prefetch.PartialDropper); !pd.DropsPartial() {
			t.Errorf("%T.DropsPartial = false; the source drops its partial batch", decl)
		}
		for ep := range 2 {
			if err := decl.BeginEpoch(ep); err != nil {
				t.Fatal(err)
			}
			_ = b.BeginEpoch(ep)
			for i := range b.Len() {
				got, err := decl.BatchAt(i)
				if err != nil {
					t.Fatal(err)
				}
				want, _ := b.BatchAt(i)
				if !slices.Equal(got["id"].Value().([]int32), want["id"].Value().([]int32)) {
					t.Errorf("%T epoch %d batch %d: %v; want %v", decl, ep, i, got["id"].Value(), want["id"].Value())
				}
			}
		}
	}
	// A source without BeginEpoch or DropsPartial: the declaration's are a nil no-op and false.
	plain := &fakeSource{n: 2, rows: 1}
	it2, _ := prefetch.Prefetch(plain, opts(1, 1, 1))
	if err := it2.BeginEpoch(3); err != nil || it2.DropsPartial() {
		t.Errorf("BeginEpoch = %v, DropsPartial = %v; want nil, false", err, it2.DropsPartial())
	}
	if plain.calls.Load() != 0 {
		t.Errorf("declaring called BatchAt %d times", plain.calls.Load())
	}
}

func TestWrap(t *testing.T) {
	src := &fakeSource{n: 2, rows: 1}
	w, err := prefetch.Wrap(src, opts(2, 1, 4))
	if err != nil {
		t.Fatal(err)
	}
	it, ok := w.(*prefetch.Iterator)
	if !ok || it.Source() != prefetch.Source(src) || it.Options() != opts(2, 1, 4) {
		t.Fatalf("Wrap(plain) = %#v; want an Iterator at the defaults", w)
	}
	// Declarations are left alone, whatever the defaults.
	for _, decl := range []prefetch.Source{it, prefetch.NoPrefetch(src)} {
		got, err := prefetch.Wrap(decl, prefetch.Options{})
		if err != nil || got != decl {
			t.Errorf("Wrap(%T) = %v, %v; want it unchanged", decl, got, err)
		}
	}
	_, err = prefetch.Wrap(src, prefetch.Options{})
	wantErr(t, err, "Workers 0")

	// The outer declaration wins and wraps the source underneath.
	if inner := prefetch.NoPrefetch(it).Source(); inner != prefetch.Source(src) {
		t.Errorf("NoPrefetch(Iterator).Source() = %T; want the plain source", inner)
	}
	re, _ := prefetch.Prefetch(prefetch.NoPrefetch(src), opts(1, 1, 1))
	if re.Source() != prefetch.Source(src) {
		t.Errorf("Prefetch(NoPrefetch).Source() = %T; want the plain source", re.Source())
	}

	d, err := prefetch.WrapData(prefetch.Data{"train": src, "val": prefetch.NoPrefetch(src)}, opts(2, 1, 4))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d["train"].(*prefetch.Iterator); !ok {
		t.Errorf("WrapData train = %T; want *Iterator", d["train"])
	}
	if _, ok := d["val"].(*prefetch.NoPrefetchSource); !ok {
		t.Errorf("WrapData val = %T; want *NoPrefetchSource", d["val"])
	}
	_, err = prefetch.WrapData(prefetch.Data{"train": src}, prefetch.Options{})
	wantErr(t, err, `split "train"`, "Workers 0")
}

func TestDescribeAndPath(t *testing.T) {
	plain := &fakeSource{n: 2, rows: 1}
	ep := &epochSource{fakeSource: plain}
	for _, c := range []struct {
		src  prefetch.Source
		o    prefetch.Options
		path prefetch.Path
		want string
	}{
		{ep, opts(4, 1, 8), prefetch.PathFanout, "prefetch: fan-out, 4 workers, 8 host batches, 1 device batches staged (3 resident), ordered"},
		{ep, prefetch.Options{Workers: 2, DeviceBatches: 2, HostBatches: 2, Unordered: true}, prefetch.PathFanout, "fan-out, 2 workers, 2 host batches, 2 device batches staged (4 resident), unordered"},
		{plain, opts(4, 1, 8), prefetch.PathProducer, "one producer (Workers 4 unused: *prefetch_test.fakeSource has no BeginEpoch)"},
		{ep, opts(1, 1, 2), prefetch.PathProducer, "prefetch: one producer, 1 device batches staged (3 resident)"},
	} {
		it, err := prefetch.Prefetch(c.src, c.o)
		if err != nil {
			t.Fatal(err)
		}
		if it.Path() != c.path {
			t.Errorf("%+v: Path = %q; want %q", c.o, it.Path(), c.path)
		}
		if d := it.Describe(); !strings.Contains(d, c.want) {
			t.Errorf("Describe = %q; want it to contain %q", d, c.want)
		}
	}
	if d := prefetch.NoPrefetch(ep).Describe(); d != "prefetch: inline (NoPrefetch)" {
		t.Errorf("NoPrefetch Describe = %q", d)
	}
	if !prefetch.FanoutCapable(prefetch.NoPrefetch(ep)) || prefetch.FanoutCapable(plain) {
		t.Error("FanoutCapable must look through declarations at the source underneath")
	}
	// An Iterator is an EpochSource by type even over a plain source; FanoutCapable is not fooled.
	it, _ := prefetch.Prefetch(plain, opts(2, 1, 2))
	if prefetch.FanoutCapable(it) {
		t.Error("FanoutCapable(Iterator over a source without BeginEpoch) = true")
	}
}
