package diskcache

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nitro-go/nitro/tensorfile"
)

// Call is one compile the interposer intercepted, as the cache needs it.
type Call interface {
	Program() (format string, code []byte)
	Options() []byte         // the serialized compile options
	Plugin() string          // the real plugin's file
	Target() (Target, error) // where the program runs
	Compile() error          // the plugin's own compile; its result stays in the call
	Serialize() ([]byte, error)
	Load(exe []byte) error // deserialize and load exe as the call's result
}

// Holder is a Call whose compiled executable outlives Compile and stays valid until its owner
// destroys it. The cache then returns at once and serializes and writes the entry in the
// background; Hold hands the Call's owner the pending write, which the owner must Finish before
// the executable is destroyed (a serialization reads the executable). A Call that is not a
// Holder is written before Compile returns.
type Holder interface {
	Hold(w *PendingWrite)
}

// PendingWrite is one entry's serialization and write, queued in the background.
type PendingWrite struct {
	once sync.Once
	do   func()

	mu    sync.Mutex
	done  bool
	after []func() // what Defer handed over, run in order once the write is done
}

// Finish runs the write now when it has not started, waits for it when it is running, and
// returns at once when it is done; then it runs what Defer handed over. Safe to call from any
// goroutine, any number of times.
func (w *PendingWrite) Finish() {
	w.once.Do(func() {
		w.do()
		w.do = nil
		w.mu.Lock()
		w.done = true
		after := w.after
		w.after = nil
		w.mu.Unlock()
		for _, f := range after {
			f()
		}
	})
}

// Defer hands f (the executable's destroy) to the write, to run once the write is done, and
// reports true; false when the write is already done, and then the caller runs f itself. An
// executable released before its entry is written lives until then instead of being serialized
// on the spot, so releasing it costs its caller nothing.
func (w *PendingWrite) Defer(f func()) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return false
	}
	w.after = append(w.after, f)
	return true
}

// backgroundWriters bounds the serializations running at once: each takes a core that the
// start's own compiles want.
const backgroundWriters = 1

// quietFor is how long the process must go without a compile (or load) before a background write
// starts. A start compiles its programs back to back and then runs its first step; a serialization
// beside them slowed that start by more than the serialization took (a 600-array model's 0.35 s
// one delayed its first step 0.2-0.3 s, both sides allocating from one malloc arena). Flush, and
// the release of an executable with a write pending, do not wait for it.
const quietFor = time.Second

// quietPoll is how often a write waiting for quiet looks again.
const quietPoll = 50 * time.Millisecond

// DefaultMaxBytes is the size cap when Options.MaxBytes is 0.
const DefaultMaxBytes = 4 << 30

// Options configure a Cache.
type Options struct {
	Dir      string       // the folder; created if absent
	MaxBytes int64        // entries past this total are evicted, least recently used first; 0: DefaultMaxBytes
	Rank     int          // this process's rank in a multi-process run; only rank 0 writes
	Notice   func(string) // warnings and miss explanations; nil: standard error
}

// Cache is a folder of compiled executables. Safe for concurrent use, and for several processes
// sharing the folder: each entry is written whole under its key's name or not at all.
type Cache struct {
	dir    string
	max    int64
	rank   int
	notice func(string)
	fsys   tensorfile.FS // the durable writer; tests substitute a full disk

	mu      sync.Mutex
	said    map[string]bool
	mine    map[string]bool // keys this process compiled: never a stale version of another miss
	noWrite bool
	plugins map[string]*pluginHash // plugin file -> its SHA-256, computed once
	cpu     string
	costs   Costs

	writers chan struct{} // a slot per background serialization running
	// Background writes not yet done, and their end's signal. Not a WaitGroup: a compile may
	// queue a write while Flush waits, which a WaitGroup forbids.
	pending int
	settled *sync.Cond // on mu

	compiling   int       // Compile calls in progress
	lastCompile time.Time // when the last one returned
	flushing    int       // Flush calls waiting: queued writes stop waiting for quiet
}

