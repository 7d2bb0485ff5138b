package compilecache_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nitro-go/nitro/compilecache"
)

func gradKey() compilecache.Key {
	return compilecache.Key{
		Kind:           compilecache.KindGradient,
		Experiment:     "mnist.MLP",
		GraphConstHash: "h128",
		GraphConst:     [][2]string{{"width", "128"}, {"act", "relu"}},
		Hook:           "mnist.MLP.Loss",
		Inputs: []compilecache.Input{
			{Name: "img", DType: "float32", Shape: []int{128, 784}},
			{Name: "label", DType: "int32", Shape: []int{128}},
		},
		DeviceCount: 1,
		Accum:       1,
	}
}

func optKey() compilecache.Key {
	return compilecache.Key{
		Kind:           compilecache.KindOptimizer,
		Experiment:     "mnist.MLP",
		GraphConstHash: "h128",
		Inputs:         []compilecache.Input{{Name: "params.default", DType: "float32", Shape: []int{101770}}},
		DeviceCount:    1,
		Extra:          [][2]string{{"chain", "radam(beta1=0.9,beta2=0.999,eps=1e-08)"}},
	}
}

// counting returns a compile func and a counter of its calls.
func counting(v any) (func() (any, error), *atomic.Int64) {
	n := &atomic.Int64{}
	return func() (any, error) { n.Add(1); return v, nil }, n
}

func mustGet(t *testing.T, c *compilecache.Cache, k compilecache.Key, compile func() (any, error)) (any, compilecache.Lookup) {
	t.Helper()
	v, l, err := c.Get(k, compile)
	if err != nil {
		t.Fatalf("Get(%s): %v", k.Kind, err)
	}
	return v, l
}

func wantStats(t *testing.T, c *compilecache.Cache, want compilecache.Stats) {
	t.Helper()
	if got := c.Stats(); got != want {
		t.Fatalf("Stats() = %+v, want %+v", got, want)
	}
}

func TestHitAfterMiss(t *testing.T) {
	c := compilecache.New()
	compile, n := counting("prog")
	v, l := mustGet(t, c, gradKey(), compile)
	if l.Hit || v != "prog" || l.Why != "" {
		t.Fatalf("first Get: value %v lookup %+v, want a miss with no explanation", v, l)
	}
	v, l = mustGet(t, c, gradKey(), compile)
	if !l.Hit || v != "prog" {
		t.Fatalf("second Get: value %v lookup %+v, want a hit", v, l)
	}
	if n.Load() != 1 {
		t.Fatalf("compiled %d times, want 1", n.Load())
	}
	wantStats(t, c, compilecache.Stats{Hits: 1, Misses: 1, Entries: 1})
}

// The acceptance check: a train-only run compiles 2 programs and misses do not grow with steps.
func TestTrainOnlyRunCompilesTwoAndStepsOnlyHit(t *testing.T) {
	c := compilecache.New()
	compile, n := counting("prog")
	for step := 0; step < 50; step++ {
		mustGet(t, c, gradKey(), compile)
		mustGet(t, c, optKey(), compile)
	}
	wantStats(t, c, compilecache.Stats{Hits: 98, Misses: 2, Entries: 2})
	if n.Load() != 2 {
		t.Fatalf("compiled %d times, want 2", n.Load())
	}
}

// Changing accum misses the gradient program only; changing the clip misses the optimizer program only.
func TestAccumAndClipMoveOnlyTheirProgram(t *testing.T) {
	c := compilecache.New()
	compile, _ := counting("prog")
	mustGet(t, c, gradKey(), compile)
	mustGet(t, c, optKey(), compile)

	g := gradKey()
	g.Accum = 2
	if _, l := mustGet(t, c, g, compile); l.Hit || l.Why != "accum: 1 -> 2" {
		t.Fatalf("gradient with accum 2: %+v, want a miss explained by accum: 1 -> 2", l)
	}
	if _, l := mustGet(t, c, optKey(), compile); !l.Hit {
		t.Fatal("optimizer program missed after an accum change")
	}
	o := optKey()
	o.Clip = 1
	if _, l := mustGet(t, c, o, compile); l.Hit || l.Why != "clip: 0 -> 1" {
		t.Fatalf("optimizer with clip 1: %+v, want a miss explained by clip: 0 -> 1", l)
	}
	if _, l := mustGet(t, c, g, compile); !l.Hit {
		t.Fatal("gradient program missed after a clip change")
	}
	wantStats(t, c, compilecache.Stats{Hits: 2, Misses: 4, Entries: 4})
}

