package text

import (
	"errors"
	"fmt"
	"hash/fnv"
	"iter"
	"math/bits"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"sort"
	"sync/atomic"

	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/prefetch"
)

// doc is a byte range of one blob; every window lies inside one doc.
type doc struct {
	blob   int
	off, n int64
}

// part is what one split is cut from: its docs, and the names of its files (or rows).
type part struct {
	name  string // "train", "val" or "corpus", for messages
	docs  []doc
	files []string
	of    string // what the split is drawn from, for messages
}

// Source is a prefetch.Source of byte windows: batch i is BatchSize windows of Context+1 bytes,
// served as the Tokens and Targets fields. Window j of an epoch lies at a position drawn from
// the seed, the epoch (train only) and j alone, uniformly over every position of the split where
// a whole window fits inside one file (one Parquet split's joined rows).
//
// BatchAt and Sequential may run on any number of goroutines at once; BeginEpoch and Close must
// not overlap them (the prefetch.Source contract).
type Source struct {
	c            *corpus
	name         string
	docs         []doc   // the docs that hold a window
	starts       []int64 // starts[d]: the windows in docs before d; starts[len(docs)]: all of them
	files        []string
	bytes        int64
	ctx, size, n int
	seed         uint64
	fixed        bool          // the same windows every epoch (the val split)
	key          atomic.Uint64 // the epoch's draw key
	closed       atomic.Bool
}

var (
	_ prefetch.EpochSource      = (*Source)(nil)
	_ prefetch.PartialDropper   = (*Source)(nil)
	_ prefetch.SampleOrderer    = (*Source)(nil)
	_ prefetch.SequentialSource = (*Source)(nil)
	_ prefetch.Sized            = (*Source)(nil)
)

// valEpoch is the epoch the val split's windows are drawn for, whatever the epoch.
const valEpoch = -1

// Open opens the whole corpus of cfg as one source, re-drawn each epoch. Val must be 0: Split
// holds a val split out. Close it when done.
func Open(cfg Config) (*Source, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.Val != 0 {
		return nil, fmt.Errorf("text: Config.Val %v: Open serves the whole corpus; use Split to hold out a val split, or set Val to 0", cfg.Val)
	}
	c, parts, err := load(cfg)
	if err != nil {
		return nil, err
	}
	parts[0].name = "corpus"
	s, err := newSource(c, parts[0], cfg, cfg.BatchesPerEpoch, false)
	if err != nil {
		c.users++ // newSource did not count itself; close the corpus
		_ = c.done()
		return nil, err
	}
	return s, nil
}

// Split opens the corpus of cfg as prefetch.Data: "train", re-drawn each epoch
// (BatchesPerEpoch batches), and, when Val > 0, "val", held out by file (a folder), by row (a
// Parquet column) or as the tail (a single file), with the same windows every epoch (ValBatches
// batches). No byte of val is in train. The sources share the open files: Close each (CloseAll).
func Split(cfg Config) (prefetch.Data, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	c, parts, err := load(cfg)
	if err != nil {
		return nil, err
	}
	c.users++ // held while the sources are built
	defer c.done()
	data := prefetch.Data{}
	train, err := newSource(c, parts[0], cfg, cfg.BatchesPerEpoch, false)
	if err != nil {
		return nil, err
	}
	data["train"] = train
	if cfg.Val > 0 {
		val, err := newSource(c, parts[1], cfg, cfg.ValBatches, true)
		if err != nil {
			train.Close()
			return nil, err
		}
		data["val"] = val
	}
	return data, nil
}

// CloseAll closes every source of data that has a Close method, looking through prefetch
// declarations (Prefetch, NoPrefetch), and returns the errors joined. Call it on what Split
// returned: a dist.Shard of a source hides its Close.
func CloseAll(data prefetch.Data) error {
	var errs []error
	for _, src := range data {
		for src != nil {
			if c, ok := src.(interface{ Close() error }); ok {
				errs = append(errs, c.Close())
				break
			}
			inner, ok := src.(interface{ Source() prefetch.Source })
			if !ok {
				break
			}
			src = inner.Source()
		}
	}
	return errors.Join(errs...)
}

