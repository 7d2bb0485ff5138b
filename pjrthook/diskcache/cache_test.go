package diskcache

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nitro-go/nitro/tensorfile"
)

// fakeCall is a plugin that "compiles" a program into its reversed bytes and loads only what it
// serialized itself (a "exe:" prefix), so a test sees which path a call took.
type fakeCall struct {
	format, code string
	opts         string
	plugin       string
	target       Target
	refuse       bool          // Load refuses every executable
	loadTakes    time.Duration // Load sleeps this long first, as a plugin's deserialization does

	compiled, loaded bool
	result           string
}

func (f *fakeCall) Program() (string, []byte) { return f.format, []byte(f.code) }
func (f *fakeCall) Options() []byte           { return []byte(f.opts) }
func (f *fakeCall) Plugin() string            { return f.plugin }
func (f *fakeCall) Target() (Target, error)   { return f.target, nil }
func (f *fakeCall) Compile() error {
	if strings.Contains(f.code, "bad") {
		return errors.New("plugin: bad program")
	}
	f.compiled, f.result = true, "exe:"+f.code
	return nil
}
func (f *fakeCall) Serialize() ([]byte, error) { return []byte(f.result), nil }
func (f *fakeCall) Load(exe []byte) error {
	time.Sleep(f.loadTakes)
	if f.refuse || !bytes.HasPrefix(exe, []byte("exe:")) {
		return errors.New("plugin: not an executable of mine")
	}
	f.loaded, f.result = true, string(exe)
	return nil
}

var _ Call = (*fakeCall)(nil)

func pluginFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "plugin.so")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type notices struct {
	mu   sync.Mutex
	msgs []string
}

func (n *notices) add(s string) { n.mu.Lock(); n.msgs = append(n.msgs, s); n.mu.Unlock() }
func (n *notices) all() string  { n.mu.Lock(); defer n.mu.Unlock(); return strings.Join(n.msgs, "\n") }

func open(t *testing.T, dir string, o Options) (*Cache, *notices) {
	t.Helper()
	n := &notices{}
	o.Dir, o.Notice = dir, n.add
	c, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	return c, n
}

func newCall(plugin, code string) *fakeCall {
	return &fakeCall{format: "mlir", code: "module @" + code + " {}", opts: "o1", plugin: plugin,
		target: Target{Platform: "cpu", PlatformVersion: "v1", APIVersion: "0.81", Devices: 1, DeviceKind: "cpu"}}
}

func TestMissWritesThenHitLoads(t *testing.T) {
	dir, plugin := t.TempDir(), pluginFile(t, "plugin A")
	c, _ := open(t, dir, Options{})
	first := newCall(plugin, "g")
	if hit, err := c.Compile(first); err != nil || hit || !first.compiled {
		t.Fatalf("cold: hit=%v err=%v compiled=%v", hit, err, first.compiled)
	}
	entries, _, _ := List(dir)
	if len(entries) != 1 || entries[0].Program != "g" {
		t.Fatalf("after one compile the folder holds %+v, want one entry for g", entries)
	}
	// A second cache on the folder is a second process.
	c2, _ := open(t, dir, Options{})
	second := newCall(plugin, "g")
	if hit, err := c2.Compile(second); err != nil || !hit || second.compiled || second.result != first.result {
		t.Fatalf("warm: hit=%v err=%v compiled=%v result %q want %q", hit, err, second.compiled, second.result, first.result)
	}
}