func TestKeyValidation(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*compilecache.Key)
		wants []string
	}{
		{"accum on eval", func(k *compilecache.Key) { k.Kind = "eval"; k.Accum = 2 }, []string{"eval program", "Accum 2", "gradient program's key only", "leave it 0"}},
		{"clip on gradient", func(k *compilecache.Key) { k.Clip = 1 }, []string{"gradient program", "Clip 1", "optimizer program's key only", "leave it 0"}},
		{"negative clip", func(k *compilecache.Key) { k.Kind = compilecache.KindOptimizer; k.Accum = 0; k.Clip = -1 }, []string{"Clip -1", "finite threshold >= 0"}},
		{"gradient without accum", func(k *compilecache.Key) { k.Accum = 0 }, []string{"Accum 0", "accumulation count (>= 1)"}},
		{"no devices", func(k *compilecache.Key) { k.DeviceCount = 0 }, []string{"DeviceCount 0", "number of devices"}},
		{"no kind", func(k *compilecache.Key) { k.Kind = "" }, []string{"Kind is empty", `"gradient"`}},
		{"no experiment", func(k *compilecache.Key) { k.Experiment = "" }, []string{"Experiment is empty", "type name"}},
		{"duplicate input", func(k *compilecache.Key) { k.Inputs[1].Name = "img" }, []string{"input img appears twice", "distinct Name"}},
		{"unnamed input", func(k *compilecache.Key) { k.Inputs[0].Name = "" }, []string{"input 0 has no Name"}},
		{"duplicate graphconst", func(k *compilecache.Key) { k.GraphConst = append(k.GraphConst, [2]string{"width", "3"}) }, []string{"GraphConst field width appears twice"}},
		{"duplicate extra", func(k *compilecache.Key) { k.Extra = [][2]string{{"chain", "a"}, {"chain", "b"}} }, []string{"Extra component chain appears twice"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := compilecache.New()
			k := gradKey()
			tc.edit(&k)
			compile, n := counting("prog")
			_, _, err := c.Get(k, compile)
			if err == nil {
				t.Fatal("Get accepted an invalid key")
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if n.Load() != 0 {
				t.Error("compile ran for an invalid key")
			}
			wantStats(t, c, compilecache.Stats{})
		})
	}
	if _, _, err := compilecache.New().Get(gradKey(), nil); err == nil || !strings.Contains(err.Error(), "compile func is nil") {
		t.Fatalf("nil compile: err = %v", err)
	}
}

func TestExplanationTexts(t *testing.T) {
	cases := []struct {
		name string
		edit func(*compilecache.Key)
		want string
	}{
		{"graphconst field", func(k *compilecache.Key) {
			k.GraphConstHash = "h256"
			k.GraphConst = [][2]string{{"width", "256"}, {"act", "relu"}}
		}, "graphconst field width: 128 -> 256"},
		{"graphconst field added", func(k *compilecache.Key) {
			k.GraphConstHash = "h2"
			k.GraphConst = append(k.GraphConst, [2]string{"depth", "3"})
		}, "graphconst field depth: (absent) -> 3"},
		{"graphconst field removed", func(k *compilecache.Key) {
			k.GraphConstHash = "h2"
			k.GraphConst = k.GraphConst[:1]
		}, "graphconst field act: relu -> (absent)"},
		{"graphconst hash only", func(k *compilecache.Key) { k.GraphConstHash = "h999" }, "graphconst hash: h128 -> h999"},
		{"input shape", func(k *compilecache.Key) { k.Inputs[0].Shape = []int{96, 784} }, "input img: [128 784] -> [96 784]"},
		{"input dtype", func(k *compilecache.Key) { k.Inputs[0].DType = "float64" }, "input img: float32[128 784] -> float64[128 784]"},
		{"input added", func(k *compilecache.Key) {
			k.Inputs = append(k.Inputs, compilecache.Input{Name: "mask", DType: "bool", Shape: []int{128}})
		}, "input mask: (absent) -> bool[128]"},
		{"input removed", func(k *compilecache.Key) { k.Inputs = k.Inputs[:1] }, "input label: int32[128] -> (absent)"},
		{"input order", func(k *compilecache.Key) { k.Inputs[0], k.Inputs[1] = k.Inputs[1], k.Inputs[0] }, "input order: [img label] -> [label img]"},
		{"hook", func(k *compilecache.Key) { k.Hook = "mnist.MLP.Loss2" }, "hook: mnist.MLP.Loss -> mnist.MLP.Loss2"},
		{"device count", func(k *compilecache.Key) { k.DeviceCount = 2 }, "device count: 1 -> 2"},
		{"accum", func(k *compilecache.Key) { k.Accum = 2 }, "accum: 1 -> 2"},
		{"extra", func(k *compilecache.Key) { k.Extra = [][2]string{{"chain", "adam"}} }, "chain: (absent) -> adam"},
		{"two components", func(k *compilecache.Key) { k.Accum = 4; k.DeviceCount = 2 }, "device count: 1 -> 2; accum: 1 -> 4"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := compilecache.New()
			compile, _ := counting("prog")
			mustGet(t, c, gradKey(), compile)
			k := gradKey()
			tc.edit(&k)
			_, l := mustGet(t, c, k, compile)
			if l.Hit {
				t.Fatal("edited key hit")
			}
			if l.Why != tc.want {
				t.Fatalf("Why = %q, want %q", l.Why, tc.want)
			}
			if strings.Join(l.Changes, "; ") != l.Why {
				t.Fatalf("Changes %q do not make up Why %q", l.Changes, l.Why)
			}
			ex := c.Explanations()
			if len(ex) != 1 || ex[0] != "gradient program of mnist.MLP recompiled: "+tc.want {
				t.Fatalf("Explanations() = %q", ex)
			}
		})
	}
}