// load opens cfg's corpus and cuts it into a train part and, when Val > 0, a val part.
func load(cfg Config) (*corpus, []part, error) {
	if cfg.Column != "" {
		return loadParquet(cfg)
	}
	blobs, single, err := walk(cfg.Path, cfg.Extensions, "Config.Extensions")
	if err != nil {
		return nil, nil, err
	}
	c := newCorpus(blobs, cfg.MaxMapped)
	of := fmt.Sprintf("the %d files of %s (a folder is split by a hash of each file's path)", len(blobs), cfg.Path)
	if single {
		of = fmt.Sprintf("the file %s (split into head and tail)", cfg.Path)
	}
	train, val := part{name: "train", of: of}, part{name: "val", of: of}
	if single && cfg.Val > 0 {
		// One file: val is its tail.
		b := blobs[0]
		cut := b.size - int64(float64(b.size)*cfg.Val)
		train.docs, train.files = []doc{{0, 0, cut}}, []string{b.rel}
		val.docs, val.files = []doc{{0, cut, b.size - cut}}, []string{b.rel}
		return c, []part{train, val}, nil
	}
	for k, b := range blobs {
		p := &train
		if cfg.Val > 0 && heldOut([]byte(b.rel), cfg.Val) {
			p = &val
		}
		p.docs = append(p.docs, doc{k, 0, b.size})
		p.files = append(p.files, b.rel)
	}
	return c, []part{train, val}, nil
}

// heldOut says whether a file's path (or a row's text) goes to the val split: its 64-bit FNV-1a
// hash, as a fraction of 2^64, is below val. Stable across runs, machines and corpus changes.
func heldOut(key []byte, val float64) bool {
	h := fnv.New64a()
	h.Write(key)
	return float64(h.Sum64()>>11)/(1<<53) < val
}

// newSource builds a split's source over part p of c, counting itself as a user of c.
func newSource(c *corpus, p part, cfg Config, count int, fixed bool) (*Source, error) {
	if len(p.files) == 0 {
		if p.name == "val" {
			return nil, fmt.Errorf("text: Config.Val %v held out none of %s: raise Val, or add text", cfg.Val, p.of)
		}
		return nil, fmt.Errorf("text: Config.Val %v held out all of %s, leaving train nothing: lower Val, or add text", cfg.Val, p.of)
	}
	window := int64(cfg.Context) + 1
	s := &Source{c: c, name: p.name, files: p.files, ctx: cfg.Context, size: cfg.BatchSize, seed: cfg.Seed, fixed: fixed}
	longest := doc{blob: -1}
	var total int64
	for _, d := range p.docs {
		if d.n > longest.n || longest.blob < 0 {
			longest = d
		}
		if d.n < window {
			continue
		}
		s.starts = append(s.starts, total)
		s.docs = append(s.docs, d)
		s.bytes += d.n
		total += d.n - window + 1
	}
	s.starts = append(s.starts, total)
	if len(s.docs) == 0 {
		fix := "lower Context, or add longer text"
		if p.name == "val" {
			fix += ", or raise Val"
		}
		return nil, fmt.Errorf("text: Config.Context %d: no file of the %s split (of %s) holds a window of %d bytes; the longest, %s, has %d: %s",
			cfg.Context, p.name, p.of, window, c.blobs[longest.blob].rel, longest.n, fix)
	}
	s.n = count
	if s.n == 0 {
		s.n = int(min(max(1, s.bytes/int64(s.size*s.ctx)), maxWindows/int64(s.size)))
	}
	if fixed {
		s.key.Store(epochKey(s.seed, valEpoch))
	} else {
		s.key.Store(epochKey(s.seed, 0))
	}
	c.use()
	return s, nil
}

// epochKey is the draw key of one epoch.
func epochKey(seed uint64, epoch int) uint64 {
	return rand.NewPCG(seed, uint64(epoch)).Uint64()
}

// locate is window j of the epoch with draw key key: its doc and its offset in its blob. The
// position is uniform over the split's windows, a pure function of key and j.
func (s *Source) locate(key uint64, j int) (doc, int64) {
	var p rand.PCG
	p.Seed(key, uint64(j))
	u, _ := bits.Mul64(p.Uint64(), uint64(s.starts[len(s.docs)]))
	w := int64(u)
	d := sort.Search(len(s.docs), func(k int) bool { return s.starts[k+1] > w })
	return s.docs[d], s.docs[d].off + w - s.starts[d]
}

// Len is the batches per epoch: BatchesPerEpoch (ValBatches for val), or the split's bytes over
// BatchSize*Context.
func (s *Source) Len() int { return s.n }

// DropsPartial is true: every batch is full.
func (s *Source) DropsPartial() bool { return true }

