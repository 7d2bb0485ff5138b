package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// Checkpointer is the seam core composes: save a record, load one, find the newest.
// A nil Checkpointer disables checkpointing.
type Checkpointer interface {
	// Save writes r and applies the retention policy; it returns where r went.
	Save(r *Record) (path string, err error)
	// Load reads a record Save returned the path of.
	Load(path string) (*Record, error)
	// Latest is the newest saved record's path; ok is false when there is none.
	Latest() (path string, ok bool, err error)
}

// Ranker is implemented by a Checkpointer that ranks checkpoints by a metric (TopK): the
// caller checks before training that the metric exists, and validates its value each epoch.
type Ranker interface {
	// Metric is the name of the metric ranked by; Mode is "min" or "max".
	Metric() string
	Mode() string
}

// Adopter is implemented by a Checkpointer whose directory and filename may be left to the run
// (TopK, EveryN): Adopt fills in what the constructor left unset, as a run adopts its run dir.
type Adopter interface {
	Adopt(dir string, name NameFunc)
}

var (
	_ Checkpointer = (*TopK)(nil)
	_ Checkpointer = (*EveryN)(nil)
	_ Checkpointer = (*Memory)(nil)
	_ Ranker       = (*TopK)(nil)
	_ Adopter      = (*TopK)(nil)
	_ Adopter      = (*EveryN)(nil)
)

// ErrNotRotated is wrapped by a Save error that comes after the new checkpoint and the
// manifest are durable: only the removal of a displaced file failed. Save then returns the
// path too, and the next Save retries the removal.
var ErrNotRotated = errors.New("displaced checkpoint not removed")

// store is the file-backed part TopK and EveryN share: the directory, the filename, the
// manifest and the durable write; keep is the retention policy.
type store struct {
	mu      sync.Mutex
	dir     string
	name    NameFunc
	o       options
	cleaned bool // temporary leftovers removed
}

func newStore(dir string, name NameFunc, opts []Option) store {
	return store{dir: dir, name: name, o: newOptions(opts)}
}

func (s *store) adopt(dir string, name NameFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dir == "" {
		s.dir = dir
	}
	if s.name == nil {
		s.name = name
	}
}

func (s *store) getDir() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dir
}

// save writes r under the name args give and rewrites the manifest with the entries keep
// retains (all holds the old entries then the new one, oldest first), then removes the others.
// The phases run in the order a crash anywhere leaves the directory recoverable: the intent
// manifest before the record, the final manifest before any removal.
func (s *store) save(r *Record, args NameArgs, keep func(all []ManifestEntry) []bool) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	base, err := s.fileFor(r, args)
	if err != nil {
		return "", err
	}
	path := filepath.Join(s.dir, base)
	if err := s.prepareDir(path); err != nil {
		return "", err
	}
	old, err := readManifest(s.o.fs, s.dir)
	if err != nil {
		return "", fmt.Errorf("checkpoint: save %s: %w", path, err)
	}
	pending, err := s.writeIntent(old, base, path)
	if err != nil {
		return "", err
	}
	if err := writeRecord(s.o.fs, s.o.retry, path, r); err != nil {
		return "", err
	}
	final, displaced, err := s.writeFinal(old, pending, newEntry(r, base, args), keep, path)
	if err != nil {
		return "", err
	}
	// Only now, with the new file and the manifest durable, remove the displaced files.
	return path, s.rotate(final, pending, displaced, path)
}

// fileFor checks r and the store before anything on disk changes, and names r's file.
func (s *store) fileFor(r *Record, args NameArgs) (base string, err error) {
	if r == nil {
		return "", errors.New("checkpoint: Save of a nil record")
	}
	if r.Epoch < 0 || r.Step < 0 {
		return "", fmt.Errorf("checkpoint: epoch %d, step %d: negative", r.Epoch, r.Step)
	}
	if f, msg := outOfBounds(r.Epoch, r.Step, r.Position); f != "" { // before the manifest changes
		return "", fmt.Errorf("checkpoint: record %s: %s", f, msg)
	}
	if s.dir == "" {
		return "", errors.New("checkpoint: no directory: pass one or adopt the run directory")
	}
	name := s.name
	if name == nil {
		name = Filename
	}
	base = name(args)
	if err := validBase(base); err != nil {
		return "", err
	}
	return base, nil
}