func TestExplainsAgainstClosestEntryOfSameKindAndExperiment(t *testing.T) {
	c := compilecache.New()
	compile, _ := counting("prog")
	near := gradKey()
	near.Accum = 2
	far := gradKey()
	far.Accum, far.DeviceCount, far.Hook = 8, 4, "mnist.MLP.OtherLoss"
	// near first: closeness must beat recency.
	mustGet(t, c, near, compile)
	mustGet(t, c, far, compile)
	// Entries of another kind or experiment are never compared against.
	other := gradKey()
	other.Experiment = "other.Exp"
	other.Accum = 3
	if _, l := mustGet(t, c, other, compile); l.Why != "" {
		t.Fatalf("first program of another experiment explained as %q, want no explanation", l.Why)
	}
	eval := gradKey()
	eval.Kind, eval.Accum = "eval", 0
	if _, l := mustGet(t, c, eval, compile); l.Why != "" {
		t.Fatalf("first eval program explained as %q, want no explanation", l.Why)
	}

	k := gradKey()
	k.Accum = 8 // one move from near (accum), two from far (hook, device count)
	_, l := mustGet(t, c, k, compile)
	if l.Why != "accum: 2 -> 8" {
		t.Fatalf("Why = %q, want the closest entry (near, one moved component): accum: 2 -> 8", l.Why)
	}
	k2 := gradKey()
	k2.Accum = 4
	_, l = mustGet(t, c, k2, compile)
	// Equally close to near (accum 2 -> 4) and k (accum 8 -> 4): the most recent entry, k, wins.
	if l.Why != "accum: 8 -> 4" {
		t.Fatalf("Why = %q, want the most recent of the equally close entries", l.Why)
	}
}

func TestExplanationsAreBounded(t *testing.T) {
	c := compilecache.New()
	compile, _ := counting("prog")
	for accum := 1; accum <= 100; accum++ {
		k := gradKey()
		k.Accum = accum
		mustGet(t, c, k, compile)
	}
	ex := c.Explanations()
	if len(ex) != 64 {
		t.Fatalf("%d explanations kept, want 64", len(ex))
	}
	if !strings.HasSuffix(ex[63], "accum: 99 -> 100") || !strings.HasSuffix(ex[0], "accum: 36 -> 37") {
		t.Fatalf("kept explanations are not the most recent: first %q last %q", ex[0], ex[63])
	}
	ex[0] = "mutated"
	if c.Explanations()[0] == "mutated" {
		t.Fatal("Explanations returned the cache's own slice")
	}
}