// Samples is the windows an epoch serves, Len batches of BatchSize: all of them in whole
// batches, so an evaluation over the split leaves none out (prefetch.Sized).
func (s *Source) Samples() int { return s.n * s.size }

// SampleOrdered is true: window j of an epoch does not depend on the batch size.
func (s *Source) SampleOrdered() bool { return true }

// Context is the tokens per window.
func (s *Source) Context() int { return s.ctx }

// BatchSize is the windows per batch.
func (s *Source) BatchSize() int { return s.size }

// Bytes is the size of the text windows are drawn from (files too short for a window left out).
func (s *Source) Bytes() int64 { return s.bytes }

// Windows is the number of distinct window positions in the split.
func (s *Source) Windows() int64 { return s.starts[len(s.docs)] }

// Files names the files of the split, relative to Config.Path (slash-separated), including
// those too short for a window; for Parquet, the spill of the split's rows.
func (s *Source) Files() []string { return slices.Clone(s.files) }

// BeginEpoch draws the epoch's window positions from the seed and the epoch: a pure function
// of both, so a resumed run replays an epoch exactly. The val split keeps its windows.
func (s *Source) BeginEpoch(epoch int) error {
	if epoch < 0 {
		return fmt.Errorf("text: BeginEpoch(%d): epochs count from 0", epoch)
	}
	if !s.fixed {
		s.key.Store(epochKey(s.seed, epoch))
	}
	return nil
}

// BatchAt builds batch i: windows i*BatchSize to (i+1)*BatchSize-1 of the epoch, as fresh
// [BatchSize, Context] int32 tensors Tokens and Targets.
func (s *Source) BatchAt(i int) (prefetch.Batch, error) {
	if i < 0 || i >= s.n {
		return nil, fmt.Errorf("text: %s: batch index %d out of range [0, %d)", s.name, i, s.n)
	}
	return s.windows(s.key.Load(), i*s.size)
}

// Sequential walks the epoch's batches in order, by a running window offset, for
// prefetch.CheckBatchAt.
func (s *Source) Sequential() iter.Seq2[prefetch.Batch, error] {
	return func(yield func(prefetch.Batch, error) bool) {
		key := s.key.Load()
		for first := 0; first < s.n*s.size; {
			b, err := s.windows(key, first)
			if !yield(b, err) || err != nil {
				return
			}
			first += b[Tokens].Shape().Dimensions[0]
		}
	}
}

// windows builds a batch of the windows first to first+BatchSize-1 drawn with key.
func (s *Source) windows(key uint64, first int) (prefetch.Batch, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	tokens := tensors.FromShape(shapes.Make(dtypes.Int32, s.size, s.ctx))
	targets := tensors.FromShape(shapes.Make(dtypes.Int32, s.size, s.ctx))
	var readErr, innerErr error
	err := tensors.MutableFlatData(tokens, func(tok []int32) {
		innerErr = tensors.MutableFlatData(targets, func(tgt []int32) {
			for r := range s.size {
				d, off := s.locate(key, first+r)
				if err := s.read(d.blob, off, tok[r*s.ctx:(r+1)*s.ctx], tgt[r*s.ctx:(r+1)*s.ctx]); err != nil {
					readErr = fmt.Errorf("%w (window %d)", err, first+r)
					return
				}
			}
		})
	})
	if err = errors.Join(err, innerErr, readErr); err != nil {
		return nil, err
	}
	return prefetch.Batch{Tokens: tokens, Targets: targets}, nil
}

// read copies the window of blob b at off into tok (its first Context bytes) and tgt (its last
// Context bytes). A fault reading the mapping (the file shrank under it) is an error.
func (s *Source) read(b int, off int64, tok, tgt []int32) (err error) {
	data, err := s.c.acquire(b)
	if err != nil {
		return err
	}
	defer s.c.release(b)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("text: %s: reading bytes %d to %d failed (did the file change while in use?): %v", s.c.blobs[b].path, off, off+int64(s.ctx), r)
		}
	}()
	w := data[off : off+int64(s.ctx)+1]
	tok, tgt = tok[:len(w)-1], tgt[:len(w)-1]
	for t := range tok {
		tok[t], tgt[t] = int32(w[t]), int32(w[t+1])
	}
	return nil
}

// Close releases the source; the files close with the last source of a corpus. BatchAt fails
// after Close. Closing twice is harmless.
func (s *Source) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.c.done()
}