func TestEveryKeyPartSeparatesEntries(t *testing.T) {
	dir, plugin := t.TempDir(), pluginFile(t, "plugin A")
	c, _ := open(t, dir, Options{})
	base := newCall(plugin, "g")
	if _, err := c.Compile(base); err != nil {
		t.Fatal(err)
	}
	other := pluginFile(t, "plugin A\x00") // a copy differing by one appended byte
	variants := map[string]func(f *fakeCall){
		"program":  func(f *fakeCall) { f.code += " " },
		"format":   func(f *fakeCall) { f.format = "hlo" },
		"options":  func(f *fakeCall) { f.opts = "o2" },
		"plugin":   func(f *fakeCall) { f.plugin = other },
		"platform": func(f *fakeCall) { f.target.PlatformVersion = "v2" },
		"devices":  func(f *fakeCall) { f.target.Devices = 2 },
		"kind":     func(f *fakeCall) { f.target.DeviceKind = "gpu" },
		"api":      func(f *fakeCall) { f.target.APIVersion = "0.82" },
	}
	variants["XLA_FLAGS"] = func(*fakeCall) { t.Setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=true") }
	for name, change := range variants {
		t.Setenv("XLA_FLAGS", "")
		f := newCall(plugin, "g")
		change(f)
		fresh, _ := open(t, dir, Options{}) // per-process memos start empty
		if hit, err := fresh.Compile(f); err != nil || hit {
			t.Errorf("%s changed, yet hit=%v err=%v: an entry served a different compile", name, hit, err)
		}
	}
}

func TestKeyIsStableAndCoversCPU(t *testing.T) {
	p := Parts{Program: "a", Options: "b", Plugin: "c", Platform: "d", CPU: "e", Build: buildPart}
	if p.Key() != p.Key() || len(p.Key()) != 64 {
		t.Fatalf("key %q is not a stable SHA-256", p.Key())
	}
	q := p
	q.CPU = "f"
	if q.Key() == p.Key() {
		t.Fatal("the CPU features are not in the key")
	}
	if got := q.diff(p); len(got) != 1 || got[0] != "CPU features differ" {
		t.Fatalf("diff = %v", got)
	}
	// Quoting keeps part boundaries: moving a character between parts changes the key.
	r := Parts{Program: "ab", Options: "", Plugin: "c", Platform: "d", CPU: "e", Build: buildPart}
	s := Parts{Program: "a", Options: "b", Plugin: "c", Platform: "d", CPU: "e", Build: buildPart}
	if r.Key() == s.Key() {
		t.Fatal("two part lists share a key")
	}
	if !strings.Contains(cpuFeatures(), "/") {
		t.Fatalf("cpuFeatures() = %q, want at least GOOS/GOARCH", cpuFeatures())
	}
}

// corrupt writes one entry, damages it, and checks the next compile drops it, says so once, and
// compiles.
func TestCorruptEntriesAreMissesThatDeleteAndSaySo(t *testing.T) {
	cases := map[string]func(t *testing.T, path string, data []byte){
		"truncated": func(t *testing.T, path string, data []byte) { write(t, path, data[:len(data)/2]) },
		"bit flipped": func(t *testing.T, path string, data []byte) {
			d := append([]byte(nil), data...)
			d[len(d)-sumSize-3] ^= 0x10
			write(t, path, d)
		},
		"empty":  func(t *testing.T, path string, data []byte) { write(t, path, nil) },
		"padded": func(t *testing.T, path string, data []byte) { write(t, path, append(append([]byte(nil), data...), 0)) },
		"foreign": func(t *testing.T, path string, data []byte) {
			// A whole, checksummed entry of another key, under this key's name.
			m, exe, err := decodeEntry(data, "")
			if err != nil {
				t.Fatal(err)
			}
			m.Key = strings.Repeat("0", 64)
			d, _ := encodeEntry(m, exe)
			write(t, path, d)
		},
		"plugin refuses": func(t *testing.T, path string, data []byte) {
			m, _, _ := decodeEntry(data, "")
			d, _ := encodeEntry(m, []byte("garbage the plugin refuses"))
			write(t, path, d)
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			dir, plugin := t.TempDir(), pluginFile(t, "plugin A")
			c, _ := open(t, dir, Options{})
			if _, err := c.Compile(newCall(plugin, "g")); err != nil {
				t.Fatal(err)
			}
			entries, _, _ := List(dir)
			path := filepath.Join(dir, entries[0].File)
			data, _ := os.ReadFile(path)
			damage(t, path, data)

			c2, said := open(t, dir, Options{})
			f := newCall(plugin, "g")
			hit, err := c2.Compile(f)
			if err != nil || hit || !f.compiled {
				t.Fatalf("hit=%v err=%v compiled=%v: a damaged entry must be a miss that compiles", hit, err, f.compiled)
			}
			if msg := said.all(); strings.Count(msg, "dropped") != 1 {
				t.Fatalf("notices %q: want the drop said exactly once", msg)
			}
			// The rewritten entry is whole again.
			if ok, bad, _ := Verify(dir, false); ok != 1 || len(bad) != 0 {
				t.Fatalf("after the recompile verify says ok=%d bad=%v", ok, bad)
			}
			f3 := newCall(plugin, "g")
			if hit, _ := c2.Compile(f3); !hit {
				t.Fatal("the rewritten entry is not hit")
			}
		})
	}
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestOnlyRankZeroWrites(t *testing.T) {
	dir, plugin := t.TempDir(), pluginFile(t, "plugin A")
	c, _ := open(t, dir, Options{Rank: 1})
	if _, err := c.Compile(newCall(plugin, "g")); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := Size(dir); n != 0 {
		t.Fatalf("rank 1 wrote %d bytes", n)
	}
	// A client that says it is process 2 keeps rank-0 options from writing too.
	c2, _ := open(t, dir, Options{})
	g := newCall(plugin, "g")
	g.target.ProcessIndex = 2
	if _, err := c2.Compile(g); err != nil {
		t.Fatal(err)
	}
	if _, n, _ := Size(dir); n != 0 {
		t.Fatalf("process index 2 wrote %d entries", n)
	}
	c3, _ := open(t, dir, Options{})
	if _, err := c3.Compile(newCall(plugin, "g")); err != nil {
		t.Fatal(err)
	}
	if _, n, _ := Size(dir); n != 1 {
		t.Fatalf("rank 0 wrote %d entries, want 1", n)
	}
}

func TestLeastRecentlyUsedIsEvicted(t *testing.T) {
	dir, plugin := t.TempDir(), pluginFile(t, "plugin A")
	c, _ := open(t, dir, Options{})
	for _, g := range []string{"a", "b", "c"} {
		if _, err := c.Compile(newCall(plugin, g)); err != nil {
			t.Fatal(err)
		}
	}
	entries, total, _ := List(dir)
	if len(entries) != 3 {
		t.Fatalf("%d entries", len(entries))
	}
	// Age them a, b, c; then hit a, so b is the least recently used.
	old := time.Now().Add(-time.Hour)
	for i, name := range []string{"a", "b", "c"} {
		for _, e := range entries {
			if e.Program == name {
				os.Chtimes(filepath.Join(dir, e.File), old.Add(time.Duration(i)*time.Minute), old.Add(time.Duration(i)*time.Minute))
			}
		}
	}
	if hit, _ := c.Compile(newCall(plugin, "a")); !hit {
		t.Fatal("a was not hit")
	}
	per := total / 3
	small, _ := open(t, dir, Options{MaxBytes: 3*per + per/2})
	if _, err := small.Compile(newCall(plugin, "d")); err != nil {
		t.Fatal(err)
	}
	entries, total, _ = List(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Program)
	}
	if len(entries) != 3 || strings.Contains(strings.Join(names, ","), "b") || total > 3*per+per/2 {
		t.Fatalf("after evicting to %d bytes the folder holds %v (%d bytes); want a, c, d", 3*per+per/2, names, total)
	}
}