func TestFailedCompileRetriedShowsMissesAboveEntries(t *testing.T) {
	c := compilecache.New()
	boom := errors.New("xla: out of memory")
	_, l, err := c.Get(gradKey(), func() (any, error) { return nil, boom })
	if !errors.Is(err, boom) || l.Hit {
		t.Fatalf("failed compile: err %v lookup %+v", err, l)
	}
	if !strings.Contains(err.Error(), "compiling gradient program of mnist.MLP") {
		t.Fatalf("error %q does not name the program", err)
	}
	wantStats(t, c, compilecache.Stats{Misses: 1, Entries: 0})
	compile, n := counting("prog")
	mustGet(t, c, gradKey(), compile)
	if n.Load() != 1 {
		t.Fatal("retry did not compile")
	}
	wantStats(t, c, compilecache.Stats{Misses: 2, Entries: 1})
}

func TestPanickingCompileBecomesError(t *testing.T) {
	c := compilecache.New()
	_, _, err := c.Get(gradKey(), func() (any, error) { panic("shape mismatch in Dot") })
	if err == nil || !strings.Contains(err.Error(), "panic: shape mismatch in Dot") || !strings.Contains(err.Error(), "gradient program") {
		t.Fatalf("err = %v, want the panic as an error naming the program", err)
	}
	wantStats(t, c, compilecache.Stats{Misses: 1})
}

func TestEvictThenRecompileShowsMissesAboveEntries(t *testing.T) {
	c := compilecache.New()
	compile, n := counting("prog")
	mustGet(t, c, gradKey(), compile)
	if !c.Evict(gradKey()) {
		t.Fatal("Evict of a stored key returned false")
	}
	if c.Evict(gradKey()) {
		t.Fatal("second Evict returned true")
	}
	wantStats(t, c, compilecache.Stats{Misses: 1, Entries: 0})
	mustGet(t, c, gradKey(), compile)
	if n.Load() != 2 {
		t.Fatalf("compiled %d times, want 2", n.Load())
	}
	wantStats(t, c, compilecache.Stats{Misses: 2, Entries: 1})
}

func TestResetEmptiesCacheAndCounters(t *testing.T) {
	c := compilecache.New()
	compile, n := counting("prog")
	mustGet(t, c, gradKey(), compile)
	k := gradKey()
	k.Accum = 2
	mustGet(t, c, k, compile)
	mustGet(t, c, k, compile)
	c.Reset()
	wantStats(t, c, compilecache.Stats{})
	if len(c.Explanations()) != 0 {
		t.Fatal("Reset kept explanations")
	}
	if _, l := mustGet(t, c, k, compile); l.Hit || l.Why != "" {
		t.Fatalf("after Reset: %+v, want a miss with nothing to compare against", l)
	}
	if n.Load() != 3 {
		t.Fatalf("compiled %d times, want 3", n.Load())
	}
}

func TestResetDuringCompileDoesNotStoreIt(t *testing.T) {
	c := compilecache.New()
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		_, _, err := c.Get(gradKey(), func() (any, error) { close(started); <-release; return "old", nil })
		done <- err
	}()
	<-started
	c.Reset()
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wantStats(t, c, compilecache.Stats{})
}

func TestCallerCannotRewriteStoredKey(t *testing.T) {
	c := compilecache.New()
	compile, _ := counting("prog")
	k := gradKey()
	mustGet(t, c, k, compile)
	k.Inputs[0].Shape[0] = 96
	k.GraphConst[0][1] = "999"
	_, l := mustGet(t, c, k, compile)
	if l.Why != "input img: [128 784] -> [96 784]" {
		t.Fatalf("Why = %q: the stored key was changed through the caller's slices", l.Why)
	}
	if _, l := mustGet(t, c, gradKey(), compile); !l.Hit {
		t.Fatal("original key no longer hits")
	}
}

func TestConcurrentSameKeyCompilesOnce(t *testing.T) {
	c := compilecache.New()
	var compiles atomic.Int64
	release := make(chan struct{})
	compile := func() (any, error) { compiles.Add(1); <-release; return "prog", nil }
	const n = 16
	var wg sync.WaitGroup
	results := make([]any, n)
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i], _, errs[i] = c.Get(gradKey(), compile)
		}(i)
	}
	// Every goroutine is either compiling or waiting before the compile finishes.
	waitForAll(c, &compiles, n)
	close(release)
	wg.Wait()
	for i := range results {
		if errs[i] != nil || results[i] != "prog" {
			t.Fatalf("goroutine %d: %v %v", i, results[i], errs[i])
		}
	}
	if compiles.Load() != 1 {
		t.Fatalf("compiled %d times, want 1", compiles.Load())
	}
	wantStats(t, c, compilecache.Stats{Hits: n - 1, Misses: 1, Entries: 1})
}