// Costs are the seconds the cache has spent apart from the plugin's compiles: what a cold folder
// adds to a start (Hash, Serialize, Write, Explain), and what a hit costs (Key, Read, Load); and
// each program's compile or load. Hash runs in the background from Prepare, so it costs a start
// CPU time rather than waiting, unless the first compile finds it unfinished.
type Costs struct {
	Hash      time.Duration // reading and hashing the plugin file (none when its sum is remembered)
	Serialize time.Duration // the plugin serializing executables to write
	Write     time.Duration // encoding, checksumming and durably writing entries, and the eviction scan
	Explain   time.Duration // reading other entries' metadata to explain misses
	Key       time.Duration // the client's target and the key's digests (and any wait for the plugin's sum)
	Read      time.Duration // reading entries and checking their checksums (hits and misses)
	Load      time.Duration // the plugin deserializing and loading executables from entries
	// Loads are the executables loaded from entries, refused ones too, and Compiles the programs
	// the plugin compiled, each in order: a start's time is mostly in one or two of them, and a
	// program's load against its compile is what the cache saves on it.
	Loads, Compiles []ProgramTime
}

// ProgramTime is one program's load or compile.
type ProgramTime struct {
	Program string // the program's name ("" when its text names none)
	Bytes   int    // a load's executable, or a compiled program's code
	Took    time.Duration
}

// Costs returns what the cache has spent so far.
func (c *Cache) Costs() Costs {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := c.costs
	k.Loads, k.Compiles = slices.Clone(c.costs.Loads), slices.Clone(c.costs.Compiles)
	return k
}

// spent adds the time since start to the cost *d points at.
func (c *Cache) spent(d *time.Duration, start time.Time) {
	c.mu.Lock()
	*d += time.Since(start)
	c.mu.Unlock()
}

// timed adds one load (to the Load total as well) or compile that began at start to the costs.
func (c *Cache) timed(load bool, program string, size int, start time.Time) {
	took := time.Since(start)
	t := ProgramTime{Program: program, Bytes: size, Took: took}
	c.mu.Lock()
	if load {
		c.costs.Load += took
		c.costs.Loads = append(c.costs.Loads, t)
	} else {
		c.costs.Compiles = append(c.costs.Compiles, t)
	}
	c.mu.Unlock()
}

// Open makes (if needed) and opens the cache folder. An error means the folder cannot be used at
// all; the caller warns and runs uncached.
func Open(o Options) (*Cache, error) {
	if o.Dir == "" {
		return nil, errors.New("compile cache: no folder given")
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("compile cache folder %q: %w", o.Dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("compile cache folder: %w", err)
	}
	c := &Cache{dir: dir, max: o.MaxBytes, rank: o.Rank, notice: o.Notice, fsys: tensorfile.OS{Perm: 0o644},
		said: map[string]bool{}, mine: map[string]bool{}, plugins: map[string]*pluginHash{}, writers: make(chan struct{}, backgroundWriters)}
	c.settled = sync.NewCond(&c.mu)
	if c.max <= 0 {
		c.max = DefaultMaxBytes
	}
	if c.notice == nil {
		c.notice = func(s string) { fmt.Fprintln(os.Stderr, "nitro: "+s) }
	}
	return c, nil
}

// Dir is the cache's folder (absolute).
func (c *Cache) Dir() string { return c.dir }

// say reports msg once per process per topic.
func (c *Cache) say(topic, msg string) {
	c.mu.Lock()
	seen := c.said[topic]
	c.said[topic] = true
	c.mu.Unlock()
	if !seen {
		c.notice("compile cache: " + msg)
	}
}

// Compile answers call from the cache or compiles it and writes the entry. fromDisk tells which.
// A failure of the cache itself is never the caller's: an unreadable or refused entry is deleted
// and compiled anew, a folder that cannot be written is warned about once and left alone. err is
// only the plugin's own compile error.
func (c *Cache) Compile(call Call) (fromDisk bool, err error) {
	c.mu.Lock()
	c.compiling++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.compiling--
		c.lastCompile = time.Now()
		c.mu.Unlock()
	}()
	// The client is asked every time (a few calls into the plugin): two clients of one plugin
	// in a process may differ in their devices.
	keyStart := time.Now()
	target, err := call.Target()
	if err != nil {
		c.say("key", fmt.Sprintf("cannot key compiles (asking the plugin for its platform: %v): compiling without the cache", err))
		return false, call.Compile()
	}
	parts, err := c.parts(call, target)
	if err != nil {
		c.say("key", fmt.Sprintf("cannot key compiles (%v): compiling without the cache", err))
		return false, call.Compile()
	}
	key := parts.Key()
	c.spent(&c.costs.Key, keyStart)
	path := c.entryPath(key)
	format, code := call.Program()
	name := programName(format, code)
	readStart := time.Now()
	exe, ok := c.read(path, key)
	c.spent(&c.costs.Read, readStart)
	if ok {
		loadStart := time.Now()
		lerr := call.Load(exe)
		c.timed(true, name, len(exe), loadStart)
		if lerr == nil {
			now := time.Now()
			_ = os.Chtimes(path, now, now) // the LRU clock; a read-only folder keeps its order
			return true, nil
		}
		c.drop(path, fmt.Sprintf("the plugin refused its executable (%v)", lerr))
	} else {
		c.explainMiss(name, key, parts, signature(format, code))
	}
	compileStart := time.Now()
	if err := call.Compile(); err != nil {
		return false, err
	}
	c.timed(false, name, len(code), compileStart)
	c.mu.Lock()
	c.mine[key] = true
	c.mu.Unlock()
	// A client of a multi-process run knows its process index even when Options.Rank was left 0.
	if target.ProcessIndex == 0 {
		m := Meta{Key: key, Program: name, Parts: parts, Signature: signature(format, code), Created: time.Now().Unix()}
		if h, ok := call.(Holder); ok {
			c.writeLater(h, call, path, m)
		} else {
			c.write(call, path, m)
		}
	}
	return false, nil
}