// fullDisk is a durable writer whose every write fails as a full disk does.
type fullDisk struct{ tensorfile.OS }

func (fullDisk) CreateTemp(dir, prefix string) (tensorfile.File, error) {
	return nil, &fs.PathError{Op: "write", Path: dir, Err: syscall.ENOSPC}
}

func TestFullOrReadOnlyFolderWarnsOnceAndRunsUncached(t *testing.T) {
	plugin := pluginFile(t, "plugin A")
	check := func(t *testing.T, c *Cache, said *notices) {
		for _, g := range []string{"a", "b"} {
			f := newCall(plugin, g)
			if hit, err := c.Compile(f); err != nil || hit || !f.compiled {
				t.Fatalf("hit=%v err=%v compiled=%v: the compile must go through", hit, err, f.compiled)
			}
		}
		if msg := said.all(); strings.Count(msg, "cannot write") != 1 || !strings.Contains(msg, "uncached") {
			t.Fatalf("notices %q: want one warning that the run goes uncached", msg)
		}
	}
	t.Run("full", func(t *testing.T) {
		c, said := open(t, t.TempDir(), Options{})
		c.fsys = fullDisk{tensorfile.OS{Perm: 0o644}}
		check(t, c, said)
	})
	t.Run("read-only", func(t *testing.T) {
		if os.Geteuid() == 0 {
			// root writes through a folder's mode bits: stand in a folder that is not a folder.
			dir := t.TempDir()
			c, said := open(t, dir, Options{})
			c.dir = filepath.Join(dir, "file")
			write(t, c.dir, nil)
			check(t, c, said)
			return
		}
		dir := t.TempDir()
		c, said := open(t, dir, Options{})
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		check(t, c, said)
	})
}