func TestConcurrentWaitersShareCompileError(t *testing.T) {
	c := compilecache.New()
	release := make(chan struct{})
	var compiles atomic.Int64
	compile := func() (any, error) { compiles.Add(1); <-release; return nil, errors.New("bad") }
	const n = 8
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := c.Get(gradKey(), compile); err != nil && strings.Contains(err.Error(), "bad") {
				failed.Add(1)
			}
		}()
	}
	// Release the compile only once every caller is compiling or waiting on it: a caller that came
	// after the failure would compile again, rightly, and hide a cache that shares nothing.
	waitForAll(c, &compiles, n)
	close(release)
	wg.Wait()
	if failed.Load() != n {
		t.Fatalf("%d of %d callers got the error", failed.Load(), n)
	}
	if compiles.Load() != 1 {
		t.Fatalf("compiled %d times for %d concurrent callers, want 1: the waiters must share the one compile and its error", compiles.Load(), n)
	}
	wantStats(t, c, compilecache.Stats{Hits: 0, Misses: 1, Entries: 0})
}

func TestConcurrentDistinctKeys(t *testing.T) {
	c := compilecache.New()
	var wg sync.WaitGroup
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			k := gradKey()
			k.Accum = i%8 + 1
			if _, _, err := c.Get(k, func() (any, error) { return k.Accum, nil }); err != nil {
				t.Error(err)
			}
			c.Stats()
			c.Explanations()
		}(i)
	}
	wg.Wait()
	wantStats(t, c, compilecache.Stats{Hits: 24, Misses: 8, Entries: 8})
}

func TestDefaultIsOneCache(t *testing.T) {
	if compilecache.Default() == nil || compilecache.Default() != compilecache.Default() {
		t.Fatal("Default() is not one process-level cache")
	}
}

func TestBuildIdentity(t *testing.T) {
	id := compilecache.BuildIdentity()
	if id != compilecache.BuildIdentity() {
		t.Fatal("BuildIdentity changed between calls")
	}
	path, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	want := "exe=sha256:" + hex.EncodeToString(h.Sum(nil))[:12]
	if !strings.Contains(id, want) {
		t.Fatalf("BuildIdentity() = %q, want it to contain %q", id, want)
	}
	if !regexp.MustCompile(`^(\S+@\S* )?(vcs\.revision=\S+ )?(vcs\.modified=(true|false) )?exe=sha256:[0-9a-f]{12}$`).MatchString(id) {
		t.Fatalf("BuildIdentity() = %q does not have the documented form", id)
	}
}

// waitForAll returns once each of the n callers is either inside compile (counted by compiles)
// or waiting on another caller's compile. A cache that does not share compiles gets there too,
// with n compiles, so the tests' count of compiles is what tells the two apart.
func waitForAll(c *compilecache.Cache, compiles *atomic.Int64, n int) {
	for compiles.Load()+int64(compilecache.Joined(c)) < int64(n) {
		runtime.Gosched()
	}
}

// TestCompileTimesByKind: a miss adds its compile's wall time to its kind; a hit adds nothing;
// Reset forgets them.
func TestCompileTimesByKind(t *testing.T) {
	c := compilecache.New()
	slow := func() (any, error) { time.Sleep(20 * time.Millisecond); return 1, nil }
	k := compilecache.Key{Kind: compilecache.KindOptimizer, Experiment: "E", DeviceCount: 1}
	if _, _, err := c.Get(k, slow); err != nil {
		t.Fatal(err)
	}
	first := c.CompileTimes()[compilecache.KindOptimizer]
	if first < 20*time.Millisecond {
		t.Fatalf("optimizer compile time %v, want >= 20ms", first)
	}
	if _, _, err := c.Get(k, slow); err != nil {
		t.Fatal(err)
	}
	if got := c.CompileTimes(); got[compilecache.KindOptimizer] != first || len(got) != 1 {
		t.Fatalf("a hit changed the compile times: %v (was %v)", got, first)
	}
	c.Reset()
	if got := c.CompileTimes(); len(got) != 0 {
		t.Fatalf("Reset kept compile times %v", got)
	}
}