// writeLater queues the entry's write in the background and hands it to the call's owner.
func (c *Cache) writeLater(h Holder, call Call, path string, m Meta) {
	if !c.writing() {
		return
	}
	w := &PendingWrite{do: func() {
		// A failure here is the cache's, never the caller's: said once, like a failed write.
		defer func() {
			if r := recover(); r != nil {
				c.say("background", fmt.Sprintf("writing %s failed (%v): it compiles again next time", m.Program, r))
			}
		}()
		c.write(call, path, m)
	}}
	c.mu.Lock()
	c.pending++
	c.mu.Unlock()
	h.Hold(w)
	go func() {
		defer func() {
			c.mu.Lock()
			c.pending--
			c.settled.Broadcast()
			c.mu.Unlock()
		}()
		c.awaitQuiet()
		c.writers <- struct{}{}
		defer func() { <-c.writers }()
		w.Finish()
	}()
}

// awaitQuiet returns once no compile has run for quietFor, or at once while a Flush waits.
func (c *Cache) awaitQuiet() {
	for {
		c.mu.Lock()
		wait := quietFor - time.Since(c.lastCompile)
		if c.compiling > 0 {
			wait = quietFor
		}
		if c.flushing > 0 {
			wait = 0
		}
		c.mu.Unlock()
		if wait <= 0 {
			return
		}
		time.Sleep(min(wait, quietPoll))
	}
}

// Flush returns once every entry this cache queued in the background is written (or has failed
// and been said). Without it a process that exits early leaves those entries missing, never
// torn: each is renamed into place whole.
func (c *Cache) Flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushing++
	defer func() { c.flushing-- }()
	for c.pending > 0 {
		c.settled.Wait()
	}
}

// writing reports whether this process writes entries: rank 0, and a folder that takes writes.
func (c *Cache) writing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.noWrite && c.rank == 0
}

func (c *Cache) entryPath(key string) string { return filepath.Join(c.dir, key+EntryExt) }

// parts computes the key's components for call.
func (c *Cache) parts(call Call, target Target) (Parts, error) {
	format, code := call.Program()
	plugin, err := c.pluginSum(call.Plugin())
	if err != nil {
		return Parts{}, err
	}
	c.mu.Lock()
	if c.cpu == "" {
		c.cpu = digest([]byte(cpuFeatures()))
	}
	cpu := c.cpu
	c.mu.Unlock()
	return Parts{
		Program:  digest([]byte(format), code),
		Options:  digest(call.Options()),
		Plugin:   plugin,
		Platform: platformPart(target),
		CPU:      cpu,
		Flags:    os.Getenv("XLA_FLAGS"),
		Build:    buildPart,
	}, nil
}

// pluginHash is one plugin file's SHA-256, computed once per process and cache.
type pluginHash struct {
	once sync.Once
	sum  string
	err  error
}