func TestCompileErrorIsThePlugins(t *testing.T) {
	dir, plugin := t.TempDir(), pluginFile(t, "plugin A")
	c, _ := open(t, dir, Options{})
	_, err := c.Compile(newCall(plugin, "bad"))
	if err == nil || err.Error() != "plugin: bad program" {
		t.Fatalf("err = %v, want the plugin's own", err)
	}
	if _, n, _ := Size(dir); n != 0 {
		t.Fatal("a failed compile wrote an entry")
	}
}

// withMain is a program named g with an entry function of the given argument type and body.
func withMain(g, arg, body string) string {
	return "module @" + g + " {\n  func.func public @main(%a: " + arg + ") -> " + arg + " {\n    " + body + "\n  }\n}"
}

func TestMissExplainsWhatMoved(t *testing.T) {
	dir := t.TempDir()
	a, b := pluginFile(t, "plugin A"), pluginFile(t, "plugin B")
	c, _ := open(t, dir, Options{})
	first := newCall(a, "")
	first.code = withMain("g", "tensor<2xf32>", "return %a")
	if _, err := c.Compile(first); err != nil {
		t.Fatal(err)
	}
	entries, _, _ := List(dir)
	key := entries[0].Key[:12]
	for _, tc := range []struct {
		change func(f *fakeCall)
		want   string
	}{
		{func(f *fakeCall) { f.plugin = b }, "miss for g: plugin changed (against the entry named g: " + key + ")"},
		{func(f *fakeCall) { f.opts = "o2" }, "miss for g: compile options changed (against the entry named g: " + key + ")"},
		{func(f *fakeCall) { f.code = withMain("g", "tensor<2xf32>", "return %b") },
			"miss for g: program changed (graph g, same inputs and outputs: a constant, an op or a hook's code differs) (against the entry named g: " + key + ")"},
		{func(f *fakeCall) { f.code = withMain("g", "tensor<3xf32>", "return %a") },
			"miss for g: a new program (graph g: no entry of that name has its inputs and outputs; another experiment or another shape; the entry named g: " + key + ")"},
		{func(f *fakeCall) { f.code, f.opts = withMain("g", "tensor<3xf32>", "return %a"), "o2" },
			"miss for g: compile options changed, program changed (graph g, other inputs or outputs) (against the entry named g: " + key + ")"},
	} {
		c2, said := open(t, dir, Options{Rank: 1}) // rank 1: leave the folder as it is
		f := newCall(a, "")
		f.code = first.code
		tc.change(f)
		if _, err := c2.Compile(f); err != nil {
			t.Fatal(err)
		}
		if got := said.all(); got != "compile cache: "+tc.want {
			t.Errorf("notices %q,\nwant %q", got, "compile cache: "+tc.want)
		}
	}
}