// prepareDir creates the directory and, on the store's first save, removes crashed writes'
// temporary leftovers.
func (s *store) prepareDir(path string) error {
	fsys, dir := s.o.fs, s.dir
	if err := s.o.retry.do(func() error { return fsys.MkdirAll(dir) }); err != nil {
		return fmt.Errorf("checkpoint: save %s: create directory: %w", path, err)
	}
	if !s.cleaned {
		if names, err := fsys.ReadDir(dir); err == nil {
			for _, n := range names {
				if IsTemp(n) {
					fsys.Remove(filepath.Join(dir, n)) // a crashed write's leftover; best effort
				}
			}
			s.cleaned = true
		}
	}
	return nil
}

// writeIntent retries the removals an earlier save left pending and writes the intent
// manifest, which lists base as displaced; it returns the removals still pending.
func (s *store) writeIntent(old *manifest, base, path string) (pending []string, err error) {
	listed := map[string]bool{}
	for _, e := range old.Checkpoints {
		listed[e.File] = true
	}
	// Removals pending from an earlier save come first; then base is recorded as displaced
	// before it is written, so that a crash before the final manifest leaves no unlisted
	// file that nothing would remove. An overwrite of a listed name is unlisted meanwhile:
	// after a crash the file may hold the old record or the new one, and neither matches
	// the entry for sure (the name rounds the score and omits the stop reason), so it goes.
	for _, f := range old.Displaced {
		switch {
		case listed[f], f == base:
		case s.remove(filepath.Join(s.dir, f)) != nil:
			pending = append(pending, f)
		}
	}
	intent := &manifest{Displaced: append(slices.Clone(pending), base)}
	for _, e := range old.Checkpoints {
		if e.File != base {
			intent.Checkpoints = append(intent.Checkpoints, e)
		}
	}
	if err := writeManifest(s.o.fs, s.o.retry, s.dir, intent); err != nil {
		return nil, fmt.Errorf("checkpoint: save %s: %w", path, err)
	}
	return pending, nil
}

// newEntry is the manifest's line for r, written as base.
func newEntry(r *Record, base string, args NameArgs) ManifestEntry {
	entry := ManifestEntry{File: base, Epoch: r.Epoch, Step: r.Step, StopReason: r.StopReason}
	if args.Scored {
		entry.Metric, entry.Score = args.Metric, &args.Score
	}
	return entry
}

// writeFinal writes the manifest that lists entry and what keep retains of the old entries,
// the rest displaced (after those still pending), and returns it and the newly displaced files.
func (s *store) writeFinal(old *manifest, pending []string, entry ManifestEntry, keep func(all []ManifestEntry) []bool, path string) (final *manifest, displaced []string, err error) {
	all := make([]ManifestEntry, 0, len(old.Checkpoints)+1)
	for _, e := range old.Checkpoints {
		if e.File == entry.File { // the same name again: the new file replaced it
			continue
		}
		all = append(all, e)
	}
	all = append(all, entry)
	kept := keep(all)
	kept[len(all)-1] = true // never rotate out the newest
	next := &manifest{Displaced: pending}
	for i, e := range all {
		if kept[i] {
			next.Checkpoints = append(next.Checkpoints, e)
		} else {
			displaced = append(displaced, e.File)
		}
	}
	next.Displaced = append(next.Displaced, displaced...)
	if err := writeManifest(s.o.fs, s.o.retry, s.dir, next); err != nil {
		// The record stays for now: the failed write may have renamed the new manifest into
		// place before its directory fsync failed, and then it lists the record; otherwise
		// the intent manifest has it displaced and the next Save removes it.
		return nil, nil, fmt.Errorf("checkpoint: save %s: the record was written but the manifest was not: %w", path, err)
	}
	return next, displaced, nil
}

// rotate removes the displaced files (save calls it once the final manifest is durable), then
// rewrites that manifest naming only the removals still pending, so that the last save of a
// run leaves no entry for a file already gone. A failed removal wraps ErrNotRotated; the
// manifest still lists it displaced, so the next save retries.
func (s *store) rotate(final *manifest, pending, displaced []string, path string) error {
	var errs []error
	for _, f := range displaced {
		if err := s.remove(filepath.Join(s.dir, f)); err != nil {
			errs = append(errs, err)
			pending = append(pending, f)
		}
	}
	if len(displaced) > len(errs) {
		// The removals are durable before the manifest stops naming them: a crash in between
		// leaves names of files already gone, which the next open removes again as a no-op.
		s.o.fs.SyncDir(s.dir)
		// Best effort: if this write fails, the final manifest stays, which is still correct.
		writeManifest(s.o.fs, s.o.retry, s.dir, &manifest{Checkpoints: final.Checkpoints, Displaced: pending})
	}
	if len(errs) > 0 {
		return fmt.Errorf("checkpoint: saved %s: %w: %w", path, ErrNotRotated, errors.Join(errs...))
	}
	return nil
}

