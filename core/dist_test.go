package core_test

import (
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/dist"
	"github.com/nitro-go/nitro/monitors"
	"github.com/nitro-go/nitro/prefetch"
)

// recorded is a Source that records which of its batches were read: one rank's view of the whole
// dataset, as each process of a multi-host run opens its own copy.
type recorded struct {
	prefetch.Source
	drops bool
	mu    sync.Mutex
	read  map[int]bool
}

func (r *recorded) BatchAt(i int) (prefetch.Batch, error) {
	r.mu.Lock()
	r.read[i] = true
	r.mu.Unlock()
	return r.Source.BatchAt(i)
}

func (r *recorded) DropsPartial() bool { return r.drops }

func (r *recorded) BeginEpoch(e int) error { return r.Source.(prefetch.EpochSource).BeginEpoch(e) }

func (r *recorded) indices() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for i := range r.read {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// Ranked builds its rank's share of the data from the Dist BuildData receives.
type Ranked struct {
	coretest.Base
	t          *testing.T
	got        dist.Dist
	train, val *recorded
}

func (e *Ranked) BuildData(d dist.Dist) (prefetch.Data, error) {
	e.got = d
	e.train = &recorded{Source: coretest.Arrays(e.t, 64, 8, 1, prefetch.ArrayOptions{DropPartial: true}), drops: true, read: map[int]bool{}}
	e.val = &recorded{Source: coretest.Arrays(e.t, 32, 8, 2, prefetch.ArrayOptions{}), read: map[int]bool{}}
	return dist.ShardData(prefetch.Data{"train": e.train, "val": e.val}, d)
}

// files lists dir's entries ("" for a directory that does not exist).
func files(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestDistTwoRanks runs a world of 2 in one process: each rank trains on its own shard (the two
// disjoint, together the whole), the monitors see which rank they watch, and only rank 0's run
// directory gets checkpoints and metrics.jsonl.
func TestDistTwoRanks(t *testing.T) {
	var exps [2]*Ranked
	var dirs [2]string
	var rank0 [2][]bool
	for r := range 2 {
		exps[r], dirs[r] = &Ranked{t: t}, t.TempDir()
		mon := monitors.MonitorFunc(func(_ monitors.Phase, _ monitors.Progress, info monitors.Info) error {
			rank0[r] = append(rank0[r], info.IsRank0)
			return nil
		})
		n, err := core.New(exps[r], core.WithBackend("go"), core.Quiet(), core.WithCache(newCache()),
			core.WithRunDir(dirs[r]), core.WithMaxEpochs(2), core.WithMonitor(mon), core.WithDist(dist.Dist{Rank: r, WorldSize: 2}), core.WithIndependentRanks())
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		if err := n.Train(); err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		if exps[r].got != (dist.Dist{Rank: r, WorldSize: 2}) || n.Dist() != exps[r].got {
			t.Errorf("rank %d: BuildData got %v, Nitro.Dist %v", r, exps[r].got, n.Dist())
		}
		if n.Step() != 2*4 {
			t.Errorf("rank %d: %d steps, want 2 epochs of 4 (8 train batches / 2 ranks)", r, n.Step())
		}
		if (n.Logger() == nil) != (r != 0) || (n.LastCheckpoint() == "") != (r != 0) {
			t.Errorf("rank %d: logger %v, last checkpoint %q: want both on rank 0 only", r, n.Logger(), n.LastCheckpoint())
		}
		if len(rank0[r]) == 0 || slices.Contains(rank0[r], r != 0) {
			t.Errorf("rank %d: monitors saw IsRank0 %v", r, rank0[r])
		}
	}
	for _, split := range []string{"train", "val"} {
		var all []int
		for r := range 2 {
			src := exps[r].train
			if split == "val" {
				src = exps[r].val
			}
			got := src.indices()
			for _, i := range got {
				if i%2 != r {
					t.Errorf("%s: rank %d read batch %d, which is rank %d's", split, r, i, i%2)
				}
			}
			all = append(all, got...)
		}
		slices.Sort(all)
		want := 8
		if split == "val" {
			want = 4
		}
		if len(all) != want || slices.Compact(slices.Clone(all))[want-1] != want-1 {
			t.Errorf("%s: the ranks together read %v, want each of the %d batches once", split, all, want)
		}
	}
	got := files(t, dirs[0])
	if !slices.Contains(got, core.MetricsFile) || !slices.Contains(got, checkpoint.ManifestName) || len(got) < 3 {
		t.Errorf("rank 0's run dir holds %v: want metrics.jsonl, the manifest and checkpoints", got)
	}
	if got := files(t, dirs[1]); len(got) != 0 {
		t.Errorf("rank 1's run dir holds %v: want nothing", got)
	}
}

// A rank other than 0 resumes from rank 0's checkpoints in a shared run dir and trains on, and the
// directory is exactly as rank 0 left it; its Export is refused.
func TestDistRankResumesReadOnly(t *testing.T) {
	dir := t.TempDir()
	n0, err := core.New(&Ranked{t: t}, core.WithBackend("go"), core.Quiet(), core.WithCache(newCache()),
		core.WithRunDir(dir), core.WithMaxEpochs(1), core.WithDist(dist.Dist{Rank: 0, WorldSize: 2}), core.WithIndependentRanks())
	if err != nil {
		t.Fatal(err)
	}
	if err := n0.Train(); err != nil {
		t.Fatal(err)
	}
	before := files(t, dir)
	manifest, _ := os.ReadFile(dir + "/" + checkpoint.ManifestName)
	n1, err := core.New(&Ranked{t: t}, core.WithBackend("go"), core.Quiet(), core.WithCache(newCache()),
		core.WithRunDir(dir), core.WithMaxEpochs(2), core.WithResume(core.ResumeAuto), core.WithDist(dist.Dist{Rank: 1, WorldSize: 2}), core.WithIndependentRanks())
	if err != nil {
		t.Fatal(err)
	}
	if n1.Epoch() != 1 || n1.Step() != 4 {
		t.Fatalf("rank 1 resumed at epoch %d step %d, want rank 0's 1 and 4", n1.Epoch(), n1.Step())
	}
	if err := n1.Train(); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(dir + "/" + checkpoint.ManifestName)
	if got := files(t, dir); !slices.Equal(got, before) || string(after) != string(manifest) {
		t.Errorf("rank 1 changed the shared run dir: %v became %v", before, got)
	}
	err = n1.ViewModel("Export", func(*core.ModelView) error { return nil })
	coretest.WantErr(t, err, "Export on rank 1 of 2: only rank 0 writes exports", "n.Dist().IsRank0()")
	if err := n0.ViewModel("Export", func(*core.ModelView) error { return nil }); err != nil {
		t.Errorf("rank 0's export view: %v", err)
	}
}

// PlainData has the BuildData form without a Dist; it keeps working with WithDist, each rank
// calling it alike.
type PlainData struct{ coretest.Base }

func (*PlainData) BuildData() (prefetch.Data, error) { return prefetch.Data{"train": dataTrain}, nil }

var dataTrain prefetch.Source

// WrongData has a BuildData of neither form.
type WrongData struct{ coretest.Base }

func (*WrongData) BuildData(int) (prefetch.Data, error) { return nil, nil }

func TestDistSetupErrors(t *testing.T) {
	dataTrain = coretest.Arrays(t, 64, 16, 1, prefetch.ArrayOptions{DropPartial: true})
	mc := &core.MemoryConsole{}
	n, err := core.New(&PlainData{}, core.WithBackend("go"), core.WithConsole(mc), core.WithCache(newCache()),
		core.WithoutLogger(), core.WithoutCheckpoints(), core.WithDist(dist.Dist{Rank: 1, WorldSize: 2}), core.WithIndependentRanks())
	if err != nil || n.Dist().Rank != 1 {
		t.Fatalf("BuildData() under WithDist: %v", err)
	}
	if !slices.Contains(mc.Notices, "rank 1 of 2: this process writes no checkpoints, metrics or exports; rank 0 does") {
		t.Errorf("rank 1's notices %q: want the one saying it writes nothing", mc.Notices)
	}
	// A run dir no rank could write (a file): rank 0 is refused at setup, rank 1 writes nothing
	// there and is not.
	file := t.TempDir() + "/file"
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		_, err := core.New(&PlainData{}, core.WithBackend("go"), core.Quiet(), core.WithCache(newCache()), core.WithRunDir(file),
			core.WithDist(dist.Dist{Rank: r, WorldSize: 2}), core.WithIndependentRanks())
		if (err != nil) != (r == 0) {
			t.Errorf("rank %d with an unwritable run dir: %v; want an error on rank 0 only", r, err)
		}
	}
	if d := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 0)).Dist(); d != dist.Single() {
		t.Errorf("default Dist %v, want rank 0 of 1", d)
	}
	_, err = core.New(&PlainData{}, coretest.GoOpts(nil, core.WithDist(dist.Dist{Rank: 2, WorldSize: 2}))...)
	coretest.WantErr(t, err, "WithDist: dist: Rank 2 with WorldSize 2: the rank must be in [0, 2)")
	_, err = core.New(&PlainData{}, coretest.GoOpts(nil, core.WithDist(dist.Dist{}))...)
	coretest.WantErr(t, err, "WithDist: dist: WorldSize 0")
	_, err = core.New(&WrongData{}, coretest.GoOpts(nil)...)
	coretest.WantErr(t, err, "experiment WrongData has BuildData of type func(*core_test.WrongData, int)", "neither hook form", "BuildData(d dist.Dist) (prefetch.Data, error)")
	if strings.Contains(err.Error(), "BuildData: experiment") {
		t.Errorf("the missing-hook error is prefixed as the hook's own: %v", err)
	}
}