// Another experiment's entries of the same program name must not make a miss read as an edit,
// and the entry compared against is the nearest whatever order the folder lists in.
func TestMissExplanationPicksTheNearestEntry(t *testing.T) {
	dir := t.TempDir()
	a, b := pluginFile(t, "plugin A"), pluginFile(t, "plugin B")
	c, _ := open(t, dir, Options{})
	mine := withMain("nitro_gradient", "tensor<784x512xf32>", "return %a")
	others := []string{withMain("nitro_gradient", "tensor<3x3xf32>", "return %a"), withMain("nitro_gradient", "tensor<5xf32>", "return %a")}
	for _, code := range others {
		f := newCall(a, "")
		f.code = code
		if _, err := c.Compile(f); err != nil {
			t.Fatal(err)
		}
	}
	// Two other experiments' gradients only: this one is new, not changed.
	c2, said := open(t, dir, Options{Rank: 1})
	f := newCall(a, "")
	f.code = mine
	if _, err := c2.Compile(f); err != nil {
		t.Fatal(err)
	}
	// Both moved as much, neither shares the signature: the smaller key is named.
	entries, _, _ := List(dir)
	smaller := min(entries[0].Key, entries[1].Key)
	want := "compile cache: miss for nitro_gradient: a new program (graph nitro_gradient: no entry of that name has its inputs and outputs; another experiment or another shape; nearest of 2 entries named nitro_gradient: " + smaller[:12] + ")"
	if got := said.all(); got != want {
		t.Fatalf("notices %q,\nwant %q", got, want)
	}
	// This experiment's own entry, under another plugin: that is the nearest (one part moved).
	f = newCall(b, "")
	f.code = mine
	if _, err := c.Compile(f); err != nil {
		t.Fatal(err)
	}
	entries, _, _ = List(dir)
	var own string
	for _, e := range entries {
		if m, _, err := ReadEntry(filepath.Join(dir, e.File)); err == nil && m.Signature == signature("mlir", []byte(mine)) {
			own = e.Key
		}
	}
	if own == "" {
		t.Fatal("no entry records this program's signature")
	}
	c3, said := open(t, dir, Options{Rank: 1})
	f = newCall(a, "")
	f.code = mine
	if _, err := c3.Compile(f); err != nil {
		t.Fatal(err)
	}
	want = "compile cache: miss for nitro_gradient: plugin changed (against nearest of 3 entries named nitro_gradient: " + own[:12] + ")"
	if got := said.all(); got != want {
		t.Fatalf("notices %q,\nwant %q", got, want)
	}
}