// Prepare starts hashing plugin in the background, so that the first compile finds the sum
// ready: a 200 MB plugin takes a noticeable part of a cold start to hash.
func (c *Cache) Prepare(plugin string) { go c.pluginSum(plugin) }

// pluginSum is the plugin file's SHA-256. The sum is also remembered under the file's path,
// size, modification time and inode (a plugin replaced in place changes at least one of them),
// in the folder and beside the plugin file, so a later process reads it instead of hashing
// again, on a new folder too.
func (c *Cache) pluginSum(path string) (string, error) {
	c.mu.Lock()
	h, ok := c.plugins[path]
	if !ok {
		h = &pluginHash{}
		c.plugins[path] = h
	}
	c.mu.Unlock()
	h.once.Do(func() { h.sum, h.err = c.hashPlugin(path) })
	return h.sum, h.err
}

func (c *Cache) hashPlugin(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("plugin file: %w", err)
	}
	// The stamp names this very file: a memo under it is trusted instead of hashing. The
	// change time is in it because a rewrite in place may keep size, mtime (cp -p, touch -r)
	// and inode, but always moves ctime, which no user can set back.
	var ino uint64
	var uid uint32
	var ctime int64
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		ino, uid, ctime = uint64(sys.Ino), sys.Uid, sys.Ctim.Nano()
	}
	stamp := digest([]byte(path), []byte(fmt.Sprint(st.Size(), st.ModTime().UnixNano(), ino, ctime)))
	memo := filepath.Join(c.dir, "plugin-"+stamp[:32]+".sha256")
	if b, err := os.ReadFile(memo); err == nil && isSum(strings.TrimSpace(string(b))) {
		return strings.TrimSpace(string(b)), nil
	}
	beside := besideMemo(path)
	if s, ok := readBesideMemo(beside, stamp, uid); ok {
		return s, nil // the folder's own memo would cost a durable write, and adds nothing
	}
	defer c.spent(&c.costs.Hash, time.Now())
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("plugin file: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hashing the plugin file: %w", err)
	}
	s := hex.EncodeToString(h.Sum(nil))
	_ = tensorfile.WriteFS(c.fsys, memo, func(w io.Writer) error { _, err := io.WriteString(w, s+"\n"); return err })
	// Best effort: a plugin's folder that is not ours to write keeps no memo.
	_ = tensorfile.WriteFile(beside, []byte(stamp+" "+s+"\n"), 0o644)
	return s, nil
}

// besideMemo is the file beside a plugin that remembers its sum for every cache folder.
func besideMemo(plugin string) string {
	return filepath.Join(filepath.Dir(plugin), "."+filepath.Base(plugin)+".nitro-sha256")
}

// readBesideMemo returns the sum a memo beside the plugin holds for stamp. The memo is trusted
// only when the plugin's owner owns it: whoever else could write it could not replace the
// plugin, and a wrong sum would key another plugin's executables as this one's.
func readBesideMemo(memo, stamp string, owner uint32) (string, bool) {
	st, err := os.Stat(memo)
	if err != nil || !st.Mode().IsRegular() || st.Size() > 256 {
		return "", false
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || sys.Uid != owner {
		return "", false
	}
	b, err := os.ReadFile(memo)
	if err != nil {
		return "", false
	}
	got, sum, ok := strings.Cut(strings.TrimSpace(string(b)), " ")
	if !ok || got != stamp || !isSum(sum) {
		return "", false
	}
	return sum, true
}

// isSum reports whether s is a SHA-256 in lower-case hex.
func isSum(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}

// read returns the entry's executable when the file is there and whole. A file that is there but
// cannot be trusted is deleted (and said once); ok false means compile.
func (c *Cache) read(path, key string) (exe []byte, ok bool) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		c.say("read "+path, fmt.Sprintf("cannot read %s (%v): compiling", path, err))
		return nil, false
	}
	_, exe, err = decodeEntry(data, key)
	if err != nil {
		c.drop(path, err.Error())
		return nil, false
	}
	return exe, true
}

// drop deletes an entry that failed, saying why once.
func (c *Cache) drop(path, why string) {
	msg := fmt.Sprintf("dropped %s: %s; compiling it anew", filepath.Base(path), why)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		msg += fmt.Sprintf(" (and it could not be deleted: %v)", err)
	}
	c.say("drop "+path, msg)
}