// remove deletes one file with retries; a file already gone counts as removed.
func (s *store) remove(path string) error {
	err := s.o.retry.do(func() error { return s.o.fs.Remove(path) })
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("checkpoint: remove %s: %w", path, err)
	}
	return nil
}

func (s *store) load(path string) (*Record, error) {
	if dir := s.getDir(); dir != "" && filepath.Clean(filepath.Dir(path)) == filepath.Clean(dir) {
		s.finishRotation()
	}
	return readRecord(s.o.fs, path)
}

func (s *store) latest() (string, bool, error) {
	dir := s.getDir()
	if dir == "" {
		return "", false, errors.New("checkpoint: no directory: pass one or adopt the run directory")
	}
	s.finishRotation()
	return newest(s.o.fs, dir)
}

// finishRotation removes the displaced files a save left behind (a kill or an error came
// between its manifest and the removals) and rewrites the manifest without them, so that a run
// that never saves again (a resume of a finished run) does not keep them forever. Best effort:
// what fails stays listed as displaced for the next open or Save.
func (s *store) finishRotation() {
	s.mu.Lock()
	defer s.mu.Unlock()
	fsys, dir := s.o.fs, s.dir
	m, err := readManifest(fsys, dir)
	if err != nil || len(m.Displaced) == 0 {
		return // a malformed manifest is reported by whoever reads it for its entries
	}
	listed := map[string]bool{}
	for _, e := range m.Checkpoints {
		listed[e.File] = true
	}
	var pending []string
	for _, f := range m.Displaced {
		if !listed[f] && s.remove(filepath.Join(dir, f)) != nil {
			pending = append(pending, f)
		}
	}
	if len(pending) == len(m.Displaced) {
		return
	}
	fsys.SyncDir(dir) // before the manifest stops naming them: a crash in between only repeats this
	writeManifest(fsys, s.o.retry, dir, &manifest{Checkpoints: m.Checkpoints, Displaced: pending})
}

// NewestError is the answer when the manifest's newest checkpoint cannot be opened (deleted,
// replaced by a directory, unreadable): it names the file, what is wrong, and the older
// checkpoints the manifest lists, one of which the caller may pass by path instead. A resume
// never falls back to an older one by itself: that would silently drop the epochs after it.
type NewestError struct {
	Path    string   // the newest listed checkpoint
	Problem string   // "is missing", "is a directory", or the open error
	Older   []string // paths of the older listed checkpoints, newest first
}

func (e *NewestError) Error() string {
	msg := fmt.Sprintf("checkpoint: the newest checkpoint %s (listed in %s) %s", e.Path, filepath.Join(filepath.Dir(e.Path), ManifestName), e.Problem)
	if len(e.Older) == 0 {
		return msg + "; the manifest lists no older checkpoint"
	}
	return msg + "; the older checkpoints it lists, one of which can be given by path: " + strings.Join(e.Older, ", ")
}

// Newest is the path of the newest checkpoint dir's manifest lists, checked to be a file that
// opens; ok is false when the manifest lists none (or dir has no manifest). A newest file that
// does not open is a *NewestError.
func Newest(dir string) (path string, ok bool, err error) { return newest(OSFS{}, dir) }

func newest(fsys FS, dir string) (string, bool, error) {
	m, err := readManifest(fsys, dir)
	if err != nil {
		return "", false, err
	}
	if len(m.Checkpoints) == 0 {
		return "", false, nil
	}
	path := filepath.Join(dir, m.Checkpoints[len(m.Checkpoints)-1].File)
	rc, _, err := fsys.Open(path)
	if err == nil {
		rc.Close()
		return path, true, nil
	}
	ne := &NewestError{Path: path, Problem: "cannot be opened: " + err.Error()}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		ne.Problem = "is missing (deleted?)"
	case errors.Is(err, syscall.EISDIR):
		ne.Problem = "is a directory, not a checkpoint file"
	}
	for i := len(m.Checkpoints) - 2; i >= 0; i-- {
		e := m.Checkpoints[i]
		ne.Older = append(ne.Older, fmt.Sprintf("%s (epoch %d, step %d)", filepath.Join(dir, e.File), e.Epoch, e.Step))
	}
	return "", false, ne
}

// TopK keeps the K best checkpoints by one metric plus the newest whatever it scored: K files
// when the newest is among the best, K+1 when it is not. A record without the metric is
// unscored and kept only while it is the newest. It is safe for concurrent use.
type TopK struct {
	store
	k      int
	metric string
	max    bool
}