func TestVerifyAndClear(t *testing.T) {
	dir, plugin := t.TempDir(), pluginFile(t, "plugin A")
	c, _ := open(t, dir, Options{})
	for _, g := range []string{"a", "b"} {
		c.Compile(newCall(plugin, g))
	}
	entries, _, _ := List(dir)
	write(t, filepath.Join(dir, entries[0].File), []byte("NITROXC1junk"))
	write(t, filepath.Join(dir, "notes.txt"), []byte("mine"))
	ok, bad, err := Verify(dir, true)
	if err != nil || ok != 1 || len(bad) != 1 || bad[0].File != entries[0].File {
		t.Fatalf("verify: ok=%d bad=%v err=%v", ok, bad, err)
	}
	if _, err := os.Stat(filepath.Join(dir, entries[0].File)); !os.IsNotExist(err) {
		t.Fatal("verify with remove left the bad entry")
	}
	n, _, err := Clear(dir)
	if err != nil || n != 1 {
		t.Fatalf("clear removed %d (%v), want 1", n, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatalf("clear removed a file that is not the cache's: %v", err)
	}
	if b, n, _ := Size(dir); b != 0 || n != 0 {
		t.Fatalf("after clear: %d bytes in %d entries", b, n)
	}
}

func TestConcurrentWritersLeaveOneWholeEntry(t *testing.T) {
	dir, plugin := t.TempDir(), pluginFile(t, "plugin A")
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := Open(Options{Dir: dir, Notice: func(string) {}})
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := c.Compile(newCall(plugin, "g")); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	ok, bad, _ := Verify(dir, false)
	des, _ := os.ReadDir(dir)
	var names []string
	for _, d := range des {
		names = append(names, d.Name())
	}
	if ok != 1 || len(bad) != 0 {
		t.Fatalf("eight writers of one key left ok=%d bad=%v; folder %v", ok, bad, names)
	}
	for _, n := range names {
		if tensorfile.IsTemp(n) {
			t.Fatalf("a temporary file was left: %v", names)
		}
	}
}

// A hit's costs are its own: the key, the read, and each load by program, refused loads too (the
// plugin spent the time); a miss loads nothing and lists its compile instead.
func TestCostsOfAHit(t *testing.T) {
	dir, plugin := t.TempDir(), pluginFile(t, "plugin A")
	c, _ := open(t, dir, Options{})
	for _, g := range []string{"init", "grad"} {
		if _, err := c.Compile(newCall(plugin, g)); err != nil {
			t.Fatal(err)
		}
	}
	if k := c.Costs(); k.Key <= 0 || k.Load != 0 || len(k.Loads) != 0 || len(k.Compiles) != 2 ||
		k.Compiles[0].Program != "init" || k.Compiles[1].Program != "grad" || k.Compiles[0].Bytes != len("module @init {}") {
		t.Fatalf("cold costs %+v: want the key's time, no load, and the two compiles in order", k)
	}
	c2, _ := open(t, dir, Options{})
	slow, fast := newCall(plugin, "init"), newCall(plugin, "grad")
	slow.loadTakes = 30 * time.Millisecond
	for _, call := range []*fakeCall{slow, fast} {
		if hit, err := c2.Compile(call); err != nil || !hit {
			t.Fatalf("hit=%v err=%v", hit, err)
		}
	}
	k := c2.Costs()
	if k.Key <= 0 || k.Read <= 0 || k.Load < slow.loadTakes || len(k.Compiles) != 0 {
		t.Fatalf("second cache's costs %+v: want the key, the reads and at least the slow load's %v", k, slow.loadTakes)
	}
	if len(k.Loads) != 2 || k.Loads[0].Program != "init" || k.Loads[1].Program != "grad" ||
		k.Loads[0].Took < slow.loadTakes || k.Loads[0].Bytes != len("exe:module @init {}") || k.Loads[0].Took+k.Loads[1].Took != k.Load {
		t.Fatalf("loads %+v (total %v): want init (slow, its executable's size) then grad, summing to the total", k.Loads, k.Load)
	}
	k.Loads[0].Program = "changed"
	if c2.Costs().Loads[0].Program != "init" {
		t.Fatal("Costs handed out the cache's own list: a caller's edit changed it")
	}
	refused := newCall(plugin, "init")
	refused.refuse, refused.loadTakes = true, 10*time.Millisecond
	c3, _ := open(t, dir, Options{})
	if hit, err := c3.Compile(refused); err != nil || hit {
		t.Fatalf("refused: hit=%v err=%v", hit, err)
	}
	if k := c3.Costs(); len(k.Loads) != 1 || k.Load < refused.loadTakes || len(k.Compiles) != 1 {
		t.Fatalf("a refused load's costs %+v: want its time counted, then the compile", k)
	}
}

// A cold folder's costs are counted, and a later cache hashes no plugin, over another folder
// too: the sum is remembered under the file's path, size, modification and change times and inode, in the
// folder and beside the plugin. A memo that does not match the file is not believed.
func TestCostsAndTheRememberedPluginSum(t *testing.T) {
	dir, plugin := t.TempDir(), pluginFile(t, "plugin A")
	c, _ := open(t, dir, Options{})
	if _, err := c.Compile(newCall(plugin, "g")); err != nil {
		t.Fatal(err)
	}
	if k := c.Costs(); k.Hash <= 0 || k.Write <= 0 {
		t.Fatalf("cold costs %+v: want the plugin hashed and an entry written", k)
	}
	c2, _ := open(t, dir, Options{})
	if hit, err := c2.Compile(newCall(plugin, "g")); err != nil || !hit {
		t.Fatalf("hit=%v err=%v", hit, err)
	}
	if k := c2.Costs(); k.Hash != 0 || k.Write != 0 || k.Serialize != 0 {
		t.Fatalf("second cache's costs %+v: want no hash (remembered) and nothing written", k)
	}
	other := t.TempDir()
	c3, _ := open(t, other, Options{})
	if _, err := c3.Compile(newCall(plugin, "g")); err != nil {
		t.Fatal(err)
	}
	if k := c3.Costs(); k.Hash != 0 {
		t.Fatalf("a new folder's costs %+v: want the sum remembered beside the plugin read, not hashed", k)
	}
	// The sum read back keys alike: the new folder's entry has the first folder's name.
	a, _, _ := List(dir)
	b, _, _ := List(other)
	if len(a) != 1 || len(b) != 1 || a[0].Key != b[0].Key {
		t.Fatalf("entries %v and %v: want one key", a, b)
	}

	// A memo beside the plugin with another file's stamp, or a sum that is not one, is hashed over.
	memo := besideMemo(plugin)
	for _, bogus := range []string{"0123 " + strings.Repeat("ab", 32) + "\n", "junk"} {
		write(t, memo, []byte(bogus))
		c4, _ := open(t, t.TempDir(), Options{})
		if _, err := c4.Compile(newCall(plugin, "g")); err != nil {
			t.Fatal(err)
		}
		if c4.Costs().Hash <= 0 {
			t.Fatalf("memo %q was believed", bogus)
		}
	}

	if err := os.WriteFile(plugin, []byte("plugin A, replaced"), 0o644); err != nil {
		t.Fatal(err)
	}
	c5, _ := open(t, dir, Options{})
	if hit, _ := c5.Compile(newCall(plugin, "g")); hit {
		t.Fatal("a replaced plugin's compile was answered by the old plugin's entry")
	}
	if c5.Costs().Hash <= 0 {
		t.Fatal("a replaced plugin file was not hashed again")
	}

	// Rewritten in place with the same size, its mtime set back and its inode kept, the file is
	// still hashed again (its change time moved), and the old plugin's entry is not loaded.
	st, err := os.Stat(plugin)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(plugin, []byte("plugin B, replaced"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(plugin, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	c6, _ := open(t, t.TempDir(), Options{})
	if _, err := c6.Compile(newCall(plugin, "g")); err != nil {
		t.Fatal(err)
	}
	if c6.Costs().Hash <= 0 {
		t.Fatal("a plugin rewritten in place with its size, mtime and inode kept was answered by the remembered sum")
	}
}

// A model's initializers are one program per shape under one name: on a cold start each is a
// miss beside the others this process just wrote, which are no stale version of it, so nothing
// is said; another process's miss is still compared with them.
func TestMissIsNotExplainedByThisProcesssOwnEntries(t *testing.T) {
	dir := t.TempDir()
	a := pluginFile(t, "plugin A")
	c, said := open(t, dir, Options{})
	for _, shape := range []string{"tensor<2xf32>", "tensor<3xf32>", "tensor<4xf32>"} {
		f := newCall(a, "")
		f.code = withMain("VariableInitialization", shape, "return %a")
		if _, err := c.Compile(f); err != nil {
			t.Fatal(err)
		}
	}
	if got := said.all(); got != "" {
		t.Errorf("a cold start explained a miss by its own entries: %q", got)
	}
	c2, said2 := open(t, dir, Options{Rank: 1})
	f := newCall(a, "")
	f.code = withMain("VariableInitialization", "tensor<5xf32>", "return %a")
	if _, err := c2.Compile(f); err != nil {
		t.Fatal(err)
	}
	if got := said2.all(); !strings.Contains(got, "miss for VariableInitialization: a new program") || !strings.Contains(got, "nearest of 3 entries") {
		t.Errorf("another process's miss: %q, want it compared with the 3 entries", got)
	}
}