// write stores call's executable under path: only from rank 0, only while the folder takes writes.
func (c *Cache) write(call Call, path string, m Meta) {
	if !c.writing() {
		return
	}
	start := time.Now()
	exe, err := call.Serialize()
	c.spent(&c.costs.Serialize, start)
	if err != nil {
		c.say("serialize", fmt.Sprintf("the plugin cannot serialize executables (%v): nothing is written", err))
		return
	}
	defer c.spent(&c.costs.Write, time.Now())
	data, err := encodeEntry(m, exe)
	if err != nil {
		return
	}
	if int64(len(data)) > c.max {
		c.say("too big "+m.Program, fmt.Sprintf("an entry of %d bytes for %s exceeds the %d-byte cap: not written", len(data), m.Program, c.max))
		return
	}
	if err := tensorfile.WriteFS(c.fsys, path, func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
		c.mu.Lock()
		c.noWrite = true
		c.mu.Unlock()
		c.say("write", fmt.Sprintf("cannot write to %s (%v): this process runs uncached from here on (free space or fix the folder's permissions, or set NITRO_COMPILE_CACHE to another folder or off)", c.dir, err))
		return
	}
	c.evict()
}

// evict removes the least recently used entries until the folder is within the cap.
func (c *Cache) evict() {
	entries, total, err := scan(c.dir)
	if err != nil || total <= c.max {
		return
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Used.Before(entries[j].Used) })
	for _, e := range entries {
		if total <= c.max {
			break
		}
		if os.Remove(filepath.Join(c.dir, e.File)) == nil {
			total -= e.Size
		}
	}
}

// explainMiss names what moved when entries of the same program name exist under other keys;
// said once per program name. A cold folder says nothing. The entry compared against is the
// nearest: fewest parts moved, then one with the same signature, then the smallest key, so the
// words are the same whatever order the folder lists in. Every experiment's gradient program has
// one name, so "program changed" alone would be said of a folder holding another experiment's
// entries: it is said only against an entry of the same signature, and a program whose signature
// no entry of its name shares is called new. Entries this process compiled are left out: they
// are other programs of this run (a model's initializers, one program per shape, share a name),
// so a cold start says nothing about them.
func (c *Cache) explainMiss(name, key string, p Parts, sig string) {
	if name == "" {
		return
	}
	c.mu.Lock()
	seen := c.said["miss "+name]
	c.mu.Unlock()
	if seen {
		return
	}
	defer c.spent(&c.costs.Explain, time.Now())
	entries, _, err := scan(c.dir)
	if err != nil {
		return
	}
	c.mu.Lock()
	mine := maps.Clone(c.mine)
	c.mu.Unlock()
	var best *missCandidate
	named := 0
	for _, e := range entries {
		if e.Key == key || mine[e.Key] {
			continue
		}
		m, err := readMeta(filepath.Join(c.dir, e.File))
		if err != nil || m.Program != name {
			continue
		}
		d := p.diff(m.Parts)
		if len(d) == 0 {
			continue
		}
		named++
		cand := &missCandidate{key: m.Key, moved: d, same: sig != "" && m.Signature == sig}
		if best == nil || cand.nearer(best) {
			best = cand
		}
	}
	if best == nil {
		return
	}
	of := fmt.Sprintf("nearest of %d entries named %s: %.12s", named, name, best.key)
	if named == 1 {
		of = fmt.Sprintf("the entry named %s: %.12s", name, best.key)
	}
	var msg string
	switch {
	case len(best.moved) == 1 && best.moved[0] == "program changed" && !best.same:
		msg = fmt.Sprintf("a new program (graph %s: no entry of that name has its inputs and outputs; another experiment or another shape; %s)", name, of)
	default:
		for i, d := range best.moved {
			if d == "program changed" {
				best.moved[i] = "program changed (graph " + name + ", same inputs and outputs: a constant, an op or a hook's code differs)"
				if !best.same {
					best.moved[i] = "program changed (graph " + name + ", other inputs or outputs)"
				}
			}
		}
		msg = strings.Join(best.moved, ", ") + " (against " + of + ")"
	}
	c.say("miss "+name, fmt.Sprintf("miss for %s: %s", name, msg))
}