// TestNoCollectiveIsRefused: several processes with no collective would train one model each,
// so New refuses them, naming the launcher and the ways to one model; WithIndependentRanks lets
// them, said as a warning and in the config report; a single process says nothing of it.
func TestNoCollectiveIsRefused(t *testing.T) {
	dataTrain = coretest.Arrays(t, 64, 16, 1, prefetch.ArrayOptions{DropPartial: true})
	opts := func(d dist.Dist, warned *[]string, more ...core.Option) []core.Option {
		return append([]core.Option{core.WithBackend("go"), core.Quiet(), core.WithCache(newCache()),
			core.WithWarn(func(m string) { *warned = append(*warned, m) }),
			core.WithoutLogger(), core.WithoutCheckpoints(), core.WithDist(d)}, more...)
	}
	var warned []string
	_, err := core.New(&PlainData{}, opts(dist.Dist{Rank: 1, WorldSize: 4, Source: dist.SourceTorchrun}, &warned)...)
	coretest.WantErr(t, err, "rank 1 of 4, launched by torchrun, has no collective", "mpirun", "srun --mpi=pmix", "CUDA plugin", "--independent-ranks (core.WithIndependentRanks)")
	for _, c := range []struct {
		d    dist.Dist
		more []core.Option
	}{{dist.Dist{Rank: 0, WorldSize: 2}, []core.Option{core.WithIndependentRanks()}}, {dist.Single(), nil}} {
		warned = nil
		n, err := core.New(&PlainData{}, opts(c.d, &warned, c.more...)...)
		if err != nil {
			t.Fatal(err)
		}
		said := slices.ContainsFunc(warned, func(m string) bool { return strings.Contains(m, "each process trains its own model") })
		inReport := strings.Contains(n.ConfigReport(), "no collective: each process trains its own model")
		if want := c.d.WorldSize > 1; said != want || inReport != want {
			t.Errorf("%s: warned %v (%q), in the config report %v; want both %v", c.d, said, warned, inReport, want)
		}
	}
}