// NewTopK returns a TopK checkpointer writing into dir. mode is "min" or "max"; name nil uses
// Filename; dir "" is filled in later by Adopt. It touches no file until the first Save.
func NewTopK(k int, metric, mode, dir string, name NameFunc, opts ...Option) (*TopK, error) {
	if k < 0 {
		return nil, fmt.Errorf("checkpoint: top-k: k = %d, want >= 0", k)
	}
	if metric == "" {
		return nil, errors.New("checkpoint: top-k: no metric")
	}
	if mode != "min" && mode != "max" {
		return nil, fmt.Errorf("checkpoint: top-k: mode %q, want \"min\" or \"max\"", mode)
	}
	return &TopK{store: newStore(dir, name, opts), k: k, metric: metric, max: mode == "max"}, nil
}

// Adopt sets the directory and the filename function where the constructor left them unset
// (dir "", name nil); values passed to the constructor stay.
func (t *TopK) Adopt(dir string, name NameFunc) { t.adopt(dir, name) }

// Dir is the directory checkpoints go to ("" until set).
func (t *TopK) Dir() string { return t.getDir() }

// Metric is the metric checkpoints are ranked by.
func (t *TopK) Metric() string { return t.metric }

// Mode is "min" (lower scores are better) or "max".
func (t *TopK) Mode() string {
	if t.max {
		return "max"
	}
	return "min"
}

// Save writes r, named by its epoch, step and score (r.Metrics[metric]), then rotates. A
// non-finite score is refused before anything is written.
func (t *TopK) Save(r *Record) (string, error) {
	args := NameArgs{Metric: t.metric}
	if r != nil {
		args.Epoch, args.Step = r.Epoch, r.Step
		if v, ok := r.Metrics[t.metric]; ok {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return "", fmt.Errorf("checkpoint: metric %q is %v at epoch %d: a non-finite score cannot rank a checkpoint", t.metric, v, r.Epoch)
			}
			args.Score, args.Scored = v, true
		}
	}
	return t.save(r, args, t.keep)
}

// keep marks the k best scored entries (ties: the older stays) and the newest.
func (t *TopK) keep(all []ManifestEntry) []bool {
	var scored []int
	for i, e := range all {
		if e.Score != nil && e.Metric == t.metric {
			scored = append(scored, i)
		}
	}
	slices.SortStableFunc(scored, func(a, b int) int {
		x, y := *all[a].Score, *all[b].Score
		if t.max {
			x, y = y, x
		}
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	kept := make([]bool, len(all))
	for _, i := range scored[:min(t.k, len(scored))] {
		kept[i] = true
	}
	return kept
}

// Load reads and validates the record at path.
func (t *TopK) Load(path string) (*Record, error) { return t.load(path) }

// Latest is the newest checkpoint the manifest lists.
func (t *TopK) Latest() (string, bool, error) { return t.latest() }

// EveryN keeps the checkpoints of every n-th epoch (epoch % n == 0) plus the newest. Its files
// carry no metric segment. It is safe for concurrent use.
type EveryN struct {
	store
	n int
}

// NewEveryN returns an EveryN checkpointer writing into dir; name nil uses Filename.
func NewEveryN(n int, dir string, name NameFunc, opts ...Option) (*EveryN, error) {
	if n < 1 {
		return nil, fmt.Errorf("checkpoint: every-n: n = %d, want >= 1", n)
	}
	return &EveryN{store: newStore(dir, name, opts), n: n}, nil
}

// Adopt sets the directory and the filename function where the constructor left them unset.
func (e *EveryN) Adopt(dir string, name NameFunc) { e.adopt(dir, name) }

// Dir is the directory checkpoints go to ("" until set).
func (e *EveryN) Dir() string { return e.getDir() }

// Save writes r and removes the previous newest unless its epoch is a multiple of n.
func (e *EveryN) Save(r *Record) (string, error) {
	var args NameArgs
	if r != nil {
		args.Epoch, args.Step = r.Epoch, r.Step
	}
	return e.save(r, args, func(all []ManifestEntry) []bool {
		kept := make([]bool, len(all))
		for i, x := range all {
			kept[i] = x.Epoch%e.n == 0
		}
		return kept
	})
}

// Load reads and validates the record at path.
func (e *EveryN) Load(path string) (*Record, error) { return e.load(path) }

// Latest is the newest checkpoint the manifest lists.
func (e *EveryN) Latest() (string, bool, error) { return e.latest() }

// InDir is a checkpointer that keeps its files in one folder: a resume that finds nothing can
// then name the folder it looked in.
type InDir interface {
	Dir() string
}

var (
	_ InDir = (*TopK)(nil)
	_ InDir = (*EveryN)(nil)
)