// missCandidate is an entry of the missed program's name, as a miss explanation compares it.
type missCandidate struct {
	key   string
	moved []string // the parts that differ, in diff's words
	same  bool     // the same signature as the missed program
}

// nearer orders candidates: fewer parts moved, then the same signature, then the smaller key.
func (m *missCandidate) nearer(o *missCandidate) bool {
	if len(m.moved) != len(o.moved) {
		return len(m.moved) < len(o.moved)
	}
	if m.same != o.same {
		return m.same
	}
	return m.key < o.key
}

// Entry is one entry file as `nitro cache ls` shows it.
type Entry struct {
	File    string
	Key     string
	Size    int64
	Used    time.Time // last hit or write (the file's modification time)
	Program string    // from the entry's metadata; empty when unreadable
}

// scan lists the folder's entries (temporary files and other files left out) and their total size.
func scan(dir string) ([]Entry, int64, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, err
	}
	var out []Entry
	var total int64
	for _, de := range des {
		n := de.Name()
		if !strings.HasSuffix(n, EntryExt) || tensorfile.IsTemp(n) || !de.Type().IsRegular() {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue
		}
		out = append(out, Entry{File: n, Key: strings.TrimSuffix(n, EntryExt), Size: info.Size(), Used: info.ModTime()})
		total += info.Size()
	}
	return out, total, nil
}

func readMeta(path string) (Meta, error) {
	f, err := os.Open(path)
	if err != nil {
		return Meta{}, err
	}
	defer f.Close()
	head := make([]byte, 64<<10)
	n, _ := io.ReadFull(f, head)
	m, _, err := decodeMeta(head[:n])
	return m, err
}

// List returns the folder's entries, most recently used first, and their total size.
func List(dir string) ([]Entry, int64, error) {
	entries, total, err := scan(dir)
	if err != nil {
		return nil, 0, err
	}
	for i := range entries {
		if m, err := readMeta(filepath.Join(dir, entries[i].File)); err == nil {
			entries[i].Program = m.Program
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Used.After(entries[j].Used) })
	return entries, total, nil
}

// Size is the folder's total entry size and count; an absent folder is empty.
func Size(dir string) (bytes int64, count int, err error) {
	entries, total, err := scan(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	return total, len(entries), err
}

// Problem is an entry Verify refused, and why.
type Problem struct {
	File string
	Why  string
}

// Verify reads every entry whole (checksum, length, key) without loading it; it deletes the
// entries it refuses when remove is set. It cannot tell whether the plugin would load an
// executable: a refused one is dropped at its next use.
func Verify(dir string, remove bool) (ok int, bad []Problem, err error) {
	entries, _, err := scan(dir)
	if err != nil {
		return 0, nil, err
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.File)
		data, err := os.ReadFile(path)
		if err == nil {
			_, _, err = decodeEntry(data, e.Key)
		}
		if err != nil {
			bad = append(bad, Problem{File: e.File, Why: err.Error()})
			if remove {
				_ = os.Remove(path)
			}
			continue
		}
		ok++
	}
	return ok, bad, nil
}

// Clear deletes every entry, the remembered plugin sums and any temporary file left by a crash;
// other files in the folder are left alone.
func Clear(dir string) (removed int, bytes int64, err error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	for _, de := range des {
		n := de.Name()
		ours := strings.HasSuffix(n, EntryExt) || tensorfile.IsTemp(n) || (strings.HasPrefix(n, "plugin-") && strings.HasSuffix(n, ".sha256"))
		if !ours || !de.Type().IsRegular() {
			continue
		}
		info, ierr := de.Info()
		if rerr := os.Remove(filepath.Join(dir, n)); rerr != nil {
			return removed, bytes, rerr
		}
		if strings.HasSuffix(n, EntryExt) {
			removed++
			if ierr == nil {
				bytes += info.Size()
			}
		}
	}
	return removed, bytes, nil
}

// FormatSize prints a byte count for reports ("12.3 MB").
func FormatSize(n int64) string {
	switch {
	case n >= 1<<30:
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', 1, 64) + " GB"
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MB"
	case n >= 1<<10:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + " KB"
	}
	return strconv.FormatInt(n, 10) + " B"
}
